"""Owner reconciliation: the decision table of docs/design.md section 6.

Rules
=====

For a transaction whose lease is PREPARED, a fenced observation of the owner
decides what the journal does:

1. PUBLISHED, source id and full digest match: append COMMITTED inside the
   fence -> ``committed``.
2. PUBLISHED, identity differs: append a CONFLICT record naming the observed
   identity inside the fence, and report only once it is durable ->
   ``pending_conflict``.  The lease stays PREPARED; it protects its intent
   *and* every identity journalled as a conflict for it, with no expiry,
   until it stops protecting (RELEASED after the owner removed the reference,
   or ABORTED after a sealed absence: then the owner no longer shows it).
3. UNKNOWN: nothing -> ``pending_unknown``.
4. ABSENT, not sealed: the owner seals by CAS on the observed generation, and
   only then is ABORTED appended -> ``aborted``; if the generation moved before
   the seal, nothing -> ``pending_stale``; if the seal gave no answer (it
   raised, or said neither yes nor no), nothing -> ``pending_unknown``: the
   tombstone may exist, so absence is not proven.
5. ABSENT, already sealed: append ABORTED, no second seal -> ``aborted``.
6. A lease that is already terminal: nothing, whatever the owner says ->
   ``already_committed`` / ``already_aborted`` / ``already_released``.
7. Reconciling a transaction the journal does not know (NEW) is illegal: the key
   is missing and :func:`decide` raises :class:`IllegalTransition`.

Theory of operation
===================

Reconciliation resolves the leases that a crash or a lost acknowledgement left
PREPARED.  It may only turn *evidence* into a terminal event: a visible
reference with the right identity is evidence of COMMITTED; a sealed absence
(tombstone durable first, S3) is evidence of ABORTED.  Everything else keeps
the lease pending, and a pending lease keeps protecting its artifact (S1).
A conflict is the one observation that is evidence of neither: the owner
shows, under the transaction id, a reference toolswap did not intend (another
writer, another artifact).  Until an operator fixes the owner, that reference
is visible, so the artifact it names must outlive it; only the journal can
tell the GC so, hence the CONFLICT record before the report.
The table is keyed by (lease state, observation kind); the seal's own outcome
is a second, smaller table.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

import attrs

from .errors import IllegalTransition
from .identity_enum import IdentityEnum
from .lease import LeaseAction, LeaseState
from .owner import Observation, ObservedState, SealResult

__all__ = [
    "ObservationKind",
    "ReconcileStatus",
    "Decision",
    "RECONCILE_TABLE",
    "SEAL_TABLE",
    "classify_observation",
    "decide",
    "after_seal",
]


class ObservationKind(IdentityEnum):
    """An observation reduced to the cases the decision table distinguishes."""

    PUBLISHED_MATCH = "PUBLISHED, identity matches"
    PUBLISHED_MISMATCH = "PUBLISHED, identity differs"
    UNKNOWN = "UNKNOWN"
    ABSENT_UNSEALED = "ABSENT, not sealed"
    ABSENT_SEALED = "ABSENT, already sealed"


class ReconcileStatus(enum.StrEnum):
    """The status a reconciliation report carries: one vocabulary for the spec, reports and JSON."""

    COMMITTED = "committed"
    PENDING_CONFLICT = "pending_conflict"
    PENDING_UNKNOWN = "pending_unknown"
    ABORTED = "aborted"
    PENDING_STALE = "pending_stale"
    ALREADY_COMMITTED = "already_committed"
    ALREADY_ABORTED = "already_aborted"
    ALREADY_RELEASED = "already_released"

    @property
    def is_pending(self) -> bool:
        """The lease stays PREPARED: the owner's answer is still needed."""
        return self.value.startswith("pending_")


@attrs.frozen
class Decision:
    """What to do: seal first or not, which journal action (None: nothing), the status.

    ``record_observed``: journal the observed identity (a CONFLICT record,
    durable before the status is reported), so the lease protects it too.
    """

    seal_first: bool
    journal_action: LeaseAction | None
    status: ReconcileStatus
    record_observed: bool = False


_K = ObservationKind
_St = ReconcileStatus
_ABSENT = (_K.ABSENT_SEALED, _K.ABSENT_UNSEALED)
_SEAL_DONE = (SealResult.SEALED, SealResult.ALREADY_SEALED)


