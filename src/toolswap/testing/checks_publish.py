"""Checks of O1 (publish is durable, visible, idempotent, conflict-safe) and O2 (rejection).

Each check names the sentence it probes; see :mod:`toolswap.owner` for the
full text of the promises.
"""

from __future__ import annotations

from .bench import Bench, expect
from .harness import Capability, StoreFault
from .outcome import OutcomeKind
from .registry import check

__all__: list[str] = []


@check("O1.publish-visible-to-next-fence", "publish returns only once the reference is visible")
def _visible(bench: Bench) -> str:
    owner, txn = bench.open(), bench.txn("t")
    outcome = bench.publish(owner, txn, bench.first)
    expect(outcome.ok, f"publish of a never-seen id {outcome.describe()}")
    seen = bench.observe(owner, txn)
    expect(seen.is_published(bench.first), f"the next fence saw {seen.describe()}, not the claim")
    return "a published reference is visible to the next fence with the claim's identity"


@check(
    "O1.publish-visible-to-other-handle",
    "a returned publish is visible to every later fence, on any handle",
)
def _visible_elsewhere(bench: Bench) -> str:
    writer, reader, txn = bench.open(), bench.open(), bench.txn("t")
    expect(bench.publish(writer, txn, bench.first).ok, "publish failed")
    seen = bench.observe(reader, txn)
    expect(seen.is_published(bench.first), f"another handle's fence saw {seen.describe()}")
    return "another handle's next fence sees the reference"


@check(
    "O1.publish-visible-to-other-process",
    "a returned publish is visible to every later fence, in any process",
    needs=[Capability.OTHER_PROCESS],
)
def _visible_other_process(bench: Bench) -> str:
    txn = bench.txn("t")
    child = bench.child()
    expect(bench.publish(bench.open(), txn, bench.first).ok, "publish failed")
    child.send("observe", txn=txn)
    child.expect("calling", 30)
    answer = child.expect("returned", 30)
    expect(answer is not None, "the other process's fence did not answer in 30 s")
    assert answer is not None
    outcome = bench.scanned(child.outcome(answer), "the other process's fence")
    expect(outcome.ok, f"the other process's fence {outcome.describe()}")
    seen = bench.child_snapshot({"observation": answer["outcome"]["value"]})
    expect(seen.is_published(bench.first), f"the other process saw {seen.describe()}")
    return "a fence in another process sees the reference"


@check("O1.publish-durable-across-reopen", "a returned publish is durable (new handles)")
def _durable_reopen(bench: Bench) -> str:
    txn = bench.txn("t")
    expect(bench.publish(bench.open(), txn, bench.first).ok, "publish failed")
    seen = bench.observe(bench.reopen(), txn)
    expect(seen.is_published(bench.first), f"after every handle closed: {seen.describe()}")
    return "the reference survives closing every handle"


@check(
    "O1.publish-durable-across-restart",
    "a returned publish is durable (store restart)",
    needs=[Capability.RESTART],
)
def _durable_restart(bench: Bench) -> str:
    txn = bench.txn("t")
    expect(bench.publish(bench.open(), txn, bench.first).ok, "publish failed")
    seen = bench.observe(bench.restart(), txn)
    expect(seen.is_published(bench.first), f"after a restart of the store: {seen.describe()}")
    return "the reference survives a restart of the store"


@check(
    "O1.publish-returns-only-when-durable",
    "publish returns normally only once the reference is durable and visible, "
    "also when the store fails",
    needs=[Capability.FAULTS],
)
def _publish_under_fault(bench: Bench) -> str:
    for fault in (StoreFault.FAIL, StoreFault.TIMEOUT):
        owner, txn = bench.open(), bench.txn(f"t-{fault}")
        bench.fault(owner, fault)
        outcome = bench.publish(owner, txn, bench.first)
        if outcome.ok:
            seen = bench.observe(bench.open(), txn)
            expect(
                seen.is_published(bench.first),
                f"under a {fault} fault publish returned normally, yet the fence saw "
                f"{seen.describe()}",
            )
    return "a publish that hit a failing store did not claim success it did not have"


@check(
    "O1.republish-same-identity-is-no-op",
    "publishing the identity an id already holds returns normally and changes nothing",
)
def _republish(bench: Bench) -> str:
    owner, txn = bench.published()
    before = bench.observe(owner, txn)
    other = bench.open()
    for attempt in range(bench.integer("republishes", 1, 4, 2)):
        again = bench.publish((owner, other)[attempt % 2], txn, bench.first)
        expect(again.ok, f"publishing the same identity again {again.describe()}")
    after = bench.observe(owner, txn)
    expect(after.is_published(bench.first), f"after the no-op publish: {after.describe()}")
    expect(after.generation == before.generation, "the no-op publish moved the generation")
    return "a second publish of the same identity is a no-op (generation unchanged)"


@check(
    "O1.other-identity-conflicts",
    "another identity under an id that holds a reference raises OwnerConflictError",
)
def _conflict(bench: Bench) -> str:
    owner, txn = bench.published()
    other = bench.publish(owner, txn, bench.second)
    expect(
        other.kind is OutcomeKind.CONFLICT,
        f"publishing another identity under a held id {other.describe()}, not OwnerConflictError",
    )
    return "another identity raises OwnerConflictError"


