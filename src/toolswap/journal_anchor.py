"""The journal anchor: a session that has had a lease journal remembers it, durably.

Without it, missing evidence reads as "no leases": empty the journal (``: >``)
or delete it, and a fresh process sees a session that never had a lease, so
cleanup deletes every leased artifact.  The anchor is the session's memory
that a journal existed and how many records were once verified in it.

Rules
=====

* The anchor lives in ``<session>/.journal-anchor``: one decimal number per
  line, appended in increasing order, each line ending in ``\\n`` -- a lower
  bound on the number of records the journal holds.  The last complete line
  counts; a torn last line never reached its fsync and is ignored.
* It is created (``1``) right after the journal's first record is durable,
  by the first append of each journal object that finds it missing, so the
  O(1) append path pays for it once per object, not per record.
* Cleanup raises it to the verified record count under the session lock,
  before it deletes anything (one append and fsync per cleanup).
* A journal that is missing, or holds fewer records than the anchor says,
  is corruption (:class:`~toolswap.journal_format.JournalCorruptError`):
  every reader refuses, and cleanup deletes nothing.  A person who knows the
  leases are settled may remove the anchor; toolswap never does.
* Anything in the anchor that is not a number line is corruption too: fail
  closed rather than guess a smaller bound.

What it cannot do: someone who can write the session may delete the anchor
with the journal (see the threat model in ``docs/design.md`` section 5).
"""

from __future__ import annotations

import os

from .errors import CorruptStateError, EnvironmentFailure
from .fs import FileSystem
from .session import SessionPaths

__all__ = ["ANCHOR_NAME", "JournalAnchor"]

ANCHOR_NAME = ".journal-anchor"
_TAIL_BYTES = 64


class JournalAnchor:
    """Read and raise one session's anchor; writers hold the session lock."""

    def __init__(self, paths: SessionPaths, fs: FileSystem) -> None:
        self._path = os.path.join(paths.root, ANCHOR_NAME)
        self._root = paths.root
        self._fs = fs

    def expected(self) -> int:
        """The record count the journal is known to have had (0: no anchor)."""
        fs = self._fs
        try:
            handle = fs.open_read(self._path)
        except FileNotFoundError:
            return 0
        except OSError as exc:
            raise EnvironmentFailure(
                f"cannot read {ANCHOR_NAME}: {exc.strerror or type(exc).__name__}"
            ) from exc
        try:
            return self._last(handle)
        except OSError as exc:
            raise EnvironmentFailure(
                f"cannot read {ANCHOR_NAME}: {exc.strerror or type(exc).__name__}"
            ) from exc
        finally:
            fs.close(handle)

    def raise_to(self, records: int) -> None:
        """Durably record that the journal holds at least ``records`` records."""
        fs = self._fs
        try:
            created = False
            try:
                fs.lstat(self._path)
            except FileNotFoundError:
                created = True
            handle = fs.open_append(self._path, 0o600)
            try:
                last, complete_end, size = self._read(handle)
                if last >= records:
                    return
                if complete_end < size:  # a torn line never reached its fsync: cut it
                    fs.ftruncate(handle, complete_end)
                fs.write(handle, b"%d\n" % records)
                fs.fsync(handle)
            finally:
                fs.close(handle)
            if created:
                fs.fsync_dir(self._root)
        except OSError as exc:
            raise EnvironmentFailure(
                f"cannot write {ANCHOR_NAME}: {exc.strerror or type(exc).__name__}"
            ) from exc

    def _last(self, handle: int) -> int:
        return self._read(handle)[0]

    def _read(self, handle: int) -> tuple[int, int, int]:
        """(last complete number, end of the last complete line, file size)."""
        fs = self._fs
        size = fs.fstat(handle).size
        start = max(0, size - _TAIL_BYTES)
        tail = fs.pread(handle, size - start, start)
        complete_end = tail.rfind(b"\n") + 1
        lines = tail[:complete_end].split(b"\n")[:-1]
        if start > 0 and len(lines) < 2:
            raise CorruptStateError(f"{ANCHOR_NAME}: last line is too long")
        if not lines:
            return 0, start + complete_end, size
        line = lines[-1]
        if not line.isdigit() or line.startswith(b"0"):
            raise CorruptStateError(f"{ANCHOR_NAME}: last line {line[:20]!r} is not a number")
        return int(line), start + complete_end, size
