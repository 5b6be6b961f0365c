"""Checks with time as an input: "forever" after time has passed, long fences, slow store calls.

Time passes through the harness's clock (``Capability.CLOCK``,
``advance_clock``), or, in a run with ``slow``, for real; without either, the
checks that need it are skipped with that reason.  Fences are held, and store
calls delayed (``StoreFault.DELAY``), for longer than any time-out the harness
declares (``store_timeout``), so an adapter whose lock or whose call gives up
after a while is seen doing so.
"""

from __future__ import annotations

import time

from ..owner import ObservedState
from .bench import FOREVER_SECONDS, Bench, expect
from .checks_fence import Contender, finish, held_back
from .harness import Capability, StoreFault
from .outcome import OutcomeKind
from .registry import check

__all__: list[str] = []


@check(
    "O3.tombstone-refuses-after-time-passes",
    "a tombstone refuses every later publish forever: also once a long time has passed "
    "(a year on the harness's clock, or a real wait with --slow)",
    needs=[Capability.CLOCK],
)
def _tombstone_forever(bench: Bench) -> str:
    owner, sealed, removed = bench.open(), bench.txn("sealed"), bench.txn("removed")
    with bench.fenced(owner, sealed) as observation:
        done = bench.seal(observation)
        expect(done.ok and done.value is True, f"sealing a fresh absence {done.describe_seal()}")
    before = {sealed: bench.observe(owner, sealed), removed: bench.tombstone(owner, removed)}
    how = bench.pass_time(FOREVER_SECONDS)
    for txn, was in before.items():
        late = bench.publish(bench.open(), txn, bench.first)
        expect(
            late.kind is OutcomeKind.REJECTED,
            f"after {how}, a publish on a tombstoned id {late.describe()}: a tombstone "
            "refuses forever, it never expires",
        )
        seen = bench.observe(bench.open(), txn)
        expect(
            seen.is_tombstone and seen.generation == was.generation,
            f"after {how} the tombstone shows as {seen.describe()}"
            + ("" if seen.generation == was.generation else " with another generation"),
        )
    return f"tombstones still refuse after {how}"


@check(
    "O1.publish-durable-after-time-passes",
    "a returned publish is durable and visible to every later fence: also once a long time "
    "has passed (nothing expires)",
    needs=[Capability.CLOCK],
)
def _publish_forever(bench: Bench) -> str:
    owner, txn = bench.published()
    before = bench.observe(owner, txn)
    how = bench.pass_time(FOREVER_SECONDS)
    seen = bench.observe(bench.open(), txn)
    expect(
        seen.is_published(bench.first) and seen.generation == before.generation,
        f"after {how} the published id is {seen.describe()}"
        + ("" if seen.generation == before.generation else " with another generation"),
    )
    return f"the reference and its generation stay after {how}"


@check(
    "O2.rejection-leaves-nothing-in-flight",
    "ArtifactPublicationRejected means nothing of the call is still on its way: the id is "
    "unchanged after longer than any store time-out (and a year on the harness's clock)",
    waits=True,
)
def _rejection_settled(bench: Bench) -> str:
    owner, txn = bench.open(), bench.txn("t")
    before = bench.tombstone(owner, txn)
    outcome = bench.publish(owner, txn, bench.first)
    expect(outcome.kind is OutcomeKind.REJECTED, f"publish on a tombstone {outcome.describe()}")
    bench.close(owner)
    waited = bench.outlasting(0.25)
    time.sleep(waited)
    clock = ""
    if bench.offers(Capability.CLOCK):
        clock = " and " + bench.pass_time(FOREVER_SECONDS)
    seen = bench.observe(bench.open(), txn)
    expect(
        seen.is_tombstone and seen.generation == before.generation,
        f"{waited:.1f} s{clock} after a rejected publish the id is {seen.describe()}"
        + ("" if seen.generation == before.generation else " with another generation")
        + ": something of the rejected call was still on its way",
    )
    return f"the id was unchanged {waited:.1f} s{clock} after the rejection"


