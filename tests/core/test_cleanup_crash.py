"""Cleanup crashed at every mutating I/O and every named point stays fail-closed (S1, L1).

Scenario on the simulated disk: ``tool_result_001`` is leased (PREPARED, with
an expired ``retain_until``), ``002`` and ``003`` are old orphans, ``004`` is
young.  A cleanup runs and the disk crashes before its k-th mutating I/O (or
at a named point), in every crash mode.  After the reboot the leased and the
young artifact are intact, and a fresh cleanup finishes the job and then is
idempotent.
"""

from __future__ import annotations

import hashlib

import pytest

from faultinject.disk import CRASH_MODES, SimulatedCrash, SimulatedDisk
from toolswap.cleanup import ArtifactCleanupPolicy, cleanup_session_from_journal
from toolswap.domain import ArtifactRetentionClaim, format_source_id
from toolswap.journal import ArtifactRetentionJournal
from toolswap.session import SessionPaths

DAY = 86400
POLICY = ArtifactCleanupPolicy(orphan_ttl_seconds=DAY, dry_run=False)
LEASED = b"leased bytes\n" * 100
DATA = {
    "tool_result_001.txt": LEASED,
    "tool_result_002.txt": b"orphan two\n",
    "tool_result_003.txt": b"orphan three\n" * 5000,
}
YOUNG = ("tool_result_004.txt", b"young\n")


def _scenario() -> tuple[SimulatedDisk, SessionPaths, float]:
    disk = SimulatedDisk()
    paths = SessionPaths.at("/sessions/s1")
    disk.makedirs(paths.tool_results)
    for name, data in DATA.items():
        disk.put_file(f"{paths.tool_results}/{name}", data)
    disk.advance_time(10 * DAY)
    disk.put_file(f"{paths.tool_results}/{YOUNG[0]}", YOUNG[1])
    now = disk.now_ns() / 1e9
    digest = hashlib.sha256(LEASED).hexdigest()
    claim = ArtifactRetentionClaim(
        source_id=format_source_id("s1", "tool_result_001.txt", digest),
        content_sha256=digest,
        retain_until=now - DAY,  # expired: a PREPARED lease must protect anyway
    )
    ArtifactRetentionJournal(paths.root, fs=disk).prepare(claim, "t1", now=now)
    return disk, paths, now


def _clean(disk: SimulatedDisk, paths: SessionPaths, now: float) -> None:
    journal = ArtifactRetentionJournal(paths.root, fs=disk)
    cleanup_session_from_journal(paths, journal, policy=POLICY, fs=disk, now=now)


def _names(disk: SimulatedDisk, paths: SessionPaths) -> list[str]:
    return disk.listdir(paths.tool_results)


def _assert_protected_intact(disk: SimulatedDisk, paths: SessionPaths) -> None:
    assert disk.read_file(f"{paths.tool_results}/tool_result_001.txt") == LEASED
    assert disk.read_file(f"{paths.tool_results}/{YOUNG[0]}") == YOUNG[1]


def _mutating_ops_of_one_cleanup() -> int:
    disk, paths, now = _scenario()
    before = disk.mutating_io_count
    _clean(disk, paths, now)
    assert _names(disk, paths) == ["tool_result_001.txt", YOUNG[0]]
    return disk.mutating_io_count - before


@pytest.mark.parametrize("mode", CRASH_MODES)
def test_a_crash_before_any_mutating_io_of_cleanup_keeps_what_is_protected(mode: str) -> None:
    total = _mutating_ops_of_one_cleanup()
    assert total >= 4  # lock, two unlinks, directory fsync, ...
    for k in range(1, total + 1):
        for seed in range(3):
            disk, paths, now = _scenario()
            disk.arm_io(k, mutating_only=True)
            with pytest.raises(SimulatedCrash):
                _clean(disk, paths, now)
            disk.crash(mode, seed)
            _assert_protected_intact(disk, paths)
            _clean(disk, paths, now)  # recovery: a fresh cleanup finishes the job (L1)
            assert _names(disk, paths) == ["tool_result_001.txt", YOUNG[0]], (k, seed)
            _assert_protected_intact(disk, paths)
            _clean(disk, paths, now)  # and is idempotent
            assert _names(disk, paths) == ["tool_result_001.txt", YOUNG[0]]


@pytest.mark.parametrize("mode", CRASH_MODES)
@pytest.mark.parametrize("point", ["cleanup.after_revalidate", "cleanup.after_unlink"])
@pytest.mark.parametrize("nth", [1, 2])
def test_a_crash_at_a_named_cleanup_point_keeps_what_is_protected(
    mode: str, point: str, nth: int
) -> None:
    disk, paths, now = _scenario()
    disk.arm(point, nth)
    with pytest.raises(SimulatedCrash):
        _clean(disk, paths, now)
    disk.crash(mode, 1)
    _assert_protected_intact(disk, paths)
    _clean(disk, paths, now)
    assert _names(disk, paths) == ["tool_result_001.txt", YOUNG[0]]


def test_an_unlink_not_yet_synced_may_come_back_and_is_deleted_again() -> None:
    disk, paths, now = _scenario()
    disk.arm("cleanup.after_unlink", 2)  # both unlinks done, the directory not synced
    with pytest.raises(SimulatedCrash):
        _clean(disk, paths, now)
    disk.crash("drop")
    assert _names(disk, paths) == sorted([*DATA, YOUNG[0]])  # the deletes were lost
    _clean(disk, paths, now)
    assert _names(disk, paths) == ["tool_result_001.txt", YOUNG[0]]


def test_deletions_are_durable_once_cleanup_returns() -> None:
    disk, paths, now = _scenario()
    _clean(disk, paths, now)
    disk.crash("drop")
    assert _names(disk, paths) == ["tool_result_001.txt", YOUNG[0]]
