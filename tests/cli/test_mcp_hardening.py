"""The MCP server is bounded and clear (issue 35): slow calls, processes, errors, hints.

Each test drives what a client or an attacker would: a catastrophic regular
expression, a command that leaves a background child behind, a closed stdin,
a SIGTERM, a NUL, a huge listing, a hostile id.  The process tests speak
JSON-RPC to a real ``toolswap mcp`` by hand, so that nothing (no SDK client
that kills its server on exit) hides what the server itself does.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

anyio = pytest.importorskip("anyio")
mcp = pytest.importorskip("mcp")

from toolswap.domain import parse_source_id  # noqa: E402
from toolswap.errors import UsageError  # noqa: E402
from toolswap.externalizer import ToolResultExternalizer  # noqa: E402
from toolswap.mcp_server import ServerSettings, Toolbox, build_server  # noqa: E402
from toolswap.mcp_tools import MAX_ERROR_BYTES, result_bytes  # noqa: E402

SMALL_CAP = 12 * 1024
#: A line on which ``(a+)+$`` backtracks for hours (in Python's own ``re``), in an artifact.
CATASTROPHIC = "python3 -c \"print('a' * 40 + 'b'); [print(i) for i in range(20000)]\""


def _toolbox(tmp_path: pathlib.Path, **options: Any) -> Toolbox:
    return Toolbox(ServerSettings(session_dir=str(tmp_path / "s"), **options), environ={})


def _results(toolbox: Toolbox, *calls: tuple[str, dict[str, Any]]) -> list[Any]:
    async def talk() -> list[Any]:
        async with mcp.Client(build_server(toolbox)) as client:
            with anyio.fail_after(30):
                return [await client.call_tool(name, arguments) for name, arguments in calls]

    results: list[Any] = anyio.run(talk)
    return results


def _dead(pid: int) -> bool:
    """Gone, or a zombie (an orphan waits for init to reap it, but it runs no more)."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def _wait_dead(pid: int, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if _dead(pid):
            return True
        time.sleep(0.05)
    return _dead(pid)


def _pid(path: pathlib.Path) -> int:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError(f"{path} was never written")


#: A folder whose ``sitecustomize`` makes every grep_artifact call hold the interpreter
#: lock for hours (see there): a slow call that no time limit of grep's own can stop.
SLOW_GREP = pathlib.Path(__file__).parent / "slow_grep"


def _slow_grep_environ() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(SLOW_GREP), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, "TOOLSWAP_TEST_SLOW_GREP": "1"}


class _RawServer:
    """A ``toolswap mcp`` process and hand-written JSON-RPC lines (legacy handshake).

    Its grep_artifact never ends on its own (:data:`SLOW_GREP`).
    """

    def __init__(self, session: pathlib.Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "toolswap.cli", "mcp", "--session", str(session)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=session.parent,
            env=_slow_grep_environ(),
        )
        self._next_id = 0
        self.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "0"},
            },
        )
        assert self.reply(60) is not None
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> int:
        self._next_id += 1
        self.send({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        return self._next_id

    def call(self, name: str, arguments: dict[str, Any]) -> int:
        return self.request("tools/call", {"name": name, "arguments": arguments})

    def reply(self, seconds: float) -> dict[str, Any] | None:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], seconds)
        if not ready:
            return None
        line = self.process.stdout.readline()
        return json.loads(line) if line else None

    def exited_within(self, seconds: float) -> int | None:
        try:
            return self.process.wait(seconds)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def raw_server(tmp_path: pathlib.Path) -> Iterator[_RawServer]:
    server = _RawServer(tmp_path / "s")
    try:
        yield server
    finally:
        server.kill()


def _artifact_with_a_catastrophic_line(server: _RawServer) -> str:
    server.call("run_command", {"command": CATASTROPHIC})
    reply = server.reply(60)
    assert reply is not None and "result" in reply, reply
    source_id: str = reply["result"]["structuredContent"]["source_id"]
    return source_id


# -- slow calls ----------------------------------------------------------------------


def test_a_catastrophic_pattern_leaves_the_server_answering(raw_server: _RawServer) -> None:
    source_id = _artifact_with_a_catastrophic_line(raw_server)
    raw_server.call("grep_artifact", {"source_id": source_id, "pattern": "(a+)+$"})
    time.sleep(3)
    listing = raw_server.call("list_artifacts", {})
    deadline = time.monotonic() + 20
    answered = None
    while time.monotonic() < deadline and answered is None:
        reply = raw_server.reply(deadline - time.monotonic())
        if reply is not None and reply.get("id") == listing:
            answered = reply
    assert answered is not None, "list_artifacts got no answer while the grep ran"
    assert "tool_result_001.txt" in answered["result"]["content"][0]["text"]


