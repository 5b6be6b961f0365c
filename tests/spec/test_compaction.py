"""Journal compaction (issue 38, item 1): the model keeps C1-C4; each mistake breaks one."""

from __future__ import annotations

import pytest
from toolswap.spec import compaction
from toolswap.spec.compaction import (
    COMPACTION_TRANSITIONS,
    EARLY_REMOVAL_TRANSITIONS,
    LOCK_HELD,
    Bounds,
    Check,
    Checkpoint,
    CompactionStep,
    Mistake,
    Model,
    Pc,
    Record,
    Refusal,
    Segment,
    State,
    Step,
    StepKind,
    Where,
    explore,
    findings,
    recover,
)
from toolswap.spec.errors import BadBounds, IllegalTransition
from toolswap.spec.invariants import Invariant
from toolswap.spec.lease import LeaseState

P, C = Pc, CompactionStep
NEW, PREPARED, COMMITTED, ABORTED = (
    LeaseState.NEW,
    LeaseState.PREPARED,
    LeaseState.COMMITTED,
    LeaseState.ABORTED,
)

#: The order the module's rules state, written out again: steps 1-7, unlink or keep.
RULE_ORDER = (
    (P.IDLE, C.WRITE_SNAPSHOT, P.SNAPSHOT_WRITTEN),
    (P.SNAPSHOT_WRITTEN, C.FSYNC_SNAPSHOT, P.SNAPSHOT_DURABLE),
    (P.SNAPSHOT_DURABLE, C.WRITE_CHECKPOINT, P.CHECKPOINT_WRITTEN),
    (P.CHECKPOINT_WRITTEN, C.FSYNC_CHECKPOINT, P.CHECKPOINT_DURABLE),
    (P.CHECKPOINT_DURABLE, C.START_NEXT, P.NEXT_STARTED),
    (P.NEXT_STARTED, C.ARCHIVE_OLD, P.ARCHIVED),
    (P.ARCHIVED, C.UNLINK_OLD, P.IDLE),
    (P.ARCHIVED, C.KEEP_OLD, P.IDLE),
)

#: mistake -> (the invariant its shortest trace breaks, that trace's length)
EXPECTED = {
    Mistake.REMOVE_BEFORE_CHECKPOINT_DURABLE: (Check.C2, 5),
    Mistake.SNAPSHOT_WITHOUT_SETTLED_CHECK: (Check.C1, 5),
    Mistake.CHECKPOINT_NOT_ANCHORED: (Check.C3, 8),
}


def test_each_mistake_names_the_invariant_its_trace_breaks() -> None:
    """MISTAKE_BREAKS (what the CLI and SPEC.md show) agrees with what exploring finds."""
    assert {m: c for m, (c, _) in EXPECTED.items()} == dict(compaction.MISTAKE_BREAKS)


#: The correct model under the default bounds; a change means it gained or lost behaviour.
STATES, TRANSITIONS = 62_789, 121_998


def reachable(model: Model) -> dict[State, list[Step]]:
    """Every reachable state with the steps it offers (a plain search of its own)."""
    seen: dict[State, list[Step]] = {}
    frontier = [model.initial()]
    while frontier:
        s = frontier.pop()
        if s in seen:
            continue
        moves = list(model.successors(s))
        seen[s] = [label for label, _ in moves]
        frontier.extend(n for _, n in moves if n not in seen)
    return seen


@pytest.fixture(scope="module")
def correct() -> dict[State, list[Step]]:
    return reachable(Model())


def replay(model: Model, trace: tuple[Step, ...]) -> State:
    s = model.initial()
    for label in trace:
        s = next(n for got, n in model.successors(s) if got == label)
    return s


def within(model: Model, depth: int) -> set[State]:
    seen = {model.initial()}
    frontier = set(seen)
    for _ in range(depth):
        frontier = {n for s in frontier for _, n in model.successors(s)} - seen
        seen |= frontier
    return seen


def test_the_correct_model_explored_exhaustively_has_no_violation() -> None:
    report = explore(Model())
    assert report.violation is None
    assert (report.states, report.transitions) == (STATES, TRANSITIONS)


def test_the_plain_search_sees_the_same_states_as_the_explorer(
    correct: dict[State, list[Step]],
) -> None:
    assert len(correct) == STATES


