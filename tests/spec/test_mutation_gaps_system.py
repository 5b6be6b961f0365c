"""Mutation gaps in spec/system.py (a coarse sample): bounds, step text, GC limit, foreign publish.

Each test takes one step of the model from a small hand-built state (or no
step at all), never an exploration (docs/mutation.md, spec/).
"""

from __future__ import annotations

import pytest
from toolswap.spec.actors import FileStatus
from toolswap.spec.errors import BadBounds
from toolswap.spec.lease import LeaseState
from toolswap.spec.system import (
    Bounds,
    FileSlot,
    JournalTxn,
    Mistake,
    Model,
    Step,
    StepKind,
    SystemState,
    TargetKind,
)

OLD = FileSlot(FileStatus.PRESENT, 1, old=True)


def test_max_generation_six_is_the_largest_allowed() -> None:
    assert Bounds(max_generation=6).max_generation == 6
    with pytest.raises(BadBounds):
        Bounds(max_generation=7)


def test_a_step_with_no_transaction_describes_it_as_a_question_mark() -> None:
    assert Step(StepKind.SEND).describe() == "publisher ? sends the publish request to the owner"


def _only(model: Model, s: SystemState, kind: StepKind) -> tuple[Step, SystemState]:
    (found,) = [(step, nxt) for step, nxt in model.successors(s) if step.kind is kind]
    return found


@pytest.mark.parametrize("limit", [1, 2])
def test_the_gc_plans_exactly_max_deletions_old_unclaimed_artifacts(limit: int) -> None:
    model = Model(Bounds(max_deletions=limit, foreign_entry=False))
    s = model.initial()._replace(files=(OLD, OLD))
    _, planned = _only(model, s, StepKind.GC_PLAN)
    assert planned.gc_plan is not None
    assert [x.index for x in planned.gc_plan if x.kind is TargetKind.ARTIFACT] == list(range(limit))


def test_a_foreign_publish_stores_the_named_artifacts_digest_under_the_transactions_id() -> None:
    model = Model(Bounds(foreign_publish=True))
    altered = OLD._replace(tampered=True)  # a digest unlike any intent's
    s = model.initial()._replace(
        files=(OLD, altered),
        journal=(JournalTxn(durable=(LeaseState.PREPARED,), intent=1), JournalTxn()),
    )
    step, after = _only(model, s, StepKind.FOREIGN_PUBLISH)
    assert (step.txn, step.slot) == (0, 1)
    assert step.describe() == (
        "fault: another writer publishes t1's id naming tool_result_002.txt (generation 1)"
    )
    assert (after.owner[0].record.digest, after.owner[0].names) == (altered.digest, 1)


def test_the_conflict_unprotected_reconciler_says_it_journalled_nothing() -> None:
    mistake = frozenset({Mistake.CONFLICT_LEAVES_OBSERVED_UNPROTECTED})
    model = Model(Bounds(foreign_publish=True, unknown=False), mistake)
    s = model.initial()._replace(
        files=(OLD, OLD),
        journal=(JournalTxn(durable=(LeaseState.PREPARED,), intent=1), JournalTxn()),
    )
    _, shown = _only(model, s, StepKind.FOREIGN_PUBLISH)
    step, after = _only(model, shown, StepKind.OBSERVE)
    assert step.note.endswith(", reported, nothing journalled")
    assert after.journal == shown.journal
