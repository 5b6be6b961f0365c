"""The owner (the trusted Memory boundary): one record per transaction id.

Rules
=====

1. A transaction id's record is ``ABSENT``, ``PUBLISHED`` or ``TOMBSTONED``,
   with a ``generation`` that every applied change advances by one.
2. ``PUBLISH`` on ``ABSENT`` makes the reference visible.  Publication ids are
   stable: publishing an id that is already PUBLISHED changes nothing.
3. ``PUBLISH`` on ``TOMBSTONED`` is *refused*: a tombstone permanently refuses
   a late write or a replay of that transaction id.
4. ``REMOVE`` takes a PUBLISHED reference away and leaves a tombstone, so a
   late write or replay of the id is refused (promise O4): PUBLISHED and
   ABSENT become ``TOMBSTONED`` (a never-seen id is tombstoned too); removing
   a tombstoned id is a no-op (a retried removal whose first ack was lost
   succeeds).
5. ``SEAL`` turns an ``ABSENT`` id into ``TOMBSTONED``.  It is a compare-and-set
   on the generation the caller observed: if the generation moved, nothing is
   written and the answer is ``STALE``.  Sealing a sealed id is a no-op.
6. Sealing a PUBLISHED id is illegal (the key is missing from the table).
7. A fenced observation reports the state, the generation, whether an absence
   is sealed, and whether the stored identity matches the caller's; it may also
   be ``UNKNOWN`` (timeout, lagging replica): unknown is never absent.

Theory of operation
===================

The owner is the only party that can say whether a reference is (or can still
become) visible.  "Not found" once is not evidence: a write may be in flight or
a read view may lag.  Absence becomes a fact only when the owner *seals* it, by
a tombstone written as a CAS on the observed generation: the generation is the
owner's linearization point, so a publish that lands between the observation
and the seal makes the seal fail (``STALE``) instead of burying a visible
reference.  Because every applied change bumps the generation, an
ABSENT -> PUBLISHED -> ABSENT round trip cannot be mistaken for "nothing
happened" (no ABA).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

import attrs

from .errors import IllegalTransition
from .identity_enum import IdentityEnum

__all__ = [
    "OwnerState",
    "OwnerAction",
    "OwnerResult",
    "ObservedState",
    "SealResult",
    "OwnerRecord",
    "Observation",
    "OWNER_TRANSITIONS",
    "apply",
    "seal",
    "observe",
]


class OwnerState(IdentityEnum):
    """What the owner durably holds for one transaction id."""

    ABSENT = "ABSENT"
    PUBLISHED = "PUBLISHED"
    TOMBSTONED = "TOMBSTONED"


class OwnerAction(IdentityEnum):
    """A request to the owner about one transaction id."""

    PUBLISH = "publish"
    REMOVE = "remove"
    SEAL = "seal"


class OwnerResult(IdentityEnum):
    """How the owner answered a legal request."""

    APPLIED = "applied"  # the state changed; the generation advanced
    NOOP = "noop"  # already so; nothing written
    REFUSED = "refused"  # a tombstone refuses the write; nothing written


class ObservedState(enum.StrEnum):
    """What a fenced observation reports (O8); anything else an owner says counts as UNKNOWN.

    The one vocabulary for it: the reference owners, the conformance kit and
    the journal use these members (a ``StrEnum``: JSON writes the value).
    """

    PUBLISHED = "PUBLISHED"
    ABSENT = "ABSENT"
    UNKNOWN = "UNKNOWN"


class SealResult(IdentityEnum):
    """The answer to a seal (CAS on the observed generation)."""

    SEALED = "sealed"  # tombstone written now
    ALREADY_SEALED = "already_sealed"
    STALE = "stale"  # the generation moved: nothing written
    # The seal raised or gave no yes/no answer: a tombstone may or may not exist.
    # The model's owner always answers; a real adapter may not (reconcile row 4).
    UNKNOWN = "unknown"


_O = OwnerState
_R = OwnerResult
_Act = OwnerAction

#: (state, action) -> (next state, result).  A missing key is an illegal transition.
OWNER_TRANSITIONS: Mapping[tuple[OwnerState, OwnerAction], tuple[OwnerState, OwnerResult]] = (
    MappingProxyType(
        {
            (_O.ABSENT, _Act.PUBLISH): (_O.PUBLISHED, _R.APPLIED),
            (_O.PUBLISHED, _Act.PUBLISH): (_O.PUBLISHED, _R.NOOP),
            (_O.TOMBSTONED, _Act.PUBLISH): (_O.TOMBSTONED, _R.REFUSED),
            (_O.PUBLISHED, _Act.REMOVE): (_O.TOMBSTONED, _R.APPLIED),
            (_O.ABSENT, _Act.REMOVE): (_O.TOMBSTONED, _R.APPLIED),
            (_O.TOMBSTONED, _Act.REMOVE): (_O.TOMBSTONED, _R.NOOP),
            (_O.ABSENT, _Act.SEAL): (_O.TOMBSTONED, _R.APPLIED),
            (_O.TOMBSTONED, _Act.SEAL): (_O.TOMBSTONED, _R.NOOP),
        }
    )
)


class OwnerRecord(NamedTuple):
    """One transaction id's record: state, generation and the stored digest (0: none)."""

    state: OwnerState = OwnerState.ABSENT
    generation: int = 0
    digest: int = 0