@pytest.mark.parametrize("mistake", list(Mistake), ids=lambda m: m.name.lower())
def test_each_mistake_is_caught_by_its_expected_invariant(mistake: Mistake) -> None:
    v = explore(Model(mistakes=frozenset({mistake}))).violation
    assert v is not None and EXPECTED[mistake][0] in v.checks


@pytest.mark.parametrize("mistake", list(Mistake), ids=lambda m: m.name.lower())
def test_each_mistakes_trace_has_the_expected_length_and_reaches_the_violation(
    mistake: Mistake,
) -> None:
    model = Model(mistakes=frozenset({mistake}))
    v = explore(model).violation
    assert v is not None and len(v.trace) == EXPECTED[mistake][1]
    assert EXPECTED[mistake][0] in {c for c, _ in findings(replay(model, v.trace), model.mistakes)}


@pytest.mark.parametrize("mistake", list(Mistake), ids=lambda m: m.name.lower())
def test_no_shorter_trace_breaks_any_invariant_under_the_mistake(mistake: Mistake) -> None:
    model = Model(mistakes=frozenset({mistake}))
    shorter = within(model, EXPECTED[mistake][1] - 1)
    assert not [s for s in shorter if findings(s, model.mistakes)]


def test_every_compaction_invariant_serves_some_of_s1_to_s7() -> None:
    assert set(compaction.SERVES) == set(Check)
    assert all(serves and Invariant.L1 not in serves for serves in compaction.SERVES.values())


def test_the_table_holds_exactly_the_pairs_the_rules_allow() -> None:
    assert dict(COMPACTION_TRANSITIONS) == {(pc, s): nxt for pc, s, nxt in RULE_ORDER}


@pytest.mark.parametrize(
    ("pc", "action"),
    [(pc, a) for pc in Pc for a in CompactionStep if (pc, a) not in COMPACTION_TRANSITIONS],
    ids=str,
)
def test_a_pair_the_rules_do_not_allow_raises_illegal_transition(
    pc: Pc, action: CompactionStep
) -> None:
    with pytest.raises(IllegalTransition):
        compaction.step(pc, action)


def test_the_early_removal_table_moves_only_the_checkpoint_fsync() -> None:
    order = [a for _, a in EARLY_REMOVAL_TRANSITIONS]
    assert order[-1] is C.FSYNC_CHECKPOINT and order.index(C.START_NEXT) < order.index(
        C.FSYNC_CHECKPOINT
    )
    assert {a for _, a in EARLY_REMOVAL_TRANSITIONS} == set(CompactionStep)


def test_every_row_of_the_table_is_taken_in_the_correct_model(
    correct: dict[State, list[Step]],
) -> None:
    taken = {
        (s.pc, CompactionStep[label.kind.name])
        for s, labels in correct.items()
        for label in labels
        if label.kind.name in CompactionStep.__members__
    }
    assert taken == set(COMPACTION_TRANSITIONS)


def test_no_publisher_appends_while_the_compaction_holds_the_lock(
    correct: dict[State, list[Step]],
) -> None:
    assert not any(
        label.kind is StepKind.APPEND
        for s, labels in correct.items()
        if s.pc in LOCK_HELD
        for label in labels
    )


