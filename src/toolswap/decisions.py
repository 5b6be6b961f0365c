"""Where the implementation asks the specification's tables for its decisions.

Theory of operation
-------------------
The spec (``toolswap.spec``) owns the decision tables: the lease transitions
(``lease.LEASE_TRANSITIONS``), reconciliation (``reconcile.RECONCILE_TABLE``
and ``reconcile.SEAL_TABLE``) and cleanup (``cleanup.PLAN_RULES``,
``cleanup.APPLY_RULES``).  The implementation gathers facts with real I/O,
reduces them to the spec's vocabulary here, and lets the table decide.  The
tables are read through their modules at call time, so replacing a row (a
mutant, a test) changes what the implementation does: that is the seam
mistakes use.  What the code still decides by itself is listed in
docs/where-things-live.md ("Not yet from the tables").

This module only translates facts.  The vocabulary is the spec's, used as is
by the journal, reports and JSON: ``LeaseState`` (and the ``LeaseNote``
CONFLICT), ``ObservedState``, ``ReconcileStatus``, ``PlanStatus`` and
``ApplyStatus`` are string enums defined once in ``spec/``, so no status or
phase is translated here.  The journal has no ``NEW`` record: ``None`` (no
record yet) is the spec's ``LeaseState.NEW``.
"""

from __future__ import annotations

import math
import re
import stat
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from toolswap.spec import cleanup as _cleanup
from toolswap.spec import lease as _lease
from toolswap.spec import owner as _owner
from toolswap.spec import reconcile as _reconcile
from toolswap.spec.cleanup import ApplyStatus, PlanStatus
from toolswap.spec.errors import IllegalTransition
from toolswap.spec.lease import RECORD_PHASES, LeaseNote, LeaseState, RecordPhase

from .domain import is_artifact_filename
from .fs import FileFacts
from .owner import ObservedState, ReconcileStatus

__all__ = [
    "record_follows",
    "lease_step",
    "Reconcile",
    "observation_kind",
    "reconcile_decision",
    "unobserved_decision",
    "seal_decision",
    "spec_facts",
    "digest_of",
    "hashed_digest",
    "spec_claims",
    "lease_protects",
    "claim_active",
    "spec_policy",
    "plan_status",
    "planned_facts",
    "apply_status",
    "WITNESS",
]

#: What ``lstat``'s file type is, as the cleanup rows read it (anything else: OTHER).
_REGULAR = _cleanup.EntryKind.REGULAR
_KIND_OF_TYPE: dict[int, Any] = {  # private and never written: a dict is the fastest look-up
    stat.S_IFREG: _REGULAR,
    stat.S_IFDIR: _cleanup.EntryKind.DIRECTORY,
    stat.S_IFLNK: _cleanup.EntryKind.SYMLINK,
}

#: Digests no claim or file can have (digests are 64 hex digits): not read, or not a digest.
_UNREAD = -1
_NOT_A_DIGEST = -2
_SHA256 = re.compile(r"[0-9a-f]{64}")

#: What an owner says, as the spec's observed states: a member, or its exact word
#: (an adapter may answer with the plain string); anything else is UNKNOWN.
_OBSERVED_STATE_OF: Mapping[object, ObservedState] = MappingProxyType({s: s for s in ObservedState})


#: The states a journal record can put a lease in (a record never says NEW).
_WRITTEN: tuple[LeaseState, ...] = tuple(p for p in RECORD_PHASES if isinstance(p, LeaseState))


def _state(phase: LeaseState | None) -> LeaseState:
    return LeaseState.NEW if phase is None else phase


def _lease_view(build: Any) -> Any:
    """``build()``'s answers for every pair, kept until the lease tables are replaced.

    The journal asks for every record it verifies; a dict look-up keeps that as
    cheap as the journal's own table once was, and a test or mutant that
    replaces ``LEASE_TRANSITIONS`` or ``RECORD_ACTION`` is seen at the next call.
    """
    transitions, actions = _lease.LEASE_TRANSITIONS, _lease.RECORD_ACTION
    cached = _VIEWS.get(build)
    if cached is None or cached[0] is not transitions or cached[1] is not actions:
        cached = (transitions, actions, build())
        _VIEWS[build] = cached
    return cached[2]


