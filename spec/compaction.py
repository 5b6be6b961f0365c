"""Journal compaction: the live leases move into a snapshot, settled history leaves the file.

A self-contained model of issue 38 (item 1).  It is not wired into
:mod:`system`, :mod:`variants` or :mod:`catalogue` yet: it has its own small
explorer (:func:`explore`), its own invariants (:class:`Check`, C1-C4, each
serving some of S1-S7) and its own mistakes (:class:`Mistake`).

Rules
=====

Files (what a crash keeps is *durable*; everything else is lost):

* **journal files** (segments), numbered by the checkpoint they chain from
  (0: the first file, chained from nothing).  Each record names the head
  before it, so a file verifies from the head it starts at.  A file is
  ``PRESENT`` under its live name, ``ARCHIVED`` (renamed aside) or ``GONE``
  (unlinked).  Creating one is durable in one step (create, fsync, directory
  fsync), as the journal's open is today.
* **snapshot**: the live leases (PREPARED and COMMITTED, with their states)
  at the head the checkpoint names.  Written, then fsynced.
* **checkpoint log**: never compacted; checkpoint ``k`` names its snapshot and
  the chain head it covers (its record count).  Appended, then fsynced.
* **anchor**: a durable count that only grows: the records the journal is
  known to hold *in total*, checkpointed plus tail.  It is raised with every
  append, so it follows the checkpoint chain, never one file.

The compaction actor's steps, in this order (:data:`COMPACTION_TRANSITIONS`):

1. write the snapshot (not durable);  2. fsync it;
3. write checkpoint ``k`` into the checkpoint log (not durable);  4. fsync it;
5. start file ``k``, chained from checkpoint ``k``'s head;
6. rename the old files to the archive;  7. unlink them, or keep the archive
   (the user's choice; keeping is the default).

The session lock is held from step 1 until step 5 (as every journal writer
holds it from append to fsync), so no record is appended after the head the
checkpoint names and before the next file starts.  The snapshot keeps a lease
only when its state is live (``lease.protects``): a PREPARED lease is not
settled, whatever else it has.

Recovery reads the last durable checkpoint, its snapshot and the tail: the
newest live file chained from that checkpoint (or, if the next file was not
started, the old file, which must end exactly at the checkpoint's head).  It
refuses (fails closed, nothing is guessed):

* a file chained from a checkpoint the log does not hold (if it has records),
* no file that chains from the last checkpoint, or a snapshot not durable,
* a record that names another head than the one before it, or one that is
  not a state-changing transition of its lease (as :func:`lease.replay`),
* an anchor above the record count it can show (checkpoint head + tail).

A recovery that finds a checkpoint whose next file was never started starts
it (a crash between steps 4 and 5).  Faults: a crash at any point (the
compaction restarts from step 1; a snapshot or checkpoint not fsynced is
lost); with ``Bounds.rollback``, someone with write access restores an older
checkpoint log and the journal file that went with it (a backup, or the
archive).  Publishers append between compaction steps (outside the lock):
each append is one state-changing lease transition (:func:`lease.step`), made
durable before the caller hears back, with the anchor raised with it; the lease
lifecycle bounds them (at most three records per transaction id).

Every other (program counter, step) pair is illegal: the key is missing from
the table and :func:`step` raises :class:`~errors.IllegalTransition`.

Invariants (:class:`Check`), checked in every reachable state on what a
recovery would read from the durable state there (a crash may come anywhere):

* **C1 live leases kept** (S1, S2): without an attacker, an accepted recovery
  shows exactly the live leases (PREPARED and COMMITTED, with their states)
  that the journal acknowledged: those before compaction plus those appended
  after.
* **C2 chain verifies from the checkpoint** (S6): without an attacker,
  recovery never refuses for the chain: the tail chains from the last durable
  checkpoint, whose snapshot is durable.
* **C3 anchor supported** (S6, S1): without an attacker the anchor never
  exceeds what recovery can show; after a rollback, recovery refuses or shows
  the live leases exactly (a rolled-back journal is never silently accepted).
* **C4 live evidence durable** (S1, S2): every live lease's current state is
  in a live journal file or in the durable snapshot of a durable checkpoint:
  no record a live lease needs is only in the archive, or nowhere.

Theory of operation
===================

The model is small on purpose: two transaction ids with the lease lifecycle of
:mod:`lease`, at most two compactions, one crash kind, one attack.  A record
(:class:`Record`) names the head before it; a record count stands for the hash
(the head after ``n`` records is ``n``), so a file verifies from a checkpoint
when it starts at that checkpoint's head and each record names the one before.
``truth`` is a ghost: the fold of every acknowledged append, which no actor
reads.  After a rollback the model stops (the state has no successors): what
matters is what the next recovery accepts.  The mistakes (:class:`Mistake`)
switch one rule off; each is found by :func:`explore` with a shortest trace.

Abstractions: an append is durable in one step (the real journal raises its
anchor every few records, a lag outside this model); the attacker does not
lower the anchor (who can write the anchor can hide any loss, docs/design.md
section 5); old snapshots are never removed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import NamedTuple

import attrs

from . import lease
from .errors import BadBounds, IllegalTransition
from .identity_enum import IdentityEnum
from .invariants import Invariant
from .lease import LeaseAction, LeaseState

__all__ = [
    "Mistake",
    "Bounds",
    "Where",
    "Pc",
    "CompactionStep",
    "COMPACTION_TRANSITIONS",
    "EARLY_REMOVAL_TRANSITIONS",
    "LOCK_HELD",
    "Record",
    "Segment",
    "Checkpoint",
    "State",
    "StepKind",
    "Step",
    "Refusal",
    "Recovered",
    "Check",
    "SERVES",
    "MISTAKE_BREAKS",
    "mistake_names",
    "Model",
    "Violation",
    "Report",
    "step",
    "recover",
    "findings",
    "explore",
]


class Mistake(IdentityEnum):
    """One compaction rule switched off."""

    REMOVE_BEFORE_CHECKPOINT_DURABLE = "old file removed before the checkpoint is durable"
    SNAPSHOT_WITHOUT_SETTLED_CHECK = "snapshot drops a PREPARED lease as if it were settled"
    CHECKPOINT_NOT_ANCHORED = "the anchor counts the live file, not the checkpoint chain"


@attrs.frozen
class Bounds:
    """Exploration bounds."""

    transactions: int = 2
    compactions: int = 2
    crashes: bool = True
    rollback: bool = True

    def __attrs_post_init__(self) -> None:
        if not 1 <= self.transactions <= 3:
            raise BadBounds("transactions must be 1..3")
        if not 1 <= self.compactions <= 3:
            raise BadBounds("compactions must be 1..3")


class Where(IdentityEnum):
    """Where a journal file is."""

    PRESENT = "present"
    ARCHIVED = "archived"
    GONE = "gone"


class Pc(IdentityEnum):
    """The compaction actor's program counter: the last step it completed."""

    IDLE = "idle"
    SNAPSHOT_WRITTEN = "snapshot written"
    SNAPSHOT_DURABLE = "snapshot durable"
    CHECKPOINT_WRITTEN = "checkpoint written"
    CHECKPOINT_DURABLE = "checkpoint durable"
    NEXT_STARTED = "next file started"
    ARCHIVED = "old files archived"
    OLD_RETIRED = "old files retired"  # only the early-removal mistake's table reaches it


