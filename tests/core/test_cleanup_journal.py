"""Journal-aware cleanup (docs/design.md sections 5 and 7): leases protect, corruption refuses (S1).

Each test states one claim.  The stress test races ``prepare`` against
plan + apply in two threads with separate journal objects (separate lock
handles, as two processes would have).
"""

from __future__ import annotations

import os
import pathlib
import random
import subprocess
import sys
import threading
import time

import pytest

from tests.core.test_cleanup import (
    DAY,
    DELETE,
    NOW,
    OLD,
    RecordingFS,
    claim_for,
    exists,
    make_session,
    put,
)
from toolswap.cleanup import (
    ArtifactCleanupPolicy,
    CleanupRefused,
    JournalRequiredError,
    apply_cleanup_from_journal,
    cleanup_session_from_journal,
    plan_cleanup,
    plan_cleanup_from_journal,
)
from toolswap.domain import ArtifactRetentionClaim
from toolswap.errors import UsageError
from toolswap.journal import ArtifactRetentionJournal, DanglingReferenceError
from toolswap.session import SessionPaths


def _journal(paths: SessionPaths) -> ArtifactRetentionJournal:
    return ArtifactRetentionJournal(paths.root, clock=lambda: NOW)


def _flip_byte_in_first_record(paths: SessionPaths) -> None:
    data = bytearray(pathlib.Path(paths.journal).read_bytes())
    position = data.index(b'"PREPARED"') + 2  # same size, same inode: an in-place edit
    data[position] ^= 0x01
    with open(paths.journal, "r+b") as handle:
        handle.write(bytes(data))


# -- what protects ----------------------------------------------------------------------


def test_a_prepared_lease_protects_an_old_orphan(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"in flight")
    journal = _journal(paths)
    journal.prepare(claim_for(paths, name, b"in flight"), "t1")
    plan = plan_cleanup_from_journal(paths, journal, policy=DELETE, now=NOW)
    assert plan.entry(name).status == "retained_referenced" and plan.journal_aware


def test_a_prepared_lease_with_an_expired_retain_until_still_protects(
    tmp_path: pathlib.Path,
) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"uncertain")
    journal = _journal(paths)
    journal.prepare(claim_for(paths, name, b"uncertain", retain_until=NOW - DAY), "t1")
    plan, report = cleanup_session_from_journal(paths, journal, policy=DELETE, now=NOW)
    assert plan.entry(name).status == "retained_referenced"
    assert report.entries == () and exists(paths, name)


def test_a_committed_lease_past_its_retain_until_no_longer_protects(
    tmp_path: pathlib.Path,
) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"done")
    journal = _journal(paths)
    journal.prepare(claim_for(paths, name, b"done", retain_until=NOW - 1), "t1")
    journal.commit("t1")
    plan, report = cleanup_session_from_journal(paths, journal, policy=DELETE, now=NOW)
    assert report.deleted == (name,) and not exists(paths, name)


def test_a_committed_lease_without_expiry_protects(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"kept")
    journal = _journal(paths)
    journal.prepare(claim_for(paths, name, b"kept", count=3), "t1")
    journal.commit("t1")
    entry = plan_cleanup_from_journal(paths, journal, policy=DELETE, now=NOW).entry(name)
    assert (entry.status, entry.reference_count) == ("retained_referenced", 3)


