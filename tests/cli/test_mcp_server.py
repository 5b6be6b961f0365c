"""``toolswap mcp`` driven by the MCP SDK's own stdio client, as an agent client would.

One server process serves the whole module (starting one costs about a
second): the fixture holds one conversation and records every call and
result in order; each test checks one claim on that record.  Set
``TOOLSWAP_MCP_TRANSCRIPT=FILE`` to write the record out.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import sys
from typing import Any

import pytest

anyio = pytest.importorskip("anyio")
mcp = pytest.importorskip("mcp")

from toolswap.reading import DEFAULT_PAGE_BYTES  # noqa: E402

NOISY = (
    "python3 -c \"import sys; [print('line', i, 'ERROR disk full' if i == 40000 else 'ok') "
    'for i in range(80000)]"'
)
LONG_LINE = "python3 -c \"print('x' * 200000)\""
SOURCE_ID = re.compile(r"artifact:s:tool_result_\d{3,}\.txt:[0-9a-f]{12}")


def _server(session: pathlib.Path, *extra: str) -> Any:
    return mcp.StdioServerParameters(
        command=sys.executable,
        args=["-m", "toolswap.cli", "mcp", "--session", str(session), *extra],
        env={**os.environ, "TOOLSWAP_SESSION_DIR": ""},
        cwd=str(session.parent),
    )


def _text(result: Any) -> str:
    """The text block: always the first (a resource link may follow it)."""
    return str(result.content[0].text)


async def _conversation(session: pathlib.Path) -> dict[str, Any]:
    record: dict[str, Any] = {"calls": []}

    async with mcp.Client(_server(session)) as client:

        async def call(name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
            result = await client.call_tool(name, arguments)
            text = _text(result)
            record["calls"].append(
                {"tool": name, "arguments": arguments, "is_error": result.is_error, "text": text}
            )
            return bool(result.is_error), text

        listed = await client.list_tools()
        record["tools"] = {tool.name: tool.input_schema for tool in listed.tools}
        record["run"] = await call("run_command", {"command": NOISY})
        found = SOURCE_ID.search(record["run"][1])
        assert found, record["run"][1][:2000]
        sid = record["source_id"] = found.group(0)
        offset = _notable_offset(record["run"][1])
        record["page"] = await call(
            "read_artifact",
            {"source_id": sid, "offset": offset if offset is not None else 40000, "limit": 3},
        )
        record["grep"] = await call(
            "grep_artifact", {"source_id": sid, "pattern": "error DISK", "ignore_case": True}
        )
        record["whole"] = await call("read_artifact", {"source_id": sid, "max_bytes": 10**9})
        record["passwd"] = await call("read_artifact", {"source_id": "../../etc/passwd"})
        record["other"] = await call(
            "read_artifact", {"source_id": "artifact:other:tool_result_001.txt:000000000000"}
        )
        record["long_line"] = await call("run_command", {"command": LONG_LINE})
        long_sid = SOURCE_ID.search(record["long_line"][1])
        assert long_sid
        record["long_page"] = await call("read_artifact", {"source_id": long_sid.group(0)})
        record["timeout"] = await call(
            "run_command", {"argv": ["sh", "-c", "echo before; sleep 60"], "timeout_seconds": 0.5}
        )
        record["listing"] = await call("list_artifacts", {})
    return record


def _notable_offset(pointer: str) -> int | None:
    """The offset the pointer gives beside the middle error line, if it shows one."""
    for line in pointer.splitlines():
        if "ERROR disk full" in line:
            number = re.search(r"\d[\d,]*", line.replace("line 40000", ""))
            return int(number.group(0).replace(",", "")) if number else None
    return None


@pytest.fixture(scope="module")
def talk(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    session = tmp_path_factory.mktemp("mcp") / "s"
    record: dict[str, Any] = anyio.run(_conversation, session)
    target = os.environ.get("TOOLSWAP_MCP_TRANSCRIPT")
    if target:
        pathlib.Path(target).write_text(json.dumps(record, indent=2), encoding="utf-8")
    return record


def test_the_server_lists_its_tools_with_every_argument_described(talk: dict[str, Any]) -> None:
    tools = talk["tools"]
    assert set(tools) >= {
        "run_command",
        "read_artifact",
        "grep_artifact",
        "list_artifacts",
        "stat_artifact",
    }
    for name, schema in tools.items():
        for argument, spec in schema["properties"].items():
            assert spec.get("description"), f"{name}.{argument} has no description"


def test_a_large_output_comes_back_as_a_pointer_within_the_page_cap(talk: dict[str, Any]) -> None:
    is_error, text = talk["run"]
    assert not is_error
    first, _ = text.split("\n", 1)
    assert first == (
        "[toolswap] exit status 0 (complete); large output, the pointer follows; "
        f"source_id: {talk['source_id']}"
    )
    assert "80,000 lines" in text and "line 0 ok" in text and "line 79999 ok" in text
    assert len(text.encode("utf-8")) <= DEFAULT_PAGE_BYTES
    assert "result cut at the page cap" not in text  # it fits by design, not by the guard


def test_the_middle_error_line_is_among_the_pointers_notable_lines(talk: dict[str, Any]) -> None:
    pointer = talk["run"][1]
    notable = pointer[pointer.index("--- notable lines") : pointer.index("--- tail:")]
    assert "40000: line 40000 ERROR disk full\n" in notable
    assert _notable_offset(pointer) == 40000


def test_the_offset_the_pointer_gives_pages_to_the_error(talk: dict[str, Any]) -> None:
    is_error, text = talk["page"]
    assert not is_error and text.startswith("line 40000 ERROR disk full\n"), text


def test_grep_finds_the_error_at_the_offset_read_takes(talk: dict[str, Any]) -> None:
    is_error, text = talk["grep"]
    assert not is_error and text.startswith("40000:line 40000 ERROR disk full\n"), text


@pytest.mark.parametrize("call", ["passwd", "other"])
def test_a_hostile_source_id_is_a_one_line_tool_error(talk: dict[str, Any], call: str) -> None:
    is_error, text = talk[call]
    assert is_error and text.startswith("usage error: ") and "\n" not in text
    assert "Traceback" not in text and "/etc" not in text.replace("../../etc/passwd", "")


def test_a_page_larger_than_the_cap_is_capped(talk: dict[str, Any]) -> None:
    is_error, text = talk["whole"]
    assert not is_error and len(text.encode("utf-8")) <= DEFAULT_PAGE_BYTES
    assert "cut by the page byte cap" in text


def test_a_line_longer_than_the_cap_comes_back_in_pieces_within_it(talk: dict[str, Any]) -> None:
    for call in ("long_line", "long_page"):
        is_error, text = talk[call]
        assert not is_error and len(text.encode("utf-8")) <= DEFAULT_PAGE_BYTES, call
    assert "line 0 continues" in talk["long_page"][1]


def test_a_command_that_times_out_keeps_its_output_and_says_so(talk: dict[str, Any]) -> None:
    is_error, text = talk["timeout"]
    assert not is_error
    assert text == (
        "[toolswap] exit status 143 (INCOMPLETE: timed out, the command was stopped); "
        "the whole output follows\nbefore\n"
    )


def test_the_listing_names_both_artifacts(talk: dict[str, Any]) -> None:
    is_error, text = talk["listing"]
    assert not is_error
    assert "tool_result_001.txt" in text and "tool_result_002.txt" in text