class CompactionStep(IdentityEnum):
    """One step of the compaction actor."""

    WRITE_SNAPSHOT = "write snapshot"
    FSYNC_SNAPSHOT = "fsync snapshot"
    WRITE_CHECKPOINT = "write checkpoint"
    FSYNC_CHECKPOINT = "fsync checkpoint"
    START_NEXT = "start next file"
    ARCHIVE_OLD = "archive old files"
    UNLINK_OLD = "unlink archived files"
    KEEP_OLD = "keep archived files"


_P = Pc
_C = CompactionStep

#: (pc, step) -> next pc: the correct order.  A missing key is an illegal transition.
COMPACTION_TRANSITIONS: Mapping[tuple[Pc, CompactionStep], Pc] = MappingProxyType(
    {
        (_P.IDLE, _C.WRITE_SNAPSHOT): _P.SNAPSHOT_WRITTEN,
        (_P.SNAPSHOT_WRITTEN, _C.FSYNC_SNAPSHOT): _P.SNAPSHOT_DURABLE,
        (_P.SNAPSHOT_DURABLE, _C.WRITE_CHECKPOINT): _P.CHECKPOINT_WRITTEN,
        (_P.CHECKPOINT_WRITTEN, _C.FSYNC_CHECKPOINT): _P.CHECKPOINT_DURABLE,
        (_P.CHECKPOINT_DURABLE, _C.START_NEXT): _P.NEXT_STARTED,
        (_P.NEXT_STARTED, _C.ARCHIVE_OLD): _P.ARCHIVED,
        (_P.ARCHIVED, _C.UNLINK_OLD): _P.IDLE,
        (_P.ARCHIVED, _C.KEEP_OLD): _P.IDLE,
    }
)

