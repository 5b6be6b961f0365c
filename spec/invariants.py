"""The invariants of docs/design.md section 8, defined once, over an :class:`Observable`.

Rules
=====

1. Each safety invariant is one function from an :class:`~observable.Observable`
   to the findings it makes: ``(handle, reason)`` pairs, where the handle is
   an :class:`Invariant` (``Invariant.S1``, whose text is ``"S1"``) or a
   refinement of one (``S3_BURIED``, ``"S3.buried"``: a
   finer clause of S3 that a checker may count apart) and the reason is one
   plain sentence.  No finding: the invariant holds.
2. The spec explorer, the crash explorer and the stateful machine all call
   these functions, each on the :class:`Observable` its own adapter builds
   (:mod:`observe` here; ``faultinject/observe.py`` for the real code).  No
   other code decides whether S1-S7 or L1's goal hold.
3. Each invariant is spelt once, by its :class:`Invariant` member.  Its text
   is the handle (``"S1"``), used in counts; ``.full`` is the name
   docs/design.md gives it (``"S1 no dangling reference"``), used in reports;
   ``.refined(word)`` is a dotted refinement, only where one clause is worth
   counting alone; :meth:`Invariant.of` reads any of the three back.  No code
   writes an invariant's name as a literal.

* **S1 no dangling reference**: an artifact is never deleted (or changed)
  while something may reference it: its reference is visible in the owner; a
  reference may still become visible (a PREPARED lease, or a publish in flight
  or about to be sent, and no tombstone); or a lease still protects it (a
  PREPARED lease whatever its expiry, a COMMITTED one until its
  ``retain_until``).  An artifact that a reported ``pending_conflict`` names is
  never deleted while the owner still shows that reference (the operator was
  told it is there, so it must still work).  A COMMITTED lease past its
  ``retain_until`` is outside S1: the caller bounded how long its reference
  needs the artifact.  (``S1.writing``) An artifact is never deleted while its
  writer is still writing it: its pointer is about to be handed out.
* **S2 prepare before publish**: the owner takes a publish only once that
  transaction's PREPARED record is durable.
* **S3 tombstone before abort**: an ABORTED record exists only if the owner's
  tombstone for that transaction is durable, or the owner explicitly rejected
  it before any write; and
  (``S3.buried``) never one whose publish the owner acknowledged: the
  tombstone must seal an absence.
* **S4 remove before release**: a RELEASED record exists only if the owner no
  longer shows the reference; with an owner that keeps contract O4, only if a
  tombstone refuses a late write of it.
* **S5 one terminal event**: at most one COMMITTED-or-ABORTED record and at
  most one RELEASED record per transaction, ever.
* **S6 append-only evidence**: toolswap writes each artifact name once; the
  name is bound to one content forever (``S6.reuse``: a new externalization
  never takes a name that existed); the journal's verified records never
  change.
* **S7 nothing outside**: no operation reads or deletes a path outside the
  session's trusted ``tool-results/``.
* **L1 progress**: from every state, fault-free steps that start no new work
  reach :func:`l1_goal`: no pending lease, no request in flight, every
  artifact without a claim deleted.  A PREPARED lease whose conflict is
  journalled durably and still shown by the owner is left to the operator.
  The spec explorer checks reachability of the goal; the crash explorer checks
  the goal itself after a healed recovery.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Iterator

from . import lease
from .lease import LeaseState
from .observable import LeaseView, Observable, Shown
from .observe import SpecObserver
from .system import Model, SystemState

__all__ = [
    "Invariant",
    "S1_FAIL_CLOSED",
    "S1_WRITING",
    "S3_BURIED",
    "S6_REUSE",
    "Finding",
    "Verdict",
    "s1_no_dangling_reference",
    "s2_prepare_before_publish",
    "s3_tombstone_before_abort",
    "s4_remove_before_release",
    "s5_one_terminal_event",
    "s6_append_only_evidence",
    "s7_nothing_outside",
    "SAFETY",
    "INVARIANT_NAMES",
    "findings",
    "l1_unfinished",
    "l1_reached",
    "reason",
    "violations",
    "violations_of",
    "l1_goal",
    "checker",
]


class Invariant(enum.StrEnum):
    """S1-S7 and L1 (docs/design.md section 8), spelt once: the member's text is its handle."""

    S1 = "S1"
    S2 = "S2"
    S3 = "S3"
    S4 = "S4"
    S5 = "S5"
    S6 = "S6"
    S7 = "S7"
    L1 = "L1"

    @property
    def phrase(self) -> str:
        """What it says, in a few words: ``"no dangling reference"``."""
        return _PHRASES[self]

    @property
    def full(self) -> str:
        """Its name in docs/design.md: ``"S1 no dangling reference"``."""
        return f"{self.value} {_PHRASES[self]}"

    def refined(self, clause: str) -> str:
        """The handle of one of its clauses, counted apart: ``"S3.buried"``."""
        return f"{self.value}.{clause}"

    def covers(self, handle: str) -> bool:
        """Whether a finding's ``handle`` is this invariant or a refinement of it."""
        return handle == self.value or handle.startswith(f"{self.value}.")

    @classmethod
    def of(cls, spelling: str) -> Invariant:
        """The invariant a handle, a full name or a refinement names; ValueError if none."""
        head = spelling.split(" ", 1)[0].split(".", 1)[0]
        try:
            found = cls(head)
        except ValueError:
            raise ValueError(f"no invariant is called {spelling!r}") from None
        if " " in spelling and spelling != found.full:
            raise ValueError(f"{spelling!r} is not the name of {found.value} ({found.full!r})")
        return found


