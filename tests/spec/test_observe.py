"""The spec explorer's adapter (spec/observe.py): its memo keys are complete.

The explorer answers S1-S7 once per ``SpecObserver.key`` and L1's goal once
per ``SpecObserver.goal_key``.  Claim: over every reachable state of a small
model, two states with the same key get the same answer, so no state is
judged on another state's facts.
"""

from __future__ import annotations

from collections import deque

import pytest
from toolswap.spec import invariants, variants
from toolswap.spec.observe import SpecObserver
from toolswap.spec.system import Bounds, Model, SystemState


def _reachable(model: Model) -> list[SystemState]:
    seen = {model.initial()}
    frontier = deque(seen)
    while frontier:
        for _, nxt in model.successors(frontier.popleft()):
            if nxt not in seen:
                seen.add(nxt)
                frontier.append(nxt)
    return list(seen)


SMALL = Bounds(artifacts=1, transactions=2, tamper=False)
#: mistakes whose broken states differ in parts the key must hold: the publishers
#: (a publish about to be sent), the rejections, the outside ghost, the owner
BROKEN = [
    "delete-folder-at-session-end",
    "not-found-is-absent",
    "gc-trusts-memory-path",
    "abort-before-tombstone",
    "release-before-remove",
]


@pytest.fixture(scope="module")
def states() -> tuple[Model, list[SystemState]]:
    model = Model(SMALL)
    return model, _reachable(model)


@pytest.mark.parametrize("name", ["correct", *BROKEN])
def test_states_with_one_key_break_the_same_invariants(name: str) -> None:
    model = Model(SMALL) if name == "correct" else variants.get(name).model(SMALL)
    reachable = _reachable(model)
    observe = SpecObserver(model)
    answers: dict[tuple[object, ...], object] = {}
    for s in reachable:
        found = invariants.violations_of(observe(s))
        assert answers.setdefault(observe.key(s), found) == found
    assert len(answers) < len(reachable)  # the memo does save work


def test_states_with_one_goal_key_agree_on_l1s_goal(
    states: tuple[Model, list[SystemState]],
) -> None:
    model, reachable = states
    observe = SpecObserver(model)
    answers: dict[tuple[object, ...], bool] = {}
    for s in reachable:
        reached = invariants.l1_reached(observe(s, claims=True))
        assert answers.setdefault(observe.goal_key(s), reached) is reached
    assert True in answers.values() and False in answers.values()
