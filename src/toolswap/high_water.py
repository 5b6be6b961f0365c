"""The artifact high-water mark: a name, once handed out, is never handed out again (S6).

Cleanup deletes artifacts, so the highest name *on disk* is not the highest
name *ever used*: numbering after the directory alone would give a deleted
artifact's name to new bytes, and a stale Memory record would then point at
content it never saw.  The mark remembers every number ever reserved.

Rules
=====

* The mark lives in ``<session>/.artifact-high-water``: one decimal number per
  line, appended in increasing order, each line ending in ``\\n``.
* Every reservation happens under the session lock (the lock cleanup apply
  holds while it deletes), so appends are strictly increasing and the last
  complete line is the maximum; only the tail is ever read.
* A number is appended and fsynced *before* the file of that name is created,
  so any name that can exist on disk after a crash is already in the mark.
* A torn last line (a crash inside the append) never reached its fsync, so
  its name was never created: it is cut off before the next append.
* Anything else that is not a number line is corruption: reservation refuses
  (fail closed) rather than guess and risk reusing a name.
"""

from __future__ import annotations

import os

from .errors import ArtifactWriteError, CorruptStateError, EnvironmentFailure
from .fs import FileSystem
from .session import SessionPaths

__all__ = ["HIGH_WATER_NAME", "ArtifactHighWaterMark"]

HIGH_WATER_NAME = ".artifact-high-water"

# Enough for the last complete line and the newline before it: numbers have
# at most a few dozen digits long before anything else breaks.
_TAIL_BYTES = 64


class ArtifactHighWaterMark:
    """Read and advance one session's mark; the caller holds the session lock."""

    def __init__(self, paths: SessionPaths, fs: FileSystem) -> None:
        self._path = os.path.join(paths.root, HIGH_WATER_NAME)
        self._root = paths.root
        self._fs = fs
        # A process killed right after creating the mark leaves its directory
        # entry in the page cache only, so each instance syncs the entry once.
        self._entry_synced = False

    def advance(self, at_least: int) -> int:
        """Durably record and return a number above the mark and above ``at_least``."""
        fs = self._fs
        try:
            facts = fs.lstat(self._path)
        except FileNotFoundError:
            facts = None
        except OSError as exc:
            raise EnvironmentFailure(f"cannot inspect {HIGH_WATER_NAME}: {exc}") from exc
        if facts is not None and (facts.is_symlink or not facts.is_regular):
            raise CorruptStateError(f"{HIGH_WATER_NAME} is not a regular file (S6, S7)")
        try:
            handle = fs.open_append(self._path, 0o600)
        except OSError as exc:
            raise EnvironmentFailure(f"cannot open {HIGH_WATER_NAME}: {exc}") from exc
        try:
            mark = self._read_and_repair(handle)
            number = max(mark, at_least) + 1
            fs.write(handle, b"%d\n" % number)
            fs.crash_point("externalize.before_high_water_fsync")
            fs.fsync(handle)
        except OSError as exc:
            raise ArtifactWriteError(f"cannot advance {HIGH_WATER_NAME}: {exc}") from exc
        finally:
            fs.close(handle)
        if not self._entry_synced:
            try:
                fs.fsync_dir(self._root)
            except OSError as exc:
                raise ArtifactWriteError(f"cannot fsync the session folder: {exc}") from exc
            self._entry_synced = True
        return number

    def _read_and_repair(self, handle: int) -> int:
        fs = self._fs
        size = fs.fstat(handle).size
        start = max(0, size - _TAIL_BYTES)
        tail = fs.pread(handle, size - start, start)
        complete_end = tail.rfind(b"\n") + 1
        lines = tail[:complete_end].split(b"\n")[:-1]
        # From mid-file the first piece may be a fragment; only whole lines count.
        if start > 0 and len(lines) < 2:
            raise CorruptStateError(f"{HIGH_WATER_NAME}: last line is too long")
        mark = 0
        if lines:
            line = lines[-1]
            if not line.isdigit() or line.startswith(b"0"):
                raise CorruptStateError(
                    f"{HIGH_WATER_NAME}: last line {line[:20]!r} is not a number"
                )
            mark = int(line)
        if complete_end < len(tail):
            # Torn append: its fsync never returned, so its name was never created.
            fs.ftruncate(handle, start + complete_end)
            fs.fsync(handle)
        return mark
