# file: jsonl_harness.py
"""The conformance harness of jsonl_owner: one store per work folder, every capability."""

import errno
import os

from jsonl_owner import JsonlOwner

from toolswap.testing import OwnerHarness, StoreFault

ERRNO = {
    StoreFault.FAIL: errno.EIO,
    StoreFault.TIMEOUT: errno.ETIMEDOUT,
    StoreFault.LOST_ACK: errno.EIO,
}


class FaultyJsonlOwner(JsonlOwner):
    """The adapter unchanged, with a fault hook under its store calls.

    FAIL and TIMEOUT stop the next store call before it is made.  LOST_ACK lets the
    operation's last store call happen (its write, else its unlock), then loses the answer.
    """

    def __init__(self, folder):
        super().__init__(folder)
        self.armed = []

    def _fire(self, before):
        if self.armed and (self.armed[0] is not StoreFault.LOST_ACK) == before:
            raise OSError(ERRNO[self.armed[0]], f"injected {self.armed.pop(0)}")

    def _read(self, file):
        self._fire(before=True)
        return super()._read(file)

    def _write(self, file, end, record):
        self._fire(before=True)
        super()._write(file, end, record)
        self._fire(before=False)

    def _unlock(self, file):
        super()._unlock(file)
        self._fire(before=False)


class JsonlHarness(OwnerHarness):
    def open_owner(self):
        return FaultyJsonlOwner(self.workdir)

    def restart_store(self):
        # Every handle is closed, so no lock or cache is left.  Leave what a writer
        # killed mid-append leaves behind: half a line, which the store must ignore.
        with open(os.path.join(self.workdir, "references.jsonl"), "ab") as file:
            file.write(b'{"txn": "kit-torn", "kind": "publi')

    def inject_fault(self, owner, fault):
        owner.armed.append(fault)

    def secrets(self):
        return (self.workdir,)
