"""The plain-line fast path of the journal parser (journal_format rule: soundness).

Claim: whatever ``_parse_plain`` accepts, ``_parse_general`` (the definition of a
valid line) accepts as the same record, and ordinary lines take the fast path.
S6 rests on this: a fast path that accepted a line the general parser refuses
would let damaged evidence through.
"""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
from hypothesis import given
from toolswap.spec.lease import RECORD_PHASES, LeaseNote, LeaseState

from toolswap.domain import ArtifactRetentionClaim
from toolswap.journal_format import (
    GENESIS_SHA256,
    JournalCorruptError,
    _parse_general,
    _parse_plain,
    build_record,
    encode_record,
    sha256_hex,
)

_SESSION = st.from_regex(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,20}", fullmatch=True)
_NUMBERS = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False, allow_infinity=False),
)


@st.composite
def _records(draw: st.DrawFn) -> bytes:
    session = draw(_SESSION)
    digest = sha256_hex(draw(st.binary(max_size=8)))
    number = draw(st.integers(min_value=1, max_value=10**6))
    claim = ArtifactRetentionClaim(
        source_id=f"artifact:{session}:tool_result_{number:03d}.txt:{digest[:12]}",
        content_sha256=digest,
        reference_count=draw(st.integers(min_value=1, max_value=10**20)),
        retain_until=draw(st.none() | _NUMBERS),
    )
    record = build_record(
        sequence=draw(st.integers(min_value=1, max_value=10**12)),
        previous_sha256=GENESIS_SHA256,
        session_id=session,
        transaction_id=draw(st.text(min_size=1, max_size=40).filter(_encodable)),
        phase=draw(st.sampled_from([p for p in RECORD_PHASES if p is not LeaseNote.CONFLICT])),
        time=draw(_NUMBERS),
        claim=claim,
    )
    return encode_record(record)[:-1]


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_EVENT = slice(len(b'{"event_sha256":"'), len(b'{"event_sha256":"') + 64)


def _rehashed(line: bytes) -> bytes:
    """``line`` with its event hash recomputed: damage a forger would hide (unkeyed chain)."""
    body = b"{" + line[_EVENT.stop + 2 :]
    return line[: _EVENT.start] + sha256_hex(body).encode() + line[_EVENT.stop :]


def _general(line: bytes) -> object:
    try:
        return _parse_general(line, 1)
    except JournalCorruptError as exc:
        return exc


@given(_records())
def test_the_fast_path_agrees_with_the_general_parser_on_valid_lines(line: bytes) -> None:
    fast = _parse_plain(line)
    if fast is not None:
        assert fast == _general(line)


@given(_records(), st.data())
def test_a_damaged_line_the_fast_path_accepts_is_one_the_general_parser_accepts(
    line: bytes, data: st.DataObject
) -> None:
    at = data.draw(st.integers(min_value=0, max_value=len(line) - 1))
    byte = data.draw(st.sampled_from(b'0123456789abcdef.-+eE" \\{},:nul\x7f\xff'))
    damaged = line[:at] + bytes([byte]) + line[at + 1 :]
    for candidate in (damaged, _rehashed(damaged)):
        fast = _parse_plain(candidate)
        if fast is not None:
            assert fast == _general(candidate)


def test_every_single_byte_change_of_plain_lines_is_refused_or_agreed() -> None:
    for phase in (LeaseState.PREPARED, LeaseState.ABORTED):
        line = _line(phase, time=12.25, until=1.5)
        assert _parse_plain(line) == _general(line)  # taken, and right
        for at in range(len(line)):
            for byte in b'09af.-e" \\}':
                damaged = line[:at] + bytes([byte]) + line[at + 1 :]
                for candidate in (damaged, _rehashed(damaged)):
                    fast = _parse_plain(candidate)
                    assert fast is None or fast == _general(candidate), (phase, at, chr(byte))


def test_plain_lines_take_the_fast_path() -> None:
    for phase in (
        LeaseState.PREPARED,
        LeaseState.COMMITTED,
        LeaseState.ABORTED,
        LeaseState.RELEASED,
    ):
        assert _parse_plain(_line(phase, time=1.0)) is not None, phase


def _line(phase: LeaseState, *, time: float, count: int = 2, until: float | None = None) -> bytes:
    claim = ArtifactRetentionClaim(
        source_id="artifact:s1:tool_result_001.txt:" + "ab" * 6,
        content_sha256="ab" * 32,
        reference_count=count,
        retain_until=until,
    )
    record = build_record(
        sequence=3,
        previous_sha256=GENESIS_SHA256,
        session_id="s1",
        transaction_id="t1",
        phase=phase,
        time=time,
        claim=claim,
    )
    return encode_record(record)[:-1]


def _forged(line: bytes, old: bytes, new: bytes) -> bytes:
    """``line`` with ``old`` replaced and every hash recomputed: only the rules can refuse it."""
    assert old in line
    line = line.replace(old, new, 1)
    start = line.index(b'"intent":') + len(b'"intent":')
    end = line.index(b',"intent_sha256":"')
    if line[start:end] != b"null":
        at = end + len(b',"intent_sha256":"')
        line = line[:at] + sha256_hex(line[start:end]).encode() + line[at + 64 :]
    return _rehashed(line)


_PREPARED = _line(LeaseState.PREPARED, time=0, count=2)
_ABORTED = _line(LeaseState.ABORTED, time=1.5)
_CLAIM = _PREPARED[_PREPARED.index(b'"intent":') : _PREPARED.index(b',"intent_sha256"')]


@pytest.mark.parametrize(
    ("line", "old", "new"),
    [
        (_PREPARED, b'"time":0,', b'"time":-0,'),
        (_PREPARED, b'"time":0,', b'"time":00,'),
        (_PREPARED, b'"time":0,', b'"time":0.0e0,'),
        (_PREPARED, b'"reference_count":2,', b'"reference_count":-0,'),
        (_PREPARED, b'"reference_count":2,', b'"reference_count":02,'),
        (_PREPARED, b'"reference_count":2,', b'"reference_count":2.0,'),
        (_PREPARED, b'"retain_until":null,', b'"retain_until":1e400,'),
        (_ABORTED, b'"time":1.5,', b'"time":1.50,'),
        (_ABORTED, b'"time":1.5,', b'"time":15e-1,'),
        (_ABORTED, b'"phase":"ABORTED"', b'"phase":"PREPARED"'),  # PREPARED without intent
        (_ABORTED, b'"intent":null', _CLAIM),  # ABORTED carrying an intent
        (_ABORTED, b'"sequence":3,', b'"sequence":03,'),
    ],
)
def test_a_forged_non_canonical_line_is_left_to_the_general_parser(
    line: bytes, old: bytes, new: bytes
) -> None:
    forged = _forged(line, old, new)
    assert isinstance(_general(forged), JournalCorruptError)  # the case is a real refusal
    assert _parse_plain(forged) is None
