"""The pytest plugin: conformance checks as pytest items, from an option or a base class."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

from toolswap.testing import checks_named

ROOT = Path(__file__).resolve().parents[2]
H = "tests.conformance._harnesses"


def _pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfsx", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_option_makes_one_item_per_check_and_junit_lists_them(tmp_path: Path) -> None:
    done = _pytest(
        tmp_path, "--toolswap-owner", "sqlite", "--toolswap-check", "O4", "--junitxml", "out.xml"
    )
    ids = [c.id for c in checks_named(["O4"])]
    assert done.returncode == 0, done.stdout
    assert f"{len(ids)} passed" in done.stdout
    names = [c.get("name") for c in ET.parse(tmp_path / "out.xml").getroot().iter("testcase")]
    assert names == ids


def test_the_option_runs_the_kit_alone_not_the_projects_own_tests(tmp_path: Path) -> None:
    (tmp_path / "test_project.py").write_text("def test_mine():\n    raise AssertionError\n")
    done = _pytest(
        tmp_path,
        "--toolswap-owner",
        "memory",
        "--toolswap-check",
        "O1.publish-visible-to-next-fence",
    )
    assert done.returncode == 0, done.stdout
    assert "1 passed, 1 deselected" in done.stdout


def test_a_broken_adapter_fails_the_item_of_its_promise(tmp_path: Path) -> None:
    done = _pytest(
        tmp_path, "--toolswap-owner", f"{H}:DeletingRemoveHarness", "--toolswap-check", "O4"
    )
    assert done.returncode == 1
    assert "FAILED toolswap-conformance::O4.remove-leaves-tombstone " in done.stdout
    assert "FAILED toolswap-conformance::O4.remove-hides-reference " not in done.stdout


def test_the_base_class_runs_in_an_adopters_test_file_and_skips_show_reasons(
    tmp_path: Path,
) -> None:
    (tmp_path / "test_my_owner.py").write_text(
        textwrap.dedent(
            """
            from toolswap.owners.memory import InMemoryHarness
            from toolswap.testing.pytest_plugin import OwnerConformanceTests


            class TestMemoryOwner(OwnerConformanceTests):
                harness = InMemoryHarness
                checks = ["O1"]
            """
        )
    )
    done = _pytest(tmp_path)
    assert done.returncode == 0, done.stdout
    assert "SKIPPED" in done.stdout and "the in-memory store lives in one process" in done.stdout
    assert "passed" in done.stdout


def test_a_known_failure_is_a_strict_xfail(tmp_path: Path) -> None:
    (tmp_path / "test_known.py").write_text(
        textwrap.dedent(
            f"""
            from {H} import KnownBrokenHarness, WronglyKnownHarness
            from toolswap.testing.pytest_plugin import OwnerConformanceTests


            class TestKnown(OwnerConformanceTests):
                harness = KnownBrokenHarness
                checks = ["O4.remove-leaves-tombstone"]


            class TestWronglyKnown(OwnerConformanceTests):
                harness = WronglyKnownHarness
                checks = ["O1.publish-visible-to-next-fence"]
            """
        )
    )
    done = _pytest(tmp_path)
    assert "1 xfailed" in done.stdout
    assert "[XPASS(strict)]" in done.stdout and done.returncode == 1


def test_an_unusable_harness_given_by_option_is_one_usage_error(tmp_path: Path) -> None:
    done = _pytest(tmp_path, "--toolswap-owner", f"{H}:SharedHandleHarness")
    assert done.returncode == 4
    assert "returned the same object twice" in done.stderr


def test_without_the_option_or_a_subclass_the_plugin_adds_nothing(tmp_path: Path) -> None:
    (tmp_path / "test_plain.py").write_text("def test_one():\n    assert True\n")
    done = _pytest(tmp_path)
    assert "1 passed" in done.stdout and "conformance" not in done.stdout
