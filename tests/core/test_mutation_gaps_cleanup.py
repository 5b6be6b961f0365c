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

Issue 39 (every mutant, both operator sets): a name that cannot be inspected
does not end the scan; apply says why a failing ``lstat`` or ``unlink`` kept
or skipped a file; a plan or a cleanup given a journal uses it; an owner whose
census does not answer keeps the file; a forged digest does not stop the owner
being asked about the rest of the plan; planning and applying close every
handle they open, and apply leaves the owner's census fence it entered; a
policy or a snapshot read from outside with a key too many is hostile; a
referenced file says how many references keep it.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import pathlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import attrs
import pytest

from toolswap.cleanup import (
    ArtifactCleanupPolicy,
    CleanupPlan,
    FileSnapshot,
    HostilePlanError,
    JournalRequiredError,
    ScanProgress,
    apply_cleanup,
    cleanup_session,
    plan_cleanup,
)
from toolswap.errors import EnvironmentFailure
from toolswap.fs import FileFacts, OsFileSystem
from toolswap.journal import ArtifactRetentionJournal
from toolswap.owners.memory import InMemoryOwner
from toolswap.session import SessionPaths

from .test_cleanup import DAY, DELETE, NOW, claim_for, exists, make_session, put
from .test_mutation_gaps_journal_anchor import _CountsHandles

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


# -- issue 39: every mutant of the fail-closed paths -------------------------------------


class _ListsFirst(OsFileSystem):
    """The real seam, listing ``first`` before the other names, whose ``lstat`` of it fails."""

    def __init__(self, first: str, error: OSError) -> None:
        self.first = first
        self.error = error

    def listdir(self, path: str) -> list[str]:
        names = super().listdir(path)
        return [self.first] + sorted(n for n in names if n != self.first)

    def lstat(self, path: str) -> FileFacts:
        if path.endswith(self.first):
            raise self.error
        return super().lstat(path)


@pytest.mark.parametrize(
    "error",
    [FileNotFoundError(errno.ENOENT, "gone"), PermissionError(errno.EACCES, "denied")],
    ids=["vanished", "cannot-inspect"],
)
def test_a_name_that_cannot_be_inspected_does_not_end_the_scan(
    tmp_path: pathlib.Path, error: OSError
) -> None:
    paths = make_session(tmp_path)
    first, later = put(paths, 1, b"first"), put(paths, 2, b"later")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW, fs=_ListsFirst(first, error))
    assert [e.name for e in plan.planned] == [later]


class _FailingAt(OsFileSystem):
    """The real seam, one of whose calls on artifacts (``lstat`` or ``unlink``) fails."""

    def __init__(self, call: str, error: OSError) -> None:
        self.call = call
        self.error = error

    def lstat(self, path: str) -> FileFacts:
        if self.call == "lstat" and path.endswith(".txt"):
            raise self.error
        return super().lstat(path)

    def unlink(self, path: str) -> None:
        if self.call == "unlink" and path.endswith(".txt"):
            raise self.error
        super().unlink(path)


@pytest.mark.parametrize(
    ("call", "error", "outcome"),
    [
        (
            "lstat",
            PermissionError(errno.EACCES, "denied"),
            ("retained_unknown", "cannot inspect: denied"),
        ),
        (
            "unlink",
            FileNotFoundError(errno.ENOENT, "gone"),
            ("already_missing", "vanished just before unlink"),
        ),
        (
            "unlink",
            PermissionError(errno.EACCES, "denied"),
            ("retained_unknown", "unlink failed: denied"),
        ),
    ],
    ids=["lstat-fails", "unlinked-by-someone-else", "unlink-fails"],
)
def test_apply_says_why_a_seam_failure_kept_or_skipped_a_file(
    tmp_path: pathlib.Path, call: str, error: OSError, outcome: tuple[str, str]
) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"orphan")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW)
    report = apply_cleanup(paths, plan, claims=[], fs=_FailingAt(call, error), now=NOW)
    assert (report.entry(name).status, report.entry(name).reason) == outcome


def _journaled(tmp_path: pathlib.Path) -> tuple[SessionPaths, ArtifactRetentionJournal, str]:
    """A session whose journal holds a PREPARED lease on an old artifact."""
    paths = make_session(tmp_path)
    name = put(paths, 1, b"leased")
    journal = ArtifactRetentionJournal(paths.root, clock=lambda: NOW)
    journal.prepare(claim_for(paths, name, b"leased"), "t1")
    return paths, journal, name


