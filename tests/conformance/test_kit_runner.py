"""Runner controls and messages: seeds, replay files, time limits, exits, exclusions, secrets.

Claims
======

* A harness that never returns (constructor or ``open_owner``, before or
  inside a check) fails with one line after ``--check-timeout``, and the
  command ends: it never hangs.
* Nothing a harness does to end the process makes the command exit 0.
* ``--seed`` reproduces a run's drawn cases; ``--failures`` writes one
  replay file per failing check; ``--replay`` runs exactly that case again
  (also against another harness, which then passes when it is fixed); the
  pytest plugin collects a committed replay file as a test.
* The pytest plugin gives the command's verdicts.
* ``--exclude`` leaves checks out; a misspelled known failure names the
  nearest id; a constructor's error that may carry a secret shows only its
  type; a model-machine failure leads with the owner's failing step and shows
  no absolute path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import attrs
import pytest

from toolswap.owners.memory import InMemoryHarness
from toolswap.testing import checks_named, run_conformance
from toolswap.testing.options import RunOptions

ROOT = Path(__file__).resolve().parents[2]
H = "tests.conformance._harnesses"
URL = "tests.conformance.broken.drawn_ids:UnquotedUrlIdsHarness"
KEYED = "O1.publish-keyed-by-exact-id"
SEARCH = ("--seed", "0", "--examples", "20", "--budget", "60")


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYTEST_ADDOPTS", None)
    return env


def _run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolswap.cli", "conformance", *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


def _pytest(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfsx", *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("toolswap: error: "), done.stderr
    return lines[0]


# -- a harness that hangs or ends the process ------------------------------------------------


@pytest.mark.parametrize("harness", ["HangingConstructorHarness", "HangingOpenHarness"])
def test_a_harness_that_never_returns_fails_with_one_line_after_the_check_timeout(
    harness: str,
) -> None:
    started = time.monotonic()
    done = _run(f"{H}:{harness}", "--check", "O1", "--check-timeout", "2")
    assert done.returncode == 2
    assert "did not return within 2 s" in _one_line(done)
    assert time.monotonic() - started < 30


def test_a_check_that_never_returns_fails_its_row_and_the_command_ends() -> None:
    started = time.monotonic()
    done = _run(
        f"{H}:LateHangingHarness",
        "--check",
        "O1.publish-visible-to-next-fence",
        "--check-timeout",
        "2",
        "--json",
    )
    assert done.returncode == 1
    result = json.loads(done.stdout)["results"][0]
    assert result["outcome"] == "fail" and result["message"].startswith("did not finish within 2 s")
    assert time.monotonic() - started < 30


@pytest.mark.parametrize(
    ("harness", "says"),
    [
        (f"{H}:ExitingOpenHarness", "tried to end the process (SystemExit(0))"),
        (f"{H}:HardExitOpenHarness", "tried to end the process (os._exit(0))"),
        ("tests.conformance._exits_on_import:Harness", "tried to exit the process"),
    ],
)
def test_a_harness_that_ends_the_process_never_reads_as_conforming(harness: str, says: str) -> None:
    done = _run(harness, "--check", "O1")
    assert done.returncode == 2
    assert says in _one_line(done)


def test_a_process_exit_inside_a_check_fails_that_check() -> None:
    done = _run(f"{H}:LateHardExitHarness", "--check", "O1.publish-visible-to-next-fence", "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    result = json.loads(done.stdout)["results"][0]
    assert result["outcome"] == "fail" and "os._exit(0)" in result["message"]


def test_a_report_missing_a_chosen_check_does_not_pass(tmp_path: Path) -> None:
    report = run_conformance(
        InMemoryHarness,
        workroot=tmp_path,
        checks=["O1.publish-visible-to-next-fence"],
        options=RunOptions(examples=0),
    )
    assert report.passed
    assert not attrs.evolve(report, chosen=2).passed


# -- seeds, replay files and the pytest plugin ------------------------------------------------


def test_a_seed_draws_the_same_cases_again() -> None:
    first = _run(URL, "--check", KEYED, *SEARCH, "--json")
    again = _run(URL, "--check", KEYED, *SEARCH, "--json")
    assert first.returncode == again.returncode == 1, first.stdout + first.stderr
    messages = [json.loads(d.stdout)["results"][0]["message"] for d in (first, again)]
    assert "shrunk case: " in messages[0] and messages[0] == messages[1]


def test_failures_write_a_replay_file_that_replays_the_case_and_passes_once_fixed(
    tmp_path: Path,
) -> None:
    failures = tmp_path / "failures"
    done = _run(URL, "--check", KEYED, *SEARCH, "--failures", str(failures), "--json")
    assert done.returncode == 1
    result = json.loads(done.stdout)["results"][0]
    files = sorted(failures.iterdir())
    assert [str(f) for f in files] == [result["replay"]]
    assert files[0].name.startswith(f"toolswap-replay-{KEYED}-")
    replayed = _run("--replay", str(files[0]), "--json")  # the file names the harness
    assert replayed.returncode == 1
    again = json.loads(replayed.stdout)["results"][0]
    assert again["message"].splitlines()[0] == result["message"].splitlines()[0]
    fixed = _run("memory", "--replay", str(files[0]), "--json")
    assert fixed.returncode == 0, fixed.stdout
    assert json.loads(fixed.stdout)["results"][0]["check_id"] == KEYED


def test_the_pytest_plugin_collects_a_committed_replay_file(tmp_path: Path) -> None:
    _run(URL, "--check", KEYED, *SEARCH, "--failures", str(tmp_path))
    [replay] = list(tmp_path.glob("toolswap-replay-*.json"))
    broken = _pytest(tmp_path)
    assert broken.returncode == 1 and f"FAILED {replay.name}::{KEYED}" in broken.stdout
    fixed = _pytest(tmp_path, "--toolswap-owner", "memory", "--toolswap-check", KEYED)
    assert fixed.returncode == 0 and "2 passed" in fixed.stdout, fixed.stdout  # check and replay


def test_the_pytest_plugin_gives_the_commands_verdicts(tmp_path: Path) -> None:
    harness = f"{H}:DeletingRemoveHarness"
    options = ("--check", "O4", "--seed", "3", "--examples", "2", "--budget", "0.3")
    command = _run(harness, *options, "--json")
    verdicts = {r["check_id"]: r["outcome"] for r in json.loads(command.stdout)["results"]}
    plugin = _pytest(
        tmp_path,
        "--toolswap-owner",
        harness,
        *(f"--toolswap-{o[2:]}" if o.startswith("--") else o for o in options),
        "--junitxml",
        "out.xml",
    )
    assert plugin.returncode == command.returncode == 1
    cases = ET.parse(tmp_path / "out.xml").getroot().iter("testcase")
    seen = {c.get("name"): "fail" if c.find("failure") is not None else "pass" for c in cases}
    assert seen == verdicts


# -- runner controls and messages ------------------------------------------------------


def test_exclude_leaves_checks_out(capsys: pytest.CaptureFixture[str]) -> None:
    from toolswap.cli import main

    out = [
        "--check",
        "O4",
        "--exclude",
        "O4.remove-durable-*",
        "--exclude",
        "O4.remove-is-idempotent",
    ]
    assert main(["conformance", "--list", *out]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed and not any(i.startswith("O4.remove-durable-") for i in listed)
    assert set(listed) == {c.id for c in checks_named(["O4"])} - {
        c.id for c in checks_named(["O4.remove-durable-*", "O4.remove-is-idempotent"])
    }


def test_a_misspelled_known_failure_names_the_nearest_id() -> None:
    done = _run(f"{H}:NearTypoKnownHarness", "--check", "O1")
    assert done.returncode == 2
    assert "did you mean 'O1.publish-visible-to-next-fence'?" in _one_line(done)


def test_a_constructor_error_that_may_carry_a_secret_shows_only_its_type() -> None:
    done = _run(f"{H}:SecretInitHarness", "--check", "O1")
    line = _one_line(done)
    assert done.returncode == 2 and "building it failed (RuntimeError;" in line
    assert "may carry a secret" in line and "hunter2" not in done.stdout + done.stderr


def test_a_model_machine_failure_leads_with_the_failing_step_and_shows_no_path(
    tmp_path: Path,
) -> None:
    from .test_owner_machine import DeletingRemoveHarness

    report = run_conformance(
        DeletingRemoveHarness,
        workroot=tmp_path,
        checks=["MODEL.owner-machine"],
        options=RunOptions(seed=20261204, model_budget=0),
    )
    message = report.result("MODEL.owner-machine").message
    lines = message.splitlines()
    assert lines[0].startswith("owner machine on DeletingRemoveHarness: FAILED")
    assert lines[1].startswith("OwnerMachineFailure: "), message
    assert "Flaky" not in lines[0] + lines[1]
    assert str(tmp_path) not in message and "/tmp/" not in message


def test_without_a_clock_time_passes_for_real_only_with_slow(tmp_path: Path) -> None:
    from ._harnesses import NoClockHarness

    check = "O1.publish-durable-after-time-passes"
    quick = run_conformance(
        NoClockHarness, workroot=tmp_path / "a", checks=[check], options=RunOptions(examples=0)
    ).result(check)
    assert quick.outcome == "skip" and "--slow" in quick.message
    slow = run_conformance(
        NoClockHarness,
        workroot=tmp_path / "b",
        checks=[check],
        options=RunOptions(examples=0, slow=True, fixed=("plain",)),
    ).result(check)
    assert slow.outcome == "pass" and "passed for real" in slow.message, slow.message


def test_a_stuck_check_leaves_the_exit_code_to_the_verdict() -> None:
    done = _run(
        f"{H}:LateHangingHarness",
        "--check",
        "O1.publish-visible-to-next-fence",
        "--check-timeout",
        "2",
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr and "HarnessExit" not in done.stderr, done.stderr
