"""What the MCP server declares: each tool's description, input schema and output schema.

Plain JSON Schema dicts (no SDK), so that tests can validate results against
exactly what the server lists.  Every argument and every result field is
described; the descriptions state the handles' lifetime
(:func:`toolswap.mcp_tools.lifetime_text`).  No argument is named
``file_path`` (one client treats that name specially).
"""

from __future__ import annotations

from typing import Any

import attrs

from .mcp_tools import RUN_TOOL_NAME, ServerSettings, lifetime_text
from .reading import DEFAULT_PAGE_LINES, MIN_PAGE_BYTES

__all__ = ["ToolSpec", "tool_specs", "ARTIFACT_FACTS_SCHEMA"]


@attrs.frozen(kw_only=True)
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    read_only: bool


def _nullable(kind: str, description: str, **extra: Any) -> dict[str, Any]:
    return {"type": [kind, "null"], "description": description, **extra}


def _object(properties: dict[str, Any], *, required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
        "additionalProperties": False,
    }


_COUNT = {"type": "integer", "minimum": 0}

_SOURCE_ID_ARGUMENT = {
    "type": "string",
    "description": "The artifact's source id, as the pointer prints it: "
    "artifact:<session>:tool_result_NNN.txt:<12 hex>.",
}

ARTIFACT_FACTS_SCHEMA = _object(
    {
        "source_id": {"type": "string", "description": "The handle to read it with."},
        "name": {"type": "string", "description": "Its file name in the session."},
        "size": {**_COUNT, "description": "Bytes."},
        "line_count": {**_COUNT, "description": "Lines (a last line without newline counts)."},
        "mtime": {"type": "number", "description": "When it was written, seconds since 1970."},
        "modified": {"type": "string", "description": "The same time, ISO 8601 (UTC)."},
        "lease_state": _nullable(
            "string",
            "The strongest lease naming it (PREPARED, COMMITTED, RELEASED, ABORTED), "
            "or null: no lease, so cleanup may delete it once it is older than the TTL.",
        ),
        "resource_uri": {"type": "string", "description": "The same artifact as a resource."},
    }
)

_NOTABLE_ROW = _object(
    {
        "offset": {**_COUNT, "description": "0-based line offset (what read_artifact takes)."},
        "text": {"type": "string", "description": "The line, clipped to 120 characters."},
        "clipped": {"type": "boolean", "description": "The line is longer than text."},
    }
)

_RUN_OUTPUT = _object(
    {
        "exit_status": {
            "type": "integer",
            "description": "The command's exit status; 128+N when signal N ended it.",
        },
        "complete": {
            "type": "boolean",
            "description": "false: the command was stopped (timeout, cancellation) and the "
            "output is only what it printed until then.",
        },
        "incomplete_reason": _nullable("string", "Why the output is incomplete, or null."),
        "externalized": {
            "type": "boolean",
            "description": "true: the output was large and is kept as an artifact; the text is "
            "a bounded pointer to it.",
        },
        "source_id": _nullable("string", "The artifact's handle (null: the text is the output)."),
        "resource_uri": _nullable("string", "The artifact as a resource (toolswap://...)."),
        "sha256": _nullable("string", "The SHA-256 of the whole output."),
        "bytes": {**_COUNT, "description": "Bytes of output."},
        "lines": {**_COUNT, "description": "Lines of output."},
        "next_offset": _nullable(
            "integer",
            "The first line the pointer leaves out: read_artifact(source_id, offset=next_offset, "
            "start_byte=next_byte) reads it. null: nothing is left out.",
            minimum=0,
        ),
        "next_byte": {**_COUNT, "description": "Bytes of line next_offset the pointer shows."},
        "notable": {
            "type": "array",
            "items": _NOTABLE_ROW,
            "description": "Failure-looking lines of the part left out, with their offsets.",
        },
        "lease_state": _nullable("string", "Always null for a new artifact: no lease names it."),
    }
)

