"""Journal line format and recovery (docs/design.md section 5): every bad complete line raises.

Claims: S6 append-only evidence -- the journal accepts exactly a verified prefix
plus at most one torn tail; any other damage is corruption naming line and reason.
"""

from __future__ import annotations

import json
import pathlib
import pickle

import pytest
from toolswap.spec.lease import LeaseNote, LeaseState

from toolswap.domain import ArtifactRetentionClaim
from toolswap.errors import UsageError
from toolswap.journal import ArtifactRetentionJournal, JournalCorruptError
from toolswap.journal_anchor import ANCHOR_NAME
from toolswap.journal_format import (
    CORRUPTION_REASONS,
    GENESIS_SHA256,
    RECORD_KEYS,
    ObservedIdentity,
    build_record,
    canonical_json,
    encode_record,
    parse_line,
    sha256_hex,
)

from ._journal_support import Clock, OneFileFS, journal_with_records, make_artifact


def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def test_records_are_canonical_ascii_json_chained_from_genesis(tmp_path: pathlib.Path) -> None:
    session = tmp_path / "s1"
    journal = journal_with_records(session, 5)
    data = pathlib.Path(journal.path).read_bytes()
    assert data.endswith(b"\n")
    previous = GENESIS_SHA256
    for number, line in enumerate(data.split(b"\n")[:-1], start=1):
        record = json.loads(line)
        assert set(record) == RECORD_KEYS
        assert canonical_json(record) == line
        assert record["sequence"] == number
        assert record["previous_sha256"] == previous
        assert record["session_id"] == "s1"
        body = {k: v for k, v in record.items() if k != "event_sha256"}
        assert sha256_hex(canonical_json(body)) == record["event_sha256"]
        previous = record["event_sha256"]
    first = json.loads(data.split(b"\n")[0])
    assert first["phase"] == "PREPARED" and first["intent"]["source_id"].startswith("artifact:s1:")
    second = json.loads(data.split(b"\n")[1])
    assert second["intent"] is None and second["intent_sha256"] == first["intent_sha256"]


def test_line_separators_in_fields_are_harmless(tmp_path: pathlib.Path) -> None:
    """U+2028, U+0085, CR and friends in a transaction id: ASCII on disk, one record per line."""
    session = tmp_path / "s1"
    claim = make_artifact(session)
    journal = ArtifactRetentionJournal(session)
    odd = ["a\u2028b", "c\u2029d", "e\x85f", "g\rh", "i\x0bj\x0ck", "l\u2028"]
    for txn in odd:
        journal.prepare(claim, txn)
        journal.commit(txn)
    data = pathlib.Path(journal.path).read_bytes()
    data.decode("ascii")
    assert data.count(b"\n") == 2 * len(odd)
    rec = ArtifactRetentionJournal(session).recover()
    assert dict(rec.states) == {txn: LeaseState.COMMITTED for txn in odd}


