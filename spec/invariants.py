"""The invariants of docs/design.md section 8, as predicates over :class:`system.SystemState`.

Each safety predicate returns ``None`` when it holds, or one plain sentence
saying what is wrong.  The names are the ones used in docs/design.md, the tests and the
docs: S1 ... S7 and L1.

* **S1 no dangling reference**: an artifact is never deleted while a
  reference to it is visible in the owner, or may still become visible (a
  PREPARED lease, a request in flight or a publisher about to send, and no
  durable tombstone); and an artifact that a reported ``pending_conflict``
  names (present when it was reported) is never deleted while the owner still
  shows that reference (the operator was told the reference is there, so it
  must still work; one deleted before anyone could know was lost to the other
  writer, not to a rule of ours).  A COMMITTED lease past its
  ``retain_until`` is outside S1: the caller bounded how long its reference
  needs the artifact, and cleanup may delete it from then on.  A PREPARED
  lease has no such way out: it protects whatever its expiry.
* **S2 prepare before publish**: the owner holds a reference only if that
  transaction's PREPARED record is durable.
* **S3 tombstone before abort**: an ABORTED record exists only if the owner's
  tombstone for that transaction is durable, or the owner explicitly rejected
  it before any write.
* **S4 remove before release**: a RELEASED record exists only if the owner no
  longer shows the reference.
* **S5 one terminal event**: at most one COMMITTED-or-ABORTED record and at
  most one RELEASED record per transaction, ever.
* **S6 append-only evidence**: toolswap writes each artifact name once; the
  name is bound to one content forever.  (The journal side of S6 is
  structural here: records are only ever appended, and the lease table
  refuses a record that is not a state-changing transition.)
* **S7 nothing outside**: no operation reads or deletes a path outside the
  session's trusted ``tool-results/``.
* **L1 progress** (checked by :mod:`explorer`): from every reachable state,
  fault-free steps that start no new work reach :func:`l1_goal`: no pending
  lease, no request in flight, every artifact without an active claim deleted.
  A PREPARED lease whose conflict is journalled durably and still shown by
  the owner is left to the operator (nobody in the model fixes the owner).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from . import lease
from .actors import FileStatus, PublisherPc
from .lease import LeaseState
from .owner import OwnerState
from .system import JournalTxn, Model, OwnerSlot, SystemState, artifact_name, txn_name

__all__ = [
    "s1_no_dangling_reference",
    "s2_prepare_before_publish",
    "s3_tombstone_before_abort",
    "s4_remove_before_release",
    "s5_one_terminal_event",
    "s6_append_only_evidence",
    "s7_nothing_outside",
    "SAFETY",
    "INVARIANT_NAMES",
    "violations",
    "l1_goal",
]

Check = Callable[[Model, SystemState], "str | None"]


def may_become_visible(model: Model, s: SystemState, t: int) -> bool:
    """A reference for ``t`` could still appear: no durable tombstone, and something in flight."""
    o = s.owner[t]
    if o.record.state is OwnerState.TOMBSTONED:
        return False
    return (
        o.inflight != 0
        or s.journal[t].state is LeaseState.PREPARED
        or s.publishers[t] in (PublisherPc.PREPARING, PublisherPc.SENT)
    )


def s1_no_dangling_reference(model: Model, s: SystemState) -> str | None:
    """S1 no dangling reference."""
    for t in range(len(s.journal)):
        a = model.artifact_of(t)
        if s.files[a].status is not FileStatus.DELETED:
            continue
        txn = s.journal[t]
        if txn.expired and txn.state is LeaseState.COMMITTED:  # retention the caller bounded
            continue
        o = s.owner[t]
        if o.record.state is OwnerState.PUBLISHED and o.names < 0:  # names < 0: names ``a``
            return f"{artifact_name(a)} is deleted while {txn_name(t)}'s reference to it is visible"
        if may_become_visible(model, s, t):
            return (
                f"{artifact_name(a)} is deleted while {txn_name(t)}'s reference "
                "may still become visible"
            )
    for t, o in enumerate(s.owner):
        a = o.reported
        if (
            a >= 0
            and o.names == a
            and o.record.state is OwnerState.PUBLISHED
            and s.files[a].status is FileStatus.DELETED
        ):
            return (
                f"{artifact_name(a)} is deleted while {txn_name(t)}'s reference to it, "
                "reported as pending_conflict, is visible"
            )
    return None


def s2_prepare_before_publish(model: Model, s: SystemState) -> str | None:
    """S2 prepare before publish."""
    for t, o in enumerate(s.owner):
        if (
            o.record.state is OwnerState.PUBLISHED
            and LeaseState.PREPARED not in s.journal[t].durable
        ):
            return f"{txn_name(t)}'s reference is visible but its PREPARED record is not durable"
    return None


def s3_tombstone_before_abort(model: Model, s: SystemState) -> str | None:
    """S3 tombstone before abort."""
    for t, txn in enumerate(s.journal):
        if LeaseState.ABORTED not in txn.records:
            continue
        if s.owner[t].record.state is not OwnerState.TOMBSTONED and not s.rejected[t]:
            return f"{txn_name(t)} is ABORTED but the owner has no durable tombstone for it"
    return None


def s4_remove_before_release(model: Model, s: SystemState) -> str | None:
    """S4 remove before release."""
    for t, txn in enumerate(s.journal):
        if LeaseState.RELEASED in txn.records and s.owner[t].record.state is OwnerState.PUBLISHED:
            return f"{txn_name(t)} is RELEASED while the owner still shows its reference"
    return None


def s5_one_terminal_event(model: Model, s: SystemState) -> str | None:
    """S5 one terminal event."""
    return _more_than_one_terminal_event(s.journal)


# S5 reads the journal alone, which takes a few dozen values in a whole exploration
@functools.cache
def _more_than_one_terminal_event(journal: tuple[JournalTxn, ...]) -> str | None:
    for t, txn in enumerate(journal):
        resolutions = sum(1 for r in txn.records if lease.is_resolution(r))
        releases = txn.records.count(LeaseState.RELEASED)
        if resolutions > 1 or releases > 1:
            phases = ", ".join(r.value for r in txn.records)
            return f"{txn_name(t)} has more than one terminal event: {phases}"
    return None


def s6_append_only_evidence(model: Model, s: SystemState) -> str | None:
    """S6 append-only evidence."""
    for a, f in enumerate(s.files):
        if f.content > 1:
            return f"{artifact_name(a)} was written twice: the name now holds different content"
    return None


def s7_nothing_outside(model: Model, s: SystemState) -> str | None:
    """S7 nothing outside."""
    if s.outside_touched:
        return "an operation read or deleted a path outside the session's tool-results/"
    return None


#: (name, predicate), in the order docs/design.md section 8 lists them.
SAFETY: tuple[tuple[str, Check], ...] = (
    ("S1 no dangling reference", s1_no_dangling_reference),
    ("S2 prepare before publish", s2_prepare_before_publish),
    ("S3 tombstone before abort", s3_tombstone_before_abort),
    ("S4 remove before release", s4_remove_before_release),
    ("S5 one terminal event", s5_one_terminal_event),
    ("S6 append-only evidence", s6_append_only_evidence),
    ("S7 nothing outside", s7_nothing_outside),
)

INVARIANT_NAMES: tuple[str, ...] = tuple(name for name, _ in SAFETY) + ("L1 progress",)


def violations(model: Model, s: SystemState) -> tuple[tuple[str, str], ...]:
    """Every (invariant name, reason) that ``s`` violates."""
    found = []
    for name, check in SAFETY:
        reason = check(model, s)
        if reason is not None:
            found.append((name, reason))
    return tuple(found)


def _awaits_operator(model: Model, txn: JournalTxn, o: OwnerSlot) -> bool:
    """A durably journalled conflict the owner still shows: only an operator can resolve it."""
    return (
        txn.conflict >= 0
        and not txn.conflict_volatile
        and o.record.state is OwnerState.PUBLISHED
        and o.names == txn.conflict
    )


def l1_goal(model: Model, s: SystemState) -> bool:
    """L1's target: nothing pending, nothing in flight, every unclaimed artifact deleted."""
    for t, txn in enumerate(s.journal):
        o = s.owner[t]
        if o.inflight or o.pending_tombstone:
            return False
        if txn.state is LeaseState.PREPARED and not _awaits_operator(model, txn, o):
            return False
    return not any(f.exists and not model.claims_for(s, a) for a, f in enumerate(s.files))
