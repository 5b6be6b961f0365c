"""Every block of ``docs/mcp.md`` runs: each client configuration starts a server the SDK talks to.

The README's JSON configuration (section "Agents: the MCP server") is run
here too; its ``sh`` line is run by ``test_readme.py`` like every README command.

Rules: a fenced block is ``json`` or ``toml`` (a client configuration: parsed,
and each server in it, under ``mcpServers``, ``servers`` or ``mcp_servers``,
started as written by the SDK's stdio client, in a scratch folder, with this
interpreter's scripts first on PATH), ``sh`` (one command per line, must exit
0) or ``text``.  The one ``text`` block, the transcript, is replayed against a
real server: each ``→ TOOL {arguments}`` line is called, and the lines under
it must be lines of the result, in order (``...`` skips any number).  The
numbers the page states about the caps are the code's.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import tomllib
from typing import Any

import pytest

anyio = pytest.importorskip("anyio")
mcp = pytest.importorskip("mcp")

from toolswap.mcp_server import (  # noqa: E402
    MIN_SERVER_PAGE_BYTES,
    POINTER_RESERVE_BYTES,
    RESERVE_BYTES,
    STRUCTURED_RESERVE_BYTES,
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
    assert {lang for lang, _ in found} <= {"json", "toml", "sh", "text"}
    return [body for lang, body in found if lang == language]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TOOLSWAP_SESSION_DIR"}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


def _configurations() -> list[dict[str, Any]]:
    """Each client configuration of the page, then the README's, as server name -> entry."""
    readme = [b for lang, b in _FENCE.findall(README.read_text("utf-8")) if lang == "json"]
    found = []
    for body in _blocks("json") + readme:
        data = json.loads(body)
        found.append(data["mcpServers"] if "mcpServers" in data else data["servers"])
    for body in _blocks("toml"):
        found.append(tomllib.loads(body)["mcp_servers"])
    return found


def test_the_page_has_configurations_for_at_least_three_clients() -> None:
    page = " ".join(DOC.read_text(encoding="utf-8").split())
    clients = ["Claude Code", "Cursor", "Gemini CLI", "VS Code", "Codex"]
    assert all(f"**{client}**" in page for client in clients)
    assert len(_blocks("json")) + len(_blocks("toml")) >= 3


def test_the_page_and_the_readme_have_a_client_configuration() -> None:
    assert len(_configurations()) > len(_blocks("json")) + len(_blocks("toml")) > 0


@pytest.mark.parametrize("index", range(len(_configurations())))
def test_each_client_configuration_starts_a_server_that_lists_every_tool(
    index: int, tmp_path: pathlib.Path
) -> None:
    servers = _configurations()[index]
    for name, entry in servers.items():
        assert entry.get("type", "stdio") == "stdio", name
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


def _transcript() -> list[tuple[str, dict[str, Any], list[str]]]:
    """(tool, arguments, expected lines) of each call of the page's transcript."""
    (block,) = _blocks("text")
    calls: list[tuple[str, dict[str, Any], list[str]]] = []
    for line in block.splitlines():
        if line.startswith("→ "):
            tool, arguments = line[2:].split(" ", 1)
            calls.append((tool, json.loads(arguments), []))
        else:
            calls[-1][2].append(line)
    return calls


def _shows(expected: list[str], text: str) -> bool:
    """``expected`` is ``text`` line for line, where ``...`` stands for any number of lines."""
    lines = text.splitlines()
    at, skip = 0, False
    for want in expected:
        if want == "...":
            skip = True
            continue
        while skip and at < len(lines) and lines[at] != want:
            at += 1
        if at >= len(lines) or lines[at] != want:
            return False
        at, skip = at + 1, False
    return skip or at == len(lines)


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    folder = tmp_path_factory.mktemp("transcript")
    params = mcp.StdioServerParameters(
        command="toolswap",
        args=["mcp", "--session", ".toolswap/agent"],
        env=_env(),
        cwd=str(folder),
    )

    async def talk() -> list[Any]:
        async with mcp.Client(params) as client:
            return [await client.call_tool(tool, args) for tool, args, _ in _transcript()]

    results: list[Any] = anyio.run(talk)
    return results


def test_the_transcript_finds_an_error_in_a_100000_line_output(replayed: list[Any]) -> None:
    calls = _transcript()
    assert [tool for tool, _, _ in calls] == ["run_command", "read_artifact", "grep_artifact"]
    assert replayed[0].structured_content["lines"] == 100_000
    seen = sum(len(result.content[0].text.encode("utf-8")) for result in replayed)
    assert seen < 16 * 1024 and "under 16 KB in all" in " ".join(DOC.read_text("utf-8").split())


@pytest.mark.parametrize("index", range(len(_transcript())))
def test_each_transcript_result_is_what_the_server_returns(replayed: list[Any], index: int) -> None:
    _, _, expected = _transcript()[index]
    text = replayed[index].content[0].text
    assert not replayed[index].is_error
    assert _shows(expected, text), text[:3000]


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
    inline = RESERVE_BYTES + STRUCTURED_RESERVE_BYTES
    assert inline == 4 * 1024 and "the cap less 4 KiB" in text
    assert inline + MAX_TRAILER_BYTES == 4608 and "the cap less 4.5 KiB" in text
    assert inline + POINTER_RESERVE_BYTES == 10 * 1024 and "after 10 KiB" in text


def test_the_times_and_defaults_the_page_states_are_the_codes() -> None:
    from toolswap.command import EXIT_DRAIN_SECONDS, KILL_GRACE_SECONDS
    from toolswap.mcp_server import PROGRESS_INTERVAL_SECONDS
    from toolswap.mcp_tools import (
        DEFAULT_GC_TTL_SECONDS,
        DEFAULT_MAX_COMMANDS,
        DEFAULT_READ_TIMEOUT_SECONDS,
        DEFAULT_READ_WORKERS,
        MAX_ERROR_BYTES,
        RESOURCE_PAGE_SIZE,
    )

    text = " ".join(DOC.read_text(encoding="utf-8").split())
    assert PROGRESS_INTERVAL_SECONDS == 0.5 and "every half second" in text
    assert EXIT_DRAIN_SECONDS == 0.5 and "read for half a second more" in text
    assert KILL_GRACE_SECONDS == 2 and "then SIGKILL after 2 s" in text
    assert DEFAULT_GC_TTL_SECONDS == 86400 and "| `--gc-ttl DURATION` | `1d` |" in text
    assert DEFAULT_READ_WORKERS == 2 and "| `--read-workers N` | 2 |" in text
    assert DEFAULT_READ_TIMEOUT_SECONDS == 60 and "| `--read-timeout S` | 60 |" in text
    assert DEFAULT_MAX_COMMANDS == 4 and "| `--max-commands N` | 4 |" in text
    assert MAX_ERROR_BYTES == 2048 and "one line of at most 2 KiB" in text
    assert RESOURCE_PAGE_SIZE == 50 and "at most 50 artifacts a page" in text
