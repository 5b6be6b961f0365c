"""Reconciliation: every row of the DESIGN section 6 table, with both owners.

Invariants: S3 tombstone before abort, S5 one terminal event, O7 reports carry
no path, content or credential.
"""

from __future__ import annotations

import json
import pathlib
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from toolswap.fs import OsFileSystem
from toolswap.journal import ArtifactRetentionJournal, Phase, UnknownTransactionError
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
    assert journal.recover().states["t1"] is Phase.COMMITTED


def test_row_published_with_another_identity_stays_pending(
    session: pathlib.Path, owner: Any
) -> None:
    claim = make_artifact(session, b"one\n", 1)
    other = make_artifact(session, b"two\n", 2)
    journal = ArtifactRetentionJournal(session)
    journal.prepare(claim, "t1")
    owner.publish("t1", other)
    before = file_bytes(journal.path)
    report = journal.reconcile_reference("t1", owner)
    assert report.status is ReconcileStatus.PENDING_CONFLICT
    assert file_bytes(journal.path) == before
    assert journal.recover().pending_transaction_ids == ("t1",)


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
    assert journal.recover().states["t1"] is Phase.PREPARED


def test_row_unsealed_absence_is_sealed_then_aborted(session: pathlib.Path, owner: Any) -> None:
    claim = make_artifact(session)
    journal = ArtifactRetentionJournal(session)
    journal.prepare(claim, "t1")
    report = journal.reconcile_reference("t1", owner)
    assert (report.status, report.generation) == (ReconcileStatus.ABORTED, 0)
    assert journal.recover().states["t1"] is Phase.ABORTED
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
    assert rec.states["t1"] is Phase.PREPARED and claim.content_sha256 in rec.active_claims()
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
    content = b"SECRET-CONTENT password=hunter2\n"
    claim = make_artifact(session, content)
    journal = ArtifactRetentionJournal(session)
    journal.prepare(claim, "t1")
    journal.prepare(claim, "t2")
    owner.publish("t2", claim)
    for report in journal.reconcile_pending(owner) + journal.reconcile_pending(
        BrokenInspectOwner(owner)
    ):
        data = report.to_dict()
        assert set(data) == {"transaction_id", "status", "reason", "generation"}
        text = json.dumps(data)
        assert str(tmp_path) not in text and "tool_result" not in text
        assert "SECRET" not in text and "hunter2" not in text


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