def test_the_lock_window_is_needed_appends_inside_it_break_the_chain(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(compaction, "LOCK_HELD", frozenset())
    v = explore(Model()).violation
    assert v is not None and Check.C2 in v.checks


def test_publishers_append_between_compaction_steps(correct: dict[State, list[Step]]) -> None:
    paused = {
        s.pc for s, labels in correct.items() if any(x.kind is StepKind.APPEND for x in labels)
    }
    assert paused == set(Pc) - LOCK_HELD - {Pc.OLD_RETIRED}


def test_the_correct_model_reaches_a_second_compaction_with_the_old_files_unlinked(
    correct: dict[State, list[Step]],
) -> None:
    assert any(
        len(s.checkpoints) == 2 and any(g.where is Where.GONE for g in s.segments) for s in correct
    )


def test_a_crash_between_the_checkpoint_and_the_next_file_makes_recovery_start_it(
    correct: dict[State, list[Step]],
) -> None:
    assert any(
        label.kind is StepKind.CRASH and label.note
        for s, labels in correct.items()
        if s.pc is Pc.CHECKPOINT_DURABLE
        for label in labels
    )


def test_the_correct_model_refuses_some_rolled_back_journal_by_its_anchor(
    correct: dict[State, list[Step]],
) -> None:
    assert any(s.attacked and recover(s).refusal is Refusal.ANCHOR for s in correct)


def test_the_correct_model_accepts_a_rollback_that_loses_nothing(
    correct: dict[State, list[Step]],
) -> None:
    assert any(s.attacked and recover(s).refusal is None for s in correct)


def _chain(*records: tuple[int, LeaseState], start: int = 0) -> tuple[Record, ...]:
    """``records`` as a chain from head ``start``: each names the head before it."""
    return tuple(Record(start + i, txn, phase) for i, (txn, phase) in enumerate(records))


def _journal(*records: tuple[int, LeaseState], anchor: int | None = None) -> State:
    """A journal of one file and no checkpoint, with ``records``."""
    count = len(records)
    truth = [NEW, NEW]
    for txn, phase in records:
        truth[txn] = phase
    return State(
        segments=(Segment(0, 0, _chain(*records)),),
        anchor=count if anchor is None else anchor,
        records=count,
        truth=tuple(truth),
    )


def test_recovery_folds_the_snapshot_and_the_tail() -> None:
    state = State(
        segments=(
            Segment(0, 0, _chain((0, PREPARED), (1, PREPARED)), Where.ARCHIVED),
            Segment(1, 2, _chain((1, COMMITTED), start=2)),
        ),
        checkpoints=(Checkpoint(2, ((0, PREPARED), (1, PREPARED)), True),),
        anchor=3,
        records=3,
        truth=(PREPARED, COMMITTED),
    )
    assert recover(state).live() == {0: PREPARED, 1: COMMITTED}


def test_an_anchor_above_what_recovery_can_show_is_refused() -> None:
    assert recover(_journal((0, PREPARED), anchor=2)).refusal is Refusal.ANCHOR


def test_c1_flags_a_snapshot_that_dropped_a_prepared_lease() -> None:
    state = _journal((0, PREPARED))._replace(checkpoints=(Checkpoint(1, (), True),))
    assert Check.C1 in {c for c, _ in findings(state)}


def test_c2_flags_records_chained_from_a_checkpoint_the_log_lacks() -> None:
    state = _journal((0, PREPARED))._replace(segments=(Segment(1, 0, _chain((0, PREPARED))),))
    assert Check.C2 in {c for c, _ in findings(state)}


def test_c2_flags_a_record_that_names_another_head() -> None:
    state = _journal((0, PREPARED))._replace(segments=(Segment(0, 0, (Record(1, 0, PREPARED),)),))
    assert Check.C2 in {c for c, _ in findings(state)}


def test_every_appended_record_names_the_head_before_it(
    correct: dict[State, list[Step]],
) -> None:
    assert all(
        r.prev == seg.start + i
        for s in correct
        for seg in s.segments
        for i, r in enumerate(seg.records)
    )


def test_c3_flags_an_accepted_rollback_that_lost_a_live_lease() -> None:
    state = _journal((0, PREPARED))._replace(truth=(PREPARED, PREPARED), attacked=True)
    assert [c for c, _ in findings(state)] == [Check.C3]


def test_c3_accepts_a_rolled_back_journal_that_recovery_refuses() -> None:
    state = _journal((0, PREPARED), anchor=2)._replace(truth=(PREPARED, PREPARED), attacked=True)
    assert findings(state) == []


def test_c4_flags_a_live_lease_whose_only_record_is_archived() -> None:
    state = _journal((0, PREPARED))._replace(
        segments=(Segment(0, 0, _chain((0, PREPARED)), Where.ARCHIVED), Segment(1, 1))
    )
    assert Check.C4 in {c for c, _ in findings(state)}


def test_a_settled_lease_may_leave_every_file() -> None:
    state = State(
        segments=(Segment(0, 0, _chain((0, PREPARED), (0, ABORTED)), Where.GONE), Segment(1, 2)),
        checkpoints=(Checkpoint(2, (), True),),
        anchor=2,
        records=2,
        truth=(ABORTED, NEW),
    )
    assert findings(state) == []


@pytest.mark.parametrize("bad", [{"transactions": 0}, {"compactions": 4}])
def test_bounds_outside_the_model_are_refused(bad: dict[str, int]) -> None:
    with pytest.raises(BadBounds):
        Bounds(**bad)
