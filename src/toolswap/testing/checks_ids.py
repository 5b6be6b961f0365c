"""Checks that ids and identities are taken exactly, and that many ids live side by side.

An adapter that normalises a transaction id (case folding, Unicode
normalisation, trimming, sanitising separators, truncating to a column's
width) or an identity (a lower-cased source id, a parsed file number) passes
every check that uses one id and one identity.  These checks put near ids and
near identities side by side in one store (:func:`~toolswap.testing.cases.id_variants`,
:func:`~toolswap.testing.cases.identity_variants`), and change many ids back
to back.
"""

from __future__ import annotations

from ..owner import ObservedState
from .bench import Bench, expect
from .cases import how_ids_differ, short
from .outcome import OutcomeKind
from .registry import check

__all__: list[str] = []

_MANY_IDS = 100


@check(
    "O1.publish-keyed-by-exact-id",
    "a reference is visible under its exact transaction id only: an id that differs in "
    "case, Unicode form, white space, separators or after a long shared prefix is another id",
)
def _exact_id_publish(bench: Bench) -> str:
    owner, txn = bench.published()
    near = bench.family(txn)
    held = {txn: bench.first}
    for index, other in enumerate(near):
        seen = bench.observe(owner, other)
        expect(
            seen.is_fresh_absence,
            f"after publishes under {short(txn)} and {index} ids near it, a fence over the "
            f"never-seen {short(other)}, which differs from {short(txn)} "
            f"{how_ids_differ(txn, other)}, saw {seen.describe()}: the adapter stores ids "
            "inexactly",
        )
        claim = (bench.second, bench.first)[index % 2]
        outcome = bench.publish(owner, other, claim)
        expect(
            outcome.ok,
            f"publishing under the never-seen id {short(other)}, which differs from the "
            f"published {short(txn)} {how_ids_differ(txn, other)}, {outcome.describe()}",
        )
        held[other] = claim
    reader = bench.open()
    for other, claim in held.items():
        again = bench.observe(reader, other)
        expect(
            again.is_published(claim),
            f"{short(other)} does not hold what was published under it ({again.describe()}"
            f"{', another identity' if again.state == 'PUBLISHED' else ''})",
        )
    return f"{len(near)} ids near the published one are other ids, each with its own reference"


@check(
    "O4.remove-keyed-by-exact-id",
    "remove hides and tombstones its exact id only: removing an id near a published one "
    "leaves that reference and its generation alone",
)
def _exact_id_remove(bench: Bench) -> str:
    owner, txn = bench.published()
    before = bench.observe(owner, txn)
    near = bench.family(txn)
    for other in near:
        outcome = bench.remove(owner, other)
        expect(outcome.ok, f"remove of the never-seen id {short(other)} {outcome.describe()}")
        seen = bench.observe(owner, txn)
        expect(
            seen.is_published(bench.first) and seen.generation == before.generation,
            f"removing {short(other)}, which differs from {short(txn)} "
            f"{how_ids_differ(txn, other)}, changed it: {seen.describe()}",
        )
    return f"removing {len(near)} near ids left the published reference alone"


@check(
    "O3.tombstone-keyed-by-exact-id",
    "a tombstone refuses publishes of its exact id only: an id near a tombstoned one can "
    "still be published",
)
def _exact_id_tombstone(bench: Bench) -> str:
    owner, txn = bench.open(), bench.txn("t")
    bench.tombstone(owner, txn)
    near = bench.family(txn)
    for index, other in enumerate(near):
        outcome = bench.publish(owner, other, (bench.first, bench.second)[index % 2])
        expect(
            outcome.ok,
            f"publishing under the never-seen {short(other)}, which differs from the "
            f"tombstoned {short(txn)} {how_ids_differ(txn, other)}, {outcome.describe()}",
        )
    seen = bench.observe(owner, txn)
    expect(seen.is_tombstone, f"the tombstoned id is now {seen.describe()}")
    return f"{len(near)} ids near a tombstoned one were published normally"


