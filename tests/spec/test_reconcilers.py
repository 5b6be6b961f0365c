"""The reconciler's seal is the owner's compare-and-set, and two reconcilers write one ABORTED.

Issue 18, explorer items 5 and 6: checking the generation on the client instead
of a compare-and-set in the owner (``client-side-generation``), and a seal that
answers ``already_sealed`` taken as licence to append ABORTED unfolded
(``two-reconcilers``): a second reconciler (``Bounds.concurrent_reconcilers``)
or, since the owner's removal leaves a tombstone (O4), a removal between the
observation and the seal makes that answer come.
"""

from __future__ import annotations

from collections.abc import Iterator

from toolswap.spec import explorer, variants
from toolswap.spec.actors import FileStatus, PublisherPc, ReconcilerPc
from toolswap.spec.invariants import violations
from toolswap.spec.lease import LeaseState as L
from toolswap.spec.owner import OwnerRecord, OwnerState
from toolswap.spec.system import (
    Bounds,
    FileSlot,
    JournalTxn,
    Mistake,
    Model,
    OwnerSlot,
    Reconciler,
    StepKind,
    SystemState,
)

ONE = Bounds(artifacts=1, transactions=1)
TWO_RECONCILERS = Bounds(artifacts=1, transactions=1, concurrent_reconcilers=True)


def _states(model: Model, depth: int) -> Iterator[SystemState]:
    seen = {model.initial()}
    frontier = list(seen)
    yield from frontier
    for _ in range(depth):
        frontier = [n for s in frontier for _, n in model.successors(s) if n not in seen]
        seen.update(frontier)
        yield from frontier


def _caught(name: str, bounds: Bounds) -> explorer.Violation:
    variant = variants.get(name)
    model = variant.model(bounds)
    v = explorer.explore(model, name=name).violation
    assert v is not None, f"{name}: not caught"
    assert v.invariants == (variant.expected,)
    assert not [s for s in _states(model, len(v.trace) - 1) if violations(model, s)]
    return v


def _observed(owner: OwnerRecord, reconcilers: tuple[Reconciler, ...]) -> SystemState:
    """t1 durably PREPARED, its artifact present, the owner at ``owner``."""
    return SystemState(
        files=(FileSlot(FileStatus.PRESENT, 1),),
        journal=(JournalTxn(durable=(L.PREPARED,), intent=1),),
        owner=(OwnerSlot(record=owner),),
        publishers=(PublisherPc.DONE,),
        removers=Model(ONE).initial().removers,
        reconcilers=reconcilers,
        rejected=(False,),
    )


# --- item 5: the generation checked on the client ------------------------------------


def test_client_side_generation_is_caught_by_s3_alone_at_the_least_depth() -> None:
    v = _caught("client-side-generation", ONE)
    kinds = [step.kind for step in v.trace]
    check, write = kinds.index(StepKind.CHECK_GENERATION), kinds.index(StepKind.WRITE_TOMBSTONE)
    landed = [i for i, k in enumerate(kinds) if k in (StepKind.APPLY_ACK, StepKind.APPLY_LOST_ACK)]
    assert any(check < i < write for i in landed)  # the publish landed between read and write
    assert kinds[-1] is StepKind.ABORT


def test_a_publish_between_observation_and_seal_makes_the_cas_stale() -> None:
    published = OwnerRecord(OwnerState.PUBLISHED, 1, 1)
    s = _observed(published, (Reconciler(ReconcilerPc.OBSERVED, 0, 0),))
    kinds = {step.kind for step, _ in Model(ONE).successors(s)}
    assert StepKind.STALE in kinds
    assert StepKind.SEAL not in kinds


def test_the_client_side_check_passes_where_the_cas_would_not_have_been_taken() -> None:
    # the mistaken reconciler's read sees the generation it observed, then writes blindly
    s = _observed(OwnerRecord(), (Reconciler(ReconcilerPc.OBSERVED, 0, 0),))
    model = variants.get("client-side-generation").model(ONE)
    steps = [step.kind for step, _ in model.successors(s)]
    assert StepKind.CHECK_GENERATION in steps
    assert StepKind.SEAL not in steps


# --- item 6: two reconcilers at once on one transaction --------------------------------


def test_the_correct_model_holds_with_two_reconcilers() -> None:
    report = explorer.explore(Model(TWO_RECONCILERS))
    assert report.ok and report.complete and report.l1_checked and report.l1_stuck == 0


def test_the_second_reconciler_finds_the_tombstone_and_appends_nothing_more() -> None:
    sealed = OwnerRecord(OwnerState.TOMBSTONED, 1)
    s = _observed(sealed, (Reconciler(), Reconciler(ReconcilerPc.OBSERVED, 0, 0)))
    s = SystemState(
        s.files,
        (JournalTxn(durable=(L.PREPARED, L.ABORTED), intent=1),),  # the first one aborted
        s.owner,
        s.publishers,
        s.removers,
        s.reconcilers,
        rejected=(False,),
    )
    model = Model(TWO_RECONCILERS)
    [(found, after)] = [(st, n) for st, n in model.successors(s) if st.by == 1]
    assert found.kind is StepKind.FOUND_SEALED
    [(abort, end)] = [(st, n) for st, n in model.successors(after) if st.by == 1]
    assert abort.kind is StepKind.ABORT
    assert end.journal[0].records == (L.PREPARED, L.ABORTED)
    assert end.reconcilers[1].pc is ReconcilerPc.IDLE


def test_two_reconcilers_is_caught_by_s5_alone_at_the_least_depth() -> None:
    v = _caught("two-reconcilers", ONE)
    assert v.trace[-1].kind is StepKind.FOUND_SEALED


def test_a_removal_between_observation_and_seal_is_enough_for_one_reconciler() -> None:
    # O4: the removal's tombstone answers the lone reconciler's seal with already_sealed
    model = Model(ONE, mistakes=frozenset({Mistake.ALREADY_SEALED_APPENDS_BLINDLY}))
    v = explorer.explore(model).violation
    assert v is not None and [s.kind for s in v.trace][-2:] == [
        StepKind.REMOVE_ACK,
        StepKind.FOUND_SEALED,
    ]


def test_two_reconcilers_under_the_same_mistake_are_caught_too() -> None:
    model = Model(TWO_RECONCILERS, mistakes=frozenset({Mistake.ALREADY_SEALED_APPENDS_BLINDLY}))
    report = explorer.explore(model)
    assert report.violation is not None
    assert report.violation.invariants == (variants.get("two-reconcilers").expected,)


def test_the_second_reconciler_is_off_by_default() -> None:
    assert len(Model().initial().reconcilers) == 1
    assert Bounds.parse("concurrent_reconcilers=true").concurrent_reconcilers


def test_a_crash_restarts_both_reconcilers() -> None:
    s = _observed(OwnerRecord(), (Reconciler(ReconcilerPc.OBSERVED, 0, 0),) * 2)
    assert Model(TWO_RECONCILERS).crash(s).reconcilers == (Reconciler(), Reconciler())
