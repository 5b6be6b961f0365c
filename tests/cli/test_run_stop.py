"""``toolswap run``: the session is checked before the command starts, and a stop keeps the output.

Issue 14 item 6.  Each test drives a real ``toolswap run`` process: signals,
process groups and exit statuses are what a user sees only from outside.
"""

from __future__ import annotations

import pathlib
import re
import signal
import subprocess
import sys
import time

import pytest

# Prints forever, slowly enough that the test's window is a few MB at most.
FOREVER = (
    "import itertools, os, time\n"
    "open('child.pid', 'w').write(str(os.getpid()))\n"
    "for i in itertools.count():\n"
    "    print('line', i, 'ok', flush=True)\n"
    "    if i % 100 == 0: time.sleep(0.001)\n"
)


def _toolswap(*args: str) -> list[str]:
    return [sys.executable, "-m", "toolswap.cli", *args]


def _wait_for(predicate: object, what: str) -> None:
    """Poll ``predicate`` (bounded in count, so a broken run fails instead of hanging)."""
    for _ in range(600):
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


def _dead(pid: int) -> bool:
    """Gone, or a zombie (an orphan waits for init to reap it, but it runs no more)."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def test_an_unusable_session_refuses_before_the_command_runs(tmp_path: pathlib.Path) -> None:
    done = subprocess.run(
        _toolswap(
            "run", "--session", "/proc/self/x", "--", "sh", "-c", "touch side-effect; seq 100000"
        ),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and "/proc/self/x" in done.stderr
    assert not (tmp_path / "side-effect").exists()


@pytest.mark.parametrize(
    "args,spoil,pattern",
    [
        (["--summary", " "], None, "summary is blank"),
        (["--tool", "no spaces"], None, "invalid tool name"),
        ([], "tool-results", "not a real directory"),
        ([], ".session.lock", "lock file"),
    ],
)
def test_any_refusal_comes_before_the_side_effect(
    tmp_path: pathlib.Path, args: list[str], spoil: str | None, pattern: str
) -> None:
    session = tmp_path / "s"
    session.mkdir()
    if spoil is not None:  # a symlink or a directory where the session expects its own file
        (session / spoil).symlink_to(tmp_path) if spoil == "tool-results" else (
            session / spoil
        ).mkdir()
    done = subprocess.run(
        _toolswap("run", "--session", str(session), *args, "--", "touch", "side-effect"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and re.search(pattern, done.stderr), done.stderr
    assert not (tmp_path / "side-effect").exists()


@pytest.mark.parametrize("signum,status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_the_command_and_keeps_its_output_as_an_incomplete_artifact(
    tmp_path: pathlib.Path, signum: int, status: int
) -> None:
    session = tmp_path / "s"
    artifact = session / "tool-results" / "tool_result_001.txt"
    run = subprocess.Popen(
        _toolswap("run", "--session", str(session), "--", sys.executable, "-c", FOREVER),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(lambda: artifact.exists() and artifact.stat().st_size > 100_000, "an artifact")
        run.send_signal(signum)
        out, err = run.communicate(timeout=60)
    finally:
        run.kill()
    name = signal.Signals(signum).name
    assert run.returncode == status, err
    assert f"summary: INCOMPLETE (interrupted by {name}): line 0 ok" in out
    assert err.count("\n") == 1 and "the output is incomplete" in err
    assert _dead(int((tmp_path / "child.pid").read_text()))
    source_id = re.search(r"source_id: (\S+)", out)
    assert source_id is not None
    # What was kept is a whole, verified artifact: its last line is complete.
    tail = subprocess.run(
        _toolswap("read", source_id[1], "--session", str(session), "--offset", "0", "--limit", "1"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert tail.returncode == 0 and tail.stdout.startswith("line 0 ok\n")


def test_a_signal_during_small_output_prints_it_and_says_it_is_incomplete(
    tmp_path: pathlib.Path,
) -> None:
    run = subprocess.Popen(
        _toolswap(
            "run",
            "--session",
            str(tmp_path / "s"),
            "--",
            "sh",
            "-c",
            "echo started; echo $$ > child.pid; sleep 60",
        ),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(lambda: (tmp_path / "child.pid").exists(), "the child to start")
        run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=60)
    finally:
        run.kill()
    assert (run.returncode, out) == (130, "started\n")
    assert err == "toolswap: interrupted by SIGINT: the output is incomplete (printed above)\n"


def test_a_timeout_stops_the_whole_process_group_and_exits_124(tmp_path: pathlib.Path) -> None:
    # The grandchild (the backgrounded sleep) holds the pipe: only a group kill ends the run.
    done = subprocess.run(
        _toolswap(
            "run",
            "--session",
            str(tmp_path / "s"),
            "--timeout",
            "0.5",
            "--",
            "sh",
            "-c",
            "seq 20000; sleep 60 & echo $! > grandchild.pid; wait",
        ),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 124, done.stderr
    assert "summary: INCOMPLETE (timed out after 0.5 s): 1 (" in done.stdout
    assert done.stderr.startswith("toolswap: timed out: the output is incomplete (kept as ")
    assert _dead(int((tmp_path / "grandchild.pid").read_text()))


def test_a_background_child_holding_the_pipe_is_not_waited_for(tmp_path: pathlib.Path) -> None:
    # The command is over when sh exits; the child it left keeps the pipe open.
    started = time.monotonic()
    done = subprocess.run(
        _toolswap(
            "run",
            "--session",
            str(tmp_path / "s"),
            "--",
            "sh",
            "-c",
            "echo started; sleep 60 & echo $! > child.pid",
        ),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert time.monotonic() - started < 30  # the drain, not the child's 60 s
    assert (done.returncode, done.stdout) == (0, "started\n"), done.stderr
    child = int((tmp_path / "child.pid").read_text())
    _wait_for(lambda: _dead(child), "the background child to end")


def test_what_the_command_leaves_in_its_group_is_ended_with_it(tmp_path: pathlib.Path) -> None:
    done = subprocess.run(
        _toolswap(
            "run",
            "--session",
            str(tmp_path / "s"),
            "--",
            "sh",
            "-c",
            "sleep 60 > /dev/null 2>&1 & echo $! > child.pid",
        ),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    child = int((tmp_path / "child.pid").read_text())
    _wait_for(lambda: _dead(child), "the background child to end")


def test_the_timeout_still_applies_after_the_command_closes_its_output(
    tmp_path: pathlib.Path,
) -> None:
    done = subprocess.run(
        _toolswap(
            "run",
            "--session",
            str(tmp_path / "s"),
            "--timeout",
            "1",
            "--",
            "sh",
            "-c",
            "echo before; exec >&- 2>&-; echo $$ > leader.pid; sleep 60",
        ),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 124, done.stderr
    assert done.stdout == "before\n"
    leader = int((tmp_path / "leader.pid").read_text())
    _wait_for(lambda: _dead(leader), "the command to end")
