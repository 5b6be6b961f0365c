"""Issue 18 explorer items 5 and 6 in the crash explorer: the reconciler's fence and its CAS.

* item 5: a publish of another process lands in the reconciler's window
  (``publish_races_reconcile``).  With the fence and the owner's
  compare-and-set it can only land after the seal, and the tombstone refuses
  it.  ``client_side_generation`` (the generation compared on the client,
  the tombstone written with ``remove``) and ``reconcile_without_fence``
  (the fence let go after the read) bury the acknowledged publish under a
  tombstone and ABORT its lease: ``S3.buried``.  The letter of S3 (a
  tombstone before ABORTED) holds for both, so the refinement is what kills
  them.
* item 6: two reconcilers on one PREPARED lease, the second having read it
  PREPARED before the first settled it (``two_reconcilers_absent`` /
  ``_published``): one terminal record (S5).  The second reconciler's
  mistakes are refused by the journal before they write (no mutant in
  ``MUTANTS``: none gets past the append's own fold to an invariant).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest
from toolswap.faultinject.explorer import (
    JOURNAL,
    STANDARD_SCENARIOS,
    CrashExplorer,
    Target,
    World,
    _FirstReconcilerWins,
    _publish_racing_reconcile,
    run_state,
    scenario_named,
)
from toolswap.faultinject.mutants import MUTANTS, kill_matrix, mutant_named
from toolswap.faultinject.observe import journal_records
from toolswap.spec.lease import LeaseState

from toolswap.journal import ArtifactRetentionJournal
from toolswap.owner import ObservedState, ReconcileStatus, ReconciliationReport

NEW = ("publish_races_reconcile", "two_reconcilers_absent", "two_reconcilers_published")
RECONCILER_MUTANTS = ("client_side_generation", "reconcile_without_fence")
BURIED = ("S3.buried", "t2 is ABORTED after the owner acknowledged its publish")


def _end(scenario_name: str, run: Callable[[World], None] | None = None) -> tuple[list, World]:
    scenario = scenario_named(scenario_name)
    if run is not None:
        scenario = attrs.evolve(scenario, run=run)
    violations, _, world = run_state(scenario, Target("end"), "drop")
    return [(v.invariant, v.detail) for v in violations], world


def _phase(world: World, txn: str) -> LeaseState:
    return world.new_journal().recover().states[txn]


def _terminal_records(world: World, txn: str) -> list[str]:
    records = journal_records(world.disk.read_file(JOURNAL))
    return [
        r["phase"]
        for r in records
        if r.get("transaction_id") == txn and r.get("phase") in {"COMMITTED", "ABORTED"}
    ]


@pytest.fixture
def patched(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str, Any], None]]:
    def patch(name: str, replacement: Any) -> None:
        monkeypatch.setattr(ArtifactRetentionJournal, name, replacement)

    yield patch


def test_the_new_scenarios_and_mutants_are_standard_ones() -> None:
    assert set(NEW) <= {s.name for s in STANDARD_SCENARIOS}
    labels = {m.name: m.label for m in MUTANTS}
    assert labels["client_side_generation"] == "client-side-generation"
    assert labels["reconcile_without_fence"] == "reconcile-without-fence"


@pytest.mark.parametrize("name", NEW)
def test_every_crash_state_of_the_new_scenarios_is_clean(name: str) -> None:
    result = CrashExplorer([scenario_named(name)], seeds=1).explore()
    assert result.states > 300
    assert result.violations == [], result.violations[:3]
    assert result.progress == [], result.progress[:3]


# -- item 5: a publish in the reconciler's window --------------------------------------------


def test_the_racing_publish_lands_after_the_seal_and_is_refused() -> None:
    found, world = _end("publish_races_reconcile")
    assert found == []
    assert world.owner.rejected == {"t2"}  # it did land: on the tombstone
    assert world.acknowledged == set()
    assert _phase(world, "t2") is LeaseState.ABORTED


@pytest.mark.parametrize("name", RECONCILER_MUTANTS)
def test_a_reconciler_outside_the_fence_buries_the_publish_at_the_end_state(name: str) -> None:
    with mutant_named(name).active():
        found, world = _end("publish_races_reconcile")
    assert BURIED in found
    assert (
        "S3",
        "t2 is ABORTED but the owner has no durable tombstone for it",
    ) not in found  # S3's letter holds
    assert world.acknowledged == {"t2"}
    assert world.owner.view(["t2"]).tombstoned("t2")


@pytest.mark.parametrize("name", RECONCILER_MUTANTS)
def test_the_kill_matrix_kills_it_by_s3_and_the_real_code_is_clean(name: str) -> None:
    matrix = kill_matrix([mutant_named(name)], modes=["drop"])
    assert matrix.baseline.violations == []
    (result,) = matrix.results
    assert result.killed and result.first is not None
    assert (result.first.invariant, result.first.detail) == BURIED


def test_an_early_publish_is_caught_by_the_client_check_but_buried_without_a_fence() -> None:
    # landing right after the first read: the client's second read sees the generation moved
    early = _publish_racing_reconcile(early=True)
    with mutant_named("client_side_generation").active():
        found, world = _end("publish_races_reconcile", early)
    assert found == [] and _phase(world, "t2") is LeaseState.COMMITTED
    with mutant_named("reconcile_without_fence").active():
        found, _ = _end("publish_races_reconcile", early)
    assert BURIED in found


def test_without_the_fence_the_owner_refuses_a_seal_so_nothing_is_buried(patched: Any) -> None:
    # why reconcile_without_fence tombstones with remove: a seal outside its block is refused
    # (O6), the lease stays pending and the racing publish commits
    def reconcile_reference(
        self: ArtifactRetentionJournal, transaction_id: str, owner: Any, *, now: Any = None
    ) -> ReconciliationReport:
        with owner.inspect_fenced(transaction_id) as observation:
            pass
        report = self._decide(transaction_id, observation, now)
        assert report.status is ReconcileStatus.PENDING_UNKNOWN, report
        return report

    patched("reconcile_reference", reconcile_reference)
    found, world = _end("publish_races_reconcile")
    assert found == []
    assert world.acknowledged == {"t2"} and _phase(world, "t2") is LeaseState.COMMITTED


def test_s3_buried_fires_on_a_tombstone_written_over_an_acknowledged_publish() -> None:
    def run(world: World) -> None:
        claim = world.claim_for(world.refs["tool_result_001.txt"])
        world.claims["t2"] = claim
        world.journal.prepare(claim, "t2")
        world.owner.publish("t2", claim)
        world.acknowledged.add("t2")
        world.owner.remove("t2")  # the tombstone buries the visible reference
        world.journal.abort("t2")

    found, _ = _end("publish_races_reconcile", run)
    assert found == [BURIED]


def test_world_publish_records_what_the_owner_acknowledged() -> None:
    world = World()
    world.publish(world.externalize(), "t1")
    assert world.acknowledged == {"t1"}


# -- item 6: two reconcilers on one transaction ---------------------------------------------------


@pytest.mark.parametrize(
    ("name", "first", "second"),
    [
        ("two_reconcilers_absent", ReconcileStatus.ABORTED, ReconcileStatus.ALREADY_ABORTED),
        ("two_reconcilers_published", ReconcileStatus.COMMITTED, ReconcileStatus.ALREADY_COMMITTED),
    ],
)
def test_the_second_reconciler_decides_inside_the_fence_after_the_first(
    name: str, first: ReconcileStatus, second: ReconcileStatus
) -> None:
    world = World()
    scenario_named(name).setup(world)
    owner = _FirstReconcilerWins(world, world.journal)
    reports = world.new_journal().reconcile_pending(owner)
    assert [r.status for r in owner.reports] == [first]
    assert [r.status for r in reports] == [second]
    assert reports[0].generation is not None  # answered inside its fence, not before it
    assert len(_terminal_records(world, "t1")) == 1


def test_a_second_reconciler_that_skips_the_re_read_appends_nothing(patched: Any) -> None:
    # the phase read before the fence is trusted; the fold under the lock still holds S5
    decide = ArtifactRetentionJournal._decide
    transition = ArtifactRetentionJournal._transition
    real_phase_of = ArtifactRetentionJournal._phase_of
    appends: list[tuple[LeaseState, bool]] = []

    def _decide(self: ArtifactRetentionJournal, txn: str, observation: Any, now: Any) -> Any:
        stale = iter([LeaseState.PREPARED])

        def phase_of(t: str) -> LeaseState:  # the first read inside the fence: the stale phase
            return next(stale, None) or real_phase_of(self, t)

        self.__dict__["_phase_of"] = phase_of
        try:
            return decide(self, txn, observation, now)
        finally:
            del self.__dict__["_phase_of"]

    def _transition(self: ArtifactRetentionJournal, txn: str, target: LeaseState, now: Any) -> Any:
        result = transition(self, txn, target, now)
        appends.append((target, result[1]))
        return result

    patched("_decide", _decide)
    patched("_transition", _transition)
    world = World()
    scenario_named("two_reconcilers_absent").setup(world)
    world.new_journal().reconcile_pending(_FirstReconcilerWins(world, world.journal))
    assert appends == [
        (LeaseState.ABORTED, True),
        (LeaseState.ABORTED, False),
    ]  # the second got there
    assert _terminal_records(world, "t1") == ["ABORTED"]
    result = CrashExplorer([scenario_named("two_reconcilers_absent")], seeds=1).explore()
    assert result.violations == [], result.violations[:3]


def test_appending_abort_on_a_sealed_absence_without_the_fold_is_refused(patched: Any) -> None:
    # the spec's two-reconcilers mistake: the append's own fold check refuses before writing
    decide = ArtifactRetentionJournal._decide

    def _decide(self: ArtifactRetentionJournal, txn: str, observation: Any, now: Any) -> Any:
        if observation.state is ObservedState.ABSENT and observation.sealed:
            with self._locked():
                self._refresh()
                self._append(txn, LeaseState.ABORTED, self._fold.intents[txn], now)
        return decide(self, txn, observation, now)

    patched("_decide", _decide)
    found, world = _end("two_reconcilers_absent")
    assert [invariant for invariant, _ in found] == ["run_error"]
    assert "JournalCorruptError" in found[0][1] and "ABORTED -> ABORTED" in found[0][1]
    assert _terminal_records(world, "t1") == ["ABORTED"]
