"""Every block of ``docs/mcp.md`` runs: the client configuration starts a server the SDK talks to.

The README's JSON configuration (section "Agents: the MCP server") is run
here too; its ``sh`` line is run by ``test_readme.py`` like every README command.

Rules: a fenced block is ``json`` (a client configuration: parsed, and each
server in it started as written by the SDK's stdio client, in a scratch
folder, with this interpreter's scripts first on PATH), ``sh`` (one command
per line, must exit 0) or ``text``.  The numbers the page states about the
caps are the code's.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
from typing import Any

import pytest

anyio = pytest.importorskip("anyio")
mcp = pytest.importorskip("mcp")

from toolswap.mcp_server import (  # noqa: E402
    MIN_SERVER_PAGE_BYTES,
    POINTER_RESERVE_BYTES,
    RESERVE_BYTES,
    TOOL_NAMES,
)
from toolswap.reading import DEFAULT_PAGE_BYTES, MAX_TRAILER_BYTES  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "mcp.md"
README = ROOT / "README.md"
_FENCE = re.compile(r"^```([a-z]*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def _blocks(language: str) -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    found = _FENCE.findall(text)
    assert {lang for lang, _ in found} <= {"json", "sh", "text"}
    return [body for lang, body in found if lang == language]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TOOLSWAP_SESSION_DIR"}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


def _configurations() -> list[str]:
    """The page's JSON blocks and the README's (its section "Agents: the MCP server")."""
    readme = [b for lang, b in _FENCE.findall(README.read_text("utf-8")) if lang == "json"]
    return _blocks("json") + readme


def test_the_page_and_the_readme_have_a_client_configuration() -> None:
    assert len(_configurations()) > len(_blocks("json")) > 0


@pytest.mark.parametrize("index", range(len(_configurations())))
def test_each_client_configuration_starts_a_server_that_lists_every_tool(
    index: int, tmp_path: pathlib.Path
) -> None:
    servers = json.loads(_configurations()[index])["mcpServers"]
    for name, entry in servers.items():
        params = mcp.StdioServerParameters(
            command=entry["command"], args=entry["args"], env=_env(), cwd=str(tmp_path)
        )

        async def talk(params: Any) -> tuple[list[str], Any]:
            async with mcp.Client(params) as client:
                listed = await client.list_tools()
                ran = await client.call_tool("run_command", {"command": "echo hello"})
                return [tool.name for tool in listed.tools], ran

        names, ran = anyio.run(talk, params)
        assert sorted(names) == sorted(TOOL_NAMES), name
        assert ran.content[0].text.endswith("\nhello\n")
        assert (tmp_path / ".toolswap" / "agent").is_dir()  # the session the snippet names


@pytest.mark.parametrize("command", [c for b in _blocks("sh") for c in b.splitlines() if c])
def test_each_shell_command_runs(command: str, tmp_path: pathlib.Path) -> None:
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr


def test_the_caps_the_page_states_are_the_codes() -> None:
    text = " ".join(DOC.read_text(encoding="utf-8").split())
    assert f"default {DEFAULT_PAGE_BYTES:,} bytes, 24 KiB" in text
    assert f"at least {MIN_SERVER_PAGE_BYTES:,}" in text
    assert RESERVE_BYTES == 1024 and "the cap less 1 KiB" in text
    assert RESERVE_BYTES + MAX_TRAILER_BYTES == 1536 and "the cap less 1.5 KiB" in text
    assert RESERVE_BYTES + POINTER_RESERVE_BYTES == 7 * 1024 and "after 7 KiB" in text
