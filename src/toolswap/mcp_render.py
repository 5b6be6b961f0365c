"""How the MCP tools word their results: MCP calls, never CLI commands, and the facts behind them.

Each tool's text comes from the same renderers as the CLI's
(:mod:`toolswap.reading`, :mod:`toolswap.pointer`); these helpers rename
the next read as the MCP call that makes it and pull the structured facts
out of what was rendered.
"""

from __future__ import annotations

import re
from typing import Any

from .command import CommandResult
from .mcp_handles import artifact_uri
from .reading import ArtifactInfo, GrepResult, Page, render_grep

__all__ = [
    "status_line",
    "notable_rows",
    "read_call",
    "rename_next_read",
    "page_facts",
    "mcp_grep_text",
    "grep_facts",
    "resource_entry",
    "MAX_MATCH_OFFSETS",
    "NOTABLE_TEXT_CHARS",
]

#: Most grep match offsets the structured content lists (the text has them all).
MAX_MATCH_OFFSETS = 200
#: Characters of a notable line the structured content repeats (the pointer shows more).
NOTABLE_TEXT_CHARS = 120
_NOTABLE_ROW = re.compile(r"(\d+): (.*?)( \[\.\.\.\])?")


def status_line(result: CommandResult) -> str:
    state = "complete"
    if result.timed_out:
        state = "INCOMPLETE: timed out, the command was stopped"
    elif result.interrupted:
        state = f"INCOMPLETE: stopped ({result.interrupted_by})"
    if result.source_id:
        # The id ends the line: a client that copies it takes nothing else with it.
        where = f"large output, the pointer follows; source_id: {result.source_id}"
    else:
        where = "the whole output follows"
    return f"[toolswap] exit status {result.exit_status} ({state}); {where}\n"


def notable_rows(pointer: str) -> list[dict[str, Any]]:
    """The notable lines the pointer shows, as (offset, text, clipped) facts."""
    rows: list[dict[str, Any]] = []
    inside = False
    for line in pointer.splitlines():
        if line.startswith("--- notable lines"):
            inside = True
            continue
        if inside and line.startswith("--- "):
            break
        if inside:
            found = _NOTABLE_ROW.fullmatch(line)
            if found is not None:
                text = found.group(2)
                rows.append(
                    {
                        "offset": int(found.group(1)),
                        "text": text[:NOTABLE_TEXT_CHARS],
                        "clipped": found.group(3) is not None or len(text) > NOTABLE_TEXT_CHARS,
                    }
                )
    return rows


def _cli_read(source_id: str, offset: int, byte: int) -> str:
    command = f"toolswap read {source_id} --offset {offset}"
    return f"{command} --byte {byte}" if byte else command


def read_call(page: Page) -> str:
    if page.next_offset is None:
        return ""
    call = f'read_artifact(source_id="{page.source_id}", offset={page.next_offset}'
    return call + (f", start_byte={page.next_byte})" if page.next_byte else ")")


def rename_next_read(page: Page, text: str, read: str) -> str:
    """The page's trailer naming ``read`` instead of the CLI command (rule 5)."""
    if page.next_offset is None:
        return text
    cli = _cli_read(page.source_id, page.next_offset, page.next_byte)
    return text.replace(f"next: {cli}", f"next: {read}", 1)


def page_facts(page: Page) -> dict[str, Any]:
    return {
        "source_id": page.source_id,
        "first_line": page.first_line,
        "last_line": page.last_line,
        "total_lines": page.total_lines,
        "start_byte": page.start_byte,
        "next_offset": page.next_offset,
        "next_byte": page.next_byte,
        "truncated": page.truncated,
        "size_bytes": page.size_bytes,
        "byte_start": page.byte_start,
        "byte_end": page.byte_end,
    }


def mcp_grep_text(result: GrepResult) -> str:
    text = render_grep(result).replace(
        "(0-based offsets, as read --offset takes)",
        "(0-based offsets, as read_artifact's offset takes)",
        1,
    )
    if result.next_offset is None:
        return text
    flag = " -F" if result.fixed else ""
    flag += " -i" if result.ignore_case else ""
    flag += f" -C {result.context}" if result.context else ""
    cli = f"toolswap grep {result.source_id} PATTERN{flag} --offset {result.next_offset}"
    call = f'grep_artifact(source_id="{result.source_id}", pattern=<the same>'
    call += ", fixed=true" if result.fixed else ""
    call += ", ignore_case=true" if result.ignore_case else ""
    call += f", context={result.context}" if result.context else ""
    call += f", offset={result.next_offset})"
    return text.replace(f"resume: {cli}", f"resume: {call}", 1)


def grep_facts(result: GrepResult) -> dict[str, Any]:
    offsets = [match.offset for match in result.matches]
    return {
        "source_id": result.source_id,
        "total_lines": result.total_lines,
        "start_offset": result.start_offset,
        "match_count": len(offsets),
        "match_offsets": offsets[:MAX_MATCH_OFFSETS],
        "truncated": result.truncated,
        "next_offset": result.next_offset,
    }


def resource_entry(info: ArtifactInfo) -> dict[str, Any]:
    lease = info.lease_state or "no lease"
    return {
        "uri": artifact_uri(info.source_id),
        "name": info.name,
        "description": f"{info.line_count:,} lines, {info.size:,} bytes; {lease}; "
        f"source_id: {info.source_id}",
        "mime_type": "text/plain",
        "size": info.size,
        "last_modified": info.to_json()["modified"],
    }
