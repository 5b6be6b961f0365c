"""The crash-safe lease journal (docs/design.md sections 5 and 6).

Rules
-----
* ``retention-leases.jsonl`` at the session root is append-only evidence (S6):
  a verified, hash-chained prefix plus at most one torn tail.  The line format
  lives in :mod:`toolswap.journal_format`.
* Per transaction: ``PREPARED -> COMMITTED -> RELEASED`` or
  ``PREPARED -> ABORTED``: the spec's ``lease.LEASE_TRANSITIONS`` decides
  (through :mod:`toolswap.decisions`; a missing key is an illegal transition).
  One terminal event per transaction, ever (S5).
* A PREPARED lease protects its artifact with no expiry, whatever its
  ``retain_until``, until it is reconciled.
* A CONFLICT record (a note on a PREPARED lease, not a phase) names an identity
  the owner showed under the transaction id instead of the intent.  It is
  appended and fsynced inside the reconcile fence *before* ``pending_conflict``
  is reported, and while the lease is PREPARED or COMMITTED the identity is
  protected like the intent, with no expiry (:meth:`Recovery.protecting_claims`);
  RELEASED (the owner removed the reference) or ABORTED (a sealed absence)
  end it.  An observed identity that is not an artifact id of this session is
  recorded and reported, and protects nothing: it is never turned into a path.
* After a compaction (:meth:`ArtifactRetentionJournal.compact`,
  :mod:`toolswap.journal_compaction`) the file holds the tail: verification
  starts from the last checkpoint's snapshot and head, and the sequence goes on
  from there, so record counts (and the anchor) cover the whole chain.
* Every append happens under the session lock (``SessionPaths.session_lock``),
  so threads and processes on one host keep one unbroken chain.
* An owner is never called while the session lock is held (calling an owner
  operation inside :meth:`ArtifactRetentionJournal.locked_state` raises
  :class:`~toolswap.errors.UsageError`); reconciliation takes the owner's
  fence first and the session lock inside it.

Theory of operation
-------------------
The journal object keeps the folded, verified state in memory (:class:`_Fold`):
phases, intents, the last sequence and hash, and how many bytes are verified.
Each operation takes the session lock and *refreshes*: if the file has the same
identity and size as after the last look, nothing is read; if it grew, only the
new bytes are read and verified; if it was replaced, everything is verified
again and must extend what was verified before.  So an append costs one lstat,
one fstat, one write and one fsync however long the journal is (plus, once per
journal object and file, a directory fsync: whoever created the file may have
died before making its name durable; and, every
:data:`~toolswap.journal_anchor.RAISE_EVERY_RECORDS` records or
:data:`~toolswap.journal_anchor.RAISE_EVERY_SECONDS` seconds, one append and
fsync of the journal anchor).  A journal with more than one hard link is
refused like one that is not a regular file: another name may be outside the
session, and an append would change that file too.

The constructor verifies the whole file;
so does :meth:`ArtifactRetentionJournal.recover`, except that the first
``recover()`` right after the constructor re-uses that verification when the
file's identity (device, inode, size, mtime, ctime) is unchanged: one
verification per open.

A torn tail (a final piece with no newline) is ignored and reported; the next
append first checks that the file holds exactly the verified prefix plus that
tail, cuts the tail off (ftruncate + fsync) and only then writes.  A torn tail
that is a complete record followed by more bytes is not a torn write (a write
only ever loses a suffix), so it is corruption ("newline").  A final piece (or a
line) longer than :data:`~toolswap.journal_format.MAX_RECORD_BYTES`, the largest
record the format allows, cannot be a torn record either: it is corruption
("oversized"), detected while reading, so memory stays bounded by one read
chunk plus one record whatever the file holds.

Publication, in this order (S2, S3, S4):

1. ``PREPARED``: under the lock, the artifact must exist as a regular file of
   this session, owned by us, with the claim's full digest; append; fsync.
2. the caller's publisher runs (no lock held);
3. ``COMMITTED``: append; fsync.

Only :class:`~toolswap.owner.ArtifactPublicationRejected` turns step 2 into
``ABORTED`` (and is re-raised); anything else propagates and leaves PREPARED.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time as _time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple, TypeVar

import attrs

from toolswap.spec.lease import LeaseNote, LeaseState, RecordPhase

from .decisions import (
    Reconcile,
    claim_active,
    lease_protects,
    lease_step,
    observation_kind,
    reconcile_decision,
    record_follows,
    seal_decision,
    unobserved_decision,
)
from .domain import ArtifactRetentionClaim, parse_source_id
from .errors import (
    ArtifactIntegrityError,
    ArtifactNotOwnedError,
    DanglingReferenceError,
    EnvironmentFailure,
    IllegalTransitionError,
    JournalWriteError,
    TransactionExistsError,
    UnknownTransactionError,
    UsageError,
)
from .fs import (
    REAL_FS,
    FileFacts,
    FileSystem,
    HardLinkedFileError,
    NotRegularFileError,
    hard_link_message,
)
from .journal_anchor import ANCHOR_NAME, JournalAnchor
from .journal_compaction import (
    Base,
    Checkpoint,
    CompactionResult,
    Compactor,
    Snapshot,
    SnapshotLease,
    artifact_high_water,
    read_base,
    read_settled,
)
from .journal_format import (
    GENESIS_SHA256,
    MAX_RECORD_BYTES,
    JournalCorruptError,
    JournalRecord,
    ObservedIdentity,
    build_record,
    encode_record,
    parse_line,
    validate_transaction_id,
)
from .owner import (
    ArtifactPublicationRejected,
    ArtifactReferenceOwner,
    ObservedState,
    OwnerObservation,
    ReconcileStatus,
    ReconciliationReport,
)
from .session import SessionPaths

__all__ = [
    "ArtifactRetentionJournal",
    "CompactionResult",
    "DanglingReferenceError",
    "IllegalTransitionError",
    "JournalCorruptError",
    "JournalWriteError",
    "Recovery",
    "TornTail",
    "Transaction",
    "TransactionExistsError",
    "UnknownTransactionError",
    "aggregate_claims",
]

T = TypeVar("T")

READ_CHUNK = 1 << 20
_SETTLED = (LeaseState.RELEASED, LeaseState.ABORTED)


@attrs.frozen(kw_only=True)
class Transaction:
    """One lease transaction as of its latest record."""

    transaction_id: str
    phase: LeaseState
    claim: ArtifactRetentionClaim
    sequence: int
    time: float


@attrs.frozen(kw_only=True)
class TornTail:
    """A final piece with no newline: ignored, and cut before the next append."""

    offset: int
    length: int

    def to_dict(self) -> dict[str, int]:
        return {"offset": self.offset, "length": self.length}


def _is_active(phase: LeaseState, claim: ArtifactRetentionClaim, now: float | None) -> bool:
    """The lease protects (the spec's ``lease.protects``) and, at ``now``, its claim holds."""
    if not lease_protects(phase):
        return False
    return now is None or claim_active(claim, now, pending=phase is LeaseState.PREPARED)


def aggregate_claims(
    leases: Mapping[str, tuple[LeaseState, ArtifactRetentionClaim]],
    *,
    now: float | None = None,
    key: Callable[[ArtifactRetentionClaim], str] = lambda c: c.content_sha256,
) -> dict[str, ArtifactRetentionClaim]:
    """Fold live leases into one claim per key (default: full digest).

    PREPARED leases count with ``retain_until=None`` (no expiry).  COMMITTED
    leases count unless ``now`` is given and ``now >= retain_until``.
    ``reference_count`` sums; ``retain_until`` is ``None`` if any lease has no
    expiry, else the latest; ``source_id`` is the smallest in the group, so with
    the default key it names one artifact of possibly several with equal bytes.
    """
    groups: dict[str, list[tuple[LeaseState, ArtifactRetentionClaim]]] = {}
    for phase, claim in leases.values():
        if _is_active(phase, claim, now):
            groups.setdefault(key(claim), []).append((phase, claim))
    result: dict[str, ArtifactRetentionClaim] = {}
    for group_key, members in groups.items():
        until: float | None = None
        unbounded = False
        for phase, claim in members:
            if phase is LeaseState.PREPARED or claim.retain_until is None:
                unbounded = True
            elif until is None or claim.retain_until > until:
                until = claim.retain_until
        result[group_key] = ArtifactRetentionClaim(
            source_id=min(claim.source_id for _, claim in members),
            content_sha256=members[0][1].content_sha256,
            reference_count=sum(claim.reference_count for _, claim in members),
            retain_until=None if unbounded else until,
        )
    return result


def _sources_by_digest(
    leases: Mapping[str, tuple[LeaseState, ArtifactRetentionClaim]],
) -> dict[str, tuple[str, ...]]:
    """Full digest -> every source id with a live (PREPARED or COMMITTED) lease on it."""
    sources: dict[str, set[str]] = {}
    for phase, claim in leases.values():
        if _is_active(phase, claim, None):
            sources.setdefault(claim.content_sha256, set()).add(claim.source_id)
    return {digest: tuple(sorted(ids)) for digest, ids in sources.items()}


@attrs.frozen(kw_only=True)
class Recovery:
    """A verified view of the journal at one moment.

    * ``states``: transaction id -> :class:`LeaseState`.
    * ``transactions``: transaction id -> its claim (the PREPARED intent).
    * ``pending_transaction_ids``: PREPARED transactions, in journal order.
    * ``conflicts``: transaction id -> the identities its CONFLICT records name.
    * ``torn_tail``: the ignored final piece, if any.

    Claims are asked about per artifact, never per digest (two artifacts with
    equal bytes are two artifacts):

    * :meth:`protecting_claims`: what cleanup honours, one claim per lease that
      protects and one per identity a CONFLICT names while its lease protects;
    * :meth:`claims_by_source`: the leases' claims merged per artifact.
    """

    session_id: str
    states: Mapping[str, LeaseState]
    transactions: Mapping[str, ArtifactRetentionClaim]
    pending_transaction_ids: tuple[str, ...]
    torn_tail: TornTail | None
    record_count: int
    last_sha256: str
    verified_bytes: int
    observed_at: float
    conflicts: Mapping[str, tuple[ObservedIdentity, ...]] = attrs.field(factory=dict)

    def protecting_claims(self, now: float | None = None) -> list[ArtifactRetentionClaim]:
        """Every claim that protects an artifact at ``now`` (None: whatever its expiry).

        One per lease: a PREPARED lease as a claim with no expiry (its outcome is
        unknown), a COMMITTED one as written while ``now < retain_until``; ABORTED
        and RELEASED never.  Then one no-expiry claim per identity a CONFLICT
        record names while its lease protects (what the owner showed instead of
        the intent), skipping one that is not a well-formed artifact id of this
        session: it was recorded and reported, and names nothing we may touch.
        """
        claims: list[ArtifactRetentionClaim] = []
        for txn, phase in self.states.items():
            claim = self.transactions[txn]
            if phase is LeaseState.PREPARED:
                claims.append(attrs.evolve(claim, retain_until=None))
            elif _is_active(phase, claim, now):
                claims.append(claim)
        for txn, identities in self.conflicts.items():
            state = self.states.get(txn)
            if state is not None and lease_protects(state):
                for identity in identities:
                    seen = _conflict_claim(identity, self.session_id)
                    if seen is not None:
                        claims.append(seen)
        return claims

    def claims_by_source(self, now: float | None = None) -> dict[str, ArtifactRetentionClaim]:
        """Source id -> the claims of the leases that protect it at ``now``, merged.

        ``reference_count`` sums; ``retain_until`` is None if any of them has no
        expiry (a PREPARED lease never has one), else the latest.  With ``now``
        None every PREPARED or COMMITTED lease counts, whatever its expiry.
        Identities a CONFLICT names are in :meth:`protecting_claims`, not here.
        """
        return aggregate_claims(self._leases(), now=now, key=lambda c: c.source_id)

    def _leases(self) -> dict[str, tuple[LeaseState, ArtifactRetentionClaim]]:
        return {txn: (phase, self.transactions[txn]) for txn, phase in self.states.items()}

    def to_dict(self) -> dict[str, Any]:
        """The journal as ``toolswap journal show --json`` prints it.

        ``claims`` there is a summary per content (digest -> the leases' claims
        merged), with ``claim_sources`` listing every artifact behind a digest.
        """
        leases = self._leases()
        return {
            "session_id": self.session_id,
            "record_count": self.record_count,
            "last_sha256": self.last_sha256,
            "states": {txn: phase.value for txn, phase in self.states.items()},
            "claims": {d: c.to_dict() for d, c in aggregate_claims(leases).items()},
            "claim_sources": {d: list(s) for d, s in _sources_by_digest(leases).items()},
            "pending_transaction_ids": list(self.pending_transaction_ids),
            "torn_tail": None if self.torn_tail is None else self.torn_tail.to_dict(),
        }


def _conflict_claim(identity: ObservedIdentity, session_id: str) -> ArtifactRetentionClaim | None:
    """The claim an observed identity makes, or None if it is not one of this session."""
    if identity.source_id is None or identity.content_sha256 is None:
        return None
    try:
        if parse_source_id(identity.source_id).session_id != session_id:
            return None
        return ArtifactRetentionClaim(
            source_id=identity.source_id,
            content_sha256=identity.content_sha256,
            reference_count=1,
            retain_until=None,
        )
    except (UsageError, ValueError):
        return None


class _Latest(NamedTuple):
    """What :class:`Transaction` needs of a lease's latest record."""

    phase: LeaseState
    sequence: int
    time: float


class _Fold:
    """The verified state of a journal prefix; :meth:`apply` checks, then mutates.

    A compacted journal's fold starts from its last checkpoint's snapshot
    (:meth:`start_from`): the live leases, and the head the live file chains from.
    """

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.sequence = 0
        self.last_sha256 = GENESIS_SHA256
        self.size = 0
        self.phases: dict[str, LeaseState] = {}
        self.intents: dict[str, ArtifactRetentionClaim] = {}
        self.intent_sha256: dict[str, str] = {}
        self.pending: dict[str, None] = {}
        self.latest: dict[str, _Latest] = {}
        self.conflicts: dict[str, tuple[ObservedIdentity, ...]] = {}
        self.checkpoint: tuple[int, str] | None = None
        self.base: Checkpoint | None = None  # the checkpoint the live file chains from
        self.high_water_floor = 0  # the highest artifact number compacted history named

    def start_from(self, checkpoint: Checkpoint, snapshot: Snapshot) -> None:
        """Begin at ``checkpoint``'s head with its snapshot's live leases (a fresh fold only)."""
        assert not self.sequence and not self.phases
        self.base = checkpoint
        self.sequence = checkpoint.records
        self.last_sha256 = checkpoint.head_sha256
        self.high_water_floor = snapshot.artifact_high_water
        for lease in snapshot.leases:
            txn = lease.transaction_id
            self.phases[txn] = lease.phase
            self.intents[txn] = lease.intent
            self.intent_sha256[txn] = lease.intent_sha256
            if lease.phase is LeaseState.PREPARED:
                self.pending[txn] = None
            self.latest[txn] = _Latest(lease.phase, lease.sequence, lease.time)
            if lease.conflicts:
                self.conflicts[txn] = lease.conflicts

    def live_leases(self) -> tuple[SnapshotLease, ...]:
        """Every lease that protects (PREPARED, COMMITTED), in journal order, for a snapshot."""
        return tuple(
            SnapshotLease(
                transaction_id=txn,
                phase=phase,
                intent=self.intents[txn],
                intent_sha256=self.intent_sha256[txn],
                sequence=self.latest[txn].sequence,
                time=self.latest[txn].time,
                conflicts=self.conflicts.get(txn, ()),
            )
            for txn, phase in self.phases.items()
            if lease_protects(phase)
        )

    def check(self, record: JournalRecord, line_number: int) -> None:
        if record.sequence != self.sequence + 1:
            raise JournalCorruptError(
                line_number, "sequence", f"expected {self.sequence + 1}, found {record.sequence}"
            )
        if record.previous_sha256 != self.last_sha256:
            raise JournalCorruptError(line_number, "chain", "previous_sha256 does not match")
        if record.session_id != self.session_id:
            raise JournalCorruptError(line_number, "session", "record of another session")
        current = self.phases.get(record.transaction_id)
        if not record_follows(current, record.phase):
            was = "nothing" if current is None else current.value
            raise JournalCorruptError(
                line_number, "illegal_transition", f"{was} -> {record.phase.value}"
            )
        if (
            current is not None
            and record.intent_sha256 != self.intent_sha256[record.transaction_id]
        ):
            raise JournalCorruptError(line_number, "intent_rewrite", "intent digest changed")

    def apply(self, record: JournalRecord, line_number: int, size: int) -> None:
        self.check(record, line_number)
        txn = record.transaction_id
        if record.phase is LeaseNote.CONFLICT:
            assert record.observed is not None
            seen = self.conflicts.get(txn, ())
            if record.observed not in seen:
                self.conflicts[txn] = (*seen, record.observed)
        elif record.phase is LeaseState.PREPARED:
            assert record.intent is not None
            self.intents[txn] = record.intent
            self.intent_sha256[txn] = record.intent_sha256
            self.pending[txn] = None
        else:
            self.pending.pop(txn, None)
        if record.phase is not LeaseNote.CONFLICT:  # a note: the phase stays PREPARED
            self.phases[txn] = record.phase
            self.latest[txn] = _Latest(record.phase, record.sequence, record.time)
        self.sequence = record.sequence
        self.last_sha256 = record.event_sha256
        self.size += size
        if self.checkpoint is not None and self.checkpoint[0] == record.sequence:
            if self.checkpoint[1] != record.event_sha256:
                raise JournalCorruptError(
                    line_number, "rewritten", "differs from what was verified before"
                )
            self.checkpoint = None

    def transaction(self, txn: str) -> Transaction:
        record = self.latest[txn]
        return Transaction(
            transaction_id=txn,
            phase=record.phase,
            claim=self.intents[txn],
            sequence=record.sequence,
            time=record.time,
        )


def _refuse_unlike_ours(facts: FileFacts, line_number: int) -> None:
    """The journal is one regular file with one name; anything else is not ours to trust."""
    if not facts.is_regular:
        raise JournalCorruptError(line_number, "not_regular", "not a regular file")
    if facts.nlink > 1:
        raise JournalCorruptError(line_number, "not_regular", hard_link_message(facts.nlink))


def _check_length(piece: bytes, line_number: int) -> None:
    """No record is longer than MAX_RECORD_BYTES, so neither is a torn write of one."""
    if len(piece) > MAX_RECORD_BYTES:
        raise JournalCorruptError(
            line_number,
            "oversized",
            f"{len(piece)} bytes without a newline; no record exceeds {MAX_RECORD_BYTES}",
        )


def _check_torn(piece: bytes, line_number: int) -> None:
    """A torn write loses a suffix; a whole record followed by more bytes is not one."""
    try:
        text = piece.decode("latin-1")
        _, end = json.JSONDecoder().raw_decode(text)
    except (ValueError, RecursionError):
        return
    if end < len(text):
        raise JournalCorruptError(line_number, "newline", "record not terminated by a newline")


class ArtifactRetentionJournal:
    """The lease journal of one session.  See the module docstring for the rules."""

    def __init__(
        self,
        session_dir: str | os.PathLike[str],
        *,
        fs: FileSystem = REAL_FS,
        clock: Callable[[], float] = _time.time,
        session_id: str | None = None,
        _caller_holds_lock: bool = False,
    ) -> None:
        self._paths = SessionPaths.at(session_dir, session_id)
        self._fs = fs
        self._clock = clock
        self._fold = _Fold(self._paths.session_id)
        self._identity: tuple[int, int] | None = None
        self._torn: TornTail | None = None
        self._poisoned: JournalCorruptError | None = None
        self._mutex = threading.RLock()
        self._depth = 0
        self._holder: int | None = None
        self._dir_synced_for: tuple[int, int] | None = None  # file whose entry we fsynced
        self._stale = False  # a compaction failed half-way: verify from the start next time
        # The checkpoint log's identity at the last verification from the start: if
        # another process compacted (or died compacting), this object verifies again
        # before it appends, never to a file that was compacted.
        self._log_identity: tuple[int, int, int, int, int] | None = None
        # The settled index of the checkpoint the live file chains from, once read and
        # checked (keyed by that checkpoint's entry_sha256): read lazily, never by recovery.
        self._settled_cache: tuple[str, frozenset[str]] | None = None
        self._anchor = JournalAnchor(self._paths, fs)
        # What the constructor verified, until the first recover() uses it or
        # any other operation looks at the file (see recover()).
        self._opened: tuple[int, int, int, int, int] | None = None
        # A caller that already holds the session lock (the high-water mark's
        # reconstruction) must not take it again: flock would wait for itself.
        self._depth = 1 if _caller_holds_lock else 0
        try:
            if self.exists():
                with self._locked():
                    self._full_verify()
                    self._opened = self._file_identity()
        finally:
            self._depth = 0

    # -- public surface -------------------------------------------------------

    @property
    def path(self) -> str:
        return self._paths.journal

    @property
    def session_id(self) -> str:
        return self._paths.session_id

    @property
    def paths(self) -> SessionPaths:
        return self._paths

    def exists(self) -> bool:
        """True once a journal file (even empty or torn) or a checkpoint log exists:
        raw-claims cleanup must refuse."""
        for path in (self._paths.journal, self._paths.checkpoint_log):
            try:
                self._fs.lstat(path)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise EnvironmentFailure(f"cannot stat the lease journal: {exc.strerror}") from exc
            return True
        return False

    def prepare(
        self,
        claim: ArtifactRetentionClaim,
        transaction_id: str | None = None,
        *,
        now: float | None = None,
    ) -> Transaction:
        """Append PREPARED for a new transaction, after checking the artifact under the lock.

        Raises :class:`TransactionExistsError` (nothing written) for a known id,
        a live one or one settled before a checkpoint (S5: its settled index says so),
        :class:`DanglingReferenceError` for a missing artifact,
        :class:`~toolswap.errors.ArtifactNotOwnedError` for anything but a
        regular file of ours, :class:`~toolswap.errors.ArtifactIntegrityError`
        for a digest mismatch, and ``InvalidSourceId`` for another session.
        """
        if not isinstance(claim, ArtifactRetentionClaim):
            raise UsageError(f"claim must be an ArtifactRetentionClaim, got {type(claim).__name__}")
        txn = validate_transaction_id(
            uuid.uuid4().hex if transaction_id is None else transaction_id
        )
        with self._locked():
            self._refresh()
            if txn in self._fold.phases:
                raise TransactionExistsError(
                    f"transaction {txn!r} already exists "
                    f"({self._fold.phases[txn].value}); reconcile it, never replay it"
                )
            settled_at = self._settled_before(txn)
            if settled_at is not None:
                raise TransactionExistsError(
                    f"transaction {txn!r} already exists (settled, RELEASED or ABORTED, "
                    f"before checkpoint {settled_at}); never replay it"
                )
            self._verify_artifact(claim)
            self._append(txn, LeaseState.PREPARED, claim, now)
            return self._fold.transaction(txn)

    def commit(self, transaction_id: str, *, now: float | None = None) -> Transaction:
        """PREPARED -> COMMITTED; a no-op on COMMITTED; refuses anything else."""
        return self._transition(transaction_id, LeaseState.COMMITTED, now)[0]

    def abort(self, transaction_id: str, *, now: float | None = None) -> Transaction:
        """PREPARED -> ABORTED; a no-op on ABORTED; refuses anything else.

        Call it only when the owner has sealed the absence or explicitly rejected
        the write (S3); :meth:`reconcile_reference` does this for you.
        """
        return self._transition(transaction_id, LeaseState.ABORTED, now)[0]

    def release(self, transaction_id: str, *, now: float | None = None) -> Transaction:
        """COMMITTED -> RELEASED; a no-op on RELEASED; refuses anything else.

        Call it only after the owner removed the reference (S4); prefer
        :meth:`remove_reference`.
        """
        return self._transition(transaction_id, LeaseState.RELEASED, now)[0]

    def publish_reference(
        self,
        claim: ArtifactRetentionClaim,
        publisher: Callable[[], T],
        transaction_id: str | None = None,
        *,
        now: float | None = None,
    ) -> tuple[Transaction, T]:
        """Prepare, publish, commit -- in that order; returns the COMMITTED transaction and
        the publisher's value.

        ``publisher`` is a zero-argument callable whose normal return means the
        reference is durable in the owner (see :func:`toolswap.owner.owner_publisher`).
        An existing transaction id raises :class:`TransactionExistsError` before
        the publisher is called or a byte is written.  If the publisher raises
        :class:`~toolswap.owner.ArtifactPublicationRejected`, ABORTED is appended
        and the rejection re-raised; any other exception propagates and the lease
        stays PREPARED (pending, protecting the artifact until reconciled).
        """
        self._refuse_owner_call_under_lock("publish_reference")
        txn = self.prepare(claim, transaction_id, now=now).transaction_id
        self._fs.crash_point("publish.after_prepared")
        try:
            value = publisher()
        except ArtifactPublicationRejected:
            self._fs.crash_point("publish.after_rejected")
            self.abort(txn, now=now)
            raise
        self._fs.crash_point("publish.after_owner_write")
        committed = self.commit(txn, now=now)
        return committed, value

    def remove_reference(
        self, transaction_id: str, remover: Callable[[], T], *, now: float | None = None
    ) -> T | None:
        """Owner removal first, then RELEASED (S4); returns the remover's value.

        The lease must be COMMITTED; on RELEASED this returns ``None`` without
        calling the remover.  If the remover raises, the lease stays COMMITTED.
        """
        txn = validate_transaction_id(transaction_id)
        self._refuse_owner_call_under_lock("remove_reference")
        phase = self._phase_of(txn)
        if phase is LeaseState.RELEASED:
            return None
        if phase is not LeaseState.COMMITTED:
            raise IllegalTransitionError(
                f"transaction {txn!r} is {phase.value}; only COMMITTED can be removed"
            )
        value = remover()
        self._fs.crash_point("remove.after_owner_remove")
        self.release(txn, now=now)
        return value

    def verified_intents(self) -> dict[str, ArtifactRetentionClaim]:
        """Transaction id -> claim, as of the last verification; no I/O, no lock.

        After a compaction, settled leases' intents are in the archive only;
        :meth:`claimed_artifact_high_water` still counts them.
        """
        return dict(self._fold.intents)

    def claimed_artifact_high_water(self) -> int:
        """The highest artifact number any intent ever named, compacted history included."""
        return artifact_high_water(self._fold.intents, self._fold.high_water_floor)

    def compact(self, *, delete_old: bool = False) -> CompactionResult:
        """Move the live leases into a snapshot and start the next file (docs/design.md
        section 5, "Compaction"; the steps are ``spec/compaction.py``'s, in its order).

        Under the session lock throughout: verify, cut a torn tail, raise the anchor
        to the whole chain's record count, then :class:`Compactor` runs the steps.
        The compacted file goes to ``journal-archive/`` (``delete_old``: unlinked).
        Raises :class:`UsageError` when no record was appended since the last
        checkpoint, :class:`JournalCorruptError` for a journal that does not verify.
        """
        with self._locked():
            self._refresh()
            fold = self._fold
            base = fold.base
            if fold.sequence == (0 if base is None else base.records):
                raise UsageError("nothing to compact: no record since the last checkpoint")
            records_before = fold.sequence - (0 if base is None else base.records)
            try:
                if self._torn is not None:
                    self._cut_torn_tail()
                self._anchor.raise_to(fold.sequence)  # the anchor counts the whole chain
                # S5 outlives the compaction: the settled index is cumulative
                settled = self._settled_ids(base) | {
                    txn for txn, phase in fold.phases.items() if phase in _SETTLED
                }
                compactor = Compactor(self._paths, self._fs)
                compactor.prepare(
                    base=base,
                    records=fold.sequence,
                    head_sha256=fold.last_sha256,
                    live=fold.live_leases(),
                    high_water=self.claimed_artifact_high_water(),
                    settled=settled,
                    delete_old=delete_old,
                )
                compactor.run()
            except OSError as exc:
                self._stale = True
                raise JournalWriteError(
                    f"cannot compact the lease journal: {exc.strerror or type(exc).__name__}"
                ) from exc
            except BaseException:
                self._stale = True
                raise
            checkpoint = compactor.checkpoint
            assert checkpoint is not None
            snapshot = Snapshot(
                session_id=fold.session_id,
                checkpoint=checkpoint.index,
                records=checkpoint.records,
                head_sha256=checkpoint.head_sha256,
                artifact_high_water=compactor.high_water,
                leases=compactor.live,
            )
            self._adopt(Base(checkpoint=checkpoint, snapshot=snapshot))
            self._settled_cache = (checkpoint.entry_sha256, frozenset(settled))
            return CompactionResult(
                checkpoint=checkpoint.index,
                records_before=records_before,
                records_after=0,
                total_records=checkpoint.records,
                live_leases=checkpoint.live_leases,
                archived=None if delete_old else self._paths.archived_journal(checkpoint.index),
            )

    def verify_settled_index(self) -> int:
        """Read and check the last checkpoint's settled index (``journal verify``); returns
        how many settled ids it holds (0: never compacted).  Raises
        :class:`JournalCorruptError` (reason ``snapshot``) for a missing or edited index.
        """
        if not self.exists():  # never compacted; and asking must not create the session
            return 0
        with self._locked():
            self._refresh()
            base = self._fold.base
            if base is None:
                return 0
            ids = read_settled(self._paths, self._fs, base)  # always from the file
            self._settled_cache = (base.entry_sha256, ids)
            return len(ids)

    def _settled_ids(self, base: Checkpoint | None) -> frozenset[str]:
        """Checkpoint ``base``'s settled index, read and checked once per journal object
        (under the lock).  Lazy: recovery never calls it, only an operation that meets a
        transaction id the live state does not hold, and the next compaction."""
        if base is None or not base.settled_count:
            return frozenset()
        cached = self._settled_cache
        if cached is not None and cached[0] == base.entry_sha256:
            return cached[1]
        ids = read_settled(self._paths, self._fs, base)
        self._settled_cache = (base.entry_sha256, ids)
        return ids

    def _settled_before(self, txn: str) -> int | None:
        """The checkpoint whose settled index holds ``txn`` (it was RELEASED or ABORTED in a
        compacted file), or None; for an id the live state does not hold (under the lock)."""
        base = self._fold.base
        return base.index if base is not None and txn in self._settled_ids(base) else None

    def _refuse_settled(self, txn: str) -> None:
        """S5 after a compaction: an id settled before a checkpoint never moves again."""
        settled_at = self._settled_before(txn)
        if settled_at is not None:
            raise IllegalTransitionError(
                f"transaction {txn!r} was settled (RELEASED or ABORTED) before checkpoint "
                f"{settled_at}: it never moves again (S5); its records are in the archive"
            )

    def _adopt(self, base: Base) -> None:
        """After our own compaction: the fold is the snapshot, the live file the new one."""
        fold = _Fold(self._paths.session_id)
        fold.start_from(base.checkpoint, base.snapshot)
        self._fold = fold
        self._torn = None
        self._opened = None
        try:
            self._log_identity = self._checkpoint_log_identity()
            facts = self._fs.lstat(self._paths.journal)
        except (OSError, EnvironmentFailure):
            self._identity = None
            self._stale = True
            return
        self._identity = (facts.device, facts.inode)
        self._dir_synced_for = self._identity  # the compaction fsynced its directory entry

    def _cut_torn_tail(self) -> None:
        """Cut the torn tail seen by the last refresh, durably (as an append would first)."""
        fs, fold = self._fs, self._fold
        handle = fs.open_append(self._paths.journal)
        try:
            facts = fs.fstat(handle)
            assert self._torn is not None
            if facts.size != fold.size + self._torn.length:
                raise JournalCorruptError(
                    fold.sequence + 1, "rewritten", "journal changed outside the session lock"
                )
            fs.ftruncate(handle, fold.size)
            fs.fsync(handle)
        finally:
            fs.close(handle)
        self._torn = None

    #: Benchmark baseline only: verify again in the first recover() after open.
    _verify_twice_on_open = False

    def recover(self, *, now: float | None = None) -> Recovery:
        """Verify the whole journal and return its state; raises :class:`JournalCorruptError`.

        One verification per open: the first ``recover()`` after the
        constructor re-uses the constructor's verification if the file still
        has the same identity (device, inode, size, mtime, ctime) and nothing
        else looked at it in between; any change is verified in full, never
        served stale.  Every later ``recover()`` verifies the whole file.
        """
        with self._mutex:
            if not self.exists():
                self._opened = None
                self._refresh_missing()
                return self._snapshot(now)
            with self._locked():
                opened, self._opened = self._opened, None
                if (
                    opened is not None
                    and not self._verify_twice_on_open
                    and self._poisoned is None
                    and self._file_identity() == opened
                ):
                    return self._snapshot(now)
                self._full_verify()
                return self._snapshot(now)

    def _file_identity(self) -> tuple[int, int, int, int, int] | None:
        try:
            return self._fs.lstat(self._paths.journal).identity
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise EnvironmentFailure(f"cannot stat the lease journal: {exc.strerror}") from exc

    @contextlib.contextmanager
    def locked_state(self, *, now: float | None = None) -> Iterator[Recovery]:
        """Hold the session lock, refresh (incrementally) and yield the current state.

        While the block runs no ``prepare`` (in any thread or process) can
        append, so a cleanup may re-validate and delete inside it.  Journal
        methods called from the same thread inside the block re-use the lock.
        """
        with self._locked():
            self._refresh()
            yield self._snapshot(now)

    def reconcile_reference(
        self, transaction_id: str, owner: ArtifactReferenceOwner, *, now: float | None = None
    ) -> ReconciliationReport:
        """Resolve one PREPARED lease against the owner (the docs/design.md section 6 table).

        A lease that is already terminal reports ``already_*`` and the owner is
        not asked.  Otherwise, inside ``owner.inspect_fenced(transaction_id)``:

        * PUBLISHED with the claim's source id *and* full digest: append
          COMMITTED -> ``committed``;
        * PUBLISHED with any other identity: append (and fsync) a CONFLICT
          record naming it, unless already recorded -> ``pending_conflict``;
        * UNKNOWN, a failed inspection, or an observation of another id ->
          ``pending_unknown`` (an owner failure is never read as absence);
        * ABSENT and sealed: append ABORTED (no second seal) -> ``aborted``;
        * ABSENT, not sealed: ``seal_absence()`` first; ``True``: append ABORTED
          -> ``aborted``; ``False`` -> ``pending_stale``; an exception or any
          other answer -> ``pending_unknown``.

        Other pending results write nothing.  The terminal event is appended inside the
        fence, after the tombstone (S3).  Idempotent; of concurrent reconcilers
        at most one appends the terminal event, the others report ``already_*``
        (S5).  Raises :class:`UnknownTransactionError` for an id with no record, and
        :class:`IllegalTransitionError` for one settled before a checkpoint.
        """
        txn = validate_transaction_id(transaction_id)
        self._refuse_owner_call_under_lock("reconcile_reference")
        known = unobserved_decision(self._phase_of(txn))
        if known is not None:  # no answer of the owner can change it: it is not asked
            return self._already(txn, known, None)
        with contextlib.ExitStack() as stack:
            try:
                observation = stack.enter_context(owner.inspect_fenced(txn))
            except Exception as exc:  # an owner failure is an unknown answer, never absence
                # the table's row for an UNKNOWN answer gives the status; with no
                # fence held, nothing it might ask to write is written
                unknown = observation_kind(None, False, False)
                decided = reconcile_decision(self._phase_of(txn), unknown)
                return ReconciliationReport(
                    transaction_id=txn,
                    status=decided.status,
                    reason=f"owner inspection failed ({type(exc).__name__})",
                )
            return self._decide(txn, observation, now)
        raise AssertionError("unreachable")  # pragma: no cover

    def reconcile_pending(
        self, owner: ArtifactReferenceOwner, *, now: float | None = None
    ) -> list[ReconciliationReport]:
        """Reconcile the pending set as of the start of the call.

        A lease prepared after the set was read is left for the next call.  A
        session without a journal has nothing pending, and nothing is created.
        """
        self._refuse_owner_call_under_lock("reconcile_pending")
        if not self.exists():
            return []
        with self._locked():
            self._refresh()
            pending = list(self._fold.pending)
        return [self.reconcile_reference(txn, owner, now=now) for txn in pending]

    # -- reconciliation -------------------------------------------------------

    @staticmethod
    def _already(txn: str, known: Reconcile, generation: object) -> ReconciliationReport:
        return ReconciliationReport(
            transaction_id=txn,
            status=known.status,
            reason="the journal already holds a terminal event",
            generation=generation if isinstance(generation, int | str) else None,
        )

    def _decide(
        self, txn: str, observation: OwnerObservation, now: float | None
    ) -> ReconciliationReport:
        """Gather what the owner showed; the spec's reconciliation tables decide."""
        generation = observation.generation

        def report(status: ReconcileStatus, reason: str) -> ReconciliationReport:
            return ReconciliationReport(
                transaction_id=txn, status=status, reason=reason, generation=generation
            )

        phase = self._phase_of(txn)  # inside the fence: a concurrent reconciler may have won
        known = unobserved_decision(phase)
        if known is not None:  # terminal: the table says already_*, whatever is seen
            return self._already(txn, known, generation)
        kind, reason = self._observation_kind(txn, observation)
        decision = reconcile_decision(phase, kind)
        if decision.seal_first:
            answer: object
            try:
                answer = observation.seal_absence()
            except Exception as exc:  # the tombstone may or may not exist: stay pending
                answer, reason = exc, f"seal failed ({type(exc).__name__})"
            else:
                reason = (  # why, in words; the decision itself is the spec's SEAL_TABLE
                    "absence sealed by tombstone"
                    if answer is True
                    else "generation moved before the seal"
                    if answer is False
                    else "seal gave no True/False answer"
                )
            decision = seal_decision(answer)
            if decision.target is not None:
                self._fs.crash_point("reconcile.after_tombstone")
        if decision.record_observed:
            protected = self._record_conflict(txn, observation, now)
            reason = "owner holds a different identity for this id (recorded; " + (
                "it stays protected while the lease is pending)"
                if protected
                else "not an artifact of this session: nothing protected)"
            )
        if decision.target is not None:
            return self._finish(txn, decision.target, now, generation, decision.status, reason)
        return report(decision.status, reason)

    def _observation_kind(self, txn: str, observation: OwnerObservation) -> tuple[Any, str]:
        """The spec's observation kind for what the owner showed, and why, in words.

        Reads only what the kind needs (an adapter's properties may be costly
        or broken): the identity only when PUBLISHED, ``sealed`` only when ABSENT.
        """
        if observation.transaction_id != txn:
            return observation_kind(None, False, None), "observation names another transaction"
        state = observation.state
        if state is ObservedState.PUBLISHED:
            claim = self._fold.intents[txn]
            matches = (
                observation.source_id == claim.source_id
                and observation.content_sha256 == claim.content_sha256
            )
            return observation_kind(state, matches, None), (
                "owner holds the reference with this identity" if matches else ""
            )
        if state is ObservedState.ABSENT:
            sealed = observation.sealed
            return observation_kind(state, False, sealed), (
                "absence was already sealed" if sealed is True else ""
            )
        return observation_kind(None, False, None), "owner cannot tell"

    def _record_conflict(self, txn: str, observation: OwnerObservation, now: float | None) -> bool:
        """Append (and fsync) a CONFLICT naming what the owner shows; True if it protects.

        Inside the fence, before the report: once ``pending_conflict`` is said,
        the identity is durable evidence the GC reads (S1).  Idempotent.
        """
        identity = ObservedIdentity.seen(observation.source_id, observation.content_sha256)
        with self._locked():
            self._refresh()
            if self._fold.phases.get(txn) is LeaseState.PREPARED and identity not in (
                self._fold.conflicts.get(txn, ())
            ):
                self._append(txn, LeaseNote.CONFLICT, self._fold.intents[txn], now, identity)
        return _conflict_claim(identity, self._paths.session_id) is not None

    def _finish(
        self,
        txn: str,
        target: LeaseState,
        now: float | None,
        generation: object,
        status: ReconcileStatus,
        reason: str,
    ) -> ReconciliationReport:
        try:
            _, appended = self._transition(txn, target, now)
        except IllegalTransitionError:
            appended = False
        if not appended:  # another reconciler appended first: what the table says of its state
            phase = self._phase_of(txn)
            unseen = observation_kind(None, False, None)
            known = unobserved_decision(phase) or reconcile_decision(phase, unseen)
            return self._already(txn, known, generation)
        return ReconciliationReport(
            transaction_id=txn,
            status=status,
            reason=reason,
            generation=generation if isinstance(generation, int | str) else None,
        )

    # -- state machine --------------------------------------------------------

    def _phase_of(self, txn: str) -> LeaseState:
        if not self._depth and not self.exists():
            # No journal, no transaction: and asking must not create the session.
            raise UnknownTransactionError(f"no transaction {txn!r} in the journal")
        with self._locked():
            self._refresh()
            phase = self._fold.phases.get(txn)
            if phase is None:
                self._refuse_settled(txn)
        if phase is None:
            raise UnknownTransactionError(f"no transaction {txn!r} in the journal")
        return phase

    def _transition(
        self, transaction_id: str, target: LeaseState, now: float | None
    ) -> tuple[Transaction, bool]:
        txn = validate_transaction_id(transaction_id)
        with self._locked():
            self._refresh()
            current = self._fold.phases.get(txn)
            if current is None:
                self._refuse_settled(txn)
                raise UnknownTransactionError(f"no transaction {txn!r} in the journal")
            moved = lease_step(current, target)
            if moved is None:
                raise IllegalTransitionError(
                    f"transaction {txn!r}: {current.value} -> {target.value} is not allowed"
                )
            if not moved[1]:  # already there: idempotent, nothing appended (S5)
                return self._fold.transaction(txn), False
            self._append(txn, target, self._fold.intents[txn], now)
            return self._fold.transaction(txn), True

    # -- locking, reading, appending -----------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with self._mutex:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            with self._paths.session_lock(self._fs):
                self._depth = 1
                self._holder = threading.get_ident()
                try:
                    yield
                finally:
                    self._depth = 0
                    self._holder = None

    def _refuse_owner_call_under_lock(self, operation: str) -> None:
        """The owner is never called while this thread holds the session lock.

        Reconciliation takes the owner's fence and then the session lock; calling
        the owner the other way round (inside :meth:`locked_state`) could deadlock
        against a concurrent reconciler.
        """
        if self._holder == threading.get_ident():
            raise UsageError(
                f"{operation} calls the owner; never call it inside locked_state() "
                "(the owner is called only without the session lock)"
            )

    def _snapshot(self, now: float | None) -> Recovery:
        fold = self._fold
        return Recovery(
            session_id=fold.session_id,
            states=dict(fold.phases),
            transactions=dict(fold.intents),
            pending_transaction_ids=tuple(fold.pending),
            torn_tail=self._torn,
            record_count=fold.sequence,
            last_sha256=fold.last_sha256,
            verified_bytes=fold.size,
            observed_at=self._clock() if now is None else now,
            conflicts=dict(fold.conflicts),
        )

    def _refresh_missing(self) -> None:
        if self._fold.size or self._fold.sequence:
            raise JournalCorruptError(self._fold.sequence, "vanished", "verified journal is gone")
        self._check_anchor(0, "vanished", "the lease journal is gone")
        self._identity = None
        self._torn = None

    def _check_anchor(self, records: int, reason: str, what: str) -> None:
        """Missing evidence is not "no leases": refuse below the anchor's count."""
        expected = self._anchor.expected()
        if records < expected:
            raise JournalCorruptError(
                records + 1,
                reason,
                f"{what}, but {ANCHOR_NAME} says it held at least {expected} record(s); "
                f"restore it (or, if every lease is truly settled, remove {ANCHOR_NAME})",
            )

    def anchor_verified(self) -> None:
        """Durably raise the anchor to the records verified so far (cleanup, under the lock)."""
        with self._locked():
            if self._fold.sequence:
                self._anchor.raise_to(self._fold.sequence)

    def _refresh(self) -> None:
        """Bring the fold up to date with the file (under the lock)."""
        self._opened = None
        if self._poisoned is not None:
            raise self._poisoned
        if self._stale or self._checkpoint_log_identity() != self._log_identity:
            self._full_verify()
            self._stale = False
            return
        try:
            facts = self._fs.lstat(self._paths.journal)
        except FileNotFoundError:
            if self._fold.base is not None or self.exists():
                self._full_verify()  # a checkpoint log: it says what must be there
            else:
                self._refresh_missing()
            return
        except OSError as exc:
            raise EnvironmentFailure(f"cannot stat the lease journal: {exc.strerror}") from exc
        _refuse_unlike_ours(facts, self._fold.sequence + 1)
        if self._identity is not None and (facts.device, facts.inode) != self._identity:
            self._full_verify()
            return
        if facts.size < self._fold.size:
            self._poisoned = JournalCorruptError(
                self._fold.sequence, "shrank", "verified records were cut off"
            )
            raise self._poisoned
        if self._torn is None and facts.size == self._fold.size and self._identity is not None:
            return
        self._read_from(self._fold)

    def _checkpoint_log_identity(self) -> tuple[int, int, int, int, int] | None:
        try:
            return self._fs.lstat(self._paths.checkpoint_log).identity
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise EnvironmentFailure(f"cannot stat the checkpoint log: {exc.strerror}") from exc

    def _full_verify(self) -> None:
        """Verify from the start: the last checkpoint's snapshot (if any), then the live file."""
        fold = _Fold(self._paths.session_id)
        self._log_identity = self._checkpoint_log_identity()
        base = read_base(self._paths, self._fs)
        if base is not None:
            fold.start_from(base.checkpoint, base.snapshot)
        seen = (self._fold.sequence, self._fold.last_sha256)
        if seen[0] > fold.sequence:
            fold.checkpoint = seen  # the tail must pass through what was verified before
        elif seen[0] and seen[0] == fold.sequence and seen[1] != fold.last_sha256:
            self._poisoned = JournalCorruptError(
                fold.sequence, "rewritten", "journal lost records verified before"
            )
            raise self._poisoned
        self._fold = fold
        self._identity = None
        self._torn = None
        try:
            self._read_from(fold)
        except JournalCorruptError as exc:
            if base is None and exc.line_number == 1 and exc.reason in {"sequence", "chain"}:
                raise JournalCorruptError(
                    1,
                    "checkpoint",
                    "the journal file does not start at the first record, and no checkpoint "
                    "log covers the records before it",
                ) from exc
            raise
        if fold.checkpoint is not None:
            self._poisoned = JournalCorruptError(
                fold.sequence + 1, "rewritten", "journal lost records verified before"
            )
            raise self._poisoned
        if self._identity is not None:
            self._check_anchor(fold.sequence, "shrank", "the lease journal is short")

    def _read_from(self, fold: _Fold) -> None:
        """Read and fold every complete line after ``fold.size``; note the torn tail."""
        fs = self._fs
        try:
            handle = fs.open_read(self._paths.journal)
        except FileNotFoundError:
            self._refresh_missing()
            return
        except NotRegularFileError as exc:  # a directory or a FIFO where the journal belongs
            raise JournalCorruptError(
                fold.sequence + 1, "not_regular", "not a regular file"
            ) from exc
        except OSError as exc:
            raise EnvironmentFailure(f"cannot open the lease journal: {exc.strerror}") from exc
        try:
            facts = fs.fstat(handle)
            _refuse_unlike_ours(facts, fold.sequence + 1)
            self._identity = (facts.device, facts.inode)
            self._torn = None
            offset = fold.size
            carry = b""
            while offset < facts.size:
                chunk = fs.pread(handle, min(READ_CHUNK, facts.size - offset), offset)
                if not chunk:
                    break
                offset += len(chunk)
                pieces = (carry + chunk).split(b"\n")
                carry = pieces.pop()
                for piece in pieces:
                    line_number = fold.sequence + 1
                    _check_length(piece, line_number)
                    fold.apply(parse_line(piece, line_number), line_number, len(piece) + 1)
                # Memory stays bounded by one chunk plus one record: a final
                # piece longer than any record is refused as soon as it is seen.
                _check_length(carry, fold.sequence + 1)
            if carry:
                _check_torn(carry, fold.sequence + 1)
                self._torn = TornTail(offset=fold.size, length=len(carry))
        except OSError as exc:
            raise EnvironmentFailure(f"cannot read the lease journal: {exc.strerror}") from exc
        finally:
            fs.close(handle)

    def _verify_artifact(self, claim: ArtifactRetentionClaim) -> None:
        """The artifact is a regular file of this session, owned by us, with the full digest."""
        fs = self._fs
        path = self._paths.path_for_source(claim.source_id)
        name = os.path.basename(path)
        try:
            directory = fs.lstat(self._paths.tool_results)
            facts = fs.lstat(path)
        except FileNotFoundError:
            raise DanglingReferenceError(
                f"artifact {name} does not exist; refusing to prepare a dangling reference"
            ) from None
        except OSError as exc:
            raise EnvironmentFailure(f"cannot stat artifact {name}: {exc.strerror}") from exc
        if not directory.is_dir:
            raise ArtifactNotOwnedError("tool-results is not a real directory (S7)")
        if not facts.is_regular or facts.uid != fs.current_uid() or facts.nlink > 1:
            raise ArtifactNotOwnedError(f"artifact {name} is not a regular file of ours (S7)")
        digest = hashlib.sha256()
        try:
            handle = fs.open_read(path)
            try:
                opened = fs.fstat(handle)
                if (opened.device, opened.inode) != (facts.device, facts.inode):
                    raise ArtifactNotOwnedError(f"artifact {name} changed while checked")
                offset = 0
                while True:
                    chunk = fs.pread(handle, READ_CHUNK, offset)
                    if not chunk:
                        break
                    digest.update(chunk)
                    offset += len(chunk)
            finally:
                fs.close(handle)
        except FileNotFoundError:
            raise DanglingReferenceError(f"artifact {name} vanished while checked") from None
        except OSError as exc:
            raise EnvironmentFailure(f"cannot read artifact {name}: {exc.strerror}") from exc
        if digest.hexdigest() != claim.content_sha256:
            raise ArtifactIntegrityError(
                f"artifact {name} does not match the claim's digest; refusing to prepare"
            )

    def _append(
        self,
        txn: str,
        phase: RecordPhase,
        claim: ArtifactRetentionClaim,
        now: float | None,
        observed: ObservedIdentity | None = None,
    ) -> None:
        """Cut a torn tail (durably), append one record, fsync -- under the lock."""
        fs = self._fs
        fold = self._fold
        record = build_record(
            sequence=fold.sequence + 1,
            previous_sha256=fold.last_sha256,
            session_id=fold.session_id,
            transaction_id=txn,
            phase=phase,
            time=self._clock() if now is None else now,
            claim=claim,
            observed=observed,
        )
        fold.check(record, record.sequence)
        line = encode_record(record)
        created = self._identity is None
        try:
            try:
                handle = fs.open_append(self._paths.journal)
            except HardLinkedFileError as exc:  # linked after the refresh looked
                raise JournalCorruptError(
                    fold.sequence + 1, "not_regular", exc.strerror or "hard-linked"
                ) from exc
            try:
                # Only ever cut bytes that were seen and judged a torn tail (S6).
                facts = fs.fstat(handle)
                seen = fold.size + (0 if self._torn is None else self._torn.length)
                if facts.size != seen or (
                    not created and (facts.device, facts.inode) != self._identity
                ):
                    raise JournalCorruptError(
                        fold.sequence + 1, "rewritten", "journal changed outside the session lock"
                    )
                if self._torn is not None:
                    fs.crash_point("journal.before_truncate")
                    fs.ftruncate(handle, fold.size)
                    fs.fsync(handle)
                    fs.crash_point("journal.after_truncate")
                    self._torn = None
                fs.crash_point("journal.before_append")
                fs.write(handle, line)
                fs.crash_point("journal.before_fsync")
                fs.fsync(handle)
                if self._dir_synced_for != (facts.device, facts.inode):
                    # The file's directory entry may not be durable yet: this object
                    # may have created it, or the writer that did may have died
                    # before its directory fsync.  Once per file and object.
                    fs.fsync_dir(self._paths.root)
                    self._dir_synced_for = (facts.device, facts.inode)
                fs.crash_point("journal.after_fsync")
            finally:
                fs.close(handle)
        except OSError as exc:
            raise JournalWriteError(
                f"cannot append to the lease journal: {exc.strerror or type(exc).__name__}"
            ) from exc
        fold.apply(record, record.sequence, len(line))
        self._identity = (facts.device, facts.inode)
        # After the record is durable, and periodically (journal_anchor): a
        # missing, emptied or cut-back journal is refused, not read as fewer leases.
        self._anchor.after_append(fold.sequence, self._clock())
