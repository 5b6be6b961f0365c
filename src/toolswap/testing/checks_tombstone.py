"""Checks of O3 (tombstones refuse forever), O4 (remove leaves a tombstone) and O6 (the seal)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from ..owner import ArtifactReferenceOwner, ObservedState
from .bench import Bench, expect
from .harness import Capability, StoreFault
from .outcome import OutcomeKind
from .registry import check

__all__: list[str] = []


def _seal_fresh(bench: Bench, txn: str) -> object:
    """Seal a never-seen id in a fence; return the observed generation."""
    owner = bench.open()
    with bench.fenced(owner, txn) as observation:
        expect(
            observation.state == ObservedState.ABSENT and observation.sealed is False,
            "a never-seen id is not an unsealed ABSENT",
        )
        generation = observation.generation
        sealed = bench.seal(observation)
        expect(
            sealed.ok and sealed.value is True,
            f"sealing a fresh absence {sealed.describe_seal()}",
        )
    return generation


@check("O3.tombstone-refuses-publish", "a tombstone refuses every later publish of that id")
def _refuses(bench: Bench) -> str:
    txn = bench.txn("t")
    _seal_fresh(bench, txn)
    handles = bench.integer("handles", 1, 3, 2)
    tries = bench.integer("publishes per handle", 1, 3, 2)
    for handle in [bench.open() for _ in range(handles)]:
        for _ in range(tries):
            outcome = bench.publish(handle, txn, bench.first)
            expect(
                outcome.kind is OutcomeKind.REJECTED,
                f"publish on a sealed id {outcome.describe()}, not ArtifactPublicationRejected",
            )
    seen = bench.observe(bench.open(), txn)
    expect(seen.is_tombstone, f"after the refused publishes: {seen.describe()}")
    return "every publish on a sealed id is rejected, from every handle"


def _tombstone_survives(bench: Bench, again: Callable[[], ArtifactReferenceOwner], how: str) -> str:
    txn = bench.txn("t")
    _seal_fresh(bench, txn)
    owner = again()
    outcome = bench.publish(owner, txn, bench.first)
    expect(outcome.kind is OutcomeKind.REJECTED, f"after {how} publish {outcome.describe()}")
    seen = bench.observe(owner, txn)
    expect(seen.is_tombstone, f"after {how}: {seen.describe()}")
    return f"the tombstone survives {how}"


@check("O3.tombstone-durable-across-reopen", "a tombstone is durable when the seal returns")
def _durable_reopen(bench: Bench) -> str:
    return _tombstone_survives(bench, bench.reopen, "closing every handle")


@check(
    "O3.tombstone-durable-across-restart",
    "a tombstone is durable when the seal returns (store restart)",
    needs=[Capability.RESTART],
)
def _durable_restart(bench: Bench) -> str:
    return _tombstone_survives(bench, bench.restart, "a restart of the store")


@check(
    "O3.tombstone-refuses-other-process",
    "a tombstone refuses a publish from any caller, in any process",
    needs=[Capability.OTHER_PROCESS],
)
def _refuses_other_process(bench: Bench) -> str:
    txn = bench.txn("t")
    child = bench.child()
    _seal_fresh(bench, txn)
    child.send("publish", txn=txn, claim=bench.first.to_dict())
    child.expect("calling", 30)
    answer = child.expect("returned", 30)
    expect(answer is not None, "the other process's publish did not return in 30 s")
    assert answer is not None
    outcome = bench.scanned(child.outcome(answer), "the other process's publish")
    expect(
        outcome.kind is OutcomeKind.REJECTED,
        f"another process's publish on a sealed id {outcome.describe()}",
    )
    seen = bench.observe(bench.open(), txn)
    expect(seen.is_tombstone, f"after the other process's publish: {seen.describe()}")
    return "a publish from another process is rejected"


@check("O4.remove-hides-reference", "remove returns only once no reference is visible")
def _remove_hides(bench: Bench) -> str:
    owner, txn = bench.published()
    outcome = bench.remove(owner, txn)
    expect(outcome.ok, f"remove of a published id {outcome.describe()}")
    seen = bench.observe(bench.open(), txn)
    expect(seen.state == ObservedState.ABSENT, f"after remove: {seen.describe()}")
    return "after remove no reference is visible"


@check(
    "O4.remove-leaves-tombstone",
    "remove leaves a durable tombstone, so a late replay cannot resurrect the reference",
)
def _remove_tombstones(bench: Bench) -> str:
    owner, txn = bench.published()
    expect(bench.remove(owner, txn).ok, "remove failed")
    seen = bench.observe(bench.open(), txn)
    expect(seen.is_tombstone, f"after remove: {seen.describe()}, not a sealed absence")
    late = bench.publish(bench.open(), txn, bench.first)
    expect(late.kind is OutcomeKind.REJECTED, f"a late replay after remove {late.describe()}")
    again = bench.observe(bench.open(), txn)
    expect(again.is_tombstone, f"after the late replay: {again.describe()}")
    return "a removed id is tombstoned and refuses a late replay"


@check("O4.remove-is-idempotent", "remove is idempotent")
def _remove_twice(bench: Bench) -> str:
    owner, txn = bench.published()
    removes = bench.integer("removes", 2, 5, 3)
    same = bench.integer("removes through one handle (1) or new ones (0)", 0, 1, 0)
    for attempt in range(1, removes + 1):
        outcome = bench.remove(owner if same else bench.open(), txn)
        expect(outcome.ok, f"remove number {attempt} {outcome.describe()}")
    seen = bench.observe(owner, txn)
    expect(seen.is_tombstone, f"after {removes} removes: {seen.describe()}")
    return "removing again returns normally and keeps the tombstone"


@check("O4.remove-never-seen-tombstones", "a never-seen id gets a tombstone on remove")
def _remove_unknown(bench: Bench) -> str:
    owner, txn = bench.open(), bench.txn("t")
    outcome = bench.remove(owner, txn)
    expect(outcome.ok, f"remove of a never-seen id {outcome.describe()}")
    seen = bench.observe(bench.open(), txn)
    expect(seen.is_tombstone, f"after remove of a never-seen id: {seen.describe()}")
    late = bench.publish(owner, txn, bench.first)
    expect(late.kind is OutcomeKind.REJECTED, f"a publish after that remove {late.describe()}")
    return "remove of a never-seen id tombstones it"


@check("O4.remove-durable-across-reopen", "a returned remove is durable (new handles)")
def _remove_durable_reopen(bench: Bench) -> str:
    owner, txn = bench.published()
    expect(bench.remove(owner, txn).ok, "remove failed")
    seen = bench.observe(bench.reopen(), txn)
    expect(seen.is_tombstone, f"after a reopen: {seen.describe()}")
    return "the removal and its tombstone survive closing every handle"


@check(
    "O4.remove-durable-across-restart",
    "a returned remove is durable (store restart)",
    needs=[Capability.RESTART],
)
def _remove_durable_restart(bench: Bench) -> str:
    owner, txn = bench.published()
    expect(bench.remove(owner, txn).ok, "remove failed")
    owner = bench.restart()
    seen = bench.observe(owner, txn)
    expect(seen.is_tombstone, f"after a restart: {seen.describe()}")
    late = bench.publish(owner, txn, bench.first)
    expect(late.kind is OutcomeKind.REJECTED, f"after a restart a replay {late.describe()}")
    return "the removal and its tombstone survive a restart of the store"


@check(
    "O4.remove-returns-only-when-removed",
    "remove returns normally only once the reference is gone, also when the store fails",
    needs=[Capability.FAULTS],
)
def _remove_under_fault(bench: Bench) -> str:
    for fault in (StoreFault.FAIL, StoreFault.TIMEOUT):
        owner, txn = bench.open(), bench.txn(f"t-{fault}")
        expect(bench.publish(owner, txn, bench.first).ok, "publish failed")
        bench.fault(owner, fault)
        outcome = bench.remove(owner, txn)
        if outcome.ok:
            seen = bench.observe(bench.open(), txn)
            expect(
                seen.is_tombstone,
                f"under a {fault} fault remove returned normally, yet the fence saw "
                f"{seen.describe()}",
            )
    return "a remove that hit a failing store did not claim success it did not have"


@check(
    "O6.seal-fresh-absence",
    "seal_absence on an ABSENT, unsealed observation returns True once the tombstone is "
    "durable and the generation advanced",
)
def _seal_fresh_check(bench: Bench) -> str:
    txn = bench.txn("t")
    observed = _seal_fresh(bench, txn)
    seen = bench.observe(bench.open(), txn)
    expect(seen.is_tombstone, f"after a successful seal: {seen.describe()}")
    expect(seen.generation != observed, "the seal did not advance the generation")
    return "the seal returns True, tombstones the id and advances the generation"


@check(
    "O6.seal-is-compare-and-set",
    "the seal is a compare-and-set on the observed generation: once it moved, the seal "
    "returns False and writes nothing",
)
def _seal_cas(bench: Bench) -> str:
    owner, txn = bench.open(), bench.txn("t")
    with bench.fenced(owner, txn) as observation:
        first = bench.seal(observation)
        expect(first.ok and first.value is True, f"the first seal {first.describe_seal()}")
        second = bench.seal(observation)
        expect(
            not (second.ok and second.value is True),
            "a second seal on the same observation returned True: the generation it "
            "compares with had already moved, so it is not a compare-and-set",
        )
        expect(
            second.kind in (OutcomeKind.OK, OutcomeKind.USAGE),
            f"the second seal {second.describe_seal()} (want False or UsageError)",
        )
    after = bench.observe(owner, txn)
    expect(after.is_tombstone, f"after the second seal: {after.describe()}")
    return "a stale seal returns False (or UsageError), never True"


@check(
    "O6.seal-cas-after-lost-fence",
    "a seal whose fence was lost (store restart) while another caller published must not "
    "bury the reference",
    needs=[Capability.RESTART],
)
def _seal_after_lost_fence(bench: Bench) -> str:
    owner, txn = bench.open(), bench.txn("t")
    fence = owner.inspect_fenced(txn)
    observation = fence.__enter__()
    bench.snapshot(observation)
    try:
        expect(observation.state == ObservedState.ABSENT, "a never-seen id is not ABSENT")
        writer = bench.restart()  # drops every handle, the fence's own included
        expect(bench.publish(writer, txn, bench.first).ok, "publish after the restart failed")
        sealed = bench.seal(observation)
        expect(
            not (sealed.ok and sealed.value is True),
            "a seal on an observation from before the restart returned True although the "
            "id was published since: the seal is not a compare-and-set",
        )
    finally:
        # The fence's connection is gone: leaving may fail, and that is allowed.
        with contextlib.suppress(Exception):
            fence.__exit__(None, None, None)
    seen = bench.observe(bench.open(), txn)
    expect(seen.is_published(bench.first), f"after the stale seal the id is {seen.describe()}")
    return "a stale seal after a lost fence left the published reference alone"


@check(
    "O6.seal-refuses-published",
    "seal_absence is allowed only on an ABSENT observation: otherwise UsageError, nothing written",
)
def _seal_published(bench: Bench) -> str:
    owner, txn = bench.published()
    before = bench.observe(owner, txn)
    with bench.fenced(owner, txn) as observation:
        outcome = bench.seal(observation)
        expect(
            outcome.kind is OutcomeKind.USAGE,
            f"seal_absence on a PUBLISHED observation {outcome.describe()}, not UsageError",
        )
    after = bench.observe(owner, txn)
    expect(after.is_published(bench.first), f"after the refused seal: {after.describe()}")
    expect(after.generation == before.generation, "the refused seal moved the generation")
    return "a seal on a published id raises UsageError and writes nothing"


@check(
    "O6.seal-refuses-sealed",
    "seal_absence is allowed only on an unsealed observation: otherwise UsageError, "
    "nothing written",
)
def _seal_sealed(bench: Bench) -> str:
    owner, txn = bench.open(), bench.txn("t")
    before = bench.tombstone(owner, txn)
    with bench.fenced(owner, txn) as observation:
        outcome = bench.seal(observation)
        expect(
            outcome.kind is OutcomeKind.USAGE,
            f"seal_absence on a sealed observation {outcome.describe()}, not UsageError",
        )
    after = bench.observe(owner, txn)
    expect(after.generation == before.generation, "the refused seal moved the generation")
    return "a seal on a sealed id raises UsageError and writes nothing"


@check(
    "O6.seal-only-inside-block",
    "seal_absence is allowed only inside its inspect_fenced block: otherwise UsageError, "
    "nothing written",
)
def _seal_outside(bench: Bench) -> str:
    owner, txn = bench.open(), bench.txn("t")
    with bench.fenced(owner, txn) as observation:
        kept = observation
    outcome = bench.seal(kept)
    expect(
        outcome.kind is OutcomeKind.USAGE,
        f"seal_absence after its block ended {outcome.describe()}, not UsageError",
    )
    seen = bench.observe(owner, txn)
    expect(seen.is_fresh_absence, f"after the refused seal: {seen.describe()}")
    return "a seal outside its fence raises UsageError and writes nothing"


def _killed_after(bench: Bench, op: str, txn: str) -> None:
    """Let a child process ``op`` the id (return normally), then SIGKILL it."""
    child = bench.child()
    if op == "seal":
        child.send("fence", txn=txn)
        child.expect("calling", 30)
        expect(child.expect("entered", 30) is not None, "the other process's fence failed")
        child.send("seal")
        sealed = child.expect("sealed", 30)
        expect(sealed is not None, "the other process's seal did not answer in 30 s")
        assert sealed is not None
        outcome = bench.scanned(child.outcome(sealed), "the other process's seal")
        expect(
            outcome.ok and sealed["outcome"].get("value") is True,
            f"the other process's seal {outcome.describe()}",
        )
    else:
        child.send(op, txn=txn)
        child.expect("calling", 30)
        answer = child.expect("returned", 30)
        expect(answer is not None, f"the other process's {op} did not return in 30 s")
        assert answer is not None
        outcome = bench.scanned(child.outcome(answer), f"the other process's {op}")
        expect(outcome.ok, f"the other process's {op} {outcome.describe()}")
    child.kill()


@check(
    "O3.tombstone-durable-when-caller-killed",
    "a tombstone is durable when the seal returns: it survives the sealing process being "
    "killed inside its fence",
    needs=[Capability.OTHER_PROCESS],
)
def _tombstone_killed(bench: Bench) -> str:
    txn = bench.txn("t")
    _killed_after(bench, "seal", txn)
    owner = bench.open()
    seen = bench.observe(owner, txn)
    expect(seen.is_tombstone, f"after the sealing process was killed: {seen.describe()}")
    late = bench.publish(owner, txn, bench.first)
    expect(late.kind is OutcomeKind.REJECTED, f"then a publish {late.describe()}")
    return "a seal returned in a process that was then SIGKILLed holds"


@check(
    "O4.remove-durable-when-caller-killed",
    "a returned remove is durable: it survives its caller's process being killed",
    needs=[Capability.OTHER_PROCESS],
)
def _remove_killed(bench: Bench) -> str:
    owner, txn = bench.published()
    _killed_after(bench, "remove", txn)
    seen = bench.observe(bench.open(), txn)
    expect(seen.is_tombstone, f"after the removing process was killed: {seen.describe()}")
    return "a remove returned in a process that was then SIGKILLed holds"