def test_non_canonical_utf8_line_separator_is_corruption_not_a_split(
    tmp_path: pathlib.Path,
) -> None:
    """A raw U+2028 (valid JSON, valid hash) is one bad line 1, not two lines."""
    session = tmp_path / "s1"
    claim = make_artifact(session)
    record = build_record(
        sequence=1,
        previous_sha256=GENESIS_SHA256,
        session_id="s1",
        transaction_id="x\u2028y",
        phase=LeaseState.PREPARED,
        time=1.0,
        claim=claim,
    )
    raw = json.dumps(record.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    (session / "retention-leases.jsonl").write_bytes(raw.encode() + b"\n")
    with pytest.raises(JournalCorruptError) as info:
        ArtifactRetentionJournal(session)
    assert (info.value.line_number, info.value.reason) == (1, "canonical")


@pytest.mark.slow
def test_any_single_byte_flip_of_any_complete_line_raises(tmp_path: pathlib.Path) -> None:
    session = tmp_path / "s1"
    journal = journal_with_records(session, 20)
    good = pathlib.Path(journal.path).read_bytes()
    assert good.count(b"\n") == 20
    fs = OneFileFS(journal.path)
    for offset in range(len(good)):
        for mask in (0x01, 0xFF):  # the low bit, and every bit
            bad = bytearray(good)
            bad[offset] ^= mask
            fs.data = bad
            with pytest.raises(JournalCorruptError) as info:
                ArtifactRetentionJournal(session, fs=fs)
            assert info.value.line_number == _line_of(good, offset), (offset, mask)
            assert info.value.reason in CORRUPTION_REASONS, (offset, mask)
    fs.data = bytearray(good)
    assert ArtifactRetentionJournal(session, fs=fs).recover().record_count == 20


@pytest.mark.slow
def test_any_byte_turned_into_a_newline_raises_at_its_line(tmp_path: pathlib.Path) -> None:
    """The most structural single-byte change: a line split in two is still one bad line."""
    session = tmp_path / "s1"
    journal = journal_with_records(session, 20)
    good = pathlib.Path(journal.path).read_bytes()
    fs = OneFileFS(journal.path)
    for offset in range(len(good)):
        if good[offset] == 0x0A:
            continue
        bad = bytearray(good)
        bad[offset] = 0x0A
        fs.data = bad
        with pytest.raises(JournalCorruptError) as info:
            ArtifactRetentionJournal(session, fs=fs)
        assert info.value.line_number == _line_of(good, offset), offset


def test_byte_flips_on_the_real_disk_raise(tmp_path: pathlib.Path) -> None:
    """The same claim on real files, for a sample of offsets (the seam is not the point)."""
    session = tmp_path / "s1"
    journal = journal_with_records(session, 20)
    path = pathlib.Path(journal.path)
    good = path.read_bytes()
    for offset in range(0, len(good), 97):
        bad = bytearray(good)
        bad[offset] ^= 0x01
        path.write_bytes(bytes(bad))
        with pytest.raises(JournalCorruptError):
            ArtifactRetentionJournal(session)
    path.write_bytes(good)


@pytest.mark.slow
def test_truncation_at_every_offset_recovers_a_prefix_and_appends(tmp_path: pathlib.Path) -> None:
    session = tmp_path / "s1"
    journal = journal_with_records(session, 20)
    good = pathlib.Path(journal.path).read_bytes()
    claim = make_artifact(session)
    fs = OneFileFS(journal.path)
    for cut in range(len(good) + 1):
        fs.data = bytearray(good[:cut])
        complete = good.count(b"\n", 0, cut)
        partial = cut - (good.rfind(b"\n", 0, cut) + 1)
        # Each cut stands for a crash that tore the tail at this offset, in a new
        # world; the anchor of the previous iteration's records is not part of it.
        (session / ANCHOR_NAME).unlink(missing_ok=True)
        journal = ArtifactRetentionJournal(session, fs=fs)  # full verification at open
        with journal.locked_state() as rec:
            assert rec.record_count == complete
            if partial:
                assert rec.torn_tail is not None and rec.torn_tail.length == partial
            else:
                assert rec.torn_tail is None
        assert fs.data == good[:cut], "recovery alone must not change the file"
        fs.ops.clear()
        journal.prepare(claim, "after-cut")
        cut_first = ["ftruncate", "fsync"] if partial else []
        assert fs.ops == [*cut_first, "write", "fsync"], "the tail is cut durably, then written"
        with ArtifactRetentionJournal(session, fs=fs).locked_state() as again:  # verified at open
            assert again.record_count == complete + 1 and again.torn_tail is None
            assert again.states["after-cut"] is LeaseState.PREPARED
        assert fs.data.startswith(good[: cut - partial])


def test_truncation_on_the_real_disk_recovers_and_appends(tmp_path: pathlib.Path) -> None:
    session = tmp_path / "s1"
    journal = journal_with_records(session, 20)
    path = pathlib.Path(journal.path)
    good = path.read_bytes()
    claim = make_artifact(session)
    for cut in range(0, len(good) + 1, 101):
        path.write_bytes(good[:cut])
        (session / ANCHOR_NAME).unlink(missing_ok=True)  # as above: a new world per cut
        ArtifactRetentionJournal(session).prepare(claim, "after-cut")
        again = ArtifactRetentionJournal(session).recover()
        assert (again.record_count, again.torn_tail) == (good.count(b"\n", 0, cut) + 1, None)


def _write_lines(session: pathlib.Path, *lines: bytes) -> None:
    (session / "retention-leases.jsonl").write_bytes(b"".join(lines))


def _two(base: ArtifactRetentionClaim, **second: object) -> tuple[bytes, bytes]:
    first = build_record(
        sequence=1,
        previous_sha256=GENESIS_SHA256,
        session_id="s1",
        transaction_id="t1",
        phase=LeaseState.PREPARED,
        time=1.0,
        claim=base,
    )
    fields: dict[str, object] = {
        "sequence": 2,
        "previous_sha256": first.event_sha256,
        "session_id": "s1",
        "transaction_id": "t1",
        "phase": LeaseState.COMMITTED,
        "time": 2.0,
        "claim": base,
    }
    fields.update(second)
    return encode_record(first), encode_record(build_record(**fields))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("second", "reason"),
    [
        ({"sequence": 3}, "sequence"),
        ({"sequence": 1}, "sequence"),
        ({"previous_sha256": "1" * 64}, "chain"),
        ({"session_id": "other"}, "session"),
        ({"phase": LeaseState.RELEASED}, "illegal_transition"),
        ({"phase": LeaseState.PREPARED}, "illegal_transition"),
        ({"transaction_id": "never-prepared"}, "illegal_transition"),
    ],
)
def test_each_protocol_violation_names_line_and_reason(
    tmp_path: pathlib.Path, second: dict[str, object], reason: str
) -> None:
    session = tmp_path / "s1"
    claim = make_artifact(session)
    _write_lines(session, *_two(claim, **second))
    with pytest.raises(JournalCorruptError) as info:
        ArtifactRetentionJournal(session)
    assert (info.value.line_number, info.value.reason) == (2, reason)
    assert "line 2" in str(info.value) and str(session) not in str(info.value)


