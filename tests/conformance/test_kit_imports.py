"""The kit ships in the package and imports Hypothesis only where the model-based machine runs."""

from __future__ import annotations

import subprocess
import sys


def _modules_after(code: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys\nprint(' '.join(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return set(done.stdout.split())


def test_importing_the_kit_and_the_reference_harnesses_does_not_import_hypothesis() -> None:
    loaded = _modules_after(
        "import toolswap.testing, toolswap.owners.sqlite, toolswap.owners.memory\n"
        "from toolswap.testing import checks_named\nchecks_named(None)"
    )
    assert "toolswap.testing.registry" in loaded
    assert not any(name == "hypothesis" or name.startswith("hypothesis.") for name in loaded)


def test_running_the_sentence_checks_does_not_import_hypothesis() -> None:
    loaded = _modules_after(
        "from toolswap.testing import run_conformance\n"
        "from toolswap.owners.memory import InMemoryHarness\n"
        "assert run_conformance(InMemoryHarness, checks=['O1', 'ROW']).passed"
    )
    assert "toolswap.testing.checks_rows" in loaded
    assert "hypothesis" not in loaded


def test_the_model_machine_is_where_hypothesis_comes_in() -> None:
    assert "hypothesis" in _modules_after("import toolswap.testing.machine")
