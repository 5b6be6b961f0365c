"""Journal compaction (issue 38; docs/design.md section 5, "Compaction"; spec/compaction.py).

The claims, by the spec's invariant names:

* C1 live leases kept: recovery after a compaction (and after a crash at any
  I/O operation of one) shows exactly the live leases it showed before;
* C2 the chain verifies from the checkpoint: the tail chains from the last
  checkpoint, and the settled history stays verifiable from the archive and
  the checkpoint log;
* C3 anchor supported: a rolled-back checkpoint log or live file is refused;
* S5 outlives compaction: a transaction id settled (RELEASED or ABORTED) in a
  compacted file is still refused by ``prepare`` and never moves again; the
  settled index that says so is checked whenever it is read;
* tampering with the checkpoint log, a snapshot or the tail fails closed with
  a :class:`JournalCorruptError` and a reason.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import pathlib
import tempfile
import types
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from toolswap.faultinject.disk import SimulatedCrash, SimulatedDisk
from toolswap.spec.compaction import COMPACTION_TRANSITIONS, CompactionStep, Pc
from toolswap.spec.lease import LeaseState

from toolswap.errors import JournalWriteError, UsageError
from toolswap.fs import REAL_FS
from toolswap.journal import (
    ArtifactRetentionJournal,
    IllegalTransitionError,
    JournalCorruptError,
    Recovery,
    TransactionExistsError,
    UnknownTransactionError,
)
from toolswap.journal_compaction import (
    SETTLED_KEYS,
    STEPS,
    Compactor,
    read_checkpoints,
    verify_archive,
)
from toolswap.owner import ArtifactPublicationRejected
from toolswap.session import SessionPaths

from ._journal_support import Clock, make_artifact

LIVE = (LeaseState.PREPARED, LeaseState.COMMITTED)


def live_view(recovery: Recovery) -> dict[str, Any]:
    """What C1 compares: each live lease's state, claim and conflicts, and the pending order."""
    return {
        "leases": {
            txn: (phase, recovery.transactions[txn], recovery.conflicts.get(txn, ()))
            for txn, phase in recovery.states.items()
            if phase in LIVE
        },
        "pending": recovery.pending_transaction_ids,
        "records": recovery.record_count,
        "protecting": sorted(c.source_id for c in recovery.protecting_claims()),
    }


def fresh_view(session: pathlib.Path | str, fs: Any = None) -> dict[str, Any]:
    """Recovery in a fresh journal object: no in-process state."""
    kwargs = {} if fs is None else {"fs": fs}
    return live_view(ArtifactRetentionJournal(session, **kwargs).recover())


# -- a journal with every kind of lease --------------------------------------------------

OPS = st.lists(
    st.tuples(
        st.sampled_from(["prepare", "commit", "abort", "release", "publish", "reject", "remove"]),
        st.integers(0, 30),
    ),
    max_size=40,
)


def run_ops(journal: ArtifactRetentionJournal, claim: Any, ops: list[tuple[str, int]]) -> None:
    """Apply each operation that is legal now (the others are skipped), by the public API."""
    for op, pick in ops:
        recovery = journal.recover()
        states = recovery.states
        names = list(states)
        chosen = names[pick % len(names)] if names else None
        if op in {"prepare", "publish", "reject"}:
            txn = f"n{recovery.record_count}"  # each new id appends: never one seen before
            if op == "prepare":
                journal.prepare(claim, txn)
            elif op == "publish":
                journal.publish_reference(claim, lambda: None, txn)
            else:

                def refuse() -> None:
                    raise ArtifactPublicationRejected("no")

                with pytest.raises(ArtifactPublicationRejected):
                    journal.publish_reference(claim, refuse, txn)
        elif chosen is None:
            continue
        elif op in {"commit", "abort"} and states[chosen] is LeaseState.PREPARED:
            getattr(journal, op)(chosen)
        elif op in {"release", "remove"} and states[chosen] is LeaseState.COMMITTED:
            if op == "release":
                journal.release(chosen)
            else:
                journal.remove_reference(chosen, lambda: None)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(first=OPS, second=OPS)
