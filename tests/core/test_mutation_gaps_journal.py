"""Gaps the mutation run found in journal.py (docs/mutation.md).

Claims, one per test: a PREPARED lease keeps the aggregate claim of its
artifact unbounded beside a bounded COMMITTED one (S1); ``publish_reference``
stamps PREPARED with the time it was given; a recovery's dictionary names every
field and the torn tail; each protocol violation and each lost or replaced
journal has its own line, reason and detail; the refusals of ``prepare`` and
``remove_reference`` say what was refused.  Second round: each reconciliation
report says why (already settled, committed, a conflict that does or does not
protect, a seal without an answer); a write or a type change outside the lock
and an artifact swapped while checked are refused with their own detail; the
crash points around cutting a torn tail are the named ones.
"""

from __future__ import annotations

import json
import os
import pathlib
from collections.abc import Iterator
from contextlib import contextmanager

import attrs
import pytest
from toolswap.spec.lease import LeaseState

from toolswap.domain import ArtifactRetentionClaim, artifact_filename, format_source_id
from toolswap.errors import ArtifactIntegrityError, ArtifactNotOwnedError
from toolswap.fs import CRASH_POINTS, OsFileSystem
from toolswap.journal import (
    ArtifactRetentionJournal,
    DanglingReferenceError,
    IllegalTransitionError,
    JournalCorruptError,
    TransactionExistsError,
    aggregate_claims,
)
from toolswap.journal_format import GENESIS_SHA256, build_record, encode_record
from toolswap.owner import ObservedState, ReconcileStatus

from ._journal_support import Clock, make_artifact


def _journal(session: pathlib.Path) -> pathlib.Path:
    return session / "retention-leases.jsonl"


def test_a_prepared_lease_keeps_the_aggregate_unbounded_beside_a_bounded_commit(
    tmp_path: pathlib.Path,
) -> None:
    unbounded = make_artifact(tmp_path / "s1")
    bounded = ArtifactRetentionClaim(
        source_id=unbounded.source_id, content_sha256=unbounded.content_sha256, retain_until=5.0
    )
    leases = {"p": (LeaseState.PREPARED, unbounded), "c": (LeaseState.COMMITTED, bounded)}
    (claim,) = aggregate_claims(leases).values()
    assert (claim.retain_until, claim.reference_count) == (None, 2)


def test_publish_reference_stamps_prepared_with_the_given_time(tmp_path: pathlib.Path) -> None:
    session = tmp_path / "s1"
    claim = make_artifact(session)
    journal = ArtifactRetentionJournal(session, clock=Clock(start=99.0))
    journal.publish_reference(claim, lambda: None, "t1", now=1234.5)
    lines = _journal(session).read_bytes().splitlines()
    assert [json.loads(line)["time"] for line in lines] == [1234.5, 1234.5]


def test_a_recovery_as_a_dict_names_every_field_and_the_torn_tail(tmp_path: pathlib.Path) -> None:
    session = tmp_path / "s1"
    claim = make_artifact(session)
    ArtifactRetentionJournal(session).prepare(claim, "t1")
    size = _journal(session).stat().st_size
    with open(_journal(session), "ab") as handle:
        handle.write(b'{"event')
    data = ArtifactRetentionJournal(session).recover().to_dict()
    assert set(data) == {
        "session_id",
        "record_count",
        "last_sha256",
        "states",
        "claims",
        "claim_sources",
        "pending_transaction_ids",
        "torn_tail",
    }
    assert data["torn_tail"] == {"offset": size, "length": len(b'{"event')}
    assert data["claims"] == {claim.content_sha256: claim.to_dict()}


def _two(claim: ArtifactRetentionClaim, **second: object) -> bytes:
    first = build_record(
        sequence=1,
        previous_sha256=GENESIS_SHA256,
        session_id="s1",
        transaction_id="t1",
        phase=LeaseState.PREPARED,
        time=1.0,
        claim=claim,
    )
    fields: dict[str, object] = {
        "sequence": 2,
        "previous_sha256": first.event_sha256,
        "session_id": "s1",
        "transaction_id": "t1",
        "phase": LeaseState.COMMITTED,
        "time": 2.0,
        "claim": claim,
    }
    fields.update(second)
    return encode_record(first) + encode_record(build_record(**fields))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("second", "reason", "detail"),
    [
        ({"sequence": 3}, "sequence", "expected 2, found 3"),
        ({"previous_sha256": "1" * 64}, "chain", "previous_sha256 does not match"),
        ({"session_id": "other"}, "session", "record of another session"),
        ({"phase": LeaseState.RELEASED}, "illegal_transition", "PREPARED -> RELEASED"),
        ({"transaction_id": "t9"}, "illegal_transition", "nothing -> COMMITTED"),
    ],
)
def test_each_protocol_violation_has_its_line_reason_and_detail(
    tmp_path: pathlib.Path, second: dict[str, object], reason: str, detail: str
) -> None:
    session = tmp_path / "s1"
    claim = make_artifact(session)
    _journal(session).write_bytes(_two(claim, **second))
    with pytest.raises(JournalCorruptError) as info:
        ArtifactRetentionJournal(session)
    assert (info.value.line_number, info.value.reason, info.value.detail) == (2, reason, detail)


