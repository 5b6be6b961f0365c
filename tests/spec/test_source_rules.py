"""Issue 18: three rules of the source document, each with the variant that drops it.

Claims, per rule, that the variant is caught by exactly its one expected
invariant with a shortest trace, and that the correct model passes under the
same bounds:

* ``prepared-lease-expires`` (S1): a PREPARED lease protects its artifact
  whatever its ``retain_until``; a COMMITTED lease past it stops protecting,
  and S1 leaves that reference to the caller who bounded it.
* ``uncertain-error-aborts`` (S3): an uncertain publish error is not a
  rejection.  S3 is what catches it: the ABORTED record itself is the broken
  rule, and the S1 harm that can follow is only reached through states that
  already break S3.
* ``replay-transaction-id`` (S1): a transaction id is published once.  The
  replay breaks neither S5 (the journal folds the replayed terminal event
  away) nor S2 (PREPARED was durable before the first send) nor S4 (the
  owner's removal left a tombstone that refuses the replay, O4); it breaks S1
  (an id the owner rejected before any write, which has no tombstone).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from toolswap.spec import cleanup, explorer, variants
from toolswap.spec.actors import FileStatus, PublisherPc
from toolswap.spec.invariants import Invariant, reason, s1_no_dangling_reference, violations
from toolswap.spec.lease import LeaseState as L
from toolswap.spec.owner import OwnerRecord, OwnerState
from toolswap.spec.system import (
    Bounds,
    FileSlot,
    JournalTxn,
    Mistake,
    Model,
    OwnerSlot,
    StepKind,
    SystemState,
)

ONE = Bounds(artifacts=1, transactions=1)
EXPIRY = Bounds(transactions=1, lease_expiry=True)  # about 11k states, all faults on
NEW_VARIANTS = ("prepared-lease-expires", "uncertain-error-aborts", "replay-transaction-id")


def s1(model: Model, s: SystemState) -> str | None:
    """S1's first reason on the model state ``s``, or None when it holds."""
    return reason(s1_no_dangling_reference, model, s)


def _states(model: Model, depth: int | None = None) -> Iterator[SystemState]:
    """Every state reachable in at most ``depth`` steps (all of them: None), plain BFS."""
    seen = {model.initial()}
    frontier = list(seen)
    yield from frontier
    level = 0
    while frontier and (depth is None or level < depth):
        level += 1
        nxt = []
        for s in frontier:
            for _, n in model.successors(s):
                if n not in seen:
                    seen.add(n)
                    nxt.append(n)
        yield from nxt
        frontier = nxt


def _caught(name: str, bounds: Bounds | None = None) -> explorer.Violation:
    """The variant's violation, checked to be its one expected invariant, at the least depth."""
    variant = variants.get(name)
    model = variant.model(bounds)
    report = explorer.explore(model, name=name)
    v = report.violation
    assert v is not None, f"{name}: not caught"
    assert v.invariants == (variant.expected,)
    assert not [s for s in _states(model, len(v.trace) - 1) if violations(model, s)]
    return v


def _lease(journal: JournalTxn, owner: OwnerSlot, status: FileStatus) -> SystemState:
    model = Model(ONE)
    return SystemState(
        files=(FileSlot(status, 1, old=True),),
        journal=(journal,),
        owner=(owner,),
        publishers=model.initial().publishers,
        removers=model.initial().removers,
        rejected=(False,),
    )


SHOWN = OwnerSlot(record=OwnerRecord(OwnerState.PUBLISHED, 1, 1))


@pytest.mark.parametrize("name", NEW_VARIANTS)
def test_the_correct_model_passes_under_the_variants_bounds(name: str) -> None:
    report = explorer.explore(Model(variants.get(name).bounds(ONE)))
    assert report.ok and report.l1_checked and report.l1_stuck == 0


# --- 1. a PREPARED lease past its retain_until still protects its artifact ----------


def test_prepared_lease_expires_is_caught_by_s1_alone() -> None:
    v = _caught("prepared-lease-expires", EXPIRY)
    kinds = [step.kind for step in v.trace]
    assert StepKind.EXPIRE in kinds and kinds[-1] is StepKind.GC_APPLY
    assert StepKind.COMMIT not in kinds  # the lease deleted under is still PREPARED


