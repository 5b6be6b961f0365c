"""Live progress on a terminal's stderr; in a pipe, a plain line every ten seconds.

On a terminal the line is redrawn in place (never under ``--json``); when
stderr is a pipe nothing is drawn, and a long command prints a plain line
(no ``\r``, no escape codes) at least every :data:`_progress.HEARTBEAT` seconds.

The terminal is a real pseudo-terminal (``os.openpty``) handed to a child
``toolswap`` as its stderr; stdout stays a pipe, so the command's real output
is checked apart from the progress line.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time

import pytest

from toolswap.cli import _progress, check, main

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")

SMALL = ["explore", "--bounds", "artifacts=1,transactions=2"]  # ~12k states: a few updates
CRASH = ["crashcheck", "--scenario", "publish_ok", "--seeds", "1", "--mode", "drop"]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("TOOLSWAP_PROGRESS", None)
    env["COLUMNS"] = "200"
    return env


def _on_a_terminal(args: list[str]) -> tuple[int, str, str]:
    """Run ``toolswap ARGS`` with stderr on a pseudo-terminal: (status, stdout, stderr)."""
    primary, secondary = os.openpty()
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", "toolswap.cli", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=secondary,
            env=_env(),
        )
    finally:
        os.close(secondary)
    seen = bytearray()
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        seen += chunk
    os.close(primary)
    out = child.stdout.read().decode() if child.stdout else ""
    code = child.wait(timeout=300)
    return code, out, seen.decode(errors="replace")


def _piped(args: list[str]) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "toolswap.cli", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=300,
    )
    return done.returncode, done.stdout, done.stderr


def test_explore_draws_states_depth_and_rate_on_a_terminal() -> None:
    code, out, err = _on_a_terminal(SMALL)
    assert code == 0 and "verdict: 0 violations" in out
    assert "exploring: " in err and " states/s" in err and "depth " in err
    assert err.endswith("\r\x1b[K")  # the line is erased before the command ends


def _no_drawing(err: str) -> bool:
    return "\r" not in err and "\x1b[" not in err


def test_explore_draws_nothing_when_stderr_is_a_pipe() -> None:
    code, out, err = _piped(SMALL)
    assert code == 0 and _no_drawing(err)
    assert "verdict: 0 violations" in out


def test_explore_is_quiet_under_json_even_on_a_terminal() -> None:
    code, out, err = _on_a_terminal([*SMALL, "--json"])
    assert (code, err) == (0, "")
    assert '"violations": 0' in out


def test_crashcheck_draws_the_scenario_and_crash_states_on_a_terminal() -> None:
    code, out, err = _on_a_terminal(CRASH)
    assert "crashcheck: publish_ok: " in err and " crash states" in err
    assert "crash states explored" in out and code in (0, 1)


def test_crashcheck_draws_nothing_when_stderr_is_a_pipe() -> None:
    _, out, err = _piped(CRASH)
    assert _no_drawing(err) and "crash states explored" in out


def test_a_long_command_in_a_pipe_says_it_is_alive_with_plain_lines(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(_progress, "HEARTBEAT", 0.05)
    monkeypatch.delenv("TOOLSWAP_PROGRESS", raising=False)
    assert main(CRASH) in (0, 1)
    err = capsys.readouterr().err
    assert _no_drawing(err)
    assert "crashcheck: publish_ok: " in err and " crash states" in err


def test_a_heartbeat_repeats_the_latest_line_while_one_step_runs_long(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_progress, "HEARTBEAT", 0.05)
    stream = io.StringIO()
    beats = _progress.Progress(False, stream, heartbeat=True)
    try:
        beats.update("conformance: [3/90] GEN.many-ids-back-to-back")
        deadline = time.monotonic() + 30
        while "so far" not in stream.getvalue() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        beats.close()
    (first, *_) = stream.getvalue().splitlines()
    assert first.startswith("conformance: [3/90] GEN.many-ids-back-to-back (")


def test_a_short_command_in_a_pipe_prints_nothing() -> None:
    stream = io.StringIO()
    with _progress.Progress(False, stream, heartbeat=True) as beats:
        beats.update("exploring: 12 states")
    assert stream.getvalue() == ""


def test_conformance_draws_the_current_check_on_a_terminal() -> None:
    code, out, err = _on_a_terminal(["conformance", "memory", "--check", "O1"])
    assert code == 0 and "[1/" in err and "O1" in err
    _, _, quiet = _on_a_terminal(["conformance", "memory", "--check", "O1", "--json"])
    assert quiet == ""


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_check_draws_each_check_by_name(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.delenv("TOOLSWAP_PROGRESS", raising=False)

    def fake(
        seeds: int, progress: object = None, owners: object = (), live: object = None
    ) -> list[check.CheckRow]:
        assert callable(progress) and isinstance(live, _progress.Progress)
        shown.append(live.enabled)
        progress("spec model")
        return [check.CheckRow(check="spec model", passed=True, evidence="ok", seconds=0.1)]

    shown: list[bool] = []
    monkeypatch.setattr(check, "run_checks", fake)
    assert main(["check"]) == 0
    assert "check: spec model ..." in terminal.getvalue()
    terminal.truncate(0)
    assert main(["check", "--json"]) == 0
    assert terminal.getvalue().strip("\x00") == ""
    assert shown == [True, False]


def test_progress_is_off_when_switched_off_by_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TOOLSWAP_PROGRESS", "0")
    assert not _progress.enabled_for(False, _Terminal())
    monkeypatch.delenv("TOOLSWAP_PROGRESS")
    assert _progress.enabled_for(False, _Terminal())
    assert not _progress.enabled_for(True, _Terminal())
    assert not _progress.enabled_for(False, io.StringIO())


def test_updates_are_throttled_and_the_line_is_erased() -> None:
    ticks = iter([0.0, 0.0, 0.05, 0.3])
    terminal = _Terminal()
    line = _progress.Progress(True, terminal, clock=lambda: next(ticks))
    line.update("first")  # drawn at once
    line.update("too soon")  # 0.05 s later: skipped
    line.update("later")
    line.close()
    text = terminal.getvalue()
    assert "first" in text and "later" in text and "too soon" not in text
    assert text.endswith("\r\x1b[K")


@pytest.mark.parametrize(
    ("count", "noun", "expected"),
    [
        (1, "seed", "1 seed"),
        (2, "seed", "2 seeds"),
        (0, "state", "0 states"),
        (180112, "state", "180,112 states"),
    ],
)
def test_plural(count: int, noun: str, expected: str) -> None:
    assert _progress.plural(count, noun) == expected