def test_compaction_keeps_exactly_the_live_leases(
    first: list[tuple[str, int]], second: list[tuple[str, int]]
) -> None:
    """C1: after any history, compact, recover afresh: the same live leases; again after more."""
    with tempfile.TemporaryDirectory() as tmp:
        session = pathlib.Path(tmp) / "s1"
        claim = make_artifact(session)
        journal = ArtifactRetentionJournal(session, clock=Clock())
        journal.prepare(claim, "seed")  # never empty: there is something to compact
        run_ops(journal, claim, first)
        before = fresh_view(session)
        journal.compact()
        assert fresh_view(session) == before
        assert live_view(journal.recover()) == before
        run_ops(journal, claim, second)
        middle = fresh_view(session)
        if middle["records"] > before["records"]:
            journal.compact()
        assert fresh_view(session) == middle


def _session(tmp_path: pathlib.Path) -> tuple[pathlib.Path, ArtifactRetentionJournal, Any]:
    session = tmp_path / "s1"
    claim = make_artifact(session)
    journal = ArtifactRetentionJournal(session, clock=Clock())
    for i in range(6):
        journal.prepare(claim, f"t{i}")
        if i % 3:
            journal.commit(f"t{i}")
        if i % 3 == 2:
            journal.release(f"t{i}")
    return session, journal, claim


def test_conflict_notes_survive_compaction(tmp_path: pathlib.Path) -> None:
    """C1: an identity a CONFLICT note names stays protected after the note is compacted."""
    session, journal, _ = _session(tmp_path)
    other = make_artifact(session, b"other bytes\n", 7)
    seen = types.SimpleNamespace(source_id=other.source_id, content_sha256=other.content_sha256)
    assert journal._record_conflict("t0", seen, None)  # the reconcile path's own append
    before = fresh_view(session)
    assert other.source_id in before["protecting"]
    journal.compact()
    assert fresh_view(session) == before


def test_sequence_numbers_go_on_from_the_checkpoint(tmp_path: pathlib.Path) -> None:
    """The record count counts the whole chain: the tail's first record follows the head."""
    session, journal, claim = _session(tmp_path)
    count = journal.recover().record_count
    journal.compact()
    journal.prepare(claim, "later")
    first = json.loads((session / "retention-leases.jsonl").read_bytes().split(b"\n")[0])
    assert first["sequence"] == count + 1
    assert ArtifactRetentionJournal(session).recover().record_count == count + 1


def test_settled_history_verifies_from_the_archive_and_the_checkpoint_log(
    tmp_path: pathlib.Path,
) -> None:
    """C2: each archived file is the one its checkpoint names, chained from base to head."""
    session, journal, claim = _session(tmp_path)
    journal.compact()
    journal.prepare(claim, "later")
    journal.commit("later")
    journal.release("later")
    journal.compact()
    paths = SessionPaths.at(session)
    found = read_checkpoints(paths, journal._fs)
    assert found is not None
    checkpoints = found[0]
    assert [c.index for c in checkpoints] == [1, 2]
    counts = [verify_archive(paths, journal._fs, c) for c in checkpoints]
    assert counts == [checkpoints[0].records, 3]
    archived = (session / "journal-archive" / "retention-leases-1.jsonl").read_bytes()
    assert b'"RELEASED"' in archived  # the settled leases left the live file, not the evidence


def test_an_edited_archive_is_caught_by_its_checkpoint(tmp_path: pathlib.Path) -> None:
    """C2: the checkpoint names the archived file's sha256; an edited archive is refused."""
    session, journal, _ = _session(tmp_path)
    journal.compact()
    archive = session / "journal-archive" / "retention-leases-1.jsonl"
    archive.write_bytes(archive.read_bytes().replace(b"RELEASED", b"COMMITTED", 1))
    paths = SessionPaths.at(session)
    found = read_checkpoints(paths, journal._fs)
    assert found is not None
    with pytest.raises(JournalCorruptError) as info:
        verify_archive(paths, journal._fs, found[0][0])
    assert info.value.reason == "checkpoint"


def test_delete_old_unlinks_the_compacted_file(tmp_path: pathlib.Path) -> None:
    """delete_old: the compacted file is unlinked; the live leases are kept all the same."""
    session, journal, _ = _session(tmp_path)
    before = fresh_view(session)
    result = journal.compact(delete_old=True)
    assert result.archived is None
    assert not (session / "journal-archive" / "retention-leases-1.jsonl").exists()
    assert fresh_view(session) == before