#: Mistake (a): the next file starts and the old one goes while the checkpoint is in the cache.
EARLY_REMOVAL_TRANSITIONS: Mapping[tuple[Pc, CompactionStep], Pc] = MappingProxyType(
    {
        (_P.IDLE, _C.WRITE_SNAPSHOT): _P.SNAPSHOT_WRITTEN,
        (_P.SNAPSHOT_WRITTEN, _C.FSYNC_SNAPSHOT): _P.SNAPSHOT_DURABLE,
        (_P.SNAPSHOT_DURABLE, _C.WRITE_CHECKPOINT): _P.CHECKPOINT_WRITTEN,
        (_P.CHECKPOINT_WRITTEN, _C.START_NEXT): _P.NEXT_STARTED,
        (_P.NEXT_STARTED, _C.ARCHIVE_OLD): _P.ARCHIVED,
        (_P.ARCHIVED, _C.UNLINK_OLD): _P.OLD_RETIRED,
        (_P.ARCHIVED, _C.KEEP_OLD): _P.OLD_RETIRED,
        (_P.OLD_RETIRED, _C.FSYNC_CHECKPOINT): _P.IDLE,
    }
)

#: Program counters at which the compaction holds the session lock: no append.
LOCK_HELD: frozenset[Pc] = frozenset(
    {_P.SNAPSHOT_WRITTEN, _P.SNAPSHOT_DURABLE, _P.CHECKPOINT_WRITTEN, _P.CHECKPOINT_DURABLE}
)


def step(
    pc: Pc,
    action: CompactionStep,
    table: Mapping[tuple[Pc, CompactionStep], Pc] = COMPACTION_TRANSITIONS,
) -> Pc:
    """The pc after ``action``; raises :class:`IllegalTransition` if the table has no key."""
    try:
        return table[(pc, action)]
    except KeyError:
        raise IllegalTransition("compaction", pc, action) from None


class Record(NamedTuple):
    """A journal record: the head before it (its chain link), its transaction, its phase."""

    prev: int
    txn: int
    phase: LeaseState


#: A snapshot: (transaction, state) for each lease it keeps, by transaction.
Leases = tuple[tuple[int, LeaseState], ...]


class Segment(NamedTuple):
    """One journal file: the checkpoint it chains from, the head it starts at, its records."""

    base: int
    start: int
    records: tuple[Record, ...] = ()
    where: Where = Where.PRESENT

    @property
    def end(self) -> int:
        """The head after its last record."""
        return self.start + len(self.records)


class Checkpoint(NamedTuple):
    """A checkpoint record: the head it covers and its snapshot's leases."""

    head: int
    snapshot: Leases
    snapshot_durable: bool


class State(NamedTuple):
    """The whole model; ``truth`` and ``attacked`` are ghosts no actor reads."""

    segments: tuple[Segment, ...]
    checkpoints: tuple[Checkpoint, ...] = ()  # durable
    pending_checkpoint: Checkpoint | None = None  # written, not fsynced
    snapshot: Leases | None = None  # written, not referenced by a durable checkpoint
    snapshot_durable: bool = False
    anchor: int = 0
    records: int = 0  # the head of the whole chain: records appended so far
    pc: Pc = Pc.IDLE
    truth: tuple[LeaseState, ...] = ()
    attacked: bool = False


