"""What an agent sees when it reads an artifact: bounded pages, grep results, listings.

Rules (docs/design.md section 4, "Reading"):

1. One line-numbering base everywhere a user looks: **0-based line offsets**,
   the value ``toolswap read --offset`` takes (the first line is offset 0).
   Pages, grep matches, JSON and the pointer all speak offsets.
2. Every page is capped in bytes as well as lines: the UTF-8 size of
   :attr:`Page.text` never exceeds the cap (default :data:`DEFAULT_PAGE_BYTES`,
   ``TOOLSWAP_PAGE_BYTES`` overrides it, at most :data:`MAX_PAGE_BYTES`).  A
   line longer than the cap comes back in pieces; ``next_offset`` plus
   ``next_byte`` (bytes of that line already returned) resume exactly where the
   page stopped, so paging to the end reassembles the file.
3. Pages are cut on line boundaries when a whole line fits, otherwise on a
   character boundary (never inside a UTF-8 sequence).
4. The renderers add one trailer line of bounded size (:data:`MAX_TRAILER_BYTES`)
   that names the range, the total and the exact next read.

These are plain values; :class:`toolswap.externalizer.ToolResultExternalizer`
produces them, and the CLI and the MCP server render them with the functions
below so that both show the same text.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from .errors import UsageError

__all__ = [
    "DEFAULT_PAGE_BYTES",
    "DEFAULT_PAGE_LINES",
    "MIN_PAGE_BYTES",
    "MAX_PAGE_BYTES",
    "MAX_TRAILER_BYTES",
    "PAGE_BYTES_ENV",
    "Page",
    "GrepMatch",
    "GrepResult",
    "ArtifactInfo",
    "page_bytes_from_env",
    "validate_page_bytes",
    "render_page",
    "render_grep",
    "render_listing",
    "grep_match_cost",
    "char_boundary",
]

DEFAULT_PAGE_BYTES = 24 * 1024
DEFAULT_PAGE_LINES = 2000
MIN_PAGE_BYTES = 64  # room for a few characters of any width and progress on any line
MAX_PAGE_BYTES = 8 * 1024 * 1024
MAX_TRAILER_BYTES = 512  # a trailer line names ids, offsets and counts: bounded
PAGE_BYTES_ENV = "TOOLSWAP_PAGE_BYTES"


def char_boundary(data: bytes, cut: int) -> int:
    """Move ``cut`` back so that it does not split a UTF-8 sequence (at most 3 bytes)."""
    for back in range(1, 4):
        i = cut - back
        if i < 0:
            break
        byte = data[i]
        if byte < 0x80 or byte >= 0xF8:
            break
        if byte >= 0xC0:
            width = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            if i + width > cut and all(0x80 <= b <= 0xBF for b in data[i + 1 : cut]):
                return i if i > 0 else cut
            break
    return cut


def validate_page_bytes(value: object, name: str = "max_bytes") -> int:
    """Return ``value`` if it is a page cap in ``[MIN_PAGE_BYTES, MAX_PAGE_BYTES]``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{name} must be an integer number of bytes, got {value!r}")
    if not MIN_PAGE_BYTES <= value <= MAX_PAGE_BYTES:
        raise UsageError(
            f"{name} must be between {MIN_PAGE_BYTES} and {MAX_PAGE_BYTES} bytes, got {value}"
        )
    return value


def page_bytes_from_env(environ: Mapping[str, str]) -> int:
    """The page cap: ``TOOLSWAP_PAGE_BYTES`` if set (validated), else the default."""
    raw = environ.get(PAGE_BYTES_ENV)
    if raw is None:
        return DEFAULT_PAGE_BYTES
    text = raw.strip()
    if not text.isdigit():
        raise UsageError(
            f"environment variable {PAGE_BYTES_ENV}={raw!r} is not a positive integer "
            f"(bytes, {MIN_PAGE_BYTES}-{MAX_PAGE_BYTES})"
        )
    return validate_page_bytes(int(text), f"environment variable {PAGE_BYTES_ENV}")


