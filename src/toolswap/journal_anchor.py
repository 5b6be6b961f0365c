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
  counts; a torn last line (a prefix of a number) never reached its fsync and
  is ignored.
* It is raised on the append path, after the record is durable, to the
  journal's record count (one append and fsync of the anchor): by each
  journal object's first append, and then whenever
  :data:`RAISE_EVERY_RECORDS` records or :data:`RAISE_EVERY_SECONDS` seconds
  (of the journal's clock) have passed since that object last raised it.  So
  the records the anchor does not yet cover are fewer than
  :data:`RAISE_EVERY_RECORDS`, all appended within
  :data:`RAISE_EVERY_SECONDS` of a raise, and a publisher that appends less
  often than that leaves none; a burst pays one extra fsync per
  :data:`RAISE_EVERY_RECORDS` records.
* Cleanup raises it to the verified record count under the session lock,
  before it deletes anything (one append and fsync per cleanup).
* A raise that finds the file longer than :data:`COMPACT_AT_BYTES` writes its
  number to a new file and renames it over the anchor (fsync, rename,
  directory fsync), so the file stays small however long the session lives.
* A journal that is missing, or holds fewer records than the anchor says,
  is corruption (:class:`~toolswap.journal_format.JournalCorruptError`):
  every reader refuses, and cleanup deletes nothing.  A person who knows the
  leases are settled may remove the anchor; toolswap never does.
* The numbers only grow, and every read checks the whole file: a number
  below the one before it, a value (or a missing file) below what this
  object already read or wrote, anything that is not a number line, a file
  longer than :data:`MAX_ANCHOR_BYTES` or one with more than one hard link
  is :class:`~toolswap.errors.CorruptStateError`.  Fail closed rather than
  guess a smaller bound; nothing is repaired.

What it cannot do: someone who can write the session may delete or lower the
anchor with the journal before a fresh process reads it, and a journal cut
back by fewer records than the anchor lags behind is not noticed (see the
threat model in ``docs/design.md`` section 5).
"""

from __future__ import annotations

import os
import re

from .errors import CorruptStateError, EnvironmentFailure
from .fs import FileSystem, HardLinkedFileError, hard_link_message
from .session import SessionPaths

__all__ = [
    "ANCHOR_NAME",
    "COMPACT_AT_BYTES",
    "MAX_ANCHOR_BYTES",
    "RAISE_EVERY_RECORDS",
    "RAISE_EVERY_SECONDS",
    "JournalAnchor",
]

ANCHOR_NAME = ".journal-anchor"
_COMPACTING_NAME = ANCHOR_NAME + ".new"

#: Raise on the append path once this many records were appended since the last raise.
#: One extra fsync per 16 records keeps a burst of appends within a few per cent
#: of one append and fsync each (benchmarks/test_bench_journal.py measures it).
RAISE_EVERY_RECORDS = 16
#: ... or once this many seconds passed since the last raise: a slow publisher,
#: whose extra fsync costs nothing noticeable, leaves no record uncovered.
RAISE_EVERY_SECONDS = 2.0
#: A raise past this size rewrites the file as one line (some 150 raises apart):
#: every raise reads the whole file, so it is kept near a kilobyte.
COMPACT_AT_BYTES = 1024
#: Far above anything toolswap writes, even before compaction existed (one line
#: per cleanup): a longer file is not ours, and is not read.
MAX_ANCHOR_BYTES = 1 << 20
#: More digits than any record count can have; a longer line is not a count.
_MAX_DIGITS = 20
_NUMBER_LINES = re.compile(rb"(?:[1-9][0-9]{0,%d}\n)*" % (_MAX_DIGITS - 1))


class JournalAnchor:
    """Read and raise one session's anchor; writers hold the session lock.

    One object per journal object: it remembers the highest value it read or
    wrote, and refuses a file that shows less later.
    """

    def __init__(self, paths: SessionPaths, fs: FileSystem) -> None:
        self._path = os.path.join(paths.root, ANCHOR_NAME)
        self._compacting = os.path.join(paths.root, _COMPACTING_NAME)
        self._root = paths.root
        self._fs = fs
        self._seen = 0
        self._raised_records: int | None = None  # what this object's last raise covered
        self._raised_at: float | None = None  # and when, on the journal's clock

    def expected(self) -> int:
        """The record count the journal is known to have had (0: no anchor)."""
        fs = self._fs
        try:
            handle = fs.open_read(self._path)
        except FileNotFoundError:
            self._refuse_below_seen(0, "is gone")
            return 0
        except OSError as exc:
            raise EnvironmentFailure(
                f"cannot read {ANCHOR_NAME}: {exc.strerror or type(exc).__name__}"
            ) from exc
        try:
            return self._read(handle)[0]
        except OSError as exc:
            raise EnvironmentFailure(
                f"cannot read {ANCHOR_NAME}: {exc.strerror or type(exc).__name__}"
            ) from exc
        finally:
            fs.close(handle)

    def after_append(self, records: int, now: float) -> None:
        """The append path (under the lock): raise to ``records`` when a raise is due."""
        last_records, last_at = self._raised_records, self._raised_at
        if (
            last_records is not None
            and last_at is not None
            and records - last_records < RAISE_EVERY_RECORDS
            and 0 <= now - last_at < RAISE_EVERY_SECONDS  # a clock set back counts as due
        ):
            return
        self.raise_to(records)
        self._raised_at = now

    def raise_to(self, records: int) -> None:
        """Durably record that the journal holds at least ``records`` records."""
        fs = self._fs
        try:
            created = False
            try:
                fs.lstat(self._path)
            except FileNotFoundError:
                self._refuse_below_seen(0, "is gone")
                created = True
            try:
                handle = fs.open_append(self._path, 0o600)
            except HardLinkedFileError as exc:
                raise CorruptStateError(f"{ANCHOR_NAME} is not written: {exc.strerror}") from exc
            compact = False
            try:
                last, complete_end, size = self._read(handle)
                if last < records:
                    if complete_end > COMPACT_AT_BYTES:
                        compact = True
                    else:
                        if complete_end < size:  # a torn line never reached its fsync: cut it
                            fs.ftruncate(handle, complete_end)
                        fs.write(handle, b"%d\n" % records)
                        fs.fsync(handle)
            finally:
                fs.close(handle)
            if compact:
                self._compact(records)
            elif created:
                fs.fsync_dir(self._root)
        except OSError as exc:
            raise EnvironmentFailure(
                f"cannot write {ANCHOR_NAME}: {exc.strerror or type(exc).__name__}"
            ) from exc
        self._seen = max(self._seen, records)
        self._raised_records = records

    def _compact(self, records: int) -> None:
        """Replace the anchor by one line, atomically: the old file held only smaller numbers."""
        fs = self._fs
        try:
            handle = fs.create_exclusive(self._compacting, 0o600)
        except FileExistsError:  # left by a compaction that died before its rename
            fs.unlink(self._compacting)
            handle = fs.create_exclusive(self._compacting, 0o600)
        try:
            fs.write(handle, b"%d\n" % records)
            fs.fsync(handle)
        finally:
            fs.close(handle)
        fs.rename(self._compacting, self._path)
        fs.fsync_dir(self._root)

    def _read(self, handle: int) -> tuple[int, int, int]:
        """(last complete number, end of the last complete line, file size), every line checked."""
        fs = self._fs
        facts = fs.fstat(handle)
        if facts.nlink > 1:
            raise CorruptStateError(f"{ANCHOR_NAME} is not read: {hard_link_message(facts.nlink)}")
        if facts.size > MAX_ANCHOR_BYTES:
            raise CorruptStateError(
                f"{ANCHOR_NAME} is {facts.size} bytes, more than toolswap ever writes "
                f"({MAX_ANCHOR_BYTES}); refusing to read it"
            )
        data = b""
        while len(data) < facts.size:
            chunk = fs.pread(handle, facts.size - len(data), len(data))
            if not chunk:
                break
            data += chunk
        complete_end = data.rfind(b"\n") + 1
        torn = data[complete_end:]
        if torn and not (len(torn) <= _MAX_DIGITS and torn.isdigit() and torn[:1] != b"0"):
            raise CorruptStateError(f"{ANCHOR_NAME}: last piece {torn[:20]!r} is not a torn number")
        numbers = _numbers(data, complete_end)
        last = numbers[-1] if numbers else 0
        self._refuse_below_seen(last, f"says {last}")
        self._seen = last
        return last, complete_end, len(data)

    def _refuse_below_seen(self, value: int, what: str) -> None:
        if value < self._seen:
            raise CorruptStateError(
                f"{ANCHOR_NAME} {what}, but this journal read or wrote {self._seen} before: "
                "it was lowered (restore it; its numbers only grow)"
            )


def _numbers(data: bytes, end: int) -> list[int]:
    """The numbers of the complete lines ``data[:end]``, refused unless each is a count
    and none is below the one before it (one regular expression and one sort: every
    raise on the append path reads the whole file)."""
    if _NUMBER_LINES.fullmatch(data, 0, end):
        numbers = list(map(int, data[:end].split()))
        if numbers == sorted(numbers):
            return numbers
        for before, after in zip(numbers, numbers[1:], strict=False):
            if after < before:
                raise CorruptStateError(
                    f"{ANCHOR_NAME} went down from {before} to {after}; its numbers only grow"
                )
    for line in data[:end].split(b"\n")[:-1]:
        if not _NUMBER_LINES.fullmatch(line + b"\n"):
            raise CorruptStateError(f"{ANCHOR_NAME}: line {line[:20]!r} is not a number")
    raise AssertionError("unreachable")  # pragma: no cover
