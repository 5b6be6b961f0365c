"""The real checkers' adapter: the implementation's state as an :class:`Observable`.

Rules
=====

1. :func:`observe_real` turns what a harness can read of the real system (the
   journal's bytes and its recovery, the owner's fenced view, the files in
   ``tool-results/``, and the watched owner's ghosts) into the observable state
   that ``toolswap.spec.invariants`` judges.  It decides nothing about S1-S7 or
   L1: the crash explorer (:mod:`.explorer`) and the implementation-vs-model
   machine (:mod:`.protocol_machine`) call the spec's functions on what it
   returns, as the spec explorer does on the model's states.
2. A transaction's own reference is one whose identity (source id and digest)
   is its intent's; any other identity is ``OTHER``, naming an artifact of
   ours only when the source id parses as one.  An id with no lease that shows
   a reference shows its own (the spec's foreign id, likewise).
3. A publish still in flight "may land" unless the owner would refuse it: a
   tombstone, or another identity under the id (contract O3).
4. A rejection counts (``rejected``, S3) only while the id's own reference is
   not visible: the owner that shows it either wrote before it said no, or
   took the id after it; either way the id was not refused before any write.
5. Records are the journal's complete lines (the torn tail is not a record);
   CONFLICT notes are not lease events.

Theory of operation
===================

Both harnesses see the real system through the same windows, so one function
serves both; their arguments differ only in where the ghosts live (the crash
explorer's ``World``, the machine's model).  The crash explorer also checks
things that are about its run, not about a state (every returned pointer was
durable at the crash, GC refused over a corrupt journal, recovery opened the
journal at all); those stay in the explorer, under the invariant they serve.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from toolswap.spec.lease import LeaseState
from toolswap.spec.observable import ArtifactView, LeaseView, Observable, Shown

from toolswap.domain import ArtifactRetentionClaim, parse_source_id

from .owner_source import ProtocolView

__all__ = ["observe_real", "observe_unlink", "journal_records", "artifact_name"]

_PHASES = {s.value: s for s in LeaseState if s is not LeaseState.NEW}


def artifact_name(source_id: object) -> str:
    """The file name a source id of this session names ("" when it does not parse)."""
    if not isinstance(source_id, str):
        return ""
    try:
        return parse_source_id(source_id).filename
    except ValueError:
        return ""


def journal_records(data: bytes) -> list[dict[str, Any]]:
    """The journal's complete lines that parse as JSON objects (a torn tail is skipped)."""
    out: list[dict[str, Any]] = []
    for line in data.split(b"\n")[:-1]:
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def _lease_records(data: bytes) -> dict[str, tuple[LeaseState, ...]]:
    found: dict[str, list[LeaseState]] = {}
    for record in journal_records(data):
        txn, phase = record.get("transaction_id"), _PHASES.get(str(record.get("phase")))
        if isinstance(txn, str) and phase is not None:
            found.setdefault(txn, []).append(phase)
    return {txn: tuple(phases) for txn, phases in found.items()}


