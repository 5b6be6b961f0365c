"""Every error a user or the environment can cause is one named line, exit 2.

Claims:

* no sub-command (discovered from the parser, so a new one is covered the
  day it is added) answers a hostile input with "internal error" or a
  traceback; a refusal exits 2 with exactly one line on stderr and, under
  ``--json``, one JSON document ``{"ok": false, ...}`` on stdout;
* argparse's own errors are one line too, and ``--ttl -1s`` says what is
  wrong with the value;
* a malformed or unknown failpoint is refused, never ignored;
* ``python -m toolswap`` and ``toolswap --version`` exist.

The sweep is cheap: commands that run long suites (``check``, ``crashcheck``,
``explore``, ``conformance``) get only arguments they must refuse while
parsing, and ``mcp`` (a server) only an unknown option.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

import toolswap
from toolswap.cli import build_parser, main
from toolswap.fs import _Failpoint

#: Commands that would run a whole suite or serve forever given valid input.
HEAVY = frozenset({"check", "crashcheck", "explore", "conformance", "mcp", "serve"})

#: Exit statuses a refusal may use; 0 is success.  (reconcile's 3 is a deadline.)
ALLOWED = {0, 2}


def _leaves(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
        return
    for name, sub in subs[0].choices.items():
        yield from _leaves(sub, (*path, name))


LEAVES = dict(_leaves(build_parser()))
COMMANDS = sorted(LEAVES)


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {
        action.option_strings[0]: action
        for action in parser._actions
        if action.option_strings and not isinstance(action, argparse._HelpAction)
    }


def _takes_value(action: argparse.Action) -> bool:
    return action.nargs is None or action.nargs in ("?", 1)


@pytest.fixture
def world(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Hostile things on disk, plus a benign session and owner for required arguments."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TOOLSWAP_SESSION_DIR", raising=False)
    file = tmp_path / "passwd"
    file.write_text("root:x:0:0:root:/root:/bin/sh\n")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    fifo_session = tmp_path / "fifo_session"
    fifo_session.mkdir()
    os.mkfifo(fifo_session / "retention-leases.jsonl")
    unreadable = tmp_path / "unreadable_session"
    unreadable.mkdir()
    (unreadable / "retention-leases.jsonl").write_bytes(b"")
    (unreadable / "retention-leases.jsonl").chmod(0)
    lock_dir = tmp_path / "lockdir_session"
    (lock_dir / ".session.lock").mkdir(parents=True)
    lock_link = tmp_path / "locklink_session"
    lock_link.mkdir()
    (lock_link / ".session.lock").symlink_to(file)
    benign = tmp_path / "benign"
    benign.mkdir()
    from toolswap.owners.sqlite import SQLiteOwner

    SQLiteOwner(tmp_path / "owner.db").close()
    return {
        "missing": str(tmp_path / "missing" / "dir"),
        "file": str(file),
        "fifo": str(fifo),
        "fifo_journal": str(fifo_session),
        "unreadable": str(unreadable),
        "lock_dir": str(lock_dir),
        "lock_link": str(lock_link),
        "benign": str(benign),
        "owner": f"sqlite:{tmp_path / 'owner.db'}",
    }


def _fill(parser: argparse.ArgumentParser, world: dict[str, str]) -> tuple[list[str], list[str]]:
    """Benign values for the required arguments: (before ``--``, after it)."""
    head: list[str] = []
    tail: list[str] = []
    for action in parser._actions:
        if action.option_strings:
            if action.required:
                value = world["owner"] if "owner" in action.dest else "x"
                head += [action.option_strings[0], value]
        elif action.nargs == argparse.REMAINDER:
            tail = ["--", "true"]
        elif action.required or action.nargs is None:
            if action.dest == "source_id":
                head.append(f"artifact:benign:tool_result_001.txt:{'0' * 12}")
            elif action.dest == "spec":
                head.append(world["owner"])
            else:
                head.append("x")
    return head, tail


@contextlib.contextmanager
def _deadline(seconds: int) -> Iterator[None]:
    def hung(*_: object) -> None:
        raise AssertionError(f"the command did not finish within {seconds}s (it blocks)")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with _deadline(30):
        code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _assert_named(argv: list[str], code: int, out: str, err: str) -> None:
    shown = f"{argv} -> {code}\nstdout: {out[-500:]}\nstderr: {err[-500:]}"
    assert "internal error" not in out + err, shown
    assert "Traceback" not in out + err, shown
    assert code in ALLOWED, shown
    if code == 2:
        assert err.count("\n") == 1 and err.startswith("toolswap: error: "), shown
        own = argv[: argv.index("--")] if "--" in argv else argv
        if "--json" in own:
            assert json.loads(out)["ok"] is False, shown


def _cases(path: tuple[str, ...], world: dict[str, str]) -> Iterator[list[str]]:
    parser = LEAVES[path]
    head, tail = _fill(parser, world)
    options = _options(parser)
    json_flag = ["--json"] if "--json" in options else []
    yield [*path, "--no-such-option", *head, *tail]
    if path[0] in HEAVY:
        for name, action in options.items():
            if _takes_value(action) and action.type is not None:
                yield [*path, name, "x", *json_flag]
        return
    if "--session" in options:
        for key in ("missing", "file", "fifo_journal", "unreadable", "lock_dir", "lock_link"):
            yield [*path, "--session", world[key], *head, *json_flag, *tail]
    hostile = [world["missing"], world["file"], world["fifo"], "x", "-1", "1e999", ""]
    for name, action in options.items():
        if name == "--session" or not _takes_value(action):
            continue
        for value in hostile:
            rest = [a for a in head if a != name]
            yield [*path, "--session", world["benign"], name, value, *rest, *json_flag, *tail]
    for position, value in enumerate(head):
        if value.startswith("-"):
            continue
        for bad in hostile:
            argv = [*path, *head, *json_flag, *tail]
            argv[len(path) + position] = bad
            if "--session" in options:
                argv[len(path) : len(path)] = ["--session", world["benign"]]
            yield argv


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_no_hostile_input_reaches_internal_error(
    path: tuple[str, ...], world: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    if path[0] == "mcp":
        argv = [*path, "--no-such-option"]
        _assert_named(argv, *_run(argv, capsys))
        return
    for argv in _cases(path, world):
        _assert_named(argv, *_run(argv, capsys))


def test_the_sweep_discovers_every_command_module() -> None:
    modules = {
        name[:-3]
        for name in os.listdir(os.path.dirname(toolswap.cli.__file__))
        if name.endswith(".py") and not name.startswith("_")
    }
    assert {path[0] for path in COMMANDS} == modules


# -- the named defects of issue 14 item 5 -------------------------------------------


def test_a_file_as_the_session_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["gc", "plan", "--session", "/etc/passwd"], capsys)
    assert (code, out) == (2, "")
    assert err == "toolswap: error: /etc/passwd is not a session folder (not a directory)\n"


@pytest.mark.parametrize("kind", ["directory", "symlink"])
def test_a_hostile_session_lock_is_named_and_nothing_is_deleted(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    session = tmp_path / "s"
    (session / "tool-results").mkdir(parents=True)
    artifact = session / "tool-results" / "tool_result_001.txt"
    artifact.write_bytes(b"old\n")
    os.utime(artifact, (0, 0))
    lock = session / ".session.lock"
    if kind == "directory":
        lock.mkdir()
    else:
        lock.symlink_to(tmp_path / "elsewhere")
    code, _, err = _run(["gc", "apply", "--yes", "--ttl", "0s", "--session", str(session)], capsys)
    assert code == 2 and err.startswith("toolswap: error: cannot take the session lock")
    assert artifact.exists()


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"TOOLSWAP_FAILPOINT": "x#0"}, "TOOLSWAP_FAILPOINT must be NAME or NAME#N"),
        ({"TOOLSWAP_FAILPOINT": "journal.after_fsyncc"}, "no known crash point"),
        ({"TOOLSWAP_FAILPOINT_MODE": "boom"}, "TOOLSWAP_FAILPOINT_MODE must be exit or sigkill"),
    ],
)
def test_a_bad_failpoint_is_refused_not_ignored(
    tmp_path: pathlib.Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    named: str,
) -> None:
    monkeypatch.setattr(_Failpoint, "_loaded", None)
    for key in ("TOOLSWAP_FAILPOINT", "TOOLSWAP_FAILPOINT_MODE"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    (tmp_path / "s").mkdir()
    code, _, err = _run(["journal", "verify", "--session", str(tmp_path / "s")], capsys)
    assert code == 2 and named in err and err.count("\n") == 1


# -- issue 14 item 9: argparse errors, --json errors, version ------------------------


def test_an_argparse_error_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["gc", "plan", "--max-deletions", "many"], capsys)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "invalid int value: 'many'" in err and "usage:" not in err


def test_a_negative_ttl_says_what_is_wrong(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "s").mkdir()
    code, _, err = _run(["gc", "plan", "--ttl", "-1s", "--session", str(tmp_path / "s")], capsys)
    assert code == 2 and "invalid --ttl '-1s': a duration cannot be negative" in err


def test_under_json_an_error_is_also_a_json_document(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "typo")
    code, out, err = _run(["journal", "verify", "--session", missing, "--json"], capsys)
    assert code == 2 and err.count("\n") == 1
    assert json.loads(out) == {
        "ok": False,
        "error": f"no session folder at {missing} (it does not exist)",
        "kind": "usage",
        "exit_status": 2,
    }
    code, out, _ = _run(["gc", "plan", "--max-deletions", "x", "--json"], capsys)
    assert code == 2 and json.loads(out)["kind"] == "usage"


def test_version_and_python_dash_m(tmp_path: pathlib.Path) -> None:
    from importlib.metadata import version

    done = subprocess.run(
        [sys.executable, "-m", "toolswap", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert (done.returncode, done.stdout) == (0, f"toolswap {version('toolswap')}\n")
    done = subprocess.run(
        [sys.executable, "-m", "toolswap", "gc", "plan", "--session", str(tmp_path / "no")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "Traceback" not in done.stderr
