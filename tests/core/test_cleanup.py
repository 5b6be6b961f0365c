"""Two-phase cleanup with raw claims (docs/design.md section 7): each status, each race, S7.

Every test states one claim.  Artifacts are written as plain files with old
mtimes so that age is under the test's control (``now`` is injected).
"""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import pathlib
import stat
import threading
import time
from typing import Any

import attrs
import pytest

from toolswap.cleanup import (
    ArtifactCleanupPolicy,
    CleanupPlan,
    CleanupRefused,
    FileSnapshot,
    ForeignClaimError,
    HostilePlanError,
    JournalRequiredError,
    PlanEntry,
    ScanProgress,
    apply_cleanup,
    cleanup_session,
    plan_cleanup,
)
from toolswap.domain import ArtifactRetentionClaim, format_source_id
from toolswap.errors import CorruptStateError, UsageError
from toolswap.fs import FileFacts, OsFileSystem
from toolswap.session import SessionPaths

NOW = 2_000_000_000.0
DAY = 86400
OLD = NOW - 10 * DAY
DELETE = ArtifactCleanupPolicy(dry_run=False)


# -- helpers (also used by test_cleanup_journal.py) ------------------------------------


def make_session(tmp_path: pathlib.Path, name: str = "s1") -> SessionPaths:
    paths = SessionPaths.at(tmp_path / name)
    os.makedirs(paths.tool_results, exist_ok=True)
    return paths


def put(paths: SessionPaths, number: int, data: bytes, *, mtime: float = OLD) -> str:
    """Write ``tool_result_NNN.txt`` with ``data`` and the given mtime; returns its name."""
    name = f"tool_result_{number:03d}.txt"
    path = os.path.join(paths.tool_results, name)
    with open(path, "wb") as handle:
        handle.write(data)
    set_mtime(path, mtime)
    return name


def set_mtime(path: str, mtime: float) -> None:
    ns = int(mtime * 1e9)
    os.utime(path, ns=(ns, ns), follow_symlinks=False)


def claim_for(
    paths: SessionPaths,
    name: str,
    data: bytes,
    *,
    count: int = 1,
    retain_until: float | None = None,
    session_id: str | None = None,
) -> ArtifactRetentionClaim:
    digest = hashlib.sha256(data).hexdigest()
    return ArtifactRetentionClaim(
        source_id=format_source_id(session_id or paths.session_id, name, digest),
        content_sha256=digest,
        reference_count=count,
        retain_until=retain_until,
    )


def exists(paths: SessionPaths, name: str) -> bool:
    return os.path.lexists(os.path.join(paths.tool_results, name))