def observe_real(
    *,
    journal: bytes,
    intents: Mapping[str, ArtifactRetentionClaim],
    now: float,
    view: ProtocolView,
    files: Mapping[str, bytes],
    ours: Collection[str],
    landing: Mapping[str, ArtifactRetentionClaim] | Iterable[tuple[str, ArtifactRetentionClaim]],
    in_flight: Collection[str] = (),
    rejected: Collection[str] = (),
    acknowledged: Collection[str] = (),
    unprepared: Collection[str] = (),
    conflicts: Mapping[str, Collection[tuple[str | None, str | None]]] | None = None,
    tampered: Mapping[str, bytes | None] | None = None,
    first: Mapping[str, bytes] | None = None,
    reused: Collection[str] = (),
    claimed: Collection[str] = (),
    outside: tuple[str, ...] = (),
    evidence_changed: str = "",
) -> Observable:
    """The observable state of the real system.

    ``journal``: the journal file's bytes now; ``intents``: each lease's claim (its
    PREPARED intent); ``view``: the owner's fenced answer per id; ``files``: the
    entries of ``tool-results/`` now (name -> bytes); ``ours``: the names toolswap
    wrote; ``landing``: publishes the harness cannot rule out (in flight, or whose
    fate the caller never learnt), with their claims; ``in_flight``: ids with a
    request not yet applied (L1); ``conflicts``: per id, the
    identities (source id, digest) a CONFLICT record journalled, which is what
    ``pending_conflict`` reports; ``tampered``: names whose bytes the harness altered ->
    the bytes it left (None: do not judge them); ``first``: the bytes a name must
    still hold (S6; leave out what the harness itself altered); ``reused``: names a new
    externalization took although they existed; ``claimed``: names a claim that cleanup
    honours protects (L1).
    """
    records = _lease_records(journal)
    flying = dict(landing.items() if isinstance(landing, Mapping) else landing)
    conflicts = conflicts or {}
    tampered = tampered or {}
    first = first or {}
    leases = []
    needed: set[str] = set()
    for txn in sorted({*records, *intents, *view.seen, *flying, *in_flight}):
        intent = intents.get(txn) or flying.get(txn)
        seen = view.seen.get(txn)
        kind = seen.kind if seen is not None else "absent"
        shown, other = Shown.NOTHING, ""
        if kind == "tombstone":
            shown = Shown.TOMBSTONE
        elif kind == "published":
            identity = (seen.source_id, seen.content_sha256) if seen is not None else None
            if intent is None or identity == (intent.source_id, intent.content_sha256):
                shown = Shown.REFERENCE
            else:
                shown, other = Shown.OTHER, artifact_name(identity and identity[0])
        artifact = artifact_name(intent.source_id) if intent is not None else ""
        if intent is None and shown is Shown.REFERENCE and seen is not None:
            artifact = artifact_name(seen.source_id)  # an id with no lease: what it shows
        if intent is not None:
            needed.add(artifact)
        phases = records.get(txn, ())
        until = intent.retain_until if intent is not None else None
        state = phases[-1] if phases else LeaseState.NEW
        reported = bool(
            shown is Shown.OTHER
            and seen is not None
            and (seen.source_id, seen.content_sha256) in conflicts.get(txn, ())
        )
        leases.append(
            LeaseView(
                txn=txn,
                artifact=artifact,
                records=phases,
                retained=until is None or until > now,
                shown=shown,
                other=other,
                reported=reported,
                may_land=txn in flying and shown in (Shown.NOTHING, Shown.REFERENCE),
                in_flight=txn in in_flight,
                rejected=txn in rejected and shown is not Shown.REFERENCE,
                acknowledged=txn in acknowledged,
                unprepared_publish=txn in unprepared,
                intact=_intact(artifact, intent, files, tampered),
                awaits_operator=reported and state is LeaseState.PREPARED,
            )
        )
    artifacts = {}
    for name in sorted({*ours, *needed, *reused} - {""}):
        data = files.get(name)
        was = first.get(name)
        artifacts[name] = ArtifactView(
            name=name,
            present=data is not None,
            deleted=data is None,
            rewritten=data is not None and was is not None and data != was,
            reused=name in reused,
            claimed=name in claimed,
        )
    return Observable(
        leases=tuple(leases),
        artifacts=artifacts,
        outside=outside,
        evidence_changed=evidence_changed,
        removal_tombstones=True,
    )


def _intact(
    name: str,
    intent: ArtifactRetentionClaim | None,
    files: Mapping[str, bytes],
    tampered: Mapping[str, bytes | None],
) -> bool:
    data = files.get(name)
    if data is None or intent is None:
        return True  # nothing there to judge: a missing file is S1's "deleted"
    if name in tampered:
        kept = tampered[name]
        return kept is None or data == kept  # altered by the harness: kept as it was left
    return hashlib.sha256(data).hexdigest() == intent.content_sha256


def observe_unlink(
    *,
    journal: bytes,
    name: str,
    now: float,
    shown: Mapping[str, str] = {},
    visible: Mapping[str, str] = {},
    writing: bool = False,
) -> Observable:
    """The moment ``name`` is about to be unlinked, as far as it can be seen mid-operation.

    The owner is not asked (a fence in the middle of cleanup would change what is
    tested); the leases come from the journal's bytes, and ``shown`` gives, per id
    whose ``pending_conflict`` was reported, the artifact the owner was last known to
    show.  ``visible`` gives, per id the journal does not know, the artifact the owner
    shows a reference to, when cleanup was given the owner as its witness (it then
    knew).  ``writing``: the file's writer still held its mark (S1.writing).  Only
    ``name`` is listed, as deleted: S1 then says whether anything needed it.
    """
    records = _lease_records(journal)
    intents: dict[str, dict[str, Any]] = {}
    for record in journal_records(journal):
        txn, intent = record.get("transaction_id"), record.get("intent")
        if isinstance(txn, str) and record.get("phase") == "PREPARED" and isinstance(intent, dict):
            intents[txn] = intent
    leases = []
    for txn in sorted({*records, *shown}):
        intent = intents.get(txn, {})
        until = intent.get("retain_until")
        other = shown.get(txn, "")
        leases.append(
            LeaseView(
                txn=txn,
                artifact=artifact_name(intent.get("source_id")),
                records=records.get(txn, ()),
                retained=not isinstance(until, int | float) or until > now,
                shown=Shown.OTHER if other else Shown.NOTHING,
                other=other,
                reported=bool(other),
            )
        )
    for txn in sorted(set(visible) - set(records) - set(shown)):
        leases.append(LeaseView(txn=txn, artifact=visible[txn], shown=Shown.REFERENCE))
    gone = ArtifactView(name=name, present=False, deleted=True, cut_short=writing)
    return Observable(leases=tuple(leases), artifacts={name: gone}, removal_tombstones=True)