def test_aborted_and_released_leases_do_not_protect(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    aborted = put(paths, 1, b"aborted")
    released = put(paths, 2, b"released")
    journal = _journal(paths)
    journal.prepare(claim_for(paths, aborted, b"aborted"), "t1")
    journal.abort("t1")
    journal.prepare(claim_for(paths, released, b"released"), "t2")
    journal.commit("t2")
    journal.release("t2")
    plan = plan_cleanup_from_journal(paths, journal, policy=DELETE, now=NOW)
    assert plan.counts == {"planned_delete": 2}


def test_a_lease_protects_its_own_file_not_a_twin_with_equal_bytes(
    tmp_path: pathlib.Path,
) -> None:
    paths = make_session(tmp_path)
    leased = put(paths, 2, b"twin")
    twin = put(paths, 1, b"twin")
    journal = _journal(paths)
    journal.prepare(claim_for(paths, leased, b"twin"), "t1")
    plan, report = cleanup_session_from_journal(paths, journal, policy=DELETE, now=NOW)
    assert plan.entry(leased).status == "retained_referenced"
    assert report.deleted == (twin,) and exists(paths, leased)


def test_a_lease_whose_file_is_gone_is_missing_referenced(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"will vanish")
    journal = _journal(paths)
    journal.prepare(claim_for(paths, name, b"will vanish"), "t1")
    os.unlink(os.path.join(paths.tool_results, name))
    plan = plan_cleanup_from_journal(paths, journal, policy=DELETE, now=NOW)
    assert plan.entry(name).status == "missing_referenced"


def test_a_lease_prepared_after_the_plan_keeps_the_file(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"late lease")
    journal = _journal(paths)
    plan = plan_cleanup_from_journal(paths, journal, policy=DELETE, now=NOW)
    assert plan.entry(name).status == "planned_delete"
    _journal(paths).prepare(claim_for(paths, name, b"late lease"), "t1")  # another "process"
    report = apply_cleanup_from_journal(paths, plan, journal, now=NOW)
    assert report.entry(name).status == "retained_referenced" and exists(paths, name)


def test_raw_cleanup_refuses_once_a_lease_was_written(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"leased")
    _journal(paths).prepare(claim_for(paths, name, b"leased"), "t1")
    with pytest.raises(JournalRequiredError):
        plan_cleanup(paths, [], policy=DELETE, now=NOW)
    assert exists(paths, name)


def test_a_journal_of_another_session_is_refused(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path, "s1")
    other = make_session(tmp_path, "s2")
    with pytest.raises(UsageError):
        plan_cleanup_from_journal(paths, _journal(other), policy=DELETE, now=NOW)


def test_a_torn_tail_is_not_corruption(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"orphan")
    journal = _journal(paths)
    journal.prepare(claim_for(paths, put(paths, 2, b"kept"), b"kept"), "t1")
    with open(paths.journal, "ab") as handle:
        handle.write(b'{"version":1,"seq')
    plan = plan_cleanup_from_journal(paths, journal, policy=DELETE, now=NOW)
    assert plan.entry(name).status == "planned_delete"


# -- corruption refuses -------------------------------------------------------------------


def test_a_corrupt_journal_makes_planning_refuse_and_deletes_nothing(
    tmp_path: pathlib.Path,
) -> None:
    paths = make_session(tmp_path)
    orphan = put(paths, 1, b"orphan")
    journal = _journal(paths)
    journal.prepare(claim_for(paths, put(paths, 2, b"kept"), b"kept"), "t1")
    _flip_byte_in_first_record(paths)
    with pytest.raises(CleanupRefused):
        cleanup_session_from_journal(paths, journal, policy=DELETE, now=NOW)
    assert exists(paths, orphan)


def test_a_journal_corrupted_in_place_after_the_plan_makes_apply_refuse(
    tmp_path: pathlib.Path,
) -> None:
    paths = make_session(tmp_path)
    orphan = put(paths, 1, b"orphan")
    journal = _journal(paths)
    journal.prepare(claim_for(paths, put(paths, 2, b"kept"), b"kept"), "t1")
    plan = plan_cleanup_from_journal(paths, journal, policy=DELETE, now=NOW)
    assert plan.entry(orphan).status == "planned_delete"
    _flip_byte_in_first_record(paths)
    with pytest.raises(CleanupRefused):
        apply_cleanup_from_journal(paths, plan, journal, now=NOW)
    assert exists(paths, orphan)


def test_a_garbage_line_appended_after_the_plan_makes_apply_refuse(
    tmp_path: pathlib.Path,
) -> None:
    paths = make_session(tmp_path)
    orphan = put(paths, 1, b"orphan")
    journal = _journal(paths)
    journal.prepare(claim_for(paths, put(paths, 2, b"kept"), b"kept"), "t1")
    plan = plan_cleanup_from_journal(paths, journal, policy=DELETE, now=NOW)
    with open(paths.journal, "ab") as handle:
        handle.write(b"not json\n")
    with pytest.raises(CleanupRefused):
        apply_cleanup_from_journal(paths, plan, journal, now=NOW)
    assert exists(paths, orphan)


# -- the lock is held through re-validation and deletion ------------------------------------


class PrepareAtRevalidateFS(RecordingFS):
    """At ``cleanup.after_revalidate``, start a prepare in another thread and watch it wait."""

    def __init__(self, start_prepare: threading.Event) -> None:
        super().__init__()
        self.start_prepare = start_prepare
        self.prepare_finished_early = False
        self.prepare_done = threading.Event()

    def crash_point(self, name: str) -> None:
        super().crash_point(name)
        if name == "cleanup.after_revalidate":
            self.start_prepare.set()
            self.prepare_finished_early = self.prepare_done.wait(0.3)


def test_prepare_waits_while_apply_revalidates_and_then_refuses(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    name = put(paths, 1, b"contested")
    claim = claim_for(paths, name, b"contested")
    start = threading.Event()
    fs = PrepareAtRevalidateFS(start)
    journal = ArtifactRetentionJournal(paths.root, fs=fs, clock=lambda: NOW)
    other = _journal(paths)  # a separate lock handle, as another process has
    outcome: list[BaseException | str] = []

    def prepare() -> None:
        start.wait(5)
        try:
            other.prepare(claim, "t1")
            outcome.append("prepared")
        except BaseException as exc:  # the test inspects it
            outcome.append(exc)
        fs.prepare_done.set()

    worker = threading.Thread(target=prepare)
    worker.start()
    plan = plan_cleanup_from_journal(paths, journal, policy=DELETE, now=NOW)
    report = apply_cleanup_from_journal(paths, plan, journal, now=NOW, fs=fs)
    worker.join(5)
    assert not fs.prepare_finished_early  # it could not append inside apply's lock
    assert report.deleted == (name,)
    assert len(outcome) == 1 and isinstance(outcome[0], DanglingReferenceError)


# -- stress: prepare races plan + apply -----------------------------------------------------


def _race_round(
    paths: SessionPaths,
    preparer: ArtifactRetentionJournal,
    cleaner: ArtifactRetentionJournal,
    claim: ArtifactRetentionClaim,
    delays: tuple[float, float],
) -> tuple[str, list[BaseException]]:
    """Run one prepare and one plan + apply at once; 'prepared' or 'refused'."""
    policy = ArtifactCleanupPolicy(orphan_ttl_seconds=3600, max_deletions=10_000, dry_run=False)
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []
    outcome: list[str] = []

    def prepare() -> None:
        barrier.wait()
        time.sleep(delays[0])
        try:
            preparer.prepare(claim, f"t-{claim.source_id}")
            outcome.append("prepared")
        except DanglingReferenceError:
            outcome.append("refused")
        except BaseException as exc:
            errors.append(exc)

    def clean() -> None:
        barrier.wait()
        time.sleep(delays[1])
        try:
            cleanup_session_from_journal(paths, cleaner, policy=policy)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=prepare), threading.Thread(target=clean)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    return (outcome[0] if outcome else "lost"), errors


def test_stress_an_artifact_whose_prepare_succeeded_is_never_deleted(
    tmp_path: pathlib.Path,
) -> None:
    paths = make_session(tmp_path)
    rng = random.Random(5)
    cleaner = ArtifactRetentionJournal(paths.root)
    preparer = ArtifactRetentionJournal(paths.root)  # its own lock handle, like a process
    prepared: list[str] = []
    refused: list[str] = []
    for number in range(1, 81):
        data = b"orphan %d\n" % number
        name = put(paths, number, data, mtime=time.time() - 7200)
        delays = (rng.random() * 0.002, rng.random() * 0.002)
        outcome, errors = _race_round(
            paths, preparer, cleaner, claim_for(paths, name, data), delays
        )
        assert errors == [] and outcome in {"prepared", "refused"}
        (prepared if outcome == "prepared" else refused).append(name)
        # prepare succeeded <=> the artifact survived; prepare refused <=> it was deleted
        assert (outcome == "prepared") == exists(paths, name)
    assert all(exists(paths, name) for name in prepared)  # and later rounds never took them
    assert not any(exists(paths, name) for name in refused)
    # Both interleavings happened, so the race was really exercised.
    assert prepared and refused, (len(prepared), len(refused))


# -- the externalizer delegates ---------------------------------------------------------------


def test_the_externalizer_methods_plan_and_apply_from_the_journal(tmp_path: pathlib.Path) -> None:
    from toolswap.externalizer import ToolResultExternalizer

    ext = ToolResultExternalizer(tmp_path / "s1", clock=lambda: NOW)
    kept = ext.externalize("k" * 40_000, "bash")
    dropped = ext.externalize("d" * 40_000, "bash")
    assert kept.artifact is not None and dropped.artifact is not None
    for result in (kept, dropped):
        assert result.artifact is not None
        os.utime(result.artifact.path, (OLD, OLD))
    journal = ArtifactRetentionJournal(tmp_path / "s1", clock=lambda: NOW)
    claim = ArtifactRetentionClaim.from_memory_reference(kept.artifact.for_memory())
    journal.prepare(claim, "t1")
    plan = ext.plan_cleanup_from_journal(journal, policy=DELETE)
    report = ext.apply_cleanup_from_journal(plan, journal)
    assert report.deleted == (os.path.basename(dropped.artifact.path),)
    assert ext.read_artifact(kept.artifact, limit=1, max_bytes=64 * 1024) == "k" * 40_000
    with pytest.raises(JournalRequiredError):
        ext.apply_cleanup(plan, claims=[claim])


_CHILD = r"""
import os, random, sys, time
from toolswap.domain import ArtifactRetentionClaim
from toolswap.journal import ArtifactRetentionJournal, DanglingReferenceError

root, rounds = sys.argv[1], int(sys.argv[2])
journal = ArtifactRetentionJournal(root)
rng = random.Random(7)
for number in range(1, rounds + 1):
    go = os.path.join(root, f"go-{number}")
    while not os.path.exists(go):
        time.sleep(0.0005)
    source_id, digest = open(go).read().split()
    time.sleep(rng.random() * 0.003)
    try:
        journal.prepare(ArtifactRetentionClaim(source_id=source_id, content_sha256=digest))
        print(number, "prepared", flush=True)
    except DanglingReferenceError:
        print(number, "refused", flush=True)
"""


def test_stress_across_processes_a_prepared_artifact_is_never_deleted(
    tmp_path: pathlib.Path,
) -> None:
    paths = make_session(tmp_path)
    rounds = 40
    policy = ArtifactCleanupPolicy(orphan_ttl_seconds=3600, max_deletions=10_000, dry_run=False)
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, paths.root, str(rounds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    cleaner = ArtifactRetentionJournal(paths.root)
    rng = random.Random(11)
    outcomes: dict[str, str] = {}
    try:
        for number in range(1, rounds + 1):
            data = b"orphan %d\n" % number
            name = put(paths, number, data, mtime=time.time() - 7200)
            claim = claim_for(paths, name, data)
            go = pathlib.Path(paths.root) / f"go-{number}"
            go.with_suffix(".tmp").write_text(f"{claim.source_id} {claim.content_sha256}")
            os.rename(go.with_suffix(".tmp"), go)  # the child never sees a half-written file
            time.sleep(rng.random() * 0.003)
            cleanup_session_from_journal(paths, cleaner, policy=policy)
            line = child.stdout.readline().split()
            assert line[0] == str(number), line
            outcomes[name] = line[1]
            assert (line[1] == "prepared") == exists(paths, name)
    finally:
        child.wait(30)
    assert child.returncode == 0
    assert all(exists(paths, n) == (o == "prepared") for n, o in outcomes.items())
    assert set(outcomes.values()) == {"prepared", "refused"}, outcomes