def test_a_whole_record_followed_by_bytes_says_it_lacks_its_newline(
    tmp_path: pathlib.Path,
) -> None:
    session = tmp_path / "s1"
    claim = make_artifact(session)
    _journal(session).write_bytes(_two(claim)[:-1] + b"x")
    with pytest.raises(JournalCorruptError) as info:
        ArtifactRetentionJournal(session)
    assert info.value.detail == "record not terminated by a newline"


def _two_records(session: pathlib.Path) -> ArtifactRetentionJournal:
    claim = make_artifact(session)
    journal = ArtifactRetentionJournal(session, clock=Clock())
    journal.prepare(claim, "t1")
    journal.commit("t1")
    return journal


def test_a_replaced_shorter_journal_is_refused_after_the_last_record_it_kept(
    tmp_path: pathlib.Path,
) -> None:
    session = tmp_path / "s1"
    journal = _two_records(session)
    data = _journal(session).read_bytes()
    spare = session / "spare"
    spare.write_bytes(data[: data.index(b"\n") + 1])
    os.replace(spare, _journal(session))
    with pytest.raises(JournalCorruptError) as info:
        journal.recover()
    assert (info.value.line_number, info.value.reason, info.value.detail) == (
        2,
        "rewritten",
        "journal lost records verified before",
    )


def test_a_replaced_journal_with_another_history_is_refused_at_the_first_differing_record(
    tmp_path: pathlib.Path,
) -> None:
    session = tmp_path / "s1"
    journal = _two_records(session)
    other = tmp_path / "elsewhere" / "s1"
    claim = make_artifact(other)
    forged = ArtifactRetentionJournal(other, clock=Clock())
    forged.prepare(claim, "t1")
    forged.abort("t1")  # same length, another history
    os.replace(_journal(other), _journal(session))
    with pytest.raises(JournalCorruptError) as info:
        journal.recover()
    assert (info.value.line_number, info.value.reason, info.value.detail) == (
        2,
        "rewritten",
        "differs from what was verified before",
    )


def test_a_journal_replaced_by_a_directory_is_not_regular_at_the_next_line(
    tmp_path: pathlib.Path,
) -> None:
    session = tmp_path / "s1"
    journal = _two_records(session)
    _journal(session).unlink()
    _journal(session).mkdir()
    with pytest.raises(JournalCorruptError) as info:
        journal.prepare(make_artifact(session, number=2), "t2")
    assert (info.value.line_number, info.value.reason, info.value.detail) == (
        3,
        "not_regular",
        "not a regular file",
    )


def test_a_verified_journal_that_vanished_is_refused_at_its_last_record(
    tmp_path: pathlib.Path,
) -> None:
    session = tmp_path / "s1"
    journal = _two_records(session)
    _journal(session).unlink()
    with pytest.raises(JournalCorruptError) as info:
        journal.recover()
    assert (info.value.line_number, info.value.reason, info.value.detail) == (
        2,
        "vanished",
        "verified journal is gone",
    )


def test_an_anchored_journal_that_vanished_is_refused_at_its_first_line(
    tmp_path: pathlib.Path,
) -> None:
    session = tmp_path / "s1"
    _two_records(session).anchor_verified()
    _journal(session).unlink()
    with pytest.raises(JournalCorruptError) as info:
        ArtifactRetentionJournal(session).recover()
    assert (info.value.line_number, info.value.reason) == (1, "vanished")
    assert info.value.detail.startswith("the lease journal is gone, but ")


def test_an_anchored_journal_cut_short_is_refused_as_shrank_after_what_is_left(
    tmp_path: pathlib.Path,
) -> None:
    session = tmp_path / "s1"
    _two_records(session).anchor_verified()
    data = _journal(session).read_bytes()
    _journal(session).write_bytes(data[: data.index(b"\n") + 1])
    with pytest.raises(JournalCorruptError) as info:
        ArtifactRetentionJournal(session).recover()
    assert (info.value.line_number, info.value.reason) == (2, "shrank")
    assert info.value.detail.startswith("the lease journal is short, but ")


