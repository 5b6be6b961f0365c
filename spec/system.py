"""The composed system: artifacts, journal and owner, with every actor interleaved.

Rules
=====

State, split into what survives a crash and what does not:

============== ===================================== ==============================
component      durable (kept by ``Crash``)            volatile (lost by ``Crash``)
============== ===================================== ==============================
artifacts      fsynced files (PRESENT / DELETED)      written, not yet fsynced files
journal        fsynced records per transaction        appended, not yet fsynced records
               (lease phases, a CONFLICT record)
owner          records (state, generation, digest,    a tombstone being written
               the artifact a foreign write names)
network        publish requests in flight (they may   --
               still land after a crash)
actors         --                                     every program counter, the GC
                                                      plan, the externalizer's counter
ghosts         rejected-before-write flags, "touched  --
               a path outside" (for S7), the artifact
               a reported pending_conflict names (S1),
               "deleted while being written" (S1),
               "this lease's records were lost"
============== ===================================== ==============================

Actors and their steps (each step is atomic; any interleaving is allowed):

* externalizer: write a new artifact (exclusive create, taking the writer's
  mark), complete it (its age starts then; fsync; the mark goes) and return
  its pointer; (``Bounds.slow_writes``) its command goes quiet for longer than
  the orphan TTL while the artifact is still being written;
* clock: an artifact ages past the orphan TTL; (``Bounds.lease_expiry``) now
  passes a PREPARED or COMMITTED lease's ``retain_until``;
* publisher (per transaction): PREPARED (append), journal fsync, send the
  publish request once PREPARED is durable, commit on ack, abort on an explicit
  rejection before any write;
* owner: applies a publish request (ack, or a lost ack: durable write, caller
  sees an error), refuses it under a tombstone, loses it in the network, makes
  a tombstone durable;
* remover (per transaction): owner removes the reference (ack or lost ack),
  then RELEASED is appended;
* reconciler: fenced observation (may be UNKNOWN), seal by CAS, ABORTED after
  the tombstone is durable, COMMITTED for a matching visible reference, a
  CONFLICT record for a visible reference with another identity (reported as
  pending_conflict once durable);
* GC: plan (classify with :func:`cleanup.classify`), apply (re-validate with
  :func:`cleanup.revalidate`, under the journal lock, with the current claims;
  given the owner (``Bounds.gc_owner``), also with the owner as a second
  witness: inside the owner's fence it asks whether a visible reference names
  each artifact, :class:`cleanup.Witness`);
* faults: ``Crash`` (keep only durable state, then recovery: the journal's
  durable records are the claims, every program counter restarts), a lost
  ack, a dropped request, an UNKNOWN answer, an external writer that alters
  an artifact's bytes, (``Bounds.foreign_publish``) another writer that
  publishes a transaction's id naming another artifact of the session, and
  (``Bounds.lost_lease``) the journal losing a settled lease's records while
  the owner still shows its reference (a journal cut back above the anchor,
  or an older copy restored).

Theory of operation
===================

:class:`Model` is the pure ``step`` of the whole system: :meth:`Model.successors`
lists every enabled :class:`Step` with the state it leads to.  Every protocol
decision delegates to the tables of :mod:`lease`, :mod:`owner`,
:mod:`reconcile`, :mod:`cleanup` and :mod:`actors`; this module only wires them
together and says what is durable.  A *mistake* (:class:`Mistake`) switches one
protocol rule off, so :mod:`variants` can show what each rule buys.

Speed without a second model: each actor reads a small part of the state (its
*local view*: a publisher its lease, artifact and owner slot, say), and the
same view recurs in thousands of states.  :meth:`Model._local` works an
actor's moves out once per view and replays them as deltas on every state
that shows that view.  The key of each view is written next to the call in
:meth:`Model.successors`; ``Model(check_moves=True)`` recomputes every move and
raises :class:`~errors.StaleMoves` if a key ever misses something the actor
reads, which the tests run on every variant and on every optional fault.

Abstractions, on purpose: one reconciler (two under
``Bounds.concurrent_reconcilers``); a lease's ``retain_until`` is one
"now is past it" flag per transaction (``JournalTxn.expired``), set only under
``Bounds.lease_expiry`` (otherwise a COMMITTED lease holds until RELEASED);
time is one "past the TTL" flag per artifact; digests are small integers
(content version, +100 when altered externally); the correct externalizer
writes only names that never existed (exclusive create never reuses a name);
one CONFLICT identity per transaction
(while a lease is PREPARED the owner's record cannot leave PUBLISHED: only a
removal does that, and the remover acts on COMMITTED leases), so a later
CONFLICT record replaces the earlier one; nobody fixes the owner after a
conflict (that is the operator's job, outside the model), so L1 does not ask
a reported conflict to be resolved.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

import attrs

from . import cleanup, lease, owner
from .actors import (
    CLIENT_CHECK_RECONCILER_MACHINE,
    EARLY_ABORT_RECONCILER_MACHINE,
    ERROR_ABORTS_PUBLISHER_MACHINE,
    FILE_MACHINE,
    GC_MACHINE,
    PUBLISHER_MACHINE,
    RECONCILER_MACHINE,
    RELEASE_FIRST_REMOVER_MACHINE,
    REMOVER_MACHINE,
    REPLAYING_PUBLISHER_MACHINE,
    FileEvent,
    FileStatus,
    GcEvent,
    GcPc,
    Machine,
    PublisherEvent,
    PublisherPc,
    ReconcilerEvent,
    ReconcilerPc,
    RemoverEvent,
    RemoverPc,
)
from .errors import BadBounds, IllegalTransition, StaleMoves
from .identity_enum import IdentityEnum
from .lease import LeaseAction, LeaseState
from .owner import OwnerAction, OwnerRecord, OwnerResult, OwnerState, SealResult
from .reconcile import Decision, ObservationKind, after_seal, classify_observation, decide

__all__ = [
    "Mistake",
    "Bounds",
    "FileSlot",
    "JournalTxn",
    "OwnerSlot",
    "Reconciler",
    "TargetKind",
    "PlanTarget",
    "SystemState",
    "StepKind",
    "Step",
    "Model",
    "artifact_name",
    "txn_name",
    "PROGRESS_STEPS",
]

NOW = 1
TTL = 1
TAMPER_OFFSET = 100


class Mistake(IdentityEnum):
    """One protocol rule switched off (see :mod:`variants`)."""

    PUBLISH_BEFORE_PREPARED_DURABLE = "publish before PREPARED is durable"
    RELEASE_BEFORE_REMOVE = "RELEASED before the owner removed the reference"
    ABORT_BEFORE_TOMBSTONE_DURABLE = "ABORTED before the tombstone is durable"
    NOT_FOUND_IS_ABSENT = "one 'not found' treated as absent, no seal"
    GC_SKIPS_REVALIDATION = "GC apply deletes without re-validation"
    GC_TRUSTS_MEMORY_PATH = "GC deletes the artifact_path a Memory record names"
    COUNTER_RESTART_OVERWRITES = "counter restarts at 001 and overwrites"
    GC_FOLLOWS_UNKNOWN_ENTRIES = "GC continues past unknown entries (follows a symlink)"
    GC_IGNORES_DIGEST_CONFLICT = "GC continues past a digest conflict"
    DELETE_FOLDER_AT_SESSION_END = "delete the whole tool-results/ at session end"
    BLIND_TERMINAL_APPEND = "journal appends terminal events without folding the current phase"
    CONFLICT_LEAVES_OBSERVED_UNPROTECTED = (
        "pending_conflict reported without journalling the observed identity"
    )
    PREPARED_LEASE_EXPIRES = "GC honours retain_until on a PREPARED lease"
    UNCERTAIN_ERROR_IS_REJECTION = (
        "an uncertain publish error (timeout, lost connection) handled as a rejection"
    )
    REPLAYED_TRANSACTION_ID = "the publisher is called again for a transaction id it already used"
    CLIENT_SIDE_GENERATION = (
        "the reconciler checks the generation itself, then writes the tombstone unconditionally"
    )
    ALREADY_SEALED_APPENDS_BLINDLY = (
        "a reconciler whose seal answers already_sealed appends ABORTED without folding the lease"
    )
    GC_IGNORES_WRITER = "GC judges a file by its age alone, also while its writer still writes it"
    GC_WITHOUT_OWNER_WITNESS = (
        "GC deletes on the journal's word alone and never asks the owner what it shows"
    )


@attrs.frozen
class Bounds:
    """Exploration bounds; every fault can be switched off."""

    artifacts: int = 2
    transactions: int = 2
    max_generation: int = 3
    max_deletions: int = 100
    crashes: bool = True
    lost_acks: bool = True
    unknown: bool = True
    tamper: bool = True
    foreign_entry: bool = True
    #: another writer publishes a transaction's id naming another artifact
    #: (off by default: the default exploration and its state count predate it)
    foreign_publish: bool = False
    #: the clock passes a lease's ``retain_until`` (off by default, like ``foreign_publish``)
    lease_expiry: bool = False
    #: a second reconciler runs at the same time as the first (off by default, likewise)
    concurrent_reconcilers: bool = False
    #: a command goes quiet for longer than the orphan TTL while its artifact is
    #: still being written (its last write is old; off by default, likewise)
    slow_writes: bool = False
    #: the journal loses a settled (COMMITTED) lease whose reference the owner
    #: still shows: cut back above the anchor, or an older copy restored (off by
    #: default, likewise)
    lost_lease: bool = False
    #: the GC is given the owner as its second witness (``gc apply --owner``); off:
    #: the journal is its only witness, as a GC run without an owner
    gc_owner: bool = False

    def __attrs_post_init__(self) -> None:
        if not 1 <= self.artifacts <= 4:
            raise BadBounds("artifacts must be 1..4")
        if not 1 <= self.transactions <= 4:
            raise BadBounds("transactions must be 1..4")
        if not 1 <= self.max_generation <= 6:
            raise BadBounds("max_generation must be 1..6")
        if self.max_deletions < 0:
            raise BadBounds("max_deletions must be >= 0")

    @classmethod
    def parse(cls, text: str) -> Bounds:
        """Bounds from ``"k=v,k=v"`` (CLI form); raises :class:`BadBounds` on any doubt.

        Integers are decimal; booleans are ``true``/``false`` (also ``1``/``0``,
        ``yes``/``no``, ``on``/``off``).  An empty text is the default bounds.
        """
        fields = {f.name: f for f in attrs.fields(cls)}
        values: dict[str, int | bool] = {}
        for item in text.split(","):
            item = item.strip()
            if not item:
                continue
            key, sep, raw = item.partition("=")
            key, raw = key.strip(), raw.strip()
            if not sep or key not in fields:
                known = ", ".join(fields)
                raise BadBounds(f"bad bound {item!r}: expected key=value with key in {known}")
            if key in values:
                raise BadBounds(f"bound {key!r} given twice")
            values[key] = _bound_value(key, raw, fields[key].default)
        return cls(**values)  # type: ignore[arg-type]


_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})


def _bound_value(key: str, raw: str, default: object) -> int | bool:
    if isinstance(default, bool):
        if raw.lower() in _TRUE:
            return True
        if raw.lower() in _FALSE:
            return False
        raise BadBounds(f"bound {key!r} must be true or false, not {raw!r}")
    if not (raw.isascii() and raw.isdigit()):
        raise BadBounds(f"bound {key!r} must be a non-negative integer, not {raw!r}")
    return int(raw)


# The parts below are named tuples: their hash and ``==`` run in C, with no
# Python call per part (the visited-set look-up of every successor hashes and
# compares them all).  Parts of different kinds never meet in one comparison:
# each sits at its own place in :class:`SystemState`.
class FileSlot(NamedTuple):
    """One artifact name: status, content version (writes so far), aged, altered.

    ``VOLATILE`` is the artifact being written: its writer holds the mark and
    has not returned the pointer.  ``cut_short`` is a ghost (never read by an
    actor): the GC deleted the file while it was still being written.
    """

    status: FileStatus = FileStatus.NONE
    content: int = 0
    old: bool = False
    tampered: bool = False
    cut_short: bool = False

    @property
    def digest(self) -> int:
        return self.content + (TAMPER_OFFSET if self.tampered else 0)

    @property
    def exists(self) -> bool:
        return self.status in (FileStatus.VOLATILE, FileStatus.PRESENT)


class JournalTxn(NamedTuple):
    """One transaction's journal records: durable, then volatile; the intent's digest.

    ``conflict`` is the artifact slot a CONFLICT record names (-1: none), with
    the observed digest; ``conflict_volatile``: that record is not yet fsynced.
    ``expired``: now is past the ``retain_until`` the PREPARED record carries
    (time, not a record: a crash keeps it while the PREPARED record survives).
    ``lost``: the journal lost this lease's records (``Bounds.lost_lease``); a
    ghost that keeps its publisher from starting the id afresh.
    """

    durable: tuple[LeaseState, ...] = ()
    volatile: tuple[LeaseState, ...] = ()
    intent: int = 0
    conflict: int = -1
    conflict_digest: int = 0
    conflict_volatile: bool = False
    expired: bool = False
    lost: bool = False

    @property
    def unsynced(self) -> bool:
        """Some record of this transaction is still in the page cache."""
        return bool(self.volatile) or self.conflict_volatile

    @property
    def records(self) -> tuple[LeaseState, ...]:
        """What a reader of the file sees now (the page cache included)."""
        return self.durable + self.volatile

    @property
    def state(self) -> LeaseState:
        records = self.records
        return records[-1] if records else LeaseState.NEW

    @property
    def durable_state(self) -> LeaseState:
        return self.durable[-1] if self.durable else LeaseState.NEW


class OwnerSlot(NamedTuple):
    """The owner's record for one transaction id, a tombstone in progress, a request in flight.

    ``names``: the artifact slot the PUBLISHED reference names when another
    writer published it (-1: the transaction's own artifact).  ``reported`` is
    a ghost (never read by an actor): the slot a ``pending_conflict`` reported
    for this id named (-1: none); sticky, like the ``rejected`` flags.
    """

    record: OwnerRecord = OwnerRecord()
    pending_tombstone: bool = False
    inflight: int = 0  # digest of an in-flight publish request; 0: none
    names: int = -1
    reported: int = -1


class Reconciler(NamedTuple):
    pc: ReconcilerPc = ReconcilerPc.IDLE
    txn: int = -1
    generation: int = 0


class TargetKind(IdentityEnum):
    ARTIFACT = "artifact"
    FOREIGN_ENTRY = "foreign entry"
    MEMORY_PATH = "memory path"


@attrs.frozen(cache_hash=True)
class PlanTarget:
    kind: TargetKind
    index: int
    facts: cleanup.EntryFacts | None = None


class SystemState(NamedTuple):
    """The whole system (see the module docstring for what is durable).

    A named tuple like its parts: the explorer hashes and compares one per
    transition, and a tuple's hash and ``==`` run in C.
    """

    files: tuple[FileSlot, ...]
    journal: tuple[JournalTxn, ...]
    owner: tuple[OwnerSlot, ...]
    publishers: tuple[PublisherPc, ...]
    removers: tuple[RemoverPc, ...]
    reconcilers: tuple[Reconciler, ...] = (Reconciler(),)
    gc_plan: tuple[PlanTarget, ...] | None = None
    counter: int = 0
    rejected: tuple[bool, ...] = ()
    outside_touched: bool = False

    @property
    def reconciler(self) -> Reconciler:
        """The first reconciler (the only one unless ``Bounds.concurrent_reconcilers``)."""
        return self.reconcilers[0]


class StepKind(IdentityEnum):
    """Every kind of step, with the sentence :meth:`Step.describe` fills in."""

    EXTERNALIZE = "externalizer creates {a} and starts writing it (not yet fsynced)"
    OVERWRITE = "externalizer's counter points at {a} again and overwrites it"
    FSYNC_ARTIFACT = "externalizer completes {a}, fsyncs it and returns its pointer"
    TICK = "clock: {a} is now older than the orphan TTL"
    QUIET = (
        "clock: {a}'s command has been quiet for longer than the orphan TTL; "
        "its last write is old, and {a} is still being written"
    )
    EXPIRE = "clock: now is past the retain_until of {t}'s lease ({note})"
    TAMPER = "fault: someone outside toolswap alters the bytes of {a}"
    PREPARE = "publisher {t} appends PREPARED for {a} (not yet fsynced)"
    JOURNAL_FSYNC = "journal fsync: appended records are durable"
    SEND = "publisher {t} sends the publish request to the owner"
    REJECT = "owner rejects {t} before any write; publisher appends ABORTED"
    APPLY_ACK = "owner applies {t}'s publish ({note}); the publisher gets the ack"
    APPLY_LOST_ACK = (
        "owner applies {t}'s publish durably, but the ack is lost (caller sees an error)"
    )
    REFUSE = "owner refuses {t}'s publish: a tombstone exists"
    DROP = "fault: {t}'s publish request is lost in the network (caller sees an error)"
    COMMIT = "publisher {t} appends COMMITTED{note}"
    ABORT_ON_ERROR = "publisher {t} handles the error as a rejection and appends ABORTED{note}"
    REPLAY = (
        "publisher {t} is called again after the restart and, without reading the journal, "
        "sends {t}'s publish request (the lease is {note})"
    )
    REMOVE_ACK = "remover: owner removes {t}'s reference{note}"
    REMOVE_LOST_ACK = "remover: owner removes {t}'s reference, but the ack is lost"
    RELEASE = "remover appends RELEASED for {t}"
    RELEASE_FIRST = "remover appends RELEASED for {t} before asking the owner"
    REMOVE_AFTER = "remover: owner removes {t}'s reference"
    OBSERVE = "reconciler{r} observes {t} inside the fence: {note}"
    SEAL = "reconciler{r} seals {t}'s absence by CAS on generation {note}: tombstone being written"
    STALE = "reconciler{r}'s seal of {t} fails: {note} (pending_stale)"
    FOUND_SEALED = (
        "reconciler{r}'s seal of {t} answers already_sealed: the tombstone is durable already{note}"
    )
    CHECK_GENERATION = (
        "reconciler{r} reads {t}'s generation itself: still {note}, so it goes on "
        "(a read, not a compare-and-set; nothing holds the owner)"
    )
    WRITE_TOMBSTONE = "reconciler{r} writes {t}'s tombstone unconditionally{note}"
    TOMBSTONE_DURABLE = "owner makes {t}'s tombstone durable"
    ABORT = "reconciler{r} appends ABORTED for {t}{note}"
    REPORT_CONFLICT = (
        "reconciler{r} reports pending_conflict for {t}: the owner's reference names {a}"
    )
    FOREIGN_PUBLISH = "fault: another writer publishes {t}'s id naming {a} (generation {note})"
    LOSE_LEASE = (
        "fault: the journal loses {t}'s records (cut back above the anchor, or an older "
        "copy restored); the owner still shows {t}'s reference"
    )
    GC_PLAN = "GC plans: {note}"
    GC_APPLY = "GC applies: {note}"
    SESSION_END = "session ends: the whole tool-results/ folder is deleted"
    CRASH = "CRASH: only durable state survives; recovery restarts every actor"


class Step(NamedTuple):
    """One labelled transition of the composed system."""

    kind: StepKind
    txn: int = -1
    slot: int = -1
    note: str = ""
    #: which reconciler took a reconciler step (0: the first, the only one by default)
    by: int = 0

    def describe(self) -> str:
        return self.kind.value.format(
            a=artifact_name(self.slot) if self.slot >= 0 else "?",
            t=txn_name(self.txn) if self.txn >= 0 else "?",
            note=self.note,
            r=f" {self.by + 1}" if self.by else "",
        )


_JOURNAL_FSYNC = Step(StepKind.JOURNAL_FSYNC)
_CRASH = Step(StepKind.CRASH)

#: Steps that are not faults and start no new work: the fair continuation L1 relies on.
PROGRESS_STEPS: frozenset[StepKind] = frozenset(
    {
        StepKind.FSYNC_ARTIFACT,
        StepKind.TICK,
        StepKind.QUIET,
        StepKind.EXPIRE,
        StepKind.JOURNAL_FSYNC,
        StepKind.SEND,
        StepKind.REJECT,
        StepKind.APPLY_ACK,
        StepKind.REFUSE,
        StepKind.COMMIT,
        StepKind.ABORT_ON_ERROR,
        StepKind.RELEASE,
        StepKind.REMOVE_AFTER,
        StepKind.OBSERVE,
        StepKind.SEAL,
        StepKind.STALE,
        StepKind.FOUND_SEALED,
        StepKind.CHECK_GENERATION,
        StepKind.WRITE_TOMBSTONE,
        StepKind.TOMBSTONE_DURABLE,
        StepKind.ABORT,
        StepKind.REPORT_CONFLICT,
        StepKind.GC_PLAN,
        StepKind.GC_APPLY,
    }
)


def artifact_name(slot: int) -> str:
    return f"tool_result_{slot + 1:03d}.txt"


def txn_name(txn: int) -> str:
    return f"t{txn + 1}"


def _put(values: tuple[object, ...], index: int, value: object) -> tuple[object, ...]:
    return values[:index] + (value,) + values[index + 1 :]


_KEEP: Any = object()

# ``SystemState(...)`` runs a Python-level ``__new__`` with keyword handling;
# the state is a plain tuple underneath, so the hot paths build it directly.
_new_state: Callable[[type[SystemState], Iterable[Any]], SystemState] = tuple.__new__


def _evolve(  # noqa: PLR0913 - one keyword per field, like attrs.evolve
    s: SystemState,
    *,
    files: Any = _KEEP,
    journal: Any = _KEEP,
    owner: Any = _KEEP,
    publishers: Any = _KEEP,
    removers: Any = _KEEP,
    reconcilers: Any = _KEEP,
    gc_plan: Any = _KEEP,
    counter: Any = _KEEP,
    rejected: Any = _KEEP,
    outside_touched: Any = _KEEP,
) -> SystemState:
    """``attrs.evolve`` for the state, without its per-call introspection (the explorer's
    hottest call: about a quarter of its time went to ``attrs.evolve``)."""
    return _new_state(
        SystemState,
        (
            s.files if files is _KEEP else files,
            s.journal if journal is _KEEP else journal,
            s.owner if owner is _KEEP else owner,
            s.publishers if publishers is _KEEP else publishers,
            s.removers if removers is _KEEP else removers,
            s.reconcilers if reconcilers is _KEEP else reconcilers,
            s.gc_plan if gc_plan is _KEEP else gc_plan,
            s.counter if counter is _KEEP else counter,
            s.rejected if rejected is _KEEP else rejected,
            s.outside_touched if outside_touched is _KEEP else outside_touched,
        ),
    )


#: A move's effect as (field index, item index or -1 for the whole field, new value).
Delta = tuple[tuple[int, int, Any], ...]

# which fields of :class:`SystemState` hold one item per artifact, transaction or reconciler
_PER_ITEM = tuple(
    name in ("files", "journal", "owner", "publishers", "removers", "reconcilers", "rejected")
    for name in SystemState._fields
)


def _delta(before: SystemState, after: SystemState) -> Delta:
    """What ``after`` changed in ``before``: every field or item that is not the same object."""
    changes: list[tuple[int, int, Any]] = []
    pairs: Iterable[tuple[Any, Any]] = zip(before, after, strict=True)
    for i, (old, new) in enumerate(pairs):
        if new is old:
            continue
        if _PER_ITEM[i]:
            changes.extend(
                (i, j, y) for j, (x, y) in enumerate(zip(old, new, strict=True)) if y is not x
            )
        else:
            changes.append((i, -1, new))
    return tuple(changes)


def _apply(s: SystemState, delta: Delta) -> SystemState:
    if not delta:
        return s
    fields: list[Any] = list(s)
    for i, j, value in delta:
        fields[i] = value if j < 0 else _put(fields[i], j, value)
    return _new_state(SystemState, fields)


def _file(f: FileSlot, *, status: Any = _KEEP, old: Any = _KEEP, tampered: Any = _KEEP) -> FileSlot:
    return FileSlot(
        f.status if status is _KEEP else status,
        f.content,
        f.old if old is _KEEP else old,
        f.tampered if tampered is _KEEP else tampered,
        f.cut_short,
    )


def _deleted(f: FileSlot) -> FileSlot:
    """``f`` deleted; deleting it while it is still being written is the ghost ``cut_short``."""
    return FileSlot(
        FILE_MACHINE.step(f.status, FileEvent.DELETE),
        f.content,
        f.old,
        f.tampered,
        f.cut_short or f.status is FileStatus.VOLATILE,
    )


def _owner(  # noqa: PLR0913 - one keyword per field
    o: OwnerSlot,
    *,
    record: Any = _KEEP,
    pending_tombstone: Any = _KEEP,
    inflight: Any = _KEEP,
    names: Any = _KEEP,
    reported: Any = _KEEP,
) -> OwnerSlot:
    record = o.record if record is _KEEP else record
    if names is _KEEP:
        # a reference that is gone names nothing; a NOOP publish keeps the record as it is
        names = o.names if record.state is OwnerState.PUBLISHED else -1
    return OwnerSlot(
        record,
        o.pending_tombstone if pending_tombstone is _KEEP else pending_tombstone,
        o.inflight if inflight is _KEEP else inflight,
        names,
        o.reported if reported is _KEEP else reported,
    )


_ACTION_PHASE = {action: phase for phase, action in lease.RECORD_ACTION.items()}


def _append(txn: JournalTxn, phase: LeaseState) -> JournalTxn:
    return JournalTxn(
        txn.durable,
        txn.volatile + (phase,),
        txn.intent,
        txn.conflict,
        txn.conflict_digest,
        txn.conflict_volatile,
        txn.expired,
    )


def _fsynced(txn: JournalTxn) -> JournalTxn:
    if not txn.unsynced:
        return txn
    return JournalTxn(
        txn.records, (), txn.intent, txn.conflict, txn.conflict_digest, False, txn.expired
    )


#: (an error is a rejection, replay an id) -> the publisher machine; both mistakes at once
#: get both additions (the rejection's ``SENT --error--> FAILED`` wins over ``DONE``).
_PUBLISHER_MACHINES: Mapping[tuple[bool, bool], Machine[PublisherPc, PublisherEvent]] = {
    (False, False): PUBLISHER_MACHINE,
    (True, False): ERROR_ABORTS_PUBLISHER_MACHINE,
    (False, True): REPLAYING_PUBLISHER_MACHINE,
    (True, True): Machine(
        "publisher (mistakes: an error is a rejection, replay a transaction id)",
        PUBLISHER_MACHINE.initial,
        MappingProxyType(
            {**REPLAYING_PUBLISHER_MACHINE.table, **ERROR_ABORTS_PUBLISHER_MACHINE.table}
        ),
    ),
}


@attrs.frozen
class Model:
    """The composed system under some bounds, with zero or more mistakes."""

    bounds: Bounds = Bounds()
    mistakes: frozenset[Mistake] = frozenset()
    # The GC's plan and apply depend only on the files, the journal and the
    # "touched outside" ghost, which few states tell apart (about 1,700 of the
    # default bounds' 180,000): each is computed once per distinct triple.
    _gc_steps: dict[tuple[object, ...], tuple[Step, SystemState] | None] = attrs.field(
        factory=dict, init=False, repr=False, eq=False, hash=False
    )
    # What a crash keeps of the files, the journal and the owner, likewise: each
    # part takes a few dozen values, and every state has a crash successor.
    _crashed: dict[tuple[object, ...], tuple[object, ...]] = attrs.field(
        factory=dict, init=False, repr=False, eq=False, hash=False
    )
    # Every actor's moves per local view (see ``_local``): an actor reads a
    # small part of the state, which repeats across many states.
    _moves: dict[tuple[object, ...], tuple[tuple[Step, Delta], ...]] = attrs.field(
        factory=dict, init=False, repr=False, eq=False, hash=False
    )
    #: Work every memoized move out again and raise :class:`StaleMoves` when it
    #: differs (the tests' check that each local view's key is complete; slow).
    check_moves: bool = attrs.field(default=False, kw_only=True, eq=False)

    # ----------------------------------------------------------------- shape
    def artifact_of(self, txn: int) -> int:
        """Transaction ``t`` references artifact ``t mod artifacts``."""
        return txn % self.bounds.artifacts

    @property
    def hostile_txn(self) -> int:
        """The transaction whose Memory record carries a hostile ``artifact_path``."""
        return self.bounds.transactions - 1

    def initial(self) -> SystemState:
        n = self.bounds.transactions
        return SystemState(
            files=(FileSlot(),) * self.bounds.artifacts,
            journal=(JournalTxn(),) * n,
            owner=(OwnerSlot(),) * n,
            publishers=(PUBLISHER_MACHINE.initial,) * n,
            removers=(REMOVER_MACHINE.initial,) * n,
            rejected=(False,) * n,
            reconcilers=(Reconciler(),) * (2 if self.bounds.concurrent_reconcilers else 1),
        )

    # ------------------------------------------------------------- helpers
    def claims_for(self, state: SystemState, slot: int) -> tuple[cleanup.Claim, ...]:
        """Claims on ``slot`` as the journal file shows them now (cleanup decides which are active).

        A lease's intent carries its ``retain_until`` (passed once ``expired``,
        ``NOW`` is not before it); a PREPARED lease's claim is pending, which
        :func:`cleanup.claim_is_active` keeps whatever its expiry.
        """
        claims = []
        honour_expiry = Mistake.PREPARED_LEASE_EXPIRES in self.mistakes
        for t, txn in enumerate(state.journal):
            if not lease.protects(txn.state):
                continue
            pending = lease.is_pending(txn.state)
            if self.artifact_of(t) == slot:
                until = NOW if txn.expired else None
                claims.append(
                    cleanup.Claim(
                        digest=txn.intent, pending=pending and not honour_expiry, retain_until=until
                    )
                )
            if txn.conflict == slot:  # an observed identity protects like the intent
                claims.append(cleanup.Claim(digest=txn.conflict_digest, pending=pending))
        return tuple(claims)

    @staticmethod
    def facts_of(slot: FileSlot) -> cleanup.EntryFacts | None:
        """What cleanup learns of ``slot``: a file being written carries its writer's mark."""
        if not slot.exists:
            return None
        mtime = NOW - TTL if slot.old else NOW
        return cleanup.EntryFacts(
            digest=slot.digest,
            size=slot.content,
            mtime=mtime,
            writing=slot.status is FileStatus.VOLATILE,
        )

    @property
    def asks_owner(self) -> bool:
        """Whether the GC asks the owner before it deletes (given one, and not its mistake)."""
        return self.bounds.gc_owner and Mistake.GC_WITHOUT_OWNER_WITNESS not in self.mistakes

    def witnessed(self, s: SystemState, slot: int) -> bool:
        """Whether the GC's second witness shows a visible reference naming ``slot``."""
        return self.asks_owner and slot in _shown_slots(self, s.owner)

    def _journal_step(self, txn: JournalTxn, action: LeaseAction) -> JournalTxn:
        """The journal's own rule: fold, then append only a state-changing record."""
        if Mistake.BLIND_TERMINAL_APPEND in self.mistakes:
            return _append(txn, _ACTION_PHASE[action])
        target = lease.step(txn.state, action)
        return _append(txn, target) if target is not txn.state else txn

    def _with_journal(self, s: SystemState, t: int, txn: JournalTxn) -> SystemState:
        return _evolve(s, journal=_put(s.journal, t, txn))

    def _with_owner(self, s: SystemState, t: int, slot: OwnerSlot) -> SystemState:
        return _evolve(s, owner=_put(s.owner, t, slot))

    def _with_file(self, s: SystemState, a: int, slot: FileSlot) -> SystemState:
        return _evolve(s, files=_put(s.files, a, slot))

    def _with_pub(self, s: SystemState, t: int, event: PublisherEvent) -> SystemState:
        pc = self.publisher_machine.step(s.publishers[t], event)
        return _evolve(s, publishers=_put(s.publishers, t, pc))

    def _with_rem(self, s: SystemState, t: int, event: RemoverEvent) -> SystemState:
        pc = self.remover_machine.step(s.removers[t], event)
        return _evolve(s, removers=_put(s.removers, t, pc))

    def _with_recon(  # noqa: PLR0913 - the reconciler's index, its event and its new registers
        self,
        s: SystemState,
        event: ReconcilerEvent,
        txn: int = -1,
        generation: int = 0,
        i: int = 0,
    ) -> SystemState:
        pc = self.reconciler_machine.step(s.reconcilers[i].pc, event)
        if pc is ReconcilerPc.IDLE:
            txn, generation = -1, 0
        return _evolve(s, reconcilers=_put(s.reconcilers, i, Reconciler(pc, txn, generation)))

    @property
    def publisher_machine(self) -> Machine[PublisherPc, PublisherEvent]:
        m = self.mistakes
        key = (Mistake.UNCERTAIN_ERROR_IS_REJECTION in m, Mistake.REPLAYED_TRANSACTION_ID in m)
        return _PUBLISHER_MACHINES[key]

    @property
    def remover_machine(self) -> Machine[RemoverPc, RemoverEvent]:
        if Mistake.RELEASE_BEFORE_REMOVE in self.mistakes:
            return RELEASE_FIRST_REMOVER_MACHINE
        return REMOVER_MACHINE

    @property
    def reconciler_machine(self) -> Machine[ReconcilerPc, ReconcilerEvent]:
        if Mistake.ABORT_BEFORE_TOMBSTONE_DURABLE in self.mistakes:
            return EARLY_ABORT_RECONCILER_MACHINE
        if Mistake.CLIENT_SIDE_GENERATION in self.mistakes:
            return CLIENT_CHECK_RECONCILER_MACHINE
        return RECONCILER_MACHINE

    # ---------------------------------------------------------- successors
    def successors(self, s: SystemState) -> list[tuple[Step, SystemState]]:
        """Every enabled step from ``s`` and the state it leads to.

        The session lock is held from a journal append until its fsync, so while
        any record is volatile no other journal user (prepare, commit, abort,
        release, reconciler, GC) can step: they all take that lock.

        Each actor's moves come through :meth:`_local`, keyed by the part of the
        state that actor reads or writes (its *local view*): the view's key is
        the whole contract, and ``check_moves`` tests it.
        """
        b = self.bounds
        locked = any(txn.unsynced for txn in s.journal)
        local = self._local
        files, journal, owners = s.files, s.journal, s.owner
        key: tuple[object, ...]
        out = local(s, ("externalizer", files, s.counter), self._externalizer)
        if b.lease_expiry:
            out += local(s, ("clock", journal), self._clock)
        for t, pc in enumerate(s.publishers):
            # rejected[t] is only written, but a write of the value already
            # there leaves no delta to replay: the key tells the two apart
            f = files[self.artifact_of(t)]
            key = ("publisher", t, locked, pc, journal[t], f, owners[t], s.rejected[t])
            out += local(s, key, self._publisher, t, locked)
        if locked:
            out.append((_JOURNAL_FSYNC, _evolve(s, journal=tuple(map(_fsynced, journal)))))
        for t, o in enumerate(owners):
            if o.inflight or o.pending_tombstone:
                key = ("owner", t, o, s.publishers[t], s.reconcilers)
                out += local(s, key, self._owner_steps, t)
        if not locked:
            for t, rpc in enumerate(s.removers):
                if rpc is not RemoverPc.IDLE or journal[t].state is LeaseState.COMMITTED:
                    key = ("remover", t, rpc, journal[t], owners[t])
                    out += local(s, key, self._remover, t)
            for i, r in enumerate(s.reconcilers):
                key = ("reconciler", i, r, journal, owners, files)
                out += local(s, key, self._reconciler_steps, i, r)
            out += self._gc(s)
        if b.lost_lease:
            key = ("faults", files, owners, journal, s.removers)
            out += local(s, key, self._faults)
        elif b.foreign_publish:
            out += local(s, ("faults", files, owners, journal), self._faults)
        else:
            out += local(s, ("faults", files), self._faults)
        if b.crashes:
            out.append((_CRASH, self.crash(s)))
        return out

    def _local(
        self,
        s: SystemState,
        key: tuple[object, ...],
        actor: Callable[..., Iterable[tuple[Step, SystemState]]],
        *args: Any,
    ) -> list[tuple[Step, SystemState]]:
        """``actor(s, *args)``'s moves, worked out once per ``key`` and replayed on ``s``.

        ``key`` must hold everything the actor reads or writes: two states
        with one key then get the same moves, as deltas (:func:`_delta`).
        """
        try:
            moves = self._moves[key]
        except KeyError:
            moves = self._moves[key] = tuple(
                (step, _delta(s, nxt)) for step, nxt in actor(s, *args)
            )
        else:
            if self.check_moves:
                replayed = [(step, _apply(s, d)) for step, d in moves]
                if replayed != list(actor(s, *args)):
                    raise StaleMoves(
                        f"{key[0]}: the moves worked out for another state with this key "
                        "differ from this state's own; the key misses something it reads"
                    )
        return [(step, _apply(s, d)) for step, d in moves]

    def _externalizer(self, s: SystemState) -> Iterator[tuple[Step, SystemState]]:
        b, m = self.bounds, self.mistakes
        if Mistake.COUNTER_RESTART_OVERWRITES in m:
            a = s.counter
            if a < b.artifacts:
                f = s.files[a]
                nxt = _evolve(s, counter=a + 1)
                if f.status is FileStatus.NONE:
                    f2 = FileSlot(FILE_MACHINE.step(f.status, FileEvent.WRITE), 1)
                    yield Step(StepKind.EXTERNALIZE, slot=a), self._with_file(nxt, a, f2)
                elif f.content < 2:
                    status = FileStatus.PRESENT if f.exists else FileStatus.VOLATILE
                    f2 = FileSlot(status, f.content + 1)
                    yield Step(StepKind.OVERWRITE, slot=a), self._with_file(nxt, a, f2)
        else:
            for a, f in enumerate(s.files):
                if f.status is FileStatus.NONE:  # exclusive create: the first unused name
                    f2 = FileSlot(FILE_MACHINE.step(f.status, FileEvent.WRITE), 1)
                    yield Step(StepKind.EXTERNALIZE, slot=a), self._with_file(s, a, f2)
                    break
        for a, f in enumerate(s.files):
            if f.status is FileStatus.VOLATILE:
                # complete: the age starts now (the writer touches the file's mtime)
                f2 = _file(f, status=FILE_MACHINE.step(f.status, FileEvent.FSYNC), old=False)
                yield Step(StepKind.FSYNC_ARTIFACT, slot=a), self._with_file(s, a, f2)
                if b.slow_writes and not f.old:
                    yield Step(StepKind.QUIET, slot=a), self._with_file(s, a, _file(f, old=True))
            if f.status is FileStatus.PRESENT and not f.old:
                yield Step(StepKind.TICK, slot=a), self._with_file(s, a, _file(f, old=True))

    def _clock(self, s: SystemState) -> Iterator[tuple[Step, SystemState]]:
        """Now passes a protecting lease's ``retain_until`` (``Bounds.lease_expiry``)."""
        for t, txn in enumerate(s.journal):
            if not txn.expired and lease.protects(txn.state):
                txn2 = txn._replace(expired=True)
                note = f"the lease is {txn.state.value}"
                yield Step(StepKind.EXPIRE, txn=t, note=note), self._with_journal(s, t, txn2)

    def _publisher(
        self, s: SystemState, t: int, locked: bool
    ) -> Iterator[tuple[Step, SystemState]]:
        """Publisher ``t``'s moves; its view: its pc, lease, artifact, owner slot, ghost flag."""
        early = Mistake.PUBLISH_BEFORE_PREPARED_DURABLE in self.mistakes
        pc = s.publishers[t]
        if locked and not (early and pc is PublisherPc.PREPARING):
            return
        txn = s.journal[t]
        a = self.artifact_of(t)
        f = s.files[a]
        if (
            pc is PublisherPc.IDLE
            and txn.state is not LeaseState.NEW
            and Mistake.REPLAYED_TRANSACTION_ID in self.mistakes
        ):
            # idle with a lease on record: a crash restarted it; the id is sent again
            s2 = self._with_owner(s, t, _owner(s.owner[t], inflight=txn.intent))
            yield (
                Step(StepKind.REPLAY, txn=t, note=txn.state.value),
                self._with_pub(s2, t, PublisherEvent.REPLAY),
            )
        elif pc is PublisherPc.IDLE and txn.state is LeaseState.NEW and not txn.lost:
            # under the session lock: the artifact exists, is ours, digest matches
            if f.status is FileStatus.PRESENT and not f.tampered:
                lease.step(txn.state, LeaseAction.PREPARE)
                txn2 = JournalTxn(volatile=(LeaseState.PREPARED,), intent=f.digest)
                s2 = self._with_pub(self._with_journal(s, t, txn2), t, PublisherEvent.PREPARE)
                yield Step(StepKind.PREPARE, txn=t, slot=a), s2
        elif pc is PublisherPc.PREPARING:
            durable = LeaseState.PREPARED in txn.durable
            if durable or (early and LeaseState.PREPARED in txn.records):
                o = s.owner[t]
                s2 = self._with_owner(s, t, _owner(o, inflight=txn.intent))
                yield Step(StepKind.SEND, txn=t), self._with_pub(s2, t, PublisherEvent.SEND)
            # An owner that already holds a record under t's id (another writer's)
            # answers t's publish by its table (NOOP), never by a rejection.
            if durable and not locked and s.owner[t].names < 0:
                s2 = self._with_journal(s, t, self._journal_step(txn, LeaseAction.ABORT))
                s2 = _evolve(s2, rejected=_put(s2.rejected, t, True))
                yield (
                    Step(StepKind.REJECT, txn=t),
                    self._with_pub(s2, t, PublisherEvent.REJECTED),
                )
        elif pc is PublisherPc.ACKED:
            try:
                txn2 = self._journal_step(txn, LeaseAction.COMMIT)
                note = "" if txn2 is not txn else " (already COMMITTED: nothing appended)"
            except IllegalTransition:  # released meanwhile: the journal refuses
                txn2 = txn
                note = f" but the journal refuses it: the lease is {txn.state.value}"
            s2 = self._with_pub(self._with_journal(s, t, txn2), t, PublisherEvent.COMMIT)
            yield Step(StepKind.COMMIT, txn=t, note=note), s2
        elif pc is PublisherPc.FAILED:  # the mistake's ``except``: no evidence, still ABORTED
            try:
                txn2 = self._journal_step(txn, LeaseAction.ABORT)
                note = "" if txn2 is not txn else " (already ABORTED: nothing appended)"
            except IllegalTransition:  # committed meanwhile: the journal refuses
                txn2 = txn
                note = f" but the journal refuses it: the lease is {txn.state.value}"
            s2 = self._with_journal(s, t, txn2)
            s2 = self._with_pub(s2, t, PublisherEvent.ABORT_ON_ERROR)
            yield Step(StepKind.ABORT_ON_ERROR, txn=t, note=note), s2

    def _owner_steps(self, s: SystemState, t: int) -> Iterator[tuple[Step, SystemState]]:
        """The owner's moves for id ``t``; its view: the slot, t's publisher, the reconcilers."""
        b = self.bounds
        o = s.owner[t]
        if o.inflight:
            waiting = s.publishers[t] is PublisherPc.SENT
            cleared = _owner(o, inflight=0)
            if o.pending_tombstone:
                result = OwnerResult.REFUSED
                record = o.record
            else:
                record, result = owner.apply(o.record, OwnerAction.PUBLISH, o.inflight)
            if record.generation > b.max_generation:
                return
            s2 = self._with_owner(s, t, _owner(cleared, record=record))
            if result is OwnerResult.REFUSED:
                s3 = self._with_pub(s2, t, PublisherEvent.ERROR) if waiting else s2
                yield Step(StepKind.REFUSE, txn=t), s3
            else:
                note = f"generation {record.generation}"
                s3 = self._with_pub(s2, t, PublisherEvent.ACK) if waiting else s2
                yield Step(StepKind.APPLY_ACK, txn=t, note=note), s3
                if b.lost_acks:
                    s3 = self._with_pub(s2, t, PublisherEvent.ERROR) if waiting else s2
                    yield Step(StepKind.APPLY_LOST_ACK, txn=t), s3
            if b.lost_acks:
                s3 = self._with_owner(s, t, cleared)
                s3 = self._with_pub(s3, t, PublisherEvent.ERROR) if waiting else s3
                yield Step(StepKind.DROP, txn=t), s3
        if o.pending_tombstone:
            if (
                o.record.state is OwnerState.PUBLISHED
                and Mistake.CLIENT_SIDE_GENERATION in self.mistakes
            ):
                # only an unconditional write gets here (client-side-generation): the
                # tombstone lands beside the reference, which the owner keeps showing
                record = o.record
            else:
                record, _ = owner.apply(o.record, OwnerAction.SEAL)
            if record.generation > b.max_generation:
                return
            s2 = self._with_owner(s, t, _owner(o, record=record, pending_tombstone=False))
            for i, r in enumerate(s2.reconcilers):
                if r.pc is ReconcilerPc.SEALING and r.txn == t:
                    s2 = self._with_recon(s2, ReconcilerEvent.TOMBSTONE_DURABLE, t, r.generation, i)
            yield Step(StepKind.TOMBSTONE_DURABLE, txn=t), s2

    def _remover(self, s: SystemState, t: int) -> Iterator[tuple[Step, SystemState]]:
        """Remover ``t``'s moves; its view: its pc, t's lease and owner slot."""
        b = self.bounds
        first = Mistake.RELEASE_BEFORE_REMOVE in self.mistakes
        pc = s.removers[t]
        txn = s.journal[t]
        o = s.owner[t]
        if pc is RemoverPc.IDLE and txn.state is LeaseState.COMMITTED:
            if first:
                s2 = self._with_journal(s, t, self._journal_step(txn, LeaseAction.RELEASE))
                yield (
                    Step(StepKind.RELEASE_FIRST, txn=t),
                    self._with_rem(s2, t, RemoverEvent.RELEASE_FIRST),
                )
                return
            record, result = owner.apply(o.record, OwnerAction.REMOVE)
            if record.generation > b.max_generation:
                return
            s2 = self._with_owner(s, t, _owner(o, record=record))
            note = "" if result is OwnerResult.APPLIED else " (already gone: no-op)"
            yield (
                Step(StepKind.REMOVE_ACK, txn=t, note=note),
                self._with_rem(s2, t, RemoverEvent.REMOVE_ACK),
            )
            if b.lost_acks:
                yield (
                    Step(StepKind.REMOVE_LOST_ACK, txn=t),
                    self._with_rem(s2, t, RemoverEvent.REMOVE_ERROR),
                )
        elif pc is RemoverPc.REMOVED:
            s2 = self._with_journal(s, t, self._journal_step(txn, LeaseAction.RELEASE))
            yield Step(StepKind.RELEASE, txn=t), self._with_rem(s2, t, RemoverEvent.RELEASE)
        elif pc is RemoverPc.RELEASED_FIRST:
            record, _ = owner.apply(o.record, OwnerAction.REMOVE)
            s2 = self._with_owner(s, t, _owner(o, record=record))
            yield (
                Step(StepKind.REMOVE_AFTER, txn=t),
                self._with_rem(s2, t, RemoverEvent.REMOVE_AFTER),
            )

    def _reconciler_steps(  # noqa: C901 - one branch per program counter
        self, s: SystemState, i: int, r: Reconciler
    ) -> Iterator[tuple[Step, SystemState]]:
        m = self.mistakes
        if r.pc is ReconcilerPc.IDLE:
            for t, txn in enumerate(s.journal):
                if txn.state is not LeaseState.PREPARED:
                    continue
                o = s.owner[t]
                obs = owner.observe(o.record, txn.intent)
                if o.names >= 0:  # another artifact: the identity differs whatever the digest
                    obs = attrs.evolve(obs, identity_matches=False)
                kind = classify_observation(obs)
                d = decide(txn.state, kind)
                if d.record_observed:
                    yield self._conflict(s, t, kind, d, i)
                elif d.seal_first and Mistake.NOT_FOUND_IS_ABSENT not in m:
                    s2 = self._with_recon(s, ReconcilerEvent.OBSERVE_ABSENT, t, obs.generation, i)
                    note = f"ABSENT, not sealed, generation {obs.generation}"
                    yield Step(StepKind.OBSERVE, txn=t, note=note, by=i), s2
                elif d.journal_action is not None:
                    s2 = self._with_journal(s, t, self._journal_step(txn, d.journal_action))
                    s2 = self._with_recon(s2, ReconcilerEvent.RESOLVE, i=i)
                    note = (
                        f"{kind.value} -> appends {lease.step(txn.state, d.journal_action).value}"
                    )
                    yield Step(StepKind.OBSERVE, txn=t, note=note, by=i), s2
                else:
                    note = f"{kind.value} -> {d.status.value}"
                    yield Step(StepKind.OBSERVE, txn=t, note=note, by=i), s
                if self.bounds.unknown:
                    note = f"{ObservationKind.UNKNOWN.value} -> pending_unknown"
                    yield Step(StepKind.OBSERVE, txn=t, note=note, by=i), s
        elif r.pc is ReconcilerPc.OBSERVED:
            t = r.txn
            o = s.owner[t]
            if Mistake.CLIENT_SIDE_GENERATION in m:
                if o.record.generation == r.generation:
                    s2 = self._with_recon(s, ReconcilerEvent.CHECK_GENERATION, t, r.generation, i)
                    yield Step(StepKind.CHECK_GENERATION, txn=t, note=str(r.generation), by=i), s2
                    return
                result = SealResult.STALE
            elif o.pending_tombstone:  # another seal is being written: this CAS loses
                result = SealResult.STALE
            else:
                _, result = owner.seal(o.record, r.generation)
            if after_seal(result).journal_action is None:
                note = f"the generation is {o.record.generation}, not {r.generation}"
                yield (
                    Step(StepKind.STALE, txn=t, note=note, by=i),
                    self._with_recon(s, ReconcilerEvent.STALE, i=i),
                )
            elif result is SealResult.SEALED:
                s2 = self._with_owner(s, t, _owner(o, pending_tombstone=True))
                s2 = self._with_recon(s2, ReconcilerEvent.SEAL, t, r.generation, i)
                yield Step(StepKind.SEAL, txn=t, note=str(r.generation), by=i), s2
            elif Mistake.ALREADY_SEALED_APPENDS_BLINDLY in m:
                # the answer taken as licence: ABORTED appended at once, unfolded
                s2 = self._with_journal(s, t, _append(s.journal[t], LeaseState.ABORTED))
                s2 = self._with_recon(s2, ReconcilerEvent.FOUND_SEALED, t, r.generation, i)
                s2 = self._with_recon(s2, ReconcilerEvent.APPEND_ABORTED, i=i)
                note = ", and it appends ABORTED at once, without folding the lease"
                yield Step(StepKind.FOUND_SEALED, txn=t, note=note, by=i), s2
            else:  # sealed by another reconciler: abort (through the fold), no second seal
                s2 = self._with_recon(s, ReconcilerEvent.FOUND_SEALED, t, r.generation, i)
                yield Step(StepKind.FOUND_SEALED, txn=t, by=i), s2
        elif r.pc is ReconcilerPc.CHECKED:
            t = r.txn
            o = s.owner[t]
            s2 = self._with_owner(s, t, _owner(o, pending_tombstone=True))
            s2 = self._with_recon(s2, ReconcilerEvent.WRITE_TOMBSTONE, t, r.generation, i)
            note = (
                f" (the owner now shows {o.record.state.value}, generation {o.record.generation})"
            )
            yield Step(StepKind.WRITE_TOMBSTONE, txn=t, note=note, by=i), s2
        elif r.pc is ReconcilerPc.RECORDING:
            # reached only once the CONFLICT record is durable: the lock held
            # every journal user back until the fsync, and a crash resets the pc
            t = r.txn
            slot = s.journal[t].conflict
            o = s.owner[t]
            s2 = self._with_owner(s, t, _owner(o, reported=self._reportable(s, slot, o)))
            yield (
                Step(StepKind.REPORT_CONFLICT, txn=t, slot=slot, by=i),
                self._with_recon(s2, ReconcilerEvent.REPORT_CONFLICT, i=i),
            )
        else:
            t = r.txn
            key = (r.pc, ReconcilerEvent.APPEND_ABORTED)
            if key in self.reconciler_machine.table:
                txn = s.journal[t]
                note = ""
                if (txn.state, LeaseAction.ABORT) in lease.LEASE_TRANSITIONS:
                    txn2 = self._journal_step(txn, LeaseAction.ABORT)
                    if txn2 is txn:
                        note = " (already ABORTED: the fold appends nothing)"
                else:  # the journal refuses ABORTED after COMMITTED
                    txn2 = txn
                    note = f" (refused: the lease is {txn.state.value})"
                s2 = self._with_journal(s, t, txn2)
                yield (
                    Step(StepKind.ABORT, txn=t, note=note, by=i),
                    self._with_recon(s2, ReconcilerEvent.APPEND_ABORTED, i=i),
                )

    @staticmethod
    def _reportable(s: SystemState, slot: int, o: OwnerSlot) -> int:
        """The ghost's new value: S1 speaks of an artifact the report found present.

        One deleted before toolswap could know of the foreign reference was lost
        to the other writer, not to a rule of ours.
        """
        return slot if s.files[slot].status is not FileStatus.DELETED else o.reported

    def _conflict(  # noqa: PLR0913 - the reconciler's index last
        self, s: SystemState, t: int, kind: ObservationKind, d: Decision, i: int = 0
    ) -> tuple[Step, SystemState]:
        """Row 2: journal the observed identity, report once durable (see :mod:`reconcile`)."""
        o, txn = s.owner[t], s.journal[t]
        slot = o.names if o.names >= 0 else self.artifact_of(t)
        digest = o.record.digest
        head = f"{kind.value} ({artifact_name(slot)}) -> {d.status.value}"
        if Mistake.CONFLICT_LEAVES_OBSERVED_UNPROTECTED in self.mistakes:
            s2 = self._with_owner(s, t, _owner(o, reported=self._reportable(s, slot, o)))
            s2 = self._with_recon(s2, ReconcilerEvent.RESOLVE, i=i)
            note = f"{head}, reported, nothing journalled"
            return Step(StepKind.OBSERVE, txn=t, note=note, by=i), s2
        if (txn.conflict, txn.conflict_digest) == (slot, digest):
            # already journalled (and durable: nothing is volatile here): report again
            s2 = self._with_owner(s, t, _owner(o, reported=self._reportable(s, slot, o)))
            s2 = self._with_recon(s2, ReconcilerEvent.RESOLVE, i=i)
            return Step(StepKind.OBSERVE, txn=t, note=f"{head}, already journalled", by=i), s2
        txn2 = JournalTxn(txn.durable, txn.volatile, txn.intent, slot, digest, True, txn.expired)
        s2 = self._with_journal(s, t, txn2)
        s2 = self._with_recon(s2, ReconcilerEvent.RECORD_CONFLICT, t, i=i)
        note = f"{head}: appends CONFLICT naming it (not yet fsynced)"
        return Step(StepKind.OBSERVE, txn=t, note=note, by=i), s2

    def _gc(self, s: SystemState) -> Iterator[tuple[Step, SystemState]]:
        # the owner enters only through what the witness reads: which artifacts it shows
        asks = s.gc_plan is not None and self.asks_owner
        shown = _shown_slots(self, s.owner) if asks else ()
        key = (s.gc_plan, s.files, s.journal, s.outside_touched, shown)
        try:
            found = self._gc_steps[key]
        except KeyError:
            found = self._gc_steps[key] = next(self._gc_step(s), None)
        if found is not None:
            step, after = found
            yield (
                step,
                _evolve(
                    s,
                    files=after.files,
                    gc_plan=after.gc_plan,
                    outside_touched=after.outside_touched,
                ),
            )

    def _gc_step(self, s: SystemState) -> Iterator[tuple[Step, SystemState]]:
        """The GC's one enabled step: it reads and writes only the fields ``_gc`` keys on."""
        m = self.mistakes
        if s.gc_plan is None:
            targets: list[PlanTarget] = []
            touched = s.outside_touched
            planned = 0
            policy = cleanup.Policy(orphan_ttl_seconds=TTL, max_deletions=self.bounds.max_deletions)
            for a, f in enumerate(s.files):
                facts = self.facts_of(f)
                claims = self.claims_for(s, a)
                if facts is None:
                    continue
                if Mistake.GC_IGNORES_WRITER in m:
                    facts = facts._replace(writing=False)
                if Mistake.GC_IGNORES_DIGEST_CONFLICT in m:
                    claims = tuple(k for k in claims if k.digest == facts.digest)
                status = cleanup.classify(facts, claims, policy, NOW, planned)
                if status is cleanup.PlanStatus.PLANNED_DELETE:
                    planned += 1
                    targets.append(PlanTarget(TargetKind.ARTIFACT, a, facts))
            if self.bounds.foreign_entry:
                link = cleanup.EntryFacts(kind=cleanup.EntryKind.SYMLINK)
                if Mistake.GC_FOLLOWS_UNKNOWN_ENTRIES in m:
                    touched = True  # hashing the entry reads the file outside
                    targets.append(PlanTarget(TargetKind.FOREIGN_ENTRY, 0))
                else:
                    denied = cleanup.classify(link, (), policy, NOW, planned)
                    assert denied is cleanup.PlanStatus.DENIED
            if Mistake.GC_TRUSTS_MEMORY_PATH in m:
                for t, txn in enumerate(s.journal):
                    if txn.state is LeaseState.RELEASED:
                        targets.append(PlanTarget(TargetKind.MEMORY_PATH, t))
            if targets:
                names = ", ".join(_target_name(self, x) for x in targets)
                s2 = _evolve(s, gc_plan=tuple(targets), outside_touched=touched)
                GC_MACHINE.step(GcPc.IDLE, GcEvent.PLAN)
                yield Step(StepKind.GC_PLAN, note=f"planned_delete {names}"), s2
        else:
            s2 = _evolve(s, gc_plan=None)
            done: list[str] = []
            asks = self.asks_owner
            shown = _shown_slots(self, s.owner) if asks else ()
            for x in s.gc_plan:
                if x.kind is TargetKind.ARTIFACT:
                    a = x.index
                    f = s2.files[a]
                    current = self.facts_of(f)
                    if Mistake.GC_IGNORES_WRITER in m and current is not None:
                        current = current._replace(writing=False)
                    if not asks:
                        witness = cleanup.Witness.NOT_ASKED
                    elif a in shown:
                        witness = cleanup.Witness.SHOWN
                    else:
                        witness = cleanup.Witness.NONE
                    claims = self.claims_for(s2, a)
                    if Mistake.GC_IGNORES_DIGEST_CONFLICT in m and current is not None:
                        claims = tuple(k for k in claims if k.digest == current.digest)
                    if Mistake.GC_SKIPS_REVALIDATION in m:
                        outcome = (
                            cleanup.ApplyStatus.DELETED
                            if f.exists
                            else cleanup.ApplyStatus.ALREADY_MISSING
                        )
                    else:
                        assert x.facts is not None
                        outcome = cleanup.revalidate(x.facts, current, claims, NOW, witness=witness)
                    if outcome is cleanup.ApplyStatus.DELETED:
                        s2 = self._with_file(s2, a, _deleted(f))
                    done.append(f"{artifact_name(a)} {outcome.value}")
                elif x.kind is TargetKind.FOREIGN_ENTRY:
                    s2 = _evolve(s2, outside_touched=True)
                    done.append("deleted the symlink's target outside tool-results/")
                else:
                    t = x.index
                    if t == self.hostile_txn:
                        s2 = _evolve(s2, outside_touched=True)
                        done.append(f"deleted {txn_name(t)}'s Memory artifact_path ../../outside")
                    else:
                        a = self.artifact_of(t)
                        f = s2.files[a]
                        if f.exists:
                            s2 = self._with_file(s2, a, _deleted(f))
                        done.append(
                            f"deleted {txn_name(t)}'s Memory artifact_path {artifact_name(a)}"
                        )
            GC_MACHINE.step(GcPc.PLANNED, GcEvent.APPLY)
            yield Step(StepKind.GC_APPLY, note="; ".join(done)), s2

    def _faults(self, s: SystemState) -> Iterator[tuple[Step, SystemState]]:
        """Faults from outside toolswap (a crash aside); their view: the files (and the
        owner and journal, for a foreign publish)."""
        b = self.bounds
        if b.tamper:
            for a, f in enumerate(s.files):
                if f.status is FileStatus.PRESENT and not f.tampered:
                    yield (
                        Step(StepKind.TAMPER, slot=a),
                        self._with_file(s, a, _file(f, tampered=True)),
                    )
        if Mistake.DELETE_FOLDER_AT_SESSION_END in self.mistakes and any(f.exists for f in s.files):
            files = tuple(_deleted(f) if f.exists else f for f in s.files)
            yield Step(StepKind.SESSION_END), _evolve(s, files=files)
        if b.foreign_publish:
            yield from self._foreign_publishes(s)
        if b.lost_lease:
            yield from self._lost_leases(s)

    def _lost_leases(self, s: SystemState) -> Iterator[tuple[Step, SystemState]]:
        """The journal loses a settled lease whose reference the owner shows.

        Only a COMMITTED lease whose publish is done (nothing in flight, no
        removal under way): a lease lost while its publish may still land is
        beyond any witness (docs/design.md section 5 says so).
        """
        for t, txn in enumerate(s.journal):
            if txn.durable_state is not LeaseState.COMMITTED or txn.unsynced:
                continue
            o = s.owner[t]
            if o.inflight or o.record.state is not OwnerState.PUBLISHED:
                continue
            if s.removers[t] is not RemoverPc.IDLE:
                continue
            yield Step(StepKind.LOSE_LEASE, txn=t), self._with_journal(s, t, JournalTxn(lost=True))

    def _foreign_publishes(self, s: SystemState) -> Iterator[tuple[Step, SystemState]]:
        """Another writer publishes t's id (absent, unsealed) naming another present artifact.

        Only while t's lease is durably PREPARED: toolswap mints the id in that
        record, so nobody knows it earlier (S2 stays a rule about our publisher),
        and this is the window reconciliation is for.
        """
        for t, o in enumerate(s.owner):
            if o.record.state is not OwnerState.ABSENT or o.pending_tombstone:
                continue
            if s.journal[t].durable_state is not LeaseState.PREPARED:
                continue
            if o.record.generation + 1 > self.bounds.max_generation:
                continue
            for a, f in enumerate(s.files):
                if a == self.artifact_of(t) or f.status is not FileStatus.PRESENT:
                    continue
                record, _ = owner.apply(o.record, OwnerAction.PUBLISH, f.digest)
                s2 = self._with_owner(s, t, _owner(o, record=record, names=a))
                note = str(record.generation)
                yield Step(StepKind.FOREIGN_PUBLISH, txn=t, slot=a, note=note), s2

    def crash(self, s: SystemState) -> SystemState:
        """Keep only durable state, then recover: the journal is re-read, every actor restarts."""
        n = self.bounds.transactions
        return _evolve(
            s,
            files=self._crash_part(s.files, _crash_file),
            journal=self._crash_part(s.journal, _crash_journal),
            owner=self._crash_part(s.owner, _crash_owner),
            publishers=(PUBLISHER_MACHINE.initial,) * n,
            removers=(REMOVER_MACHINE.initial,) * n,
            reconcilers=(Reconciler(),) * len(s.reconcilers),
            gc_plan=None,
            counter=0,
        )

    def _crash_part(self, part: tuple[Any, ...], keep: Any) -> Any:
        try:
            return self._crashed[part]
        except KeyError:
            kept = self._crashed[part] = tuple(keep(x) for x in part)
            return kept


