# file: jsonl_harness.py
"""The conformance harness of jsonl_owner: one store per work folder, every capability."""

import errno
import os

from jsonl_owner import JsonlOwner

from toolswap.testing import OwnerHarness, StoreFault
from toolswap.testing.faults import FaultPlan

ERRNO = {StoreFault.FAIL: errno.EIO, StoreFault.TIMEOUT: errno.ETIMEDOUT}
TORN = b'{"txn": "kit-torn", "kind": publi\n'  # a whole line no JSON parser takes


class FaultyJsonlOwner(JsonlOwner):
    """The adapter unchanged, with the kit's fault plan under its store calls.

    Each read, write and unlock asks the plan first: fail before the call is made,
    lose the answer after it was made, or (a read) return data that does not parse.
    """

    def __init__(self, folder):
        super().__init__(folder)
        self.plan = FaultPlan()

    def _call(self, call, reads=False, completes=False):
        step = self.plan.step(reads=reads, completes=completes)  # sleeps for a DELAY
        if step.fails:
            raise OSError(ERRNO[step.fault], f"injected {step.fault}")
        result = call()
        if step.lost_ack:
            raise OSError(errno.EIO, "injected lost_ack")
        return result + TORN if step.corrupt else result

    def _read(self, file):
        read = super()._read
        return self._call(lambda: read(file), reads=True)

    def _write(self, file, end, record):
        write = super()._write
        self._call(lambda: write(file, end, record))

    def _unlock(self, file):
        unlock = super()._unlock
        self._call(lambda: unlock(file), completes=True)


class JsonlHarness(OwnerHarness):
    shared_handles = True  # every call opens its own file: threads may share a handle

    def open_owner(self):
        return FaultyJsonlOwner(self.workdir)

    def restart_store(self):
        # Every handle is closed, so no lock or cache is left.  Leave what a writer
        # killed mid-append leaves behind: half a line, which the store must ignore.
        with open(os.path.join(self.workdir, "references.jsonl"), "ab") as file:
            file.write(b'{"txn": "kit-torn", "kind": "publi')

    def restart_after_power_cut(self):
        pass  # one file in the work folder: the next handle reads what survived the cut

    def fault_plan(self, owner):
        return owner.plan

    def inject_fault(self, owner, fault):
        owner.plan.arm(fault)

    def advance_clock(self, seconds):
        pass  # nothing in the file or the adapter reads a clock

    def secrets(self):
        return (self.workdir,)
