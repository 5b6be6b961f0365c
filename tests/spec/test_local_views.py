"""Each actor's moves are memoized per local view; the view's key must hold all it reads.

``Model(check_moves=True)`` works every memoized move out again on the state
at hand and raises :class:`StaleMoves` when the replay differs, so an
exploration with it on proves, state by state, that every key was complete
for the states that bounds reach.
"""

from __future__ import annotations

import pytest
from toolswap.spec import variants
from toolswap.spec.actors import FileStatus
from toolswap.spec.errors import StaleMoves
from toolswap.spec.explorer import explore
from toolswap.spec.system import Bounds, FileSlot, Model

#: the optional faults, in two sizes a checked run finishes in seconds
CHECKED_BOUNDS = {
    "foreign-publish-and-expiry": Bounds(
        artifacts=1, transactions=2, foreign_publish=True, lease_expiry=True
    ),
    "two-reconcilers": Bounds(
        artifacts=1,
        transactions=2,
        max_generation=1,
        concurrent_reconcilers=True,
        unknown=False,
        tamper=False,
        foreign_entry=False,
    ),
}


@pytest.mark.parametrize("name", list(CHECKED_BOUNDS))
def test_checked_exploration_matches_the_unchecked_one(name: str) -> None:
    bounds = CHECKED_BOUNDS[name]
    checked = explore(Model(bounds, check_moves=True))
    plain = explore(Model(bounds))
    assert checked.ok and checked.complete
    assert (checked.states, checked.transitions) == (plain.states, plain.transitions)


@pytest.mark.parametrize("name", variants.names())
def test_checked_variant_finds_the_same_shortest_trace(name: str) -> None:
    variant = variants.get(name)
    bounds = variant.bounds()
    checked = explore(Model(bounds, frozenset({variant.mistake}), check_moves=True))
    plain = explore(variant.model())
    assert checked.violation is not None and plain.violation is not None
    assert checked.violation.trace == plain.violation.trace
    assert checked.violation.invariants == plain.violation.invariants


def test_a_key_that_misses_what_the_actor_reads_raises_stale_moves() -> None:
    model = Model(check_moves=True)
    empty = model.initial()
    written = empty._replace(files=(FileSlot(FileStatus.PRESENT, 1),) + empty.files[1:])
    model._local(empty, ("externalizer-without-files",), model._externalizer)
    with pytest.raises(StaleMoves, match="externalizer-without-files"):
        model._local(written, ("externalizer-without-files",), model._externalizer)


def test_without_the_check_a_stale_key_replays_the_other_states_moves() -> None:
    # why the check exists: the memo alone cannot tell a stale key from a good one
    model = Model()
    empty = model.initial()
    written = empty._replace(files=(FileSlot(FileStatus.PRESENT, 1),) + empty.files[1:])
    stale = model._local(empty, ("externalizer-without-files",), model._externalizer)
    replayed = model._local(written, ("externalizer-without-files",), model._externalizer)
    assert [step for step, _ in replayed] == [step for step, _ in stale]
    assert replayed != list(model._externalizer(written))