@attrs.frozen(kw_only=True)
class Page:
    """One byte- and line-bounded read of an artifact.

    ``first_line``/``last_line`` are inclusive offsets of the lines that have
    bytes in ``text`` (``last_line == first_line - 1`` for an empty page).
    ``next_offset`` is None at the end; otherwise read on with
    ``offset=next_offset, start_byte=next_byte``.  ``truncated`` says the byte
    cap stopped the page before ``limit`` lines or inside a line.
    ``byte_start``/``byte_end`` are the file bytes the page covers;
    ``size_bytes`` is the artifact's size.
    """

    source_id: str
    text: str
    total_lines: int
    first_line: int
    last_line: int
    next_offset: int | None
    next_byte: int
    truncated: bool
    size_bytes: int
    start_byte: int = 0
    byte_start: int = 0
    byte_end: int = 0
    max_bytes: int = DEFAULT_PAGE_BYTES

    def to_json(self) -> dict[str, Any]:
        return {
            "source_id": self.source_id,
            "total_lines": self.total_lines,
            "first_line": self.first_line,
            "last_line": self.last_line,
            "start_byte": self.start_byte,
            "next_offset": self.next_offset,
            "next_byte": self.next_byte,
            "truncated": self.truncated,
            "size_bytes": self.size_bytes,
            "byte_start": self.byte_start,
            "byte_end": self.byte_end,
            "max_bytes": self.max_bytes,
            "text": self.text,
        }


@attrs.frozen(kw_only=True)
class GrepMatch:
    """One matching line (offset, clipped text) with its context lines."""

    offset: int
    text: str
    before: tuple[tuple[int, str], ...] = ()
    after: tuple[tuple[int, str], ...] = ()
    clipped: bool = False  # ``text`` is a window of a longer line

    def to_json(self) -> dict[str, Any]:
        return {
            "offset": self.offset,
            "text": self.text,
            "clipped": self.clipped,
            "before": [{"offset": o, "text": t} for o, t in self.before],
            "after": [{"offset": o, "text": t} for o, t in self.after],
        }


@attrs.frozen(kw_only=True)
class GrepResult:
    """Matches of one scan; ``next_offset`` resumes it when ``truncated`` (else None)."""

    source_id: str
    pattern: str
    fixed: bool
    ignore_case: bool
    context: int
    matches: tuple[GrepMatch, ...]
    total_lines: int
    start_offset: int
    truncated: bool
    next_offset: int | None
    max_matches: int
    max_bytes: int

    def to_json(self) -> dict[str, Any]:
        return {
            "source_id": self.source_id,
            "pattern": self.pattern,
            "fixed": self.fixed,
            "ignore_case": self.ignore_case,
            "context": self.context,
            "total_lines": self.total_lines,
            "start_offset": self.start_offset,
            "match_count": len(self.matches),
            "truncated": self.truncated,
            "next_offset": self.next_offset,
            "matches": [m.to_json() for m in self.matches],
        }


@attrs.frozen(kw_only=True)
class ArtifactInfo:
    """One artifact of the session; ``lease_state`` is the strongest lease naming it.

    The order is PREPARED > COMMITTED > RELEASED > ABORTED; None when no lease
    in the journal names the artifact (or the session has no journal).
    """

    source_id: str
    name: str
    size: int
    line_count: int
    mtime: float
    lease_state: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "source_id": self.source_id,
            "name": self.name,
            "size": self.size,
            "line_count": self.line_count,
            "mtime": self.mtime,
            "modified": _iso(self.mtime),
            "lease_state": self.lease_state,
        }


def _iso(epoch: float) -> str:
    import datetime  # only listings show dates; a page read does not pay for the import

    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).isoformat(timespec="seconds")


def _n(value: int) -> str:
    return f"{value:,}"


def _clip_trailer(text: str) -> str:
    data = text.encode("utf-8")
    if len(data) <= MAX_TRAILER_BYTES - 1:
        return text
    return data[: MAX_TRAILER_BYTES - 4].decode("utf-8", "ignore") + "..."