def test_a_replayed_transaction_id_is_refused_with_the_rule(tmp_path: pathlib.Path) -> None:
    session = tmp_path / "s1"
    journal = _two_records(session)
    with pytest.raises(TransactionExistsError, match="reconcile it, never replay it"):
        journal.prepare(make_artifact(session), "t1")


def test_removing_a_prepared_reference_is_refused_with_the_rule(tmp_path: pathlib.Path) -> None:
    session = tmp_path / "s1"
    journal = ArtifactRetentionJournal(session)
    journal.prepare(make_artifact(session), "t1")
    with pytest.raises(IllegalTransitionError, match="only COMMITTED can be removed"):
        journal.remove_reference("t1", lambda: None)


def test_preparing_a_missing_artifact_says_it_does_not_exist(tmp_path: pathlib.Path) -> None:
    session = tmp_path / "s1"
    claim = make_artifact(session)
    (session / "tool-results" / "tool_result_001.txt").unlink()
    with pytest.raises(DanglingReferenceError, match="does not exist"):
        ArtifactRetentionJournal(session).prepare(claim, "t1")


def test_preparing_a_changed_artifact_says_its_digest_does_not_match(
    tmp_path: pathlib.Path,
) -> None:
    session = tmp_path / "s1"
    claim = make_artifact(session)
    (session / "tool-results" / "tool_result_001.txt").write_bytes(b"other bytes\n")
    with pytest.raises(ArtifactIntegrityError, match="does not match the claim's digest"):
        ArtifactRetentionJournal(session).prepare(claim, "t1")


# -- reconciliation reports say why --------------------------------------------------


@attrs.frozen(kw_only=True)
class _Seen:
    """One scripted observation; ``seal`` is what ``seal_absence`` answers."""

    transaction_id: str
    state: ObservedState
    source_id: str | None = None
    content_sha256: str | None = None
    generation: int = 1
    sealed: bool = False
    seal: object = True

    def seal_absence(self) -> object:
        return self.seal


class _ScriptedOwner:
    """An owner that shows ``seen`` for every inspection and counts them."""

    def __init__(self, seen: _Seen | None) -> None:
        self.seen = seen
        self.inspections = 0

    @contextmanager
    def inspect_fenced(self, transaction_id: str) -> Iterator[_Seen]:
        self.inspections += 1
        assert self.seen is not None
        yield self.seen


def _prepared(session: pathlib.Path) -> tuple[ArtifactRetentionJournal, ArtifactRetentionClaim]:
    claim = make_artifact(session)
    journal = ArtifactRetentionJournal(session, clock=Clock())
    journal.prepare(claim, "t1")
    return journal, claim


def test_reconciling_a_settled_lease_says_the_journal_already_holds_its_end(
    tmp_path: pathlib.Path,
) -> None:
    journal, _ = _prepared(tmp_path / "s1")
    journal.commit("t1")
    owner = _ScriptedOwner(None)
    report = journal.reconcile_reference("t1", owner)  # type: ignore[arg-type]
    assert (report.status, report.reason) == (
        ReconcileStatus.ALREADY_COMMITTED,
        "the journal already holds a terminal event",
    )
    assert owner.inspections == 0


def test_a_committed_reconciliation_says_the_owner_holds_this_identity(
    tmp_path: pathlib.Path,
) -> None:
    journal, claim = _prepared(tmp_path / "s1")
    seen = _Seen(
        transaction_id="t1",
        state=ObservedState.PUBLISHED,
        source_id=claim.source_id,
        content_sha256=claim.content_sha256,
    )
    report = journal.reconcile_reference("t1", _ScriptedOwner(seen))  # type: ignore[arg-type]
    assert (report.status, report.reason) == (
        ReconcileStatus.COMMITTED,
        "owner holds the reference with this identity",
    )


@pytest.mark.parametrize(
    ("session_of_identity", "said"),
    [
        ("s1", "it stays protected while the lease is pending)"),
        ("s9", "not an artifact of this session: nothing protected)"),
    ],
)
def test_a_conflict_report_says_whether_the_identity_the_owner_shows_is_protected(
    tmp_path: pathlib.Path, session_of_identity: str, said: str
) -> None:
    journal, _ = _prepared(tmp_path / "s1")
    other = make_artifact(tmp_path / "elsewhere" / session_of_identity, b"other bytes\n", 2)
    seen = _Seen(
        transaction_id="t1",
        state=ObservedState.PUBLISHED,
        source_id=format_source_id(session_of_identity, artifact_filename(2), other.content_sha256),
        content_sha256=other.content_sha256,
    )
    report = journal.reconcile_reference("t1", _ScriptedOwner(seen))  # type: ignore[arg-type]
    assert report.status is ReconcileStatus.PENDING_CONFLICT
    assert report.reason == "owner holds a different identity for this id (recorded; " + said