def test_compacting_nothing_is_refused(tmp_path: pathlib.Path) -> None:
    """No record since the last checkpoint: nothing is written, a UsageError says why."""
    session, journal, _ = _session(tmp_path)
    journal.compact()
    listing = sorted(os.listdir(session))
    with pytest.raises(UsageError, match="nothing to compact"):
        journal.compact()
    assert sorted(os.listdir(session)) == listing


def test_the_compactor_runs_the_spec_table_in_its_order(tmp_path: pathlib.Path) -> None:
    """The step methods are the spec's steps, and the run follows COMPACTION_TRANSITIONS."""
    assert set(STEPS) == set(CompactionStep)
    compactor = Compactor(SessionPaths.at(tmp_path / "s1"), journal_fs())
    for delete_old in (False, True):
        compactor.delete_old = delete_old
        pc = Pc.IDLE
        for action in compactor.plan():
            pc = COMPACTION_TRANSITIONS[(pc, action)]
        assert pc is Pc.IDLE
    assert list(compactor.plan())[-1] is CompactionStep.UNLINK_OLD


def journal_fs() -> Any:
    from toolswap.fs import REAL_FS

    return REAL_FS


# -- crashes at every I/O operation of a compaction -----------------------------------

ROOT = "/sessions/s1"


def disk_session(extra: int = 0) -> tuple[SimulatedDisk, Any]:
    """A simulated disk holding a session with live and settled leases (all durable)."""
    disk = SimulatedDisk()
    disk.makedirs(ROOT + "/tool-results")
    content = b"tool output\n"
    from toolswap.domain import ArtifactRetentionClaim, format_source_id

    digest = hashlib.sha256(content).hexdigest()
    disk.put_file(ROOT + "/tool-results/tool_result_001.txt", content)
    claim = ArtifactRetentionClaim(
        source_id=format_source_id("s1", "tool_result_001.txt", digest),
        content_sha256=digest,
        reference_count=1,
        retain_until=None,
    )
    journal = ArtifactRetentionJournal(ROOT, fs=disk, clock=Clock())
    for i in range(5 + extra):
        journal.prepare(claim, f"t{i}")
        if i % 3:
            journal.commit(f"t{i}")
        if i % 3 == 2:
            journal.release(f"t{i}")
        if i == 3:
            journal.abort("t3")
    return disk, claim


def crash_everywhere(mode: str, delete_old: bool) -> tuple[int, list[str]]:
    """Crash before each I/O operation of compact() in turn, reboot in ``mode``, recover;
    (operations crashed at, every way the recovery differed or refused)."""
    failures: list[str] = []
    k = 1
    finished = False
    while not finished and k < 200:
        for seed in range(3 if mode != "drop" else 1):
            disk, claim = disk_session()
            before = fresh_view(ROOT, disk)
            journal = ArtifactRetentionJournal(ROOT, fs=disk, clock=Clock())
            disk.arm_io(k)
            try:
                journal.compact(delete_old=delete_old)
                finished = True
            except SimulatedCrash:
                pass
            disk.disarm()
            disk.crash(mode, seed)
            try:
                if fresh_view(ROOT, disk) != before:
                    failures.append(f"io {k} seed {seed}: other live leases")
                    continue
                again = ArtifactRetentionJournal(ROOT, fs=disk, clock=Clock())
                again.prepare(claim, "after")
                again.compact()
                after = fresh_view(ROOT, disk)
            except JournalCorruptError as exc:
                failures.append(f"io {k} seed {seed}: refused ({exc})")
                continue
            if after["leases"].pop("after")[0] is not LeaseState.PREPARED:
                failures.append(f"io {k} seed {seed}: the append after is lost")
            for settled in ("t2", "t3"):  # RELEASED and ABORTED before the crash (S5)
                if _replayed(
                    ArtifactRetentionJournal(ROOT, fs=disk, clock=Clock()), claim, settled
                ):
                    failures.append(f"io {k} seed {seed}: settled {settled} prepared again")
            if after["leases"] != before["leases"]:
                failures.append(f"io {k} seed {seed}: other live leases after compacting again")
        k += 1
    return k - 1, failures


