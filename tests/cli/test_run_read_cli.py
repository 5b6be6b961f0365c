"""``toolswap run`` and ``toolswap read`` as a user sees them."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from toolswap.cli import main

BIG = (
    "import sys\n"
    "for i in range(40000): print('ERROR in the middle' if i == 20000 else f'row {i} ok')"
)


def _toolswap(
    *args: str, cwd: pathlib.Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolswap.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


def test_small_output_passes_through_and_keeps_the_exit_code(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "run",
            "--session",
            str(tmp_path / "s"),
            "--",
            sys.executable,
            "-c",
            "print('hi'); raise SystemExit(3)",
        ]
    )
    assert (code, capsys.readouterr().out) == (3, "hi\n")
    assert not (tmp_path / "s" / "tool-results").exists()


def test_stderr_is_combined_with_stdout(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "run",
            "--session",
            str(tmp_path / "s"),
            "--",
            sys.executable,
            "-c",
            "import sys; print('out', flush=True); print('err', file=sys.stderr)",
        ]
    )
    assert code == 0 and capsys.readouterr().out == "out\nerr\n"


def test_large_output_prints_a_pointer_and_read_pages_it_back(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = str(tmp_path / "s")
    assert main(["run", "--session", session, "--", sys.executable, "-c", BIG]) == 0
    pointer = capsys.readouterr().out
    assert "\n20000: ERROR in the middle\n" in pointer  # a notable line, at its offset
    command = re.search(r"`toolswap read (\S+) --offset (\d+)`", pointer)
    assert command is not None
    args = ["read", command[1], "--session", session, "--offset", command[2]]
    assert main(args) == 0
    page = capsys.readouterr().out
    trailer = page.splitlines()[-1]
    assert trailer.startswith(f"[toolswap] lines {command[2]}-") and "--offset" in trailer
    assert len(page.encode()) <= 24 * 1024 + 512
    assert main(["read", command[1], "--session", session, "--offset", "20000", "--raw"]) == 0
    assert capsys.readouterr().out.startswith("ERROR in the middle\n")


def test_run_json_describes_the_artifact(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["run", "--json", "--session", str(tmp_path / "s"), "--", sys.executable, "-c", BIG])
        == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert doc["externalized"] and doc["exit_code"] == 0
    assert doc["artifact"]["source"]["source_id"].startswith("artifact:s:tool_result_001.txt:")


def test_read_json_returns_the_text(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = str(tmp_path / "s")
    main(["run", "--json", "--session", session, "--", sys.executable, "-c", BIG])
    sid = json.loads(capsys.readouterr().out)["artifact"]["source"]["source_id"]
    assert main(["read", sid, "--json", "--session", session, "--offset", "5", "--limit", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["text"] == "row 5 ok\n"


def test_the_session_defaults_to_the_environment_variable(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLSWAP_SESSION_DIR", str(tmp_path / "envsess"))
    main(["run", "--", sys.executable, "-c", BIG])
    assert (tmp_path / "envsess" / "tool-results" / "tool_result_001.txt").exists()


@pytest.mark.parametrize(
    "args,env,pattern",
    [
        (["read", "artifact:s:../../etc/passwd:0123456789ab"], {}, "invalid source id"),
        (["read", "artifact:s:tool_result_009.txt:0123456789ab"], {}, "does not exist"),
        (["read", "artifact:s:tool_result_001.txt:0123456789ab", "--offset", "-1"], {}, "offset"),
        (
            ["run", "--", sys.executable, "-c", "print(1)"],
            {"BASH_MAX_OUTPUT_LENGTH": "many"},
            "BASH_MAX_OUTPUT_LENGTH",
        ),
        (["run"], {}, "no command"),
    ],
)
def test_errors_are_one_line_on_stderr_without_a_traceback(
    tmp_path: pathlib.Path, args: list[str], env: dict[str, str], pattern: str
) -> None:
    (tmp_path / "s").mkdir()
    done = _toolswap(args[0], "--session", str(tmp_path / "s"), *args[1:], cwd=tmp_path, env=env)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert re.search(pattern, done.stderr)


def test_a_missing_command_exits_127_with_one_line(tmp_path: pathlib.Path) -> None:
    done = _toolswap(
        "run", "--session", str(tmp_path / "s"), "--", "no-such-command-xyz", cwd=tmp_path
    )
    assert (
        done.returncode == 127
        and done.stderr.strip() == "toolswap: error: command not found: no-such-command-xyz"
    )


def test_a_tampered_artifact_is_refused_by_read(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = tmp_path / "s"
    main(["run", "--json", "--session", str(session), "--", sys.executable, "-c", BIG])
    sid = json.loads(capsys.readouterr().out)["artifact"]["source"]["source_id"]
    path = session / "tool-results" / "tool_result_001.txt"
    path.write_bytes(path.read_bytes().replace(b"row 7 ok", b"row 7 OK"))
    done = _toolswap("read", sid, "--session", str(session), cwd=tmp_path)
    assert done.returncode == 2 and "digest" in done.stderr


@pytest.mark.slow
def test_a_100_mb_output_keeps_toolswap_far_below_100_mb_of_memory(tmp_path: pathlib.Path) -> None:
    done = _toolswap(
        "run",
        "--json",
        "--session",
        str(tmp_path / "s"),
        "--",
        sys.executable,
        "-c",
        "print('x' * 10**8)",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["artifact"]["size_bytes"] == 10**8 + 1
    assert doc["toolswap_peak_rss_kib"] < 60 * 1024
