"""Checks of O5: a fence holds back every other caller, in this process and in another one.

A contender opens its handle (or its process starts and opens one) *before*
the fence is entered -- opening a handle may itself wait for a fence, which no
promise forbids -- and makes its call while the fence is held; it is given
``HOLD_SECONDS`` to show that it is held back.  Then the fence either ends as
it was or seals, and the contender must act on the state the block left (O5,
O3).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..owner import ObservedState
from .bench import HOLD_SECONDS, JOIN_SECONDS, Background, Bench, expect
from .child import ChildOwner
from .harness import Capability
from .outcome import Outcome, OutcomeKind
from .registry import check

__all__ = ["Contender", "finish", "held_back"]


class Contender:
    """A competing call, in a thread or in a child process, with one interface.

    Building it opens the handle (or starts the child, which opens one); call
    :meth:`start` once the fence is held.
    """

    def __init__(self, bench: Bench, op: str, txn: str, *, process: bool) -> None:
        self._bench, self._op, self._txn = bench, op, txn
        self._background: Background | None = None
        self._child: ChildOwner | None = None
        self._other: Any = None
        self._outcome: Outcome | None = None
        if process:
            self._child = bench.child()
        else:
            self._other = bench.open()

    def start(self) -> None:
        bench, op, txn = self._bench, self._op, self._txn
        if self._child is not None:
            child = self._child
            if op == "publish":
                child.send("publish", txn=txn, claim=bench.first.to_dict())
            else:
                child.send(op, txn=txn)
            expect(child.expect("calling", JOIN_SECONDS) is not None, "the child never called")
            return
        other = self._other
        function: Callable[[], Any]
        if op == "publish":
            function = lambda: other.publish(txn, bench.first)  # noqa: E731
        elif op == "remove":
            function = lambda: other.remove(txn)  # noqa: E731
        else:
            function = lambda: _fence_and_seal(other, txn)  # noqa: E731
        self._background = bench.in_thread(function)
        self._background.started.wait(JOIN_SECONDS)

    def finished(self, timeout: float) -> bool:
        if self._outcome is not None:
            return True
        if self._background is not None:
            if not self._background.wait(timeout):
                return False
            assert self._background.outcome is not None
            self._outcome = self._background.outcome
        else:
            assert self._child is not None
            event = self._child.expect("returned", timeout)
            if event is None:
                return False
            self._outcome = self._child.outcome(event)
            if event["outcome"].get("value") is not None:
                self._outcome = Outcome(
                    kind=self._outcome.kind,
                    value=event["outcome"]["value"],
                    error_type=self._outcome.error_type,
                    message=self._outcome.message,
                )
        self._bench.scanned(self._outcome, "the contender's error")
        return True

    @property
    def outcome(self) -> Outcome:
        assert self._outcome is not None
        return self._outcome


def _fence_and_seal(owner: Any, txn: str) -> bool:
    with owner.inspect_fenced(txn) as observation:
        if observation.state != ObservedState.ABSENT or observation.sealed:
            return False
        return bool(observation.seal_absence())


def held_back(contender: Contender, what: str, hold: float = HOLD_SECONDS) -> None:
    """The contender must not have succeeded within the hold window."""
    if contender.finished(hold):
        expect(
            not contender.outcome.ok,
            f"{what} by another caller completed while the fence was held",
        )


def finish(contender: Contender, what: str) -> Outcome:
    expect(contender.finished(JOIN_SECONDS), f"{what} never finished after the fence ended")
    return contender.outcome


def _holds_back_publish(bench: Bench, *, process: bool) -> str:
    owner, txn = bench.open(), bench.txn("t")
    contender = Contender(bench, "publish", txn, process=process)
    with bench.fenced(owner, txn) as observation:
        expect(observation.state == ObservedState.ABSENT, "a never-seen id is not ABSENT")
        contender.start()
        held_back(contender, "a publish")
    outcome = finish(contender, "the held-back publish")
    seen = bench.observe(owner, txn)
    if outcome.ok:
        expect(seen.is_published(bench.first), f"after the publish returned: {seen.describe()}")
    elif outcome.kind is OutcomeKind.REJECTED:
        expect(seen.is_fresh_absence, f"after a rejected publish: {seen.describe()}")
    return f"the publish waited for the fence and then {outcome.describe()}"


def _seal_refuses_held_publish(bench: Bench, *, process: bool) -> str:
    owner, txn = bench.open(), bench.txn("t")
    contender = Contender(bench, "publish", txn, process=process)
    with bench.fenced(owner, txn) as observation:
        expect(observation.state == ObservedState.ABSENT, "a never-seen id is not ABSENT")
        contender.start()
        held_back(contender, "a publish")
        sealed = bench.seal(observation)
        expect(sealed.ok and sealed.value is True, f"the seal {sealed.describe_seal()}")
    outcome = finish(contender, "the held-back publish")
    seen = bench.observe(owner, txn)
    expect(
        not outcome.ok,
        "a publish that waited behind the fence returned normally after the id was sealed",
    )
    expect(seen.is_tombstone, f"after the held-back publish the id is {seen.describe()}")
    expect(
        outcome.kind is OutcomeKind.REJECTED,
        f"the held-back publish on the sealed id {outcome.describe()}, not "
        "ArtifactPublicationRejected",
    )
    return "a publish held back by the fence is rejected by the seal and writes nothing"


def _holds_back_remove(bench: Bench, *, process: bool) -> str:
    owner, txn = bench.published()
    contender = Contender(bench, "remove", txn, process=process)
    with bench.fenced(owner, txn) as observation:
        expect(observation.state == ObservedState.PUBLISHED, "the published id is not PUBLISHED")
        contender.start()
        held_back(contender, "a remove")
    outcome = finish(contender, "the held-back remove")
    seen = bench.observe(owner, txn)
    if outcome.ok:
        expect(seen.is_tombstone, f"after the remove returned: {seen.describe()}")
    return f"the remove waited for the fence and then {outcome.describe()}"


def _holds_back_seal(bench: Bench, *, process: bool) -> str:
    owner, txn = bench.open(), bench.txn("t")
    if process:
        child = bench.child()
    else:
        contender = Contender(bench, "seal", txn, process=False)
    with bench.fenced(owner, txn) as observation:
        expect(observation.state == ObservedState.ABSENT, "a never-seen id is not ABSENT")
        if process:
            child.send("fence", txn=txn)
            expect(child.expect("calling", JOIN_SECONDS) is not None, "the child never called")
            entered = child.next_event(HOLD_SECONDS)
            expect(
                entered is None or entered.get("event") != "entered",
                "another process entered a fence over the same id while this one was held",
            )
        else:
            contender.start()
            held_back(contender, "a fence and seal")
    if process:
        if entered is None:
            entered = child.next_event(JOIN_SECONDS)
        expect(entered is not None, "the other process's fence never opened")
        assert entered is not None
        if entered.get("event") == "entered":
            child.send("seal")
            sealed = child.expect("sealed", JOIN_SECONDS)
            child.send("exit")
            child.expect("exited", JOIN_SECONDS)
            expect(
                sealed is not None and sealed["outcome"].get("value") is True,
                "the other process's seal after the fence ended did not return True",
            )
    else:
        outcome = finish(contender, "the held-back fence")
        expect(outcome.ok and outcome.value is True, f"the later seal {outcome.describe()}")
    seen = bench.observe(owner, txn)
    expect(seen.is_tombstone, f"after the later seal: {seen.describe()}")
    return "a second fence over the id waited for the first, then sealed"


def _register(kind: str, promise: str, function: Callable[..., str]) -> None:
    for process in (False, True):
        where = "process" if process else "thread"

        def run(bench: Bench, _process: bool = process) -> str:
            return function(bench, process=_process)

        check(
            f"{kind}-{where}",
            f"{promise} (a competing {where})",
            needs=[Capability.OTHER_PROCESS] if process else [],
            waits=True,
        )(run)


_register(
    "O5.fence-holds-back-publish",
    "no publish of the id by another caller takes effect while a fence is held; it acts "
    "afterwards on the state the block left",
    _holds_back_publish,
)
_register(
    "O3.seal-refuses-held-publish",
    "a tombstone refuses a write that was still in flight (held behind the fence) when it "
    "was made, writing nothing",
    _seal_refuses_held_publish,
)
_register(
    "O5.fence-holds-back-remove",
    "no remove of the id by another caller takes effect while a fence is held",
    _holds_back_remove,
)
_register(
    "O5.fence-holds-back-seal",
    "no seal of the id by another caller (its own fence) takes effect while a fence is held",
    _holds_back_seal,
)


@check(
    "O5.fence-reads-durable-state-at-entry",
    "a fence yields the id's durable state at entry, whatever this handle saw before",
)
def _fresh(bench: Bench) -> str:
    reader, writer, txn = bench.open(), bench.open(), bench.txn("t")
    first = bench.observe(reader, txn)
    expect(first.is_fresh_absence, f"a never-seen id is {first.describe()}")
    expect(bench.publish(writer, txn, bench.first).ok, "publish failed")
    second = bench.observe(reader, txn)
    expect(
        second.is_published(bench.first),
        f"after another handle published, this handle's fence saw {second.describe()}",
    )
    expect(bench.remove(writer, txn).ok, "remove failed")
    third = bench.observe(reader, txn)
    expect(
        third.is_tombstone,
        f"after another handle removed, this handle's fence saw {third.describe()}",
    )
    return "each fence reads the store, not what the handle saw before"


@check(
    "O5.fence-reads-other-process-writes",
    "a fence yields the id's durable state at entry, including another process's writes",
    needs=[Capability.OTHER_PROCESS],
    waits=True,
)
def _fresh_process(bench: Bench) -> str:
    reader, txn = bench.open(), bench.txn("t")
    child = bench.child()
    expect(bench.observe(reader, txn).is_fresh_absence, "a never-seen id is not ABSENT")
    for op, want in (("publish", "PUBLISHED"), ("remove", "ABSENT (sealed)")):
        if op == "publish":
            child.send(op, txn=txn, claim=bench.first.to_dict())
        else:
            child.send(op, txn=txn)
        child.expect("calling", JOIN_SECONDS)
        event = child.expect("returned", JOIN_SECONDS)
        expect(event is not None, f"the other process's {op} did not return")
        assert event is not None
        outcome = bench.scanned(child.outcome(event), f"the other process's {op}")
        expect(outcome.ok, f"the other process's {op} {outcome.describe()}")
        seen = bench.observe(reader, txn)
        expect(
            seen.describe() == want, f"after another process's {op} the fence saw {seen.describe()}"
        )
    return "a fence sees another process's publish and remove"
