"""``toolswap.command``: a call ends with its command, with or without a pidfd to wait on.

Where the system has no pidfd, the leader's exit is polled (``waitid`` with
``WNOWAIT``); both ways must end the call when the command exits, not when
its background child lets go of the pipe, and leave nothing of its group.
"""

from __future__ import annotations

import pathlib
import time

import pytest

from toolswap import command
from toolswap.command import OutputMeter, run_command
from toolswap.externalizer import ToolResultExternalizer


def _dead(pid: int) -> bool:
    """Gone or a zombie within a few seconds (a signal is delivered, not awaited)."""
    deadline = time.monotonic() + 5
    while True:
        try:
            stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
        except FileNotFoundError:
            return True
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)


@pytest.fixture(params=["pidfd", "polled"])
def exit_watch(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "polled":
        monkeypatch.setattr(command, "_open_pidfd", lambda pid: None)
    return str(request.param)


def test_the_call_ends_when_the_command_exits(tmp_path: pathlib.Path, exit_watch: str) -> None:
    externalizer = ToolResultExternalizer(str(tmp_path / "s"), environ={})
    meter = OutputMeter()
    started = time.monotonic()
    result = run_command(
        externalizer,
        f"echo started; sleep 60 & echo $! > {tmp_path}/child.pid",
        timeout=30,
        meter=meter,
    )
    assert time.monotonic() - started < 10
    assert (result.exit_status, result.complete, result.output.context_text) == (
        0,
        True,
        "started\n",
    )
    assert (meter.bytes, meter.lines) == (8, 1)
    assert _dead(int((tmp_path / "child.pid").read_text()))


def test_a_quick_command_keeps_all_its_output(tmp_path: pathlib.Path, exit_watch: str) -> None:
    externalizer = ToolResultExternalizer(str(tmp_path / "s"), environ={})
    result = run_command(externalizer, ["seq", "100000"], timeout=30)
    assert result.output.artifact is not None
    assert result.output.artifact.line_count == 100000 and result.complete