def test_a_plan_given_a_journal_is_made_with_that_journal(tmp_path: pathlib.Path) -> None:
    paths, journal, name = _journaled(tmp_path)
    plan = plan_cleanup(paths, journal=journal, policy=DELETE, now=NOW)
    assert (plan.journal_aware, plan.entry(name).status) == (True, "retained_referenced")


def test_cleanup_session_given_a_journal_keeps_what_its_leases_protect(
    tmp_path: pathlib.Path,
) -> None:
    paths, journal, name = _journaled(tmp_path)
    plan, report = cleanup_session(paths, journal=journal, policy=DELETE, now=NOW)
    assert (plan.entry(name).status, report.deleted) == ("retained_referenced", ())
    assert exists(paths, name)


class _Census(InMemoryOwner):
    """An owner whose census answers with ``answer`` (a mapping of id -> what it says)."""

    def __init__(self, answer: Callable[[tuple[str, ...]], object]) -> None:
        super().__init__()
        self.answer = answer

    @contextmanager
    def census_fenced(self, source_ids: Any) -> Iterator[object]:
        yield self.answer(tuple(source_ids))


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (lambda ids: {}, "the owner's census did not name it: cannot tell"),
        (lambda ids: dict.fromkeys(ids, "t1"), "the owner's census answer is not a list of ids"),
    ],
    ids=["not-named", "not-a-list"],
)
def test_an_owner_census_that_does_not_answer_keeps_the_file(
    tmp_path: pathlib.Path, answer: Callable[[tuple[str, ...]], object], reason: str
) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"orphan")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW)
    report = apply_cleanup(paths, plan, claims=[], owner=_Census(answer), now=NOW)
    assert (report.entry(name).status, report.entry(name).reason) == ("retained_unknown", reason)
    assert exists(paths, name)


def test_a_forged_digest_does_not_keep_the_owner_from_being_asked_about_the_rest(
    tmp_path: pathlib.Path,
) -> None:
    paths = make_session(tmp_path)
    first, later = put(paths, 1, b"first"), put(paths, 2, b"later")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW)
    forged = attrs.evolve(plan.entry(first), sha256="g" * 64)  # no source id can carry it
    entries = tuple(forged if e.name == first else e for e in plan.entries)
    owner = _Census(lambda ids: {i: () for i in ids})  # asked: nothing references them
    report = apply_cleanup(
        paths, attrs.evolve(plan, entries=entries), claims=[], owner=owner, now=NOW
    )
    assert report.deleted == (later,)
    assert exists(paths, first)


def test_planning_and_applying_close_every_handle_they_open(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"orphan")
    fs = _CountsHandles()
    plan = plan_cleanup(paths, [], policy=DELETE, fs=fs, now=NOW)
    report = apply_cleanup(paths, plan, claims=[], fs=fs, now=NOW)
    assert report.deleted == (name,)
    assert fs.open == set()


class _FenceWatched(InMemoryOwner):
    """An owner whose census fence (a plain context manager: nothing closes it when it
    is dropped, as a generator's would be) says when it was left."""

    def __init__(self) -> None:
        super().__init__()
        self.fence: list[str] = []

    def census_fenced(self, source_ids: Any) -> Any:
        owner = self

        class _Fence:
            def __enter__(self) -> dict[str, tuple[str, ...]]:
                owner.fence.append("entered")
                return {i: () for i in source_ids}

            def __exit__(self, *exc: object) -> None:
                owner.fence.append("left")

        return _Fence()


def test_apply_leaves_the_owner_census_fence_it_entered(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"orphan")
    owner = _FenceWatched()
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW)
    report = apply_cleanup(paths, plan, claims=[], owner=owner, now=NOW)
    assert (report.deleted, owner.fence) == ((name,), ["entered", "left"])


def test_a_policy_read_from_outside_with_an_unknown_key_is_hostile() -> None:
    data = {**ArtifactCleanupPolicy().to_dict(), "delete_everything": True}
    with pytest.raises(HostilePlanError, match=r"unknown \['delete_everything'\]"):
        ArtifactCleanupPolicy.from_dict(data)


def test_a_snapshot_read_from_outside_with_an_unknown_key_is_hostile() -> None:
    data = {"size": 1, "mtime_ns": 2, "device": 3, "inode": 4, "path": "/etc/passwd"}
    with pytest.raises(HostilePlanError, match=r"unknown \['path'\]"):
        FileSnapshot.from_dict(data)


def test_a_referenced_file_says_how_many_references_keep_it(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"kept")
    claims = [claim_for(paths, name, b"kept", count=2)]
    entry = plan_cleanup(paths, claims, policy=DELETE, now=NOW).entry(name)
    assert (entry.status, entry.reason) == (
        "retained_referenced",
        "2 active reference(s), digest matches",
    )