def _crash_file(f: FileSlot) -> FileSlot:
    return FileSlot() if f.status is FileStatus.VOLATILE else f


def _crash_journal(txn: JournalTxn) -> JournalTxn:
    return JournalTxn(
        txn.durable,
        (),
        txn.intent if txn.durable else 0,
        *((-1, 0) if txn.conflict_volatile else (txn.conflict, txn.conflict_digest)),
        False,
        txn.expired and bool(txn.durable),  # time does not go back; a lost lease has none
        txn.lost,
    )


def _shown_slots(model: Model, owners: tuple[OwnerSlot, ...]) -> tuple[int, ...]:
    """The artifact slots a visible reference in the owner names, in order."""
    return tuple(
        sorted(
            {
                o.names if o.names >= 0 else model.artifact_of(t)
                for t, o in enumerate(owners)
                if o.record.state is OwnerState.PUBLISHED
            }
        )
    )


def _crash_owner(o: OwnerSlot) -> OwnerSlot:
    return _owner(o, pending_tombstone=False) if o.pending_tombstone else o


def _target_name(model: Model, target: PlanTarget) -> str:
    if target.kind is TargetKind.ARTIFACT:
        return artifact_name(target.index)
    if target.kind is TargetKind.FOREIGN_ENTRY:
        return "the symlink tool_result_900.txt (followed to its target outside)"
    return f"{txn_name(target.index)}'s Memory artifact_path"
