"""Checks of O7 (nothing secret is shown), O8 (observation shapes) and the generation terms."""

from __future__ import annotations

import json

from ..owner import ObservedState
from .bench import Bench, Snapshot, expect
from .harness import LEGACY_FAULTS, Capability, StoreFault
from .registry import check

__all__: list[str] = []


def _three_states(bench: Bench) -> list[tuple[str, Snapshot]]:
    """A never-seen, a published and a removed id, each observed once."""
    owner = bench.open()
    fresh, published, removed = bench.txn("fresh"), bench.txn("published"), bench.txn("removed")
    expect(bench.publish(owner, published, bench.first).ok, "publish failed")
    expect(bench.publish(owner, removed, bench.second).ok, "publish failed")
    expect(bench.remove(owner, removed).ok, "remove failed")
    return [(name, bench.observe(owner, name)) for name in (fresh, published, removed)]


@check(
    "O7.observations-reveal-nothing",
    "observations carry no artifact content, file path or credential",
)
def _observations(bench: Bench) -> str:
    _three_states(bench)  # every observation is scanned on the way
    return "observations of every state show no secret, path or content"


@check(
    "O7.errors-reveal-nothing",
    "error messages carry no artifact content, file path or credential",
)
def _errors(bench: Bench) -> str:
    owner, txn, sealed = bench.open(), bench.txn("t"), bench.txn("sealed")
    bench.publish(owner, txn, bench.first)
    bench.publish(owner, txn, bench.second)  # a conflict
    bench.remove(owner, sealed)
    bench.publish(owner, sealed, bench.first)  # a rejection
    with bench.fenced(owner, txn) as observation:
        bench.seal(observation)  # a usage error
    shown = 3
    if bench.unsupported_reason(Capability.FAULTS) is None:
        for fault in LEGACY_FAULTS:
            bench.fault(owner, fault)
            bench.publish(owner, bench.txn(f"f-{fault}"), bench.first)
            shown += 1
    return f"{shown} kinds of error message show no secret, path or content"


@check(
    "O7.reports-reveal-nothing",
    "reconciliation reports built from the owner's answers carry no path, content or credential",
)
def _reports(bench: Bench) -> str:
    owner = bench.open()
    journal = bench.journal
    names = [bench.txn(n) for n in ("commit", "conflict", "abort")]
    for name in names:
        journal.prepare(bench.first, name)
    bench.publish(owner, names[0], bench.first)
    bench.publish(owner, names[1], bench.second)
    for name in names:
        report = journal.reconcile_reference(name, owner)
        bench.scan(json.dumps(report.to_dict(), default=str), "a reconciliation report")
        bench.scan(repr(report), "a reconciliation report")
    return "reports of committed, conflicting and aborted leases show nothing secret"


@check(
    "O8.never-seen-is-absent-unsealed",
    "a never-seen id is ABSENT, unsealed, with no identity, under its own transaction id",
)
def _never_seen(bench: Bench) -> str:
    txn = bench.txn("t")
    seen = bench.observe(bench.open(), txn)
    expect(seen.transaction_id == txn, "the observation names another transaction id")
    expect(seen.state == ObservedState.ABSENT, f"a never-seen id is {seen.describe()}")
    expect(seen.sealed is False, f"a never-seen id has sealed={seen.sealed!r}")
    expect(
        seen.source_id is None and seen.content_sha256 is None,
        "a never-seen id shows an identity",
    )
    return "ABSENT, sealed is False, identity None"


@check(
    "O8.published-shows-identity",
    "PUBLISHED shows the durable identity (source id and full digest), unsealed",
)
def _published(bench: Bench) -> str:
    owner, txn = bench.published()
    seen = bench.observe(owner, txn)
    expect(seen.state == ObservedState.PUBLISHED, f"a published id is {seen.describe()}")
    expect(seen.source_id == bench.first.source_id, "the source id differs from the published one")
    expect(
        seen.content_sha256 == bench.first.content_sha256, "the digest differs from the full one"
    )
    expect(seen.sealed is False, f"a published id has sealed={seen.sealed!r}")
    return "PUBLISHED with the exact identity, sealed is False"


@check(
    "O8.tombstone-is-sealed-absence",
    "sealed is True exactly when a tombstone exists; identity fields are None when ABSENT",
)
def _tombstone(bench: Bench) -> str:
    owner, removed, sealed = bench.open(), bench.txn("removed"), bench.txn("sealed")
    expect(bench.publish(owner, removed, bench.first).ok, "publish failed")
    expect(bench.remove(owner, removed).ok, "remove failed")
    with bench.fenced(owner, sealed) as observation:
        bench.seal(observation)
    for txn, how in ((removed, "removed"), (sealed, "sealed")):
        seen = bench.observe(owner, txn)
        expect(seen.state == ObservedState.ABSENT, f"a {how} id is {seen.describe()}")
        expect(seen.sealed is True, f"a {how} id has sealed={seen.sealed!r}")
        expect(
            seen.source_id is None and seen.content_sha256 is None,
            f"a {how} id still shows an identity",
        )
    return "removed and sealed ids are ABSENT with sealed True and no identity"