def test_intent_rewrite_is_corruption(tmp_path: pathlib.Path) -> None:
    session = tmp_path / "s1"
    claim = make_artifact(session)
    other = make_artifact(session, b"other\n", 2)
    _write_lines(session, *_two(claim, claim=other))
    with pytest.raises(JournalCorruptError) as info:
        ArtifactRetentionJournal(session)
    assert (info.value.line_number, info.value.reason) == (2, "intent_rewrite")


def test_second_terminal_event_is_corruption(tmp_path: pathlib.Path) -> None:
    """S5: one terminal event per transaction; a second COMMITTED is an illegal transition."""
    session = tmp_path / "s1"
    claim = make_artifact(session)
    first, second = _two(claim)
    third = build_record(
        sequence=3,
        previous_sha256=json.loads(second)["event_sha256"],
        session_id="s1",
        transaction_id="t1",
        phase=LeaseState.ABORTED,
        time=3.0,
        claim=claim,
    )
    _write_lines(session, first, second, encode_record(third))
    with pytest.raises(JournalCorruptError) as info:
        ArtifactRetentionJournal(session)
    assert (info.value.line_number, info.value.reason) == (3, "illegal_transition")


def test_tampered_field_fails_the_hash(tmp_path: pathlib.Path) -> None:
    """Caught only by the event hash (the line stays canonical): a 'skip the hash' mutant fails."""
    session = tmp_path / "s1"
    claim = make_artifact(session, retain_until=100.0)
    first, second = _two(claim)
    record = json.loads(second)
    record["time"] = 3.0
    _write_lines(session, first, canonical_json(record) + b"\n")
    with pytest.raises(JournalCorruptError) as info:
        ArtifactRetentionJournal(session)
    assert (info.value.line_number, info.value.reason) == (2, "hash")