class RecordingFS(OsFileSystem):
    """The real seam, recording the calls cleanup makes (in order)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.locked = False

    def open_read(self, path: str) -> int:
        self.calls.append(("open_read", os.path.basename(path)))
        return super().open_read(path)

    def unlink(self, path: str) -> None:
        self.calls.append(("unlink", os.path.basename(path)))
        assert self.locked, "unlink outside the session lock"
        super().unlink(path)

    def fsync_dir(self, path: str) -> None:
        self.calls.append(("fsync_dir", os.path.basename(path)))
        super().fsync_dir(path)

    def flock(self, handle: int, *, exclusive: bool = True) -> None:
        super().flock(handle, exclusive=exclusive)
        self.locked = True

    def funlock(self, handle: int) -> None:
        self.locked = False
        super().funlock(handle)

    def crash_point(self, name: str) -> None:
        self.calls.append(("crash_point", name))


# -- policy ------------------------------------------------------------------------


def test_policy_defaults_keep_a_day_and_only_report() -> None:
    policy = ArtifactCleanupPolicy()
    assert (policy.orphan_ttl_seconds, policy.max_deletions, policy.dry_run) == (86400, 100, True)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"orphan_ttl_seconds": -1},
        {"orphan_ttl_seconds": math.nan},
        {"orphan_ttl_seconds": math.inf},
        {"orphan_ttl_seconds": True},
        {"orphan_ttl_seconds": "60"},
        {"max_deletions": -1},
        {"max_deletions": 1.5},
        {"max_deletions": True},
        {"dry_run": "no"},
        {"dry_run": 0},
    ],
)
def test_policy_rejects_invalid_values(kwargs: dict[str, Any]) -> None:
    with pytest.raises(UsageError):
        ArtifactCleanupPolicy(**kwargs)


# -- plan: one test per status ---------------------------------------------------------


def test_an_old_unreferenced_artifact_is_planned_for_deletion(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"orphan")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW)
    entry = plan.entry(name)
    assert entry.status == "planned_delete"
    assert entry.sha256 == hashlib.sha256(b"orphan").hexdigest()
    facts = os.lstat(os.path.join(paths.tool_results, name))
    assert entry.snapshot == FileSnapshot(
        size=6, mtime_ns=facts.st_mtime_ns, device=facts.st_dev, inode=facts.st_ino
    )


def test_a_young_orphan_is_retained_recent(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"young", mtime=NOW - DAY + 60)
    assert plan_cleanup(paths, [], policy=DELETE, now=NOW).entry(name).status == "retained_recent"


def test_a_file_from_the_future_is_retained_recent(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"future", mtime=NOW + DAY)
    assert plan_cleanup(paths, [], policy=DELETE, now=NOW).entry(name).status == "retained_recent"


def test_a_claimed_artifact_is_retained_referenced_with_summed_counts(
    tmp_path: pathlib.Path,
) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"kept")
    claims = [claim_for(paths, name, b"kept", count=2), claim_for(paths, name, b"kept", count=3)]
    entry = plan_cleanup(paths, claims, policy=DELETE, now=NOW).entry(name)
    assert (entry.status, entry.reference_count) == ("retained_referenced", 5)


def test_an_expired_raw_claim_no_longer_protects(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"expired")
    claims = [claim_for(paths, name, b"expired", retain_until=NOW - 1)]
    assert plan_cleanup(paths, claims, policy=DELETE, now=NOW).entry(name).status == (
        "planned_delete"
    )


def test_a_claim_that_disagrees_with_the_file_is_retained_corrupt(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"actual bytes")
    claims = [claim_for(paths, name, b"claimed bytes")]
    entry = plan_cleanup(paths, claims, policy=DELETE, now=NOW).entry(name)
    assert entry.status == "retained_corrupt"


def test_a_claim_without_its_file_is_missing_referenced(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    claims = [claim_for(paths, "tool_result_007.txt", b"gone", count=2)]
    entry = plan_cleanup(paths, claims, policy=DELETE, now=NOW).entry("tool_result_007.txt")
    assert (entry.status, entry.reference_count, entry.snapshot) == ("missing_referenced", 2, None)


def test_orphans_beyond_max_deletions_are_retained_limit_oldest_first(
    tmp_path: pathlib.Path,
) -> None:
    paths = make_session(tmp_path)
    newest = put(paths, 1, b"a", mtime=OLD + 30)
    oldest = put(paths, 2, b"b", mtime=OLD)
    middle = put(paths, 3, b"c", mtime=OLD + 10)
    policy = ArtifactCleanupPolicy(max_deletions=2, dry_run=False)
    plan = plan_cleanup(paths, [], policy=policy, now=NOW)
    assert plan.entry(oldest).status == "planned_delete"
    assert plan.entry(middle).status == "planned_delete"
    assert plan.entry(newest).status == "retained_limit"


def test_symlinks_directories_and_foreign_names_are_denied(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"secret")
    set_mtime(str(outside), OLD)
    os.symlink(outside, os.path.join(paths.tool_results, "tool_result_001.txt"))
    os.mkdir(os.path.join(paths.tool_results, "tool_result_002.txt"))
    (pathlib.Path(paths.tool_results) / "notes.txt").write_bytes(b"x")
    set_mtime(os.path.join(paths.tool_results, "notes.txt"), OLD)
    os.mkfifo(os.path.join(paths.tool_results, "tool_result_003.txt"))
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW)
    assert plan.counts == {"denied": 4}


class OtherUidFS(OsFileSystem):
    def current_uid(self) -> int:
        return os.geteuid() + 1


class UnreadableFS(OsFileSystem):
    def open_read(self, path: str) -> int:
        raise PermissionError(errno.EACCES, "Permission denied", path)


def test_an_artifact_of_another_uid_is_retained_unknown(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"theirs")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW, fs=OtherUidFS())
    assert plan.entry(name).status == "retained_unknown"


def test_an_unreadable_artifact_is_retained_unknown(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"locked")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW, fs=UnreadableFS())
    assert plan.entry(name).status == "retained_unknown"


class GrowingFS(OsFileSystem):
    """Appends to the file after it was opened for hashing (a writer still at work)."""

    def open_read(self, path: str) -> int:
        handle = super().open_read(path)
        with open(path, "ab") as writer:
            writer.write(b"more")
        return handle


def test_an_artifact_that_changes_while_hashed_is_retained_unknown(
    tmp_path: pathlib.Path,
) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"growing")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW, fs=GrowingFS())
    assert plan.entry(name).status == "retained_unknown"


def test_the_plan_and_its_dict_carry_no_absolute_path(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"x")
    claims = [claim_for(paths, "tool_result_009.txt", b"y")]
    text = json.dumps(plan_cleanup(paths, claims, policy=DELETE, now=NOW).to_dict())
    assert str(tmp_path) not in text and paths.root not in text and name in text
    assert "/" not in text.replace('"', "")


def test_planning_is_read_only(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"orphan")
    fs = RecordingFS()
    plan_cleanup(paths, [], policy=DELETE, now=NOW, fs=fs)
    assert [call for call in fs.calls if call[0] != "open_read"] == []
    assert exists(paths, name)


def test_a_missing_tool_results_folder_plans_nothing_but_dangling_claims(
    tmp_path: pathlib.Path,
) -> None:
    paths = SessionPaths.at(tmp_path / "fresh")
    claims = [claim_for(paths, "tool_result_001.txt", b"z")]
    plan = plan_cleanup(paths, claims, policy=DELETE, now=NOW)
    assert (plan.counts, plan.directory) == ({"missing_referenced": 1}, None)


def test_a_symlinked_tool_results_folder_refuses(tmp_path: pathlib.Path) -> None:
    paths = SessionPaths.at(tmp_path / "s1")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "tool_result_001.txt").write_bytes(b"victim")
    set_mtime(str(elsewhere / "tool_result_001.txt"), OLD)
    os.makedirs(paths.root)
    os.symlink(elsewhere, paths.tool_results)
    with pytest.raises(CleanupRefused):
        plan_cleanup(paths, [], policy=DELETE, now=NOW)
    assert isinstance(CleanupRefused("x"), CorruptStateError)
    assert (elsewhere / "tool_result_001.txt").read_bytes() == b"victim"


def test_planning_reports_progress_up_to_the_totals(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    put(paths, 1, b"a" * (3 * 1024 * 1024 + 5))
    put(paths, 2, b"b" * 10)
    seen: list[ScanProgress] = []
    plan_cleanup(paths, [], policy=DELETE, now=NOW, progress=seen.append)
    last = seen[-1]
    assert (last.files_done, last.files_total) == (2, 2)
    assert last.bytes_done == last.bytes_total == 3 * 1024 * 1024 + 15
    assert len(seen) >= 5  # per chunk of the large file, not only per file
    assert all(a.bytes_done <= b.bytes_done for a, b in zip(seen, seen[1:], strict=False))


# -- S7: claims of another session -----------------------------------------------------


def test_a_claim_of_another_session_refuses_the_whole_plan(tmp_path: pathlib.Path) -> None:
    # The folder was renamed (s2 -> s1) or the caller mixed sessions up: the claim
    # meant to keep this very file.  Ignoring it would delete the file (S1).
    paths = make_session(tmp_path, "s1")
    other = make_session(tmp_path, "s2")
    name = put(paths, 1, b"same bytes")
    theirs = put(other, 1, b"same bytes")
    foreign = claim_for(paths, name, b"same bytes", session_id="s2")
    fs = RecordingFS()
    with pytest.raises(ForeignClaimError, match="names session 's2', not 's1'"):
        plan_cleanup(paths, [foreign], policy=DELETE, now=NOW, fs=fs)
    assert exists(paths, name) and exists(other, theirs)
    assert all(not call[1].startswith(str(tmp_path / "s2")) for call in fs.calls)


def test_apply_refuses_when_a_current_claim_names_another_session(
    tmp_path: pathlib.Path,
) -> None:
    paths = make_session(tmp_path, "s1")
    name = put(paths, 1, b"same bytes")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW)
    foreign = claim_for(paths, name, b"same bytes", session_id="s2")
    with pytest.raises(ForeignClaimError):
        apply_cleanup(paths, plan, claims=[foreign], now=NOW)
    assert exists(paths, name)


# -- apply ------------------------------------------------------------------------------


def test_apply_deletes_the_planned_orphan_and_syncs_the_directory_after(
    tmp_path: pathlib.Path,
) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"orphan")
    kept = put(paths, 2, b"young", mtime=NOW)
    fs = RecordingFS()
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW)
    report = apply_cleanup(paths, plan, claims=[], now=NOW, fs=fs)
    assert report.counts == {"deleted": 1} and report.deleted == (name,)
    assert not exists(paths, name) and exists(paths, kept)
    tail = [call for call in fs.calls if call[0] != "open_read"]
    assert tail == [
        ("fsync_dir", "s1"),  # the new deletion record's entry (high_water), before any unlink
        ("crash_point", "cleanup.after_revalidate"),
        ("unlink", name),
        ("crash_point", "cleanup.after_unlink"),
        ("fsync_dir", "tool-results"),
    ]


def test_apply_rereads_the_full_file_before_deleting(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"orphan")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW)
    fs = RecordingFS()
    apply_cleanup(paths, plan, claims=[], now=NOW, fs=fs)
    assert fs.calls.index(("open_read", name)) < fs.calls.index(("unlink", name))


def test_a_dry_run_deletes_nothing(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    names = [put(paths, n, b"orphan %d" % n) for n in range(1, 4)]
    plan = plan_cleanup(paths, [], policy=ArtifactCleanupPolicy(), now=NOW)
    fs = RecordingFS()
    report = apply_cleanup(paths, plan, claims=[], now=NOW, fs=fs)
    assert report.dry_run and report.counts == {"dry_run": 3}
    assert all(exists(paths, name) for name in names)
    assert [call for call in fs.calls if call[0] in {"unlink", "fsync_dir"}] == []


def test_applying_the_same_plan_twice_never_deletes_more(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    first = put(paths, 1, b"one")
    put(paths, 2, b"two")
    policy = ArtifactCleanupPolicy(max_deletions=1, dry_run=False)
    plan = plan_cleanup(paths, [], policy=policy, now=NOW)
    assert apply_cleanup(paths, plan, claims=[], now=NOW).counts == {"deleted": 1}
    again = apply_cleanup(paths, plan, claims=[], now=NOW)
    assert again.counts == {"already_missing": 1}
    assert not exists(paths, first) and os.listdir(paths.tool_results) == ["tool_result_002.txt"]


def test_a_claim_added_since_the_plan_keeps_the_file(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"late claim")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW)
    report = apply_cleanup(paths, plan, claims=[claim_for(paths, name, b"late claim")], now=NOW)
    assert report.entry(name).status == "retained_referenced"
    assert exists(paths, name)


def test_a_same_size_same_mtime_rewrite_is_race_detected_and_kept(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"original bytes")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW)
    path = os.path.join(paths.tool_results, name)
    before = os.lstat(path)
    with open(path, "r+b") as handle:  # same inode, same size, different bytes
        handle.write(b"ORIGINAL BYTES")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.lstat(path)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        before.st_ino,
        before.st_size,
        before.st_mtime_ns,
    )
    report = apply_cleanup(paths, plan, claims=[], now=NOW)
    assert report.entry(name).status == "race_detected"
    assert pathlib.Path(path).read_bytes() == b"ORIGINAL BYTES"


def test_a_file_replaced_by_a_new_inode_is_race_detected(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"first")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW)
    path = os.path.join(paths.tool_results, name)
    replacement = path + ".new"
    keep_alive = open(path, "rb")  # noqa: SIM115 - pin the old inode so it is not reused
    try:
        with open(replacement, "wb") as handle:
            handle.write(b"first")
        set_mtime(replacement, OLD)
        os.rename(replacement, path)
        report = apply_cleanup(paths, plan, claims=[], now=NOW)
    finally:
        keep_alive.close()
    assert report.entry(name).status == "race_detected" and exists(paths, name)


def test_a_file_that_grew_is_race_detected(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"short")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW)
    path = os.path.join(paths.tool_results, name)
    with open(path, "ab") as handle:
        handle.write(b" and longer")
    set_mtime(path, OLD)
    assert apply_cleanup(paths, plan, claims=[], now=NOW).entry(name).status == "race_detected"
    assert exists(paths, name)


def test_a_file_that_changes_while_apply_rehashes_it_is_race_detected(
    tmp_path: pathlib.Path,
) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"steady at plan time")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW)
    report = apply_cleanup(paths, plan, claims=[], now=NOW, fs=GrowingFS())
    assert report.entry(name).status == "race_detected"
    assert exists(paths, name)


class SwappedAfterLstatFS(OsFileSystem):
    """Renames another regular file of the same size over the artifact once it was lstat-ed."""

    def __init__(self, impostor: str) -> None:
        super().__init__()
        self.impostor = impostor

    def open_read(self, path: str) -> int:
        os.replace(self.impostor, path)
        return super().open_read(path)


def test_a_file_swapped_in_between_lstat_and_open_is_never_hashed_as_the_artifact(
    tmp_path: pathlib.Path,
) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"original")
    impostor = tmp_path / "impostor"
    impostor.write_bytes(b"imposter")  # same size: only its inode tells it apart
    set_mtime(str(impostor), OLD)
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW, fs=SwappedAfterLstatFS(str(impostor)))
    assert plan.entry(name).status == "retained_unknown"


class ShortSizeFS(OsFileSystem):
    """Says every file is one byte shorter than it is (a size that lies, as /proc's do)."""

    def lstat(self, path: str) -> FileFacts:
        facts = super().lstat(path)
        return attrs.evolve(facts, size=facts.size - 1) if facts.is_regular else facts

    def fstat(self, handle: int) -> FileFacts:
        facts = super().fstat(handle)
        return attrs.evolve(facts, size=facts.size - 1)


def test_a_file_longer_than_its_size_is_never_hashed_as_that_size(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"more than it says")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW, fs=ShortSizeFS())
    assert plan.entry(name).status == "retained_unknown"


