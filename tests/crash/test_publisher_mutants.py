"""Issue 18 explorer items 3, 4 and 8: the publisher's and prepare's mistakes, and raw cleanup.

Four implementation mutants, each killed by its invariant in the crash
explorer while the unmutated code passes the same scenarios:

* ``uncertain_error_aborts`` (S3): publish_reference's ``except`` clause takes a
  timeout or a lost ack for a rejection and appends ABORTED with no tombstone;
* ``replay_transaction_id`` (S1): a restarted publisher sends an id the journal
  holds; after a rejection no tombstone refuses it and ABORTED protects nothing;
* ``prepare_skips_checks`` (S1): prepare appends PREPARED without re-checking
  the artifact under the lock, so a file GC deleted gets a published reference;
* ``raw_cleanup_bypasses_journal`` (S1): raw-claims cleanup runs beside a lease
  journal and deletes what a PREPARED lease protects.

Each test names the decision the real code makes (the refusal) and shows the
mutant losing it.  test_mutants.py runs the same mutants in the full matrix.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from toolswap.faultinject.explorer import (
    STANDARD_SCENARIOS,
    Target,
    World,
    run_state,
    scenario_named,
)
from toolswap.faultinject.mutants import KillMatrix, Mutant, kill_matrix, mutant_named
from toolswap.spec.lease import LeaseState

from toolswap.cleanup import JournalRequiredError
from toolswap.journal import (
    ArtifactRetentionJournal,
    DanglingReferenceError,
    TransactionExistsError,
)

NEW_MUTANTS = {
    "uncertain_error_aborts": "S3",
    "replay_transaction_id": "S1",
    "prepare_skips_checks": "S1",
    "raw_cleanup_bypasses_journal": "S1",
}
NEW_SCENARIOS = ("publish_replayed_after_restart", "publish_after_gc", "raw_gc_with_journal")
KNOWN = ("S6.reuse",)  # the explorer's known finding, as in test_mutants.py


@pytest.fixture(scope="module")
def matrix() -> KillMatrix:
    return kill_matrix([mutant_named(n) for n in NEW_MUTANTS], ignore=KNOWN)


def _end(name: str) -> list[str]:
    violations, _, _ = run_state(scenario_named(name), Target("end"), "drop")
    return [f"{v.invariant}: {v.detail}" for v in violations]


def _target(mutant: Mutant) -> tuple[Any, str]:
    owner_name, _, attribute = mutant.target.rpartition(".")
    module_name, _, class_name = owner_name.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), class_name), attribute
    except (ImportError, AttributeError):
        return importlib.import_module(owner_name), attribute


# -- the matrix: clean without the mutants, each killed by its invariant -----------------------


def test_the_new_scenarios_are_standard_ones() -> None:
    assert set(NEW_SCENARIOS) <= {s.name for s in STANDARD_SCENARIOS}


@pytest.mark.parametrize(("name", "invariant"), NEW_MUTANTS.items())
def test_the_mutant_is_listed_with_its_invariant_and_label(name: str, invariant: str) -> None:
    mutant = mutant_named(name)
    assert mutant.invariant == invariant
    assert mutant_named(name.replace("_", "-")) is mutant


def test_the_unmutated_code_passes_every_crash_state_of_their_scenarios(
    matrix: KillMatrix,
) -> None:
    assert set(matrix.baseline.per_scenario) >= set(NEW_SCENARIOS)
    assert all(matrix.baseline.per_scenario[n] > 10 for n in NEW_SCENARIOS)
    assert matrix.baseline.violations == [], matrix.baseline.violations[:3]
    assert matrix.baseline.progress == [], matrix.baseline.progress[:3]


@pytest.mark.parametrize("name", NEW_MUTANTS)
def test_the_mutant_is_killed_by_its_invariant_in_every_scenario(
    matrix: KillMatrix, name: str
) -> None:
    result = next(r for r in matrix.results if r.mutant.name == name)
    assert result.killed, result.to_dict()
    assert result.first is not None
    assert result.first.invariant.split(".")[0] == result.mutant.invariant
    assert all(count > 0 for count in result.violations_by_scenario.values()), result.to_dict()


@pytest.mark.parametrize("name", NEW_MUTANTS)
def test_a_mutant_whose_target_is_gone_fails_loudly(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    mutant = mutant_named(name)
    owner, attribute = _target(mutant)
    monkeypatch.delattr(owner, attribute)
    with pytest.raises(AttributeError, match="no longer exists"), mutant.active():
        pass  # pragma: no cover - never entered
    with mutant_named("counter_overwrites").active():  # ... and it is not left active
        pass


# -- item 3: an uncertain error is not a rejection -----------------------------------------------


def _publish_with_lost_ack(world: World) -> None:
    world.arm("lost_ack")
    with pytest.raises(ConnectionError):  # the caller sees the owner's own error either way
        world.publish(world.externalize(), "t1")


def test_after_a_lost_ack_the_real_publisher_leaves_the_lease_prepared() -> None:
    world = World()
    _publish_with_lost_ack(world)
    assert world.journal.recover().states["t1"] is LeaseState.PREPARED


def test_the_uncertain_error_mutant_aborts_after_a_lost_ack() -> None:
    world = World()
    with mutant_named("uncertain_error_aborts").active():
        _publish_with_lost_ack(world)
    assert world.journal.recover().states["t1"] is LeaseState.ABORTED
    assert world.owner.view(["t1"]).visible()  # the write the ack was lost for landed


def test_aborting_on_a_lost_ack_is_s3_at_the_end_state() -> None:
    with mutant_named("uncertain_error_aborts").active():
        violations = _end("publish_uncertain_after_write")
    assert "S3: t2 is ABORTED but the owner has no durable tombstone for it" in violations


# -- item 4: a transaction id is sent once ------------------------------------------------------


def test_the_journal_refuses_a_replayed_id_before_the_owner_is_called() -> None:
    world = World()
    scenario = scenario_named("publish_replayed_after_restart")
    scenario.setup(world)
    with pytest.raises(TransactionExistsError):
        scenario.run(world)
    assert world.owner.changes == 1  # the rejected first send only
    assert not world.owner.view(["t2"]).visible()
    assert world.journal.recover().states["t2"] is LeaseState.ABORTED


def test_a_replayed_id_lands_under_an_aborted_lease_and_gc_deletes_its_file() -> None:
    with mutant_named("replay_transaction_id").active():
        violations = _end("publish_replayed_after_restart")
    assert "S1: tool_result_001.txt is deleted while t2's reference to it is visible" in violations
    assert "S3.buried: t2 is ABORTED after the owner acknowledged its publish" in violations


# -- item 8a: prepare checks the artifact under the lock -----------------------------------------


def test_prepare_refuses_to_publish_a_file_that_gc_deleted() -> None:
    world = World()
    scenario = scenario_named("publish_after_gc")
    scenario.setup(world)
    with pytest.raises(DanglingReferenceError):
        scenario.run(world)
    assert "t1" not in world.journal.recover().states
    assert not world.owner.view(["t1"]).visible()


def test_without_its_checks_prepare_publishes_a_dangling_reference() -> None:
    with mutant_named("prepare_skips_checks").active():
        violations = _end("publish_after_gc")
    assert violations == [
        "S1: tool_result_001.txt is deleted while t1's reference to it is visible"
    ]


# -- item 8b: raw-claims cleanup next to a lease journal ---------------------------------------


def test_raw_cleanup_refuses_while_the_session_has_a_journal_and_deletes_nothing() -> None:
    world = World()
    scenario = scenario_named("raw_gc_with_journal")
    scenario.setup(world)
    world.disk.io_log = []
    with pytest.raises(JournalRequiredError):
        scenario.run(world)
    assert not any(op == "unlink" for op, _ in world.disk.io_log)


def test_raw_cleanup_past_the_journal_deletes_what_a_prepared_lease_protects() -> None:
    with mutant_named("raw_cleanup_bypasses_journal").active():
        violations = _end("raw_gc_with_journal")
    may_land = "t2's reference may still become visible"
    assert f"S1: unlinking: tool_result_002.txt is deleted while {may_land}" in violations


def test_a_swap_refuses_a_target_that_is_only_inherited() -> None:
    # patching a subclass's inherited method would shadow it, not replace it
    from toolswap.faultinject.mutants import swap

    class Child(ArtifactRetentionJournal):
        pass

    with pytest.raises(AttributeError, match="no longer exists"), swap(Child, "prepare", None):
        pass  # pragma: no cover
    assert "prepare" not in vars(Child)


def test_a_swap_puts_the_original_back_even_on_an_error() -> None:
    from toolswap.faultinject.mutants import swap

    original = vars(ArtifactRetentionJournal)["prepare"]
    with pytest.raises(RuntimeError), swap(ArtifactRetentionJournal, "prepare", None):
        assert vars(ArtifactRetentionJournal)["prepare"] is None
        raise RuntimeError("mid-mutant")
    assert vars(ArtifactRetentionJournal)["prepare"] is original
