"""Domain objects: strict source ids, frozen values, lossless dict round trips."""

from __future__ import annotations

import datetime
import hashlib

import attrs
import pytest

from toolswap.domain import (
    ArtifactMemoryReference,
    ArtifactReference,
    ArtifactRetentionClaim,
    ArtifactSource,
    format_source_id,
    parse_source_id,
)
from toolswap.errors import InvalidSourceId, UsageError

DIGEST = hashlib.sha256(b"payload").hexdigest()
SID = f"artifact:sess-1:tool_result_007.txt:{DIGEST[:12]}"


def _reference() -> ArtifactReference:
    return ArtifactReference(
        source=ArtifactSource(
            source_id=SID, title="bash output", captured_at="2026-01-01T00:00:00"
        ),
        path="/s/sess-1/tool-results/tool_result_007.txt",
        summary="payload (7 bytes, 1 lines)",
        source_tool="bash",
        content_sha256=DIGEST,
        size_bytes=7,
        line_count=1,
    )


def test_source_id_round_trips_through_format_and_parse() -> None:
    parsed = parse_source_id(format_source_id("sess-1", "tool_result_007.txt", DIGEST))
    assert (parsed.session_id, parsed.filename, parsed.digest_prefix) == (
        "sess-1",
        "tool_result_007.txt",
        DIGEST[:12],
    )
    assert str(parsed) == SID


HOSTILE_IDS = [
    "",
    "artifact",
    f"artifact:..:tool_result_001.txt:{DIGEST[:12]}",
    f"artifact:.:tool_result_001.txt:{DIGEST[:12]}",
    f"artifact:a/b:tool_result_001.txt:{DIGEST[:12]}",
    f"artifact:s:../tool_result_001.txt:{DIGEST[:12]}",
    f"artifact:s:tool_result_001.txt/..:{DIGEST[:12]}",
    f"artifact:s:/etc/passwd:{DIGEST[:12]}",
    f"artifact:s:tool_result_01.txt:{DIGEST[:12]}",
    f"artifact:s:tool_result_001.txt.bak:{DIGEST[:12]}",
    f"artifact:s:tool_result_001.txt:{DIGEST[:12].upper()}",
    f"artifact:s:tool_result_001.txt:{DIGEST[:11]}",
    f"artifact:s:tool_result_001.txt:{DIGEST[:12]}:extra",
    f"file:s:tool_result_001.txt:{DIGEST[:12]}",
    f"artifact:{'x' * 129}:tool_result_001.txt:{DIGEST[:12]}",
    f"artifact:s\x00:tool_result_001.txt:{DIGEST[:12]}",
    f"artifact:s:tool_result_001.txt\n:{DIGEST[:12]}",
    f"artifact:sé:tool_result_001.txt:{DIGEST[:12]}",
]


@pytest.mark.parametrize("hostile", HOSTILE_IDS)
def test_hostile_source_ids_are_rejected_with_a_typed_error(hostile: str) -> None:
    with pytest.raises(InvalidSourceId):
        parse_source_id(hostile)


def test_a_non_string_source_id_is_rejected() -> None:
    with pytest.raises(InvalidSourceId):
        parse_source_id(123)


def test_invalid_source_id_is_a_value_error_for_callers() -> None:
    assert issubclass(InvalidSourceId, ValueError)


@pytest.mark.parametrize(
    "value",
    [
        _reference(),
        _reference().for_memory(),
        _reference().source,
        ArtifactRetentionClaim(
            source_id=SID, content_sha256=DIGEST, reference_count=2, retain_until=5.5
        ),
    ],
    ids=lambda v: type(v).__name__,
)
def test_every_domain_object_round_trips_through_its_dict(value: object) -> None:
    cls = type(value)
    assert cls.from_dict(value.to_dict()) == value  # type: ignore[attr-defined]


def test_domain_objects_are_frozen() -> None:
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        _reference().summary = "changed"  # type: ignore[misc]


def test_memory_reference_carries_no_content_or_preview() -> None:
    fields = {f.name for f in attrs.fields(ArtifactMemoryReference)}
    assert fields == {"summary", "artifact_path", "content_sha256", "source_tool", "source"}


def test_claim_refuses_a_digest_that_disagrees_with_its_source_id() -> None:
    other = hashlib.sha256(b"other").hexdigest()
    with pytest.raises(UsageError):
        ArtifactRetentionClaim(source_id=SID, content_sha256=other)


@pytest.mark.parametrize(
    "changes",
    [
        {"reference_count": 0},
        {"reference_count": True},
        {"retain_until": float("nan")},
        {"retain_until": "soon"},
        {"retain_until": 10**400},
        {"retain_until": True},
        {"retain_until": "2026-09-01T00:00:00"},
        {"retain_until": datetime.datetime(2026, 9, 1)},
        {"retain_until": datetime.date(2026, 9, 1)},
    ],
)
def test_claim_refuses_invalid_counts_and_expiries(changes: dict[str, object]) -> None:
    with pytest.raises(UsageError):
        ArtifactRetentionClaim(source_id=SID, content_sha256=DIGEST, **changes)  # type: ignore[arg-type]


SEPT_1_2026 = 1788220800.0  # 2026-09-01T00:00:00Z in epoch seconds


@pytest.mark.parametrize(
    "when",
    [
        "2026-09-01T00:00:00+00:00",
        "2026-09-01T00:00:00Z",
        "2026-09-01T02:00:00+02:00",
        datetime.datetime(2026, 9, 1, tzinfo=datetime.UTC),
        SEPT_1_2026,
    ],
)
def test_claim_takes_retain_until_as_an_aware_time_in_any_form(when: object) -> None:
    # The source document writes retain_until as an ISO 8601 string.
    claim = ArtifactRetentionClaim(source_id=SID, content_sha256=DIGEST, retain_until=when)  # type: ignore[arg-type]
    assert claim.retain_until == SEPT_1_2026


def test_a_naive_retain_until_is_refused_and_says_why() -> None:
    with pytest.raises(UsageError, match="no time zone"):
        ArtifactRetentionClaim(
            source_id=SID, content_sha256=DIGEST, retain_until="2026-09-01T00:00:00"
        )


def test_claim_from_memory_reference_keeps_the_full_digest() -> None:
    claim = ArtifactRetentionClaim.from_memory_reference(
        _reference().for_memory(), reference_count=3
    )
    assert (claim.source_id, claim.content_sha256, claim.reference_count) == (SID, DIGEST, 3)


def test_from_dict_refuses_unknown_and_missing_keys() -> None:
    data = _reference().to_dict()
    with pytest.raises(UsageError):
        ArtifactReference.from_dict({**data, "content": "smuggled"})
    del data["path"]
    with pytest.raises(UsageError):
        ArtifactReference.from_dict(data)
