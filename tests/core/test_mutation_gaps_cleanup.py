"""Gaps the mutation run found in cleanup.py (docs/mutation.md).

Claims, one per test: apply and ``cleanup_session`` measure age with the
injected clock, not the wall clock, and ``cleanup_session`` reports planning
progress; a plan entry of a hashed file records the file's digest, and a kept
entry says why (age and TTL, both digests of a disagreement, a file that
vanished while planned); a report serializes every entry; a failed directory
sync after a deletion blames the environment and says the file is gone; each
hostile plan and the raw cleanup of a journaled session are refused with a
message that names the fault and the way out; apply says why it kept or skipped
a file (already gone, swapped for a symlink).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import pathlib
from collections.abc import Callable

import attrs
import pytest

from toolswap.cleanup import (
    ArtifactCleanupPolicy,
    CleanupPlan,
    HostilePlanError,
    JournalRequiredError,
    ScanProgress,
    apply_cleanup,
    cleanup_session,
    plan_cleanup,
)
from toolswap.errors import EnvironmentFailure
from toolswap.fs import OsFileSystem
from toolswap.session import SessionPaths

from .test_cleanup import DAY, DELETE, NOW, claim_for, exists, make_session, put

# Far beyond any wall clock this suite will see: a half that read time.time()
# instead of the injected clock would find every file "from the future".
FAR = 4_000_000_000.0


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# -- the injected clock -----------------------------------------------------------


def test_apply_without_now_measures_the_ttl_with_the_injected_clock(
    tmp_path: pathlib.Path,
) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"orphan", mtime=FAR - 10 * DAY)
    plan = plan_cleanup(paths, [], policy=DELETE, now=FAR)
    report = apply_cleanup(paths, plan, claims=[], clock=lambda: FAR)
    assert (report.applied_at, report.deleted) == (FAR, (name,))
    assert not exists(paths, name)


def test_cleanup_session_hands_its_clock_to_both_halves(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"orphan", mtime=FAR - 10 * DAY)
    plan, report = cleanup_session(paths, [], policy=DELETE, clock=lambda: FAR)
    assert (plan.planned_at, report.applied_at) == (FAR, FAR)
    assert report.entry(name).status == "deleted"


def test_cleanup_session_reports_planning_progress_up_to_the_totals(
    tmp_path: pathlib.Path,
) -> None:
    paths = make_session(tmp_path)
    put(paths, 1, b"one")
    put(paths, 2, b"three")
    seen: list[ScanProgress] = []
    cleanup_session(paths, [], policy=DELETE, now=NOW, progress=seen.append)
    assert seen[-1] == ScanProgress(files_done=2, files_total=2, bytes_done=8, bytes_total=8)


# -- what a plan entry says ---------------------------------------------------------


@pytest.mark.parametrize(
    ("claimed", "mtime", "status"),
    [
        (b"kept", NOW - 10 * DAY, "retained_referenced"),
        (b"other bytes", NOW - 10 * DAY, "retained_corrupt"),
        (None, NOW, "retained_recent"),
    ],
    ids=["referenced", "corrupt", "recent"],
)
def test_a_kept_file_that_was_hashed_records_its_own_digest(
    tmp_path: pathlib.Path, claimed: bytes | None, mtime: float, status: str
) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"kept", mtime=mtime)
    claims = [] if claimed is None else [claim_for(paths, name, claimed)]
    entry = plan_cleanup(paths, claims, policy=DELETE, now=NOW).entry(name)
    assert (entry.status, entry.sha256) == (status, _sha(b"kept"))


def test_a_young_orphan_says_its_age_and_the_ttl(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"young", mtime=NOW - 30)
    entry = plan_cleanup(paths, [], policy=DELETE, now=NOW).entry(name)
    assert entry.reason == "unreferenced, 30s old < TTL 86400s"


def test_a_disagreeing_claim_names_both_digests_by_their_first_twelve_digits(
    tmp_path: pathlib.Path,
) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"on disk")
    entry = plan_cleanup(paths, [claim_for(paths, name, b"claimed")], policy=DELETE, now=NOW).entry(
        name
    )
    assert entry.reason == (
        f"a claim's digest disagrees with the file (file {_sha(b'on disk')[:12]}..., "
        f"claims {_sha(b'claimed')[:12]}...)"
    )


class _VanishOnOpenFS(OsFileSystem):
    """Another process deletes each artifact between its ``lstat`` and its open."""

    def open_read(self, path: str) -> int:
        if os.path.basename(os.path.dirname(path)) == "tool-results":
            os.unlink(path)
        return super().open_read(path)


@pytest.mark.parametrize(
    ("referenced", "status", "reason"),
    [
        (True, "missing_referenced", "vanished while it was planned; it is referenced"),
        (False, "retained_unknown", "vanished while it was planned"),
    ],
)
def test_a_file_that_vanishes_while_planned_is_reported_as_that_race(
    tmp_path: pathlib.Path, referenced: bool, status: str, reason: str
) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"gone")
    claims = [claim_for(paths, name, b"gone")] if referenced else []
    entry = plan_cleanup(paths, claims, policy=DELETE, now=NOW, fs=_VanishOnOpenFS()).entry(name)
    assert (entry.status, entry.reason) == (status, reason)


# -- what a report says -------------------------------------------------------------


def test_a_report_as_a_dict_names_every_field_and_entry(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"orphan")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW)
    data = apply_cleanup(paths, plan, claims=[], now=NOW).to_dict()
    assert json.loads(json.dumps(data)) == {
        "session_id": "s1",
        "applied_at": NOW,
        "dry_run": False,
        "counts": {"deleted": 1},
        "entries": [
            {"name": name, "status": "deleted", "reason": "unreferenced orphan, re-validated"}
        ],
    }


def test_applying_a_plan_again_says_the_file_is_already_gone(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"orphan")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW)
    apply_cleanup(paths, plan, claims=[], now=NOW)
    entry = apply_cleanup(paths, plan, claims=[], now=NOW).entry(name)
    assert (entry.status, entry.reason) == ("already_missing", "already gone")


class _SymlinkOnOpenFS(OsFileSystem):
    """Swaps each artifact for a symlink to ``target`` between apply's ``lstat`` and open."""

    def __init__(self, target: pathlib.Path) -> None:
        self.target = target

    def open_read(self, path: str) -> int:
        if os.path.basename(os.path.dirname(path)) == "tool-results":
            os.unlink(path)
            os.symlink(self.target, path)
        return super().open_read(path)


