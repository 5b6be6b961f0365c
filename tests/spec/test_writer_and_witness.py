"""The writer's mark and the owner as cleanup's second witness, in the model.

Two rules of docs/design.md section 7: the GC keeps a file its writer is still
writing, whatever its age (S1.writing), and a GC given the owner asks it,
inside its fence, whether a visible reference names an artifact before it
deletes it, so a lease the journal lost does not cost the artifact (S1).
Small hand-built states and small explorations only.
"""

from __future__ import annotations

import attrs
from toolswap.spec import invariants
from toolswap.spec.actors import FileStatus
from toolswap.spec.cleanup import ApplyStatus
from toolswap.spec.explorer import explore
from toolswap.spec.invariants import S1_WRITING, Invariant
from toolswap.spec.lease import LeaseState
from toolswap.spec.observe import SpecObserver
from toolswap.spec.owner import OwnerRecord, OwnerState
from toolswap.spec.system import (
    Bounds,
    FileSlot,
    JournalTxn,
    Mistake,
    Model,
    OwnerSlot,
    PlanTarget,
    Step,
    StepKind,
    SystemState,
    TargetKind,
)

SMALL = Bounds(artifacts=1, transactions=1)
WRITING_OLD = FileSlot(FileStatus.VOLATILE, 1, old=True)
OLD = FileSlot(FileStatus.PRESENT, 1, old=True)
SHOWN = OwnerSlot(record=OwnerRecord(OwnerState.PUBLISHED, 1, 1))
COMMITTED = JournalTxn(durable=(LeaseState.PREPARED, LeaseState.COMMITTED), intent=1)


def _steps(model: Model, s: SystemState, kind: StepKind) -> list[tuple[Step, SystemState]]:
    return [(step, nxt) for step, nxt in model.successors(s) if step.kind is kind]


def test_a_quiet_command_ages_its_half_written_artifact_only_under_slow_writes() -> None:
    s = Model(SMALL).initial()._replace(files=(FileSlot(FileStatus.VOLATILE, 1),))
    assert _steps(Model(SMALL), s, StepKind.QUIET) == []
    (_, quiet), *_ = _steps(Model(attrs_evolve(SMALL, slow_writes=True)), s, StepKind.QUIET)
    assert quiet.files[0] == WRITING_OLD


def test_completing_an_artifact_starts_its_age_again() -> None:
    model = Model(attrs_evolve(SMALL, slow_writes=True))
    s = model.initial()._replace(files=(WRITING_OLD,))
    ((_, done),) = _steps(model, s, StepKind.FSYNC_ARTIFACT)
    assert done.files[0] == FileSlot(FileStatus.PRESENT, 1, old=False)


def test_the_gc_plans_nothing_while_the_writer_holds_its_mark() -> None:
    model = Model(attrs_evolve(SMALL, foreign_entry=False))
    s = model.initial()._replace(files=(WRITING_OLD,))
    assert _steps(model, s, StepKind.GC_PLAN) == []


def test_a_gc_that_ignores_the_writer_cuts_the_artifact_short() -> None:
    model = Model(attrs_evolve(SMALL, foreign_entry=False), frozenset({Mistake.GC_IGNORES_WRITER}))
    s = model.initial()._replace(files=(WRITING_OLD,))
    ((_, planned),) = _steps(model, s, StepKind.GC_PLAN)
    ((_, applied),) = _steps(model, planned, StepKind.GC_APPLY)
    assert applied.files[0].status is FileStatus.DELETED
    assert applied.files[0].cut_short


def test_s1_writing_names_an_artifact_deleted_under_its_writer() -> None:
    model = Model(SMALL)
    cut = model.initial()._replace(files=(FileSlot(FileStatus.DELETED, 1, cut_short=True),))
    found = invariants.findings(SpecObserver(model)(cut))
    assert [handle for handle, _ in found] == [S1_WRITING]
    assert Invariant.S1.covers(S1_WRITING)


def test_the_correct_model_keeps_every_artifact_being_written_under_slow_writes() -> None:
    report = explore(Model(attrs_evolve(SMALL, slow_writes=True)))
    assert report.ok and report.complete


def test_the_journal_loses_only_a_settled_lease_whose_publish_is_done() -> None:
    model = Model(attrs_evolve(SMALL, lost_lease=True))
    prepared = model.initial()._replace(
        files=(OLD,),
        journal=(JournalTxn(durable=(LeaseState.PREPARED,), intent=1),),
        owner=(SHOWN,),
    )
    assert _steps(model, prepared, StepKind.LOSE_LEASE) == []
    committed = prepared._replace(journal=(COMMITTED,))
    ((_, lost),) = _steps(model, committed, StepKind.LOSE_LEASE)
    assert lost.journal[0] == JournalTxn(lost=True)


def test_a_lost_lease_is_not_read_as_a_publish_before_prepare() -> None:
    # S2 speaks of when the publish landed; the lost records were durable then
    model = Model(SMALL)
    s = model.initial()._replace(files=(OLD,), journal=(JournalTxn(lost=True),), owner=(SHOWN,))
    assert invariants.reason(invariants.s2_prepare_before_publish, model, s) is None


def test_a_lost_lease_is_not_published_again_by_its_publisher() -> None:
    model = Model(SMALL)
    s = model.initial()._replace(files=(OLD,), journal=(JournalTxn(lost=True),), owner=(SHOWN,))
    assert _steps(model, s, StepKind.PREPARE) == []


def _planned(model: Model) -> SystemState:
    facts = model.facts_of(OLD)
    return model.initial()._replace(
        files=(OLD,),
        journal=(JournalTxn(lost=True),),
        owner=(SHOWN,),
        gc_plan=(PlanTarget(TargetKind.ARTIFACT, 0, facts),),
    )


def test_a_gc_given_the_owner_keeps_what_a_visible_reference_names() -> None:
    model = Model(attrs_evolve(SMALL, gc_owner=True))
    ((step, after),) = _steps(model, _planned(model), StepKind.GC_APPLY)
    assert after.files[0] == OLD
    assert ApplyStatus.RETAINED_REFERENCED.value in step.note


def test_a_gc_without_the_owner_deletes_what_only_the_owner_still_shows() -> None:
    model = Model(SMALL)
    ((_, after),) = _steps(model, _planned(model), StepKind.GC_APPLY)
    assert after.files[0].status is FileStatus.DELETED


def test_a_gc_given_the_owner_survives_every_lost_lease() -> None:
    report = explore(Model(attrs_evolve(SMALL, lost_lease=True, gc_owner=True)))
    assert report.ok and report.complete and report.l1_checked


def test_the_journal_alone_cannot_survive_a_lost_lease() -> None:
    # the limit a GC without an owner lives with (docs/design.md section 5)
    report = explore(Model(attrs_evolve(SMALL, lost_lease=True)))
    assert report.violation is not None
    assert report.violation.invariants == (Invariant.S1,)


def attrs_evolve(bounds: Bounds, **changes: bool) -> Bounds:
    return attrs.evolve(bounds, **changes)