@check(
    "O8.fields-have-their-types",
    "state is exactly one ObservedState member and sealed is a real bool",
)
def _types(bench: Bench) -> str:
    for name, seen in _three_states(bench):
        expect(
            isinstance(seen.state, ObservedState),
            f"state of {name!r} is a {type(seen.state).__name__}, not an ObservedState member",
        )
        expect(type(seen.sealed) is bool, f"sealed of {name!r} is a {type(seen.sealed).__name__}")
    return "state is an ObservedState, sealed a bool, in every state"


@check(
    "O8.in-doubt-is-unknown",
    "in doubt, answer UNKNOWN (or raise on entry), never ABSENT",
    needs=[Capability.FAULTS],
)
def _in_doubt(bench: Bench) -> str:
    writer, txn = bench.open(), bench.txn("t")
    expect(bench.publish(writer, txn, bench.first).ok, "publish failed")
    for fault in (StoreFault.FAIL, StoreFault.TIMEOUT):
        reader = bench.open()
        bench.fault(reader, fault)
        try:
            with bench.fenced(reader, txn) as observation:
                state = observation.state
        except Exception as exc:  # raising on entry is the other honest answer
            bench.scan(f"{exc} {exc!r}", "a fence error")
            continue
        expect(
            state != ObservedState.ABSENT,
            f"a fence whose store failed ({fault}) answered ABSENT for a published id",
        )
    return "a failing store gives UNKNOWN or an error, never ABSENT"


@check("GEN.is-int-or-str", "a generation is an int or a str")
def _gen_type(bench: Bench) -> str:
    for name, seen in _three_states(bench):
        expect(
            isinstance(seen.generation, int | str) and not isinstance(seen.generation, bool),
            f"the generation of {name!r} is a {type(seen.generation).__name__}",
        )
    return "every generation is an int or a str"


@check("GEN.changes-on-publish", "the generation changes on every durable change: publish")
def _gen_publish(bench: Bench) -> str:
    owner, txn = bench.open(), bench.txn("t")
    before = bench.observe(owner, txn).generation
    expect(bench.publish(owner, txn, bench.first).ok, "publish failed")
    expect(bench.observe(owner, txn).generation != before, "publish did not move the generation")
    return "publish moves the generation"


@check("GEN.changes-on-remove", "the generation changes on every durable change: remove")
def _gen_remove(bench: Bench) -> str:
    owner, txn, fresh = bench.open(), bench.txn("t"), bench.txn("fresh")
    expect(bench.publish(owner, txn, bench.first).ok, "publish failed")
    for name in (txn, fresh):
        before = bench.observe(owner, name).generation
        expect(bench.remove(owner, name).ok, "remove failed")
        expect(
            bench.observe(owner, name).generation != before,
            "remove did not move the generation" + (" of a never-seen id" if name == fresh else ""),
        )
    return "remove moves the generation (of a published and of a never-seen id)"


@check(
    "GEN.stable-while-unchanged",
    "the generation changes only on a durable change: two fences with nothing between agree",
)
def _gen_stable(bench: Bench) -> str:
    for name, seen in _three_states(bench):
        again = bench.observe(bench.open(), name)
        expect(again.generation == seen.generation, f"the generation of {name!r} moved by itself")
    return "unchanged ids keep their generation across fences and handles"


@check("GEN.never-reused", "a generation is never reused for that id")
def _gen_unique(bench: Bench) -> str:
    owner, txn = bench.open(), bench.txn("t")
    seen = [bench.observe(owner, txn).generation]
    expect(bench.publish(owner, txn, bench.first).ok, "publish failed")
    seen.append(bench.observe(owner, txn).generation)
    expect(bench.remove(bench.open(), txn).ok, "remove failed")
    seen.append(bench.observe(owner, txn).generation)
    expect(len(set(map(repr, seen))) == 3, "never-seen, published and removed share a generation")
    return "never-seen, published and removed have three different generations"


@check(
    "GEN.never-reused-across-handles",
    "a generation is never reused for that id, whichever handle made the change",
)
def _gen_handles(bench: Bench) -> str:
    writers = [bench.open(), bench.open()]
    txn = bench.txn("t")
    seen = [bench.observe(writers[0], txn).generation]
    expect(bench.publish(writers[0], txn, bench.first).ok, "publish failed")
    seen.append(bench.observe(writers[1], txn).generation)
    expect(bench.remove(writers[1], txn).ok, "remove failed")
    seen.append(bench.observe(writers[0], txn).generation)
    expect(
        len(set(map(repr, seen))) == 3,
        "a change made through another handle gave the id a generation it had before",
    )
    return "changes through two handles never repeat a generation"


@check(
    "GEN.never-reused-across-restart",
    "a generation is never reused for that id, across a restart of the store",
    needs=[Capability.RESTART],
)
def _gen_restart(bench: Bench) -> str:
    owner, txn = bench.open(), bench.txn("t")
    seen = [bench.observe(owner, txn).generation]
    expect(bench.publish(owner, txn, bench.first).ok, "publish failed")
    seen.append(bench.observe(owner, txn).generation)
    owner = bench.restart()
    expect(bench.remove(owner, txn).ok, "remove failed")
    seen.append(bench.observe(owner, txn).generation)
    expect(len(set(map(repr, seen))) == 3, "after a restart the id got a generation it had before")
    return "a change after a restart never repeats a generation"