def _read_command(source_id: str, offset: int, byte: int = 0) -> str:
    command = f"toolswap read {source_id} --offset {offset}"
    return f"{command} --byte {byte}" if byte else command


def render_page(page: Page) -> str:
    """The page's text, then one trailer line: range, total and the exact next read."""
    text = page.text
    if text and not text.endswith("\n"):
        text += "\n"
    if page.last_line < page.first_line:
        where = f"no lines (the artifact has {_n(page.total_lines)} lines)"
    else:
        where = f"lines {page.first_line}-{page.last_line} of {_n(page.total_lines)}"
        if page.start_byte:
            where += f", from byte {page.start_byte} of line {page.first_line}"
    if page.next_offset is None:
        follow = "end of artifact"
    else:
        cut = " (cut by the page byte cap)" if page.truncated else ""
        inside = f"; line {page.next_offset} continues" if page.next_byte else ""
        follow = (
            f"more{cut}{inside}; next: "
            f"{_read_command(page.source_id, page.next_offset, page.next_byte)}"
        )
    return text + _clip_trailer(f"[toolswap] {where} (0-based offsets); {follow}") + "\n"


def grep_match_cost(match: GrepMatch) -> int:
    """Bytes :func:`render_grep` spends on ``match`` at most (its group separator included)."""
    total = len(_grep_line(match.offset, ":", match.text, match.clipped).encode("utf-8"))
    for offset, text in (*match.before, *match.after):
        total += len(_grep_line(offset, "-", text, False).encode("utf-8"))
    return total + len(b"--\n")


def _grep_line(offset: int, mark: str, text: str, clipped: bool) -> str:
    return f"{offset}{mark}{text}{' [...]' if clipped else ''}\n"


def render_grep(result: GrepResult) -> str:
    """grep-style lines ``OFFSET:text`` (context ``OFFSET-text``), then one trailer line.

    Context shared by neighbouring matches is printed once; ``--`` separates
    groups that are not adjacent, as GNU grep does.
    """
    out: list[str] = []
    last = -2
    for match in result.matches:
        rows = [(o, "-", t, False) for o, t in match.before]
        rows.append((match.offset, ":", match.text, match.clipped))
        rows.extend((o, "-", t, False) for o, t in match.after)
        for offset, mark, text, clipped in rows:
            if offset <= last:
                continue
            if out and offset != last + 1:
                out.append("--\n")
            out.append(_grep_line(offset, mark, text, clipped))
            last = offset
    count = len(result.matches)
    scope = f"{count} matching line{'s' if count != 1 else ''}"
    if result.start_offset:
        scope += f" from offset {result.start_offset}"
    if result.next_offset is None:
        follow = f"searched to the end ({_n(result.total_lines)} lines)"
    else:
        flag = " -F" if result.fixed else ""
        flag += " -i" if result.ignore_case else ""
        flag += f" -C {result.context}" if result.context else ""
        follow = (
            f"stopped at a limit; resume: toolswap grep {result.source_id} "
            f"PATTERN{flag} --offset {result.next_offset}"
        )
    trailer = f"[toolswap] {scope} (0-based offsets, as read --offset takes); {follow}"
    return "".join(out) + _clip_trailer(trailer) + "\n"


def _age(seconds: float) -> str:
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def render_listing(infos: Iterable[ArtifactInfo], *, now: float | None = None) -> str:
    """One row per artifact: name, size, lines, age, lease state, source id."""
    moment = time.time() if now is None else now
    rows = [("NAME", "BYTES", "LINES", "AGE", "LEASE", "SOURCE_ID")]
    for info in infos:
        rows.append(
            (
                info.name,
                _n(info.size),
                _n(info.line_count),
                _age(moment - info.mtime),
                info.lease_state or "-",
                info.source_id,
            )
        )
    if len(rows) == 1:
        return "no artifacts\n"
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = []
    for row in rows:
        cells = [
            row[i].rjust(widths[i]) if i in (1, 2) else row[i].ljust(widths[i]) for i in range(5)
        ]
        lines.append("  ".join(cells) + "  " + row[5])
    return "\n".join(lines) + "\n"
