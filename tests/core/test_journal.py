"""Lease journal operations (docs/design.md section 5): order, refusals, idempotence, concurrency.

Invariants: S2 prepare before publish, S4 remove before release, S5 one terminal
event, S6 append-only evidence, S1 via "PREPARED protects with no expiry".
"""

from __future__ import annotations

import json
import multiprocessing
import os
import pathlib
import threading
from typing import Any

import pytest
from toolswap.spec.lease import LeaseState

from toolswap.cleanup import ArtifactCleanupPolicy, plan_cleanup_from_journal
from toolswap.errors import (
    ArtifactIntegrityError,
    ArtifactNotOwnedError,
    InvalidSourceId,
    UsageError,
)
from toolswap.fs import OsFileSystem
from toolswap.journal import (
    ArtifactRetentionJournal,
    DanglingReferenceError,
    IllegalTransitionError,
    JournalCorruptError,
    JournalWriteError,
    TransactionExistsError,
    UnknownTransactionError,
)
from toolswap.owner import ArtifactPublicationRejected, owner_publisher, owner_remover
from toolswap.owners.memory import InMemoryOwner
from toolswap.session import SessionPaths

from ._journal_support import Clock, file_bytes, make_artifact, prepare_many


class RecordingFS(OsFileSystem):
    """The real seam, logging the protocol-relevant calls in order."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def write(self, handle: int, data: bytes) -> None:
        self.calls.append("write")
        super().write(handle, data)

    def fsync(self, handle: int) -> None:
        self.calls.append("fsync")
        super().fsync(handle)

    def fsync_dir(self, path: str) -> None:
        self.calls.append("fsync_dir")
        super().fsync_dir(path)

    def ftruncate(self, handle: int, size: int) -> None:
        self.calls.append(f"ftruncate:{size}")
        super().ftruncate(handle, size)

    def crash_point(self, name: str) -> None:
        self.calls.append(name)


class LockOrderFS(RecordingFS):
    """Also logs taking and dropping the session lock, and every file opened for reading."""

    def flock(self, handle: int, *, exclusive: bool = True) -> None:
        super().flock(handle, exclusive=exclusive)
        self.calls.append("flock")

    def funlock(self, handle: int) -> None:
        self.calls.append("funlock")
        super().funlock(handle)

    def open_read(self, path: str) -> int:
        self.calls.append(f"open_read:{os.path.basename(path)}")
        return super().open_read(path)


class CountingReadFS(OsFileSystem):
    def __init__(self) -> None:
        self.bytes_read = 0

    def pread(self, handle: int, size: int, offset: int) -> bytes:
        data = super().pread(handle, size, offset)
        self.bytes_read += len(data)
        return data


class FailingFsyncFS(OsFileSystem):
    def fsync(self, handle: int) -> None:
        raise OSError(5, "Input/output error")


@pytest.fixture
def session(tmp_path: pathlib.Path) -> pathlib.Path:
    return tmp_path / "s1"


# -- prepare --------------------------------------------------------------------------


def test_prepare_appends_one_durable_record(session: pathlib.Path) -> None:
    claim = make_artifact(session)
    fs = RecordingFS()
    journal = ArtifactRetentionJournal(session, fs=fs, clock=Clock(42.0))
    txn = journal.prepare(claim, "t1")
    assert (txn.transaction_id, txn.phase, txn.claim, txn.sequence, txn.time) == (
        "t1",
        LeaseState.PREPARED,
        claim,
        1,
        42.0,
    )
    assert journal.path == str(session / "retention-leases.jsonl")
    assert fs.calls == [
        "journal.before_append",
        "write",
        "journal.before_fsync",
        "fsync",
        "fsync_dir",
        "journal.after_fsync",
        # the session's first record: the journal anchor is created, durably
        "write",
        "fsync",
        "fsync_dir",
    ]
    assert journal.exists()
    fs.calls.clear()
    journal.prepare(make_artifact(session, b"second\n", 2), "t2")
    assert fs.calls == [  # later records: the journal's own I/O only
        "journal.before_append",
        "write",
        "journal.before_fsync",
        "fsync",
        "journal.after_fsync",
    ]


def test_prepare_checks_the_artifact_and_appends_under_one_hold_of_the_session_lock(
    session: pathlib.Path,
) -> None:
    claim = make_artifact(session)
    fs = LockOrderFS()
    ArtifactRetentionJournal(session, fs=fs).prepare(claim, "t1")
    calls = fs.calls
    assert calls.count("flock") == 1 and calls.count("funlock") == 1
    held = calls[calls.index("flock") + 1 : calls.index("funlock")]
    assert "open_read:tool_result_001.txt" in held, "the artifact is hashed under the lock"
    assert "write" in held and "fsync" in held
    assert held.index("open_read:tool_result_001.txt") < held.index("write")


def test_prepare_refuses_a_missing_artifact(session: pathlib.Path) -> None:
    claim = make_artifact(session)
    (session / "tool-results" / "tool_result_001.txt").unlink()
    journal = ArtifactRetentionJournal(session)
    with pytest.raises(DanglingReferenceError):
        journal.prepare(claim, "t1")
    assert not journal.exists()


def test_prepare_refuses_a_digest_mismatch(session: pathlib.Path) -> None:
    claim = make_artifact(session, b"original\n")
    (session / "tool-results" / "tool_result_001.txt").write_bytes(b"tampered\n")
    with pytest.raises(ArtifactIntegrityError):
        ArtifactRetentionJournal(session).prepare(claim, "t1")
    assert not (session / "retention-leases.jsonl").exists()


def test_prepare_refuses_a_symlink_and_a_directory(session: pathlib.Path) -> None:
    claim = make_artifact(session, b"x\n")
    target = session / "elsewhere.txt"
    target.write_bytes(b"x\n")
    artifact = session / "tool-results" / "tool_result_001.txt"
    artifact.unlink()
    artifact.symlink_to(target)
    journal = ArtifactRetentionJournal(session)
    with pytest.raises(ArtifactNotOwnedError):
        journal.prepare(claim, "t1")
    artifact.unlink()
    artifact.mkdir()
    with pytest.raises(ArtifactNotOwnedError):
        journal.prepare(claim, "t1")
    assert not journal.exists()


def test_prepare_refuses_a_symlinked_tool_results_dir(session: pathlib.Path) -> None:
    real = session.parent / "real-results"
    claim = make_artifact(session)
    (session / "tool-results").rename(real)
    (session / "tool-results").symlink_to(real)
    with pytest.raises(ArtifactNotOwnedError):
        ArtifactRetentionJournal(session).prepare(claim, "t1")


def test_prepare_refuses_another_sessions_claim(tmp_path: pathlib.Path) -> None:
    other = make_artifact(tmp_path / "other")
    with pytest.raises(InvalidSourceId):
        ArtifactRetentionJournal(tmp_path / "s1").prepare(other, "t1")


def test_prepare_never_replays_an_id(session: pathlib.Path) -> None:
    claim = make_artifact(session)
    journal = ArtifactRetentionJournal(session)
    journal.prepare(claim, "t1")
    before = file_bytes(journal.path)
    with pytest.raises(TransactionExistsError):
        journal.prepare(claim, "t1")
    assert file_bytes(journal.path) == before


@pytest.mark.parametrize("bad_id", ["", "x" * 513, "lone\ud800surrogate", 7])
def test_prepare_refuses_an_unstorable_transaction_id_before_writing(
    session: pathlib.Path, bad_id: Any
) -> None:
    claim = make_artifact(session)
    with pytest.raises(UsageError):
        ArtifactRetentionJournal(session).prepare(claim, bad_id)
    assert not (session / "retention-leases.jsonl").exists()


def test_prepare_generates_an_id_when_none_is_given(session: pathlib.Path) -> None:
    claim = make_artifact(session)
    txn = ArtifactRetentionJournal(session).prepare(claim)
    assert len(txn.transaction_id) == 32


# -- terminal transitions ---------------------------------------------------------------


def test_terminal_operations_are_idempotent_and_refuse_illegal_moves(
    session: pathlib.Path,
) -> None:
    claim = make_artifact(session)
    journal = ArtifactRetentionJournal(session)
    journal.prepare(claim, "c")
    journal.prepare(claim, "a")
    assert journal.commit("c").phase is LeaseState.COMMITTED
    size = len(file_bytes(journal.path))
    assert journal.commit("c").phase is LeaseState.COMMITTED  # no second record
    assert len(file_bytes(journal.path)) == size
    with pytest.raises(IllegalTransitionError):
        journal.abort("c")
    assert journal.abort("a").phase is LeaseState.ABORTED
    assert journal.abort("a").phase is LeaseState.ABORTED
    with pytest.raises(IllegalTransitionError):
        journal.commit("a")
    with pytest.raises(IllegalTransitionError):
        journal.release("a")
    assert journal.release("c").phase is LeaseState.RELEASED
    assert journal.release("c").phase is LeaseState.RELEASED
    with pytest.raises(IllegalTransitionError):
        journal.commit("c")
    with pytest.raises(UnknownTransactionError):
        journal.commit("nope")
    rec = ArtifactRetentionJournal(session).recover()
    assert rec.record_count == 5
    assert dict(rec.states) == {"c": LeaseState.RELEASED, "a": LeaseState.ABORTED}


def test_release_of_a_prepared_lease_is_refused(session: pathlib.Path) -> None:
    journal = ArtifactRetentionJournal(session)
    journal.prepare(make_artifact(session), "p")
    with pytest.raises(IllegalTransitionError):
        journal.release("p")


# -- publish_reference --------------------------------------------------------------------


def test_publish_reference_prepares_publishes_commits_in_order(session: pathlib.Path) -> None:
    claim = make_artifact(session)
    fs = RecordingFS()
    journal = ArtifactRetentionJournal(session, fs=fs)
    seen: list[Any] = []

    def publisher() -> str:
        seen.append(ArtifactRetentionJournal(session).recover().states.get("t1"))
        fs.calls.append("PUBLISH")
        return "receipt"

    txn, value = journal.publish_reference(claim, publisher, transaction_id="t1")
    assert (txn.phase, value) == (LeaseState.COMMITTED, "receipt")
    assert seen == [LeaseState.PREPARED], "S2: PREPARED is durable before the publisher runs"
    order = [
        c
        for c in fs.calls
        if c in {"fsync", "PUBLISH", "publish.after_prepared", "publish.after_owner_write"}
    ]
    assert order == [
        "fsync",
        "fsync",  # the session's first record also creates the journal anchor
        "publish.after_prepared",
        "PUBLISH",
        "publish.after_owner_write",
        "fsync",
    ]


@pytest.mark.parametrize("phase", ["PREPARED", "COMMITTED", "ABORTED", "RELEASED"])
def test_publish_reference_with_an_existing_id_raises_without_calling_or_writing(
    session: pathlib.Path, phase: str
) -> None:
    claim = make_artifact(session)
    journal = ArtifactRetentionJournal(session)
    journal.prepare(claim, "t1")
    if phase in {"COMMITTED", "RELEASED"}:
        journal.commit("t1")
    if phase == "RELEASED":
        journal.release("t1")
    if phase == "ABORTED":
        journal.abort("t1")
    before = file_bytes(journal.path)
    calls: list[int] = []
    with pytest.raises(TransactionExistsError):
        ArtifactRetentionJournal(session).publish_reference(
            claim, lambda: calls.append(1), transaction_id="t1"
        )
    assert calls == []
    assert file_bytes(journal.path) == before


@pytest.mark.parametrize("error", [TimeoutError, ConnectionError, OSError, RuntimeError])
@pytest.mark.parametrize("when", ["before_write", "after_write"])
def test_publisher_error_leaves_prepared_which_survives_restart_and_protects(
    session: pathlib.Path, error: type[Exception], when: str
) -> None:
    claim = make_artifact(session, retain_until=10.0)  # long expired by ``now``
    owner = InMemoryOwner()

    def publisher() -> None:
        if when == "after_write":
            owner.publish("t1", claim)
        raise error("the acknowledgement never arrived")

    with pytest.raises(error):
        ArtifactRetentionJournal(session).publish_reference(claim, publisher, transaction_id="t1")
    rec = ArtifactRetentionJournal(session).recover(now=10**12)
    assert rec.states["t1"] is LeaseState.PREPARED
    assert rec.pending_transaction_ids == ("t1",)
    protected = rec.claims_by_source(now=10**12)[claim.source_id]
    assert protected.retain_until is None and protected.reference_count == 1
    assert rec.claims_by_source()[claim.source_id].retain_until is None


def test_a_lease_left_prepared_by_a_publisher_error_keeps_its_file_through_cleanup(
    session: pathlib.Path,
) -> None:
    """S1 end to end: after the error and a restart, cleanup far in the future retains it."""
    claim = make_artifact(session, retain_until=10.0)

    def publisher() -> None:
        raise TimeoutError("no answer")

    with pytest.raises(TimeoutError):
        ArtifactRetentionJournal(session).publish_reference(claim, publisher, transaction_id="t1")
    paths = SessionPaths.at(session)
    plan = plan_cleanup_from_journal(
        paths,
        ArtifactRetentionJournal(session),
        policy=ArtifactCleanupPolicy(orphan_ttl_seconds=0, dry_run=False),
        now=10.0**12,
    )
    assert plan.entry("tool_result_001.txt").status == "retained_referenced"
    assert plan.planned == ()


def test_rejection_aborts_and_is_reraised(session: pathlib.Path) -> None:
    claim = make_artifact(session)
    journal = ArtifactRetentionJournal(session)

    def publisher() -> None:
        raise ArtifactPublicationRejected("refused before any write")

    with pytest.raises(ArtifactPublicationRejected):
        journal.publish_reference(claim, publisher, transaction_id="t1")
    rec = ArtifactRetentionJournal(session).recover()
    assert rec.states["t1"] is LeaseState.ABORTED
    assert rec.pending_transaction_ids == () and rec.protecting_claims() == []


def test_owner_helpers_publish_and_remove_under_the_journal_id(session: pathlib.Path) -> None:
    claim = make_artifact(session)
    owner = InMemoryOwner()
    journal = ArtifactRetentionJournal(session)
    journal.publish_reference(claim, owner_publisher(owner, "t1", claim), transaction_id="t1")
    with owner.inspect_fenced("t1") as seen:
        assert (seen.state.value, seen.source_id) == ("PUBLISHED", claim.source_id)
    journal.remove_reference("t1", owner_remover(owner, "t1"))
    with owner.inspect_fenced("t1") as seen:
        assert (seen.state.value, seen.sealed) == ("ABSENT", True)
    assert journal.recover().states["t1"] is LeaseState.RELEASED


# -- remove_reference -----------------------------------------------------------------------


def test_remove_reference_removes_first_then_releases(session: pathlib.Path) -> None:
    claim = make_artifact(session)
    journal = ArtifactRetentionJournal(session)
    journal.prepare(claim, "t1")
    journal.commit("t1")
    seen: list[LeaseState] = []

    def remover() -> str:
        seen.append(ArtifactRetentionJournal(session).recover().states["t1"])
        return "gone"

    assert journal.remove_reference("t1", remover) == "gone"
    assert seen == [LeaseState.COMMITTED], "S4: RELEASED only after the owner removed it"
    assert journal.recover().states["t1"] is LeaseState.RELEASED
    assert journal.remove_reference("t1", lambda: pytest.fail("called again")) is None


def test_failed_removal_keeps_the_lease_committed(session: pathlib.Path) -> None:
    claim = make_artifact(session)
    journal = ArtifactRetentionJournal(session)
    journal.prepare(claim, "t1")
    journal.commit("t1")

    def remover() -> None:
        raise ConnectionError("owner down")

    with pytest.raises(ConnectionError):
        journal.remove_reference("t1", remover)
    rec = ArtifactRetentionJournal(session).recover()
    assert rec.states["t1"] is LeaseState.COMMITTED
    assert rec.protecting_claims(rec.observed_at) == [claim]


def test_remove_reference_of_a_prepared_lease_is_refused(session: pathlib.Path) -> None:
    journal = ArtifactRetentionJournal(session)
    journal.prepare(make_artifact(session), "t1")
    with pytest.raises(IllegalTransitionError):
        journal.remove_reference("t1", lambda: pytest.fail("must not run"))


# -- recovery view ----------------------------------------------------------------------------


def test_claims_merge_per_artifact_and_expire(session: pathlib.Path) -> None:
    a = make_artifact(session, b"same\n", 1, retain_until=100.0, reference_count=2)
    b = make_artifact(session, b"same\n", 2, retain_until=200.0)
    c = make_artifact(session, b"other\n", 3, retain_until=50.0)
    journal = ArtifactRetentionJournal(session, clock=Clock(0.0))
    for txn, claim in (("a", a), ("b", b), ("c", c), ("gone", c), ("aborted", c)):
        journal.prepare(claim, txn)
    for txn in ("a", "b", "c", "gone"):
        journal.commit(txn)
    journal.release("gone")
    journal.abort("aborted")
    rec = journal.recover(now=150.0)
    merged = rec.claims_by_source()  # whatever the expiry: every COMMITTED lease
    assert {s: (m.reference_count, m.retain_until) for s, m in merged.items()} == {
        a.source_id: (2, 100.0),
        b.source_id: (1, 200.0),
        c.source_id: (1, 50.0),
    }
    assert set(rec.claims_by_source(now=150.0)) == {b.source_id}
    assert set(rec.claims_by_source(now=40.0)) == {a.source_id, b.source_id, c.source_id}
    assert rec.claims_by_source(now=250.0) == {}
    assert rec.protecting_claims() == [a, b, c]  # one per live lease, as written
    assert rec.protecting_claims(now=150.0) == [b]


def test_the_json_summary_per_digest_names_every_artifact_behind_it(
    session: pathlib.Path,
) -> None:
    """Two files with equal bytes: ``journal show --json`` sums them under one digest, with one
    representative source id, so ``claim_sources`` must name both files."""
    first = make_artifact(session, b"same\n", 1)
    second = make_artifact(session, b"same\n", 2)
    journal = ArtifactRetentionJournal(session)
    journal.prepare(first, "a")
    journal.prepare(second, "b")
    journal.commit("b")
    rec = journal.recover()
    digest = first.content_sha256
    document = rec.to_dict()
    assert document["claims"][digest]["reference_count"] == 2
    assert document["claims"][digest]["source_id"] == first.source_id
    assert document["claim_sources"] == {digest: [first.source_id, second.source_id]}
    assert set(rec.claims_by_source()) == {first.source_id, second.source_id}


def test_time_is_injectable(session: pathlib.Path) -> None:
    claim = make_artifact(session)
    clock = Clock(5.0)
    journal = ArtifactRetentionJournal(session, clock=clock)
    assert journal.prepare(claim, "t1").time == 5.0
    assert journal.commit("t1", now=7.5).time == 7.5
    assert journal.recover().observed_at == 5.0
    assert journal.recover(now=9.0).observed_at == 9.0


def test_torn_tail_is_reported_then_durably_cut_before_the_next_append(
    session: pathlib.Path,
) -> None:
    claim = make_artifact(session)
    journal = ArtifactRetentionJournal(session)
    journal.prepare(claim, "t1")
    good = file_bytes(journal.path)
    with open(journal.path, "ab") as handle:
        handle.write(b'{"event_sha256":"12')
    fs = RecordingFS()
    fresh = ArtifactRetentionJournal(session, fs=fs)
    rec = fresh.recover()
    assert rec.torn_tail is not None and rec.torn_tail.to_dict() == {
        "offset": len(good),
        "length": 19,
    }
    assert rec.record_count == 1
    fresh.commit("t1")
    cut = fs.calls.index(f"ftruncate:{len(good)}")
    assert fs.calls[cut + 1] == "fsync" and fs.calls.index("write") > cut + 1
    assert fs.calls[cut - 1] == "journal.before_truncate"
    after = ArtifactRetentionJournal(session).recover()
    assert after.torn_tail is None and after.states["t1"] is LeaseState.COMMITTED


def test_a_fresh_object_fsyncs_the_directory_once_before_its_first_append_returns(
    session: pathlib.Path,
) -> None:
    """S2: the writer that created the file may have died before its directory fsync."""
    claim = make_artifact(session)
    ArtifactRetentionJournal(session).prepare(claim, "t0")
    fs = RecordingFS()
    journal = ArtifactRetentionJournal(session, fs=fs)
    journal.prepare(claim, "t1")
    journal.prepare(claim, "t2")
    assert fs.calls.count("fsync_dir") == 1
    assert fs.calls.index("fsync_dir") < fs.calls.index("journal.after_fsync")


class _OutsideWriterFS(OsFileSystem):
    """Someone who ignores the session lock appends bytes just as an append opens the file."""

    def open_append(self, path: str, mode: int = 0o600) -> int:
        handle = super().open_append(path, mode)
        if path.endswith("retention-leases.jsonl"):
            os.write(handle, b"more")
        return handle


def test_a_torn_tail_that_changed_since_it_was_seen_is_not_cut(session: pathlib.Path) -> None:
    """Truncation removes exactly the bytes judged torn, never bytes nobody has read (S6)."""
    claim = make_artifact(session)
    ArtifactRetentionJournal(session).prepare(claim, "t1")
    with open(session / "retention-leases.jsonl", "ab") as handle:
        handle.write(b'{"event')
    before = file_bytes(session / "retention-leases.jsonl")
    with pytest.raises(JournalCorruptError) as info:
        ArtifactRetentionJournal(session, fs=_OutsideWriterFS()).commit("t1")
    assert info.value.reason == "rewritten"
    assert file_bytes(session / "retention-leases.jsonl") == before + b"more"


def test_append_reads_only_new_bytes(session: pathlib.Path) -> None:
    """O(1) appends (docs/design.md section 11): an own append re-reads nothing of the journal."""
    content = b"abc\n"
    claim = make_artifact(session, content)
    fs = CountingReadFS()
    journal = ArtifactRetentionJournal(session, fs=fs)
    for i in range(50):
        journal.prepare(claim, f"t{i}")
    fs.bytes_read = 0
    journal.prepare(claim, "last")
    assert fs.bytes_read == len(content), "only the artifact is hashed"
    other = ArtifactRetentionJournal(session)
    other.commit("last")
    appended = len(file_bytes(journal.path).split(b"\n")[-2]) + 1
    fs.bytes_read = 0
    with journal.locked_state() as rec:
        assert rec.states["last"] is LeaseState.COMMITTED
    assert fs.bytes_read == appended, "another writer's record is read, nothing else"


def test_in_place_tampering_is_caught_by_recover(session: pathlib.Path) -> None:
    claim = make_artifact(session)
    journal = ArtifactRetentionJournal(session)
    journal.prepare(claim, "t1")
    journal.commit("t1")
    data = bytearray(file_bytes(journal.path))
    data[30] ^= 0x01
    pathlib.Path(journal.path).write_bytes(bytes(data))
    with pytest.raises(JournalCorruptError) as info:
        journal.recover()
    assert info.value.line_number == 1
    with pytest.raises(JournalCorruptError):
        journal.prepare(claim, "t2")


def test_a_replaced_shorter_journal_is_refused(session: pathlib.Path) -> None:
    claim = make_artifact(session)
    journal = ArtifactRetentionJournal(session)
    journal.prepare(claim, "t1")
    prefix = file_bytes(journal.path)
    journal.commit("t1")
    replacement = session / "new.jsonl"
    replacement.write_bytes(prefix)
    os.replace(replacement, journal.path)  # a valid, shorter journal: evidence lost
    with pytest.raises(JournalCorruptError) as info:
        journal.prepare(claim, "t2")
    assert info.value.reason == "rewritten"
    with pytest.raises(JournalCorruptError):
        journal.commit("t1")


def test_a_truncated_verified_journal_is_refused(session: pathlib.Path) -> None:
    claim = make_artifact(session)
    journal = ArtifactRetentionJournal(session)
    journal.prepare(claim, "t1")
    journal.commit("t1")
    os.truncate(journal.path, 10)
    with pytest.raises(JournalCorruptError) as info:
        journal.commit("t1")
    assert info.value.reason == "shrank"
    os.unlink(journal.path)
    with pytest.raises(JournalCorruptError):
        journal.recover()


def test_failed_fsync_is_an_environment_failure(session: pathlib.Path) -> None:
    claim = make_artifact(session)
    with pytest.raises(JournalWriteError) as info:
        ArtifactRetentionJournal(session, fs=FailingFsyncFS()).prepare(claim, "t1")
    assert isinstance(info.value.__cause__, OSError)


def test_missing_journal_recovers_empty_without_creating_anything(
    tmp_path: pathlib.Path,
) -> None:
    session = tmp_path / "nothing-here"
    journal = ArtifactRetentionJournal(session)
    rec = journal.recover()
    assert (rec.record_count, dict(rec.states), rec.torn_tail) == (0, {}, None)
    assert not journal.exists() and not session.exists()


def test_a_journal_of_another_session_name_is_refused(tmp_path: pathlib.Path) -> None:
    first = tmp_path / "s1"
    ArtifactRetentionJournal(first).prepare(make_artifact(first), "t1")
    second = tmp_path / "s2"
    second.mkdir()
    (second / "retention-leases.jsonl").write_bytes(file_bytes(first / "retention-leases.jsonl"))
    with pytest.raises(JournalCorruptError) as info:
        ArtifactRetentionJournal(second)
    assert (info.value.line_number, info.value.reason) == (1, "session")


# -- locking and concurrency --------------------------------------------------------------------


def test_locked_state_excludes_prepare_until_it_ends(session: pathlib.Path) -> None:
    claim = make_artifact(session)
    journal = ArtifactRetentionJournal(session)
    journal.prepare(claim, "t0")
    done = threading.Event()

    def other() -> None:
        ArtifactRetentionJournal(session).prepare(claim, "t1")
        done.set()

    with journal.locked_state(now=3.0) as rec:
        assert rec.observed_at == 3.0 and rec.pending_transaction_ids == ("t0",)
        worker = threading.Thread(target=other)
        worker.start()
        assert not done.wait(0.3), "prepare must wait for the session lock"
        assert journal.recover().states == {"t0": LeaseState.PREPARED}  # re-entrant inside
    worker.join(10)
    assert done.is_set()
    assert set(journal.recover().states) == {"t0", "t1"}


@pytest.mark.parametrize(
    "call",
    [
        lambda j, o, c: j.publish_reference(c, owner_publisher(o, "t2", c), transaction_id="t2"),
        lambda j, o, c: j.remove_reference("t1", owner_remover(o, "t1")),
        lambda j, o, c: j.reconcile_reference("t1", o),
        lambda j, o, c: j.reconcile_pending(o),
    ],
    ids=["publish_reference", "remove_reference", "reconcile_reference", "reconcile_pending"],
)
def test_owner_calls_inside_locked_state_are_refused(session: pathlib.Path, call: Any) -> None:
    """The lock order is owner fence, then session lock; the reverse could deadlock."""
    claim = make_artifact(session)
    owner = InMemoryOwner()
    journal = ArtifactRetentionJournal(session)
    journal.prepare(claim, "t1")
    journal.commit("t1")
    before = file_bytes(journal.path)
    with journal.locked_state(), pytest.raises(UsageError, match="locked_state"):
        call(journal, owner, claim)
    assert file_bytes(journal.path) == before
    with owner.inspect_fenced("t1") as seen:
        assert (seen.state.value, seen.generation) == ("ABSENT", 0), "the owner was not called"
    assert journal.reconcile_pending(owner) == []  # outside the block it works


def _assert_one_chain(session: pathlib.Path, expected: set[str]) -> None:
    """One unbroken chain: sequence 1..n, each previous_sha256 the last event hash."""
    rec = ArtifactRetentionJournal(session).recover()
    assert rec.record_count == len(expected)
    assert set(rec.states) == expected
    lines = file_bytes(session / "retention-leases.jsonl").split(b"\n")
    assert lines.pop() == b""
    records = [json.loads(line) for line in lines]
    assert [r["sequence"] for r in records] == list(range(1, len(expected) + 1))
    assert [r["previous_sha256"] for r in records[1:]] == [r["event_sha256"] for r in records[:-1]]
    assert sorted(r["transaction_id"] for r in records) == sorted(expected)


def test_threads_share_one_chain(session: pathlib.Path) -> None:
    claim = make_artifact(session)
    shared = ArtifactRetentionJournal(session)

    def work(worker: int) -> None:
        own = ArtifactRetentionJournal(session)
        for i in range(25):
            (shared if i % 2 else own).prepare(claim, f"w{worker}-{i}")

    threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    _assert_one_chain(session, {f"w{w}-{i}" for w in range(8) for i in range(25)})


@pytest.mark.slow
def test_four_processes_fifty_prepares_each_make_one_chain(session: pathlib.Path) -> None:
    """4 processes x 50 prepares (two threads each), released together: 200 records."""
    make_artifact(session, b"shared artifact\n")
    context = multiprocessing.get_context("spawn")
    ready = [context.Event() for _ in range(4)]
    go = context.Event()
    workers = [
        context.Process(target=prepare_many, args=(str(session), w, 50, ready[w], go))
        for w in range(4)
    ]
    for worker in workers:
        worker.start()
    try:
        assert all(event.wait(60) for event in ready), "a worker did not start"
        go.set()
    finally:
        go.set()
        for worker in workers:
            worker.join(120)
    assert [w.exitcode for w in workers] == [0, 0, 0, 0]
    _assert_one_chain(session, {f"w{w}-{i}" for w in range(4) for i in range(50)})