def test_a_file_swapped_for_a_symlink_before_the_reread_is_named_and_kept(
    tmp_path: pathlib.Path,
) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"orphan")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW)
    target = tmp_path / "precious.txt"
    target.write_bytes(b"orphan")
    report = apply_cleanup(paths, plan, claims=[], now=NOW, fs=_SymlinkOnOpenFS(target))
    entry = report.entry(name)
    assert (entry.status, entry.reason) == ("race_detected", "replaced by a symlink")
    link = os.path.join(paths.tool_results, name)
    assert os.path.islink(link) and target.read_bytes() == b"orphan"


class _NoDirSyncFS(OsFileSystem):
    """The directory fsync of ``tool-results/`` fails (EIO); every other one works."""

    def fsync_dir(self, path: str) -> None:
        if os.path.basename(path) == "tool-results":
            raise OSError(errno.EIO, "Input/output error")
        super().fsync_dir(path)


def test_a_failed_sync_after_deleting_blames_the_environment_and_says_it_deleted(
    tmp_path: pathlib.Path,
) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"orphan")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW)
    with pytest.raises(EnvironmentFailure) as info:
        apply_cleanup(paths, plan, claims=[], now=NOW, fs=_NoDirSyncFS())
    assert str(info.value).startswith("deleted, but cannot sync tool-results/: ")
    assert isinstance(info.value.__cause__, OSError) and not exists(paths, name)


# -- refusals name the fault ----------------------------------------------------------


def _doubled(plan: CleanupPlan, paths: SessionPaths) -> tuple[CleanupPlan, SessionPaths]:
    return attrs.evolve(plan, entries=plan.entries + plan.entries), paths


def _short_digest(plan: CleanupPlan, paths: SessionPaths) -> tuple[CleanupPlan, SessionPaths]:
    entry = attrs.evolve(plan.planned[0], sha256=plan.planned[0].sha256[:12])  # type: ignore[index]
    return attrs.evolve(plan, entries=(entry,)), paths


def _other_root(plan: CleanupPlan, paths: SessionPaths) -> tuple[CleanupPlan, SessionPaths]:
    there = make_session(pathlib.Path(paths.root).parent / "elsewhere", paths.session_id)
    put(there, 1, b"orphan")
    return plan, there


@pytest.mark.parametrize(
    ("tamper", "message"),
    [
        (_doubled, "plan names 'tool_result_001.txt' twice"),
        (_short_digest, "planned deletion 'tool_result_001.txt' has no full digest"),
        (_other_root, "plan was made for another tool-results/ folder (root differs)"),
    ],
)
def test_a_hostile_plan_is_refused_with_what_is_wrong_with_it(
    tmp_path: pathlib.Path,
    tamper: Callable[[CleanupPlan, SessionPaths], tuple[CleanupPlan, SessionPaths]],
    message: str,
) -> None:
    paths = make_session(tmp_path)
    put(paths, 1, b"orphan")
    plan, target = tamper(plan_cleanup(paths, [], policy=DELETE, now=NOW), paths)
    with pytest.raises(HostilePlanError) as info:
        apply_cleanup(target, plan, claims=[], now=NOW)
    assert str(info.value) == message
    assert exists(target, "tool_result_001.txt")


def test_raw_cleanup_of_a_journaled_session_says_which_cleanup_to_use(
    tmp_path: pathlib.Path,
) -> None:
    paths = make_session(tmp_path)
    pathlib.Path(paths.journal).write_bytes(b"")
    with pytest.raises(JournalRequiredError) as info:
        plan_cleanup(paths, [], policy=ArtifactCleanupPolicy(), now=NOW)
    assert str(info.value) == (
        "this session has a lease journal: raw claims cannot see its leases; "
        "use the journal-aware cleanup (S1)"
    )