def test_a_file_replaced_by_an_outside_symlink_is_never_followed_or_deleted(
    tmp_path: pathlib.Path,
) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"orphan")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW)
    target = tmp_path / "precious.txt"
    target.write_bytes(b"orphan")  # same bytes: only the type check can refuse
    set_mtime(str(target), OLD)
    path = os.path.join(paths.tool_results, name)
    os.unlink(path)
    os.symlink(target, path)
    fs = RecordingFS()
    report = apply_cleanup(paths, plan, claims=[], now=NOW, fs=fs)
    assert report.entry(name).status == "race_detected"
    assert os.path.islink(path) and target.read_bytes() == b"orphan"
    assert ("open_read", name) not in fs.calls


def test_a_planned_symlink_is_never_followed_or_deleted(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    target = tmp_path / "outside.txt"
    target.write_bytes(b"outside")
    set_mtime(str(target), OLD)
    link = os.path.join(paths.tool_results, "tool_result_001.txt")
    os.symlink(target, link)
    fs = RecordingFS()
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW, fs=fs)
    entry = plan.entry("tool_result_001.txt")
    assert entry.status == "denied" and "symlink" in entry.reason
    report = apply_cleanup(paths, plan, claims=[], now=NOW, fs=fs)
    assert report.entries == ()
    assert os.path.islink(link) and target.read_bytes() == b"outside"
    assert fs.calls == []