_PHRASES: dict[Invariant, str] = {
    Invariant.S1: "no dangling reference",
    Invariant.S2: "prepare before publish",
    Invariant.S3: "tombstone before abort",
    Invariant.S4: "remove before release",
    Invariant.S5: "one terminal event",
    Invariant.S6: "append-only evidence",
    Invariant.S7: "nothing outside",
    Invariant.L1: "progress",
}

#: The refinements some checker counts apart (docs/design.md section 8).
S1_FAIL_CLOSED = Invariant.S1.refined("fail_closed")  # no deletion over a corrupt journal
S1_WRITING = Invariant.S1.refined("writing")  # never delete a file still being written
S3_BURIED = Invariant.S3.refined("buried")  # never abort an acknowledged publish
S6_REUSE = Invariant.S6.refined("reuse")  # never take a name that existed

#: (handle, reason): ``(Invariant.S1, "tool_result_001.txt is deleted while ...")``.
Finding = tuple[str, str]
Check = Callable[[Observable], Iterator[Finding]]
#: (invariant, first reason) for each safety invariant a state violates; () when none.
Verdict = tuple[tuple[Invariant, str], ...]

_SHOWS_A_REFERENCE = (Shown.REFERENCE, Shown.OTHER)


def s1_no_dangling_reference(o: Observable) -> Iterator[Finding]:
    """S1 no dangling reference."""
    artifacts = o.artifacts
    for v in o.leases:
        state = v.state
        if not (state is LeaseState.COMMITTED and not v.retained):  # the caller's bound
            why = _needed(v, state)
            seen = artifacts.get(v.artifact)
            if why and seen is not None:
                if seen.deleted:
                    yield Invariant.S1, f"{v.artifact} is deleted while {v.txn}'s {why}"
                elif seen.present and not v.intact:
                    yield Invariant.S1, f"{v.artifact} changed while {v.txn}'s {why}"
        if v.shown is Shown.OTHER and v.reported and v.other:
            seen = artifacts.get(v.other)
            if seen is not None and seen.deleted:
                yield (
                    Invariant.S1,
                    f"{v.other} is deleted while {v.txn}'s reference to it, "
                    "reported as pending_conflict, is visible",
                )
    for a in artifacts.values():
        if a.cut_short:
            yield (
                S1_WRITING,
                f"{a.name} is deleted while its writer is still writing it "
                "(the pointer it returns names a deleted artifact)",
            )


def _needed(v: LeaseView, state: LeaseState) -> str:
    """Why ``v``'s artifact must stay, as the end of a sentence; "" when it need not."""
    if v.shown is Shown.REFERENCE:
        return "reference to it is visible"
    if v.shown is not Shown.TOMBSTONE and (lease.is_pending(state) or v.may_land):
        return "reference may still become visible"
    if lease.protects(state):
        return f"{state.value} lease still protects it"
    return ""


def s2_prepare_before_publish(o: Observable) -> Iterator[Finding]:
    """S2 prepare before publish."""
    for v in o.leases:
        if v.unprepared_publish:
            yield (
                Invariant.S2,
                f"{v.txn}'s reference is visible but its PREPARED record is not durable",
            )


def s3_tombstone_before_abort(o: Observable) -> Iterator[Finding]:
    """S3 tombstone before abort."""
    for v in o.leases:
        if LeaseState.ABORTED not in v.records:
            continue
        if v.shown is not Shown.TOMBSTONE and not v.rejected:
            yield Invariant.S3, f"{v.txn} is ABORTED but the owner has no durable tombstone for it"
        if v.acknowledged:
            yield S3_BURIED, f"{v.txn} is ABORTED after the owner acknowledged its publish"


def s4_remove_before_release(o: Observable) -> Iterator[Finding]:
    """S4 remove before release."""
    for v in o.leases:
        if LeaseState.RELEASED not in v.records:
            continue
        if v.shown in _SHOWS_A_REFERENCE:
            yield Invariant.S4, f"{v.txn} is RELEASED while the owner still shows its reference"
        elif v.shown is not Shown.TOMBSTONE and o.removal_tombstones:
            yield (
                Invariant.S4,
                f"{v.txn} is RELEASED but no tombstone refuses a late write of it (O4)",
            )


