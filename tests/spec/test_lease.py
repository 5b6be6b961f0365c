"""The lease machine: each row of the table, and everything the table leaves out."""

from __future__ import annotations

import itertools

import pytest
from toolswap.spec import lease
from toolswap.spec.errors import IllegalTransition
from toolswap.spec.lease import LeaseAction as A
from toolswap.spec.lease import LeaseState as S

# Written out again on purpose: docs/design.md section 5, not a re-read of the table under test.
EXPECTED = {
    (S.NEW, A.PREPARE): S.PREPARED,
    (S.PREPARED, A.COMMIT): S.COMMITTED,
    (S.PREPARED, A.ABORT): S.ABORTED,
    (S.COMMITTED, A.RELEASE): S.RELEASED,
    (S.COMMITTED, A.COMMIT): S.COMMITTED,
    (S.ABORTED, A.ABORT): S.ABORTED,
    (S.RELEASED, A.RELEASE): S.RELEASED,
}
ILLEGAL = [pair for pair in itertools.product(S, A) if pair not in EXPECTED]


@pytest.mark.parametrize(("pair", "target"), EXPECTED.items(), ids=str)
def test_each_legal_row_leads_where_design_says(pair: tuple[S, A], target: S) -> None:
    assert lease.step(*pair) is target


def test_the_table_has_no_row_design_does_not_list() -> None:
    assert dict(lease.LEASE_TRANSITIONS) == EXPECTED


@pytest.mark.parametrize("pair", ILLEGAL, ids=str)
def test_every_other_pair_raises_illegal_transition(pair: tuple[S, A]) -> None:
    with pytest.raises(IllegalTransition) as caught:
        lease.step(*pair)
    assert (caught.value.machine, caught.value.state, caught.value.action) == ("lease", *pair)


@pytest.mark.parametrize("phase", [S.COMMITTED, S.ABORTED, S.RELEASED])
def test_reapplying_a_terminal_phase_appends_nothing(phase: S) -> None:
    action = lease.RECORD_ACTION[phase]
    assert lease.step(phase, action) is phase
    assert lease.appends(phase, action) is False


def test_prepare_is_never_idempotent() -> None:
    assert lease.appends(S.NEW, A.PREPARE) is True
    with pytest.raises(IllegalTransition):
        lease.step(S.PREPARED, A.PREPARE)


@pytest.mark.parametrize(
    ("records", "state"),
    [
        ((), S.NEW),
        ((S.PREPARED,), S.PREPARED),
        ((S.PREPARED, S.COMMITTED), S.COMMITTED),
        ((S.PREPARED, S.ABORTED), S.ABORTED),
        ((S.PREPARED, S.COMMITTED, S.RELEASED), S.RELEASED),
    ],
)
def test_replay_folds_a_legal_history(records: tuple[S, ...], state: S) -> None:
    assert lease.replay(records) is state


@pytest.mark.parametrize(
    "records",
    [
        (S.COMMITTED,),  # no PREPARED first
        (S.PREPARED, S.PREPARED),  # a replayed transaction id
        (S.PREPARED, S.COMMITTED, S.COMMITTED),  # a second terminal event (S5)
        (S.PREPARED, S.COMMITTED, S.ABORTED),
        (S.PREPARED, S.ABORTED, S.RELEASED),
        (S.NEW,),  # not a record phase at all
    ],
)
def test_replay_refuses_a_record_that_is_not_a_state_change(records: tuple[S, ...]) -> None:
    with pytest.raises(IllegalTransition):
        lease.replay(records)


@pytest.mark.parametrize(
    ("state", "pending", "protects", "resolution"),
    [
        (S.NEW, False, False, False),
        (S.PREPARED, True, True, False),
        (S.COMMITTED, False, True, True),
        (S.ABORTED, False, False, True),
        (S.RELEASED, False, False, False),
    ],
)
def test_what_each_phase_means_for_claims(
    state: S, pending: bool, protects: bool, resolution: bool
) -> None:
    assert (lease.is_pending(state), lease.protects(state), lease.is_resolution(state)) == (
        pending,
        protects,
        resolution,
    )
