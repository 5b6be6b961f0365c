"""The MCP server's read calls, each in a worker process the server can kill.

Why processes, not threads: a regular expression with nested repetition
(``(a+)+$``) runs inside the ``re`` engine for minutes without ever letting
go of the interpreter lock, so a thread running it freezes every other
thread of the server, the event loop included: no other call is answered,
and not even the end of stdin is noticed.  A worker process cannot do that
to the server, and it can be killed.

Rules
=====

1. **Bounded concurrency.**  At most ``read_workers`` read calls run at once,
   each in its own process; more wait for a free one.  An idle worker is
   reused (its externalizer keeps its verification cache, so a second read of
   an artifact does not hash it again).
2. **Bounded time.**  A call that has not answered after ``read_timeout``
   seconds, or whose caller cancelled it, kills its worker (SIGKILL), and
   the next call starts a fresh one.  The timeout is a tool error.
3. **No orphans.**  The server kills every worker when it stops; a worker
   also dies with the server (``PR_SET_PDEATHSIG`` where Linux offers it, and
   EOF on its stdin otherwise), so a killed server leaves none behind.
4. **One line each way.**  The server writes one JSON request per line to the
   worker's stdin and reads one JSON reply per line from the worker's
   stdout; the worker's stray prints go to stderr, never into the channel.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from typing import Any, BinaryIO

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from .mcp_tools import ServerSettings, Toolbox, ToolFailure, ToolOutput

__all__ = ["ReadWorkers", "main"]

#: The largest reply line: a result is within the page cap, JSON escaping at most
#: sixfold, with room to spare.
_MAX_REPLY_BYTES = 64 * 1024 * 1024
_PR_SET_PDEATHSIG = 1


class _Worker:
    """One worker process and its two pipe ends."""

    def __init__(self, process: anyio.abc.Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self._send = process.stdin
        self._receive = BufferedByteReceiveStream(process.stdout)

    async def exchange(self, message: Mapping[str, Any]) -> dict[str, Any]:
        await self._send.send(json.dumps(message).encode("utf-8") + b"\n")
        line = await self._receive.receive_until(b"\n", _MAX_REPLY_BYTES)
        reply: dict[str, Any] = json.loads(line)
        return reply

    async def kill(self) -> None:
        with anyio.CancelScope(shield=True):
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
            await self.process.wait()
            await self.process.aclose()


class ReadWorkers:
    """The pool of rule 1; :meth:`aclose` kills every worker (rule 3)."""

    def __init__(self, settings: ServerSettings, environ: Mapping[str, str]) -> None:
        self._hello = {"settings": settings.to_json(), "environ": dict(environ)}
        self._size = settings.read_workers
        self._timeout = settings.read_timeout
        self._limiter: anyio.CapacityLimiter | None = None  # made inside the event loop
        self._idle: list[_Worker] = []
        self._running: set[_Worker] = set()
        self._closed = False

    async def tool(self, name: str, arguments: Mapping[str, Any] | None) -> ToolOutput:
        reply = await self._call({"op": "tool", "name": name, "args": arguments or {}}, name)
        return ToolOutput.from_json(reply)

    async def list_resources(self, cursor: str | None) -> dict[str, Any]:
        return await self._call({"op": "list", "value": cursor}, "resources/list")

    async def read_resource(self, uri: str) -> ToolOutput:
        reply = await self._call({"op": "read", "value": uri}, "resources/read")
        return ToolOutput.from_json(reply)

    async def warm(self) -> None:
        """Start one worker ahead of the first call (the import costs a few tenths of a second)."""
        async with self._slots():
            if not self._idle:
                self._idle.append(await self._start())

    async def aclose(self) -> None:
        self._closed = True
        workers = [*self._idle, *self._running]
        self._idle.clear()
        self._running.clear()
        for worker in workers:
            await worker.kill()

    def _slots(self) -> anyio.CapacityLimiter:
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self._size)
        return self._limiter

    async def _call(self, message: Mapping[str, Any], what: str) -> dict[str, Any]:
        async with self._slots():
            if self._closed:
                raise ToolFailure("environment error: the server is stopping", "environment")
            worker = self._idle.pop() if self._idle else await self._start()
            self._running.add(worker)
            answered = False
            try:
                with anyio.fail_after(self._timeout):
                    reply = await worker.exchange(message)
                answered = True
            except TimeoutError:
                raise ToolFailure(_timeout_message(what, self._timeout), "environment") from None
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError):
                raise ToolFailure(
                    f"internal error: the worker process of {what} died", "internal"
                ) from None
            finally:
                self._running.discard(worker)
                if answered and not self._closed:
                    self._idle.append(worker)
                else:  # stuck, cancelled or dead: never reused (rule 2)
                    await worker.kill()
        if not reply.get("ok"):
            raise ToolFailure(str(reply.get("message")), str(reply.get("kind")))
        result: dict[str, Any] = reply["result"]
        return result

    async def _start(self) -> _Worker:
        try:
            process = await anyio.open_process(
                [sys.executable, "-m", "toolswap.mcp_workers", str(os.getpid())],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=None,
            )
        except OSError as exc:
            raise ToolFailure(
                f"environment error: cannot start a read worker: {exc.strerror or exc}",
                "environment",
            ) from None
        worker = _Worker(process)
        try:
            ready = await worker.exchange(self._hello)
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError):
            await worker.kill()
            raise ToolFailure(
                "internal error: a read worker died as it started", "internal"
            ) from None
        except BaseException:
            await worker.kill()
            raise
        if not ready.get("ok"):
            await worker.kill()
            raise ToolFailure(str(ready.get("message")), str(ready.get("kind")))
        return worker


def _timeout_message(what: str, seconds: float) -> str:
    hint = (
        " (a regular expression with nested repetition, such as (a+)+$, can run that long: "
        "try fixed=true or a simpler pattern)"
        if what == "grep_artifact"
        else ""
    )
    return f"environment error: {what} did not finish within {seconds:g} s and was stopped{hint}"


# -- the worker side -----------------------------------------------------------------


def _die_with_parent(parent: int) -> None:
    """Rule 3: the kernel kills this process when the server dies (Linux), else EOF does."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:  # the server died before the line above
        os._exit(1)