_PAGE_OUTPUT = _object(
    {
        "source_id": {"type": "string", "description": "The artifact read."},
        "first_line": {**_COUNT, "description": "Offset of the first line with bytes here."},
        "last_line": {
            "type": "integer",
            "description": "Offset of the last line with bytes here (first_line - 1: none).",
        },
        "total_lines": {**_COUNT, "description": "Lines in the artifact."},
        "start_byte": {**_COUNT, "description": "Bytes of first_line skipped (a resumed line)."},
        "next_offset": _nullable(
            "integer", "Where the next read starts; null at the end.", minimum=0
        ),
        "next_byte": {**_COUNT, "description": "start_byte for the next read."},
        "truncated": {"type": "boolean", "description": "The byte cap cut this page short."},
        "size_bytes": {**_COUNT, "description": "Bytes in the artifact."},
        "byte_start": {**_COUNT, "description": "First file byte of this page."},
        "byte_end": {**_COUNT, "description": "File byte after this page."},
    }
)

_GREP_OUTPUT = _object(
    {
        "source_id": {"type": "string", "description": "The artifact searched."},
        "total_lines": {**_COUNT, "description": "Lines in the artifact."},
        "start_offset": {**_COUNT, "description": "Where the search started."},
        "match_count": {**_COUNT, "description": "Matching lines in this result."},
        "match_offsets": {
            "type": "array",
            "items": _COUNT,
            "description": "Their 0-based offsets (the first 200; the text has them all).",
        },
        "truncated": {"type": "boolean", "description": "A limit stopped the search."},
        "next_offset": _nullable(
            "integer", "Resume the search here (offset=...); null: searched to the end.", minimum=0
        ),
    }
)

_LIST_OUTPUT = _object(
    {
        "total": {**_COUNT, "description": "Artifacts in the session."},
        "offset": {**_COUNT, "description": "Artifacts skipped before this listing."},
        "count": {**_COUNT, "description": "Artifacts listed here."},
        "next_offset": _nullable(
            "integer", "list_artifacts(offset=...) lists the rest; null: none left.", minimum=0
        ),
        "artifacts": {"type": "array", "items": ARTIFACT_FACTS_SCHEMA},
    }
)


