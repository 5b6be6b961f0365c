"""Issue 14 item 4: a reported conflict's artifact stays protected (S1), in the model.

Claims: under the same bounds (a foreign writer publishes a PREPARED
transaction's id naming another artifact), the ``conflict-unprotected``
variant (report ``pending_conflict`` without journalling the observed
identity) breaks S1, and the correct rule (a CONFLICT record, durable before
the report, protecting while the lease protects) breaks nothing and keeps L1;
the pieces of that rule each hold on their own: the claim, the report only
after the fsync, a crash that loses only an unsynced record, and the default
bounds that leave the fault off.
"""

from __future__ import annotations

from toolswap.spec import explorer, variants
from toolswap.spec.actors import FileStatus, ReconcilerPc
from toolswap.spec.invariants import Invariant, reason, s1_no_dangling_reference
from toolswap.spec.lease import LeaseState as L
from toolswap.spec.owner import OwnerRecord, OwnerState
from toolswap.spec.system import (
    Bounds,
    FileSlot,
    JournalTxn,
    Model,
    OwnerSlot,
    StepKind,
    SystemState,
)

# One transaction keeps the correct model small (about 10k states, all faults on);
# the foreign publish names the second artifact, which no lease intends.
SMALL = Bounds(transactions=1, foreign_publish=True)
VARIANT = variants.get("conflict-unprotected")


def s1(model: Model, s: SystemState) -> str | None:
    """S1's first reason on the model state ``s``, or None when it holds."""
    return reason(s1_no_dangling_reference, model, s)


def _state(journal: JournalTxn, owner: OwnerSlot, second: FileStatus) -> SystemState:
    model = Model(SMALL)
    return SystemState(
        files=(FileSlot(FileStatus.PRESENT, 1, old=True), FileSlot(second, 1, old=True)),
        journal=(journal,),
        owner=(owner,),
        publishers=model.initial().publishers,
        removers=model.initial().removers,
        rejected=(False,),
    )


FOREIGN = OwnerSlot(record=OwnerRecord(OwnerState.PUBLISHED, 1, 1), names=1)
PREPARED = JournalTxn(durable=(L.PREPARED,), intent=1)


def test_the_variant_breaks_s1_under_the_bounds_it_needs() -> None:
    assert VARIANT.bounds(SMALL) == SMALL
    report = explorer.explore(VARIANT.model(SMALL), name=VARIANT.name)
    assert report.violation is not None
    assert report.violation.invariants == (Invariant.S1,)


def test_the_variant_switches_its_fault_on_over_the_default_bounds() -> None:
    assert not Bounds().foreign_publish  # the default exploration is unchanged
    assert VARIANT.model().bounds.foreign_publish
    report = explorer.explore(VARIANT.model(), name=VARIANT.name)
    assert report.violation is not None and VARIANT.expected in report.violation.invariants


def test_the_correct_rule_holds_under_the_same_bounds() -> None:
    report = explorer.explore(Model(SMALL))
    assert report.ok and report.violation is None
    assert report.l1_checked and report.l1_stuck == 0


def test_a_conflict_record_is_a_claim_while_the_lease_protects() -> None:
    model = Model(SMALL)
    recorded = JournalTxn(durable=(L.PREPARED,), intent=1, conflict=1, conflict_digest=1)
    assert model.claims_for(_state(recorded, FOREIGN, FileStatus.PRESENT), 1)
    aborted = JournalTxn((L.PREPARED, L.ABORTED), (), 1, conflict=1, conflict_digest=1)
    assert not model.claims_for(_state(aborted, FOREIGN, FileStatus.PRESENT), 1)
    assert not model.claims_for(_state(PREPARED, FOREIGN, FileStatus.PRESENT), 1)


def test_the_report_waits_for_the_fsync_and_a_crash_loses_an_unsynced_record() -> None:
    model = Model(SMALL)
    s = _state(PREPARED, FOREIGN, FileStatus.PRESENT)
    observed = [
        nxt
        for step, nxt in model.successors(s)
        if step.kind is StepKind.OBSERVE and nxt.reconciler.pc is ReconcilerPc.RECORDING
    ]
    assert len(observed) == 1
    s2 = observed[0]
    assert s2.journal[0].conflict == 1 and s2.journal[0].conflict_volatile
    kinds = {step.kind for step, _ in model.successors(s2)}
    assert StepKind.REPORT_CONFLICT not in kinds and StepKind.JOURNAL_FSYNC in kinds
    assert model.crash(s2).journal[0].conflict == -1
    synced = next(n for st, n in model.successors(s2) if st.kind is StepKind.JOURNAL_FSYNC)
    assert model.crash(synced).journal[0].conflict == 1
    reported = next(n for st, n in model.successors(synced) if st.kind is StepKind.REPORT_CONFLICT)
    assert reported.owner[0].reported == 1


def test_s1_speaks_of_a_reported_conflict_the_owner_still_shows() -> None:
    model = Model(SMALL)
    told = OwnerSlot(FOREIGN.record, names=1, reported=1)
    assert s1(model, _state(PREPARED, told, FileStatus.DELETED))
    assert s1(model, _state(PREPARED, told, FileStatus.PRESENT)) is None
    gone = OwnerSlot(OwnerRecord(OwnerState.ABSENT, 2, 1), reported=1)
    assert s1(model, _state(PREPARED, gone, FileStatus.DELETED)) is None
    untold = FOREIGN
    assert s1(model, _state(PREPARED, untold, FileStatus.DELETED)) is None


def test_the_variant_raises_the_bounds_to_what_its_fault_needs() -> None:
    lifted = VARIANT.bounds(Bounds(artifacts=1, transactions=1))
    assert (lifted.artifacts, lifted.foreign_publish) == (2, True)
    assert VARIANT.bounds(Bounds(artifacts=3)).artifacts == 3
