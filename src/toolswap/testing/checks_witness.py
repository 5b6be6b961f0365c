"""Checks of O9, the optional census: the owner as cleanup's second witness.

An owner that offers ``census_fenced`` promises that, inside its block, it
lists every visible reference naming each given artifact (whatever the digest
part of the reference's source id) and holds back every publish naming one of
them.  Cleanup keeps a file the census names, or cannot answer for.  An owner
without the method is skipped with that reason: the promise is optional.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..domain import ArtifactRetentionClaim, format_source_id, parse_source_id
from .bench import HOLD_SECONDS, JOIN_SECONDS, Bench, expect
from .registry import CheckSkipped, check

__all__: list[str] = []


def _census(owner: Any, source_ids: Sequence[str]) -> Mapping[str, tuple[str, ...]]:
    census_fenced = getattr(owner, "census_fenced", None)
    if not callable(census_fenced):
        raise CheckSkipped("the owner offers no census_fenced (O9 is optional)")
    with census_fenced(tuple(source_ids)) as found:
        return {key: tuple(found[key]) for key in found}


def _elsewhere(claim: ArtifactRetentionClaim, digest: str) -> ArtifactRetentionClaim:
    """The same artifact (session and file) under a source id with another digest part."""
    parsed = parse_source_id(claim.source_id)
    source_id = format_source_id(parsed.session_id, parsed.filename, digest)
    return ArtifactRetentionClaim(source_id=source_id, content_sha256=digest)


def _unused(claim: ArtifactRetentionClaim) -> str:
    """A source id of the same session naming a file no check publishes."""
    parsed = parse_source_id(claim.source_id)
    return format_source_id(parsed.session_id, "tool_result_999.txt", claim.content_sha256)


@check(
    "O9.census-lists-every-visible-reference",
    "O9: the census yields, for every given source id, the ids whose visible "
    "reference names that artifact, and nothing else",
)
def _lists_visible(bench: Bench) -> str:
    owner = bench.open()
    first, second = bench.first, bench.second
    t1, t2, t3, t4 = (bench.txn(n) for n in ("t1", "t2", "t3", "t4"))
    for txn, claim in ((t1, first), (t2, first), (t3, second), (t4, first)):
        expect(bench.publish(owner, txn, claim).ok, f"publishing {txn} failed")
    expect(bench.remove(owner, t4).ok, "removing t4 failed")
    unused = _unused(first)
    found = _census(bench.open(), [first.source_id, second.source_id, unused])
    expect(
        set(found) == {first.source_id, second.source_id, unused},
        "the census does not answer for exactly the source ids it was given",
    )
    expect(
        sorted(found[first.source_id]) == sorted([t1, t2]),
        "the first artifact's references are not the two visible ones "
        f"({len(found[first.source_id])} listed)",
    )
    expect(
        list(found[second.source_id]) == [t3], "the second artifact's reference is not listed alone"
    )
    expect(found[unused] == (), "an artifact nothing references is said to be referenced")
    return "two, one and no visible references listed; a removed one left out"


@check(
    "O9.census-names-the-artifact-whatever-the-digest",
    "O9: a reference names an artifact by session and file name, whatever the "
    "digest part of its source id",
)
def _whatever_digest(bench: Bench) -> str:
    owner = bench.open()
    first = bench.first
    other = _elsewhere(first, bench.second.content_sha256)
    t1, t2 = bench.txn("t1"), bench.txn("t2")
    expect(bench.publish(owner, t1, bench.twin).ok, "publishing the twin failed")
    expect(bench.publish(owner, t2, other).ok, "publishing under another digest part failed")
    found = _census(bench.open(), [first.source_id])
    expect(
        sorted(found[first.source_id]) == sorted([t1, t2]),
        "a reference naming the artifact under another digest is not counted",
    )
    return "references under another full digest and another digest part are counted"


@check(
    "O9.census-holds-back-a-publish-naming-it",
    "O9: for the whole census block no publish by another caller of a reference "
    "naming a counted artifact takes effect",
)
def _holds_back(bench: Bench) -> str:
    first = bench.first
    other = bench.open()  # opened before the fence: opening may itself wait for one
    txn = bench.txn("t")
    census_fenced = getattr(bench.open(), "census_fenced", None)
    if not callable(census_fenced):
        raise CheckSkipped("the owner offers no census_fenced (O9 is optional)")
    with census_fenced((first.source_id,)) as found:
        expect(found[first.source_id] == (), "a fresh store shows a reference")
        contender = bench.in_thread(lambda: other.publish(txn, first))
        contender.started.wait(JOIN_SECONDS)
        if contender.wait(HOLD_SECONDS):
            assert contender.outcome is not None
            expect(not contender.outcome.ok, "a publish naming it completed inside the census")
    expect(contender.wait(JOIN_SECONDS), "the held-back publish never finished after the census")
    after = _census(bench.open(), [first.source_id])
    assert contender.outcome is not None
    if contender.outcome.ok:
        expect(after[first.source_id] == (txn,), "the publish returned, the census misses it")
    return f"the publish waited for the census and then {contender.outcome.describe()}"
