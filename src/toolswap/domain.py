"""Domain objects (docs/design.md section 3): frozen, slotted, keyword-only values.

A source id names one artifact of one session, forever:
``artifact:<session_id>:<tool_result_NNN.txt>:<first 12 hex of sha256>``.
Parsing is strict so that a hostile id (path separators, ``..``, odd names)
can never become a path (S7).  Every object round-trips through
``to_dict``/``from_dict``, and ``from_dict`` validates as strictly as the
constructor.
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Mapping
from typing import Any

import attrs

from .errors import InvalidSourceId, UsageError

__all__ = [
    "SourceId",
    "ArtifactSource",
    "ArtifactReference",
    "ArtifactMemoryReference",
    "ArtifactRetentionClaim",
    "RetainUntil",
    "normalize_retain_until",
    "parse_source_id",
    "format_source_id",
    "artifact_prefix",
    "validate_session_id",
    "validate_sha256",
    "artifact_filename",
    "artifact_number",
    "is_artifact_filename",
    "clipped_repr",
    "SHOWN_CHARS",
]

_SESSION_RE = re.compile(r"[A-Za-z0-9._-]{1,128}")
_FILENAME_RE = re.compile(r"tool_result_([0-9]{3,})\.txt")
_PREFIX_RE = re.compile(r"[0-9a-f]{12}")
_SHA256_RE = re.compile(r"[0-9a-f]{64}")
SOURCE_PREFIX_LEN = 12
#: The most characters of a caller's value an error message repeats: a hostile
#: source id can be megabytes, and error texts end up in logs and in contexts.
SHOWN_CHARS = 80


def clipped_repr(value: object, limit: int = SHOWN_CHARS) -> str:
    """``repr(value)`` for a message, cut after about ``limit`` characters, saying its length."""
    if isinstance(value, str | bytes | bytearray) and len(value) > limit:
        unit = "characters" if isinstance(value, str) else "bytes"
        return f"{value[:limit]!r}... ({len(value):,} {unit} in all)"
    text = repr(value)
    if len(text) > limit:
        return f"{text[:limit]}... ({len(text):,} characters in all)"
    return text


def validate_session_id(session_id: object) -> str:
    """Return ``session_id`` if it is a safe session id, else raise :class:`InvalidSourceId`."""
    if (
        not isinstance(session_id, str)
        or not _SESSION_RE.fullmatch(session_id)
        or session_id in {".", ".."}
    ):
        raise InvalidSourceId(
            f"invalid session id {clipped_repr(session_id)}: want [A-Za-z0-9._-]{{1,128}}"
        )
    return session_id


def validate_sha256(digest: object) -> str:
    if not isinstance(digest, str) or not _SHA256_RE.fullmatch(digest):
        raise UsageError(f"invalid sha256 {clipped_repr(digest)}: want 64 lowercase hex digits")
    return digest


def is_artifact_filename(name: str) -> bool:
    return _FILENAME_RE.fullmatch(name) is not None


def artifact_number(filename: str) -> int:
    match = _FILENAME_RE.fullmatch(filename)
    if match is None:
        raise InvalidSourceId(f"invalid artifact file name {clipped_repr(filename)}")
    return int(match.group(1))


def artifact_filename(number: int) -> str:
    if number < 1:
        raise UsageError(f"artifact numbers start at 1, got {number}")
    return f"tool_result_{number:03d}.txt"


@attrs.frozen(kw_only=True)
class SourceId:
    """The parsed parts of a source id."""

    session_id: str
    filename: str
    digest_prefix: str

    def __str__(self) -> str:
        return f"artifact:{self.session_id}:{self.filename}:{self.digest_prefix}"


def parse_source_id(source_id: object) -> SourceId:
    """Parse strictly; anything but the exact shape raises :class:`InvalidSourceId`."""
    if not isinstance(source_id, str):
        raise InvalidSourceId(f"source id must be a string, got {type(source_id).__name__}")
    parts = source_id.split(":")
    if len(parts) != 4 or parts[0] != "artifact":
        raise InvalidSourceId(
            f"invalid source id {clipped_repr(source_id)}: want artifact:<session>:<file>:<12 hex>"
        )
    _, session_id, filename, prefix = parts
    validate_session_id(session_id)
    if not _FILENAME_RE.fullmatch(filename):
        raise InvalidSourceId(
            f"invalid source id {clipped_repr(source_id)}: file must be tool_result_NNN.txt"
        )
    if not _PREFIX_RE.fullmatch(prefix):
        raise InvalidSourceId(
            f"invalid source id {clipped_repr(source_id)}: digest must be 12 lowercase hex"
        )
    return SourceId(session_id=session_id, filename=filename, digest_prefix=prefix)


def artifact_prefix(source_id: object) -> str:
    """``artifact:<session>:<file>:``: what every source id naming that artifact starts with.

    A reference names an artifact whatever the digest part of its own source
    id says (a reference with a wrong digest still points at the file).
    """
    parsed = parse_source_id(source_id)
    return f"artifact:{parsed.session_id}:{parsed.filename}:"


def format_source_id(session_id: str, filename: str, content_sha256: str) -> str:
    validate_sha256(content_sha256)
    source = SourceId(
        session_id=validate_session_id(session_id),
        filename=filename,
        digest_prefix=content_sha256[:SOURCE_PREFIX_LEN],
    )
    text = str(source)
    parse_source_id(text)
    return text


def _require_str(value: object, name: str, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str) or (not allow_empty and not value):
        raise UsageError(f"{name} must be a non-empty string, got {clipped_repr(value)}")
    return value


def _require_count(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageError(f"{name} must be a non-negative integer, got {clipped_repr(value)}")
    return value


def _fields(data: Mapping[str, Any], cls: type, required: set[str], optional: set[str]) -> None:
    if not isinstance(data, Mapping):
        raise UsageError(f"{cls.__name__}.from_dict wants a mapping, got {type(data).__name__}")
    keys = set(data)
    missing = required - keys
    unknown = keys - required - optional
    if missing or unknown:
        raise UsageError(
            f"{cls.__name__}.from_dict: missing {sorted(missing)}, unknown {sorted(unknown)}"
        )


@attrs.frozen(kw_only=True)
class ArtifactSource:
    source_id: str
    title: str
    captured_at: str
    source_type: str = "artifact"

    def __attrs_post_init__(self) -> None:
        parse_source_id(self.source_id)
        _require_str(self.title, "title", allow_empty=True)
        _require_str(self.captured_at, "captured_at")
        if self.source_type != "artifact":
            raise UsageError(
                f"source_type must be 'artifact', got {clipped_repr(self.source_type)}"
            )

    @property
    def parsed(self) -> SourceId:
        return parse_source_id(self.source_id)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source_id": self.source_id,
            "source_type": self.source_type,
            "title": self.title,
            "captured_at": self.captured_at,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ArtifactSource:
        _fields(data, cls, {"source_id", "title", "captured_at"}, {"source_type"})
        return cls(
            source_id=data["source_id"],
            title=data["title"],
            captured_at=data["captured_at"],
            source_type=data.get("source_type", "artifact"),
        )


def _check_digest_agrees(source_id: str, digest: str) -> None:
    validate_sha256(digest)
    if parse_source_id(source_id).digest_prefix != digest[:SOURCE_PREFIX_LEN]:
        raise UsageError(
            f"digest {digest[:12]}... does not agree with source id {clipped_repr(source_id)}"
        )


@attrs.frozen(kw_only=True)
class ArtifactMemoryReference:
    """The thin reference a Memory store keeps: no content, no preview."""

    summary: str
    artifact_path: str
    content_sha256: str
    source_tool: str
    source: ArtifactSource

    def __attrs_post_init__(self) -> None:
        _require_str(self.summary, "summary")
        _require_str(self.artifact_path, "artifact_path")
        _require_str(self.source_tool, "source_tool")
        _check_digest_agrees(self.source.source_id, self.content_sha256)

    def to_dict(self) -> dict[str, Any]:
        return {
            "summary": self.summary,
            "artifact_path": self.artifact_path,
            "content_sha256": self.content_sha256,
            "source_tool": self.source_tool,
            "source": self.source.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ArtifactMemoryReference:
        _fields(
            data,
            cls,
            {"summary", "artifact_path", "content_sha256", "source_tool", "source"},
            set(),
        )
        return cls(
            summary=data["summary"],
            artifact_path=data["artifact_path"],
            content_sha256=data["content_sha256"],
            source_tool=data["source_tool"],
            source=ArtifactSource.from_dict(data["source"]),
        )


@attrs.frozen(kw_only=True)
class ArtifactReference:
    """A full reference to an externalized artifact, as the externalizer returns it."""

    source: ArtifactSource
    path: str
    summary: str
    source_tool: str
    content_sha256: str
    size_bytes: int
    line_count: int

    def __attrs_post_init__(self) -> None:
        _require_str(self.path, "path")
        _require_str(self.summary, "summary")
        _require_str(self.source_tool, "source_tool")
        _require_count(self.size_bytes, "size_bytes")
        _require_count(self.line_count, "line_count")
        _check_digest_agrees(self.source.source_id, self.content_sha256)

    @property
    def source_id(self) -> str:
        return self.source.source_id

    def for_memory(self) -> ArtifactMemoryReference:
        return ArtifactMemoryReference(
            summary=self.summary,
            artifact_path=self.path,
            content_sha256=self.content_sha256,
            source_tool=self.source_tool,
            source=self.source,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source.to_dict(),
            "path": self.path,
            "summary": self.summary,
            "source_tool": self.source_tool,
            "content_sha256": self.content_sha256,
            "size_bytes": self.size_bytes,
            "line_count": self.line_count,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ArtifactReference:
        keys = {"source", "path", "summary", "source_tool", "content_sha256", "size_bytes"}
        _fields(data, cls, keys | {"line_count"}, set())
        return cls(
            source=ArtifactSource.from_dict(data["source"]),
            path=data["path"],
            summary=data["summary"],
            source_tool=data["source_tool"],
            content_sha256=data["content_sha256"],
            size_bytes=data["size_bytes"],
            line_count=data["line_count"],
        )


#: What ``retain_until`` accepts: epoch seconds, an aware ``datetime``, or an ISO 8601 string.
RetainUntil = float | int | datetime.datetime | str | None


def normalize_retain_until(value: object) -> float | None:
    """The one place a retention deadline becomes epoch seconds (or ``None``: no expiry).

    Epoch seconds pass through; a ``datetime`` or an ISO 8601 string
    (``2026-09-01T00:00:00+00:00``, ``...Z``) must carry its time zone: a naive
    time means different instants on different hosts, so it is refused.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise UsageError(f"retain_until must be a time, got {clipped_repr(value)}")
    if isinstance(value, int | float):
        try:
            finite = math.isfinite(value)
        except OverflowError:  # an int too large for a float
            finite = False
        if not finite:
            raise UsageError(
                f"retain_until must be a finite number or None, got {clipped_repr(value)}"
            )
        return value  # unchanged: journal lines already written must hash the same
    if isinstance(value, str):
        try:
            value = datetime.datetime.fromisoformat(value)
        except ValueError:
            raise UsageError(
                f"retain_until {clipped_repr(value)} is not an ISO 8601 time "
                "such as 2026-09-01T00:00:00+00:00"
            ) from None
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
            raise UsageError(
                f"retain_until {value.isoformat()} has no time zone: add one (e.g. +00:00)"
            )
        return value.timestamp()
    raise UsageError(
        "retain_until must be epoch seconds, an aware datetime or an ISO 8601 string, "
        f"got {type(value).__name__}"
    )


