"""Mutation gaps in high_water.py (issue 39, docs/mutation.md).

Claims, one per test: recording a deletion cuts a torn last line of the
deletion record (a crash inside an earlier append) before it appends, so the
new number is a line of its own; advancing the mark and recording deletions
close every handle they open; the mark a returned ``advance`` created is
durable, its directory entry included.
"""

from __future__ import annotations

import os
from pathlib import Path

from toolswap.fs import REAL_FS
from toolswap.high_water import DELETED_NAME, HIGH_WATER_NAME, ArtifactHighWaterMark
from toolswap.session import SessionPaths

from .test_mutation_gaps_journal_anchor import _CountsHandles


def test_recording_a_deletion_cuts_a_torn_line_before_appending(tmp_path: Path) -> None:
    paths = SessionPaths.at(tmp_path / "s")
    os.makedirs(paths.root)
    record = tmp_path / "s" / DELETED_NAME
    record.write_bytes(b"5\n1")  # "1" is what a crash left of an append of "17\n"
    ArtifactHighWaterMark(paths, REAL_FS).record_deletion(20)
    assert record.read_bytes() == b"5\n20\n"


def test_advancing_and_recording_deletions_close_every_handle(tmp_path: Path) -> None:
    paths = SessionPaths.at(tmp_path / "s")
    os.makedirs(paths.tool_results)
    fs = _CountsHandles()
    mark = ArtifactHighWaterMark(paths, fs)
    mark.record_deletion(3)
    mark.record_deletion(2)  # already covered: returns early
    assert mark.advance(0) == 4  # no mark yet: rebuilt from the deletion record
    assert mark.advance(0) == 5
    assert fs.open == set()


def test_a_mark_created_by_a_returned_advance_survives_a_power_cut() -> None:
    from toolswap.faultinject.disk import SimulatedDisk

    paths = SessionPaths.at("/s")
    disk = SimulatedDisk()
    disk.makedirs(paths.tool_results)
    assert ArtifactHighWaterMark(paths, disk).advance(0) == 1
    disk.crash("drop")  # only what was made durable is left
    assert disk.read_file(f"/s/{HIGH_WATER_NAME}") == b"1\n"


def test_a_deletion_record_created_by_a_returned_call_survives_a_power_cut() -> None:
    """record_deletion returns only once the number and the file's name are durable."""
    from toolswap.faultinject.disk import SimulatedDisk

    paths = SessionPaths.at("/s")
    disk = SimulatedDisk()
    disk.makedirs(paths.tool_results)
    disk.fsync_dir("/s")
    ArtifactHighWaterMark(paths, disk).record_deletion(7)
    disk.crash("drop")
    assert disk.read_file(f"/s/{DELETED_NAME}") == b"7\n"


def test_a_number_appended_to_an_existing_deletion_record_survives_a_power_cut() -> None:
    """The second number is fsynced too, not only the file's creation."""
    from toolswap.faultinject.disk import SimulatedDisk

    paths = SessionPaths.at("/s")
    disk = SimulatedDisk()
    disk.makedirs(paths.tool_results)
    disk.fsync_dir("/s")
    mark = ArtifactHighWaterMark(paths, disk)
    mark.record_deletion(7)
    mark.record_deletion(9)
    disk.crash("drop")
    assert disk.read_file(f"/s/{DELETED_NAME}") == b"7\n9\n"


def test_a_repaired_torn_mark_stays_repaired_after_a_power_cut() -> None:
    """The cut of a torn last line is fsynced: a power cut does not bring the torn line back."""
    from toolswap.faultinject.disk import SimulatedDisk

    paths = SessionPaths.at("/s")
    disk = SimulatedDisk()
    disk.makedirs(paths.tool_results)
    disk.put_file(f"/s/{HIGH_WATER_NAME}", b"3\n1")  # what a crash left of an append of "14\n"
    assert ArtifactHighWaterMark(paths, disk).advance(0) == 4
    disk.crash("drop")
    assert disk.read_file(f"/s/{HIGH_WATER_NAME}") == b"3\n4\n"