def tool_specs(settings: ServerSettings) -> list[ToolSpec]:
    """The five tools as this server's settings make them."""
    body = settings.body_bytes
    lifetime = lifetime_text(settings.gc_ttl_seconds)
    return [
        ToolSpec(
            name=RUN_TOOL_NAME,
            description=(
                "Run a command (stdout and stderr combined). Output up to "
                f"{settings.inline_bytes:,} bytes comes back whole; larger output is kept as "
                "a verified artifact and you get a bounded pointer: head, tail, notable "
                "(failure-looking) lines from the middle with their 0-based offsets, and the "
                "read_artifact call that pages the rest. The first line gives the exit status, "
                "whether the command finished, and the source id. Progress notifications "
                "(bytes and lines so far) are sent when the call has a progress token; "
                f"cancelling the call stops the command's whole process group. {lifetime}"
            ),
            input_schema=_object(
                {
                    "command": {
                        "type": "string",
                        "description": "A shell command line, run with /bin/sh -c. "
                        "Give this or argv, not both.",
                    },
                    "argv": {
                        "type": "array",
                        "items": {"type": "string"},
                        "minItems": 1,
                        "description": "The program and its arguments, run without a shell. "
                        "Give this or command, not both.",
                    },
                    "cwd": {
                        "type": "string",
                        "description": "Working folder (relative to the server's folder); "
                        "default: the server's folder.",
                    },
                    "timeout_seconds": {
                        "type": "number",
                        "exclusiveMinimum": 0,
                        "maximum": settings.max_timeout,
                        "default": settings.timeout,
                        "description": "Stop the command (its whole process group) after this "
                        "many seconds; what it printed is kept and marked INCOMPLETE.",
                    },
                    "summary": {
                        "type": "string",
                        "maxLength": 240,
                        "description": "One line describing the output, shown in the pointer "
                        "(default: derived from the output).",
                    },
                },
                required=[],
            ),
            output_schema=_RUN_OUTPUT,
            read_only=False,
        ),
        ToolSpec(
            name="read_artifact",
            description=(
                "Read lines of an artifact, verified against its digest. At most "
                f"{body:,} bytes of text per call (a longer line comes back in pieces); the "
                "last line of the result names the range, the total and the exact next "
                f"read_artifact call. {lifetime}"
            ),
            input_schema=_object(
                {
                    "source_id": _SOURCE_ID_ARGUMENT,
                    "offset": {
                        "type": "integer",
                        "minimum": 0,
                        "default": 0,
                        "description": "First line to read, 0-based (the offsets the pointer, "
                        "grep_artifact and the previous page give).",
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "default": DEFAULT_PAGE_LINES,
                        "description": "Most lines to return (the byte cap may stop earlier).",
                    },
                    "start_byte": {
                        "type": "integer",
                        "minimum": 0,
                        "default": 0,
                        "description": "Resume inside line `offset` at this byte (the "
                        "start_byte the previous page's next read gives); 0 otherwise.",
                    },
                    "max_bytes": {
                        "type": "integer",
                        "minimum": MIN_PAGE_BYTES,
                        "maximum": body,
                        "default": body,
                        "description": "Byte cap of this page's text; larger values are "
                        "lowered to the server's cap.",
                    },
                },
                required=["source_id"],
            ),
            output_schema=_PAGE_OUTPUT,
            read_only=True,
        ),
        ToolSpec(
            name="grep_artifact",
            description=(
                "Search an artifact line by line (Python regex, or a fixed string). Prints "
                "OFFSET:line for matches and OFFSET-line for context; OFFSET is 0-based, "
                "what read_artifact takes. Bounded output; the last line says where to resume. "
                f"{lifetime}"
            ),
            input_schema=_object(
                {
                    "source_id": _SOURCE_ID_ARGUMENT,
                    "pattern": {
                        "type": "string",
                        "minLength": 1,
                        "description": "A Python regular expression, or a plain string "
                        "with fixed=true.",
                    },
                    "fixed": {
                        "type": "boolean",
                        "default": False,
                        "description": "Treat pattern as a plain string, not a regex.",
                    },
                    "ignore_case": {
                        "type": "boolean",
                        "default": False,
                        "description": "Match without regard to case.",
                    },
                    "context": {
                        "type": "integer",
                        "minimum": 0,
                        "default": 0,
                        "description": "Lines of context to show before and after each match.",
                    },
                    "max_matches": {
                        "type": "integer",
                        "minimum": 1,
                        "default": 100,
                        "description": "Stop after this many matching lines.",
                    },
                    "offset": {
                        "type": "integer",
                        "minimum": 0,
                        "default": 0,
                        "description": "Start the search at this 0-based line (to resume).",
                    },
                },
                required=["source_id", "pattern"],
            ),
            output_schema=_GREP_OUTPUT,
            read_only=True,
        ),
        ToolSpec(
            name="list_artifacts",
            description=(
                "List the session's artifacts: name, bytes, lines, age, lease state and source "
                "id, as many as fit the cap; the last line names the call that lists the rest. "
                f"{lifetime}"
            ),
            input_schema=_object(
                {
                    "offset": {
                        "type": "integer",
                        "minimum": 0,
                        "default": 0,
                        "description": "Skip this many artifacts (in name order).",
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "default": 50,
                        "description": "Most artifacts to list (the cap may stop earlier).",
                    },
                },
                required=[],
            ),
            output_schema=_LIST_OUTPUT,
            read_only=True,
        ),
        ToolSpec(
            name="stat_artifact",
            description=(
                "Facts about one artifact (verified): size, lines, time, lease state, resource "
                f"URI. {lifetime}"
            ),
            input_schema=_object({"source_id": _SOURCE_ID_ARGUMENT}),
            output_schema=ARTIFACT_FACTS_SCHEMA,
            read_only=True,
        ),
    ]
