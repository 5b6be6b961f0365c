"""``toolswap mcp`` as today's clients expect it (issue 36), driven by the SDK's stdio client.

One server process serves one conversation (the module fixture); each test
checks one claim on its record: output schemas listed and every structured
result valid against them, artifacts listed and read as resources with
cursors, a ``resource_link`` in ``run_command``'s result, progress
notifications during a 3-second command, an artifact deleted by cleanup
refused as an expired handle, and every result within the page cap.
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
jsonschema = pytest.importorskip("jsonschema")

from mcp.shared.exceptions import MCPError  # noqa: E402

from toolswap.externalizer import ToolResultExternalizer  # noqa: E402
from toolswap.mcp_server import MAX_RESULT_META, NEXT_URI_META  # noqa: E402
from toolswap.reading import DEFAULT_PAGE_BYTES  # noqa: E402

CAP = DEFAULT_PAGE_BYTES
#: More artifacts than one resources/list page holds (50), made before the server starts.
MADE_BEFORE = 60
ERROR_LINE = 61234
HUNDRED_K = (
    "python3 -c \"[print('step', i, 'FATAL: checksum mismatch in block 7' if i == "
    f"{ERROR_LINE} else 'ok') for i in range(100000)]\""
)
THREE_SECONDS = (
    "python3 -c \"import time\nfor i in range(30): print('tick', i, flush=True); time.sleep(0.1)\""
)


def _server(session: pathlib.Path) -> Any:
    return mcp.StdioServerParameters(
        command=sys.executable,
        args=["-m", "toolswap.cli", "mcp", "--session", str(session), "--gc-ttl", "2h"],
        env={**os.environ, "TOOLSWAP_SESSION_DIR": ""},
        cwd=str(session.parent),
    )


def _dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _compact_bytes(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def _size(result: Any) -> int:
    """What a client may show the model: every text block, link and the structured content."""
    total = 0
    for block in result.content:
        total += (
            len(block.text.encode("utf-8"))
            if block.type == "text"
            else _compact_bytes(_dump(block))
        )
    if result.structured_content is not None:
        total += _compact_bytes(result.structured_content)
    return total


async def _conversation(session: pathlib.Path) -> dict[str, Any]:
    record: dict[str, Any] = {"calls": [], "progress": [], "resource_pages": [], "reads": []}

    async with mcp.Client(_server(session)) as client:

        async def call(name: str, arguments: dict[str, Any], **options: Any) -> Any:
            result = await client.call_tool(name, arguments, **options)
            record["calls"].append({"tool": name, "arguments": arguments, "result": result})
            return result

        async def progress(value: float, total: float | None, message: str | None) -> None:
            record["progress"].append((value, total, message))

        listed = await client.list_tools()
        record["tools"] = {tool.name: tool for tool in listed.tools}
        record["big"] = big = await call("run_command", {"command": HUNDRED_K})
        record["ticks"] = await call(
            "run_command", {"command": THREE_SECONDS}, progress_callback=progress
        )
        sid = big.structured_content["source_id"]
        notable = big.structured_content["notable"]
        record["page"] = await call(
            "read_artifact",
            {"source_id": sid, "offset": notable[0]["offset"] if notable else 0, "limit": 2},
        )
        record["grep"] = await call(
            "grep_artifact", {"source_id": sid, "pattern": "checksum MISMATCH", "ignore_case": True}
        )
        record["stat"] = await call("stat_artifact", {"source_id": sid})
        record["listing"] = await call("list_artifacts", {})

        cursor = None
        while True:
            page = await client.list_resources(cursor=cursor)
            record["resource_pages"].append(page)
            cursor = page.next_cursor
            if cursor is None or len(record["resource_pages"]) > 10:
                break

        uri = big.structured_content["resource_uri"]
        first = await client.read_resource(uri)
        second = await client.read_resource(first.contents[0].meta[NEXT_URI_META])
        record["reads"] = [first, second]

        done = subprocess.run(
            [sys.executable, "-m", "toolswap.cli", "gc", "apply", "--yes", "--ttl", "0s"]
            + ["--session", str(session)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        record["expired"] = await call("read_artifact", {"source_id": sid})
        try:
            await client.read_resource(uri)
        except MCPError as error:
            record["expired_resource"] = error
        record["unknown"] = await call(
            "read_artifact", {"source_id": "artifact:s:tool_result_999.txt:0123456789ab"}
        )
    return record


@pytest.fixture(scope="module")
def talk(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    session = tmp_path_factory.mktemp("protocol") / "s"
    maker = ToolResultExternalizer(str(session), threshold_bytes=1, environ={})
    for number in range(MADE_BEFORE):
        maker.externalize(f"made before the server, number {number}\n".encode(), "run_command")
    record: dict[str, Any] = anyio.run(_conversation, session)
    return record


def test_every_tool_declares_an_output_schema_and_its_result_size(talk: dict[str, Any]) -> None:
    for name, tool in talk["tools"].items():
        jsonschema.Draft202012Validator.check_schema(tool.output_schema)
        assert tool.output_schema["type"] == "object", name
        assert tool.meta == {MAX_RESULT_META: CAP}, name


def test_every_structured_result_validates_against_its_tools_schema(talk: dict[str, Any]) -> None:
    checked = 0
    for entry in talk["calls"]:
        result = entry["result"]
        if result.is_error:
            assert result.structured_content is None
            continue
        schema = talk["tools"][entry["tool"]].output_schema
        jsonschema.Draft202012Validator(schema).validate(result.structured_content)
        checked += 1
    assert checked == 6


def test_the_descriptions_state_how_long_a_handle_lives(talk: dict[str, Any]) -> None:
    for name, tool in talk["tools"].items():
        text = " ".join(tool.description.split())
        assert "kept at least 2h after it was written" in text, name
        assert "kept until the lease is released" in text, name
        assert "'expired handle: ...'" in text, name


def test_the_structured_content_of_a_large_run_gives_the_errors_offset(
    talk: dict[str, Any],
) -> None:
    facts = talk["big"].structured_content
    assert (facts["exit_status"], facts["complete"], facts["lines"]) == (0, True, 100000)
    assert [row["offset"] for row in facts["notable"]] == [ERROR_LINE]
    assert (
        talk["page"]
        .content[0]
        .text.startswith(f"step {ERROR_LINE} FATAL: checksum mismatch in block 7\n")
    )
    assert talk["grep"].structured_content["match_offsets"] == [ERROR_LINE]


def test_a_large_run_links_its_artifact_as_a_resource(talk: dict[str, Any]) -> None:
    result = talk["big"]
    links = [block for block in result.content if block.type == "resource_link"]
    assert len(links) == 1 and result.content[0].type == "text"
    assert links[0].uri == result.structured_content["resource_uri"]
    assert links[0].size == result.structured_content["bytes"]
    assert talk["reads"][0].contents[0].uri == links[0].uri


def test_resources_are_listed_page_by_page_with_a_cursor(talk: dict[str, Any]) -> None:
    pages = talk["resource_pages"]
    names = [resource.name for page in pages for resource in page.resources]
    assert len(pages) == 2 and pages[-1].next_cursor is None
    assert len(names) == len(set(names)) == MADE_BEFORE + 1  # and the 100k-line run
    assert all(_compact_bytes(_dump(page)) <= CAP for page in pages)


def test_a_resource_is_read_in_bounded_pages_each_naming_the_next(talk: dict[str, Any]) -> None:
    first, second = (read.contents[0] for read in talk["reads"])
    last = re.search(r"lines 0-(\d+) of 100,000", first.text)
    assert last is not None, first.text[-300:]
    assert second.text.startswith(f"step {int(last.group(1)) + 1} ok\n")
    assert first.text.rstrip("\n").endswith(f"next: resources/read {first.meta[NEXT_URI_META]}")
    assert all(len(page.text.encode("utf-8")) <= CAP for page in (first, second))


def test_progress_is_reported_while_a_three_second_command_runs(talk: dict[str, Any]) -> None:
    progress = talk["progress"]
    assert len(progress) >= 3
    values = [value for value, _, _ in progress]
    assert values == sorted(set(values))  # strictly increasing, as the protocol wants
    assert all(re.fullmatch(r"[\d,]+ bytes, [\d,]+ lines so far", m) for _, _, m in progress)
    assert not talk["ticks"].is_error


def test_an_artifact_deleted_by_cleanup_is_an_expired_handle(talk: dict[str, Any]) -> None:
    expired = talk["expired"]
    text = expired.content[0].text
    assert expired.is_error and text.startswith("expired handle: tool_result_061.txt was deleted")
    assert "\n" not in text
    error = talk["expired_resource"]
    assert error.code == -32002 and error.message == text


def test_an_unknown_handle_has_a_message_of_its_own(talk: dict[str, Any]) -> None:
    unknown = talk["unknown"]
    assert unknown.is_error
    assert unknown.content[0].text.startswith("unknown handle: tool_result_999.txt does not exist")


def test_every_result_is_within_the_page_cap(talk: dict[str, Any]) -> None:
    sizes = {entry["tool"]: 0 for entry in talk["calls"]}
    for entry in talk["calls"]:
        size = _size(entry["result"])
        assert size <= CAP, (entry["tool"], size)
        sizes[entry["tool"]] = max(sizes[entry["tool"]], size)
    assert sizes["run_command"] > CAP // 2  # the pointer uses the room it has
    for entry in talk["calls"]:
        assert "result cut at the page cap" not in entry["result"].content[0].text


def test_a_client_of_the_handshake_era_gets_the_same_results(tmp_path: pathlib.Path) -> None:
    """Clients that still open with ``initialize`` (2025 versions) get schemas and progress too."""
    seen: list[str | None] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(message)

    async def talk() -> tuple[Any, Any]:
        async with mcp.Client(_server(tmp_path / "s"), mode="legacy") as client:
            listed = await client.list_tools()
            ran = await client.call_tool(
                "run_command", {"command": THREE_SECONDS}, progress_callback=progress
            )
            return listed, ran

    listed, ran = anyio.run(talk)
    schema = {tool.name: tool.output_schema for tool in listed.tools}["run_command"]
    jsonschema.Draft202012Validator(schema).validate(ran.structured_content)
    assert ran.structured_content["lines"] == 30 and len(seen) >= 3
