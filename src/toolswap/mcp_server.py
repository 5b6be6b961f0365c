"""toolswap as an MCP server: run a command, then page, search and list its artifacts.

The server speaks MCP over stdio with the official SDK (``pip install
'toolswap[mcp]'``); ``toolswap mcp`` starts it.  The tools themselves are
plain code (:mod:`toolswap.mcp_tools`, rules on results, caps and errors),
declared with hand-written schemas (:mod:`toolswap.mcp_schemas`); this
module wraps them in the SDK's low-level server.

Rules
=====

1. **The event loop never runs a tool.**  ``run_command`` runs in a thread
   (it waits on the command's pipe, which lets go of the interpreter), at most
   ``max_commands`` at once; the read tools and the resources run in worker
   processes (:mod:`toolswap.mcp_workers`), at most ``read_workers`` at once
   and each stopped after ``read_timeout`` seconds.  A slow call, whatever it
   is, leaves the server answering the others.
2. **Every result is structured and bounded**: a text block, the structured
   content matching the tool's declared output schema, and for a command
   whose output became an artifact a ``resource_link`` to it; together
   within the page cap, which each tool also declares in its ``_meta``
   (``anthropic/maxResultSizeChars``) for the clients that read it.
3. **Artifacts are resources.**  ``resources/list`` pages through them with a
   cursor; ``resources/read`` returns one bounded page, and the next page's
   URI (``_meta["toolswap/next_uri"]``, absent on the last page, and the
   page's last line).
4. **Progress and cancellation.**  While a command runs, a call that carries
   a progress token gets a progress notification every
   :data:`PROGRESS_INTERVAL_SECONDS`: ``progress`` is the seconds elapsed
   (it must grow with each one), the message the bytes and lines so far.  A
   cancelled call stops the command's whole process group.
5. **Stopping stops everything.**  When the client closes stdin, or the
   server gets SIGTERM, SIGINT or SIGHUP, every running command's group is
   stopped (SIGTERM, then SIGKILL) and waited for (at most
   :data:`SHUTDOWN_GRACE_SECONDS`), every worker is killed, and the server
   exits.  A command that left its process group on purpose (``setsid``) is
   out of reach (see :mod:`toolswap.command`, rule 3).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import anyio
import anyio.to_thread
import mcp.types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from .command import DRAIN_GRACE_SECONDS, KILL_GRACE_SECONDS, OutputMeter, Stop
from .mcp_schemas import tool_specs
from .mcp_tools import (
    MIN_SERVER_PAGE_BYTES,
    POINTER_RESERVE_BYTES,
    RESERVE_BYTES,
    RUN_TOOL_NAME,
    STRUCTURED_RESERVE_BYTES,
    TOOL_NAMES,
    ServerSettings,
    Toolbox,
    ToolFailure,
    ToolOutput,
    bounded,
)
from .mcp_workers import ReadWorkers

__all__ = [
    "ServerSettings",
    "Toolbox",
    "ToolFailure",
    "ToolOutput",
    "Runtime",
    "build_server",
    "serve_stdio",
    "tool_definitions",
    "bounded",
    "RESERVE_BYTES",
    "STRUCTURED_RESERVE_BYTES",
    "POINTER_RESERVE_BYTES",
    "MIN_SERVER_PAGE_BYTES",
    "TOOL_NAMES",
    "MAX_RESULT_META",
    "NEXT_URI_META",
]

log = logging.getLogger("toolswap.mcp")

PROGRESS_INTERVAL_SECONDS = 0.5
#: How long stopping waits for the running commands: their kill grace and drain, and a second.
SHUTDOWN_GRACE_SECONDS = KILL_GRACE_SECONDS + DRAIN_GRACE_SECONDS + 1.0
MAX_RESULT_META = "anthropic/maxResultSizeChars"
NEXT_URI_META = "toolswap/next_uri"
_RESOURCE_NOT_FOUND = -32002
_INVALID_PARAMS = -32602
_INTERNAL_ERROR = -32603

ProgressSender = Callable[[float, float | None, str | None], Awaitable[None]]


class _Commands:
    """The running commands (rules 1, 4, 5): bounded, reported on, and stoppable all at once."""

    def __init__(self, toolbox: Toolbox) -> None:
        self._toolbox = toolbox
        self._limiter: anyio.CapacityLimiter | None = None
        self._active: dict[Stop, threading.Event] = {}
        self._lock = threading.Lock()
        self._closing = False

    async def run(
        self, arguments: Mapping[str, Any] | None, progress: ProgressSender
    ) -> ToolOutput:
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self._toolbox.settings.max_commands)
        async with self._limiter:
            if self._closing:
                raise ToolFailure("environment error: the server is stopping", "environment")
            stop, meter, done = Stop(), OutputMeter(), threading.Event()
            with self._lock:
                self._active[stop] = done

            def work() -> ToolOutput | ToolFailure:
                try:
                    return self._toolbox.call(RUN_TOOL_NAME, arguments, stop, meter)
                except ToolFailure as failure:  # a value: a task group would wrap it
                    return failure
                finally:
                    with self._lock:
                        self._active.pop(stop, None)
                    done.set()

            try:
                async with anyio.create_task_group() as group:
                    group.start_soon(_report_progress, meter, done, progress)
                    outcome = await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
                    group.cancel_scope.cancel()
            except anyio.get_cancelled_exc_class():
                stop.request("cancelled")  # the thread sees it and stops the command's group
                raise
            if isinstance(outcome, ToolFailure):
                raise outcome
            return outcome

    async def aclose(self) -> None:
        """Stop every running command and wait for them, boundedly (rule 5)."""
        self._closing = True
        with self._lock:
            running = list(self._active.items())
        for stop, _ in running:
            stop.request("server stopping")
        deadline = time.monotonic() + SHUTDOWN_GRACE_SECONDS
        for _, done in running:
            left = max(0.0, deadline - time.monotonic())
            await anyio.to_thread.run_sync(done.wait, left, abandon_on_cancel=True)


async def _report_progress(meter: OutputMeter, done: threading.Event, send: ProgressSender) -> None:
    started = time.monotonic()
    while not done.is_set():
        await anyio.sleep(PROGRESS_INTERVAL_SECONDS)
        if done.is_set():
            return
        elapsed = round(time.monotonic() - started, 1)
        message = f"{meter.bytes:,} bytes, {meter.lines:,} lines so far"
        try:
            await send(elapsed, None, message)
        except Exception:  # a client that cannot take progress still gets its result
            log.debug("progress notification failed", exc_info=True)
            return


class Runtime:
    """What a running server owns: the commands and the read workers (rules 1 and 5)."""

    def __init__(self, toolbox: Toolbox) -> None:
        self.toolbox = toolbox
        self.commands = _Commands(toolbox)
        self.reads = ReadWorkers(toolbox.settings, toolbox.environ)

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            await self.commands.aclose()
            await self.reads.aclose()


def tool_definitions(settings: ServerSettings) -> list[types.Tool]:
    """The tools with their input and output schemas and their result size (rule 2)."""
    tools = []
    for spec in tool_specs(settings):
        annotations = (
            types.ToolAnnotations(read_only_hint=True, open_world_hint=False)
            if spec.read_only
            else types.ToolAnnotations(destructive_hint=True, open_world_hint=True)
        )
        tools.append(
            types.Tool(
                name=spec.name,
                description=spec.description,
                input_schema=spec.input_schema,
                output_schema=spec.output_schema,
                annotations=annotations,
                _meta={MAX_RESULT_META: settings.page_bytes},
            )
        )
    return tools


def build_server(toolbox: Toolbox, runtime: Runtime | None = None) -> Server[Any]:
    """The SDK's low-level server around ``toolbox`` (in-process clients can use it directly).

    Without ``runtime`` the server makes its own for each connection and
    stops it when the connection ends.
    """
    tools = tool_definitions(toolbox.settings)

    @contextlib.asynccontextmanager
    async def lifespan(_: Server[Any]) -> AsyncIterator[Runtime]:
        if runtime is not None:
            yield runtime
            return
        own = Runtime(toolbox)
        try:
            yield own
        finally:
            await own.aclose()

    async def list_tools(
        ctx: ServerRequestContext[Runtime], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        ctx: ServerRequestContext[Runtime], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        state = ctx.lifespan_context
        try:
            if params.name == RUN_TOOL_NAME:
                output = await state.commands.run(params.arguments, ctx.session.report_progress)
            else:
                output = await state.reads.tool(params.name, params.arguments)
        except ToolFailure as failure:
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=str(failure))], is_error=True
            )
        return _tool_result(output)

    async def list_resources(
        ctx: ServerRequestContext[Runtime], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        cursor = params.cursor if params is not None else None
        try:
            page = await ctx.lifespan_context.reads.list_resources(cursor)
        except ToolFailure as failure:
            raise _protocol_error(failure) from None
        resources = [
            types.Resource(
                uri=entry["uri"],
                name=entry["name"],
                description=entry["description"],
                mime_type=entry["mime_type"],
                size=entry["size"],
                annotations=types.Annotations(last_modified=entry["last_modified"]),
            )
            for entry in page["resources"]
        ]
        return types.ListResourcesResult(resources=resources, next_cursor=page["next_cursor"])

    async def read_resource(
        ctx: ServerRequestContext[Runtime], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        try:
            output = await ctx.lifespan_context.reads.read_resource(params.uri)
        except ToolFailure as failure:
            raise _protocol_error(failure) from None
        following = output.structured.get("next_uri")
        contents = types.TextResourceContents(
            uri=params.uri,
            mime_type="text/plain",
            text=output.text,
            _meta={NEXT_URI_META: following} if following else None,
        )
        return types.ReadResourceResult(contents=[contents])

    return Server(
        "toolswap",
        version=_version(),
        instructions=(
            "run_command runs a command and returns its output, or, when it is large, a "
            "bounded pointer to a verified artifact. Page it with read_artifact and search it "
            "with grep_artifact (or read it as a toolswap:// resource); line offsets are "
            "0-based everywhere."
        ),
        lifespan=lifespan,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
    )


def _tool_result(output: ToolOutput) -> types.CallToolResult:
    content: list[types.ContentBlock] = [types.TextContent(type="text", text=output.text)]
    if output.link is not None:
        content.append(types.ResourceLink(**output.link))
    return types.CallToolResult(
        content=content, structured_content=output.structured, is_error=False
    )


def _protocol_error(failure: ToolFailure) -> MCPError:
    code = {
        "expired": _RESOURCE_NOT_FOUND,
        "unknown": _RESOURCE_NOT_FOUND,
        "usage": _INVALID_PARAMS,
    }.get(failure.kind, _INTERNAL_ERROR)
    return MCPError(code, str(failure))


def _version() -> str:
    from .cli import version

    return version()


_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


async def _stop_on_signal(runtime: Runtime) -> None:
    """Rule 5 for a signal: stop everything, then leave at once.

    The SDK reads stdin in a thread that only a line or EOF wakes, so an
    orderly return could wait on the client forever: once the commands are
    stopped and the workers killed, nothing is left to finish, and the
    process exits with 128 + the signal's number.
    """
    with anyio.open_signal_receiver(*_STOP_SIGNALS) as signals:
        async for signum in signals:
            print(
                f"toolswap mcp: {signal.Signals(signum).name}: stopping the running commands",
                file=sys.stderr,
            )
            await runtime.aclose()
            sys.stderr.flush()
            os._exit(128 + int(signum))


async def _warm(reads: ReadWorkers) -> None:
    with contextlib.suppress(ToolFailure):  # the first read call will say what is wrong
        await reads.warm()


async def serve_stdio(toolbox: Toolbox) -> None:
    """Serve ``toolbox`` on stdin and stdout until the client closes stdin (or a signal)."""
    runtime = Runtime(toolbox)
    server = build_server(toolbox, runtime)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(_stop_on_signal, runtime)
            group.start_soon(_warm, runtime.reads)
            async with stdio_server() as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())
            group.cancel_scope.cancel()
    finally:
        await runtime.aclose()