@check(
    "O1.near-identity-conflicts",
    "another identity under a held id raises OwnerConflictError and changes nothing, however "
    "little it differs: the session id's case or separators, the file name, the digest",
)
def _near_identity(bench: Bench) -> str:
    owner, txn = bench.published()
    before = bench.observe(owner, txn)
    others = {n: c for n, c in bench.alike(bench.first).items() if n.startswith("other-")}
    for name, claim in others.items():
        outcome = bench.publish(owner, txn, claim)
        expect(
            outcome.kind is OutcomeKind.CONFLICT,
            f"publishing an identity one field away from the held one ({name}: "
            f"{claim.source_id!r}) {outcome.describe()}, not OwnerConflictError",
        )
    after = bench.observe(bench.open(), txn)
    expect(
        after.is_published(bench.first) and after.generation == before.generation,
        f"after the refused near identities the id is {after.describe()} (changed)",
    )
    return f"{len(others)} identities one field away each conflict and change nothing"


@check(
    "O1.same-identity-other-fields-is-no-op",
    "the identity is the source id and the full digest only: the same identity with another "
    "reference count or retention is a no-op that returns normally",
)
def _same_identity(bench: Bench) -> str:
    owner, txn = bench.published()
    before = bench.observe(owner, txn)
    same = {n: c for n, c in bench.alike(bench.first).items() if n.startswith("same-")}
    for name, claim in same.items():
        outcome = bench.publish(bench.open(), txn, claim)
        expect(
            outcome.ok,
            f"publishing the held identity again with another {name[len('same-') :]} "
            f"{outcome.describe()}: only the source id and digest make the identity",
        )
    after = bench.observe(owner, txn)
    expect(
        after.is_published(bench.first) and after.generation == before.generation,
        f"the no-op publishes changed the id: {after.describe()}",
    )
    return "the held identity with another reference count or retention is a no-op"


@check(
    "O8.shows-identity-exactly",
    "PUBLISHED shows the identity exactly as published, for identities one field apart (no "
    "case folding, no rewritten file name)",
)
def _exact_identity(bench: Bench) -> str:
    owner = bench.open()
    claims = {"first": bench.first, **bench.alike(bench.first)}
    held = {}
    txns = bench.txns("i", len(claims))
    for txn, (name, claim) in zip(txns, claims.items(), strict=True):
        outcome = bench.publish(owner, txn, claim)
        expect(outcome.ok, f"publishing the identity {name} under a new id {outcome.describe()}")
        held[txn] = (name, claim)
    reader = bench.open()
    for txn, (name, claim) in held.items():
        seen = bench.observe(reader, txn)
        expect(
            seen.state == ObservedState.PUBLISHED
            and seen.identity == (claim.source_id, claim.content_sha256),
            f"the identity {name} ({claim.source_id!r}) shows as {seen.describe()} "
            f"{seen.source_id!r}: an identity must come back exactly",
        )
    return f"{len(held)} identities one field apart each show exactly as published"


@check(
    "GEN.many-ids-back-to-back",
    "the generation changes on every durable change and is never reused, over hundreds of "
    "back-to-back changes of many ids, which all keep what they hold",
    waits=True,
)
def _many_ids(bench: Bench) -> str:
    owner, reader = bench.open(), bench.open()
    names = bench.txns("n", _MANY_IDS)
    seen: dict[str, list[object]] = {}
    changes = 0
    for index, txn in enumerate(names):
        history = seen[txn] = [bench.observe(reader, txn).generation]
        if index % 5 != 4:  # four in five are published first
            expect(bench.publish(owner, txn, bench.first).ok, f"publish of {short(txn)} failed")
            history.append(bench.observe(reader, txn).generation)
            changes += 1
        if index % 5 != 0:  # four in five are removed (one of them never published)
            expect(bench.remove(owner, txn).ok, f"remove of {short(txn)} failed")
            history.append(bench.observe(reader, txn).generation)
            changes += 1
        expect(
            len(set(map(repr, history))) == len(history),
            f"{short(txn)} showed the generations {history!r} across back-to-back changes: "
            "a generation must change on every durable change and never repeat (not a clock, "
            "not a counter that wraps)",
        )
    for index, txn in enumerate(names):
        last = bench.observe(reader, txn)
        want = "PUBLISHED" if index % 5 == 0 else "ABSENT (sealed)"
        expect(
            last.describe() == want and last.generation == seen[txn][-1],
            f"after {changes} changes of {len(names)} ids, {short(txn)} is "
            f"{last.describe()} (generation {last.generation!r}), not {want} (generation "
            f"{seen[txn][-1]!r}): the store loses ids or changes them by itself",
        )
    return f"{changes} back-to-back changes of {len(names)} ids: all generations new, all ids kept"
