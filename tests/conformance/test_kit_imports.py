"""The kit ships in the package and imports Hypothesis only where drawn examples run.

Hypothesis is an optional dependency (the ``testing`` extra): without it the
sentence checks run their fixed examples and say so, and the deep harnesses
that need it are skipped with the reason, never an error.
"""

from __future__ import annotations

import subprocess
import sys

_NO_HYPOTHESIS = "import sys\nsys.modules['hypothesis'] = None  # as if it were not installed\n"


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return done.stdout


def _modules_after(code: str) -> set[str]:
    return set(_run(f"{code}\nimport sys\nprint(' '.join(sorted(sys.modules)))").split())


def test_importing_the_kit_and_the_reference_harnesses_does_not_import_hypothesis() -> None:
    loaded = _modules_after(
        "import toolswap.testing, toolswap.owners.sqlite, toolswap.owners.memory\n"
        "from toolswap.testing import checks_named\nchecks_named(None)"
    )
    assert "toolswap.testing.registry" in loaded
    assert not any(name == "hypothesis" or name.startswith("hypothesis.") for name in loaded)


def test_sentence_checks_without_drawn_examples_do_not_import_hypothesis() -> None:
    loaded = _modules_after(
        "from toolswap.testing import run_conformance\n"
        "from toolswap.testing.options import RunOptions\n"
        "from toolswap.owners.memory import InMemoryHarness\n"
        "assert run_conformance(\n"
        "    InMemoryHarness, checks=['O1', 'ROW'], options=RunOptions(examples=0)\n"
        ").passed"
    )
    assert "toolswap.testing.checks_rows" in loaded
    assert "hypothesis" not in loaded


def test_the_model_machine_and_drawn_examples_are_where_hypothesis_comes_in() -> None:
    assert "hypothesis" in _modules_after("import toolswap.testing.machine")
    assert "hypothesis" in _modules_after("import toolswap.testing.generate")


def test_without_hypothesis_the_kit_runs_fixed_examples_and_skips_the_machines() -> None:
    out = _run(
        _NO_HYPOTHESIS + "from toolswap.testing import run_conformance\n"
        "from toolswap.owners.memory import InMemoryHarness\n"
        "report = run_conformance(\n"
        "    InMemoryHarness, checks=['O1.publish-visible-to-next-fence', 'MODEL', 'DEEP']\n"
        ")\n"
        "for r in report.results:\n"
        "    print(r.check_id, r.outcome, r.message, sep=' | ')\n"
        "print('passed', report.passed)\n"
    )
    rows = {line.split(" | ")[0]: line.split(" | ")[1:] for line in out.splitlines()[:-1]}
    assert rows["O1.publish-visible-to-next-fence"][0] == "pass"
    assert "Hypothesis is not installed" in rows["O1.publish-visible-to-next-fence"][1]
    for machine in ("MODEL.owner-machine", "DEEP.protocol-machine"):
        assert rows[machine][0] == "skip" and "needs Hypothesis" in rows[machine][1], rows
    assert rows["DEEP.crash-explorer"][0] == "pass"
    assert out.splitlines()[-1] == "passed True"
