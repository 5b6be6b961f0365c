"""Reconciliation: every row of the docs/design.md section 6 table, with both owners.

Invariants: S3 tombstone before abort, S5 one terminal event, O7 reports carry
no path, content or credential.
"""

from __future__ import annotations

import json
import multiprocessing
import pathlib
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import attrs
import pytest
from toolswap.spec.lease import LeaseState

from toolswap.fs import OsFileSystem
from toolswap.journal import ArtifactRetentionJournal, UnknownTransactionError
from toolswap.owner import (
    ArtifactPublicationRejected,
    ObservedState,
    ReconcileStatus,
    owner_publisher,
)
from toolswap.owners.memory import InMemoryOwner
from toolswap.owners.sqlite import SQLiteOwner

from ._journal_support import (
    BrokenInspectOwner,
    CountingSealOwner,
    LostAckOwner,
    StaleOwner,
    UnknownOwner,
    file_bytes,
    make_artifact,
    reconcile_once,
)


class Crash(BaseException):
    """A simulated process death at a named crash point."""


class CrashAt(OsFileSystem):
    def __init__(self, point: str) -> None:
        self.point = point

    def crash_point(self, name: str) -> None:
        if name == self.point:
            raise Crash(name)


@pytest.fixture(params=["memory", "sqlite"])
def owner(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Iterator[Any]:
    if request.param == "memory":
        yield InMemoryOwner()
    else:
        with SQLiteOwner(tmp_path / "owner.db") as db:
            yield db


@pytest.fixture
def session(tmp_path: pathlib.Path) -> pathlib.Path:
    return tmp_path / "s1"


def _records(session: pathlib.Path) -> list[dict[str, Any]]:
    data = file_bytes(session / "retention-leases.jsonl")
    return [json.loads(line) for line in data.split(b"\n")[:-1]]


def _terminal_count(session: pathlib.Path, txn: str) -> int:
    return sum(
        1 for r in _records(session) if r["transaction_id"] == txn and r["phase"] != "PREPARED"
    )


def test_row_published_matching_identity_commits(session: pathlib.Path, owner: Any) -> None:
    """A lost acknowledgement: durable in the owner, the caller saw TimeoutError."""
    claim = make_artifact(session)
    journal = ArtifactRetentionJournal(session)
    flaky = LostAckOwner(owner)
    with pytest.raises(TimeoutError):
        journal.publish_reference(claim, owner_publisher(flaky, "t1", claim), transaction_id="t1")
    assert ArtifactRetentionJournal(session).recover().pending_transaction_ids == ("t1",)
    report = ArtifactRetentionJournal(session).reconcile_reference("t1", owner)
    assert (report.status, report.generation) == (ReconcileStatus.COMMITTED, 1)
    assert journal.recover().states["t1"] is LeaseState.COMMITTED


@pytest.mark.parametrize("differs", ["source_and_digest", "source_only", "digest_only"])
def test_row_published_with_another_identity_stays_pending(
    session: pathlib.Path, owner: Any, differs: str
) -> None:
    """Both halves of the identity must match: either one differing is a conflict."""
    claim = make_artifact(session, b"one\n", 1)
    if differs == "source_and_digest":
        other = make_artifact(session, b"two\n", 2)
    elif differs == "source_only":  # a twin file with equal bytes
        other = make_artifact(session, b"one\n", 2)
    else:  # the same source id (same 12-hex prefix), another full digest
        flipped = "0" if claim.content_sha256[-1] != "0" else "1"
        other = attrs.evolve(claim, content_sha256=claim.content_sha256[:-1] + flipped)
    journal = ArtifactRetentionJournal(session)
    journal.prepare(claim, "t1")
    owner.publish("t1", other)
    report = journal.reconcile_reference("t1", owner)
    assert report.status is ReconcileStatus.PENDING_CONFLICT
    conflicts = [r for r in _records(session) if r["phase"] == "CONFLICT"]
    assert [c["intent"] for c in conflicts] == [
        {"source_id": other.source_id, "content_sha256": other.content_sha256}
    ]
    recovery = journal.recover()
    assert recovery.pending_transaction_ids == ("t1",)
    assert recovery.states["t1"] is LeaseState.PREPARED  # a note, not a phase change
    before = file_bytes(journal.path)
    assert journal.reconcile_reference("t1", owner).status is ReconcileStatus.PENDING_CONFLICT
    assert file_bytes(journal.path) == before  # the same conflict is recorded once


# -- issue 14 item 4: the artifact a conflict names stays protected (S1) ------------


def _gc_now(session: pathlib.Path, journal: ArtifactRetentionJournal) -> Any:
    """``toolswap gc apply --ttl 0s`` in API form."""
    from toolswap.cleanup import (
        ArtifactCleanupPolicy,
        apply_cleanup_from_journal,
        plan_cleanup_from_journal,
    )
    from toolswap.session import SessionPaths

    paths = SessionPaths.at(session)
    policy = ArtifactCleanupPolicy(orphan_ttl_seconds=0, dry_run=False)
    plan = plan_cleanup_from_journal(paths, journal, policy=policy)
    return apply_cleanup_from_journal(paths, plan, journal)


def test_gc_keeps_the_artifact_a_conflict_names(session: pathlib.Path, owner: Any) -> None:
    intended = make_artifact(session, b"one\n", 1)
    shown = make_artifact(session, b"two\n", 2)
    journal = ArtifactRetentionJournal(session)
    journal.prepare(intended, "t1")
    owner.publish("t1", shown)  # the owner shows t1 -> 002; the journal intended 001
    assert journal.reconcile_reference("t1", owner).status is ReconcileStatus.PENDING_CONFLICT
    _gc_now(session, journal)
    results = session / "tool-results"
    assert (results / "tool_result_001.txt").exists()
    assert (results / "tool_result_002.txt").exists()


def test_without_the_conflict_record_gc_deletes_what_the_owner_shows(
    session: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mutant the test above must catch: ``pending_conflict`` reported, nothing recorded."""
    monkeypatch.setattr(
        ArtifactRetentionJournal, "_record_conflict", lambda self, txn, observation, now: True
    )
    with pytest.raises(AssertionError):
        test_gc_keeps_the_artifact_a_conflict_names(session, InMemoryOwner())
    assert not (session / "tool-results" / "tool_result_002.txt").exists()


def test_a_conflict_stops_protecting_once_the_lease_is_aborted(
    session: pathlib.Path,
) -> None:
    owner = InMemoryOwner()
    intended = make_artifact(session, b"one\n", 1)
    shown = make_artifact(session, b"two\n", 2)
    journal = ArtifactRetentionJournal(session)
    journal.prepare(intended, "t1")
    owner.publish("t1", shown)
    journal.reconcile_reference("t1", owner)
    owner.remove("t1")  # the operator fixed the owner: the reference is gone
    assert journal.reconcile_reference("t1", owner).status is ReconcileStatus.ABORTED
    assert journal.recover().protecting_claims() == []
    _gc_now(session, journal)
    assert not (session / "tool-results" / "tool_result_002.txt").exists()


def test_a_foreign_observed_identity_is_recorded_and_protects_nothing(
    session: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    owner = InMemoryOwner()
    intended = make_artifact(session, b"one\n", 1)
    foreign = make_artifact(tmp_path / "other-session", b"two\n", 2)
    journal = ArtifactRetentionJournal(session)
    journal.prepare(intended, "t1")
    owner.publish("t1", foreign)
    report = journal.reconcile_reference("t1", owner)
    assert report.status is ReconcileStatus.PENDING_CONFLICT
    assert "nothing protected" in report.reason
    recovery = journal.recover()
    assert [c.source_id for c in recovery.conflicts["t1"]] == [foreign.source_id]
    assert [c.source_id for c in recovery.protecting_claims()] == [intended.source_id]
    _gc_now(session, journal)  # a foreign id is never a path: the plan does not refuse
    assert (session / "tool-results" / "tool_result_001.txt").exists()


def test_row_unknown_stays_pending(session: pathlib.Path, owner: Any) -> None:
    journal = ArtifactRetentionJournal(session)
    journal.prepare(make_artifact(session), "t1")
    before = file_bytes(journal.path)
    report = journal.reconcile_reference("t1", UnknownOwner(owner))
    assert report.status is ReconcileStatus.PENDING_UNKNOWN
    assert file_bytes(journal.path) == before
    with owner.inspect_fenced("t1") as seen:
        assert (seen.state, seen.sealed) == (ObservedState.ABSENT, False), "UNKNOWN never seals"


def test_row_owner_failure_is_unknown_not_absence(session: pathlib.Path, owner: Any) -> None:
    journal = ArtifactRetentionJournal(session)
    journal.prepare(make_artifact(session), "t1")
    report = journal.reconcile_reference("t1", BrokenInspectOwner(owner))
    assert report.status is ReconcileStatus.PENDING_UNKNOWN
    assert "ConnectionError" in report.reason
    assert journal.recover().states["t1"] is LeaseState.PREPARED


def test_row_unsealed_absence_is_sealed_then_aborted(session: pathlib.Path, owner: Any) -> None:
    claim = make_artifact(session)
    journal = ArtifactRetentionJournal(session)
    journal.prepare(claim, "t1")
    report = journal.reconcile_reference("t1", owner)
    assert (report.status, report.generation) == (ReconcileStatus.ABORTED, 0)
    assert journal.recover().states["t1"] is LeaseState.ABORTED
    with pytest.raises(ArtifactPublicationRejected):
        owner.publish("t1", claim)  # the late write is refused forever


def test_s3_the_tombstone_is_durable_before_aborted(session: pathlib.Path, owner: Any) -> None:
    """Crash between the seal and the ABORTED append: still PREPARED, owner sealed; the rerun
    finishes with ABORTED and no second seal."""
    claim = make_artifact(session)
    ArtifactRetentionJournal(session).prepare(claim, "t1")
    crashing = ArtifactRetentionJournal(session, fs=CrashAt("reconcile.after_tombstone"))
    with pytest.raises(Crash):
        crashing.reconcile_reference("t1", owner)
    rec = ArtifactRetentionJournal(session).recover()
    assert rec.states["t1"] is LeaseState.PREPARED
    assert [c.source_id for c in rec.protecting_claims(rec.observed_at)] == [claim.source_id]
    with owner.inspect_fenced("t1") as seen:
        assert seen.sealed is True
        generation = seen.generation
    counting = CountingSealOwner(owner)
    report = ArtifactRetentionJournal(session).reconcile_reference("t1", counting)
    assert (report.status, report.generation) == (ReconcileStatus.ABORTED, generation)
    assert counting.seals == 0, "an already sealed absence is not sealed again"
    with owner.inspect_fenced("t1") as seen:
        assert seen.generation == generation


def test_row_generation_moved_before_the_seal_stays_pending(
    session: pathlib.Path, owner: Any
) -> None:
    journal = ArtifactRetentionJournal(session)
    journal.prepare(make_artifact(session), "t1")
    before = file_bytes(journal.path)
    report = journal.reconcile_reference("t1", StaleOwner(owner))
    assert report.status is ReconcileStatus.PENDING_STALE
    assert file_bytes(journal.path) == before
    with owner.inspect_fenced("t1") as seen:
        assert seen.sealed is False


def test_row_already_sealed_absence_aborts(session: pathlib.Path, owner: Any) -> None:
    journal = ArtifactRetentionJournal(session)
    journal.prepare(make_artifact(session), "t1")
    owner.remove("t1")  # e.g. an operator tombstoned it
    counting = CountingSealOwner(owner)
    report = journal.reconcile_reference("t1", counting)
    assert report.status is ReconcileStatus.ABORTED and counting.seals == 0


@pytest.mark.parametrize(
    ("setup", "status"),
    [
        ("commit", ReconcileStatus.ALREADY_COMMITTED),
        ("abort", ReconcileStatus.ALREADY_ABORTED),
        ("release", ReconcileStatus.ALREADY_RELEASED),
    ],
)
def test_row_already_terminal_does_nothing(
    session: pathlib.Path, owner: Any, setup: str, status: ReconcileStatus
) -> None:
    journal = ArtifactRetentionJournal(session)
    journal.prepare(make_artifact(session), "t1")
    if setup in {"commit", "release"}:
        journal.commit("t1")
    if setup == "release":
        journal.release("t1")
    if setup == "abort":
        journal.abort("t1")
    before = file_bytes(journal.path)
    counting = CountingSealOwner(owner)
    assert journal.reconcile_reference("t1", counting).status is status
    assert journal.reconcile_reference("t1", BrokenInspectOwner(owner)).status is status
    assert file_bytes(journal.path) == before and counting.seals == 0


def test_reconcile_is_idempotent(session: pathlib.Path, owner: Any) -> None:
    journal = ArtifactRetentionJournal(session)
    journal.prepare(make_artifact(session), "t1")
    assert journal.reconcile_reference("t1", owner).status is ReconcileStatus.ABORTED
    assert journal.reconcile_reference("t1", owner).status is ReconcileStatus.ALREADY_ABORTED
    assert _terminal_count(session, "t1") == 1


def test_unknown_transaction_is_a_usage_error(session: pathlib.Path, owner: Any) -> None:
    with pytest.raises(UnknownTransactionError):
        ArtifactRetentionJournal(session).reconcile_reference("ghost", owner)


def test_reconcile_pending_handles_each_pending_lease_once(
    session: pathlib.Path, owner: Any
) -> None:
    claim = make_artifact(session)
    journal = ArtifactRetentionJournal(session)
    for txn in ("published", "absent", "done"):
        journal.prepare(claim, txn)
    journal.commit("done")
    owner.publish("published", claim)
    reports = journal.reconcile_pending(owner)
    assert {r.transaction_id: r.status for r in reports} == {
        "published": ReconcileStatus.COMMITTED,
        "absent": ReconcileStatus.ABORTED,
    }
    assert journal.reconcile_pending(owner) == []
    rec = journal.recover()
    assert rec.pending_transaction_ids == ()


def test_reports_carry_no_path_content_or_credential(
    session: pathlib.Path, owner: Any, tmp_path: pathlib.Path
) -> None:
    """Every status a report can have (pending ones first, then terminal and already_*)."""
    content = b"SECRET-CONTENT password=hunter2\n"
    claim = make_artifact(session, content)
    twin = make_artifact(session, content, 2)
    journal = ArtifactRetentionJournal(session)
    for txn in ("absent", "published", "conflict", "done"):
        journal.prepare(claim, txn)
    journal.commit("done")
    owner.publish("published", claim)
    owner.publish("conflict", twin)
    reports = []
    for flaky in (BrokenInspectOwner, UnknownOwner, StaleOwner):
        reports += journal.reconcile_pending(flaky(owner))
    reports += journal.reconcile_pending(owner)
    reports.append(journal.reconcile_reference("done", owner))
    statuses = {r.status.value for r in reports}
    assert statuses == {
        "pending_unknown",
        "pending_stale",
        "pending_conflict",
        "committed",
        "aborted",
        "already_committed",
    }
    for report in reports:
        data = report.to_dict()
        assert set(data) == {"transaction_id", "status", "reason", "generation"}
        text = json.dumps(data)
        assert str(tmp_path) not in text and "tool_result" not in text
        assert "SECRET" not in text and "hunter2" not in text and claim.content_sha256 not in text


def test_unknown_is_never_sealed_even_by_a_permissive_adapter(session: pathlib.Path) -> None:
    """UNKNOWN is not ABSENT: the journal itself never asks for a seal (S1, S3)."""
    journal = ArtifactRetentionJournal(session)
    journal.prepare(make_artifact(session), "t1")
    permissive = _OddAnswers(state=ObservedState.UNKNOWN, seal_answer=True)
    assert journal.reconcile_reference("t1", permissive).status is ReconcileStatus.PENDING_UNKNOWN
    assert permissive.seals == 0
    assert journal.recover().states["t1"] is LeaseState.PREPARED


@pytest.mark.parametrize("absent", [True, False])
def test_concurrent_reconcilers_write_at_most_one_terminal_event(
    session: pathlib.Path, tmp_path: pathlib.Path, owner: Any, absent: bool
) -> None:
    """S5: eight reconcilers (own journal objects, own owner connections) race on one lease."""
    claim = make_artifact(session)
    ArtifactRetentionJournal(session).prepare(claim, "t1")

    def make_owner() -> Any:
        return owner if isinstance(owner, InMemoryOwner) else SQLiteOwner(tmp_path / "owner.db")

    if not absent:
        owner.publish("t1", claim)
    statuses: list[ReconcileStatus] = []
    barrier = threading.Barrier(8)

    def reconcile() -> None:
        own = make_owner()
        journal = ArtifactRetentionJournal(session)
        barrier.wait()
        statuses.append(journal.reconcile_reference("t1", own).status)

    threads = [threading.Thread(target=reconcile) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    winner = ReconcileStatus.ABORTED if absent else ReconcileStatus.COMMITTED
    loser = ReconcileStatus.ALREADY_ABORTED if absent else ReconcileStatus.ALREADY_COMMITTED
    assert sorted(statuses) == sorted([winner] + [loser] * 7)
    assert _terminal_count(session, "t1") == 1


def test_sealed_tombstone_refuses_publish_after_sqlite_reopen(
    session: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    claim = make_artifact(session)
    db = tmp_path / "memory.db"
    journal = ArtifactRetentionJournal(session)
    journal.prepare(claim, "t1")
    with SQLiteOwner(db) as first:
        assert journal.reconcile_reference("t1", first).status is ReconcileStatus.ABORTED
    with SQLiteOwner(db) as reopened:
        with pytest.raises(ArtifactPublicationRejected):
            reopened.publish("t1", claim)
        with reopened.inspect_fenced("t1") as seen:
            assert seen.sealed is True


class _OddAnswers:
    """A sloppy adapter: no precondition checks in ``seal_absence``, and ``sealed`` or
    the seal's answer may be something other than a real bool (bending O6/O8)."""

    def __init__(
        self, *, sealed: Any = False, seal_answer: Any = True, state: Any = ObservedState.ABSENT
    ) -> None:
        self.state = state
        self.sealed = sealed
        self.seal_answer = seal_answer
        self.seals = 0

    def publish(self, transaction_id: str, claim: Any) -> None:
        raise AssertionError("not used")

    def remove(self, transaction_id: str) -> None:
        raise AssertionError("not used")

    @contextmanager
    def inspect_fenced(self, transaction_id: str) -> Iterator[Any]:
        outer = self

        class Observation:
            state = outer.state
            source_id = None
            content_sha256 = None
            generation = 3
            sealed = outer.sealed

            def __init__(self) -> None:
                self.transaction_id = transaction_id

            def seal_absence(self) -> Any:
                outer.seals += 1
                return outer.seal_answer

        yield Observation()


@pytest.mark.parametrize("answer", [None, 1, "yes"])
def test_a_seal_answer_that_is_not_true_or_false_stays_pending(
    session: pathlib.Path, answer: Any
) -> None:
    journal = ArtifactRetentionJournal(session)
    journal.prepare(make_artifact(session), "t1")
    before = file_bytes(journal.path)
    odd = _OddAnswers(seal_answer=answer)
    assert journal.reconcile_reference("t1", odd).status is ReconcileStatus.PENDING_UNKNOWN
    assert odd.seals == 1 and file_bytes(journal.path) == before


@pytest.mark.parametrize("sealed", [1, "yes"])
def test_a_sealed_flag_that_is_not_a_bool_is_not_trusted(
    session: pathlib.Path, sealed: Any
) -> None:
    """Only ``sealed is True`` skips the seal; anything else must be sealed first."""
    journal = ArtifactRetentionJournal(session)
    journal.prepare(make_artifact(session), "t1")
    odd = _OddAnswers(sealed=sealed, seal_answer=False)
    assert journal.reconcile_reference("t1", odd).status is ReconcileStatus.PENDING_STALE
    assert odd.seals == 1 and journal.recover().states["t1"] is LeaseState.PREPARED


def test_reconcile_pending_leaves_a_lease_prepared_during_the_call_for_later(
    session: pathlib.Path, owner: Any
) -> None:
    claim = make_artifact(session)
    journal = ArtifactRetentionJournal(session)
    journal.prepare(claim, "early")

    class PrepareWhileInspecting:
        def publish(self, transaction_id: str, c: Any) -> object:
            return owner.publish(transaction_id, c)

        def remove(self, transaction_id: str) -> None:
            owner.remove(transaction_id)

        @contextmanager
        def inspect_fenced(self, transaction_id: str) -> Iterator[Any]:
            ArtifactRetentionJournal(session).prepare(claim, "late")
            with owner.inspect_fenced(transaction_id) as seen:
                yield seen

    reports = journal.reconcile_pending(PrepareWhileInspecting())
    assert [r.transaction_id for r in reports] == ["early"]
    assert journal.recover().pending_transaction_ids == ("late",)


def test_a_locked_sqlite_owner_is_pending_unknown_and_writes_nothing(
    session: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    db = tmp_path / "owner.db"
    SQLiteOwner(db).close()
    journal = ArtifactRetentionJournal(session)
    journal.prepare(make_artifact(session), "t1")
    before = file_bytes(journal.path)
    outsider = sqlite3.connect(db, isolation_level=None)
    outsider.execute("BEGIN IMMEDIATE")
    try:
        with SQLiteOwner(db, timeout=0.05) as busy:
            report = journal.reconcile_reference("t1", busy)
    finally:
        outsider.execute("ROLLBACK")
        outsider.close()
    assert report.status is ReconcileStatus.PENDING_UNKNOWN
    assert "OwnerStoreError" in report.reason and str(tmp_path) not in report.reason
    assert file_bytes(journal.path) == before


@pytest.mark.slow
def test_reconcilers_in_several_processes_write_one_terminal_event(
    session: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    """S5 across processes on one SQLite file and one journal."""
    db = tmp_path / "owner.db"
    SQLiteOwner(db).close()
    ArtifactRetentionJournal(session).prepare(make_artifact(session), "t1")
    context = multiprocessing.get_context("spawn")
    manager = context.Manager()
    go = manager.Event()
    with context.Pool(3) as pool:
        pending = [
            pool.apply_async(reconcile_once, (str(session), str(db), "t1", go)) for _ in range(3)
        ]
        go.set()
        statuses = sorted(p.get(timeout=120) for p in pending)
    manager.shutdown()
    assert statuses == ["aborted", "already_aborted", "already_aborted"]
    assert _terminal_count(session, "t1") == 1


def test_reconciling_an_unknown_id_of_a_missing_session_creates_nothing(
    tmp_path: pathlib.Path,
) -> None:
    journal = ArtifactRetentionJournal(tmp_path / "never-made")
    with pytest.raises(UnknownTransactionError):
        journal.reconcile_reference("t1", InMemoryOwner())
    assert not (tmp_path / "never-made").exists()
