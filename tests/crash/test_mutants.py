"""Implementation mutants: the crash explorer kills every one, and the real code is clean."""

from __future__ import annotations

import importlib
import posixpath

import pytest
from toolswap.faultinject.explorer import SESSION, Target, World, run_state, scenario_named
from toolswap.faultinject.mutants import MUTANTS, KillMatrix, Mutant, kill_matrix, mutant_named

# S6.reuse is the explorer's known finding (a name freed by GC is reused); a mutant
# must be killed by its own invariant, so it never counts here.
KNOWN = ("S6.reuse",)


@pytest.fixture(scope="module")
def matrix() -> KillMatrix:
    return kill_matrix(ignore=KNOWN)


def test_the_unmutated_code_is_not_flagged(matrix: KillMatrix) -> None:
    assert matrix.baseline.states > 1000
    assert matrix.baseline.violations == [], matrix.baseline.violations[:5]


@pytest.mark.parametrize("name", [m.name for m in MUTANTS])
def test_each_mutant_is_killed_by_its_invariant(matrix: KillMatrix, name: str) -> None:
    result = next(r for r in matrix.results if r.mutant.name == name)
    assert result.killed, result.to_dict()


@pytest.mark.parametrize("name", [m.name for m in MUTANTS])
def test_the_first_violation_reported_is_of_the_expected_invariant(
    matrix: KillMatrix, name: str
) -> None:
    result = next(r for r in matrix.results if r.mutant.name == name)
    assert result.first is not None
    assert result.first.invariant.split(".")[0] == result.mutant.invariant


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_a_mutant_is_switched_off_again_after_its_block(mutant: Mutant) -> None:
    owner_name, _, attribute = mutant.target.rpartition(".")
    module_name, _, class_name = owner_name.rpartition(".")
    try:
        owner = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError):
        owner = importlib.import_module(owner_name)
    real = vars(owner)[attribute]
    with pytest.raises(ZeroDivisionError), mutant.active():
        assert vars(owner)[attribute] is not real
        raise ZeroDivisionError
    assert vars(owner)[attribute] is real


def test_mutants_do_not_nest() -> None:
    inner = mutant_named("splitlines_journal").active()
    with mutant_named("counter_overwrites").active(), pytest.raises(RuntimeError):
        inner.__enter__()


def test_an_unknown_mutant_name_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        mutant_named("nope")


# -- the explorer gaps the mutants showed ------------------------------------------------------


def test_deleting_a_file_that_a_prepared_lease_protects_is_s1_when_it_happens() -> None:
    world = World()
    ref = world.externalize()
    world.prepare(ref, "t1")
    world.disk.unlink(ref.path)
    assert (
        "S1",
        "unlinking: tool_result_001.txt is deleted while t1's reference may still become visible",
    ) in (world.violations)


def test_deleting_an_orphan_is_not_s1() -> None:
    world = World()
    ref = world.externalize()
    world.disk.unlink(ref.path)
    assert world.violations == []


def test_the_released_scenario_keeps_a_memory_record_naming_a_file_outside() -> None:
    world = World()
    scenario_named("gc_after_release").setup(world)
    assert not posixpath.normpath(world.memory["t3"].artifact_path).startswith(SESSION + "/")


def test_gc_after_release_is_clean_at_its_end_without_a_mutant() -> None:
    violations, _, _ = run_state(scenario_named("gc_after_release"), Target("end"), "drop")
    assert violations == []
