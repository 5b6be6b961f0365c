"""Artifacts as MCP resources: the URI names one artifact of this session, and nothing else (S7).

In-process (the SDK's in-memory client); ``test_mcp_protocol.py`` does the
same over stdio.
"""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

anyio = pytest.importorskip("anyio")
mcp = pytest.importorskip("mcp")

from mcp.shared.exceptions import MCPError  # noqa: E402

from toolswap.errors import UsageError  # noqa: E402
from toolswap.externalizer import ToolResultExternalizer  # noqa: E402
from toolswap.mcp_server import NEXT_URI_META, ServerSettings, Toolbox, build_server  # noqa: E402
from toolswap.mcp_tools import artifact_uri, parse_artifact_uri  # noqa: E402

SID = "artifact:s:tool_result_001.txt:0123456789ab"


def test_a_uri_round_trips_to_its_source_id_and_position() -> None:
    uri = artifact_uri(SID, 12, 34)
    assert uri == "toolswap://artifact/s/tool_result_001.txt?digest=0123456789ab&offset=12&byte=34"
    assert parse_artifact_uri(uri) == (SID, 12, 34)
    assert parse_artifact_uri(artifact_uri(SID)) == (SID, 0, 0)


def test_a_session_id_keeps_its_case_in_the_uri() -> None:
    sid = "artifact:MySession:tool_result_001.txt:0123456789ab"
    assert parse_artifact_uri(artifact_uri(sid))[0] == sid


@pytest.mark.parametrize(
    "uri",
    [
        "toolswap://artifact/s/tool_result_001.txt",  # no digest
        "toolswap://artifact/s/tool_result_001.txt#0123456789ab",
        "toolswap://artifact/s/../tool_result_001.txt?digest=0123456789ab",
        "toolswap://artifact/../../etc/passwd?digest=0123456789ab",
        "toolswap://artifact/s/tool_result_001.txt/x?digest=0123456789ab",
        "toolswap://s/tool_result_001.txt?digest=0123456789ab",  # the old, authority form
        "file:///etc/passwd",
        "toolswap://artifact/s/passwd?digest=0123456789ab",
        "toolswap://artifact/s/tool_result_001.txt?digest=0123456789ab&digest=0123456789ab",
        "toolswap://artifact/s/tool_result_001.txt?digest=0123456789ab&offset=-1",
        "toolswap://artifact/s/tool_result_001.txt?digest=0123456789ab&path=/etc/passwd",
        "toolswap://artifact/s/tool_result_001.txt?digest=0123456789ab&offset=１",
        "toolswap://artifact/" + "a" * 5000 + "/tool_result_001.txt?digest=0123456789ab",
    ],
)
def test_anything_but_the_exact_shape_is_refused(uri: str) -> None:
    with pytest.raises(UsageError) as refused:
        parse_artifact_uri(uri)
    assert len(str(refused.value)) < 400


def _toolbox(tmp_path: pathlib.Path) -> Toolbox:
    return Toolbox(ServerSettings(session_dir=str(tmp_path / "s")), environ={})


def _talk(toolbox: Toolbox, body: Any) -> Any:
    async def run() -> Any:
        async with mcp.Client(build_server(toolbox)) as client:
            return await body(client)

    return anyio.run(run)


def test_a_foreign_sessions_uri_is_refused_as_invalid(tmp_path: pathlib.Path) -> None:
    uri = artifact_uri("artifact:other:tool_result_001.txt:0123456789ab")

    async def body(client: Any) -> MCPError:
        with pytest.raises(MCPError) as refused:
            await client.read_resource(uri)
        return refused.value

    error = _talk(_toolbox(tmp_path), body)
    assert error.code == -32602 and error.message.startswith("usage error: ")


def test_every_page_of_a_resource_together_is_the_whole_artifact(tmp_path: pathlib.Path) -> None:
    maker = ToolResultExternalizer(str(tmp_path / "s"), environ={})
    text = "".join(f"row {i} {'x' * (i % 50)}\n" for i in range(20000))
    sid = maker.externalize(text.encode(), "run_command").artifact.source.source_id

    async def body(client: Any) -> list[str]:
        pages = []
        uri: str | None = artifact_uri(sid)
        while uri is not None and len(pages) < 100:
            content = (await client.read_resource(uri)).contents[0]
            pages.append(content.text.rsplit("[toolswap] ", 1)[0])  # the page less its last line
            uri = (content.meta or {}).get(NEXT_URI_META)
        return pages

    pages = _talk(_toolbox(tmp_path), body)
    assert len(pages) > 1 and "".join(pages) == text


def test_a_refused_uri_is_echoed_as_the_caller_sent_it(tmp_path: pathlib.Path) -> None:
    uri = "toolswap://artifact/../../etc/passwd?digest=0123456789ab"

    async def body(client: Any) -> MCPError:
        with pytest.raises(MCPError) as refused:
            await client.read_resource(uri)
        return refused.value

    error = _talk(_toolbox(tmp_path), body)
    assert error.message.startswith(f"usage error: invalid resource URI {uri!r}: want ")