class StepKind(IdentityEnum):
    """Every kind of step, with the sentence :meth:`Step.describe` fills in."""

    WRITE_SNAPSHOT = "compaction writes snapshot {k} of the live leases {note} (not yet fsynced)"
    FSYNC_SNAPSHOT = "compaction fsyncs snapshot {k}"
    WRITE_CHECKPOINT = "compaction appends checkpoint {k} (head {note}) to the checkpoint log"
    FSYNC_CHECKPOINT = "compaction fsyncs the checkpoint log: checkpoint {k} is durable"
    START_NEXT = "compaction starts journal file {k}, chained from checkpoint {k}'s head{note}"
    ARCHIVE_OLD = "compaction renames the older journal files to the archive"
    UNLINK_OLD = "compaction unlinks the archived journal files"
    KEEP_OLD = "compaction keeps the archived journal files (the default)"
    APPEND = "publisher appends {note} for t{t} (durable; anchor raised)"
    CRASH = "CRASH: only durable files survive; recovery restarts the compaction{note}"
    ROLLBACK = (
        "attack: someone restores the checkpoint log with {k} checkpoint(s) and journal "
        "file {k} as the live file"
    )


class Step(NamedTuple):
    """One labelled transition."""

    kind: StepKind
    k: int = -1
    txn: int = -1
    note: str = ""

    def describe(self) -> str:
        return self.kind.value.format(k=self.k, t=self.txn + 1, note=self.note)


class Refusal(IdentityEnum):
    """Why a recovery refuses the journal (it then shows nothing: fail closed)."""

    CHAIN = "chain"  # no tail chains from the last checkpoint, or its snapshot is lost
    ANCHOR = "anchor"  # the anchor is above what the journal can show


@attrs.frozen
class Recovered:
    """What recovery reads from the durable state: the leases it shows, or a refusal."""

    refusal: Refusal | None
    reason: str = ""
    leases: Mapping[int, LeaseState] = attrs.field(factory=dict)
    shown: int = 0

    def live(self) -> dict[int, LeaseState]:
        return {t: s for t, s in self.leases.items() if lease.protects(s)}


def _live_segment(state: State) -> Segment | None:
    """The newest live file a recovery may read (chained from a checkpoint the log holds)."""
    usable = [
        s for s in state.segments if s.where is Where.PRESENT and s.base <= len(state.checkpoints)
    ]
    return max(usable, key=lambda s: s.base) if usable else None


def recover(state: State, mistakes: frozenset[Mistake] = frozenset()) -> Recovered:
    """Recovery from the durable state: last checkpoint, its snapshot, the tail."""
    c = len(state.checkpoints)
    last = state.checkpoints[-1] if c else None
    head = last.head if last is not None else 0
    for s in state.segments:
        if s.where is Where.PRESENT and s.base > c and s.records:
            return Recovered(Refusal.CHAIN, f"file {s.base} chains from a checkpoint the log lacks")
    if last is not None and not last.snapshot_durable:
        return Recovered(Refusal.CHAIN, f"checkpoint {c} names a snapshot that is not durable")
    live = _live_segment(state)
    if live is None:
        return Recovered(Refusal.CHAIN, f"no journal file chains from checkpoint {c}")
    broken = next((r for i, r in enumerate(live.records) if r.prev != live.start + i), None)
    if broken is not None:
        return Recovered(Refusal.CHAIN, f"a record of file {live.base} names head {broken.prev}")
    if live.base == c:
        if live.start != head:
            return Recovered(Refusal.CHAIN, f"file {c} does not start at checkpoint {c}'s head")
        tail = live.records
    elif live.end == head:  # the next file was never started: the old one ends at the head
        tail = ()
    else:
        return Recovered(Refusal.CHAIN, f"file {live.base} does not end at checkpoint {c}'s head")
    shown = head + len(tail)
    # the mistaken anchor counts one file's records; the correct one, the whole chain
    supported = len(live.records) if Mistake.CHECKPOINT_NOT_ANCHORED in mistakes else shown
    if state.anchor > supported:
        return Recovered(
            Refusal.ANCHOR, f"the anchor says {state.anchor} records, recovery shows {supported}"
        )
    leases = dict(last.snapshot) if last is not None else {}
    for _, txn, phase in tail:
        before = leases.get(txn, LeaseState.NEW)
        action = lease.RECORD_ACTION[phase]
        if not lease.appends(before, action):
            return Recovered(Refusal.CHAIN, f"t{txn + 1}'s {phase} record moves nothing")
        leases[txn] = lease.step(before, action)
    return Recovered(None, leases=leases, shown=shown)


