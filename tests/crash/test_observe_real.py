"""The real checkers' adapter (faultinject/observe.py) reports what the real state shows.

The adapter decides nothing about S1-S7: each test builds a tiny real-looking
state (journal bytes, the owner's fenced view, files) and checks one fact of
the Observable it makes, or the spec's verdict on it.
"""

from __future__ import annotations

import hashlib
import json

from toolswap.faultinject.observe import observe_real, observe_unlink
from toolswap.faultinject.owner_source import ProtocolView, Seen
from toolswap.spec import invariants
from toolswap.spec.lease import LeaseState as L
from toolswap.spec.observable import Observable, Shown

from toolswap.domain import ArtifactRetentionClaim as Claim
from toolswap.domain import format_source_id
from toolswap.owner import ObservedState

SESSION = "s1"
A, B = "tool_result_001.txt", "tool_result_002.txt"
BYTES = b"hello\n" * 100
DIGEST = hashlib.sha256(BYTES).hexdigest()
OTHER_BYTES = b"other\n" * 100
OTHER_DIGEST = hashlib.sha256(OTHER_BYTES).hexdigest()


def claim(name: str = A, digest: str = DIGEST, until: float | None = None) -> Claim:
    source = format_source_id(SESSION, name, digest)
    return Claim(source_id=source, content_sha256=digest, retain_until=until)


def s1(o: Observable) -> list[str]:
    return [handle for handle, _ in invariants.s1_no_dangling_reference(o)]


def journal(*lines: tuple[str, str], torn: bytes = b"") -> bytes:
    body = b"".join(
        json.dumps({"transaction_id": t, "phase": p}).encode() + b"\n" for t, p in lines
    )
    return body + torn


def published(c: Claim) -> Seen:
    return Seen(
        state=ObservedState.PUBLISHED,
        source_id=c.source_id,
        content_sha256=c.content_sha256,
        generation=1,
    )


TOMBSTONE = Seen(state=ObservedState.ABSENT, generation=2, sealed=True)
ABSENT = Seen(state=ObservedState.ABSENT, generation=0)


def observe(**overrides: object) -> Observable:
    facts: dict[str, object] = {
        "journal": journal(("t1", "PREPARED")),
        "intents": {"t1": claim()},
        "now": 100.0,
        "view": ProtocolView({"t1": ABSENT}),
        "files": {A: BYTES},
        "ours": {A},
        "landing": {},
    }
    facts.update(overrides)
    return observe_real(**facts)  # type: ignore[arg-type]


def only(o: Observable, txn: str = "t1"):  # noqa: ANN201 - a LeaseView
    return next(v for v in o.leases if v.txn == txn)


def test_the_intents_own_identity_is_its_reference_any_other_is_other() -> None:
    assert only(observe(view=ProtocolView({"t1": published(claim())}))).shown is Shown.REFERENCE
    other = only(observe(view=ProtocolView({"t1": published(claim(B, OTHER_DIGEST))})))
    assert (other.shown, other.other) == (Shown.OTHER, B)


def test_an_id_with_no_lease_shows_its_own_reference_to_what_it_names() -> None:
    o = observe(view=ProtocolView({"t1": ABSENT, "t9": published(claim(B))}))
    assert (only(o, "t9").shown, only(o, "t9").artifact) == (Shown.REFERENCE, B)


def test_a_tombstone_or_another_identity_refuses_a_late_write() -> None:
    flying = {"t1": claim()}
    assert only(observe(landing=flying)).may_land
    assert not only(observe(landing=flying, view=ProtocolView({"t1": TOMBSTONE}))).may_land
    shown_other = ProtocolView({"t1": published(claim(B, OTHER_DIGEST))})
    assert not only(observe(landing=flying, view=shown_other)).may_land