@check(
    "O1.conflict-changes-nothing",
    "a refused conflicting publish changes nothing",
)
def _conflict_changes_nothing(bench: Bench) -> str:
    owner, txn = bench.published()
    before = bench.observe(owner, txn)
    bench.publish(owner, txn, bench.second)
    after = bench.observe(bench.open(), txn)
    expect(
        after.is_published(bench.first),
        f"after the conflict: {after.describe()} (the stored identity changed)"
        if after.state == before.state
        else f"after the conflict: {after.describe()}",
    )
    expect(after.generation == before.generation, "the refused publish moved the generation")
    return "the held reference and its generation are unchanged"


@check(
    "O1.conflict-seen-across-handles",
    "the conflict is decided on the store's state, not on what this handle has seen",
)
def _conflict_across_handles(bench: Bench) -> str:
    first, second, txn = bench.open(), bench.open(), bench.txn("t")
    bench.observe(second, txn)  # the second handle has seen the id absent
    expect(bench.publish(first, txn, bench.first).ok, "publish failed")
    other = bench.publish(second, txn, bench.second)
    expect(
        other.kind is OutcomeKind.CONFLICT,
        f"another handle's publish of another identity {other.describe()}, not OwnerConflictError",
    )
    seen = bench.observe(first, txn)
    expect(seen.is_published(bench.first), f"after the conflict: {seen.describe()}")
    return "a handle that saw the id absent still gets OwnerConflictError"


@check(
    "O1.identity-is-the-full-digest",
    "identity is the source id and the FULL digest: a shared digest prefix is another identity",
)
def _full_digest(bench: Bench) -> str:
    owner, txn = bench.published()
    twin = bench.publish(owner, txn, bench.twin)
    expect(
        twin.kind is OutcomeKind.CONFLICT,
        f"a claim with the same source id and digest prefix but another full digest "
        f"{twin.describe()}, not OwnerConflictError",
    )
    seen = bench.observe(owner, txn)
    expect(
        seen.content_sha256 == bench.first.content_sha256,
        "the fence shows another digest than the full one published",
    )
    return "a twin digest (same 12-hex prefix) is another identity"


@check(
    "O2.rejected-writes-nothing",
    "ArtifactPublicationRejected means nothing was written for that id by this call",
)
def _rejected_writes_nothing(bench: Bench) -> str:
    owner, txn = bench.open(), bench.txn("t")
    before = bench.tombstone(owner, txn)
    outcome = bench.publish(owner, txn, bench.first)
    expect(outcome.kind is OutcomeKind.REJECTED, f"publish on a tombstone {outcome.describe()}")
    after = bench.observe(bench.open(), txn)
    expect(after.is_tombstone, f"after the rejected publish: {after.describe()}")
    expect(after.generation == before.generation, "the rejected publish moved the generation")
    return "a rejected publish leaves the id exactly as it was"


@check(
    "O2.store-failure-is-not-rejection",
    "every other failure (timeout, lost connection, ...) means maybe written: never "
    "ArtifactPublicationRejected",
    needs=[Capability.FAULTS],
)
def _failure_is_not_rejection(bench: Bench) -> str:
    for fault in (StoreFault.FAIL, StoreFault.TIMEOUT, StoreFault.LOST_ACK):
        owner, txn = bench.open(), bench.txn(f"t-{fault}")
        bench.fault(owner, fault)
        outcome = bench.publish(owner, txn, bench.first)
        seen = bench.observe(bench.open(), txn)
        if outcome.kind is OutcomeKind.REJECTED:
            written = " although the reference was written" if seen.state != "ABSENT" else ""
            raise_msg = (
                f"under a {fault} fault publish raised ArtifactPublicationRejected{written}: "
                "an uncertain write must stay uncertain"
            )
            expect(False, raise_msg)
        if fault is StoreFault.LOST_ACK and outcome.ok:
            expect(seen.is_published(bench.first), f"after {fault}: {seen.describe()}")
    return "fail, timeout and lost acknowledgement never surface as a rejection"


@check(
    "O1.publish-durable-when-caller-killed",
    "a returned publish is durable: it survives its caller's process being killed "
    "(no close, no flush)",
    needs=[Capability.OTHER_PROCESS],
)
def _durable_killed(bench: Bench) -> str:
    txn = bench.txn("t")
    child = bench.child()
    child.send("publish", txn=txn, claim=bench.first.to_dict())
    child.expect("calling", 30)
    answer = child.expect("returned", 30)
    expect(answer is not None, "the other process's publish did not return in 30 s")
    assert answer is not None
    outcome = bench.scanned(child.outcome(answer), "the other process's publish")
    expect(outcome.ok, f"the other process's publish {outcome.describe()}")
    child.kill()
    seen = bench.observe(bench.open(), txn)
    expect(
        seen.is_published(bench.first),
        f"after the publishing process was killed the fence saw {seen.describe()}",
    )
    return "a publish returned in a process that was then SIGKILLed is visible"
