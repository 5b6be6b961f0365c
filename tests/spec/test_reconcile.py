"""The reconciliation decision table of docs/design.md section 6, one row per test."""

from __future__ import annotations

import pytest
from toolswap.spec import reconcile
from toolswap.spec.errors import IllegalTransition
from toolswap.spec.lease import LeaseAction
from toolswap.spec.lease import LeaseState as L
from toolswap.spec.owner import Observation, ObservedState, SealResult
from toolswap.spec.reconcile import ObservationKind as K
from toolswap.spec.reconcile import ReconcileStatus as St

# (lease, observation) -> (seal first, journal action, status): docs/design.md section 6 verbatim.
PREPARED_ROWS = [
    (K.PUBLISHED_MATCH, False, LeaseAction.COMMIT, St.COMMITTED),
    (K.PUBLISHED_MISMATCH, False, None, St.PENDING_CONFLICT),
    (K.UNKNOWN, False, None, St.PENDING_UNKNOWN),
    (K.ABSENT_UNSEALED, True, LeaseAction.ABORT, St.ABORTED),
    (K.ABSENT_SEALED, False, LeaseAction.ABORT, St.ABORTED),
]
TERMINAL = [
    (L.COMMITTED, St.ALREADY_COMMITTED),
    (L.ABORTED, St.ALREADY_ABORTED),
    (L.RELEASED, St.ALREADY_RELEASED),
]


@pytest.mark.parametrize(("kind", "seal", "action", "status"), PREPARED_ROWS, ids=str)
def test_a_prepared_lease_follows_its_row(
    kind: K, seal: bool, action: LeaseAction | None, status: St
) -> None:
    d = reconcile.decide(L.PREPARED, kind)
    assert (d.seal_first, d.journal_action, d.status) == (seal, action, status)


@pytest.mark.parametrize(("state", "status"), TERMINAL, ids=str)
@pytest.mark.parametrize("kind", list(K), ids=str)
def test_a_terminal_lease_does_nothing_whatever_the_owner_says(
    state: L, status: St, kind: K
) -> None:
    d = reconcile.decide(state, kind)
    assert (d.seal_first, d.journal_action, d.status) == (False, None, status)


@pytest.mark.parametrize("kind", list(K), ids=str)
def test_reconciling_an_unknown_transaction_is_illegal(kind: K) -> None:
    with pytest.raises(IllegalTransition):
        reconcile.decide(L.NEW, kind)


def test_only_a_conflict_journals_the_observed_identity() -> None:
    recorded = {key for key, d in reconcile.RECONCILE_TABLE.items() if d.record_observed}
    assert recorded == {(L.PREPARED, K.PUBLISHED_MISMATCH)}


def test_the_table_has_exactly_the_rows_above() -> None:
    assert len(reconcile.RECONCILE_TABLE) == len(PREPARED_ROWS) + len(TERMINAL) * len(K)


@pytest.mark.parametrize(
    ("result", "action", "status"),
    [
        (SealResult.SEALED, LeaseAction.ABORT, St.ABORTED),
        (SealResult.ALREADY_SEALED, LeaseAction.ABORT, St.ABORTED),
        (SealResult.STALE, None, St.PENDING_STALE),
        (SealResult.UNKNOWN, None, St.PENDING_UNKNOWN),
    ],
)
def test_the_seal_answer_decides_whether_aborted_is_appended(
    result: SealResult, action: LeaseAction | None, status: St
) -> None:
    d = reconcile.after_seal(result)
    assert (d.journal_action, d.status, d.seal_first) == (action, status, False)


@pytest.mark.parametrize(
    ("obs", "kind"),
    [
        (Observation(ObservedState.PUBLISHED, 1, False, True), K.PUBLISHED_MATCH),
        (Observation(ObservedState.PUBLISHED, 1, False, False), K.PUBLISHED_MISMATCH),
        (Observation(ObservedState.UNKNOWN, 1, False, True), K.UNKNOWN),
        (Observation(ObservedState.ABSENT, 0, False, False), K.ABSENT_UNSEALED),
        (Observation(ObservedState.ABSENT, 1, True, False), K.ABSENT_SEALED),
    ],
    ids=str,
)
def test_an_observation_maps_to_one_row(obs: Observation, kind: K) -> None:
    assert reconcile.classify_observation(obs) is kind
