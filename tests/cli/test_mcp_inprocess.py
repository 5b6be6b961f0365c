"""The MCP server in-process (the SDK's in-memory client): tool errors, caps, cancellation.

Fast checks of the server's rules (``toolswap.mcp_server``, ``toolswap.mcp_tools``)
without a server subprocess (the read calls still run in worker processes);
``test_mcp_server.py`` drives the real ``toolswap mcp`` over stdio.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import time
from typing import Any

import pytest

anyio = pytest.importorskip("anyio")
mcp = pytest.importorskip("mcp")

from toolswap.errors import UsageError  # noqa: E402
from toolswap.mcp_server import (  # noqa: E402
    ServerSettings,
    Toolbox,
    ToolFailure,
    bounded,
    build_server,
)
from toolswap.mcp_tools import ToolOutput, fit, result_bytes  # noqa: E402

SMALL_CAP = 12 * 1024


def _toolbox(tmp_path: pathlib.Path, **options: Any) -> Toolbox:
    return Toolbox(ServerSettings(session_dir=str(tmp_path / "s"), **options), environ={})


def _results(toolbox: Toolbox, *calls: tuple[str, dict[str, Any]]) -> list[Any]:
    async def talk() -> list[Any]:
        async with mcp.Client(build_server(toolbox)) as client:
            return [await client.call_tool(name, arguments) for name, arguments in calls]

    results: list[Any] = anyio.run(talk)
    return results


def _calls(toolbox: Toolbox, *calls: tuple[str, dict[str, Any]]) -> list[tuple[bool, str]]:
    """(is_error, the text block) of each call; the text block always comes first."""
    return [(bool(r.is_error), r.content[0].text) for r in _results(toolbox, *calls)]


def test_small_output_comes_back_whole_with_its_exit_status(tmp_path: pathlib.Path) -> None:
    [(is_error, text)] = _calls(
        _toolbox(tmp_path), ("run_command", {"argv": ["sh", "-c", "echo hi; exit 3"]})
    )
    assert not is_error
    assert text == "[toolswap] exit status 3 (complete); the whole output follows\nhi\n"


@pytest.mark.parametrize("cap", [SMALL_CAP, 24 * 1024, 64 * 1024])
def test_every_result_of_a_large_run_fits_the_cap(tmp_path: pathlib.Path, cap: int) -> None:
    toolbox = _toolbox(tmp_path, page_bytes=cap)
    noisy = "python3 -c \"[print('row', i, 'ééé ERROR ok' * 20) for i in range(30000)]\""
    [run] = _results(toolbox, ("run_command", {"command": noisy}))
    sid = run.structured_content["source_id"]
    results = _results(
        toolbox,
        ("read_artifact", {"source_id": sid}),
        ("grep_artifact", {"source_id": sid, "pattern": "ok", "max_matches": 100000, "context": 3}),
        ("list_artifacts", {}),
        ("stat_artifact", {"source_id": sid}),
    )
    for result in [run, *results]:
        text = result.content[0].text
        assert not result.is_error, text
        assert result_bytes(text, result.structured_content) <= cap
        assert "result cut at the page cap" not in text  # each part was sized to fit


@pytest.mark.parametrize("extra,externalized", [(0, False), (1, True)])
def test_output_up_to_the_inline_limit_comes_back_whole_and_one_byte_more_as_a_pointer(
    tmp_path: pathlib.Path, extra: int, externalized: bool
) -> None:
    toolbox = _toolbox(tmp_path, page_bytes=SMALL_CAP, threshold_bytes=10**9)
    size = toolbox.settings.inline_bytes + extra
    [result] = _results(toolbox, ("run_command", {"argv": ["head", "-c", str(size), "/dev/zero"]}))
    text = result.content[0].text
    assert result.structured_content["externalized"] is externalized
    assert ("large output, the pointer follows" in text) is externalized
    assert result_bytes(text, result.structured_content) <= SMALL_CAP


@pytest.mark.parametrize(
    "call,arguments,start",
    [
        ("read_artifact", {}, "usage error: source_id must be a string"),
        (
            "read_artifact",
            {"source_id": "artifact:s:tool_result_001.txt:0123456789ab", "offset": -1},
            "usage error: offset must be an integer >= 0",
        ),
        (
            "read_artifact",
            {"source_id": "artifact:s:tool_result_009.txt:0123456789ab"},
            "unknown handle: tool_result_009.txt does not exist in this session",
        ),
        (
            "grep_artifact",
            {"source_id": "artifact:s:tool_result_001.txt:0123456789ab", "pattern": "("},
            "usage error: ",
        ),
        ("run_command", {"command": "true", "argv": ["true"]}, "usage error: give exactly one"),
        (
            "run_command",
            {"argv": ["no-such-command-xyz"]},
            "usage error: command not found: no-such-command-xyz",
        ),
        ("run_command", {"command": "true", "timeout_seconds": 10**9}, "usage error: timeout"),
        ("run_command", {"command": "true", "shell": True}, "usage error: unknown argument shell"),
        ("no_such_tool", {}, "usage error: unknown tool 'no_such_tool'"),
    ],
)
def test_a_bad_call_is_a_one_line_tool_error(
    tmp_path: pathlib.Path, call: str, arguments: dict[str, Any], start: str
) -> None:
    [(is_error, text)] = _calls(_toolbox(tmp_path), (call, arguments))
    assert is_error and text.startswith(start) and "\n" not in text, text


def test_an_error_never_shows_a_path_outside_the_session(tmp_path: pathlib.Path) -> None:
    toolbox = _toolbox(tmp_path)
    outside = UsageError(f"cannot open /etc/shadow nor {tmp_path}/elsewhere, but {toolbox.root}/x")
    assert toolbox.describe(outside) == (
        "usage",
        "usage error: cannot open <outside the session> nor <outside the session>, "
        f"but {toolbox.root}/x",
    )


def test_a_defect_is_an_internal_error_without_its_message(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    toolbox = _toolbox(tmp_path)

    def broken(*args: object, **kwargs: object) -> list[object]:
        raise KeyError("/secret/path")

    monkeypatch.setattr(toolbox.externalizer, "list_artifacts", broken)
    with pytest.raises(ToolFailure) as failure:
        toolbox.call("list_artifacts", {})
    assert (str(failure.value), failure.value.kind) == ("internal error: KeyError", "internal")


def test_the_guard_cuts_on_a_character_boundary_and_says_so() -> None:
    text = bounded("é" * 10_000, 1000)
    assert len(text.encode("utf-8")) <= 1000 and text.endswith(
        "cut at the page cap of 1000 bytes\n"
    )
    assert bounded("short", 1000) == "short"


def test_cancelling_a_call_stops_its_command(tmp_path: pathlib.Path) -> None:
    toolbox = _toolbox(tmp_path)
    pid_file = tmp_path / "child.pid"

    async def talk() -> None:
        async with mcp.Client(build_server(toolbox)) as client:
            with anyio.move_on_after(30):
                async with anyio.create_task_group() as group:
                    group.start_soon(
                        client.call_tool,
                        "run_command",
                        {"command": f"echo $$ > {pid_file}; exec sleep 60"},
                    )
                    while not pid_file.exists() or not pid_file.read_text().strip():
                        await anyio.sleep(0.05)
                    group.cancel_scope.cancel()

    anyio.run(talk)
    pid = int(pid_file.read_text())
    for _ in range(200):  # the worker thread stops it within the kill grace
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        try:  # the process may vanish between the probe and this read
            state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            break
        if state == "Z":
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the cancelled call's command is still running")


@pytest.mark.parametrize(
    "options,pattern",
    [
        ({"page_bytes": 1000}, "page_bytes must be at least"),
        ({"timeout": 10.0, "max_timeout": 5.0}, "above max_timeout"),
        ({"threshold_bytes": 0}, "threshold_bytes must be a positive integer"),
    ],
)
def test_bad_settings_are_refused_before_serving(
    tmp_path: pathlib.Path, options: dict[str, Any], pattern: str
) -> None:
    with pytest.raises(UsageError, match=pattern):
        _toolbox(tmp_path, **options)


def test_the_cli_does_not_import_the_sdk_until_mcp_runs() -> None:
    code = "import sys, toolswap.cli as c; c.build_parser(); print('mcp' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout == "False\n", done.stderr


def test_without_the_sdk_toolswap_mcp_says_how_to_install_it(tmp_path: pathlib.Path) -> None:
    code = (
        "import sys; sys.modules['mcp'] = None; from toolswap.cli import main; "
        f"sys.exit(main(['mcp', '--session', {str(tmp_path / 's')!r}]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr == (
        "toolswap: error: the MCP server needs the MCP SDK: pip install 'toolswap[mcp]'\n"
    )


def test_an_unusable_session_stops_the_server_before_it_starts(tmp_path: pathlib.Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "toolswap.cli", "mcp", "--session", "/proc/self/x"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr


def test_a_run_with_the_largest_structured_content_still_fits_without_the_guard(
    tmp_path: pathlib.Path,
) -> None:
    # Five notable lines full of quotes and backslashes: the longest JSON they can make.
    noisy = (
        "python3 -c \"[print(('ERROR ' + chr(34) * 150 + chr(92) * 150) if 9000 <= i < 9005 "
        "else f'row {i} ok') for i in range(30000)]\""
    )
    toolbox = _toolbox(tmp_path, page_bytes=SMALL_CAP)
    [run] = _results(toolbox, ("run_command", {"command": noisy, "summary": '"' * 240}))
    text = run.content[0].text
    assert len(run.structured_content["notable"]) == 5
    assert all(row["clipped"] for row in run.structured_content["notable"])
    link = run.content[1].model_dump(mode="json", by_alias=True, exclude_none=True)
    assert result_bytes(text, run.structured_content, link) <= SMALL_CAP
    assert "result cut at the page cap" not in text


def test_the_guard_counts_the_structured_content_and_the_link() -> None:
    output = ToolOutput(
        text="x" * 5000,
        structured={"notable": [{"offset": 1, "text": "y" * 100, "clipped": False}]},
        link={"uri": "toolswap://artifact/s/tool_result_001.txt?digest=0123456789ab"},
    )
    cut = fit(output, 2000)
    assert result_bytes(cut.text, cut.structured, cut.link) <= 2000
    assert cut.text.endswith("cut at the page cap of 2000 bytes\n")


def test_the_guard_drops_the_notable_texts_before_the_text() -> None:
    rows = [{"offset": i, "text": "z" * 1000, "clipped": False} for i in range(5)]
    cut = fit(ToolOutput(text="short", structured={"notable": rows}), 12 * 1024)
    assert cut.text == "short"
    assert [(r["offset"], r["text"], r["clipped"]) for r in cut.structured["notable"]] == [
        (i, "", True) for i in range(5)
    ]


def test_a_grep_with_the_most_match_offsets_still_fits_without_the_guard(
    tmp_path: pathlib.Path,
) -> None:
    toolbox = _toolbox(tmp_path)
    [run] = _results(toolbox, ("run_command", {"command": "seq 0 999999"}))
    sid = run.structured_content["source_id"]
    grep = {"source_id": sid, "pattern": "^9", "offset": 900000, "max_matches": 10**6}
    [found] = _results(toolbox, ("grep_artifact", grep))
    text = found.content[0].text
    assert len(found.structured_content["match_offsets"]) == 200
    assert found.structured_content["match_count"] > 1000
    assert result_bytes(text, found.structured_content) <= toolbox.settings.page_bytes
    assert "result cut at the page cap" not in text