@pytest.mark.parametrize("mode", ["drop", "dir_subset", "torn"])
@pytest.mark.parametrize("delete_old", [False, True])
def test_a_crash_at_any_io_of_compaction_keeps_the_live_leases(mode: str, delete_old: bool) -> None:
    """C1, C2: crash before each I/O operation of compact(), reboot, recover: the same leases,
    and the journal takes appends and compacts again."""
    crashed_at, failures = crash_everywhere(mode, delete_old)
    assert failures == []
    assert crashed_at > 40  # every step did I/O: the loop crashed before each of them


def test_the_crash_test_catches_removal_before_the_checkpoint_is_durable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Mutant (the spec's Mistake.REMOVE_BEFORE_CHECKPOINT_DURABLE): the next file starts and
    the old one leaves before the checkpoint's fsync; the crash test above finds it."""
    from toolswap.spec.compaction import EARLY_REMOVAL_TRANSITIONS

    from toolswap import journal_compaction

    monkeypatch.setattr(journal_compaction, "COMPACTION_TRANSITIONS", EARLY_REMOVAL_TRANSITIONS)
    _, failures = crash_everywhere("drop", False)
    assert any("refused" in failure for failure in failures)


def test_the_live_lease_check_catches_a_snapshot_that_drops_prepared_leases(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mutant (Mistake.SNAPSHOT_WITHOUT_SETTLED_CHECK): a snapshot that keeps only COMMITTED
    leases differs from the journal before it, and C1's comparison says so."""
    from toolswap import journal

    keep = journal._Fold.live_leases

    def committed_only(self: Any) -> Any:
        return tuple(lease for lease in keep(self) if lease.phase is LeaseState.COMMITTED)

    monkeypatch.setattr(journal._Fold, "live_leases", committed_only)
    session, compacting, _ = _session(tmp_path)
    before = fresh_view(session)
    compacting.compact()
    assert fresh_view(session) != before


def io_index_of(op: str, path: str) -> int:
    """The 1-based index of the first ``op`` on ``path`` in a compaction of disk_session()."""
    disk, _ = disk_session()
    journal = ArtifactRetentionJournal(ROOT, fs=disk, clock=Clock())
    disk.io_log = []
    journal.compact()
    return disk.io_log.index((op, path)) + 1


def test_a_checkpoint_whose_next_file_never_started_is_finished_by_the_next_open() -> None:
    """Spec: a crash between checkpoint durable and next file started: the next open starts it."""
    disk, _ = disk_session()
    before = fresh_view(ROOT, disk)
    journal = ArtifactRetentionJournal(ROOT, fs=disk, clock=Clock())
    disk.arm_io(io_index_of("create_exclusive", ROOT + "/retention-leases.jsonl.next"))
    with pytest.raises(SimulatedCrash):
        journal.compact()
    disk.crash("drop")
    old = disk.read_file(ROOT + "/retention-leases.jsonl")
    assert old  # still the compacted file, under the live name
    assert fresh_view(ROOT, disk) == before
    assert disk.read_file(ROOT + "/retention-leases.jsonl") == b""  # the next file, started
    assert disk.read_file(ROOT + "/journal-archive/retention-leases-1.jsonl") == old


def test_an_object_open_before_a_compaction_died_never_appends_to_the_compacted_file(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process dies between its durable checkpoint and the next file; an object that
    was open before sees the checkpoint log move, finishes the compaction, appends to the tail."""
    session, journal, claim = _session(tmp_path)
    before = fresh_view(session)

    def killed(self: Compactor) -> None:
        raise KeyboardInterrupt("killed")  # a process dying here runs nothing after it

    monkeypatch.setattr(Compactor, "start_next", killed)
    with pytest.raises(KeyboardInterrupt):
        ArtifactRetentionJournal(session, clock=Clock()).compact()
    monkeypatch.undo()
    journal.prepare(claim, "after")
    view = fresh_view(session)
    assert view["leases"].pop("after")[0] is LeaseState.PREPARED
    assert view["leases"] == before["leases"]
    assert (session / "journal-archive" / "retention-leases-1.jsonl").exists()


def test_a_snapshot_with_a_second_hard_link_is_refused(tmp_path: pathlib.Path) -> None:
    """Like the journal: a snapshot with another name is not ours to trust."""
    session, journal, _ = _session(tmp_path)
    journal.compact()
    os.link(session / ".journal-snapshot-1", tmp_path / "outside")
    assert _refused(session).reason == "snapshot"


def test_a_failed_compaction_step_leaves_the_object_verifying_from_the_start(
    tmp_path: pathlib.Path,
) -> None:
    """An fs error inside compact() is a JournalWriteError; the object's next look re-verifies
    and finishes the compaction instead of appending to the compacted file."""
    disk, claim = disk_session()
    before = fresh_view(ROOT, disk)
    journal = ArtifactRetentionJournal(ROOT, fs=disk, clock=Clock())
    disk.inject_error("rename", err=errno.EIO, path=ROOT + "/retention-leases.jsonl")
    with pytest.raises(JournalWriteError):
        journal.compact()
    journal.prepare(claim, "after")
    view = fresh_view(ROOT, disk)
    assert view["leases"].pop("after")[0] is LeaseState.PREPARED
    assert view["leases"] == before["leases"]


# -- tampering: fail closed ------------------------------------------------------------


def _compacted_with_tail(tmp_path: pathlib.Path) -> tuple[pathlib.Path, dict[str, bytes]]:
    """Compacted once, the files saved, compacted again, then one append by a fresh object."""
    session, journal, claim = _session(tmp_path)
    journal.compact()
    journal.prepare(claim, "mid")
    journal.commit("mid")
    saved = {
        name: (session / name).read_bytes()
        for name in (".journal-checkpoints", "retention-leases.jsonl")
    }
    journal.compact()
    ArtifactRetentionJournal(session, clock=Clock()).prepare(claim, "later")  # raises the anchor
    return session, saved


def _refused(session: pathlib.Path) -> JournalCorruptError:
    with pytest.raises(JournalCorruptError) as info:
        ArtifactRetentionJournal(session).recover()
    return info.value


def test_a_deleted_checkpoint_log_is_refused(tmp_path: pathlib.Path) -> None:
    """Without the checkpoint log the tail chains from nothing: refused (checkpoint)."""
    session, _ = _compacted_with_tail(tmp_path)
    (session / ".journal-checkpoints").unlink()
    assert _refused(session).reason == "checkpoint"


def test_a_rolled_back_checkpoint_log_with_the_old_file_restored_is_refused(
    tmp_path: pathlib.Path,
) -> None:
    """C3: the checkpoint log and live file of an earlier compaction, restored: the anchor
    counts the whole chain, so the rolled-back journal shows too few records."""
    session, saved = _compacted_with_tail(tmp_path)
    for name, data in saved.items():
        (session / name).write_bytes(data)
    assert _refused(session).reason == "shrank"


def test_a_rolled_back_checkpoint_log_alone_is_refused(tmp_path: pathlib.Path) -> None:
    """The live file chains from a checkpoint the log no longer holds: not_chained."""
    session, saved = _compacted_with_tail(tmp_path)
    (session / ".journal-checkpoints").write_bytes(saved[".journal-checkpoints"])
    assert _refused(session).reason == "not_chained"


def test_an_old_file_restored_as_live_is_refused(tmp_path: pathlib.Path) -> None:
    """The archived file put back under the live name does not chain from the checkpoint."""
    session, _ = _compacted_with_tail(tmp_path)
    archived = session / "journal-archive" / "retention-leases-1.jsonl"
    (session / "retention-leases.jsonl").write_bytes(archived.read_bytes())
    assert _refused(session).reason == "not_chained"


def test_a_deleted_live_file_is_refused(tmp_path: pathlib.Path) -> None:
    """No journal file chains from the last checkpoint: vanished, not an empty session."""
    session, _ = _compacted_with_tail(tmp_path)
    (session / "retention-leases.jsonl").unlink()
    assert _refused(session).reason == "vanished"


def test_an_edited_snapshot_is_refused(tmp_path: pathlib.Path) -> None:
    """Dropping a lease from the snapshot breaks its sha256 in the checkpoint: snapshot."""
    session, _ = _compacted_with_tail(tmp_path)
    path = session / ".journal-snapshot-2"
    document = json.loads(path.read_bytes())
    document["leases"] = document["leases"][1:]
    path.write_bytes(json.dumps(document, sort_keys=True, separators=(",", ":")).encode() + b"\n")
    error = _refused(session)
    assert error.reason == "snapshot" and "sha256" in error.detail


def test_a_snapshot_rewritten_with_its_checkpoint_hash_is_still_refused(
    tmp_path: pathlib.Path,
) -> None:
    """Editing the snapshot and its sha256 in the checkpoint breaks the entry's own hash."""
    session, _ = _compacted_with_tail(tmp_path)
    snapshot = session / ".journal-snapshot-2"
    document = json.loads(snapshot.read_bytes())
    document["leases"] = document["leases"][1:]
    data = json.dumps(document, sort_keys=True, separators=(",", ":")).encode() + b"\n"
    snapshot.write_bytes(data)
    log = session / ".journal-checkpoints"
    lines = log.read_bytes().split(b"\n")
    entry = json.loads(lines[1])
    entry["snapshot_sha256"] = hashlib.sha256(data).hexdigest()
    lines[1] = json.dumps(entry, sort_keys=True, separators=(",", ":")).encode()
    log.write_bytes(b"\n".join(lines))
    error = _refused(session)
    assert error.reason == "checkpoint" and "entry_sha256" in error.detail


def test_a_non_canonical_snapshot_is_refused(tmp_path: pathlib.Path) -> None:
    """Strict like a journal line: the same meaning in other bytes is refused."""
    session, _ = _compacted_with_tail(tmp_path)
    snapshot = session / ".journal-snapshot-2"
    snapshot.write_bytes(snapshot.read_bytes().replace(b",", b", ", 1))
    assert _refused(session).reason == "snapshot"


def test_a_deleted_snapshot_is_refused(tmp_path: pathlib.Path) -> None:
    """The checkpoint names a snapshot that is gone: refused, never read as no leases."""
    session, _ = _compacted_with_tail(tmp_path)
    (session / ".journal-snapshot-2").unlink()
    assert _refused(session).reason == "snapshot"


def test_a_tail_not_chained_from_the_checkpoint_head_is_refused(tmp_path: pathlib.Path) -> None:
    """A live file whose first record names another previous hash: not_chained."""
    session, _ = _compacted_with_tail(tmp_path)
    log = session / ".journal-checkpoints"
    lines = log.read_bytes().split(b"\n")
    entry = json.loads(lines[1])
    # a re-sealed entry naming another head: the live file no longer chains from it
    from toolswap.journal_compaction import Checkpoint, encode_checkpoint

    del entry["version"], entry["entry_sha256"]
    entry["head_sha256"] = "1" * 64
    lines[1] = encode_checkpoint(Checkpoint(**entry).sealed())[:-1]
    log.write_bytes(b"\n".join(lines))
    assert _refused(session).reason in {"snapshot", "not_chained"}


def test_a_checkpoint_log_with_a_second_hard_link_is_refused(tmp_path: pathlib.Path) -> None:
    """Like the journal: a checkpoint log with another name is not ours to trust."""
    session, _ = _compacted_with_tail(tmp_path)
    os.link(session / ".journal-checkpoints", tmp_path / "outside")
    assert _refused(session).reason == "checkpoint"
    claim = make_artifact(session, b"more\n", 5)
    journal = ArtifactRetentionJournal
    with pytest.raises(JournalCorruptError):
        journal(session).prepare(claim, "x")


def test_a_never_compacted_journal_reads_no_checkpoint_files(tmp_path: pathlib.Path) -> None:
    """The format of a journal never compacted is unchanged: no file of compaction appears."""
    session, journal, _ = _session(tmp_path)
    journal.recover()
    names = set(os.listdir(session))
    assert names == {"retention-leases.jsonl", ".journal-anchor", ".session.lock", "tool-results"}


# -- S5 outlives compaction: the settled index ------------------------------------------


def _replayed(journal: ArtifactRetentionJournal, claim: Any, txn: str) -> bool:
    """Does ``prepare`` take ``txn`` again?  False: refused as an existing transaction."""
    try:
        journal.prepare(claim, txn)
    except TransactionExistsError:
        return False
    return True


def _settled_session(tmp_path: pathlib.Path) -> tuple[pathlib.Path, Any]:
    """_session's journal (t2, t5 RELEASED) plus t6 ABORTED, compacted once."""
    session, journal, claim = _session(tmp_path)
    journal.prepare(claim, "t6")
    journal.abort("t6")
    journal.compact()
    return session, claim


@pytest.mark.parametrize("txn", ["t2", "t6"], ids=["released", "aborted"])
def test_prepare_refuses_a_settled_id_after_compaction(tmp_path: pathlib.Path, txn: str) -> None:
    """S5: an id RELEASED (t2) or ABORTED (t6) in the compacted file is refused by a fresh
    journal object as it was before compaction (the replayed-transaction-id mistake)."""
    session, claim = _settled_session(tmp_path)
    with pytest.raises(TransactionExistsError, match="before checkpoint 1"):
        ArtifactRetentionJournal(session, clock=Clock()).prepare(claim, txn)
    assert txn not in ArtifactRetentionJournal(session).recover().states  # nothing appended


def test_the_compacting_object_refuses_a_settled_id_too(tmp_path: pathlib.Path) -> None:
    """S5: the journal object that compacted (its own view, not a fresh read) refuses it."""
    session, journal, claim = _session(tmp_path)
    journal.compact()
    assert not _replayed(journal, claim, "t5")


def test_publish_of_a_settled_id_never_calls_the_publisher(tmp_path: pathlib.Path) -> None:
    """S5: publish_reference refuses a compacted settled id before the owner is asked."""
    session, claim = _settled_session(tmp_path)
    called: list[bool] = []
    with pytest.raises(TransactionExistsError):
        ArtifactRetentionJournal(session).publish_reference(
            claim, lambda: called.append(True), "t2"
        )
    assert called == []


@pytest.mark.parametrize("operation", ["commit", "abort", "release", "remove", "reconcile"])
def test_a_settled_id_never_moves_again_and_the_error_names_the_checkpoint(
    tmp_path: pathlib.Path, operation: str
) -> None:
    """S5: any transition of a compacted settled id is an IllegalTransitionError naming the
    checkpoint, not an unknown id; nothing is appended and the owner is never asked."""
    session, _ = _settled_session(tmp_path)
    journal = ArtifactRetentionJournal(session)
    owner = types.SimpleNamespace()  # no method: asking it would raise AttributeError
    calls = {
        "commit": lambda: journal.commit("t6"),
        "abort": lambda: journal.abort("t6"),
        "release": lambda: journal.release("t2"),
        "remove": lambda: journal.remove_reference("t2", lambda: pytest.fail("owner asked")),
        "reconcile": lambda: journal.reconcile_reference("t6", owner),  # type: ignore[arg-type]
    }
    records = journal.recover().record_count
    with pytest.raises(IllegalTransitionError, match="settled .* before checkpoint 1") as info:
        calls[operation]()
    assert not isinstance(info.value, UnknownTransactionError)
    assert ArtifactRetentionJournal(session).recover().record_count == records


def test_an_id_never_seen_is_still_unknown_after_compaction(tmp_path: pathlib.Path) -> None:
    """The settled index refuses only settled ids: any other id is unknown as before."""
    session, claim = _settled_session(tmp_path)
    journal = ArtifactRetentionJournal(session)
    with pytest.raises(UnknownTransactionError):
        journal.commit("never")
    assert _replayed(journal, claim, "never")


def test_ids_settled_before_the_first_compaction_stay_settled_after_the_second(
    tmp_path: pathlib.Path,
) -> None:
    """The settled index is cumulative: checkpoint 2 still refuses what checkpoint 1 held,
    and what settled between the two."""
    session, claim = _settled_session(tmp_path)
    journal = ArtifactRetentionJournal(session, clock=Clock())
    journal.prepare(claim, "mid")
    journal.abort("mid")
    journal.compact()
    assert read_checkpoints(SessionPaths.at(session), journal._fs) is not None
    fresh = ArtifactRetentionJournal(session, clock=Clock())
    assert [_replayed(fresh, claim, txn) for txn in ("t2", "t5", "t6", "mid")] == [False] * 4
    (session / ".journal-settled-1").unlink()  # the second needs only its own index
    assert not _replayed(ArtifactRetentionJournal(session), claim, "t2")


def test_the_replay_check_catches_a_journal_that_forgets_settled_ids(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mutant (the replayed-transaction-id mistake after compaction): a lookup that never
    finds a compacted settled id lets prepare take it again, and the check above says so."""
    monkeypatch.setattr(ArtifactRetentionJournal, "_settled_before", lambda self, txn: None)
    session, claim = _settled_session(tmp_path)
    assert _replayed(ArtifactRetentionJournal(session), claim, "t2")


def test_recovery_never_reads_the_settled_index(tmp_path: pathlib.Path) -> None:
    """Lazy: the live leases recover with the settled index gone (cleanup is not blocked)."""
    session, _ = _settled_session(tmp_path)
    before = fresh_view(session)
    (session / ".journal-settled-1").unlink()
    assert fresh_view(session) == before


def test_a_deleted_settled_index_is_refused_when_needed(tmp_path: pathlib.Path) -> None:
    """Fail closed: an id the live state does not hold needs the index; gone, it is refused
    (JournalCorruptError, reason snapshot), never read as "not settled"."""
    session, claim = _settled_session(tmp_path)
    (session / ".journal-settled-1").unlink()
    for attempt in (lambda j: j.prepare(claim, "t2"), lambda j: j.prepare(claim, "new")):
        with pytest.raises(JournalCorruptError) as info:
            attempt(ArtifactRetentionJournal(session))
        assert info.value.reason == "snapshot" and "settled index 1" in info.value.detail
    with pytest.raises(JournalCorruptError):
        ArtifactRetentionJournal(session).verify_settled_index()


def test_an_edited_settled_index_is_refused_when_needed(tmp_path: pathlib.Path) -> None:
    """An index with an id dropped (rewritten canonically) is not the one the checkpoint
    names by its sha256: refused, and the dropped id is not prepared."""
    session, claim = _settled_session(tmp_path)
    path = session / ".journal-settled-1"
    document = json.loads(path.read_bytes())
    document["transaction_ids"].remove("t2")
    path.write_bytes(json.dumps(document, sort_keys=True, separators=(",", ":")).encode() + b"\n")
    with pytest.raises(JournalCorruptError) as info:
        ArtifactRetentionJournal(session).prepare(claim, "t2")
    assert info.value.reason == "snapshot" and "sha256" in info.value.detail
    assert "t2" not in ArtifactRetentionJournal(session).recover().states


def test_the_settled_index_is_canonical_sorted_and_cumulative(tmp_path: pathlib.Path) -> None:
    """The format: one canonical JSON document, exactly SETTLED_KEYS, the ids sorted; the
    checkpoint names its sha256 and count."""
    session, _ = _settled_session(tmp_path)
    data = (session / ".journal-settled-1").read_bytes()
    document = json.loads(data)
    assert set(document) == SETTLED_KEYS
    assert document["transaction_ids"] == ["t2", "t5", "t6"]
    assert json.dumps(document, sort_keys=True, separators=(",", ":")).encode() + b"\n" == data
    found = read_checkpoints(SessionPaths.at(session), REAL_FS)
    assert found is not None
    (checkpoint,) = found[0]
    assert checkpoint.settled_count == 3
    assert checkpoint.settled_sha256 == hashlib.sha256(data).hexdigest()


def test_a_settled_index_left_by_a_crash_before_the_checkpoint_is_written_over(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compaction dies between its settled index and its checkpoint: no checkpoint names
    the orphan, the next compaction writes over it, and S5 holds with the new one."""
    session, journal, claim = _session(tmp_path)

    def killed(self: Compactor) -> None:
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(Compactor, "write_checkpoint", killed)
    with pytest.raises(KeyboardInterrupt):
        ArtifactRetentionJournal(session, clock=Clock()).compact()
    monkeypatch.undo()
    orphan = session / ".journal-settled-1"
    orphan.write_bytes(b"not an index\n")  # whatever it holds, nothing trusts it
    assert not _replayed(journal, claim, "t2")  # still in the live file
    journal.prepare(claim, "t9")
    journal.abort("t9")
    journal.compact()
    assert json.loads(orphan.read_bytes())["transaction_ids"] == ["t2", "t5", "t9"]
    fresh = ArtifactRetentionJournal(session)
    assert [_replayed(fresh, claim, txn) for txn in ("t2", "t5", "t9")] == [False] * 3
