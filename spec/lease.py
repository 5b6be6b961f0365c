"""The lease transaction: one state machine per transaction id.

Rules
=====

1. A transaction starts ``NEW`` (no record in the journal).
2. ``PREPARE`` moves it to ``PREPARED``.  A PREPARED lease protects its artifact
   with no expiry, whatever its ``retain_until`` and the orphan TTL, until it is
   reconciled.
3. From ``PREPARED`` exactly one of ``COMMIT`` (the owner has the reference) or
   ``ABORT`` (the owner sealed the absence, or explicitly rejected) happens.
4. ``RELEASE`` follows ``COMMITTED`` only, once the owner removed the reference.
5. Re-applying the phase a transaction is already in is idempotent for the
   terminal phases ``COMMITTED``, ``ABORTED`` and ``RELEASED``: nothing is
   appended.  ``PREPARE`` is never idempotent: an existing transaction id is
   never replayed.
6. Every other (state, action) pair is illegal: the key is missing from
   :data:`LEASE_TRANSITIONS` and :func:`step` raises :class:`IllegalTransition`.
7. A journal record names the state it moves its lease to, or is a
   :class:`LeaseNote`: ``CONFLICT`` (reconciliation saw the owner show another
   identity) changes no state and may only be written while the lease is
   ``PREPARED``.  ``NEW`` is never written: :data:`RECORD_PHASES` is what a
   record's phase may be.

Theory of operation
===================

The journal is an append-only log; a transaction's state is the fold of its
records.  Each record names the phase it moves to, so a record is legal exactly
when it is a transition of this table that *changes* the state.  Idempotent
re-application is how concurrent or retried callers (a publisher whose ack
arrived late, two reconcilers) converge without a second terminal event (S5):
the caller asks for the transition, the table answers "already there", and the
journal writes nothing.

The table is data.  :mod:`diagrams` draws SPEC.md's diagram from it, so the
picture cannot drift from the code.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import TypeAlias

from .errors import IllegalTransition
from .identity_enum import IdentityEnum

__all__ = [
    "LeaseState",
    "LeaseNote",
    "RecordPhase",
    "RECORD_PHASES",
    "LeaseAction",
    "LEASE_TRANSITIONS",
    "RECORD_ACTION",
    "step",
    "appends",
    "replay",
    "is_pending",
    "protects",
    "is_resolution",
]


class LeaseState(enum.StrEnum):
    """Where one transaction is, as folded from its journal records.

    The one vocabulary of lease states: the spec, the journal, reports and JSON
    all use these members (a ``StrEnum``, so JSON writes the value and the hash
    is the string's, computed in C and cached: as fast as identity for the
    explorer).
    """

    NEW = "new"  # no record yet; never written to a journal
    PREPARED = "PREPARED"
    COMMITTED = "COMMITTED"
    ABORTED = "ABORTED"
    RELEASED = "RELEASED"


class LeaseNote(enum.StrEnum):
    """A journal record that changes no state (rule 7)."""

    CONFLICT = "CONFLICT"


#: What a journal record's phase is: the state it moves to, or a note.
RecordPhase: TypeAlias = LeaseState | LeaseNote

#: Every phase a journal record may carry (``NEW`` is never written).
RECORD_PHASES: tuple[RecordPhase, ...] = (
    LeaseState.PREPARED,
    LeaseState.COMMITTED,
    LeaseState.ABORTED,
    LeaseState.RELEASED,
    LeaseNote.CONFLICT,
)


class LeaseAction(IdentityEnum):
    """What a caller asks the journal to do for one transaction."""

    PREPARE = "prepare"
    COMMIT = "commit"
    ABORT = "abort"
    RELEASE = "release"


_S = LeaseState
_A = LeaseAction

#: (state, action) -> next state.  A missing key is an illegal transition.
LEASE_TRANSITIONS: Mapping[tuple[LeaseState, LeaseAction], LeaseState] = MappingProxyType(
    {
        (_S.NEW, _A.PREPARE): _S.PREPARED,
        (_S.PREPARED, _A.COMMIT): _S.COMMITTED,
        (_S.PREPARED, _A.ABORT): _S.ABORTED,
        (_S.COMMITTED, _A.RELEASE): _S.RELEASED,
        # idempotent re-application of a terminal phase: nothing is appended
        (_S.COMMITTED, _A.COMMIT): _S.COMMITTED,
        (_S.ABORTED, _A.ABORT): _S.ABORTED,
        (_S.RELEASED, _A.RELEASE): _S.RELEASED,
    }
)

#: The action a journal record of a given phase stands for.
RECORD_ACTION: Mapping[LeaseState, LeaseAction] = MappingProxyType(
    {
        _S.PREPARED: _A.PREPARE,
        _S.COMMITTED: _A.COMMIT,
        _S.ABORTED: _A.ABORT,
        _S.RELEASED: _A.RELEASE,
    }
)


def step(state: LeaseState, action: LeaseAction) -> LeaseState:
    """The state after ``action``; raises :class:`IllegalTransition` if the table has no key.

    raises: IllegalTransition
    post: (state, action) in LEASE_TRANSITIONS
    post: __return__ is not LeaseState.NEW
    """
    try:
        return LEASE_TRANSITIONS[(state, action)]
    except KeyError:
        raise IllegalTransition("lease", state, action) from None


def appends(state: LeaseState, action: LeaseAction) -> bool:
    """Whether a legal ``action`` from ``state`` writes a journal record (it changes the state).

    raises: IllegalTransition
    post: __return__ == (step(state, action) is not state)
    post: implies(action is LeaseAction.PREPARE, __return__)
    """
    return step(state, action) is not state


def replay(records: Iterable[LeaseState]) -> LeaseState:
    """Fold a transaction's journal records (their phases, oldest first) into its state.

    A record that is not a state-changing transition is corruption: raises
    :class:`IllegalTransition` (the journal's recovery calls it corruption).
    """
    state = LeaseState.NEW
    for phase in records:
        action = RECORD_ACTION.get(phase)
        if action is None or not appends(state, action):
            raise IllegalTransition("lease record", state, phase)
        state = step(state, action)
    return state


def is_pending(state: LeaseState) -> bool:
    """PREPARED: the owner's answer is still needed (``pending_transaction_ids``).

    post: __return__ == (state is LeaseState.PREPARED)
    """
    return state is LeaseState.PREPARED


def protects(state: LeaseState) -> bool:
    """Whether a lease in ``state`` is an active claim on its artifact.

    post: implies(state is LeaseState.PREPARED, __return__)
    post: implies(state in (_S.ABORTED, _S.RELEASED, _S.NEW), not __return__)
    """
    return state in (LeaseState.PREPARED, LeaseState.COMMITTED)


def is_resolution(state: LeaseState) -> bool:
    """COMMITTED or ABORTED: the one event that resolves a PREPARED lease (S5).

    post: implies(__return__, not is_pending(state) and state is not _S.NEW)
    post: not __return__ or (_S.PREPARED, RECORD_ACTION[state]) in LEASE_TRANSITIONS
    """
    return state in (LeaseState.COMMITTED, LeaseState.ABORTED)


def implies(a: bool, b: bool) -> bool:
    """Logical implication, for contracts."""
    return (not a) or b