def test_the_expiry_fault_is_off_by_default_and_the_variant_switches_it_on() -> None:
    assert not Bounds().lease_expiry
    assert variants.get("prepared-lease-expires").model().bounds.lease_expiry
    kinds = {step.kind for step, _ in Model(ONE).successors(_expirable())}
    assert StepKind.EXPIRE not in kinds
    on = Model(variants.get("prepared-lease-expires").bounds(ONE))
    assert StepKind.EXPIRE in {step.kind for step, _ in on.successors(_expirable())}


def _expirable() -> SystemState:
    return _lease(JournalTxn(durable=(L.PREPARED,), intent=1), OwnerSlot(), FileStatus.PRESENT)


def test_the_correct_rule_holds_with_expiry_on_two_artifacts() -> None:
    report = explorer.explore(Model(EXPIRY))
    assert report.ok and report.l1_checked and report.l1_stuck == 0


@pytest.mark.parametrize(
    ("phase", "mistakes", "protected"),
    [
        ((L.PREPARED,), frozenset(), True),
        ((L.PREPARED, L.COMMITTED), frozenset(), False),
        ((L.PREPARED,), frozenset({Mistake.PREPARED_LEASE_EXPIRES}), False),
    ],
)
def test_past_retain_until_only_a_committed_claim_stops_protecting(
    phase: tuple[L, ...], mistakes: frozenset[Mistake], protected: bool
) -> None:
    model = Model(ONE, mistakes)
    txn = JournalTxn(durable=phase, intent=1, expired=True)
    facts = model.facts_of(FileSlot(FileStatus.PRESENT, 1, old=True))
    claims = model.claims_for(_lease(txn, SHOWN, FileStatus.PRESENT), 0)
    status = cleanup.classify(facts, claims, cleanup.Policy(orphan_ttl_seconds=1), 1)
    expected = (
        cleanup.PlanStatus.RETAINED_REFERENCED if protected else cleanup.PlanStatus.PLANNED_DELETE
    )
    assert status is expected


def test_a_prepared_lease_keeps_an_artifact_that_an_expired_committed_one_lets_go() -> None:
    model = Model(Bounds(artifacts=1, transactions=2))
    committed = JournalTxn(durable=(L.PREPARED, L.COMMITTED), intent=1, expired=True)
    prepared = JournalTxn(durable=(L.PREPARED,), intent=1, expired=True)
    one = _lease(committed, SHOWN, FileStatus.PRESENT)
    both = SystemState(
        one.files,
        (committed, prepared),
        (SHOWN, OwnerSlot()),
        model.initial().publishers,
        model.initial().removers,
        rejected=(False, False),
    )
    facts = model.facts_of(one.files[0])
    policy = cleanup.Policy(orphan_ttl_seconds=1)
    claims = model.claims_for(both, 0)
    assert len(claims) == 2
    assert cleanup.classify(facts, claims, policy, 1) is cleanup.PlanStatus.RETAINED_REFERENCED
    assert cleanup.revalidate(facts, facts, claims, 1) is cleanup.ApplyStatus.RETAINED_REFERENCED


def test_an_unexpired_committed_claim_still_protects() -> None:
    txn = JournalTxn(durable=(L.PREPARED, L.COMMITTED), intent=1)
    claims = Model(ONE).claims_for(_lease(txn, SHOWN, FileStatus.PRESENT), 0)
    assert [cleanup.claim_is_active(k, 1) for k in claims] == [True]


def test_s1_leaves_only_an_expired_committed_reference_to_its_caller() -> None:
    model = Model(ONE)
    committed = (L.PREPARED, L.COMMITTED)
    expired = JournalTxn(durable=committed, intent=1, expired=True)
    assert s1(model, _lease(expired, SHOWN, FileStatus.DELETED)) is None
    live = JournalTxn(durable=committed, intent=1)
    assert s1(model, _lease(live, SHOWN, FileStatus.DELETED))
    pending = JournalTxn(durable=(L.PREPARED,), intent=1, expired=True)
    assert s1(model, _lease(pending, OwnerSlot(), FileStatus.DELETED))


