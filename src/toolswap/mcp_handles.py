"""Handles: what names an artifact over MCP, and how long it lives.

A source id (``artifact:<session>:<file>:<12 hex>``) and its resource URI
(``toolswap://artifact/<session>/<file>?digest=<12 hex>``) are the two
spellings of one handle.  Parsing a URI ends in :func:`parse_source_id`, so
a hostile URI can never become a path (S7).
"""

from __future__ import annotations

import os
import urllib.parse

from .domain import clipped_repr, parse_source_id
from .errors import UsageError
from .fs import REAL_FS
from .high_water import DELETED_NAME

__all__ = ["artifact_uri", "parse_artifact_uri", "lifetime_text", "deleted_up_to", "URI_SCHEME"]

URI_SCHEME = "toolswap"
URI_AUTHORITY = "artifact"


def artifact_uri(source_id: str, offset: int = 0, byte: int = 0) -> str:
    """The resource URI of an artifact (``offset``/``byte``: a later page of it).

    ``toolswap://artifact/<session>/<file>?digest=<12 hex>``: the session is in
    the path, not the authority, because session ids are case-sensitive and
    URI normalization may lowercase an authority; the digest is in the query,
    not a fragment, because a fragment is never part of what a client sends
    to be resolved and may be dropped.
    """
    parsed = parse_source_id(source_id)
    uri = (
        f"{URI_SCHEME}://{URI_AUTHORITY}/{parsed.session_id}/{parsed.filename}"
        f"?digest={parsed.digest_prefix}"
    )
    if offset:
        uri += f"&offset={offset}"
    if byte:
        uri += f"&byte={byte}"
    return uri


def parse_artifact_uri(uri: object) -> tuple[str, int, int]:
    """(source id, offset, byte) named by a resource URI; anything else is a :class:`UsageError`."""
    want = f"want {URI_SCHEME}://{URI_AUTHORITY}/<session>/<file>?digest=<12 hex>"
    if not isinstance(uri, str) or len(uri) > 1024:
        raise UsageError(f"invalid resource URI {clipped_repr(uri)}: {want}")
    try:
        parts = urllib.parse.urlsplit(uri)
        query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        raise UsageError(f"invalid resource URI {clipped_repr(uri)}: {want}") from None
    segments = parts.path.split("/")
    keys = [key for key, _ in query]
    if (
        parts.scheme != URI_SCHEME
        or parts.netloc != URI_AUTHORITY
        or parts.fragment
        or len(segments) != 3
        or segments[0]
        or len(set(keys)) != len(keys)
        or not set(keys) <= {"digest", "offset", "byte"}
        or "digest" not in keys
    ):
        raise UsageError(f"invalid resource URI {clipped_repr(uri)}: {want}")
    values = dict(query)
    numbers = []
    for key in ("offset", "byte"):
        text = values.get(key, "0")
        if not (text.isdigit() and text.isascii() and len(text) <= 18):
            raise UsageError(f"invalid resource URI {clipped_repr(uri)}: {key} must be a number")
        numbers.append(int(text))
    source_id = f"artifact:{segments[1]}:{segments[2]}:{values['digest']}"
    parse_source_id(source_id)  # the same strict shape as any source id (S7)
    return source_id, numbers[0], numbers[1]


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def lifetime_text(ttl_seconds: float) -> str:
    """What the descriptions say about how long a handle (source id, resource URI) lives."""
    return (
        "Handles: a source id (or its toolswap:// resource URI) names one immutable, verified "
        f"artifact. One that no lease names is kept at least {_duration(ttl_seconds)} after it "
        "was written (the session's cleanup TTL); after that, cleanup may delete it. One that a "
        "lease names is kept until the lease is released. Reading a deleted one fails with "
        "'expired handle: ...'; run the command again for a new one."
    )


def deleted_up_to(root: str) -> int:
    """The highest artifact number cleanup recorded deleting (0: none, or unreadable).

    Only the wording of an error depends on it, so any doubt reads as 0.
    """
    fs = REAL_FS
    try:
        handle = fs.open_read(os.path.join(root, DELETED_NAME))
    except OSError:
        return 0
    try:
        size = fs.fstat(handle).size
        tail = fs.pread(handle, min(size, 64), max(0, size - 64))
    except OSError:
        return 0
    finally:
        fs.close(handle)
    lines = tail.split(b"\n")[:-1]
    last = lines[-1] if lines else b""
    return int(last) if last.isdigit() else 0