def _serve(channel_in: BinaryIO, channel_out: BinaryIO) -> int:
    def answer(reply: Mapping[str, Any]) -> None:
        channel_out.write(json.dumps(reply).encode("utf-8") + b"\n")
        channel_out.flush()

    hello = channel_in.readline()
    if not hello:
        return 0
    try:
        data = json.loads(hello)
        toolbox = Toolbox(ServerSettings.from_json(data["settings"]), environ=data["environ"])
    except Exception as exc:  # the server checked the same settings: a defect if it happens
        answer({"ok": False, "kind": "internal", "message": f"internal error: {exc!r}"})
        return 1
    answer({"ok": True})
    for line in channel_in:
        request = json.loads(line)
        try:
            result = _handle(toolbox, request)
        except ToolFailure as failure:
            answer({"ok": False, "kind": failure.kind, "message": str(failure)})
        else:
            answer({"ok": True, "result": result})
    return 0


def _handle(toolbox: Toolbox, request: Mapping[str, Any]) -> Any:
    operation = request.get("op")
    if operation == "tool":
        return toolbox.call(str(request.get("name")), request.get("args")).to_json()
    if operation == "list":
        return toolbox.resource("list", request.get("value"))
    output = toolbox.resource("read", request.get("value"))
    assert isinstance(output, ToolOutput)
    return output.to_json()


def main(argv: list[str] | None = None) -> int:
    """``python -m toolswap.mcp_workers SERVER_PID``: serve read calls on stdin/stdout."""
    args = sys.argv[1:] if argv is None else argv
    if args:
        _die_with_parent(int(args[0]))
    # Rule 4: the channel is a private copy of stdout; fd 1 becomes stderr.
    channel_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the server's to handle
    return _serve(sys.stdin.buffer, channel_out)


if __name__ == "__main__":
    sys.exit(main())
