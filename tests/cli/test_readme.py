"""Every example in the README runs, in order, the way a new user would run it.

Rules
=====

1. Shell blocks run line by line with ``bash -c``, in one scratch folder, in
   README order: what one command leaves (a session, an owner database) is
   what the next one finds.
2. ``pip install ... && CMD`` runs ``CMD``: installing is what CI itself does
   before this suite runs.  The README's test command is not run here (it *is*
   this suite); it must be exactly the command ``.ci/run`` runs.
3. A placeholder in angle brackets (``<12 hex>``) is filled from what an earlier
   command printed.
4. A command must exit 0 unless :data:`EXPECTED_EXIT` says otherwise, and why.
5. Python blocks run with a scratch folder as the working directory; the
   benchmark command runs from the checkout, as the README says.
6. The PostgreSQL section needs a server and a libpq service file:
   ``tests/cli/test_owner_cli.py`` runs it as written against the CI server,
   so it is skipped here.
7. The commands of :data:`BACKGROUND` read nothing an earlier command left and
   take minutes (they explore every crash state).  When the session selects
   them, they start as soon as collection ends, one after another on a thread
   of their own, each in a fresh folder (the benchmarks in the checkout), and
   this file's tests run last (``tests/conftest.py``), so that they overlap
   the rest of the suite; their test waits for the result and checks it
   exactly as it would check a command run in line.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
_FENCE = re.compile(r"^```(\w+)\n(.*?)^```$", re.M | re.S)
_SOURCE_ID = re.compile(r"artifact:default:tool_result_\d+\.txt:[0-9a-f]{12}")
TEST_COMMAND = "pip install -e '.[test]' && python -m pytest -q"

EXPECTED_EXIT = {
    # the explorer finds the classic mistake and exits 1 with its trace
    "toolswap explore --variant counter-restart": 1,
    "toolswap explore --variant counter-restart --html counter-restart.html": 1,
}


def _blocks(language: str) -> list[str]:
    text = README.read_text(encoding="utf-8")
    return [body for lang, body in _FENCE.findall(text) if lang == language]


def _commands() -> list[str]:
    commands = []
    for body in _blocks("sh"):
        for line in body.splitlines():
            command = re.sub(r"\s+#\s.*$", "", line).strip()
            if command and command != TEST_COMMAND:
                commands.append(
                    command.split(" && ", 1)[1] if "pip install" in command else command
                )
    return commands


def test_the_readme_test_command_is_the_one_ci_runs() -> None:
    assert any(TEST_COMMAND in body.splitlines() for body in _blocks("sh"))
    assert TEST_COMMAND in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()


def test_the_readme_has_exactly_two_set_up_commands() -> None:
    installs = [c for b in _blocks("sh") for c in b.splitlines() if c.startswith("pip install")]
    assert installs == ["pip install -e . && toolswap check", TEST_COMMAND]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return {"cwd": tmp_path_factory.mktemp("readme"), "source_id": None}


BENCHMARKS = "python -m pytest -q benchmarks --benchmark-columns=mean,median,rounds"
#: The servers' variables, left out of the background benchmark run: the kit's server
#: tests crash-restart the shared servers while it runs, and a pair timed across a
#: restart fails or measures the restart.  Those pairs run on their own (README).
_SERVERS = ("TOOLSWAP_POSTGRES_DSN", "TOOLSWAP_ETCD_ENDPOINTS")


def _env(command: str = "") -> dict[str, str]:
    dropped = {"TOOLSWAP_SESSION_DIR", *(_SERVERS if command == BENCHMARKS else ())}
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env["PYTHONPATH"] = str(ROOT)
    return env


#: Slow commands that depend on no earlier command (rule 7), slowest first.
BACKGROUND = (
    "toolswap crashcheck",
    "toolswap check",
    BENCHMARKS,
    "toolswap crashcheck --mutants",
)
TIMEOUT = 600


def _run(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=_env(command),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


class _Background:
    """The :data:`BACKGROUND` commands, run in order on one thread (rule 7).

    Each runs in its own process group, killed when pytest exits: a run that
    stops early (``-x``, Ctrl-C) must not leave a crash explorer running.
    """

    def __init__(self, commands: list[str]) -> None:
        self.done: dict[str, subprocess.CompletedProcess[str] | BaseException] = {}
        self.ready = {command: threading.Event() for command in commands}
        self.folder = Path(tempfile.mkdtemp(prefix="readme-background-"))
        self.running: subprocess.Popen[str] | None = None
        self.stopping = False
        atexit.register(shutil.rmtree, self.folder, True)
        atexit.register(self._stop)
        self.thread = threading.Thread(target=self._work, args=(commands,), daemon=True)
        self.thread.start()

    def _work(self, commands: list[str]) -> None:
        for index, command in enumerate(commands):
            cwd = ROOT if command == BENCHMARKS else self.folder / str(index)
            cwd.mkdir(exist_ok=True)
            try:
                self.done[command] = self._run(command, cwd)
            except BaseException as exc:  # reported by the command's own test
                self.done[command] = exc
            self.ready[command].set()

    def _run(self, command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        if self.stopping:
            raise RuntimeError("pytest is exiting")
        with subprocess.Popen(
            ["bash", "-c", command],
            cwd=cwd,
            env=_env(command),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own group: _stop reaches its children too
        ) as process:
            self.running = process
            try:
                out, err = process.communicate(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                self._kill(process)
                process.communicate()
                raise
            finally:
                self.running = None
        return subprocess.CompletedProcess(process.args, process.returncode, out, err)

    @staticmethod
    def _kill(process: subprocess.Popen[str]) -> None:
        with contextlib.suppress(ProcessLookupError):  # already gone
            os.killpg(process.pid, signal.SIGKILL)

    def _stop(self) -> None:
        self.stopping = True
        process = self.running
        if process is not None and process.poll() is None:
            self._kill(process)

    def result(self, command: str) -> subprocess.CompletedProcess[str]:
        assert self.ready[command].wait(TIMEOUT * len(self.ready)), f"{command!r} never finished"
        outcome = self.done[command]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


_background: _Background | None = None


def start_background(selected: list[str]) -> None:
    """Start the :data:`BACKGROUND` commands among the ``selected`` test ids (from conftest)."""
    global _background
    wanted = [c for c in BACKGROUND if f"test_each_readme_command_runs[{c}]" in selected]
    if wanted and _background is None:
        _background = _Background(wanted)


@pytest.mark.slow
@pytest.mark.parametrize("command", _commands())
def test_each_readme_command_runs(command: str, scratch: dict[str, Any]) -> None:
    if "postgresql://" in command:
        pytest.skip("run as written against a server by tests/cli/test_owner_cli.py")
    if "<12 hex>" in command:
        assert scratch["source_id"], "no earlier command printed a source id"
        command = _SOURCE_ID.sub(scratch["source_id"], command.replace("<12 hex>", "0" * 12))
    # The benchmark suite is run from a checkout, as the README says; the rest
    # runs in a scratch folder so that nothing is left in the repository.
    cwd = ROOT if " benchmarks " in f" {command} " else scratch["cwd"]
    if _background is not None and command in _background.ready:
        done = _background.result(command)
    else:
        done = _run(command, cwd)
    found = _SOURCE_ID.search(done.stdout)
    if found and scratch["source_id"] is None:
        scratch["source_id"] = found.group(0)
    want = EXPECTED_EXIT.get(command, 0)
    assert done.returncode == want, (
        f"{command!r} exited {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    if command == "toolswap check":  # the main job: every row of its verdict table passed
        assert done.stdout.splitlines()[-1] == "verdict: every check passed", done.stdout
        rows = [line for line in done.stdout.splitlines()[1:-1] if "  PASS  " in line]
        assert {r.split("  ")[0] for r in rows} >= {
            "spec model (S1-S7, L1)",
            "crash explorer (S1-S7)",
            "owner conformance (SQLite)",
            "owner conformance (in-memory)",
        }
    if command.startswith("toolswap run "):  # a bounded pointer, not 1 MB of output
        assert "source_id: artifact:default:" in done.stdout and len(done.stdout) < 40_000


@pytest.mark.parametrize("index", range(len(_blocks("python"))))
def test_each_readme_python_block_runs(
    index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "readme_example"}
    exec(
        compile(_blocks("python")[index], f"README.md python block {index + 1}", "exec"), namespace
    )
    if "plan" in namespace:  # the API tour ends with a plan that decided on its artifact
        assert [e.status for e in namespace["plan"].entries] == ["retained_recent"]