def test_a_rejection_counts_only_while_the_reference_is_not_visible() -> None:
    lines = journal(("t1", "PREPARED"), ("t1", "ABORTED"))
    kept = observe(journal=lines, rejected={"t1"})
    assert only(kept).rejected and not list(invariants.s3_tombstone_before_abort(kept))
    lied = observe(journal=lines, rejected={"t1"}, view=ProtocolView({"t1": published(claim())}))
    assert not only(lied).rejected
    assert [h for h, _ in invariants.s3_tombstone_before_abort(lied)] == ["S3"]


def test_bytes_that_differ_from_the_intent_are_not_intact_unless_the_harness_left_them() -> None:
    assert not only(observe(files={A: OTHER_BYTES})).intact
    assert only(observe(files={A: OTHER_BYTES}, tampered={A: OTHER_BYTES})).intact
    assert not only(observe(files={A: BYTES}, tampered={A: OTHER_BYTES})).intact
    assert only(observe(files={A: OTHER_BYTES}, tampered={A: None})).intact


def test_conflict_notes_and_a_torn_tail_are_not_lease_records() -> None:
    lines = journal(("t1", "PREPARED"), ("t1", "CONFLICT"), torn=b'{"transaction_id": "t1", "ph')
    assert only(observe(journal=lines)).records == (L.PREPARED,)


def test_a_committed_lease_is_retained_until_its_retain_until() -> None:
    lines = journal(("t1", "PREPARED"), ("t1", "COMMITTED"))
    assert only(observe(journal=lines, intents={"t1": claim(until=100.5)})).retained
    assert not only(observe(journal=lines, intents={"t1": claim(until=100.0)})).retained


def test_a_conflict_is_reported_only_when_its_identity_was_journalled() -> None:
    other = claim(B, OTHER_DIGEST)
    view = ProtocolView({"t1": published(other)})
    untold = only(observe(view=view, ours={A, B}))
    assert not untold.reported and not untold.awaits_operator
    told = only(observe(view=view, ours={A, B}, conflicts={"t1": {(other.source_id, DIGEST)}}))
    assert not told.reported  # another digest was journalled
    told = only(
        observe(view=view, ours={A, B}, conflicts={"t1": {(other.source_id, OTHER_DIGEST)}})
    )
    assert told.reported and told.awaits_operator


def test_artifacts_are_ours_the_needed_and_the_reused() -> None:
    o = observe(files={A: BYTES, "tool_result_900.txt": b"x"}, reused={B})
    assert set(o.artifacts) == {A, B}
    assert o.artifacts[B].reused and o.artifacts[B].deleted


def test_a_name_whose_bytes_differ_from_its_first_is_rewritten() -> None:
    assert observe(first={A: OTHER_BYTES}).artifacts[A].rewritten
    assert not observe(first={A: BYTES}).artifacts[A].rewritten


def test_an_unlink_a_live_lease_needs_is_s1() -> None:
    prepared = json.dumps(
        {"transaction_id": "t1", "phase": "PREPARED", "intent": {"source_id": claim().source_id}}
    ).encode()
    seen = observe_unlink(journal=prepared + b"\n", name=A, now=100.0)
    assert s1(seen) == ["S1"]
    assert s1(observe_unlink(journal=b"", name=A, now=1)) == []


def test_an_unlink_past_a_committed_retain_until_is_allowed() -> None:
    intent = {"source_id": claim().source_id, "retain_until": 50.0}
    lines = (
        json.dumps({"transaction_id": "t1", "phase": "PREPARED", "intent": intent}).encode()
        + b"\n"
        + journal(("t1", "COMMITTED"))
    )
    assert not list(
        invariants.s1_no_dangling_reference(observe_unlink(journal=lines, name=A, now=100))
    )
    assert list(invariants.s1_no_dangling_reference(observe_unlink(journal=lines, name=A, now=10)))


def test_an_unlink_of_what_a_reported_conflict_shows_is_s1() -> None:
    assert s1(observe_unlink(journal=b"", name=A, now=100.0, shown={"t2": A})) == ["S1"]