def test_a_vanished_file_is_already_missing(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"gone soon")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW)
    os.unlink(os.path.join(paths.tool_results, name))
    report = apply_cleanup(paths, plan, claims=[], now=NOW)
    assert report.counts == {"already_missing": 1}


def test_apply_touches_only_planned_delete_entries(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    young = put(paths, 1, b"young", mtime=NOW)
    claimed = put(paths, 2, b"claimed")
    put(paths, 3, b"orphan")
    claims = [claim_for(paths, claimed, b"claimed")]
    plan = plan_cleanup(paths, claims, policy=DELETE, now=NOW)
    report = apply_cleanup(paths, plan, claims=claims, now=NOW)
    assert [entry.name for entry in report.entries] == ["tool_result_003.txt"]
    assert exists(paths, young) and exists(paths, claimed)


def test_the_ttl_is_checked_again_at_apply(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"orphan")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW)
    report = apply_cleanup(paths, plan, claims=[], now=OLD + 60)  # the clock went back
    assert report.entry(name).status == "retained_recent" and exists(paths, name)


def test_apply_unlinks_only_while_holding_the_session_lock(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    put(paths, 1, b"orphan")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW)
    # RecordingFS asserts on every unlink that the lock is held.
    assert apply_cleanup(paths, plan, claims=[], now=NOW, fs=RecordingFS()).counts == {"deleted": 1}