_VIEWS: dict[Any, tuple[Any, Any, Any]] = {}


def record_follows(current: LeaseState | None, record: RecordPhase) -> bool:
    """Whether a journal record of phase ``record`` may follow ``current`` (None: no record).

    A record is legal exactly when it is a transition of the lease table that
    changes the state.  A CONFLICT record is a note, not a phase: legal only
    while the lease is pending (spec ``reconcile`` row 2).
    """
    return bool(_lease_view(_all_follows)[(current, record)])


def _all_follows() -> dict[tuple[LeaseState | None, RecordPhase], bool]:
    return {
        (current, record): _follows(current, record)
        for current in (None, *_WRITTEN)
        for record in RECORD_PHASES
    }


def _follows(current: LeaseState | None, record: RecordPhase) -> bool:
    state = _state(current)
    if record is LeaseNote.CONFLICT:
        return bool(_lease.is_pending(state))
    action = _lease.RECORD_ACTION[record]
    try:
        return bool(_lease.appends(state, action))
    except IllegalTransition:
        return False


def lease_step(current: LeaseState, target: LeaseState) -> tuple[LeaseState, bool] | None:
    """(phase after, whether a record is appended) for asking ``current`` to move to ``target``.

    None when the lease table has no such transition.
    """
    return _lease_view(_all_steps)[(current, target)]  # type: ignore[no-any-return]


def _all_steps() -> dict[tuple[LeaseState, LeaseState], tuple[LeaseState, bool] | None]:
    return {(c, t): _step(c, t) for c in _WRITTEN for t in _WRITTEN}


def _step(current: LeaseState, target: LeaseState) -> tuple[LeaseState, bool] | None:
    action = _lease.RECORD_ACTION[target]
    try:
        after = _lease.step(current, action)
    except IllegalTransition:
        return None
    return after, after is not current


class Reconcile:
    """The decision a reconciliation row yields, in the journal's terms (shared: read only)."""

    __slots__ = ("seal_first", "target", "status", "record_observed")

    def __init__(self, decision: Any) -> None:
        self.seal_first: bool = bool(decision.seal_first)
        action = decision.journal_action
        self.target: LeaseState | None = (
            None if action is None else _lease.step(LeaseState.PREPARED, action)
        )
        self.status: ReconcileStatus = decision.status
        self.record_observed: bool = bool(decision.record_observed)


def observation_kind(state: ObservedState | None, identity_matches: bool, sealed: object) -> Any:
    """The spec's observation kind (its table row) for what the owner showed.

    ``state`` None: no usable observation (the inspection failed, or it named
    another transaction), which is UNKNOWN: an owner failure is never absence.
    """
    classify = _reconcile.classify_observation
    shown = _OBSERVED_STATE_OF.get(state, ObservedState.UNKNOWN)
    # Only a real True is a tombstone: anything else may not be.
    key = (classify, shown, bool(identity_matches), sealed is True)
    kind = _KINDS.get(key)
    if kind is None:  # eight cases at most, per classifier (a replaced one starts afresh)
        seen = _owner.Observation(
            state=shown,
            generation=0,  # the rows do not read it; the seal compares generations itself
            sealed=key[3],
            identity_matches=key[2],
        )
        kind = _KINDS[key] = classify(seen)
    return kind


_KINDS: dict[tuple[Any, ObservedState, bool, bool], Any] = {}


def reconcile_decision(phase: LeaseState, kind: Any) -> Reconcile:
    """The reconciliation table's row for a lease in ``phase`` given an observation ``kind``."""
    return _in_journal_terms(_reconcile.decide(phase, kind))


