"""Faults at every store call: the same sentences as the fault checks, with no call left out.

The fault checks of O1, O2, O4 and O8 arm a fault on an operation's first
store call (``FAIL``, ``TIMEOUT``) or its last (``LOST_ACK``).  A harness with a
fault plan (``Capability.FAULT_PLAN``) lets these checks count an operation's
store calls on one handle, then aim each fault at each of them in turn on a
fresh handle -- a failing read in the middle of a fence, a lost answer to a
``BEGIN``, damaged data from a read (``CORRUPT_READ``) -- and see that an armed
fault fired (one that never fires is reported).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..owner import ArtifactReferenceOwner, ObservedState
from .bench import Bench, expect
from .harness import Capability, StoreFault
from .outcome import Outcome, OutcomeKind, call
from .registry import check

__all__: list[str] = []

_KINDS = (StoreFault.FAIL, StoreFault.TIMEOUT, StoreFault.LOST_ACK, StoreFault.CORRUPT_READ)
_NEEDS = [Capability.FAULT_PLAN]


def _cases(reads: list[bool]) -> list[tuple[int, StoreFault]]:
    """Every (call, fault) pair: a damaged read only where the call is a read."""
    return [
        (at, fault)
        for at, is_read in enumerate(reads)
        for fault in _KINDS
        if fault is not StoreFault.CORRUPT_READ or is_read
    ]


def _faulted(
    bench: Bench,
    at: int,
    fault: StoreFault,
    what: str,
    operation: Callable[[ArtifactReferenceOwner], Outcome],
) -> Outcome:
    """Run ``operation`` on a fresh handle with ``fault`` on its ``at``-th store call."""
    owner = bench.open()
    plan = bench.arm(owner, fault, call=at)
    outcome = operation(owner)
    bench.fired(plan, f"{what} ({fault} on store call #{at})")
    bench.close(owner)  # a lost answer may have left a transaction open: let it go
    return outcome


def _summary(cases: list[tuple[int, StoreFault]], what: str) -> str:
    calls = len({at for at, _ in cases})
    return f"{len(cases)} faults on each of the {calls} store calls of {what}"


@check(
    "O8.in-doubt-at-every-call",
    "in doubt, answer UNKNOWN (or raise), never ABSENT: whichever store call of the fence "
    "fails, loses its answer or returns damaged data",
    needs=_NEEDS,
)
def _doubt_everywhere(bench: Bench) -> str:
    _, txn = bench.published()

    def look(owner: ArtifactReferenceOwner) -> Outcome:
        shown: list[Any] = []

        def enter() -> None:
            with bench.fenced(owner, txn) as observation:
                shown.append(observation.state)

        outcome = bench.scanned(call(enter), "a fence error")
        return Outcome(kind=outcome.kind, value=shown[0] if shown else None)

    cases = _cases(bench.store_calls(lambda o: call(lambda: _enter_and_leave(o, txn))))
    for at, fault in cases:
        outcome = _faulted(bench, at, fault, "a fence", look)
        expect(
            outcome.value != ObservedState.ABSENT,
            f"a fence over a published id whose store call #{at} met {fault} answered "
            "ABSENT: in doubt the answer is UNKNOWN or an error, never ABSENT",
        )
    return _summary(cases, "a fence")


Judge = Callable[[Outcome, Any, int, StoreFault], None]


def _publish_everywhere(bench: Bench, judge: Judge) -> str:
    dry = bench.txn("dry")
    cases = _cases(bench.store_calls(lambda o: call(lambda: o.publish(dry, bench.first))))
    for txn, (at, fault) in zip(bench.txns("c", len(cases)), cases, strict=True):

        def publish(owner: ArtifactReferenceOwner, txn: str = txn) -> Outcome:
            return bench.publish(owner, txn, bench.first)

        outcome = _faulted(bench, at, fault, "a publish", publish)
        judge(outcome, bench.observe(bench.open(), txn), at, fault)
    return _summary(cases, "a publish")


@check(
    "O2.store-failure-is-not-rejection-at-every-call",
    "a failing store means maybe written, never ArtifactPublicationRejected: whichever store "
    "call of the publish fails, loses its answer or returns damaged data",
    needs=_NEEDS,
)
def _not_rejected_everywhere(bench: Bench) -> str:
    def judge(outcome: Outcome, seen: Any, at: int, fault: StoreFault) -> None:
        written = " although the reference was written" if seen.state != "ABSENT" else ""
        expect(
            outcome.kind is not OutcomeKind.REJECTED,
            f"a publish of a never-seen id whose store call #{at} met {fault} raised "
            f"ArtifactPublicationRejected{written}: only a tombstone refuses, and a failing "
            "store leaves the write uncertain",
        )

    return _publish_everywhere(bench, judge)


@check(
    "O1.publish-durable-at-every-call",
    "publish returns normally only once the reference is durable and visible: whichever "
    "store call of it fails, loses its answer or returns damaged data",
    needs=_NEEDS,
)
def _durable_everywhere(bench: Bench) -> str:
    def judge(outcome: Outcome, seen: Any, at: int, fault: StoreFault) -> None:
        if outcome.ok:
            expect(
                seen.is_published(bench.first),
                f"a publish whose store call #{at} met {fault} returned normally, yet the "
                f"next fence saw {seen.describe()}",
            )

    return _publish_everywhere(bench, judge)


@check(
    "O4.remove-durable-at-every-call",
    "remove returns normally only once the reference is gone and a tombstone is durable: "
    "whichever store call of it fails, loses its answer or returns damaged data",
    needs=_NEEDS,
)
def _remove_everywhere(bench: Bench) -> str:
    _, dry = bench.published("dry")
    cases = _cases(bench.store_calls(lambda o: call(lambda: o.remove(dry))))
    writer = bench.open()
    for txn, (at, fault) in zip(bench.txns("c", len(cases)), cases, strict=True):
        expect(bench.publish(writer, txn, bench.first).ok, "setting up: publish failed")

        def remove(owner: ArtifactReferenceOwner, txn: str = txn) -> Outcome:
            return bench.remove(owner, txn)

        outcome = _faulted(bench, at, fault, "a remove", remove)
        if outcome.ok:
            seen = bench.observe(bench.open(), txn)
            expect(
                seen.is_tombstone,
                f"a remove whose store call #{at} met {fault} returned normally, yet the "
                f"next fence saw {seen.describe()}",
            )
    return _summary(cases, "a remove")


@check(
    "O6.seal-durable-at-every-call",
    "seal_absence returns True only once the tombstone is durable, and False only when "
    "nothing was written: whichever store call of the fence and seal fails or loses its answer",
    needs=_NEEDS,
)
def _seal_everywhere(bench: Bench) -> str:
    dry = bench.txn("dry")
    cases = _cases(bench.store_calls(lambda o: call(lambda: _seal_in_fence(o, dry))))
    for txn, (at, fault) in zip(bench.txns("c", len(cases)), cases, strict=True):
        seal: list[Any] = []

        def run(owner: ArtifactReferenceOwner, txn: str = txn, seal: list[Any] = seal) -> Outcome:
            def block() -> None:
                with bench.fenced(owner, txn) as observation:
                    seal.append((observation.generation, bench.seal(observation)))

            return bench.scanned(call(block), "a fence error")

        _faulted(bench, at, fault, "a fence and seal", run)
        if not seal or not seal[0][1].ok:
            continue  # the fence failed, or the seal raised: maybe sealed
        generation, sealed = seal[0]
        seen = bench.observe(bench.open(), txn)
        if sealed.value is True:
            expect(
                seen.is_tombstone,
                f"a seal whose store call #{at} met {fault} returned True, yet the next "
                f"fence saw {seen.describe()}",
            )
        else:
            expect(
                seen.is_fresh_absence and seen.generation == generation,
                f"a seal whose store call #{at} met {fault} returned {sealed.value!r}, yet "
                f"the next fence saw {seen.describe()}: False must mean nothing was written",
            )
    return _summary(cases, "a fence and seal")


def _enter_and_leave(owner: ArtifactReferenceOwner, txn: str) -> None:
    with owner.inspect_fenced(txn):
        pass


def _seal_in_fence(owner: ArtifactReferenceOwner, txn: str) -> None:
    with owner.inspect_fenced(txn) as observation:
        observation.seal_absence()