@attrs.frozen(kw_only=True)
class ArtifactRetentionClaim:
    """A path-free promise to keep one artifact; the full digest must match the id.

    ``retain_until`` accepts what :func:`normalize_retain_until` accepts and is
    stored as epoch seconds.
    """

    source_id: str
    content_sha256: str
    reference_count: int = 1
    retain_until: float | None = attrs.field(default=None, converter=normalize_retain_until)

    def __attrs_post_init__(self) -> None:
        _check_digest_agrees(self.source_id, self.content_sha256)
        count = _require_count(self.reference_count, "reference_count")
        if count < 1:
            raise UsageError("reference_count must be at least 1")

    @property
    def parsed(self) -> SourceId:
        return parse_source_id(self.source_id)

    @classmethod
    def from_memory_reference(
        cls,
        ref: ArtifactMemoryReference,
        reference_count: int = 1,
        retain_until: RetainUntil = None,
    ) -> ArtifactRetentionClaim:
        return cls(
            source_id=ref.source.source_id,
            content_sha256=ref.content_sha256,
            reference_count=reference_count,
            retain_until=retain_until,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "source_id": self.source_id,
            "content_sha256": self.content_sha256,
            "reference_count": self.reference_count,
            "retain_until": self.retain_until,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ArtifactRetentionClaim:
        _fields(data, cls, {"source_id", "content_sha256"}, {"reference_count", "retain_until"})
        return cls(
            source_id=data["source_id"],
            content_sha256=data["content_sha256"],
            reference_count=data.get("reference_count", 1),
            retain_until=data.get("retain_until"),
        )
