"""Each invariant holds on a sound model state and fails on a hand-built bad one.

The invariants read an Observable; these cases build model states and observe
them through the spec's adapter (spec/observe.py).  Mutant-style: if an
invariant were weakened to "always holds", its ``bad`` case here would fail.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from toolswap.spec import invariants
from toolswap.spec.actors import FileStatus, PublisherPc
from toolswap.spec.lease import LeaseState as L
from toolswap.spec.observable import Observable
from toolswap.spec.owner import OwnerRecord
from toolswap.spec.owner import OwnerState as O
from toolswap.spec.system import FileSlot, JournalTxn, Model, OwnerSlot, SystemState

MODEL = Model()
BASE = MODEL.initial()

PRESENT = FileSlot(FileStatus.PRESENT, 1, old=True)
DELETED = FileSlot(FileStatus.DELETED, 1, old=True)


def state(
    *,
    file: FileSlot = PRESENT,
    durable: tuple[L, ...] = (),
    volatile: tuple[L, ...] = (),
    owner: O = O.ABSENT,
    inflight: int = 0,
    publisher: PublisherPc = PublisherPc.IDLE,
    rejected: bool = False,
    outside: bool = False,
    expired: bool = False,
) -> SystemState:
    """The base state with transaction t1 (on tool_result_001.txt) set as given."""
    return BASE._replace(
        files=(file, *BASE.files[1:]),
        journal=(
            JournalTxn(durable, volatile, 1 if durable or volatile else 0, expired=expired),
            *BASE.journal[1:],
        ),
        owner=(OwnerSlot(OwnerRecord(owner, 1, 1), inflight=inflight), *BASE.owner[1:]),
        publishers=(publisher, *BASE.publishers[1:]),
        rejected=(rejected, *BASE.rejected[1:]),
        outside_touched=outside,
    )


Check = Callable[[Observable], Iterator[invariants.Finding]]

# (predicate, a state that breaks it, a nearby state that does not)
CASES: list[tuple[str, Check, SystemState, SystemState]] = [
    (
        "S1 visible",
        invariants.s1_no_dangling_reference,
        state(file=DELETED, durable=(L.PREPARED, L.COMMITTED), owner=O.PUBLISHED),
        state(file=DELETED, durable=(L.PREPARED, L.COMMITTED, L.RELEASED)),
    ),
    (
        "S1 may become visible: pending lease",
        invariants.s1_no_dangling_reference,
        state(file=DELETED, durable=(L.PREPARED,)),
        state(file=PRESENT, durable=(L.PREPARED,)),
    ),
    (
        "S1 a PREPARED lease protects even behind a tombstone",
        invariants.s1_no_dangling_reference,
        state(file=DELETED, durable=(L.PREPARED,), owner=O.TOMBSTONED),
        state(file=DELETED, durable=(L.PREPARED, L.ABORTED), owner=O.TOMBSTONED),
    ),
    (
        "S1 a COMMITTED lease protects until its retain_until",
        invariants.s1_no_dangling_reference,
        state(file=DELETED, durable=(L.PREPARED, L.COMMITTED)),
        state(file=DELETED, durable=(L.PREPARED, L.COMMITTED), expired=True),
    ),
    (
        "S1 may become visible: request in flight",
        invariants.s1_no_dangling_reference,
        state(file=DELETED, durable=(L.PREPARED, L.ABORTED), inflight=1, owner=O.ABSENT),
        state(file=DELETED, durable=(L.PREPARED, L.ABORTED), inflight=1, owner=O.TOMBSTONED),
    ),
    (
        "S1 may become visible: publisher about to send",
        invariants.s1_no_dangling_reference,
        state(file=DELETED, volatile=(L.PREPARED,), publisher=PublisherPc.PREPARING),
        state(file=PRESENT, volatile=(L.PREPARED,), publisher=PublisherPc.PREPARING),
    ),
    (
        "S2",
        invariants.s2_prepare_before_publish,
        state(volatile=(L.PREPARED,), owner=O.PUBLISHED),
        state(durable=(L.PREPARED,), owner=O.PUBLISHED),
    ),
    (
        "S3",
        invariants.s3_tombstone_before_abort,
        state(durable=(L.PREPARED, L.ABORTED)),
        state(durable=(L.PREPARED, L.ABORTED), owner=O.TOMBSTONED),
    ),
    (
        "S3 explicit rejection",
        invariants.s3_tombstone_before_abort,
        state(volatile=(L.PREPARED, L.ABORTED)),
        state(volatile=(L.PREPARED, L.ABORTED), rejected=True),
    ),
    (
        "S4",
        invariants.s4_remove_before_release,
        state(durable=(L.PREPARED, L.COMMITTED, L.RELEASED), owner=O.PUBLISHED),
        state(durable=(L.PREPARED, L.COMMITTED), owner=O.PUBLISHED),
    ),
    (
        "S5 two resolutions",
        invariants.s5_one_terminal_event,
        state(durable=(L.PREPARED, L.COMMITTED), volatile=(L.ABORTED,), owner=O.TOMBSTONED),
        state(durable=(L.PREPARED, L.COMMITTED)),
    ),
    (
        "S5 two releases",
        invariants.s5_one_terminal_event,
        state(durable=(L.PREPARED, L.COMMITTED, L.RELEASED, L.RELEASED)),
        state(durable=(L.PREPARED, L.COMMITTED, L.RELEASED)),
    ),
    (
        "S6",
        invariants.s6_append_only_evidence,
        state(file=PRESENT._replace(content=2)),
        state(file=PRESENT),
    ),
    ("S7", invariants.s7_nothing_outside, state(outside=True), state()),
]


@pytest.mark.parametrize(
    ("check", "bad", "good"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_the_predicate_fails_on_the_bad_state_only(
    check: Check, bad: SystemState, good: SystemState
) -> None:
    assert invariants.reason(check, MODEL, good) is None
    reason = invariants.reason(check, MODEL, bad)
    assert isinstance(reason, str) and reason


@pytest.mark.parametrize(("check", "bad"), [c[1:3] for c in CASES], ids=[c[0] for c in CASES])
def test_violations_names_the_broken_invariant(check: Check, bad: SystemState) -> None:
    name = next(n for n, c in invariants.SAFETY if c is check)
    assert name in [n for n, _ in invariants.violations(MODEL, bad)]


def test_the_initial_state_breaks_nothing() -> None:
    assert invariants.violations(MODEL, BASE) == ()


def test_the_names_are_designs_names() -> None:
    assert [n.split(" ", 1)[0] for n in invariants.INVARIANT_NAMES] == [
        "S1",
        "S2",
        "S3",
        "S4",
        "S5",
        "S6",
        "S7",
        "L1",
    ]


@pytest.mark.parametrize(
    ("s", "goal"),
    [
        (BASE, True),
        (state(durable=(L.PREPARED,)), False),  # a pending lease
        (state(durable=(L.PREPARED, L.ABORTED), owner=O.TOMBSTONED, inflight=1), False),
        (state(), False),  # an unclaimed artifact still on disk
        (state(durable=(L.PREPARED, L.COMMITTED), owner=O.PUBLISHED), True),  # claimed: kept
        (state(file=DELETED, durable=(L.PREPARED, L.ABORTED), owner=O.TOMBSTONED), True),
    ],
)
def test_l1_goal_is_quiescent_and_clean(s: SystemState, goal: bool) -> None:
    assert invariants.l1_goal(MODEL, s) is goal