@attrs.frozen
class Observation:
    """A fenced observation of one transaction id."""

    state: ObservedState
    generation: int
    sealed: bool
    identity_matches: bool


def apply(
    record: OwnerRecord, action: OwnerAction, digest: int = 0
) -> tuple[OwnerRecord, OwnerResult]:
    """Apply ``action``; raises :class:`IllegalTransition` if the table has no key.

    ``digest`` is the identity a PUBLISH stores.

    raises: IllegalTransition
    pre: record.generation >= 0
    post: (__return__[1] is _R.APPLIED) == (__return__[0].generation == record.generation + 1)
    post: implies(__return__[1] is not OwnerResult.APPLIED, __return__[0] == record)
    post: implies(record.state is _O.TOMBSTONED, __return__[0].state is _O.TOMBSTONED)
    """
    try:
        target, result = OWNER_TRANSITIONS[(record.state, action)]
    except KeyError:
        raise IllegalTransition("owner", record.state, action) from None
    if result is not OwnerResult.APPLIED:
        return record, result
    stored = digest if action is OwnerAction.PUBLISH else record.digest
    return OwnerRecord(state=target, generation=record.generation + 1, digest=stored), result


def seal(record: OwnerRecord, observed_generation: int) -> tuple[OwnerRecord, SealResult]:
    """Seal an absence by CAS on ``observed_generation``.

    pre: record.generation >= 0
    post: implies(__return__[1] is SealResult.SEALED, __return__[0].state is OwnerState.TOMBSTONED)
    post: implies(__return__[1] is SealResult.SEALED, record.generation == observed_generation)
    post: implies(__return__[1] is not SealResult.SEALED, __return__[0] == record)
    """
    if record.state is OwnerState.TOMBSTONED:
        return record, SealResult.ALREADY_SEALED
    if record.generation != observed_generation or record.state is not OwnerState.ABSENT:
        return record, SealResult.STALE
    sealed, _ = apply(record, OwnerAction.SEAL)
    return sealed, SealResult.SEALED


def observe(record: OwnerRecord, expected_digest: int, *, answered: bool = True) -> Observation:
    """A fenced observation; ``answered=False`` models a timeout (UNKNOWN).

    post: implies(not answered, __return__.state is ObservedState.UNKNOWN)
    post: implies(__return__.sealed, __return__.state is ObservedState.ABSENT)
    post: __return__.generation == record.generation
    """
    if not answered:
        return Observation(ObservedState.UNKNOWN, record.generation, False, False)
    if record.state is OwnerState.PUBLISHED:
        return Observation(
            ObservedState.PUBLISHED, record.generation, False, record.digest == expected_digest
        )
    sealed = record.state is OwnerState.TOMBSTONED
    return Observation(ObservedState.ABSENT, record.generation, sealed, False)


def implies(a: bool, b: bool) -> bool:
    """Logical implication, for contracts."""
    return (not a) or b
