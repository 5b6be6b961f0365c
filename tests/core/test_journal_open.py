"""Opening a journal: one verification per open, never stale; a torn tail is bounded.

Claims:

* ``ArtifactRetentionJournal(path).recover()`` reads the file once, not twice;
* a change between the constructor and that ``recover()`` (an append, an
  in-place rewrite, a replacement, a removal) is verified, never served stale;
* a final piece without a newline longer than the largest record is
  corruption (``oversized``), and reading it takes bounded memory.
"""

from __future__ import annotations

import os
import pathlib
import tracemalloc

import pytest

from toolswap.fs import OsFileSystem
from toolswap.journal import ArtifactRetentionJournal, JournalCorruptError
from toolswap.journal_format import MAX_RECORD_BYTES

from ._journal_support import make_artifact


class _CountingFs(OsFileSystem):
    """The real seam, counting the journal bytes read through it."""

    def __init__(self) -> None:
        self.read_bytes = 0
        self._journal_handles: set[int] = set()

    def open_read(self, path: str) -> int:
        handle = super().open_read(path)
        if path.endswith("retention-leases.jsonl"):
            self._journal_handles.add(handle)
        else:
            self._journal_handles.discard(handle)
        return handle

    def close(self, handle: int) -> None:
        self._journal_handles.discard(handle)  # descriptor numbers are reused
        super().close(handle)

    def pread(self, handle: int, size: int, offset: int) -> bytes:
        data = super().pread(handle, size, offset)
        if handle in self._journal_handles:
            self.read_bytes += len(data)
        return data


def _journal(tmp_path: pathlib.Path, records: int = 4) -> pathlib.Path:
    session = tmp_path / "s1"
    claim = make_artifact(session)
    journal = ArtifactRetentionJournal(session)
    for i in range(records):
        journal.prepare(claim, f"t{i}", now=1.0)
    return session


def test_open_then_recover_reads_the_journal_once(tmp_path: pathlib.Path) -> None:
    session = _journal(tmp_path)
    size = (session / "retention-leases.jsonl").stat().st_size
    fs = _CountingFs()
    recovery = ArtifactRetentionJournal(session, fs=fs).recover()
    assert recovery.record_count == 4
    assert fs.read_bytes == size


def test_a_second_recover_verifies_again(tmp_path: pathlib.Path) -> None:
    session = _journal(tmp_path)
    size = (session / "retention-leases.jsonl").stat().st_size
    fs = _CountingFs()
    journal = ArtifactRetentionJournal(session, fs=fs)
    journal.recover()
    journal.recover()
    assert fs.read_bytes == 2 * size


def test_the_benchmark_baseline_flag_verifies_twice(tmp_path: pathlib.Path) -> None:
    session = _journal(tmp_path)
    size = (session / "retention-leases.jsonl").stat().st_size

    class Twice(ArtifactRetentionJournal):
        _verify_twice_on_open = True

    fs = _CountingFs()
    Twice(session, fs=fs).recover()
    assert fs.read_bytes == 2 * size


def _rewrite_in_place(path: pathlib.Path) -> None:
    data = bytearray(path.read_bytes())
    at = data.index(b'"time":1') + len(b'"time":')
    data[at : at + 1] = b"2"  # same size, same inode, broken hash
    stat = path.stat()
    with open(path, "r+b") as handle:
        handle.write(data)
    # A later write: a timestamp that differs from the one verified.
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))


def _replace(path: pathlib.Path) -> None:
    data = path.read_bytes()
    cut = data[: data.rindex(b"\n", 0, len(data) - 1) + 1]  # one record fewer
    spare = path.with_suffix(".new")
    spare.write_bytes(cut)
    os.replace(spare, path)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda p: p.write_bytes(p.read_bytes() + b"garbage\n"), "json"),
        (_rewrite_in_place, "hash"),
        (_replace, "rewritten"),
        (lambda p: p.unlink(), "vanished"),
    ],
    ids=["appended", "rewritten_in_place", "replaced", "removed"],
)
def test_a_change_between_open_and_recover_is_verified_not_served_stale(
    tmp_path: pathlib.Path, change: object, reason: str
) -> None:
    session = _journal(tmp_path)
    journal = ArtifactRetentionJournal(session)
    change(session / "retention-leases.jsonl")  # type: ignore[operator]
    with pytest.raises(JournalCorruptError) as info:
        journal.recover()
    assert info.value.reason == reason


def test_a_valid_append_between_open_and_recover_is_seen(tmp_path: pathlib.Path) -> None:
    session = _journal(tmp_path)
    journal = ArtifactRetentionJournal(session)
    other = ArtifactRetentionJournal(session)
    other.prepare(other.recover().transactions["t0"], "late", now=1.0)
    assert "late" in journal.recover().states


# -- issue 14 item 8: the torn tail is bounded --------------------------------------


def test_a_torn_tail_longer_than_any_record_is_corruption(tmp_path: pathlib.Path) -> None:
    session = _journal(tmp_path, records=1)
    with open(session / "retention-leases.jsonl", "ab") as handle:
        handle.write(b"x" * (MAX_RECORD_BYTES + 1))
    with pytest.raises(JournalCorruptError) as info:
        ArtifactRetentionJournal(session)
    assert (info.value.line_number, info.value.reason) == (2, "oversized")


def test_a_torn_tail_of_the_largest_record_size_is_still_a_torn_tail(
    tmp_path: pathlib.Path,
) -> None:
    session = _journal(tmp_path, records=1)
    with open(session / "retention-leases.jsonl", "ab") as handle:
        handle.write(b'{"event_sha256":' + b"x" * (MAX_RECORD_BYTES - 16))
    recovery = ArtifactRetentionJournal(session).recover()
    assert recovery.torn_tail is not None and recovery.torn_tail.length == MAX_RECORD_BYTES


def test_a_huge_final_piece_is_refused_with_bounded_memory(tmp_path: pathlib.Path) -> None:
    session = _journal(tmp_path, records=1)
    piece = 32 * 1024 * 1024
    with open(session / "retention-leases.jsonl", "ab") as handle:
        handle.truncate(handle.tell() + piece)  # 32 MiB of NUL bytes, no newline
    tracemalloc.start()
    try:
        with pytest.raises(JournalCorruptError, match="oversized"):
            ArtifactRetentionJournal(session)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # One read chunk plus one record, with room: far below the piece itself.
    assert peak < 8 * 1024 * 1024, peak


def test_a_complete_line_longer_than_any_record_is_corruption(tmp_path: pathlib.Path) -> None:
    session = _journal(tmp_path, records=1)
    with open(session / "retention-leases.jsonl", "ab") as handle:
        handle.write(b"[" * (MAX_RECORD_BYTES + 1) + b"\n")
    with pytest.raises(JournalCorruptError) as info:
        ArtifactRetentionJournal(session)
    assert info.value.reason == "oversized"
