# file: jsonl_lenient.py
"""A variant with a known bug, declared while it is being fixed; no restart, no faults."""

from jsonl_owner import NEVER_SEEN, JsonlOwner, store_errors

from toolswap.testing import Capability, OwnerHarness


class LenientJsonlOwner(JsonlOwner):
    def remove(self, transaction_id):  # the bug: "nothing to remove" leaves no tombstone
        with self._locked("removing") as (file, rows, end):
            if rows.get(transaction_id, NEVER_SEEN)[0] == "published":
                with store_errors("removing"):
                    self._write(file, end, {"txn": transaction_id, "kind": "tombstone"})


class LenientHarness(OwnerHarness):
    unsupported = {
        Capability.RESTART: "a file has nothing to restart beyond its handles",
        Capability.FAULTS: "this variant has no fault hook",
    }
    known_failures = {  # one bug breaks eight checks; each is listed with the bug
        check_id: "bug 7: remove of a never-seen id writes no tombstone"
        for check_id in (
            "O2.rejected-writes-nothing",
            "O2.rejection-leaves-nothing-in-flight",
            "O3.tombstone-keyed-by-exact-id",
            "O4.remove-never-seen-tombstones",
            "O6.seal-refuses-sealed",
            "GEN.changes-on-remove",
            "GEN.many-ids-back-to-back",
            "MODEL.owner-machine",
        )
    }

    def open_owner(self):
        return LenientJsonlOwner(self.workdir)