def s5_one_terminal_event(o: Observable) -> Iterator[Finding]:
    """S5 one terminal event."""
    for v in o.leases:
        reason = _more_than_one_terminal_event(v.records)
        if reason:
            yield Invariant.S5, f"{v.txn} has more than one terminal event: {reason}"


# A record sequence takes a few dozen values in a whole exploration.
@functools.cache
def _more_than_one_terminal_event(records: tuple[LeaseState, ...]) -> str:
    resolutions = sum(1 for r in records if lease.is_resolution(r))
    if resolutions > 1 or records.count(LeaseState.RELEASED) > 1:
        return ", ".join(r.value for r in records)
    return ""


def s6_append_only_evidence(o: Observable) -> Iterator[Finding]:
    """S6 append-only evidence."""
    for a in o.artifacts.values():
        if a.rewritten:
            yield Invariant.S6, f"{a.name} was written twice: the name now holds different content"
        if a.reused:
            yield S6_REUSE, f"a new externalization took the name {a.name}, which existed before"
    if o.evidence_changed:
        yield Invariant.S6, o.evidence_changed


def s7_nothing_outside(o: Observable) -> Iterator[Finding]:
    """S7 nothing outside."""
    for sentence in o.outside:
        yield Invariant.S7, sentence


#: (invariant, check), in the order docs/design.md section 8 lists them.
SAFETY: tuple[tuple[Invariant, Check], ...] = (
    (Invariant.S1, s1_no_dangling_reference),
    (Invariant.S2, s2_prepare_before_publish),
    (Invariant.S3, s3_tombstone_before_abort),
    (Invariant.S4, s4_remove_before_release),
    (Invariant.S5, s5_one_terminal_event),
    (Invariant.S6, s6_append_only_evidence),
    (Invariant.S7, s7_nothing_outside),
)

#: Every invariant's full name, S1 ... S7 then L1.
INVARIANT_NAMES: tuple[str, ...] = tuple(i.full for i in Invariant)


def findings(o: Observable) -> list[Finding]:
    """Every finding of every safety invariant on ``o``, in S1 ... S7 order."""
    return [f for _, check in SAFETY for f in check(o)]


def violations_of(o: Observable) -> Verdict:
    """(invariant, first reason) for each safety invariant ``o`` violates."""
    found = []
    for name, check in SAFETY:
        first = next(check(o), None)
        if first is not None:
            found.append((name, first[1]))
    return tuple(found)


def l1_unfinished(o: Observable) -> Iterator[str]:
    """What keeps ``o`` from L1's goal, one sentence each (nothing: the goal is reached)."""
    for v in o.leases:
        if v.in_flight:
            yield f"a request for {v.txn} is still in flight"
        if lease.is_pending(v.state) and not v.awaits_operator:
            yield f"{v.txn} is still pending"
    for a in o.artifacts.values():
        if a.present and not a.claimed:
            yield f"{a.name} has no claim but survived cleanup"


def l1_reached(o: Observable) -> bool:
    """L1's goal: nothing pending, nothing in flight, every unclaimed artifact deleted."""
    return next(l1_unfinished(o), None) is None


# -- the model's entry points (the spec explorer, the report) --------------------------------


def checker(
    model: Model,
) -> tuple[Callable[[SystemState], Verdict], Callable[[SystemState], bool]]:
    """(violations, l1_goal) over ``model``'s states, memoized on what the observer reads.

    About a third of the default bounds' states differ from another only in parts no
    invariant reads (the remover, the reconcilers, the GC's plan): those share one answer.
    """
    observe = SpecObserver(model)
    key, goal_key = observe.key, observe.goal_key
    verdicts: dict[tuple[object, ...], Verdict] = {}
    goals: dict[tuple[object, ...], bool] = {}

    def model_violations(s: SystemState) -> Verdict:
        k = key(s)
        found = verdicts.get(k)
        if found is None:
            found = verdicts[k] = violations_of(observe(s))
        return found

    def model_goal(s: SystemState) -> bool:
        k = goal_key(s)
        reached = goals.get(k)
        if reached is None:
            # Which artifacts are claimed costs a walk of the journal per file, and
            # matters only once the leases are settled: ask the leases first.
            settled = l1_reached(Observable(observe(s).leases, {}))
            reached = goals[k] = settled and l1_reached(observe(s, claims=True))
        return reached

    return model_violations, model_goal


def reason(check: Check, model: Model, s: SystemState) -> str | None:
    """The first reason ``check`` gives on the model state ``s``, or None when it holds."""
    return next((why for _, why in check(SpecObserver(model)(s))), None)


def violations(model: Model, s: SystemState) -> Verdict:
    """Every (invariant, first reason) that the model state ``s`` violates."""
    return violations_of(SpecObserver(model)(s))


def l1_goal(model: Model, s: SystemState) -> bool:
    """L1's goal on the model state ``s``."""
    return l1_reached(SpecObserver(model)(s, claims=True))