def test_apply_waits_for_the_session_lock(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"orphan")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW)
    done = threading.Event()

    def run() -> None:
        apply_cleanup(paths, plan, claims=[], now=NOW)
        done.set()

    with paths.session_lock():
        worker = threading.Thread(target=run)
        worker.start()
        time.sleep(0.2)
        assert not done.is_set() and exists(paths, name)
    worker.join(5)
    assert done.is_set() and not exists(paths, name)


# -- raw claims vs a durable journal ------------------------------------------------------


def test_raw_apply_refuses_once_the_session_has_a_journal(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"orphan")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW)
    pathlib.Path(paths.journal).write_bytes(b"")
    with pytest.raises(JournalRequiredError):
        apply_cleanup(paths, plan, claims=[], now=NOW)
    assert exists(paths, name)


def test_raw_planning_refuses_once_the_session_has_a_journal(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    pathlib.Path(paths.journal).write_bytes(b"")
    with pytest.raises(JournalRequiredError):
        plan_cleanup(paths, [], policy=DELETE, now=NOW)


def test_cleanup_session_plans_and_applies_in_one_call(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"orphan")
    kept = put(paths, 2, b"kept")
    plan, report = cleanup_session(paths, [claim_for(paths, kept, b"kept")], policy=DELETE, now=NOW)
    assert plan.counts == {"planned_delete": 1, "retained_referenced": 1}
    assert report.deleted == (name,) and exists(paths, kept)


# -- hostile plans --------------------------------------------------------------------


def _hostile(plan: CleanupPlan, **changes: Any) -> CleanupPlan:
    entry = attrs.evolve(plan.planned[0], **changes)
    return attrs.evolve(plan, entries=(entry,))


@pytest.mark.parametrize(
    "name",
    [
        "../s2/tool-results/tool_result_001.txt",
        "../../etc/passwd",
        "..",
        "tool_result_001.txt/../tool_result_002.txt",
        "sub/tool_result_001.txt",
        "/abs/tool_result_001.txt",
        "notes.txt",
        "tool_result_1.txt",
        "tool_result_001.txt\0",
        "",
    ],
)
def test_a_plan_with_a_tampered_name_is_refused(tmp_path: pathlib.Path, name: str) -> None:
    paths = make_session(tmp_path, "s1")
    other = make_session(tmp_path, "s2")
    put(paths, 1, b"orphan")
    victim = put(other, 1, b"orphan")
    plan = _hostile(plan_cleanup(paths, [], policy=DELETE, now=NOW), name=name)
    with pytest.raises(HostilePlanError):
        apply_cleanup(paths, plan, claims=[], now=NOW)
    assert exists(paths, "tool_result_001.txt") and exists(other, victim)


def test_a_plan_for_another_session_is_refused(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path, "s1")
    other = make_session(tmp_path, "s2")
    put(paths, 1, b"orphan")
    theirs = put(other, 1, b"orphan")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW)
    with pytest.raises(HostilePlanError):
        apply_cleanup(other, plan, claims=[], now=NOW)
    assert exists(other, theirs)


