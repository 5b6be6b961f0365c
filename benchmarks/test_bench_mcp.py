"""What MCP adds to a page read: ``read_artifact`` through the server vs the Python API.

One 50 MB artifact, one live session (the server's own toolbox).  The
baseline is the same page through the Python API and the same renderer
(``read_page`` + ``render_page``); the MCP rows are that read as a tool call
through the SDK's client, in-process (direct dispatch) and over stdio to a
``toolswap mcp`` subprocess (JSON-RPC framing, pipes, another process).
Compare the ``mcp-read`` group's means: their difference is the per-read
overhead of the protocol (target: a few milliseconds after the first read,
which verifies the file).
"""

from __future__ import annotations

import os
import pathlib
import sys
from collections.abc import Iterator
from typing import Any

import pytest

anyio = pytest.importorskip("anyio")
mcp = pytest.importorskip("mcp")

from anyio.from_thread import BlockingPortal, start_blocking_portal  # noqa: E402

from toolswap.mcp_server import ServerSettings, Toolbox, build_server  # noqa: E402
from toolswap.reading import render_page  # noqa: E402

LINES = 1_250_000  # about 50 MB
OFFSET = 900_000


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> tuple[Toolbox, str]:
    folder = tmp_path_factory.mktemp("bench-mcp") / "s"
    toolbox = Toolbox(ServerSettings(session_dir=str(folder)), environ={})
    data = "".join(f"row {i} ".ljust(40, ".") + "\n" for i in range(LINES)).encode()
    result = toolbox.externalizer.externalize(data, "bench")
    assert result.artifact is not None
    return toolbox, result.artifact.source.source_id


@pytest.fixture(scope="module")
def portal() -> Iterator[BlockingPortal]:
    with start_blocking_portal() as running:
        yield running


def _client(portal: BlockingPortal, server: Any) -> Any:
    return portal.wrap_async_context_manager(mcp.Client(server))


def _arguments(sid: str) -> dict[str, Any]:
    return {"source_id": sid, "offset": OFFSET, "limit": 2000}


@pytest.mark.benchmark(group="mcp-read")
def test_baseline_python_api_read(benchmark, session) -> None:  # type: ignore[no-untyped-def]
    toolbox, sid = session
    body = toolbox.settings.body_bytes

    def read() -> str:
        return render_page(toolbox.externalizer.read_page(sid, OFFSET, 2000, max_bytes=body))

    assert benchmark(read).startswith(f"row {OFFSET} ")


@pytest.mark.benchmark(group="mcp-read")
def test_mcp_read_in_process(benchmark, session, portal) -> None:  # type: ignore[no-untyped-def]
    toolbox, sid = session
    with _client(portal, build_server(toolbox)) as client:
        result = benchmark(portal.call, client.call_tool, "read_artifact", _arguments(sid))
    assert result.content[0].text.startswith(f"row {OFFSET} ")


@pytest.mark.benchmark(group="mcp-read")
def test_mcp_read_over_stdio(benchmark, session, portal) -> None:  # type: ignore[no-untyped-def]
    toolbox, sid = session
    params = mcp.StdioServerParameters(
        command=sys.executable,
        args=["-m", "toolswap.cli", "mcp", "--session", toolbox.root],
        env={**os.environ},
        cwd=str(pathlib.Path(toolbox.root).parent),
    )
    with _client(portal, params) as client:
        portal.call(client.call_tool, "read_artifact", _arguments(sid))  # the first read verifies
        result = benchmark(portal.call, client.call_tool, "read_artifact", _arguments(sid))
    assert result.content[0].text.startswith(f"row {OFFSET} ")