def _rows() -> dict[tuple[LeaseState, ObservationKind], Decision]:
    rows: dict[tuple[LeaseState, ObservationKind], Decision] = {
        (LeaseState.PREPARED, _K.PUBLISHED_MATCH): Decision(
            False, LeaseAction.COMMIT, _St.COMMITTED
        ),
        (LeaseState.PREPARED, _K.PUBLISHED_MISMATCH): Decision(
            False, None, _St.PENDING_CONFLICT, record_observed=True
        ),
        (LeaseState.PREPARED, _K.UNKNOWN): Decision(False, None, _St.PENDING_UNKNOWN),
        (LeaseState.PREPARED, _K.ABSENT_UNSEALED): Decision(True, LeaseAction.ABORT, _St.ABORTED),
        (LeaseState.PREPARED, _K.ABSENT_SEALED): Decision(False, LeaseAction.ABORT, _St.ABORTED),
    }
    terminal = {
        LeaseState.COMMITTED: _St.ALREADY_COMMITTED,
        LeaseState.ABORTED: _St.ALREADY_ABORTED,
        LeaseState.RELEASED: _St.ALREADY_RELEASED,
    }
    for state, status in terminal.items():
        for kind in ObservationKind:
            rows[(state, kind)] = Decision(False, None, status)
    return rows


#: (lease state, observation kind) -> decision.  A missing key is illegal.
RECONCILE_TABLE: Mapping[tuple[LeaseState, ObservationKind], Decision] = MappingProxyType(_rows())

#: The seal's outcome (row 4) -> decision.
SEAL_TABLE: Mapping[SealResult, Decision] = MappingProxyType(
    {
        SealResult.SEALED: Decision(False, LeaseAction.ABORT, _St.ABORTED),
        SealResult.ALREADY_SEALED: Decision(False, LeaseAction.ABORT, _St.ABORTED),
        SealResult.STALE: Decision(False, None, _St.PENDING_STALE),
        SealResult.UNKNOWN: Decision(False, None, _St.PENDING_UNKNOWN),
    }
)


def classify_observation(observation: Observation) -> ObservationKind:
    """Reduce an observation to its decision-table row.

    post: implies(observation.state is ObservedState.UNKNOWN, __return__ is ObservationKind.UNKNOWN)
    post: implies(__return__ is ObservationKind.PUBLISHED_MATCH, observation.identity_matches)
    """
    if observation.state is ObservedState.UNKNOWN:
        return ObservationKind.UNKNOWN
    if observation.state is ObservedState.PUBLISHED:
        if observation.identity_matches:
            return ObservationKind.PUBLISHED_MATCH
        return ObservationKind.PUBLISHED_MISMATCH
    if observation.sealed:
        return ObservationKind.ABSENT_SEALED
    return ObservationKind.ABSENT_UNSEALED


def decide(state: LeaseState, kind: ObservationKind) -> Decision:
    """The decision for a lease in ``state`` given an observation of ``kind``.

    raises: IllegalTransition
    post: implies(__return__.journal_action is LeaseAction.COMMIT, kind is _K.PUBLISHED_MATCH)
    post: implies(__return__.journal_action is LeaseAction.ABORT, kind in _ABSENT)
    post: implies(state is not LeaseState.PREPARED, __return__.journal_action is None)
    post: implies(state is not LeaseState.PREPARED, not __return__.seal_first)
    post: implies(__return__.seal_first, kind is ObservationKind.ABSENT_UNSEALED)
    post: implies(__return__.record_observed, kind is ObservationKind.PUBLISHED_MISMATCH)
    post: implies(__return__.record_observed, state is LeaseState.PREPARED)
    """
    try:
        return RECONCILE_TABLE[(state, kind)]
    except KeyError:
        raise IllegalTransition("reconcile", state, kind) from None


def after_seal(result: SealResult) -> Decision:
    """The decision once the seal of row 4 answered.

    post: (__return__.journal_action is LeaseAction.ABORT) == (result in _SEAL_DONE)
    """
    return SEAL_TABLE[result]


def implies(a: bool, b: bool) -> bool:
    """Logical implication, for contracts."""
    return (not a) or b
