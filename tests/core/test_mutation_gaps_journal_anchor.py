"""Mutation gaps in journal_anchor.py (issue 39, docs/mutation.md).

Claims, one per test: an anchor object that has seen a count refuses when the
anchor file is then gone (on a read, not only on a raise); reading, raising
and compacting the anchor close every handle they open (a long-lived process
reads it on every append); a compaction that returned is durable (its
rename is synced into the directory); an anchor that shrank after its
``fstat`` is read up to its end, once, not re-read forever.
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs
import pytest

from toolswap.errors import CorruptStateError
from toolswap.fs import REAL_FS, FileFacts, OsFileSystem
from toolswap.journal_anchor import ANCHOR_NAME, COMPACT_AT_BYTES, JournalAnchor
from toolswap.session import SessionPaths


def _anchor(tmp_path: Path) -> tuple[SessionPaths, JournalAnchor]:
    paths = SessionPaths.at(tmp_path / "s")
    os.makedirs(paths.root)
    return paths, JournalAnchor(paths, REAL_FS)


def test_reading_an_anchor_that_is_gone_after_it_said_more_refuses(tmp_path: Path) -> None:
    paths, anchor = _anchor(tmp_path)
    anchor.raise_to(5)
    os.unlink(os.path.join(paths.root, ANCHOR_NAME))
    with pytest.raises(CorruptStateError, match="is gone, but this journal read or wrote 5"):
        anchor.expected()


class _CountsHandles(OsFileSystem):
    """The real seam, keeping the handles it opened and has not closed yet."""

    def __init__(self) -> None:
        self.open: set[int] = set()

    def _keep(self, handle: int) -> int:
        self.open.add(handle)
        return handle

    def open_read(self, path: str) -> int:
        return self._keep(super().open_read(path))

    def open_append(self, path: str, mode: int = 0o600) -> int:
        return self._keep(super().open_append(path, mode))

    def create_exclusive(self, path: str, mode: int = 0o600) -> int:
        return self._keep(super().create_exclusive(path, mode))

    def close(self, handle: int) -> None:
        self.open.discard(handle)
        super().close(handle)


def test_reading_raising_and_compacting_the_anchor_close_every_handle(tmp_path: Path) -> None:
    paths = SessionPaths.at(tmp_path / "s")
    os.makedirs(paths.root)
    fs = _CountsHandles()
    anchor = JournalAnchor(paths, fs)
    big = 10**15  # 17 bytes a line: some 60 raises pass COMPACT_AT_BYTES, and one compacts
    for records in range(big, big + COMPACT_AT_BYTES // 16):
        anchor.raise_to(records)
    anchor.expected()
    assert os.path.getsize(os.path.join(paths.root, ANCHOR_NAME)) < COMPACT_AT_BYTES
    assert fs.open == set()


def test_a_compaction_that_returned_survives_a_power_cut() -> None:
    from toolswap.faultinject.disk import SimulatedDisk

    paths = SessionPaths.at("/s")
    anchor_path = f"/s/{ANCHOR_NAME}"
    disk = SimulatedDisk()
    disk.makedirs("/s")
    disk.put_file(anchor_path, b"1\n" * (COMPACT_AT_BYTES // 2) + b"2\n")
    JournalAnchor(paths, disk).raise_to(3)
    assert disk.read_file(anchor_path) == b"3\n", "the raise compacts"
    disk.crash("drop")  # only what was made durable is left
    assert JournalAnchor(paths, disk).expected() == 3


class _ShrinksAfterFstat(OsFileSystem):
    """The real seam, whose ``fstat`` of the anchor still shows 8 bytes the file lost."""

    def __init__(self) -> None:
        self.empty_reads = 0

    def fstat(self, handle: int) -> FileFacts:
        facts = super().fstat(handle)
        return attrs.evolve(facts, size=facts.size + 8)

    def pread(self, handle: int, size: int, offset: int) -> bytes:
        chunk = super().pread(handle, size, offset)
        if not chunk:
            self.empty_reads += 1
            assert self.empty_reads == 1, "read again at the end of the file"
        return chunk


def test_an_anchor_shorter_than_its_fstat_is_read_up_to_its_end(tmp_path: Path) -> None:
    paths, anchor = _anchor(tmp_path)
    anchor.raise_to(3)
    assert JournalAnchor(paths, _ShrinksAfterFstat()).expected() == 3