def test_tampered_intent_fails(tmp_path: pathlib.Path) -> None:
    session = tmp_path / "s1"
    claim = make_artifact(session, retain_until=100.0)
    first, second = _two(claim)
    record = json.loads(first)
    record["intent"]["retain_until"] = 10**9
    body = {k: v for k, v in record.items() if k != "event_sha256"}
    record["event_sha256"] = sha256_hex(canonical_json(body))  # a careful forger
    _write_lines(session, canonical_json(record) + b"\n", second)
    with pytest.raises(JournalCorruptError) as info:
        ArtifactRetentionJournal(session)
    assert (info.value.line_number, info.value.reason) == (1, "intent")


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"not json", "json"),
        (b"", "json"),
        (b"[1,2]", "schema"),
        (b'{"a":1}', "schema"),
        (b"\xff\xfe", "json"),
    ],
)
def test_garbage_lines_are_corruption(tmp_path: pathlib.Path, line: bytes, reason: str) -> None:
    session = tmp_path / "s1"
    claim = make_artifact(session)
    first, _ = _two(claim)
    _write_lines(session, first, line + b"\n")
    with pytest.raises(JournalCorruptError) as info:
        ArtifactRetentionJournal(session)
    assert (info.value.line_number, info.value.reason) == (2, reason)


def test_pretty_printed_record_is_not_canonical(tmp_path: pathlib.Path) -> None:
    session = tmp_path / "s1"
    claim = make_artifact(session)
    first, _ = _two(claim)
    spaced = json.dumps(json.loads(first), sort_keys=True, separators=(", ", ": ")).encode()
    _write_lines(session, spaced + b"\n")
    with pytest.raises(JournalCorruptError) as info:
        ArtifactRetentionJournal(session)
    assert info.value.reason == "canonical"


def test_whole_record_without_newline_followed_by_bytes_is_not_a_torn_tail(
    tmp_path: pathlib.Path,
) -> None:
    session = tmp_path / "s1"
    claim = make_artifact(session)
    first, second = _two(claim)
    _write_lines(session, first, second[:-1] + b"x")
    with pytest.raises(JournalCorruptError) as info:
        ArtifactRetentionJournal(session)
    assert (info.value.line_number, info.value.reason) == (2, "newline")


def test_whole_record_missing_only_its_newline_is_a_torn_tail(tmp_path: pathlib.Path) -> None:
    session = tmp_path / "s1"
    claim = make_artifact(session)
    first, second = _two(claim)
    _write_lines(session, first, second[:-1])
    rec = ArtifactRetentionJournal(session).recover()
    assert rec.record_count == 1 and rec.states["t1"] is LeaseState.PREPARED
    assert rec.torn_tail is not None and rec.torn_tail.offset == len(first)


def test_parse_line_round_trips_a_built_record() -> None:
    claim = ArtifactRetentionClaim(
        source_id="artifact:s1:tool_result_001.txt:" + "a" * 12,
        content_sha256="a" * 64,
        retain_until=12.5,
    )
    record = build_record(
        sequence=1,
        previous_sha256=GENESIS_SHA256,
        session_id="s1",
        transaction_id="t",
        phase=LeaseState.PREPARED,
        time=Clock()(),
        claim=claim,
    )
    assert parse_line(encode_record(record)[:-1], 1) == record


@pytest.mark.parametrize("where", ["complete_line", "torn_tail"])
def test_absurdly_nested_json_is_corruption_or_a_torn_tail_never_a_crash(
    tmp_path: pathlib.Path, where: str
) -> None:
    """json raises RecursionError (not ValueError) on deep nesting: still a typed answer."""
    session = tmp_path / "s1"
    claim = make_artifact(session)
    first, _ = _two(claim)
    nested = b"[" * 60_000  # deep, yet under MAX_RECORD_BYTES
    _write_lines(session, first, nested + (b"\n" if where == "complete_line" else b""))
    if where == "complete_line":
        with pytest.raises(JournalCorruptError) as info:
            ArtifactRetentionJournal(session)
        assert (info.value.line_number, info.value.reason) == (2, "json")
    else:
        rec = ArtifactRetentionJournal(session).recover()
        assert rec.record_count == 1 and rec.torn_tail is not None