def _in_journal_terms(decision: Any) -> Reconcile:
    """``Reconcile(decision)``, built once per row's value and lease table.

    A replaced row is a new key; a replaced lease table (which gives the
    target state) builds it again, as ``_lease_view`` does.
    """
    transitions = _lease.LEASE_TRANSITIONS
    known = _JOURNAL_TERMS.get(decision)
    if known is None or known[0] is not transitions:
        known = _JOURNAL_TERMS[decision] = (transitions, Reconcile(decision))
    return known[1]


_JOURNAL_TERMS: dict[Any, tuple[Any, Reconcile]] = {}


def unobserved_decision(phase: LeaseState) -> Reconcile | None:
    """The decision for a lease in ``phase`` when no observation can change it, else None.

    When every row of the reconciliation table for the lease's state gives the same
    decision, and that decision neither seals nor appends, the owner need not be
    asked (a terminal lease: ``already_*``).  Worked out from the table as it is now.
    """
    table = _reconcile.RECONCILE_TABLE
    known = _UNOBSERVED.get(phase)
    if known is None or known[0] is not table:
        rows = {d for (s, _), d in table.items() if s is phase}
        only = rows.pop() if len(rows) == 1 else None
        silent = only is not None and not only.seal_first and only.journal_action is None
        known = (table, Reconcile(only) if silent else None)
        _UNOBSERVED[phase] = known
    return known[1]


_UNOBSERVED: dict[LeaseState, tuple[Any, Reconcile | None]] = {}


def seal_decision(answer: object) -> Reconcile:
    """The seal table's row for what ``seal_absence()`` returned.

    ``True`` sealed, ``False`` stale; anything else (an exception is passed as
    itself) gave no promise either way: the tombstone may exist, so UNKNOWN.
    """
    results = _owner.SealResult
    if answer is True:
        result = results.SEALED
    elif answer is False:
        result = results.STALE
    else:
        result = results.UNKNOWN
    return _in_journal_terms(_reconcile.after_seal(result))


def plan_status(
    facts: Any, claims: Any, policy: Any, now: float, planned_so_far: int
) -> PlanStatus:
    """The cleanup plan table's status for one entry (spec ``cleanup.classify``)."""
    return _cleanup.classify(facts, claims, policy, now, planned_so_far)


def spec_facts(
    name: str,
    facts: FileFacts | None,
    *,
    trusted: bool = True,
    sha256: str | None = None,
    readable: bool = True,
    owned: bool | None = None,
    digest: int | None = None,
    writing: bool = False,
) -> Any:
    """What the cleanup rows read of one entry, from its ``lstat`` (None: cannot be inspected).

    ``trusted`` False: the scan cannot vouch for the bytes (another uid, a read
    error, a change while hashing).  ``sha256`` None: the bytes were not read.
    ``readable`` False: reading them failed (apply's row "cannot be read now").
    ``owned``: whether ``name`` is an artifact name, when the caller checked already.
    ``digest``: ``digest_of(sha256)`` when the caller has it already (it wins).
    ``writing``: its writer still holds the mark (the artifact is not complete).
    """
    kinds = _cleanup.EntryKind
    owned_name = is_artifact_filename(name) if owned is None else owned
    if facts is None:  # lstat failed: not a file the scan can type, never followed
        return _cleanup.EntryFacts(
            kind=kinds.OTHER, owned_name=owned_name, trusted=False, readable=False
        )
    # Positional, in the fields' order (a test holds it): built twice per file a
    # cleanup reads, and keywords would double the cost of building the tuple.
    return _cleanup.EntryFacts(
        _KIND_OF_TYPE.get(stat.S_IFMT(facts.mode), kinds.OTHER),  # kind
        owned_name,
        facts.nlink > 1,  # linked
        trusted,
        readable,
        digest_of(sha256) if digest is None else digest,
        facts.size,
        facts.mtime_ns / 1e9,  # mtime, in seconds as the TTL is
        facts.device,
        facts.inode,
        facts.mtime_ns,  # mtime_exact
        writing,
    )


