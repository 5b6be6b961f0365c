"""toolswap as an MCP server: run a command, then page, search and list its artifacts.

The server speaks MCP over stdio with the official SDK (``pip install
'toolswap[mcp]'``); ``toolswap mcp`` starts it.  The tools are plain methods
of :class:`Toolbox` (no SDK needed to call or test them); :func:`build_server`
wraps them in the SDK's low-level server with hand-written JSON schemas.

Rules
=====

1. **No result is larger than the page cap** (``--page-bytes``, default
   :data:`~toolswap.reading.DEFAULT_PAGE_BYTES`, 24 KiB: agent clients refuse
   tool results over about 25k tokens).  Each tool asks the read API for a
   body that leaves room for its own lines (:data:`RESERVE_BYTES`); the
   pointer's head and tail windows and the inline threshold of
   ``run_command`` are derived from the cap the same way; and
   :func:`bounded` cuts anything that would still pass the cap, saying so.
2. **Errors are tool errors** (``isError``), one line, ``<kind> error:
   <message>`` with kind usage, state or environment, as the CLI splits
   blame.  Never a traceback; an absolute path that is not inside the
   session folder is replaced by ``<outside the session>``.  A defect of
   toolswap is ``internal error: <type>`` with the detail on stderr only.
3. **Every read goes through the externalizer**, so each one verifies the
   artifact (ownership, type, digest) and a hostile source id never becomes a
   path (S7).
4. **Commands run in a worker thread** (:func:`toolswap.command.run_command`):
   the server stays responsive, a timeout keeps what was printed (marked
   INCOMPLETE) and a cancelled call stops its command.
5. **0-based line offsets everywhere**, as ``toolswap read --offset`` takes
   them: the pointer, pages, grep lines and the arguments.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import anyio.to_thread
import attrs
import mcp.types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

from .command import CommandResult, CommandStartError, Stop, check_session, run_command
from .errors import CorruptStateError, EnvironmentFailure, ToolswapError, UsageError
from .externalizer import DEFAULT_THRESHOLD_BYTES, THRESHOLD_ENV, ToolResultExternalizer
from .reading import (
    DEFAULT_PAGE_BYTES,
    DEFAULT_PAGE_LINES,
    MAX_TRAILER_BYTES,
    MIN_PAGE_BYTES,
    render_grep,
    render_listing,
    render_page,
    validate_page_bytes,
)

__all__ = [
    "ServerSettings",
    "Toolbox",
    "ToolFailure",
    "build_server",
    "serve_stdio",
    "bounded",
    "RESERVE_BYTES",
    "POINTER_RESERVE_BYTES",
    "TOOL_NAMES",
]

log = logging.getLogger("toolswap.mcp")

#: Bytes each tool keeps for its own lines around the body it asks the read API for.
RESERVE_BYTES = 1024
#: Bytes of the pointer that are not head or tail preview: header, marker, notable lines.
POINTER_RESERVE_BYTES = 6 * 1024
#: The smallest cap that leaves every part of a result some room.
MIN_SERVER_PAGE_BYTES = 12 * 1024
DEFAULT_TIMEOUT_SECONDS = 300.0
DEFAULT_MAX_TIMEOUT_SECONDS = 3600.0
RUN_TOOL_NAME = "run_command"
_CUT_NOTE = "\n[toolswap] result cut at the page cap of {cap} bytes\n"
_ABS_PATH = re.compile(r"(?<![\w.~])/[^\s'\"`,;:()\[\]{}<>]*")


@attrs.frozen(kw_only=True)
class ServerSettings:
    """Options of one server; :meth:`validate` refuses what cannot work."""

    session_dir: str
    page_bytes: int = DEFAULT_PAGE_BYTES
    threshold_bytes: int | None = None  # default: TOOL_RESULT_THRESHOLD_KB or 50 KiB, capped
    timeout: float = DEFAULT_TIMEOUT_SECONDS
    max_timeout: float = DEFAULT_MAX_TIMEOUT_SECONDS
    cwd: str | None = None  # where commands run by default (the server's folder)

    def validate(self) -> ServerSettings:
        validate_page_bytes(self.page_bytes, "page_bytes")
        if self.page_bytes < MIN_SERVER_PAGE_BYTES:
            raise UsageError(
                f"page_bytes must be at least {MIN_SERVER_PAGE_BYTES} for the MCP server "
                f"(a pointer needs room), got {self.page_bytes}"
            )
        for name in ("timeout", "max_timeout"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and 0 < value < 1e9):
                raise UsageError(f"{name} must be a positive number of seconds, got {value!r}")
        if self.timeout > self.max_timeout:
            raise UsageError(
                f"timeout {self.timeout:g} s is above max_timeout {self.max_timeout:g} s"
            )
        if self.threshold_bytes is not None and (
            isinstance(self.threshold_bytes, bool)
            or not isinstance(self.threshold_bytes, int)
            or self.threshold_bytes < 1
        ):
            raise UsageError(
                f"threshold_bytes must be a positive integer, got {self.threshold_bytes!r}"
            )
        return self

    @property
    def inline_bytes(self) -> int:
        """Output up to this size comes back whole; above it, a pointer (rule 1)."""
        return self.page_bytes - RESERVE_BYTES

    @property
    def body_bytes(self) -> int:
        """The ``max_bytes`` a page or a grep may use, leaving room for its trailer."""
        return self.page_bytes - RESERVE_BYTES - MAX_TRAILER_BYTES

    @property
    def preview_bytes(self) -> tuple[int, int]:
        """(head, tail) windows of the pointer: a fifth and four fifths of what is left."""
        room = self.page_bytes - RESERVE_BYTES - POINTER_RESERVE_BYTES
        head = max(64, room // 5)
        return head, max(64, room - head)


class ToolFailure(Exception):
    """A tool call that failed; ``str()`` is the one line the model sees."""


def bounded(text: str, cap: int) -> str:
    """``text`` if its UTF-8 size is within ``cap``, else cut on a character boundary, saying so."""
    data = text.encode("utf-8")
    if len(data) <= cap:
        return text
    note = _CUT_NOTE.format(cap=cap)
    keep = cap - len(note.encode("utf-8"))
    return data[:keep].decode("utf-8", "ignore") + note


class Toolbox:
    """The tools, as synchronous methods over one session; each returns the result text."""

    def __init__(self, settings: ServerSettings, *, environ: Mapping[str, str] | None = None):
        self.settings = settings.validate()
        env = os.environ if environ is None else environ
        threshold = settings.threshold_bytes
        if threshold is None:
            raw = env.get(THRESHOLD_ENV)
            # Reuse the externalizer's own parsing (and its errors) for the variable.
            threshold = (
                ToolResultExternalizer(
                    settings.session_dir, environ={THRESHOLD_ENV: raw}
                ).threshold_bytes
                if raw is not None
                else DEFAULT_THRESHOLD_BYTES
            )
        head, tail = settings.preview_bytes
        self.externalizer = ToolResultExternalizer(
            settings.session_dir,
            threshold_bytes=min(threshold, settings.inline_bytes),
            head_bytes=head,
            tail_bytes=tail,
            page_bytes=settings.body_bytes,
            environ=env,
        )
        self.root = self.externalizer.paths.root
        check_session(self.externalizer, tool=RUN_TOOL_NAME)

    # -- the tools -----------------------------------------------------------------

    def run_command(self, args: Mapping[str, Any], stop: Stop | None = None) -> str:
        _only(args, {"command", "argv", "cwd", "timeout_seconds", "summary"})
        command = args.get("command")
        argv = args.get("argv")
        if (command is None) == (argv is None):
            raise UsageError("give exactly one of command (a shell string) or argv (a list)")
        if command is not None and not isinstance(command, str):
            raise UsageError("command must be a string (run by /bin/sh -c)")
        if argv is not None and (
            not isinstance(argv, list) or not all(isinstance(a, str) for a in argv)
        ):
            raise UsageError("argv must be a list of strings")
        cwd = _optional_str(args, "cwd")
        if cwd is not None:
            cwd = os.path.join(self.settings.cwd or os.getcwd(), cwd)
        else:
            cwd = self.settings.cwd
        timeout = args.get("timeout_seconds", self.settings.timeout)
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not 0 < timeout <= self.settings.max_timeout
        ):
            raise UsageError(
                f"timeout_seconds must be a number in (0, {self.settings.max_timeout:g}], "
                f"got {timeout!r}"
            )
        summary = _optional_str(args, "summary")
        check_session(self.externalizer, tool=RUN_TOOL_NAME, summary=summary)
        what: str | list[str] = command if isinstance(command, str) else list(argv or [])
        result = run_command(
            self.externalizer,
            what,
            cwd=cwd,
            timeout=float(timeout),
            tool=RUN_TOOL_NAME,
            summary=summary,
            stop=stop,
            stdin_devnull=True,
        )
        return _status_line(result) + result.output.context_text

    def read_artifact(self, args: Mapping[str, Any]) -> str:
        _only(args, {"source_id", "offset", "limit", "start_byte", "max_bytes"})
        page = self.externalizer.read_page(
            _source_id(args),
            _int(args, "offset", 0, minimum=0),
            _int(args, "limit", DEFAULT_PAGE_LINES, minimum=1),
            max_bytes=self._max_bytes(args),
            start_byte=_int(args, "start_byte", 0, minimum=0),
        )
        return render_page(page)

    def grep_artifact(self, args: Mapping[str, Any]) -> str:
        _only(
            args,
            {"source_id", "pattern", "fixed", "ignore_case", "context", "max_matches", "offset"},
        )
        pattern = args.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise UsageError("pattern must be a non-empty string")
        result = self.externalizer.grep_artifact(
            _source_id(args),
            pattern,
            fixed=_bool(args, "fixed"),
            ignore_case=_bool(args, "ignore_case"),
            context=_int(args, "context", 0, minimum=0),
            max_matches=_int(args, "max_matches", 100, minimum=1),
            max_bytes=self.settings.body_bytes,
            offset=_int(args, "offset", 0, minimum=0),
        )
        return render_grep(result)

    def list_artifacts(self, args: Mapping[str, Any]) -> str:
        _only(args, {"offset", "limit"})
        offset = _int(args, "offset", 0, minimum=0)
        limit = _int(args, "limit", 50, minimum=1)
        infos = self.externalizer.list_artifacts()
        shown = infos[offset : offset + limit]
        text = render_listing(shown)
        rest = len(infos) - offset - len(shown)
        if rest > 0:
            text += (
                f"[toolswap] {rest} more artifact{'s' if rest != 1 else ''}; "
                f"next: list_artifacts(offset={offset + len(shown)})\n"
            )
        return text

    def stat_artifact(self, args: Mapping[str, Any]) -> str:
        _only(args, {"source_id"})
        info = self.externalizer.stat_artifact(_source_id(args))
        return json.dumps(info.to_json(), indent=2, sort_keys=True) + "\n"

    def _max_bytes(self, args: Mapping[str, Any]) -> int:
        body = self.settings.body_bytes
        wanted = _int(args, "max_bytes", body, minimum=MIN_PAGE_BYTES)
        return min(wanted, body)  # a larger request is lowered to the cap (rule 1)

    # -- dispatch ----------------------------------------------------------------

    def call(self, name: str, args: Mapping[str, Any] | None, stop: Stop | None = None) -> str:
        """Run tool ``name``; the text is within the cap; failures raise :class:`ToolFailure`."""
        arguments = {} if args is None else args
        try:
            if name == RUN_TOOL_NAME:
                text = self.run_command(arguments, stop)
            else:
                method = _READ_TOOLS.get(name)
                if method is None:
                    known = ", ".join(TOOL_NAMES)
                    raise UsageError(f"unknown tool {name!r}; the tools are {known}")
                text = method(self, arguments)
        except (ToolswapError, OSError) as exc:
            raise ToolFailure(bounded(self._describe(exc), self.settings.page_bytes)) from None
        except Exception as exc:  # a defect: the model gets one line, the log gets the rest
            log.exception("tool %s failed", name)
            raise ToolFailure(f"internal error: {type(exc).__name__}") from None
        return bounded(text, self.settings.page_bytes)

    def _describe(self, exc: BaseException) -> str:
        if isinstance(exc, CommandStartError | UsageError):
            kind = "usage"
        elif isinstance(exc, CorruptStateError):
            kind = "state"
        elif isinstance(exc, EnvironmentFailure | OSError):
            kind = "environment"
        else:  # pragma: no cover - every ToolswapError is one of the above
            kind = "toolswap"
        message = " ".join(str(exc).split()) or type(exc).__name__
        return f"{kind} error: {_hide_outside_paths(message, self.root)}"


_READ_TOOLS: dict[str, Callable[[Toolbox, Mapping[str, Any]], str]] = {
    "read_artifact": Toolbox.read_artifact,
    "grep_artifact": Toolbox.grep_artifact,
    "list_artifacts": Toolbox.list_artifacts,
    "stat_artifact": Toolbox.stat_artifact,
}
TOOL_NAMES = (RUN_TOOL_NAME, *_READ_TOOLS)


def _hide_outside_paths(message: str, root: str) -> str:
    inside = root.rstrip("/") + "/"

    def replace(match: re.Match[str]) -> str:
        path = match.group(0)
        return path if path == root or path.startswith(inside) else "<outside the session>"

    return _ABS_PATH.sub(replace, message)


def _status_line(result: CommandResult) -> str:
    state = "complete"
    if result.timed_out:
        state = "INCOMPLETE: timed out, the command was stopped"
    elif result.interrupted:
        state = f"INCOMPLETE: stopped ({result.interrupted_by})"
    where = (
        f"output externalized as {result.source_id}; the pointer follows"
        if result.source_id
        else "the whole output follows"
    )
    return f"[toolswap] exit status {result.exit_status} ({state}); {where}\n"


def _only(args: Mapping[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(args) - allowed)
    if unknown:
        raise UsageError(
            f"unknown argument{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
            f"allowed: {', '.join(sorted(allowed))}"
        )


def _source_id(args: Mapping[str, Any]) -> str:
    value = args.get("source_id")
    if not isinstance(value, str) or not value:
        raise UsageError("source_id must be a string: artifact:<session>:<file>:<12 hex>")
    return value


def _optional_str(args: Mapping[str, Any], name: str) -> str | None:
    value = args.get(name)
    if value is not None and not isinstance(value, str):
        raise UsageError(f"{name} must be a string, got {type(value).__name__}")
    return value


def _int(args: Mapping[str, Any], name: str, default: int, *, minimum: int) -> int:
    value = args.get(name, default)
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # JSON has one number type; 5.0 is 5
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise UsageError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def _bool(args: Mapping[str, Any], name: str) -> bool:
    value = args.get(name, False)
    if not isinstance(value, bool):
        raise UsageError(f"{name} must be true or false, got {value!r}")
    return value


# -- the SDK side ----------------------------------------------------------------

_SOURCE_ID_SCHEMA = {
    "type": "string",
    "description": "The artifact's source id, as the pointer prints it: "
    "artifact:<session>:tool_result_NNN.txt:<12 hex>.",
}


def tool_definitions(settings: ServerSettings) -> list[types.Tool]:
    """The tools with their JSON schemas (every argument described)."""
    body = settings.body_bytes
    read_only = types.ToolAnnotations(read_only_hint=True, open_world_hint=False)
    return [
        types.Tool(
            name=RUN_TOOL_NAME,
            description=(
                "Run a command (stdout and stderr combined). Output up to "
                f"{settings.inline_bytes:,} bytes comes back whole; larger output is kept as "
                "a verified artifact and you get a bounded pointer: source id, head, tail, "
                "notable (failure-looking) lines from the middle with their 0-based offsets, "
                "and the read that pages the rest. The first line gives the exit status and "
                "whether the command finished."
            ),
            input_schema={
                "type": "object",
                "properties": {
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
                "additionalProperties": False,
            },
            annotations=types.ToolAnnotations(destructive_hint=True, open_world_hint=True),
        ),
        types.Tool(
            name="read_artifact",
            description=(
                "Read lines of an artifact, verified against its digest. At most "
                f"{body:,} bytes of text per call (a longer line comes back in pieces); the "
                "last line of the result names the range, the total and the exact next read."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "source_id": _SOURCE_ID_SCHEMA,
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
                        "`--byte` of the previous page's next read); 0 otherwise.",
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
                "required": ["source_id"],
                "additionalProperties": False,
            },
            annotations=read_only,
        ),
        types.Tool(
            name="grep_artifact",
            description=(
                "Search an artifact line by line (Python regex, or a fixed string). Prints "
                "OFFSET:line for matches and OFFSET-line for context; OFFSET is 0-based, "
                "what read_artifact takes. Bounded output; the last line says where to resume."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "source_id": _SOURCE_ID_SCHEMA,
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
                "required": ["source_id", "pattern"],
                "additionalProperties": False,
            },
            annotations=read_only,
        ),
        types.Tool(
            name="list_artifacts",
            description=(
                "List the session's artifacts: name, bytes, lines, age, lease state and source id."
            ),
            input_schema={
                "type": "object",
                "properties": {
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
                        "description": "Most artifacts to list.",
                    },
                },
                "additionalProperties": False,
            },
            annotations=read_only,
        ),
        types.Tool(
            name="stat_artifact",
            description="Facts about one artifact (verified): size, lines, time, lease state.",
            input_schema={
                "type": "object",
                "properties": {"source_id": _SOURCE_ID_SCHEMA},
                "required": ["source_id"],
                "additionalProperties": False,
            },
            annotations=read_only,
        ),
    ]


def build_server(toolbox: Toolbox) -> Server[Any]:
    """The SDK's low-level server around ``toolbox`` (in-process clients can use it directly)."""
    tools = tool_definitions(toolbox.settings)

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        # Shared with the worker thread; closed when both let go of it (Stop.close).
        stop = Stop()
        try:
            text = await anyio.to_thread.run_sync(
                toolbox.call, params.name, params.arguments, stop, abandon_on_cancel=True
            )
        except ToolFailure as failure:
            return _text_result(str(failure), error=True)
        except anyio.get_cancelled_exc_class():
            stop.request("cancelled")  # the worker sees it, stops the command, and closes
            raise
        return _text_result(text, error=False)

    return Server(
        "toolswap",
        version=_version(),
        instructions=(
            "run_command runs a command and returns its output, or, when it is large, a "
            "bounded pointer to a verified artifact. Page it with read_artifact and search it "
            "with grep_artifact; line offsets are 0-based everywhere."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _text_result(text: str, *, error: bool) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=error)


def _version() -> str:
    from .cli import version

    return version()


async def serve_stdio(toolbox: Toolbox) -> None:
    """Serve ``toolbox`` on this process's stdin and stdout until the client closes them."""
    server = build_server(toolbox)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