def test_a_crash_keeps_a_durable_leases_expiry_and_forgets_a_lost_ones() -> None:
    model = Model(ONE)
    durable = JournalTxn(durable=(L.PREPARED,), intent=1, expired=True)
    assert model.crash(_lease(durable, OwnerSlot(), FileStatus.PRESENT)).journal[0].expired
    lost = JournalTxn(volatile=(L.PREPARED,), intent=1, expired=True)
    assert model.crash(_lease(lost, OwnerSlot(), FileStatus.PRESENT)).journal[0] == JournalTxn()


# --- 2. an uncertain publish error is not a rejection --------------------------------


def test_uncertain_error_aborts_is_caught_by_s3_alone() -> None:
    v = _caught("uncertain-error-aborts")
    kinds = [step.kind for step in v.trace]
    assert kinds[-1] is StepKind.ABORT_ON_ERROR
    assert kinds[-2] in (StepKind.APPLY_LOST_ACK, StepKind.DROP)  # the owner never said no
    assert StepKind.REJECT not in kinds


def test_s3_is_broken_in_every_state_where_the_mistake_reaches_s1() -> None:
    model = variants.get("uncertain-error-aborts").model(ONE)
    found = [{n for n, _ in violations(model, s)} for s in _states(model)]
    s1 = [names for names in found if Invariant.S1 in names]
    assert s1, "the harm S3 stands for is reachable"
    assert all(Invariant.S3 in names for names in s1)


def test_the_correct_publisher_leaves_the_lease_prepared_on_an_uncertain_error() -> None:
    model = Model(ONE)
    sent = _lease(
        JournalTxn(durable=(L.PREPARED,), intent=1), OwnerSlot(inflight=1), FileStatus.PRESENT
    )
    sent = SystemState(
        sent.files, sent.journal, sent.owner, (PublisherPc.SENT,), sent.removers, rejected=(False,)
    )
    uncertain = [
        n for st, n in model.successors(sent) if st.kind in (StepKind.APPLY_LOST_ACK, StepKind.DROP)
    ]
    assert len(uncertain) == 2
    for n in uncertain:
        assert n.publishers == (PublisherPc.DONE,) and n.journal[0].state is L.PREPARED
        assert not any(st.kind is StepKind.ABORT_ON_ERROR for st, _ in model.successors(n))


# --- 3. a transaction id is published once --------------------------------------------


def test_replay_transaction_id_is_caught_by_s1_alone() -> None:
    v = _caught("replay-transaction-id")
    kinds = [step.kind for step in v.trace]
    assert kinds[-1] is StepKind.REPLAY and StepKind.CRASH in kinds
    assert StepKind.REJECT in kinds  # rejected before any write: ABORTED, no tombstone


def test_a_replay_breaks_s1_but_never_s5_s2_or_s4() -> None:
    # a removed id's tombstone refuses the replay (O4): only a rejected id lets it land
    model = variants.get("replay-transaction-id").model(ONE)
    broken = {n for s in _states(model) for n, _ in violations(model, s)}
    assert broken == {Invariant.S1}


def test_the_correct_publisher_never_sends_an_id_on_record_again() -> None:
    model = Model(ONE)
    for phases in ((L.PREPARED,), (L.PREPARED, L.ABORTED), (L.PREPARED, L.COMMITTED, L.RELEASED)):
        restarted = _lease(JournalTxn(durable=phases, intent=1), OwnerSlot(), FileStatus.PRESENT)
        sends = [
            st
            for st, _ in model.successors(restarted)
            if st.kind in (StepKind.SEND, StepKind.REPLAY, StepKind.PREPARE)
        ]
        assert sends == []
        replaying = variants.get("replay-transaction-id").model(ONE)
        assert [
            st.kind
            for st, _ in replaying.successors(restarted)
            if st.txn == 0 and st.kind is StepKind.REPLAY
        ] == [StepKind.REPLAY]


def test_the_two_publisher_mistakes_compose() -> None:
    both = Model(
        ONE, frozenset({Mistake.UNCERTAIN_ERROR_IS_REJECTION, Mistake.REPLAYED_TRANSACTION_ID})
    )
    kinds = {step.kind for s in _states(both, 12) for step, _ in both.successors(s)}
    assert {StepKind.REPLAY, StepKind.ABORT_ON_ERROR} <= kinds