def test_a_plan_for_another_root_with_the_same_session_id_is_refused(
    tmp_path: pathlib.Path,
) -> None:
    here = make_session(tmp_path / "a", "default")
    there = make_session(tmp_path / "b", "default")
    put(here, 1, b"orphan")
    theirs = put(there, 1, b"orphan")
    plan = plan_cleanup(here, [], policy=DELETE, now=NOW)
    with pytest.raises(HostilePlanError):
        apply_cleanup(there, plan, claims=[], now=NOW)
    assert exists(there, theirs)


def test_a_plan_naming_a_file_twice_is_refused(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    put(paths, 1, b"orphan")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW)
    doubled = attrs.evolve(plan, entries=plan.entries + plan.entries)
    with pytest.raises(HostilePlanError):
        apply_cleanup(paths, doubled, claims=[], now=NOW)


def test_a_plan_over_its_own_limit_is_refused(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    put(paths, 1, b"one")
    put(paths, 2, b"two")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW)
    shrunk = attrs.evolve(plan, policy=ArtifactCleanupPolicy(max_deletions=1, dry_run=False))
    with pytest.raises(HostilePlanError):
        apply_cleanup(paths, shrunk, claims=[], now=NOW)
    assert len(os.listdir(paths.tool_results)) == 2


def test_a_planned_entry_without_snapshot_or_digest_is_refused(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    put(paths, 1, b"orphan")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW)
    for changes in ({"snapshot": None}, {"sha256": None}, {"status": "delete_everything"}):
        with pytest.raises(HostilePlanError):
            apply_cleanup(paths, _hostile(plan, **changes), claims=[], now=NOW)
    assert exists(paths, "tool_result_001.txt")


