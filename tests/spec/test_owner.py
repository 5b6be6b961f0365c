"""The owner machine: table rows, the CAS seal, fenced observations."""

from __future__ import annotations

import itertools

import pytest
from toolswap.spec import owner
from toolswap.spec.errors import IllegalTransition
from toolswap.spec.owner import ObservedState, OwnerAction, OwnerRecord, OwnerResult, SealResult
from toolswap.spec.owner import OwnerState as O

A = OwnerAction
R = OwnerResult  # short names keep the table below one row per line

# docs/design.md section 6 and promise O4, written out independently of the table under test:
# a removal leaves a tombstone, and a never-seen id is tombstoned too.
EXPECTED = {
    (O.ABSENT, A.PUBLISH): (O.PUBLISHED, R.APPLIED),
    (O.PUBLISHED, A.PUBLISH): (O.PUBLISHED, R.NOOP),
    (O.TOMBSTONED, A.PUBLISH): (O.TOMBSTONED, R.REFUSED),
    (O.PUBLISHED, A.REMOVE): (O.TOMBSTONED, R.APPLIED),
    (O.ABSENT, A.REMOVE): (O.TOMBSTONED, R.APPLIED),
    (O.TOMBSTONED, A.REMOVE): (O.TOMBSTONED, R.NOOP),
    (O.ABSENT, A.SEAL): (O.TOMBSTONED, R.APPLIED),
    (O.TOMBSTONED, A.SEAL): (O.TOMBSTONED, R.NOOP),
}


@pytest.mark.parametrize(("pair", "outcome"), EXPECTED.items(), ids=str)
def test_each_row_gives_its_state_result_and_generation(
    pair: tuple[O, OwnerAction], outcome: tuple[O, OwnerResult]
) -> None:
    state, action = pair
    before = OwnerRecord(state=state, generation=2, digest=7)
    after, result = owner.apply(before, action, digest=9)
    assert (after.state, result) == outcome
    assert after.generation == (3 if result is R.APPLIED else 2)


def test_the_table_has_exactly_the_design_rows() -> None:
    assert dict(owner.OWNER_TRANSITIONS) == EXPECTED


@pytest.mark.parametrize("pair", [p for p in itertools.product(O, A) if p not in EXPECTED], ids=str)
def test_sealing_a_published_reference_is_illegal(pair: tuple[O, OwnerAction]) -> None:
    with pytest.raises(IllegalTransition):
        owner.apply(OwnerRecord(state=pair[0]), pair[1])


def test_publish_stores_the_digest_and_remove_keeps_the_generation_moving() -> None:
    published, _ = owner.apply(OwnerRecord(), A.PUBLISH, digest=5)
    removed, _ = owner.apply(published, A.REMOVE)
    assert (published.digest, published.generation) == (5, 1)
    assert (removed.state, removed.generation) == (O.TOMBSTONED, 2)  # no ABA: a new generation


def test_a_removal_refuses_a_late_publish_of_the_id_forever() -> None:
    # O4: a replay or a write still in flight cannot resurrect a removed reference
    published, _ = owner.apply(OwnerRecord(), A.PUBLISH, digest=5)
    removed, _ = owner.apply(published, A.REMOVE)
    assert owner.apply(removed, A.PUBLISH, digest=5) == (removed, R.REFUSED)


def test_a_tombstone_refuses_a_late_publish_forever() -> None:
    sealed, result = owner.seal(OwnerRecord(), observed_generation=0)
    assert result is SealResult.SEALED
    late, answer = owner.apply(sealed, A.PUBLISH, digest=1)
    assert (late, answer) == (sealed, R.REFUSED)


@pytest.mark.parametrize(
    ("record", "observed", "expected"),
    [
        (OwnerRecord(O.ABSENT, 0), 0, SealResult.SEALED),
        (OwnerRecord(O.ABSENT, 2), 1, SealResult.STALE),  # generation moved since the observation
        (OwnerRecord(O.PUBLISHED, 1), 1, SealResult.STALE),  # a publish landed meanwhile
        (OwnerRecord(O.TOMBSTONED, 1), 0, SealResult.ALREADY_SEALED),
    ],
)
def test_seal_is_a_cas_on_the_observed_generation(
    record: OwnerRecord, observed: int, expected: SealResult
) -> None:
    after, result = owner.seal(record, observed)
    assert result is expected
    if expected is SealResult.SEALED:
        assert (after.state, after.generation) == (O.TOMBSTONED, record.generation + 1)
    else:
        assert after == record


@pytest.mark.parametrize(
    ("record", "answered", "state", "sealed", "matches"),
    [
        (OwnerRecord(O.PUBLISHED, 1, 5), True, ObservedState.PUBLISHED, False, True),
        (OwnerRecord(O.PUBLISHED, 1, 6), True, ObservedState.PUBLISHED, False, False),
        (OwnerRecord(O.ABSENT, 0), True, ObservedState.ABSENT, False, False),
        (OwnerRecord(O.TOMBSTONED, 1), True, ObservedState.ABSENT, True, False),
        (OwnerRecord(O.PUBLISHED, 1, 5), False, ObservedState.UNKNOWN, False, False),
    ],
)
def test_a_fenced_observation_reports_what_the_owner_holds(
    record: OwnerRecord, answered: bool, state: ObservedState, sealed: bool, matches: bool
) -> None:
    obs = owner.observe(record, expected_digest=5, answered=answered)
    assert (obs.state, obs.sealed, obs.identity_matches) == (state, sealed, matches)
    assert obs.generation == record.generation
