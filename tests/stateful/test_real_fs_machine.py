"""The same rules on the real OS file system (no crashes): the seams must agree.

A fresh temporary session folder per run.  Time: the injected clock starts at
the wall clock and only moves by ``advance_clock``; file timestamps are the
kernel's, so ages (clock minus mtime) may be slightly negative at first --
the spec and the implementation get the same numbers, so they must agree.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from typing import Any

from hypothesis import settings
from toolswap.faultinject.protocol_machine import MACHINE_EXAMPLES, OUTSIDE_BYTES, ProtocolMachine

from toolswap.fs import REAL_FS


class RealFsMachine(ProtocolMachine):
    def make_seam(self) -> tuple[Any, str]:
        self._tmp = tempfile.mkdtemp(prefix="toolswap-stateful-")
        root = os.path.join(self._tmp, "sess-1")
        os.mkdir(root, 0o700)
        return REAL_FS, root

    def start_time(self) -> float:
        return time.time()

    def make_outside(self) -> str:
        path = os.path.join(self._tmp, "outside-secret.txt")
        with open(path, "wb") as handle:
            handle.write(OUTSIDE_BYTES)
        return path

    def plant(self, path: str, kind: str) -> None:
        if kind == "symlink":
            os.symlink(self.outside, path)
        elif kind == "regular":
            with open(path, "wb") as handle:
                handle.write(b"someone else's notes\n")
        else:
            os.mkdir(path)

    def tamper_bytes(self, path: str, data: bytes) -> None:
        with open(path, "r+b") as handle:
            handle.write(data)

    def raw_bytes(self, path: str) -> bytes | None:
        try:
            with open(path, "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return None

    def teardown(self) -> None:
        shutil.rmtree(self._tmp, ignore_errors=True)


TestRealFsMachine = RealFsMachine.TestCase
# At least MACHINE_EXAMPLES examples (the ci profile's 60 leave the crash rules thin;
# the whole of tests/stateful still runs in well under a minute); deep keeps its 2000.
TestRealFsMachine.settings = settings(
    TestRealFsMachine.settings, max_examples=max(MACHINE_EXAMPLES, settings.default.max_examples)
)
