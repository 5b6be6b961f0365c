"""Gaps the mutation run found in journal_format (docs/mutation.md).

Claims: a complete line broken in exactly one field (and re-hashed, so only
that rule is broken) is refused by the general parser with reason ``schema``
and the field's name as detail; every other single-line corruption has its own
reason and detail at the given line number; the length limits of a
transaction id and of an observed string are inclusive; an observed identity
refuses anything that is not exactly one identity.
"""

from __future__ import annotations

from typing import Any

import pytest
from toolswap.spec.lease import LeaseNote, LeaseState

from toolswap.domain import ArtifactRetentionClaim
from toolswap.errors import UsageError
from toolswap.journal_format import (
    GENESIS_SHA256,
    MAX_OBSERVED_LEN,
    MAX_TRANSACTION_ID_LEN,
    JournalCorruptError,
    ObservedIdentity,
    build_record,
    canonical_json,
    parse_line,
    sha256_hex,
    validate_transaction_id,
)


def _valid(phase: LeaseState = LeaseState.PREPARED) -> dict[str, Any]:
    claim = ArtifactRetentionClaim(
        source_id="artifact:s1:tool_result_001.txt:" + "a" * 12,
        content_sha256="a" * 64,
    )
    record = build_record(
        sequence=1,
        previous_sha256=GENESIS_SHA256,
        session_id="s1",
        transaction_id="t",
        phase=phase,
        time=1000.0,
        claim=claim,
        observed=ObservedIdentity.seen("a", "b") if phase is LeaseNote.CONFLICT else None,
    )
    return record.to_dict()


def _line_with(kind: LeaseState = LeaseState.PREPARED, /, **fields: object) -> bytes:
    """A canonical line whose event hash matches, with ``fields`` replaced."""
    data = _valid(kind)
    data.update(fields)
    body = {k: v for k, v in data.items() if k != "event_sha256"}
    if "event_sha256" not in fields:
        data["event_sha256"] = sha256_hex(canonical_json(body))
    return canonical_json(data)


@pytest.mark.parametrize(
    ("fields", "detail"),
    [
        ({"extra": 1}, "wrong keys"),
        ({"version": 2}, "unsupported version"),
        ({"version": True}, "unsupported version"),
        ({"sequence": 0}, "sequence"),
        ({"sequence": "1"}, "sequence"),
        ({"sequence": True}, "sequence"),
        ({"previous_sha256": "ab"}, "previous_sha256"),
        ({"intent_sha256": 5}, "intent_sha256"),
        ({"event_sha256": "A" * 64}, "event_sha256"),
        ({"session_id": ""}, "session_id"),
        ({"session_id": 7}, "session_id"),
        ({"transaction_id": ""}, "transaction_id"),
        ({"phase": "LOST"}, "phase"),
        ({"time": "now"}, "time"),
    ],
)
def test_a_line_broken_in_one_field_is_a_schema_error_naming_that_field(
    fields: dict[str, object], detail: str
) -> None:
    with pytest.raises(JournalCorruptError) as info:
        parse_line(_line_with(**fields), 4)
    assert (info.value.line_number, info.value.reason, info.value.detail) == (4, "schema", detail)


def test_the_valid_line_the_cases_start_from_parses() -> None:
    """The baseline of the cases above: without a replaced field, nothing is wrong."""
    assert parse_line(_line_with(), 1).session_id == "s1"


_PREPARED_INTENT = _valid()["intent"]
# A claim read with a default filled in: valid, but not the bytes it re-encodes to.
_SHORT_INTENT = {k: v for k, v in _PREPARED_INTENT.items() if k != "retain_until"}


@pytest.mark.parametrize(
    ("line", "reason", "detail"),
    [
        (b'{"version":', "json", "JSONDecodeError"),
        (b"\xff{}", "json", "UnicodeDecodeError"),
        (_line_with().replace(b",", b", ", 1), "canonical", "line is not canonical JSON"),
        (_line_with().replace(b'"time":1000.0', b'"time":NaN'), "canonical", "not encodable"),
        (
            _line_with().replace(b'"time":1000.0', b'"time":1001.0'),
            "hash",
            "event_sha256 does not match",
        ),
        (
            _line_with(LeaseNote.CONFLICT, intent=None),
            "intent",
            "CONFLICT without an observed identity",
        ),
        (_line_with(intent=None), "intent", "PREPARED without an intent"),
        (_line_with(intent={}), "intent", "UsageError"),
        (_line_with(intent_sha256="b" * 64), "intent", "intent_sha256 does not match"),
        (
            _line_with(
                intent=_SHORT_INTENT, intent_sha256=sha256_hex(canonical_json(_SHORT_INTENT))
            ),
            "intent",
            "intent is not a canonical claim",
        ),
        (
            _line_with(LeaseState.COMMITTED, intent=_PREPARED_INTENT),
            "intent",
            "COMMITTED carries an intent",
        ),
    ],
)
def test_each_corruption_of_a_single_line_has_its_reason_and_detail(
    line: bytes, reason: str, detail: str
) -> None:
    with pytest.raises(JournalCorruptError) as info:
        parse_line(line, 4)
    assert (info.value.line_number, info.value.reason, info.value.detail) == (4, reason, detail)


def test_a_corruption_error_without_detail_says_line_and_reason_only() -> None:
    error = JournalCorruptError(3, "chain")
    assert (error.detail, str(error)) == ("", "corrupt lease journal at line 3: chain")


def test_a_transaction_id_of_exactly_the_allowed_length_is_valid() -> None:
    longest = "t" * MAX_TRANSACTION_ID_LEN
    assert validate_transaction_id(longest) == longest
    with pytest.raises(UsageError):
        validate_transaction_id(longest + "t")


def test_an_observed_identity_off_a_conflict_record_is_refused_with_the_rule() -> None:
    claim = ArtifactRetentionClaim(
        source_id="artifact:s1:tool_result_001.txt:" + "a" * 12, content_sha256="a" * 64
    )
    with pytest.raises(UsageError, match="^an observed identity goes on a CONFLICT record"):
        build_record(
            sequence=1,
            previous_sha256=GENESIS_SHA256,
            session_id="s1",
            transaction_id="t",
            phase=LeaseState.COMMITTED,
            time=1.0,
            claim=claim,
            observed=ObservedIdentity.seen("a", "b"),
        )


def test_an_observed_string_of_exactly_the_allowed_length_is_kept() -> None:
    longest = "x" * MAX_OBSERVED_LEN
    assert ObservedIdentity.seen(longest, "y").source_id == longest
    assert ObservedIdentity.seen(longest + "x", "y").source_id is None


def test_an_observed_dict_without_both_keys_is_not_an_identity() -> None:
    assert ObservedIdentity.from_dict({"source_id": "a"}) is None


def test_an_observed_dict_with_a_value_that_is_not_a_string_is_not_an_identity() -> None:
    """``seen`` would turn 5 into null; read back from a line, that is not the same identity."""
    assert ObservedIdentity.from_dict({"source_id": 5, "content_sha256": "b"}) is None