def test_a_seal_with_no_true_false_answer_stays_pending_unknown_and_says_so(
    tmp_path: pathlib.Path,
) -> None:
    session = tmp_path / "s1"
    journal, _ = _prepared(session)
    seen = _Seen(transaction_id="t1", state=ObservedState.ABSENT, seal=None)
    report = journal.reconcile_reference("t1", _ScriptedOwner(seen))  # type: ignore[arg-type]
    assert (report.status, report.reason) == (
        ReconcileStatus.PENDING_UNKNOWN,
        "seal gave no True/False answer",
    )
    assert journal.recover().states == {"t1": LeaseState.PREPARED}


# -- races outside the lock ------------------------------------------------------------


class _OutsideWriterFS(OsFileSystem):
    """A writer that ignores the session lock appends to the journal just before we do."""

    def open_append(self, path: str, mode: int = 0o600) -> int:
        with open(path, "ab") as writer:
            writer.write(b"outside\n")
        return super().open_append(path, mode)


def test_a_journal_written_outside_the_lock_is_refused_and_nothing_is_cut(
    tmp_path: pathlib.Path,
) -> None:
    session = tmp_path / "s1"
    _prepared(session)
    before = _journal(session).read_bytes()
    journal = ArtifactRetentionJournal(session, fs=_OutsideWriterFS(), clock=Clock())
    with pytest.raises(JournalCorruptError) as info:
        journal.commit("t1")
    assert (info.value.line_number, info.value.reason, info.value.detail) == (
        2,
        "rewritten",
        "journal changed outside the session lock",
    )
    assert _journal(session).read_bytes() == before + b"outside\n"


class _TrustingFS(OsFileSystem):
    """A seam whose ``open_read`` opens whatever is there (no type check of its own)."""

    def open_read(self, path: str) -> int:
        return os.open(path, os.O_RDONLY | os.O_NOFOLLOW)


def test_the_journal_checks_the_type_of_the_file_it_opened_itself(
    tmp_path: pathlib.Path,
) -> None:
    session = tmp_path / "s1"
    _journal(session).mkdir(parents=True)
    with pytest.raises(JournalCorruptError) as info:
        ArtifactRetentionJournal(session, fs=_TrustingFS())
    assert (info.value.line_number, info.value.reason, info.value.detail) == (
        1,
        "not_regular",
        "not a regular file",
    )


def test_opening_a_session_whose_journal_is_a_directory_blames_the_state(
    tmp_path: pathlib.Path,
) -> None:
    session = tmp_path / "s1"
    _journal(session).mkdir(parents=True)
    with pytest.raises(JournalCorruptError) as info:
        ArtifactRetentionJournal(session)
    assert (info.value.line_number, info.value.reason) == (1, "not_regular")


class _SwapOnOpenFS(OsFileSystem):
    """Replaces an artifact with a same-bytes copy (a new inode) just before it is opened."""

    def open_read(self, path: str) -> int:
        if os.path.basename(os.path.dirname(path)) == "tool-results":
            spare = path + ".swap"
            with open(path, "rb") as source, open(spare, "wb") as copy:
                copy.write(source.read())
            os.replace(spare, path)
        return super().open_read(path)


def test_an_artifact_swapped_while_prepare_checks_it_is_refused_as_not_ours(
    tmp_path: pathlib.Path,
) -> None:
    session = tmp_path / "s1"
    claim = make_artifact(session)
    journal = ArtifactRetentionJournal(session, fs=_SwapOnOpenFS())
    with pytest.raises(ArtifactNotOwnedError) as info:
        journal.prepare(claim, "t1")
    assert str(info.value) == "artifact tool_result_001.txt changed while checked"
    assert not _journal(session).exists()


# -- crash points -----------------------------------------------------------------


class _CrashPoints(OsFileSystem):
    def __init__(self) -> None:
        self.passed: list[str] = []

    def crash_point(self, name: str) -> None:
        self.passed.append(name)


def test_cutting_a_torn_tail_passes_the_named_crash_points_in_order(
    tmp_path: pathlib.Path,
) -> None:
    session = tmp_path / "s1"
    _prepared(session)
    with open(_journal(session), "ab") as handle:
        handle.write(b'{"event')
    fs = _CrashPoints()
    ArtifactRetentionJournal(session, fs=fs, clock=Clock()).commit("t1")
    assert fs.passed == [
        "journal.before_truncate",
        "journal.after_truncate",
        "journal.before_append",
        "journal.before_fsync",
        "journal.after_fsync",
    ]
    assert set(fs.passed) <= CRASH_POINTS  # each one a TOOLSWAP_FAILPOINT can name