def test_closing_stdin_ends_the_server_even_during_a_stuck_call(raw_server: _RawServer) -> None:
    source_id = _artifact_with_a_catastrophic_line(raw_server)
    raw_server.call("grep_artifact", {"source_id": source_id, "pattern": "(a+)+$"})
    time.sleep(2)
    workers = _workers_of(raw_server.process.pid)
    assert raw_server.process.stdin is not None
    raw_server.process.stdin.close()
    assert raw_server.exited_within(20) == 0
    assert workers and all(_wait_dead(pid, 10) for pid in workers)


def test_a_read_that_passes_the_read_timeout_is_stopped_and_said_so(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in _slow_grep_environ().items():  # the workers inherit it
        monkeypatch.setenv(name, value)
    toolbox = _toolbox(tmp_path, read_timeout=1.0, threshold_bytes=1024)
    [run] = _results(toolbox, ("run_command", {"command": CATASTROPHIC}))
    sid = run.structured_content["source_id"]
    started = time.monotonic()
    [grep, listing] = _results(
        toolbox,
        ("grep_artifact", {"source_id": sid, "pattern": "(a+)+$"}),
        ("list_artifacts", {}),
    )
    assert time.monotonic() - started < 15
    assert grep.is_error and grep.content[0].text == (
        "environment error: grep_artifact did not finish within 1 s and was stopped (a "
        "regular expression with nested repetition, such as (a+)+$, can run that long: "
        "try fixed=true or a simpler pattern)"
    )
    assert not listing.is_error  # a fresh worker took the next call


# -- processes left behind -------------------------------------------------------------


@pytest.mark.parametrize(
    "background",
    ["sleep 60 & echo $! > bg.pid", "sleep 60 > /dev/null 2>&1 & echo $! > bg.pid"],
    ids=["holding-the-pipe", "detached-from-the-pipe"],
)
def test_a_background_child_ends_with_its_call(tmp_path: pathlib.Path, background: str) -> None:
    toolbox = _toolbox(tmp_path, cwd=str(tmp_path))
    started = time.monotonic()
    [result] = _results(toolbox, ("run_command", {"command": f"echo started; {background}"}))
    assert time.monotonic() - started < 15  # not the 60 s of the child
    assert result.content[0].text.endswith("\nstarted\n")
    assert result.structured_content["complete"] is True
    assert _wait_dead(_pid(tmp_path / "bg.pid"), 5)


@pytest.mark.parametrize("how", ["stdin closed", "SIGTERM"])
def test_stopping_the_server_stops_a_running_command_and_its_children(
    raw_server: _RawServer, tmp_path: pathlib.Path, how: str
) -> None:
    raw_server.call(
        "run_command",
        {"command": f"sleep 60 & echo $! > {tmp_path}/bg.pid; echo $$ > {tmp_path}/sh.pid; wait"},
    )
    pids = [_pid(tmp_path / "bg.pid"), _pid(tmp_path / "sh.pid")]
    if how == "SIGTERM":
        raw_server.process.send_signal(signal.SIGTERM)
        expected = 128 + signal.SIGTERM
    else:
        assert raw_server.process.stdin is not None
        raw_server.process.stdin.close()
        expected = 0
    assert raw_server.exited_within(20) == expected
    assert all(_wait_dead(pid, 5) for pid in pids)


def test_cancelling_a_call_stops_the_commands_background_children(tmp_path: pathlib.Path) -> None:
    toolbox = _toolbox(tmp_path, cwd=str(tmp_path))

    async def talk() -> None:
        async with mcp.Client(build_server(toolbox)) as client:
            with anyio.move_on_after(30):
                async with anyio.create_task_group() as group:
                    group.start_soon(
                        client.call_tool,
                        "run_command",
                        {"command": "sleep 60 & echo $! > bg.pid; exec sleep 61"},
                    )
                    while not (tmp_path / "bg.pid").exists():
                        await anyio.sleep(0.05)
                    group.cancel_scope.cancel()

    anyio.run(talk)
    assert _wait_dead(_pid(tmp_path / "bg.pid"), 10)


# -- errors that are one line --------------------------------------------------------


def test_a_nul_in_the_command_is_a_usage_error(tmp_path: pathlib.Path) -> None:
    [result] = _results(_toolbox(tmp_path), ("run_command", {"command": "echo a\x00b"}))
    assert result.is_error
    assert result.content[0].text == "usage error: the command must not contain NUL characters"


def test_the_callers_own_program_path_is_shown_in_its_error(tmp_path: pathlib.Path) -> None:
    program = "/nonexistent-folder-of-the-user/bin/their-program"
    [result] = _results(_toolbox(tmp_path), ("run_command", {"argv": [program, "-v"]}))
    assert result.is_error
    assert result.content[0].text == f"usage error: command not found: {program}"


def test_a_path_the_caller_did_not_give_stays_hidden(tmp_path: pathlib.Path) -> None:
    toolbox = _toolbox(tmp_path)
    failure = UsageError("cannot use /home/someone/secret nor /opt/x/their-program")
    _, line = toolbox.describe(failure, {"argv": ["/opt/x/their-program"]})
    assert line == "usage error: cannot use <outside the session> nor /opt/x/their-program"


def test_a_huge_source_id_comes_back_clipped(tmp_path: pathlib.Path) -> None:
    huge = "artifact:" + "a" * 1_000_000
    [result] = _results(_toolbox(tmp_path), ("read_artifact", {"source_id": huge}))
    text = result.content[0].text
    assert result.is_error and text.startswith("usage error: invalid source id 'artifact:aaa")
    assert "(1,000,009 characters in all)" in text and len(text) < 400


def test_every_error_line_is_bounded(tmp_path: pathlib.Path) -> None:
    huge_names = {f"{'x' * 100_000}{i}": 1 for i in range(20)}
    [result] = _results(_toolbox(tmp_path), ("list_artifacts", huge_names))
    text = result.content[0].text
    assert result.is_error and text.startswith("usage error: unknown arguments ")
    assert len(text.encode("utf-8")) <= MAX_ERROR_BYTES and "and 15 more" in text


def test_the_cli_clips_a_huge_source_id_too(tmp_path: pathlib.Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "toolswap.cli", "read", "artifact:" + "b" * 100_000]
        + ["--session", str(tmp_path / "s")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "(100,009 characters in all)" in done.stderr
    assert len(done.stderr) < 400


# -- listings and hints ----------------------------------------------------------------


def test_a_listing_cut_at_the_cap_says_how_to_resume(tmp_path: pathlib.Path) -> None:
    maker = ToolResultExternalizer(str(tmp_path / "s"), threshold_bytes=1, environ={})
    for number in range(150):
        maker.externalize(f"artifact {number}\n".encode(), "run_command")
    toolbox = _toolbox(tmp_path, page_bytes=SMALL_CAP)
    listed: list[str] = []
    offset = 0
    for _ in range(20):
        [result] = _results(toolbox, ("list_artifacts", {"offset": offset, "limit": 10**6}))
        text = result.content[0].text
        assert result_bytes(text, result.structured_content) <= SMALL_CAP
        assert "result cut at the page cap" not in text
        listed += [row["name"] for row in result.structured_content["artifacts"]]
        following = re.search(r"next: list_artifacts\(offset=(\d+)\)\n\Z", text)
        if following is None:
            break
        offset = int(following.group(1))
        assert offset == result.structured_content["next_offset"]
    assert len(listed) == len(set(listed)) == 150 and offset > 0


def test_the_pointer_and_the_pages_name_the_mcp_read(tmp_path: pathlib.Path) -> None:
    toolbox = _toolbox(tmp_path)
    [run] = _results(toolbox, ("run_command", {"command": "seq 100000"}))
    sid = run.structured_content["source_id"]
    offset = run.structured_content["next_offset"]
    pointer = run.content[0].text
    assert f'read_artifact(source_id="{sid}", offset={offset}); each page' in pointer
    [page] = _results(toolbox, ("read_artifact", {"source_id": sid, "offset": offset}))
    following = page.structured_content["next_offset"]
    assert page.content[0].text.endswith(
        f'next: read_artifact(source_id="{sid}", offset={following})\n'
    )
    for text in (pointer, page.content[0].text):
        assert "toolswap read" not in text and "read_page(" not in text


def test_the_first_line_ends_with_the_source_id(tmp_path: pathlib.Path) -> None:
    [run] = _results(_toolbox(tmp_path), ("run_command", {"command": "seq 100000"}))
    first = run.content[0].text.split("\n", 1)[0]
    found = re.fullmatch(r".*; source_id: (\S+)", first)
    assert found is not None, first
    assert str(parse_source_id(found.group(1))) == run.structured_content["source_id"]


def _workers_of(server: int) -> list[int]:
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == server and b"toolswap.mcp_workers" in command:
            found.append(int(entry.name))
    return found


def test_a_killed_server_leaves_no_read_worker_behind(raw_server: _RawServer) -> None:
    source_id = _artifact_with_a_catastrophic_line(raw_server)
    raw_server.call("grep_artifact", {"source_id": source_id, "pattern": "(a+)+$"})
    time.sleep(2)  # the worker is in the regex engine now
    workers = _workers_of(raw_server.process.pid)
    assert workers
    raw_server.process.kill()  # no chance to clean up: the kernel must do it
    raw_server.process.wait()
    assert all(_wait_dead(pid, 10) for pid in workers)


def test_a_bad_gc_ttl_is_refused_before_serving(tmp_path: pathlib.Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "toolswap.cli", "mcp", "--session", str(tmp_path / "s")]
        + ["--gc-ttl", "soon"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("toolswap: error: invalid --gc-ttl 'soon'"), done.stderr
