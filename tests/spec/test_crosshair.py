"""CrossHair finds no counterexample to the spec's contracts, and does find one in a mutant.

Run alone with ``pytest tests/spec -m crosshair``.
"""

from __future__ import annotations

import pathlib
import shutil

import pytest
import toolswap.spec

from ._crosshair import SPEC_GROUPS, crosshair_check

pytestmark = pytest.mark.crosshair

SPEC_DIR = pathlib.Path(toolswap.spec.__file__).parent


def test_the_spec_contracts_hold() -> None:
    groups = [[f"toolswap.spec.{m}" for m in group] for group in SPEC_GROUPS]
    result = crosshair_check(*groups)
    assert result.counterexamples == [], result.stdout
    assert result.returncode == 0, result.stdout + result.stderr


def _mutant(tmp_path: pathlib.Path, module: str, old: str, new: str) -> str:
    """A copy of spec/ as package ``mutantspec`` with one line of ``module`` changed."""
    package = tmp_path / "mutantspec"
    shutil.copytree(SPEC_DIR, package, ignore=shutil.ignore_patterns("__pycache__", "*.md"))
    target = package / f"{module}.py"
    source = target.read_text(encoding="utf-8")
    assert source.count(old) == 1, f"the mutation no longer applies to {module}.py"
    target.write_text(source.replace(old, new), encoding="utf-8")
    return f"mutantspec.{module}"


@pytest.mark.parametrize(
    ("module", "old", "new"),
    [
        # the owner forgets that every applied change advances the generation (ABA)
        ("owner", "generation=record.generation + 1", "generation=record.generation + 2"),
        # reconciliation treats an UNKNOWN answer as absent and aborts
        (
            "reconcile",
            "(LeaseState.PREPARED, _K.UNKNOWN): Decision(False, None, _St.PENDING_UNKNOWN)",
            "(LeaseState.PREPARED, _K.UNKNOWN): Decision(False, LeaseAction.ABORT, _St.ABORTED)",
        ),
    ],
    ids=["owner-generation", "reconcile-unknown-aborts"],
)
def test_the_same_runner_flags_a_broken_contract(
    tmp_path: pathlib.Path, module: str, old: str, new: str
) -> None:
    target = _mutant(tmp_path, module, old, new)
    result = crosshair_check([target], path=tmp_path)
    found = result.counterexamples
    assert result.returncode == 1, result.stdout + result.stderr
    assert found and all(f"{module}.py" in line for line in found)