def test_a_plan_with_a_forged_digest_deletes_nothing(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"orphan")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW)
    forged = _hostile(plan, sha256="0" * 64)
    assert apply_cleanup(paths, forged, claims=[], now=NOW).entry(name).status == ("race_detected")
    assert exists(paths, name)


def test_a_plan_round_trips_through_its_dict(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    put(paths, 1, b"orphan")
    put(paths, 2, b"young", mtime=NOW)
    plan = plan_cleanup(
        paths, [claim_for(paths, "tool_result_005.txt", b"x")], policy=DELETE, now=NOW
    )
    assert CleanupPlan.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan


def test_a_plan_dict_with_a_tampered_name_is_refused(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    put(paths, 1, b"orphan")
    data = plan_cleanup(paths, [], policy=DELETE, now=NOW).to_dict()
    data["entries"][0]["name"] = "../../victim.txt"
    with pytest.raises(HostilePlanError):
        CleanupPlan.from_dict(data)
    data["entries"][0]["name"] = "tool_result_001.txt"
    data["extra"] = 1
    with pytest.raises(HostilePlanError):
        CleanupPlan.from_dict(data)


def test_a_plan_entry_is_a_plain_value() -> None:
    entry = PlanEntry(name="tool_result_001.txt", status="denied", reason="r")
    assert entry.to_dict()["snapshot"] is None


def test_a_plan_for_another_session_id_over_the_same_folder_is_refused(
    tmp_path: pathlib.Path,
) -> None:
    paths = make_session(tmp_path, "s1")
    name = put(paths, 1, b"orphan")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW)
    renamed = SessionPaths.at(paths.root, session_id="s2")
    with pytest.raises(HostilePlanError):
        apply_cleanup(renamed, plan, claims=[], now=NOW)
    assert exists(paths, name)


def test_a_plan_with_a_path_in_a_retained_entry_is_refused(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"orphan")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW)
    smuggled = PlanEntry(name="../../etc/passwd", status="denied", reason="r")
    with pytest.raises(HostilePlanError):
        apply_cleanup(paths, attrs.evolve(plan, entries=(*plan.entries, smuggled)), claims=[])
    assert exists(paths, name)


class LooksLikeSymlinkFS(OsFileSystem):
    """``lstat`` reports a symlink with otherwise identical facts (a type change only)."""

    def lstat(self, path: str) -> FileFacts:
        facts = super().lstat(path)
        if os.path.basename(path).startswith("tool_result_"):
            return attrs.evolve(facts, mode=stat.S_IFLNK | 0o777)
        return facts


def test_apply_rechecks_the_file_type_before_opening(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"orphan")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW)
    report = apply_cleanup(paths, plan, claims=[], now=NOW, fs=LooksLikeSymlinkFS())
    assert report.entry(name).status == "race_detected" and exists(paths, name)


def test_apply_rechecks_the_owner(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"orphan")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW)
    report = apply_cleanup(paths, plan, claims=[], now=NOW, fs=OtherUidFS())
    assert report.entry(name).status == "race_detected" and exists(paths, name)


def test_a_genuine_plan_with_odd_foreign_names_still_applies(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"orphan")
    for odd in ("a..b", "back\\slash", "..hidden"):
        (pathlib.Path(paths.tool_results) / odd).write_bytes(b"not ours")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW)
    assert plan.counts == {"denied": 3, "planned_delete": 1}
    assert apply_cleanup(paths, plan, claims=[], now=NOW).deleted == (name,)
    assert len(os.listdir(paths.tool_results)) == 3