class Check(IdentityEnum):
    """The compaction invariants; :data:`SERVES` says which of S1-S7 each one serves."""

    C1 = "C1 live leases kept"
    C2 = "C2 chain verifies from the checkpoint"
    C3 = "C3 anchor supported"
    C4 = "C4 live evidence durable"


#: Which invariants of docs/design.md section 8 each compaction invariant serves.
SERVES: Mapping[Check, tuple[Invariant, ...]] = MappingProxyType(
    {
        Check.C1: (Invariant.S1, Invariant.S2),
        Check.C2: (Invariant.S6,),
        Check.C3: (Invariant.S6, Invariant.S1),
        Check.C4: (Invariant.S1, Invariant.S2),
    }
)


#: The invariant each mistake must break (first) when it is switched on.
MISTAKE_BREAKS: Mapping[Mistake, Check] = MappingProxyType(
    {
        Mistake.REMOVE_BEFORE_CHECKPOINT_DURABLE: Check.C2,
        Mistake.SNAPSHOT_WITHOUT_SETTLED_CHECK: Check.C1,
        Mistake.CHECKPOINT_NOT_ANCHORED: Check.C3,
    }
)


def mistake_names() -> dict[str, Mistake]:
    """Each mistake by the handle users type (``--compaction-mistake``, mutant labels)."""
    return {m.name.lower().replace("_", "-"): m for m in Mistake}


def _truth_live(state: State) -> dict[int, LeaseState]:
    return {t: s for t, s in enumerate(state.truth) if lease.protects(s)}


def _show(leases: Mapping[int, LeaseState]) -> str:
    return "{" + ", ".join(f"t{t + 1} {s}" for t, s in sorted(leases.items())) + "}"


def findings(state: State, mistakes: frozenset[Mistake] = frozenset()) -> list[tuple[Check, str]]:
    """Every compaction invariant ``state`` breaks, with a reason; [] when all hold."""
    found: list[tuple[Check, str]] = []
    seen = recover(state, mistakes)
    truth = _truth_live(state)
    if not state.attacked:
        if seen.refusal is None and seen.live() != truth:
            found.append(
                (Check.C1, f"recovery shows {_show(seen.live())}, the journal holds {_show(truth)}")
            )
        if seen.refusal is Refusal.CHAIN:
            found.append((Check.C2, f"recovery refuses the journal: {seen.reason}"))
        if seen.refusal is Refusal.ANCHOR:
            found.append((Check.C3, f"recovery refuses the journal: {seen.reason}"))
        for txn, s in truth.items():
            if not _evidence(state, txn, s):
                found.append(
                    (Check.C4, f"t{txn + 1}'s {s} is in no live file and no durable snapshot")
                )
    elif seen.refusal is None and seen.live() != truth:
        found.append(
            (
                Check.C3,
                f"the rolled-back journal is accepted: recovery shows {_show(seen.live())}, "
                f"the journal held {_show(truth)}",
            )
        )
    return found


def _evidence(state: State, txn: int, phase: LeaseState) -> bool:
    if any(
        s.where is Where.PRESENT and any((r.txn, r.phase) == (txn, phase) for r in s.records)
        for s in state.segments
    ):
        return True
    return any(c.snapshot_durable and (txn, phase) in c.snapshot for c in state.checkpoints)