@check(
    "O5.fence-holds-past-time-outs-thread",
    "no publish by another caller takes effect while a fence is held, however long it is "
    "held: longer than any time-out the harness declares (and a year on its clock)",
    waits=True,
)
def _long_fence(bench: Bench) -> str:
    owner, txn = bench.open(), bench.txn("t")
    contender = Contender(bench, "publish", txn, process=False)
    hold = bench.outlasting(0.5)
    clock = ""
    with bench.fenced(owner, txn) as observation:
        expect(observation.state == ObservedState.ABSENT, "a never-seen id is not ABSENT")
        contender.start()
        if bench.offers(Capability.CLOCK):
            clock = " and " + bench.pass_time(FOREVER_SECONDS)
        held_back(contender, f"a publish, {hold:.1f} s into the fence{clock},", hold)
        sealed = bench.seal(observation)
        expect(
            sealed.ok and sealed.value is True,
            f"the seal at the end of a fence held {hold:.1f} s{clock} {sealed.describe_seal()}: "
            "the fence was lost while it was held",
        )
    outcome = finish(contender, "the held-back publish")
    expect(not outcome.ok, "a publish that waited behind a long fence landed on the sealed id")
    seen = bench.observe(owner, txn)
    expect(seen.is_tombstone, f"after the long fence the id is {seen.describe()}")
    return f"a fence held {hold:.1f} s{clock} kept the publish out; it then {outcome.describe()}"


def _settle(began: float, delay: float) -> None:
    """Wait until a delayed call left running by the adapter has surely landed."""
    time.sleep(max(0.0, began + delay + 0.2 - time.perf_counter()))


def _delayed_call(bench: Bench, calls: int) -> int:
    """Which store call to delay: the last one (the commit) in the fixed example."""
    return bench.integer("delayed call", 0, max(calls - 1, 0), max(calls - 1, 0))


@check(
    "O2.slow-store-is-not-rejection",
    "ArtifactPublicationRejected promises nothing of the call is on its way: a publish whose "
    "store call is slower than the adapter's time-out must not say rejected and land later",
    needs=[Capability.FAULT_PLAN],
    waits=True,
)
def _slow_publish(bench: Bench) -> str:
    calls = len(bench.store_calls(lambda o: o.publish(bench.txn("dry"), bench.first)))
    index = _delayed_call(bench, calls)
    owner, txn = bench.open(), bench.txn("t")
    delay = bench.outlasting(0.25)
    plan = bench.arm(owner, StoreFault.DELAY, call=index, seconds=delay)
    began = time.perf_counter()
    outcome = bench.publish(owner, txn, bench.first)
    bench.fired(plan, f"a publish (store call #{index} of {calls})")
    _settle(began, delay)
    bench.close(owner)
    seen = bench.observe(bench.open(), txn)
    if outcome.kind is OutcomeKind.REJECTED:
        expect(
            seen.is_fresh_absence,
            f"a publish whose store call #{index} took {delay:.1f} s raised "
            f"ArtifactPublicationRejected, and then the id was {seen.describe()}: the write "
            "landed after the adapter said it was refused (O2)",
        )
    elif outcome.ok:
        expect(seen.is_published(bench.first), f"the slow publish returned, yet {seen.describe()}")
    return f"a publish slowed {delay:.1f} s at store call #{index} {outcome.describe()}"


@check(
    "O6.false-seal-writes-nothing-when-slow",
    "a seal that returns False has written nothing: also when its store call is slower than "
    "the adapter's time-out",
    needs=[Capability.FAULT_PLAN],
    waits=True,
)
def _slow_seal(bench: Bench) -> str:
    counter = bench.open()
    plan = bench.plan(counter)
    start = plan.calls
    with counter.inspect_fenced(bench.txn("dry")) as observation:
        entering = plan.calls - start
        observation.seal_absence()
    calls = plan.calls - start
    bench.close(counter)
    index = bench.integer("delayed seal call", entering, max(calls - 1, entering), entering)
    owner, txn = bench.open(), bench.txn("t")
    delay = bench.outlasting(0.25)
    plan = bench.arm(owner, StoreFault.DELAY, call=index, seconds=delay)
    began = time.perf_counter()
    with bench.fenced(owner, txn) as observation:
        generation = observation.generation
        sealed = bench.seal(observation)
    bench.fired(plan, f"a fence and seal (store call #{index} of {calls})")
    _settle(began, delay)
    bench.close(owner)
    seen = bench.observe(bench.open(), txn)
    if sealed.ok and sealed.value is False:
        expect(
            seen.is_fresh_absence and seen.generation == generation,
            f"a seal slowed {delay:.1f} s at store call #{index} returned False, and then the "
            f"id was {seen.describe()}: False must mean nothing was written",
        )
    elif sealed.ok and sealed.value is True:
        expect(seen.is_tombstone, f"the slow seal returned True, yet the id is {seen.describe()}")
    return f"a seal slowed {delay:.1f} s at store call #{index} {sealed.describe_seal()}"