def digest_of(sha256: object) -> int:
    """A full SHA-256 as the rows compare it: 64 lowercase hex digits, as hashlib writes them.

    None (not read) and anything else (a forged plan's "digest") are numbers no
    digest has, so they match no claim and no file: the file is kept.
    """
    if sha256 is None:
        return _UNREAD
    if isinstance(sha256, str) and _SHA256.fullmatch(sha256):
        return int(sha256, 16)
    return _NOT_A_DIGEST


def hashed_digest(sha256: str) -> int:
    """``digest_of`` for a digest this process just computed (hashlib's ``hexdigest``).

    Skips the shape check, which only a digest read from a plan needs.
    """
    return int(sha256, 16)


def spec_claims(digests: Mapping[str, int] | None) -> tuple[Any, ...]:
    """Active claims on one name ({sha256: reference count}) as the plan rows read them."""
    if not digests:
        return ()
    return tuple(
        _cleanup.Claim(digest=int(sha256, 16), reference_count=count)
        for sha256, count in digests.items()
    )


def lease_protects(phase: LeaseState) -> bool:
    """Whether a lease in ``phase`` is a claim on its artifact: the spec's ``lease.protects``."""
    return bool(_lease.protects(_state(phase)))


def claim_active(claim: Any, now: float, *, pending: bool = False) -> bool:
    """Whether ``claim`` (an ``ArtifactRetentionClaim``) still protects at ``now``.

    The spec's ``cleanup.claim_is_active``: a pending claim (a PREPARED lease's)
    never expires; any other holds before its ``retain_until``.  The digest
    plays no part in it.
    """
    seen = _cleanup.Claim(
        digest=0,
        pending=pending,
        reference_count=claim.reference_count,
        retain_until=claim.retain_until,
    )
    return bool(_cleanup.claim_is_active(seen, now))


def spec_policy(orphan_ttl_seconds: float, max_deletions: int) -> Any:
    """The cleanup policy's numbers as the plan rows read them."""
    return _cleanup.Policy(orphan_ttl_seconds=orphan_ttl_seconds, max_deletions=max_deletions)


def planned_facts(sha256: object, size: int, mtime_ns: int, device: int, inode: int) -> Any:
    """What a plan says it saw of a ``planned_delete`` entry: ours, regular, one link, hashed.

    A plan is only a list of candidates: values no scan could have produced
    (a forged plan) become facts no file has, so the file is kept (a race).
    """
    return _cleanup.EntryFacts(  # positional, in the fields' order, as in spec_facts
        _REGULAR,  # kind
        True,  # owned_name: apply's plan check refused a planned name that is not ours
        False,  # linked
        True,  # trusted
        True,  # readable
        digest_of(sha256),
        size,
        _seconds(mtime_ns),  # mtime
        device,
        inode,
        mtime_ns,  # mtime_exact
    )


def _seconds(mtime_ns: int) -> float:
    try:
        return mtime_ns / 1e9
    except OverflowError:
        return math.nan  # equal to nothing: the snapshot differs


def apply_status(  # noqa: PLR0913 - the spec's revalidate, argument for argument
    planned: Any, current: Any, claims: Any, now: float, policy: Any, witness: Any = None
) -> ApplyStatus:
    """The apply table's status for a planned entry (spec ``cleanup.revalidate``).

    ``witness``: what the owner said of the artifact (:data:`WITNESS`), None: not asked.
    """
    said = _cleanup.Witness.NOT_ASKED if witness is None else witness
    return _cleanup.revalidate(planned, current, claims, now, policy, said)


#: The owner's answers to cleanup's census, as the apply rows read them.
WITNESS: Mapping[str, Any] = MappingProxyType(
    {
        "none": _cleanup.Witness.NONE,
        "shown": _cleanup.Witness.SHOWN,
        "unknown": _cleanup.Witness.UNKNOWN,
    }
)