class Model:
    """The compaction system: publishers, the compaction actor, crashes and the attack."""

    def __init__(
        self, bounds: Bounds | None = None, mistakes: frozenset[Mistake] = frozenset()
    ) -> None:
        self.bounds = bounds if bounds is not None else Bounds()
        self.mistakes = mistakes
        early = Mistake.REMOVE_BEFORE_CHECKPOINT_DURABLE in mistakes
        self.table = EARLY_REMOVAL_TRANSITIONS if early else COMPACTION_TRANSITIONS
        self._effects: Mapping[CompactionStep, Callable[[State], tuple[Step, State] | None]] = {
            _C.WRITE_SNAPSHOT: self._write_snapshot,
            _C.FSYNC_SNAPSHOT: self._fsync_snapshot,
            _C.WRITE_CHECKPOINT: self._write_checkpoint,
            _C.FSYNC_CHECKPOINT: self._fsync_checkpoint,
            _C.START_NEXT: self._start_next,
            _C.ARCHIVE_OLD: self._archive_old,
            _C.UNLINK_OLD: self._unlink_old,
            _C.KEEP_OLD: self._keep_old,
        }

    def initial(self) -> State:
        n = self.bounds.transactions
        return State(segments=(Segment(0, 0),), truth=(LeaseState.NEW,) * n)

    def successors(self, state: State) -> Iterator[tuple[Step, State]]:
        """Every enabled step and the state it leads to."""
        if state.attacked:
            return
        for (pc, action), nxt in self.table.items():
            if pc is state.pc:
                moved = self._effects[action](state)
                if moved is not None:
                    label, after = moved
                    yield label, after._replace(pc=nxt)
        if state.pc not in LOCK_HELD:
            yield from self._appends(state)
        if self.bounds.crashes and state.pc is not Pc.IDLE:
            yield self._crash(state)
        if self.bounds.rollback:
            yield from self._rollbacks(state)

    # -- the compaction actor's effects (its order is the table's) --

    def _next_index(self, state: State) -> int:
        return len(state.checkpoints) + 1

    def _write_snapshot(self, state: State) -> tuple[Step, State] | None:
        if len(state.checkpoints) >= self.bounds.compactions:
            return None
        seen = recover(state, self.mistakes)
        if seen.refusal is not None:
            return None  # nothing compacts a journal it cannot read
        keep: Callable[[LeaseState], bool] = lease.protects
        if Mistake.SNAPSHOT_WITHOUT_SETTLED_CHECK in self.mistakes:
            keep = _has_terminal_record
        snapshot = tuple(sorted((t, s) for t, s in seen.leases.items() if keep(s)))
        label = Step(StepKind.WRITE_SNAPSHOT, self._next_index(state), note=_show(dict(snapshot)))
        return label, state._replace(snapshot=snapshot, snapshot_durable=False)

    def _fsync_snapshot(self, state: State) -> tuple[Step, State] | None:
        label = Step(StepKind.FSYNC_SNAPSHOT, self._next_index(state))
        return label, state._replace(snapshot_durable=True)

    def _write_checkpoint(self, state: State) -> tuple[Step, State] | None:
        assert state.snapshot is not None
        pending = Checkpoint(state.records, state.snapshot, state.snapshot_durable)
        label = Step(StepKind.WRITE_CHECKPOINT, self._next_index(state), note=str(state.records))
        return label, state._replace(pending_checkpoint=pending)

    def _fsync_checkpoint(self, state: State) -> tuple[Step, State] | None:
        pending = state.pending_checkpoint
        assert pending is not None
        label = Step(StepKind.FSYNC_CHECKPOINT, self._next_index(state))
        durable = pending._replace(snapshot_durable=state.snapshot_durable)
        return label, state._replace(
            checkpoints=state.checkpoints + (durable,),
            pending_checkpoint=None,
            snapshot=None,
            snapshot_durable=False,
        )

    def _start_next(self, state: State) -> tuple[Step, State] | None:
        pending = state.pending_checkpoint
        k = len(state.checkpoints) + (1 if pending is not None else 0)
        head = pending.head if pending is not None else state.checkpoints[-1].head
        note = " (the checkpoint is not durable yet)" if pending is not None else ""
        return Step(StepKind.START_NEXT, k, note=note), self._with_next(state, k, head)

    def _with_next(self, state: State, k: int, head: int) -> State:
        anchor = state.anchor
        if Mistake.CHECKPOINT_NOT_ANCHORED in self.mistakes:
            anchor = 0  # a fresh anchor for the fresh file
        return state._replace(segments=state.segments + (Segment(k, head),), anchor=anchor)

    def _archive_old(self, state: State) -> tuple[Step, State] | None:
        newest = max(s.base for s in state.segments if s.where is Where.PRESENT)
        segments = tuple(
            s._replace(where=Where.ARCHIVED) if s.where is Where.PRESENT and s.base < newest else s
            for s in state.segments
        )
        return Step(StepKind.ARCHIVE_OLD), state._replace(segments=segments)

    def _unlink_old(self, state: State) -> tuple[Step, State] | None:
        segments = tuple(
            s._replace(where=Where.GONE) if s.where is Where.ARCHIVED else s for s in state.segments
        )
        return Step(StepKind.UNLINK_OLD), state._replace(segments=segments)

    def _keep_old(self, state: State) -> tuple[Step, State] | None:
        return Step(StepKind.KEEP_OLD), state

    # -- publishers, crashes, the attack --

    def _appends(self, state: State) -> Iterator[tuple[Step, State]]:
        if recover(state, self.mistakes).refusal is not None:
            return  # a journal that refuses to recover takes no append
        target = max(
            (i for i, s in enumerate(state.segments) if s.where is Where.PRESENT),
            key=lambda i: state.segments[i].base,
        )
        for txn, current in enumerate(state.truth):
            for action in LeaseAction:
                if (current, action) in lease.LEASE_TRANSITIONS and lease.appends(current, action):
                    phase = lease.step(current, action)
                    seg = state.segments[target]
                    link = Record(seg.end, txn, phase)  # names the head before it
                    grown = seg._replace(records=seg.records + (link,))
                    records = state.records + 1
                    anchor = records
                    if Mistake.CHECKPOINT_NOT_ANCHORED in self.mistakes:
                        anchor = len(grown.records)
                    yield (
                        Step(StepKind.APPEND, txn=txn, note=str(phase)),
                        state._replace(
                            segments=state.segments[:target]
                            + (grown,)
                            + state.segments[target + 1 :],
                            records=records,
                            anchor=anchor,
                            truth=state.truth[:txn] + (phase,) + state.truth[txn + 1 :],
                        ),
                    )

    def _crash(self, state: State) -> tuple[Step, State]:
        after = state._replace(
            pending_checkpoint=None, snapshot=None, snapshot_durable=False, pc=Pc.IDLE
        )
        c = len(after.checkpoints)
        note = ""
        if c and not any(s.base == c for s in after.segments):
            # the checkpoint is durable but its file never started: recovery starts it
            after = self._with_next(after, c, after.checkpoints[-1].head)
            note = f"; recovery starts journal file {c} from checkpoint {c}"
        return Step(StepKind.CRASH, note=note), after

    def _rollbacks(self, state: State) -> Iterator[tuple[Step, State]]:
        for k in range(len(state.checkpoints)):
            segments = tuple(
                s._replace(where=Where.PRESENT)
                if s.base == k
                else s._replace(where=Where.GONE)
                if s.base > k
                else s
                for s in state.segments
            )
            yield (
                Step(StepKind.ROLLBACK, k),
                state._replace(segments=segments, checkpoints=state.checkpoints[:k], attacked=True),
            )