@pytest.mark.parametrize("bad_id", ["x" * 513, "lone\ud800surrogate"])
def test_a_record_with_an_impossible_transaction_id_is_corruption(
    tmp_path: pathlib.Path, bad_id: str
) -> None:
    """Ids the journal would never write (too long, not valid Unicode) do not parse either."""
    session = tmp_path / "s1"
    claim = make_artifact(session)
    record = json.loads(_two(claim)[0])
    record["transaction_id"] = bad_id
    body = {k: v for k, v in record.items() if k != "event_sha256"}
    record["event_sha256"] = sha256_hex(canonical_json(body))
    _write_lines(session, canonical_json(record) + b"\n")
    with pytest.raises(JournalCorruptError) as info:
        ArtifactRetentionJournal(session)
    assert (info.value.line_number, info.value.reason) == (1, "schema")


def test_corruption_errors_survive_pickling_for_process_pools() -> None:
    error = pickle.loads(pickle.dumps(JournalCorruptError(7, "chain", "previous_sha256")))
    assert (error.line_number, error.reason, error.detail) == (7, "chain", "previous_sha256")


# -- CONFLICT: a note on a PREPARED lease (journal_format rule 5) -----------------------


def _conflict_pair(base: ArtifactRetentionClaim, seen: ObservedIdentity) -> tuple[bytes, bytes]:
    return _two(base, phase=LeaseNote.CONFLICT, observed=seen)


def test_a_conflict_record_round_trips_and_keeps_the_lease_prepared(
    tmp_path: pathlib.Path,
) -> None:
    session = tmp_path / "s1"
    claim = make_artifact(session)
    other = make_artifact(session, b"other\n", 2)
    seen = ObservedIdentity.seen(other.source_id, other.content_sha256)
    _write_lines(session, *_conflict_pair(claim, seen))
    recovery = ArtifactRetentionJournal(session).recover()
    assert recovery.states == {"t1": LeaseState.PREPARED}
    assert recovery.pending_transaction_ids == ("t1",)
    assert recovery.conflicts == {"t1": (seen,)}


def test_a_conflict_on_a_lease_that_is_not_prepared_is_an_illegal_transition(
    tmp_path: pathlib.Path,
) -> None:
    session = tmp_path / "s1"
    claim = make_artifact(session)
    first, second = _two(claim)
    third = build_record(
        sequence=3,
        previous_sha256=json.loads(second)["event_sha256"],
        session_id="s1",
        transaction_id="t1",
        phase=LeaseNote.CONFLICT,
        time=3.0,
        claim=claim,
        observed=ObservedIdentity.seen("x", "y"),
    )
    _write_lines(session, first, second, encode_record(third))
    with pytest.raises(JournalCorruptError) as info:
        ArtifactRetentionJournal(session)
    assert (info.value.line_number, info.value.reason) == (3, "illegal_transition")


def test_an_owner_answer_that_is_not_a_string_is_recorded_as_null() -> None:
    seen = ObservedIdentity.seen(12, "x" * 10_000)
    assert seen.to_dict() == {"source_id": None, "content_sha256": None}


def test_an_observed_identity_goes_on_conflict_records_only(tmp_path: pathlib.Path) -> None:
    claim = make_artifact(tmp_path / "s1")
    with pytest.raises(UsageError):
        _two(claim, observed=ObservedIdentity.seen("a", "b"))  # on COMMITTED
    with pytest.raises(UsageError):
        _two(claim, phase=LeaseNote.CONFLICT)  # CONFLICT without one
