"""The observable state: what the invariants of docs/design.md section 8 are judged on.

Rules
=====

1. An :class:`Observable` is what anyone watching the system from outside
   can tell: per transaction id, the journal's records and what the owner
   shows (:class:`LeaseView`); per artifact of ours, whether its bytes are
   there and whether toolswap ever wrote a second content under its name
   (:class:`ArtifactView`); and every path outside the session that an
   operation touched.
2. The invariants (:mod:`invariants`) read nothing else.  The spec explorer,
   the crash explorer and the stateful machine each build an
   :class:`Observable` from their own state through one small adapter
   (:mod:`observe` for the model, ``faultinject/observe.py`` for the real
   code), and call the same functions on it.
3. A fact an adapter cannot see at all is given its safe default and the
   adapter says why in a comment (the model, for instance, has no bytes, so
   every artifact it keeps is intact by construction).
4. Views are named tuples of booleans, strings and enum members: they hash
   in C, so the spec explorer can memoize per-transaction work.

Theory of operation
===================

The three checkers used to be written three times over three state shapes,
and a rule changed in one could pass while the others disagreed.  Here the
shape is fixed and small.  Some facts are *ghosts* (history the state alone
would forget): ``unprepared_publish`` records that the owner once took a
publish while the PREPARED record was not durable, ``acknowledged`` that the
owner once acknowledged a publish, ``reported`` that an operator was told
about a conflict.  The model carries them as state; the real checkers keep
them in their watched owner.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from .identity_enum import IdentityEnum
from .lease import LeaseState

__all__ = ["Shown", "LeaseView", "ArtifactView", "Observable"]


class Shown(IdentityEnum):
    """What the owner holds for a transaction id, as its fenced view tells it."""

    NOTHING = "nothing"
    REFERENCE = "reference"  # the transaction's own reference: its intent's artifact and digest
    OTHER = "other"  # a reference with another identity (another writer, a conflict)
    TOMBSTONE = "tombstone"


class LeaseView(NamedTuple):
    """One transaction id: its journal records and what the owner shows for it."""

    txn: str
    #: the artifact name the lease's intent names (for an id with no lease: the one its
    #: visible reference names)
    artifact: str
    #: every journal record of the id, oldest first (CONFLICT notes are not lease events)
    records: tuple[LeaseState, ...] = ()
    #: False once a COMMITTED lease's ``retain_until`` has passed (S1's one exception)
    retained: bool = True
    shown: Shown = Shown.NOTHING
    #: the artifact an OTHER reference names, when it is one of ours ("" otherwise)
    other: str = ""
    #: that OTHER reference was reported to the operator as ``pending_conflict`` (ghost)
    reported: bool = False
    #: a publish the owner would still accept is in flight or about to be sent
    may_land: bool = False
    #: a publish or tombstone request is in flight and not yet applied
    in_flight: bool = False
    #: the owner refused the id before any write (an explicit rejection, S3)
    rejected: bool = False
    #: the owner once acknowledged a publish of this id (ghost, S3)
    acknowledged: bool = False
    #: the owner once took a publish while the PREPARED record was not durable (ghost, S2)
    unprepared_publish: bool = False
    #: the artifact holds the bytes the intent names (or, after a tamper, the tamper's bytes)
    intact: bool = True
    #: a durably journalled conflict the owner still shows: left to the operator (L1)
    awaits_operator: bool = False

    @property
    def state(self) -> LeaseState:
        return self.records[-1] if self.records else LeaseState.NEW


class ArtifactView(NamedTuple):
    """One artifact name of ours (entries toolswap did not write are not listed)."""

    name: str
    present: bool
    #: it existed and its bytes are gone (a name never written is neither)
    deleted: bool = False
    #: toolswap wrote a second content under the name (S6)
    rewritten: bool = False
    #: a new externalization took the name of one that existed (S6)
    reused: bool = False
    #: a claim that cleanup honours protects it, or the owner (cleanup's second witness)
    #: shows a visible reference naming it (L1: an unclaimed survivor is not done)
    claimed: bool = False
    #: it was deleted while its writer was still writing it (ghost, S1.writing)
    cut_short: bool = False


class Observable(NamedTuple):
    """Everything the invariants read."""

    leases: tuple[LeaseView, ...]
    artifacts: Mapping[str, ArtifactView]
    #: one sentence per operation that touched a path outside the session (S7)
    outside: tuple[str, ...] = ()
    #: how the journal's verified records changed, "" when they did not (S6)
    evidence_changed: str = ""
    #: the owner keeps contract O4: removing a reference leaves a tombstone that refuses a
    #: late write (the real owners and the model's owner, rule 4 of spec/owner.py, all do)
    removal_tombstones: bool = False
