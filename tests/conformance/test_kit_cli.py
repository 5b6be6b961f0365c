"""``toolswap conformance``: the compliance table, its reports, and one-line harness errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from toolswap.cli import main
from toolswap.testing import checks_named

ROOT = Path(__file__).resolve().parents[2]
H = "tests.conformance._harnesses"


def _run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "toolswap.cli", "conformance", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_sqlite_owner_conforms_and_the_json_report_says_so() -> None:
    done = _run("sqlite", "--check", "O1", "--check", "GEN", "--json", "--examples", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    wanted = {c.id for c in checks_named(["O1", "GEN"])}
    assert {r["check_id"] for r in doc["results"]} == wanted
    assert {r["outcome"] for r in doc["results"]} == {"pass"}
    assert doc["passed"] is True and doc["harness"] == "toolswap.owners.sqlite:SQLiteHarness"


def test_junit_and_markdown_reports_list_every_check(tmp_path: Path) -> None:
    junit, markdown = tmp_path / "kit.xml", tmp_path / "kit.md"
    done = _run(
        "memory", "--check", "O3", "--junit", str(junit), "--markdown", str(markdown), "--quick"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    ids = [c.id for c in checks_named(["O3"])]
    cases = ET.parse(junit).getroot().findall("./testsuite/testcase")
    assert [case.get("name") for case in cases] == ids
    skipped = [case for case in cases if case.find("skipped") is not None]
    assert skipped and all("in-memory" in s.find("skipped").get("message", "") for s in skipped)  # type: ignore[union-attr]
    text = markdown.read_text()
    assert all(f"| `{check_id}` |" in text for check_id in ids)


def test_the_table_names_the_failing_check_and_exits_one() -> None:
    done = _run(f"{H}:DeletingRemoveHarness", "--check", "O4", "--examples", "0")
    assert done.returncode == 1
    rows = {
        line.split()[2]: line.split()[0]
        for line in done.stdout.splitlines()[1:-1]
        if line[:1].isupper() and len(line.split()) > 2
    }
    assert rows["O4.remove-leaves-tombstone"] == "FAIL"
    assert rows["O4.remove-hides-reference"] == "PASS"
    assert "DOES NOT CONFORM" in done.stdout.splitlines()[-1]


def test_a_failure_message_never_shows_the_secret_it_found() -> None:
    done = _run(f"{H}:LeakyHarness", "--check", "O7.errors-reveal-nothing", "--json")
    assert done.returncode == 1
    result = json.loads(done.stdout)["results"][0]
    assert result["outcome"] == "fail"
    assert "reveals one of the harness's secrets()" in result["message"]
    assert "owner.db" not in done.stdout


def test_repeat_runs_each_check_again_on_a_fresh_store() -> None:
    done = _run("sqlite", "--check", "O1.publish-visible-to-next-fence", "--repeat", "3", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["results"][0]["repetitions"] == 3
    table = _run("sqlite", "--check", "O1.publish-visible-to-next-fence", "--repeat", "2")
    assert "each check 2 times" in table.stdout.splitlines()[-1]


def test_what_a_harness_prints_never_reaches_the_json_report() -> None:
    done = _run(f"{H}:PrintingHarness", "--check", "O1.publish-visible-to-next-fence", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["passed"] is True
    assert "hello from the harness" in done.stderr


def test_list_shows_every_check_id_once(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["conformance", "--list"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == [c.id for c in checks_named(None)]


@pytest.mark.parametrize(
    ("harness", "says"),
    [
        ("no_such_module_xyz:Harness", "cannot import module 'no_such_module_xyz'"),
        (f"{H}:Missing", "has no attribute 'Missing'"),
        (
            "toolswap.owners.sqlite:SQLiteOwner",
            "is a class, but not a subclass of toolswap.testing",
        ),
        ("nocolon", "expected module:attr"),
        (f"{H}:WrongTypeHarness", "returned a object, which has no publish() (not an owner)"),
        (f"{H}:SharedHandleHarness", "returned the same object twice"),
        (f"{H}:NotEmptyHarness", "the store does not start empty"),
        (f"{H}:OneStoreHarness", "two work folders share one store"),
        (f"{H}:BrokenInitHarness", "building it failed (RuntimeError: no store configured)"),
        (f"{H}:TypoKnownHarness", "known_failures names no check 'O1.no-such-check'"),
        ("toolswap.testing:OwnerHarness", "open_owner() is not implemented"),
        (f"{H}:RaisingOpenHarness", "open_owner() raised ConnectionError: the store refused"),
    ],
)
def test_an_unusable_harness_is_one_clear_line(harness: str, says: str) -> None:
    done = _run(harness, "--check", "O1")
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("toolswap: error: ")
    assert says in lines[0]
    assert done.stdout == ""


def test_an_unknown_check_id_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["conformance", "sqlite", "--check", "O9.nothing"]) == 2
    assert "no conformance check matches 'O9.nothing'" in capsys.readouterr().err


def test_a_declared_known_failure_is_xfail_and_does_not_fail_the_run() -> None:
    done = _run(f"{H}:KnownBrokenHarness", "--check", "O4.remove-leaves-tombstone", "--json")
    assert done.returncode == 0, done.stdout
    result = json.loads(done.stdout)["results"][0]
    assert result["outcome"] == "xfail" and "rows are deleted" in result["message"]


def test_a_known_failure_that_passes_fails_the_run() -> None:
    done = _run(f"{H}:WronglyKnownHarness", "--check", "O1.publish-visible-to-next-fence")
    assert done.returncode == 1
    assert "XPASS" in done.stdout


def test_a_harness_a_child_cannot_import_skips_the_process_checks_with_a_reason() -> None:
    from toolswap.owners.memory import InMemoryHarness
    from toolswap.testing import Capability, run_conformance

    class Local(InMemoryHarness):
        unsupported = {
            k: v for k, v in InMemoryHarness.unsupported.items() if k != Capability.OTHER_PROCESS
        }

    result = run_conformance(Local, checks=["O1.publish-visible-to-other-process"]).results[0]
    assert result.outcome == "skip"
    assert "a child process cannot import the harness" in result.message