def _has_terminal_record(state: LeaseState) -> bool:
    """Mistake (b)'s test for "keep it": a resolution that still protects (COMMITTED).

    A PREPARED lease has no resolution yet, so this test takes it for settled.
    """
    return lease.is_resolution(state) and lease.protects(state)


@attrs.frozen
class Violation:
    """The invariants broken first, why, and the shortest trace there."""

    checks: tuple[Check, ...]
    reasons: tuple[str, ...]
    trace: tuple[Step, ...]


@attrs.frozen
class Report:
    """What one exploration found."""

    states: int
    transitions: int
    depth: int
    violation: Violation | None


def explore(model: Model) -> Report:
    """Breadth first over every reachable state; stop at the first violating one.

    Breadth-first order makes the first violating state one at the smallest
    depth, so its parent chain is a shortest trace.
    """
    initial = model.initial()
    index: dict[State, int] = {initial: 0}
    states: list[State] = [initial]
    parent: list[int] = [-1]
    via: list[Step | None] = [None]
    depth: list[int] = [0]
    transitions = 0
    cursor = 0
    while cursor < len(states):
        here = states[cursor]
        found = findings(here, model.mistakes)
        if found:
            trace: list[Step] = []
            i = cursor
            while i > 0:
                label = via[i]
                assert label is not None
                trace.append(label)
                i = parent[i]
            violation = Violation(
                tuple(c for c, _ in found), tuple(r for _, r in found), tuple(reversed(trace))
            )
            return Report(len(states), transitions, depth[cursor], violation)
        for label, nxt in model.successors(here):
            transitions += 1
            if nxt not in index:
                index[nxt] = len(states)
                states.append(nxt)
                parent.append(cursor)
                via.append(label)
                depth.append(depth[cursor] + 1)
        cursor += 1
    return Report(len(states), transitions, max(depth), None)
