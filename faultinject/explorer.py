"""The systematic crash explorer: crash every scenario everywhere, recover, check S1-S7.

Theory of operation
-------------------
A :class:`Scenario` has a *setup* (made durable, never crashed) and a *run*
(the operation under test).  For each scenario the explorer:

1. runs it once without a crash, counting the run's I/O operations and the
   crash points it passes (with their occurrence number);
2. for every target -- before the k-th I/O operation (every k), at every
   occurrence of every crash point, and after the run's end -- and for every
   crash mode (``drop``; ``torn`` at 1 B, 512 B and 4 KiB; ``dir_subset``),
   with ``seeds`` seeded choices per non-deterministic mode, it rebuilds the
   world, arms the crash, runs, reboots the disk (:meth:`SimulatedDisk.crash`)
   and maybe restarts the owner;
3. restarts *fresh* objects on the durable state and runs recovery: opening
   the journal, ``reconcile_pending`` (first with the scenario's recovery
   faults, then with a healed owner), a journal-aware GC plan + apply with the
   orphan TTL expired, and one new externalization;
4. once per target (``recovery_crashes``), crashes the *recovery* too, at a
   seeded I/O operation of it, and recovers again from scratch;
5. checks the invariants of docs/design.md section 8 on what is left (the owner only
   through its protocol: see "Any owner" below).

The invariants are the spec's own functions (``toolswap.spec.invariants``), the
ones the spec explorer and the stateful machine call: after recovery the
explorer turns the journal, the owner's fenced view, ``tool-results/`` and the
watched owner's ghosts into an observable state (:func:`.observe.observe_real`)
and reports every finding.  Two of them are also checked at the instant they
could first break: S1 at every unlink in ``tool-results/``
(:func:`.observe.observe_unlink`: a lease that recovery resolves later does not
excuse an earlier deletion) and S2 at every publish call that may have written
(the watched owner records one that came before a durable PREPARED record).
With a healed owner, L1's goal must hold after recovery (reported apart, as
progress).

A few checks are about the run rather than a state, and stay here under the
invariant they serve: every externalization that returned left a durable
artifact (S1); a cleanup over a corrupt journal (``Scenario.journal_corrupt``)
refuses with a :class:`~toolswap.errors.CorruptStateError` and deletes nothing
(``S1.fail_closed``); the journal opens after every crash (S6); recovery on a
faulty owner resolves nothing on its word (S3).

Every violation carries what is needed to replay it: scenario, target, mode,
granularity and the seed string of its choices (:func:`replay`).

Writing a scenario
------------------
A scenario is two functions of a :class:`World`.  ``World`` offers the
session's objects and helpers that keep the bookkeeping the checks need::

    def setup(world):                      # durable before any crash
        world.publish(world.externalize(), "t1")

    def run(world):                        # crashed at every I/O op and crash point
        world.arm("lost_ack")              # an owner fault, by its built-in name
        world.publish(world.refs["tool_result_001.txt"], "t2")

    CrashExplorer([Scenario(name="mine", setup=setup, run=run)]).explore()

Use ``world.externalize()``, ``world.prepare(ref, txn)``, ``world.publish(ref,
txn)``, ``world.remove(txn)``, ``world.gc()``, ``world.arm(fault)`` (an owner
fault by its built-in name), ``world.hold(txn, claim)`` (the owner holds a
reference published behind the journal's back), ``world.plant(name, data)`` (an
entry in ``tool-results/`` that is not ours: bytes, or None for a directory),
``world.tamper(name, data)`` (an artifact's bytes changed behind toolswap's
back), ``world.memory`` (transaction id ->
the :class:`ArtifactMemoryReference` the agent's Memory keeps; a scenario may
tamper with it), ``world.acknowledged`` (transaction ids whose owner publish
returned normally: ``world.publish`` adds them; a scenario that calls the
owner itself adds its own) and ``world.journal``/``world.ext``/``world.owner``/
``world.disk`` directly.  Another process at the same time is an owner handle
that interleaves it (``_RacingPublish``, ``_FirstReconcilerWins``) passed to a
second journal object on the same session.  Errors listed in ``Scenario.expected_errors``, and
the "maybe written" errors an owner raised (whatever their type), end a run
quietly; any other exception is reported as ``run_error``.

Any owner
---------
``CrashExplorer(owner=factory)`` explores with a fresh owner per crash state
from ``factory`` (an :class:`~toolswap.faultinject.owner_source.OwnerSource`:
:func:`~toolswap.faultinject.owner_source.harness_sources` builds them from an
adapter's :class:`~toolswap.testing.OwnerHarness`).  A crash of the owner
means what it means for that store (rule 3 of :mod:`.owner_source`).  Every
check of S1-S7 learns what the owner holds through the protocol only: a
fence on each transaction id the scenario knows (the view), and the
rejections watched at the call sites.  A scenario whose owner fault the owner
cannot show is skipped and reported (``ExplorationResult.skipped``).
"""

from __future__ import annotations

import contextlib
import hashlib
import posixpath
import random
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import attrs
from toolswap.spec.invariants import (
    S1_FAIL_CLOSED,
    Invariant,
    findings,
    l1_unfinished,
    s1_no_dangling_reference,
    s2_prepare_before_publish,
)
from toolswap.spec.observable import LeaseView, Observable

from toolswap.cleanup import ArtifactCleanupPolicy, JournalRequiredError
from toolswap.domain import (
    ArtifactMemoryReference,
    ArtifactReference,
    ArtifactRetentionClaim,
    format_source_id,
    parse_source_id,
)
from toolswap.errors import CorruptStateError
from toolswap.externalizer import ToolResultExternalizer
from toolswap.journal import (
    ArtifactRetentionJournal,
    DanglingReferenceError,
    TransactionExistsError,
)
from toolswap.owner import (
    ArtifactPublicationRejected,
    OwnerObservation,
    ReconcileStatus,
    ReconciliationReport,
    owner_publisher,
    owner_remover,
)

from .disk import CRASH_MODES, TORN_GRANULARITIES, Chooser, SimulatedCrash, SimulatedDisk
from .observe import journal_records, observe_real, observe_unlink
from .owner import OwnerFault
from .owner_source import (
    CrashableSource,
    OwnerFaultUnsupported,
    OwnerSource,
    ProtocolView,
    WatchedOwner,
)

__all__ = [
    "CrashExplorer",
    "ExplorationResult",
    "Scenario",
    "Target",
    "CrashViolation",
    "World",
    "STANDARD_SCENARIOS",
    "MISUSE_SCENARIOS",
    "replay",
    "known_crash_points",
    "run_state",
    "scenario_named",
]

SESSION = "/home/agent/sessions/s1"
T0 = 1_700_000_000.0  # the disk's time base, in seconds
TTL = 86_400
FAR = T0 + 30 * TTL  # "now" for GC: every orphan is past its TTL
THRESHOLD = 1024
JOURNAL = posixpath.join(SESSION, "retention-leases.jsonl")
RESULTS = posixpath.join(SESSION, "tool-results")


@attrs.frozen(kw_only=True)
class CrashViolation:
    invariant: str
    scenario: str
    target: str
    mode: str
    detail: str
    seed: str

    def to_dict(self) -> dict[str, str]:
        return attrs.asdict(self)


@attrs.frozen
class Target:
    """Where to crash: ``io`` before the k-th I/O op, ``point`` at its nth pass, or ``end``."""

    kind: str
    name: str = ""
    nth: int = 0

    def __str__(self) -> str:
        if self.kind == "io":
            return f"io#{self.nth}"
        if self.kind == "point":
            return f"{self.name}#{self.nth}"
        return "end"


class _WatchedDisk(SimulatedDisk):
    """A simulated disk that reports every completed unlink to ``after_unlink``.

    It also tells whether the unlinked file's writer still held its mark (an
    exclusive lock of another handle on it): ``after_unlink(path, writing)``.
    """

    after_unlink: Callable[[str, bool], None] | None = None

    def unlink(self, path: str) -> None:
        with self._mutex:
            _, _, existing = self._lookup(path)
            writing = existing is not None and existing.lock_exclusive is not None
        super().unlink(path)
        if self.after_unlink is not None:
            self.after_unlink(path, writing)


class World:
    """One simulated machine plus an owner process, and what the run promised.

    ``disk`` (a :class:`SimulatedDisk`), ``source`` (the
    :class:`~toolswap.faultinject.owner_source.OwnerSource`: by default the
    built-in :class:`~toolswap.faultinject.owner.CrashableOwner`), ``owner``
    (its handle, watched: the journal and scenarios call this one; it also
    arms faults by their built-in names), ``ext`` and ``journal`` (rebuilt
    fresh after a crash), ``refs`` (artifact
    name -> the reference its externalization returned), ``expected`` (name ->
    bytes that must be durable), ``claims`` (transaction id -> claim),
    ``memory`` (transaction id -> the Memory record the agent keeps for it).

    :attr:`World.current` is the world built last (the explorer builds one at a
    time); code that stands for a component outside toolswap, such as the
    agent's Memory store, finds its state there.
    """

    current: ClassVar[World | None] = None

    def __init__(self, owner: OwnerSource | None = None) -> None:
        World.current = self
        self.disk = _WatchedDisk(time_base_ns=int(T0 * 1e9))
        self.disk.after_unlink = self._check_unlink
        self.disk.io_log = []
        self.now = T0 + 10.0
        self.source = CrashableSource() if owner is None else owner
        self.owner = WatchedOwner(self.source, prepared_durable=self._prepared_durable)
        self.expected: dict[str, bytes] = {}  # name -> bytes that must be durable (returned)
        self.names_ever: set[str] = set()  # every name an externalization returned, ever
        self.refs: dict[str, ArtifactReference] = {}  # name -> reference, as returned
        self.hostile = False  # hostile entries were planted (S7 checks them)
        self.recovery_crashed = False
        self.recovery_ops = 0
        self.claims: dict[str, ArtifactRetentionClaim] = {}
        self.shown: dict[str, str] = {}  # txn -> artifact name the owner holds behind our back
        self.conflicts_reported: set[str] = set()  # txns reconcile reported pending_conflict
        self.acknowledged: set[str] = set()  # txns whose owner publish returned normally (S3)
        self.memory: dict[str, ArtifactMemoryReference] = {}
        self.foreign: dict[str, bytes | None] = {}  # path -> bytes (None: a directory), not ours
        self.tampered: dict[str, bytes] = {}  # artifact name -> the bytes written over it
        self.witness = False  # cleanup is given the owner as its second witness (O9)
        # the records a compaction moved out of the live file (a ghost no component reads):
        # the checks judge the whole history, not only the tail that is left
        self.compacted = b""
        self.violations: list[tuple[str, str]] = []
        self.outputs = 0
        self.ext = self.new_externalizer()
        self.journal = self.new_journal()

    def clock(self) -> float:
        return self.now

    def new_externalizer(self) -> ToolResultExternalizer:
        return ToolResultExternalizer(
            SESSION, fs=self.disk, clock=self.clock, threshold_bytes=THRESHOLD, environ={}
        )

    def new_journal(self) -> ArtifactRetentionJournal:
        return ArtifactRetentionJournal(SESSION, fs=self.disk, clock=self.clock)

    # -- helpers for scenarios ---------------------------------------------------

    def externalize(self) -> ArtifactReference:
        """Externalize a three-chunk output over the threshold; remember its bytes."""
        self.outputs += 1
        chunks = [f"line {self.outputs}.{i}\n".encode() * 90 for i in range(3)]
        result = self.ext.externalize(chunks, "grep")
        ref = result.artifact
        assert ref is not None
        name = posixpath.basename(ref.path)
        self.expected[name] = b"".join(chunks)
        self.names_ever.add(name)
        self.refs[name] = ref
        return ref

    def claim_for(self, ref: ArtifactReference) -> ArtifactRetentionClaim:
        return ArtifactRetentionClaim.from_memory_reference(ref.for_memory())

    def publish(self, ref: ArtifactReference, txn: str) -> None:
        claim = self.claim_for(ref)
        self.claims[txn] = claim
        self.memory[txn] = ref.for_memory()
        send = owner_publisher(self.owner, txn, claim)

        def publisher() -> object:
            value = send()
            self.acknowledged.add(txn)  # the owner said it holds the reference (O1)
            return value

        self.journal.publish_reference(claim, publisher, txn)

    def remove(self, txn: str) -> None:
        self.journal.remove_reference(txn, owner_remover(self.owner, txn))

    def compact(self, *, delete_old: bool = False) -> None:
        """Compact the journal; the ghost keeps the history it moves out of the live file."""
        self.compacted = self.journal_history()
        self.journal.compact(delete_old=delete_old)

    def journal_history(self, *, durable: bool = False) -> bytes:
        """Every complete record the journal ever held: the compacted ghost, then the live file.

        Records are merged by their sequence number, so a live file that is still
        the compacted one (a crash before the swap) is not counted twice.
        """
        if durable:
            live = self.disk.durable_read(JOURNAL) or b""
        else:
            live = self.disk.read_file(JOURNAL) if self.disk.exists(JOURNAL) else b""
        if not self.compacted:
            return live
        lines: dict[object, bytes] = {}
        for data in (self.compacted, live):
            for line in data.split(b"\n")[:-1]:
                record = journal_records(line + b"\n")
                key = record[0].get("sequence") if record else line
                lines.setdefault(key, line)
        return b"".join(line + b"\n" for line in lines.values())

    def hold(self, txn: str, claim: ArtifactRetentionClaim) -> None:
        """The owner holds ``claim`` under ``txn``, published behind the journal's back."""
        self.owner.touched.add(txn)
        self.source.handle.publish(txn, claim)
        name = _filename(claim.source_id)
        if name is not None:
            self.shown[txn] = name

    def reconcile(self) -> None:
        """Reconcile every pending lease; remember which conflicts were reported (S1)."""
        for report in self.journal.reconcile_pending(self.owner):
            if report.status is ReconcileStatus.PENDING_CONFLICT:
                self.conflicts_reported.add(report.transaction_id)

    def arm(self, fault: OwnerFault, times: int = 1) -> None:
        """Arm an owner fault by its built-in name (see :mod:`.owner_source` for harnesses)."""
        self.owner.arm(fault, times)

    def prepare(self, ref: ArtifactReference, txn: str) -> None:
        claim = self.claim_for(ref)
        self.claims[txn] = claim
        self.journal.prepare(claim, txn)

    def plant(self, name: str, data: bytes | None) -> None:
        """An entry of ``tool-results/`` that is not ours (``data`` None: a directory).

        Cleanup must never remove or change it (S7); checked after every crash state.
        """
        path = posixpath.join(RESULTS, name)
        if data is None:
            self.disk.makedirs(path)
        else:
            self.disk.makedirs(posixpath.dirname(path))
            self.disk.put_file(path, data)
        self.foreign[path] = data

    def tamper(self, name: str, data: bytes) -> None:
        """Overwrite artifact ``name`` behind toolswap's back (durably).

        Its claims' digests now disagree with the file: cleanup must keep it,
        bytes and all (fail closed), and the S1 digest checks expect ``data``.
        """
        self.disk.put_file(posixpath.join(RESULTS, name), data)
        self.tampered[name] = data
        self.expected[name] = data

    def gc(self) -> None:
        """A journal-aware cleanup past every TTL; with :attr:`witness`, the owner is asked too."""
        policy = ArtifactCleanupPolicy(orphan_ttl_seconds=TTL, max_deletions=100, dry_run=False)
        plan = self.ext.plan_cleanup_from_journal(self.journal, policy=policy, now=FAR)
        owner = self.owner if self.witness else None
        self.ext.apply_cleanup_from_journal(plan, self.journal, owner=owner, now=FAR)

    # -- S1 at the moment of deletion --------------------------------------------------

    def _check_unlink(self, path: str, writing: bool = False) -> None:
        """S1: no file a live lease (or a reported conflict) needs is ever unlinked.

        Nor one still being written (S1.writing), nor, when cleanup was given the
        owner as its witness, one a reference the owner shows names.
        """
        if posixpath.dirname(posixpath.normpath(path)) != RESULTS:
            return
        shown = {t: self.shown[t] for t in self.conflicts_reported if t in self.shown}
        seen = observe_unlink(
            journal=self.journal_history(),
            name=posixpath.basename(path),
            now=FAR,
            shown=shown,
            visible=self.shown if self.witness else {},
            writing=writing,
        )
        self.violations.extend(
            (handle, f"unlinking: {why}") for handle, why in s1_no_dangling_reference(seen)
        )

    # -- S2, checked at every publish call that may write -------------------------

    def _prepared_durable(self, txn: str) -> bool:
        for record in journal_records(self.journal_history(durable=True)):
            if record.get("transaction_id") == txn and record.get("phase") == "PREPARED":
                return True
        return False

    def s2_violations(self) -> list[tuple[str, str]]:
        """S2 on the publishes the watched owner took (before recovery could run)."""
        took = tuple(LeaseView(t, "", unprepared_publish=True) for t in self.owner.s2_violations)
        return list(s2_prepare_before_publish(Observable(took, {})))


def _filename(source_id: object) -> str | None:
    if not isinstance(source_id, str):
        return None
    try:
        return parse_source_id(source_id).filename
    except ValueError:
        return None


@attrs.frozen(kw_only=True)
class Scenario:
    """A named workload: ``setup`` is made durable first, ``run`` is crashed everywhere."""

    name: str
    setup: Callable[[World], None]
    run: Callable[[World], None]
    recovery_faults: tuple[OwnerFault, ...] = ()
    #: The setup corrupted a complete journal record: every cleanup, in the run and
    #: in recovery, must refuse and delete nothing (fail closed); nothing else recovers.
    journal_corrupt: bool = False
    #: Every cleanup, in the run and in recovery, is given the owner as its second
    #: witness (O9): a reference the owner shows then protects what it names.
    gc_owner: bool = False
    expected_errors: tuple[type[BaseException], ...] = (
        ArtifactPublicationRejected,
        ConnectionError,
        TimeoutError,
    )


# -- the standard scenarios ----------------------------------------------------------------


def _nothing(world: World) -> None:
    return None


def _one_artifact(world: World) -> None:
    world.externalize()


def _published(world: World) -> None:
    world.publish(world.externalize(), "t1")


def _prepared(world: World) -> None:
    world.prepare(world.externalize(), "t1")


def _prepared_and_published(world: World) -> None:
    _prepared(world)
    world.hold("t1", world.claims["t1"])


def _run_externalize(world: World) -> None:
    world.externalize()


def _conflicting(world: World) -> None:
    """t1 is PREPARED for 001, but the owner holds t1 with 002's identity."""
    _prepared(world)
    other = world.claim_for(world.externalize())
    world.hold("t1", other)


def _conflicting_with_an_old_other(world: World) -> None:
    """t1 is PREPARED for 002; the owner holds t1 with 001's identity, an old orphan."""
    other = world.claim_for(world.externalize())
    world.prepare(world.externalize(), "t1")
    world.hold("t1", other)


def _run_reconcile_then_gc(world: World) -> None:
    world.reconcile()
    world.gc()


def _run_reconcile(fault: OwnerFault | None) -> Callable[[World], None]:
    def run(world: World) -> None:
        if fault is not None:
            world.arm(fault)
        world.journal.reconcile_pending(world.owner)

    return run


def _run_remove(fault: OwnerFault | None) -> Callable[[World], None]:
    def run(world: World) -> None:
        if fault is not None:
            world.arm(fault)
        world.journal.remove_reference("t1", owner_remover(world.owner, "t1"))

    return run


#: Entries of tool-results/ that are not artifacts, each in its own way (S7: never removed).
UNKNOWN_ENTRIES: tuple[tuple[str, bytes | None], ...] = (
    ("scratch.txt", b"a plain file of someone else's\n"),
    ("tool_result_007.txt.bak", b"an artifact-like name with a bad suffix\n"),
    ("tool_result_42.txt", b"two digits: not an artifact name\n"),
    ("drafts", None),
    ("drafts/tool_result_001.txt", b"an artifact name, one level down\n"),
)


def _plant_unknown(world: World) -> None:
    for name, data in UNKNOWN_ENTRIES:
        world.plant(name, data)


def _unknown_only(world: World) -> None:
    """A ``tool-results/`` holding nothing of ours: the cheapest GC over unknown entries."""
    _plant_unknown(world)


def _gc_setup(world: World) -> None:
    world.externalize()  # 001: an orphan
    world.publish(world.externalize(), "t1")  # 002: referenced
    _plant_unknown(world)  # old, unreferenced, and not ours: never deleted


def _corrupt_journal_setup(world: World) -> None:
    """The GC setup, then one hex digit of the first record's hash flipped (a complete line).

    The line still parses as JSON (so the S1 check at each unlink still sees
    t1's lease), but its hash no longer matches: the journal is corrupt.
    """
    _gc_setup(world)
    data = world.disk.read_file(JOURNAL)
    at = data.index(b'"event_sha256":"') + len(b'"event_sha256":"')
    flipped = b"1" if data[at : at + 1] == b"0" else b"0"
    world.disk.put_file(JOURNAL, data[:at] + flipped + data[at + 1 :])


def _run_gc_expecting_refusal(world: World) -> None:
    try:
        world.gc()
    except CorruptStateError:
        return  # fail closed: the journal cannot say what is protected
    world.violations.append((S1_FAIL_CLOSED, "GC ran over a corrupt journal, no refusal"))


def _digest_conflict_setup(world: World) -> None:
    """Claims whose digests disagree with their files; both files must stay.

    002 is an old orphan of its own, but the owner holds t2 -- PREPARED for
    001 -- with a claim naming 002 under another digest (a conflicting claim,
    journalled as CONFLICT by a reconciliation here, so that the crashed run
    is the GC alone).  001 is published as t1, then its bytes are changed
    behind toolswap's back (a tampered artifact: the digests of t1 and of
    t2's intent no longer match).  Both are ``retained_corrupt``.
    """
    first = world.externalize()  # 001
    world.publish(first, "t1")
    orphan = world.externalize()  # 002
    world.prepare(first, "t2")
    other = _sha(b"not the bytes of tool_result_002.txt")
    name = posixpath.basename(orphan.path)
    source = format_source_id(posixpath.basename(SESSION), name, other)
    world.hold("t2", ArtifactRetentionClaim(source_id=source, content_sha256=other))
    world.reconcile()  # pending_conflict: the owner shows 002 under t2 (S1 at every unlink)
    world.tamper("tool_result_001.txt", b"tampered after it was externalized\n" * 30)


def _expired_prepared_setup(world: World) -> None:
    """t1 is PREPARED for 001 with a retain_until long past at GC time; the owner shows it.

    A PREPARED lease protects whatever its retain_until until it is reconciled
    (S1): the GC in the run must keep 001.  Recovery may reconcile it to
    COMMITTED, and only then does the expiry count.
    """
    claim = attrs.evolve(world.claim_for(world.externalize()), retain_until=T0 + 1)
    world.claims["t1"] = claim
    world.journal.prepare(claim, "t1")
    world.hold("t1", claim)


def _run_gc(concurrent_prepare: bool) -> Callable[[World], None]:
    def run(world: World) -> None:
        policy = ArtifactCleanupPolicy(orphan_ttl_seconds=TTL, max_deletions=100, dry_run=False)
        plan = world.ext.plan_cleanup_from_journal(world.journal, policy=policy, now=FAR)
        if concurrent_prepare:  # a prepare between plan and apply must keep the orphan
            world.prepare(world.refs["tool_result_001.txt"], "t2")
        owner = world.owner if world.witness else None
        world.ext.apply_cleanup_from_journal(plan, world.journal, owner=owner, now=FAR)

    return run


OUTSIDE = "/home/agent/outside/secret.txt"


def _hostile_setup(world: World) -> None:
    """Entries GC must never follow or delete (S7), next to a real orphan."""
    _gc_setup(world)
    world.hostile = True
    disk = world.disk
    disk.makedirs(posixpath.dirname(OUTSIDE))
    disk.put_file(OUTSIDE, b"not ours\n")
    results = posixpath.join(SESSION, "tool-results")
    disk.make_symlink(posixpath.join(results, "tool_result_900.txt"), OUTSIDE)
    disk.put_file(posixpath.join(results, "tool_result_901.txt"), b"foreign\n", uid=4242)
    disk.makedirs(posixpath.join(results, "tool_result_902.txt"))
    disk.put_file(posixpath.join(results, "notes.txt"), b"odd name\n")


def _torn_journal_setup(world: World) -> None:
    _prepared(world)
    world.externalize()
    path = posixpath.join(SESSION, "retention-leases.jsonl")
    world.disk.put_file(path, world.disk.read_file(path) + b'{"version": 1, "seq')


def _run_after_torn_tail(world: World) -> None:
    world.journal = world.new_journal()  # sees the torn tail
    world.publish(world.refs["tool_result_002.txt"], "t2")


def _publish_t2(fault: OwnerFault | None) -> Callable[[World], None]:
    def run(world: World) -> None:
        if fault is not None:
            world.arm(fault)
        world.publish(world.refs["tool_result_001.txt"], "t2")

    return run


def _released_setup(world: World) -> None:
    """Released references whose Memory records linger: GC must go by the journal only.

    On top of the hostile entries: 002 is referenced by t1 and t2 and t1 is
    removed (RELEASED; its Memory record still names 002, which t2 keeps); 003
    is published as t3 and removed, and its Memory record was rewritten to
    name a file outside the session.
    """
    _hostile_setup(world)  # 001 orphan, t1 -> 002, foreign entries, OUTSIDE
    world.publish(world.refs["tool_result_002.txt"], "t2")
    world.remove("t1")
    world.publish(world.externalize(), "t3")  # 003
    world.remove("t3")
    world.memory["t3"] = attrs.evolve(world.memory["t3"], artifact_path=OUTSIDE)


def _also_expecting(*errors: type[BaseException]) -> tuple[type[BaseException], ...]:
    """The owner errors a scenario run may end with by default, plus ``errors``."""
    default = attrs.fields(Scenario).expected_errors.default
    assert isinstance(default, tuple)
    return (*default, *errors)


def _run_replay_after_restart(world: World) -> None:
    """t2 is rejected (ABORTED); the publisher restarts and sends t2 again.

    An explicit rejection leaves no tombstone, so the owner would take a second
    send, under a lease that is ABORTED and protects nothing (S1).  The journal
    must refuse the id before the publisher runs (``TransactionExistsError``).
    """
    ref = world.refs["tool_result_001.txt"]
    world.arm("reject")
    with contextlib.suppress(ArtifactPublicationRejected):
        world.publish(ref, "t2")
    world.journal = world.new_journal()  # the publisher restarts and forgot t2
    world.publish(ref, "t2")


def _run_publish_after_gc(world: World) -> None:
    """GC deletes the orphan 001, then the agent publishes the reference it still holds.

    ``prepare`` re-checks the artifact under the session lock, the lock GC
    deletes under, and refuses (``DanglingReferenceError``): a reference to a
    deleted file is never published (S1).
    """
    world.gc()
    world.publish(world.refs["tool_result_001.txt"], "t1")


def _raw_gc_setup(world: World) -> None:
    """t1 is COMMITTED for 001; t2 is PREPARED for 002, and the owner already shows it."""
    world.publish(world.externalize(), "t1")
    world.prepare(world.externalize(), "t2")
    world.hold("t2", world.claims["t2"])


def _run_externalize_racing_gc(world: World) -> None:
    """A command prints part of its output, goes quiet past every TTL, and a GC runs."""
    world.outputs += 1
    first = b"first part, then a long quiet spell\n" * 40
    rest = b"the rest, printed after the GC\n" * 40

    def output() -> Iterator[bytes]:
        yield first
        world.gc()  # at FAR: the half-written file's last write is past every TTL
        yield rest

    ref = world.ext.externalize(output(), "grep").artifact
    assert ref is not None
    name = posixpath.basename(ref.path)
    world.expected[name] = first + rest
    world.names_ever.add(name)
    world.refs[name] = ref


def _lost_lease_setup(world: World) -> None:
    """An old artifact the owner references under an id the journal does not know.

    The journal lost the lease (cut back above its anchor, or an older copy
    restored); only the owner can still tell cleanup (docs/design.md section 5).
    An owner without the census (O9 is optional) cannot be asked: skipped.
    """
    if not callable(getattr(world.source.handle, "census_fenced", None)):
        raise OwnerFaultUnsupported("census", "the owner offers no census (O9 is optional)")
    ref = world.externalize()
    world.hold("t-lost", world.claim_for(ref))


def _run_raw_gc(world: World) -> None:
    """Raw-claims cleanup with the claims the caller knows: its committed reference t1.

    Raw claims cannot see t2's PREPARED lease; while the session has a lease
    journal, raw cleanup must refuse (``JournalRequiredError``) and delete nothing.
    """
    policy = ArtifactCleanupPolicy(orphan_ttl_seconds=TTL, max_deletions=100, dry_run=False)
    claims = [world.claims["t1"]]
    plan = world.ext.plan_cleanup(claims, policy=policy, now=FAR)
    world.ext.apply_cleanup(plan, claims=claims, now=FAR)


# -- compaction (docs/design.md section 5, "Compaction") -------------------------------------


def _compaction_setup(world: World) -> None:
    """Every kind of lease a compaction must keep or let go, and an orphan.

    t1 is COMMITTED for 001 (kept); t2 was published for 002 and removed
    (RELEASED: settled, leaves the live file); t3 is PREPARED for 003 and the
    owner already shows it (kept: only reconciliation may settle it); 004 is an
    orphan.
    """
    world.publish(world.externalize(), "t1")
    world.publish(world.externalize(), "t2")
    world.remove("t2")
    world.prepare(world.externalize(), "t3")
    world.hold("t3", world.claims["t3"])
    world.externalize()


def _run_compact(world: World) -> None:
    world.compact()


def _run_compact_delete_old_then_publish(world: World) -> None:
    """Compact with the old file unlinked, then append to the new file (a new lease)."""
    world.compact(delete_old=True)
    world.publish(world.refs["tool_result_004.txt"], "t4")


# -- another process at the same time: a racing publish, a second reconciler --------------------


class _RacingObservation:
    """An observation whose ``seal_absence`` is a write the racing publish may precede."""

    def __init__(self, inner: OwnerObservation, race: _RacingPublish) -> None:
        self._inner = inner
        self._race = race
        self.transaction_id = inner.transaction_id
        self.state = inner.state
        self.source_id = inner.source_id
        self.content_sha256 = inner.content_sha256
        self.generation = inner.generation
        self.sealed = inner.sealed

    def seal_absence(self) -> bool:
        self._race.writing(self.transaction_id)
        return self._inner.seal_absence()


class _RacingPublish:
    """The owner as a reconciler sees it while another process's publish of ``txn`` races it.

    The other process's request lands as late as the owner lets it before the
    reconciler's first write to the id (a seal or a ``remove``): right before
    that write if no fence on the id is open, or else -- O5 holds the publish
    back while the fence is open -- right after the fence closes.  With
    ``early`` it lands as soon as the reconciler's first fence on the id
    closes instead.  If neither happens, it lands when :meth:`land` is called.
    A crash before it landed means it was never sent.  Only protocol calls
    reach the owner (any owner source can race), through ``world.owner``.
    """

    def __init__(
        self, world: World, txn: str, claim: ArtifactRetentionClaim, *, early: bool = False
    ) -> None:
        self._world = world
        self._txn = txn
        self._claim = claim
        self._early = early
        self._fenced = 0
        self._wrote = False
        self.landed = False
        self.error: Exception | None = None  # what the publisher hears, if not an ack

    def land(self) -> None:
        if self.landed:
            return
        self.landed = True
        try:
            self._world.owner.publish(self._txn, self._claim)
        except Exception as exc:  # a rejection (a tombstone), or "maybe written"
            self.error = exc
            return
        self._world.acknowledged.add(self._txn)

    def writing(self, txn: str) -> None:
        """The reconciler is about to write to ``txn``: land first if nothing fences it."""
        if txn != self._txn:
            return
        if not self._fenced:
            self.land()
        self._wrote = True

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> object:
        return self._world.owner.publish(transaction_id, claim)

    def remove(self, transaction_id: str) -> None:
        self.writing(transaction_id)
        self._world.owner.remove(transaction_id)

    @contextlib.contextmanager
    def inspect_fenced(self, transaction_id: str) -> Iterator[OwnerObservation]:
        fenced = int(transaction_id == self._txn)
        with self._world.owner.inspect_fenced(transaction_id) as observation:
            self._fenced += fenced
            try:
                yield _RacingObservation(observation, self)
            finally:
                self._fenced -= fenced
        if self._wrote or (fenced and self._early):  # held back by the fence: it lands now
            self.land()


def _publish_racing_reconcile(*, early: bool = False) -> Callable[[World], None]:
    """t2 is published while another process reconciles it; the request lands in its window.

    The publisher has prepared t2 and sent its request; a reconciler in another
    process (a second journal object) finds t2 PREPARED and reconciles it.  The
    request lands as late as the owner lets it before the reconciler's write
    (:class:`_RacingPublish`).  With the fence and the owner's compare-and-set
    it can only land after the seal, and the tombstone refuses it; a
    reconciler that writes its tombstone outside a fence buries an
    acknowledged publish (S3).  ``early``: see :class:`_RacingPublish`.
    """

    def run(world: World) -> None:
        ref = world.refs["tool_result_001.txt"]
        claim = world.claim_for(ref)
        world.claims["t2"] = claim
        world.memory["t2"] = ref.for_memory()
        race = _RacingPublish(world, "t2", claim, early=early)

        def publisher() -> None:
            world.new_journal().reconcile_pending(race)  # meanwhile, in another process
            race.land()
            if race.error is not None:
                raise race.error

        world.journal.publish_reference(claim, publisher, "t2")

    return run


class _FirstReconcilerWins:
    """The owner as the second of two reconcilers sees it: the first one wins the fence.

    Right before the second reconciler enters the fence of an id (it has read
    the pending set and the lease's phase already), ``first`` -- another
    journal object on the same session, another process -- reconciles that id
    to the end through ``world.owner``.  Only protocol calls reach the owner.
    """

    def __init__(self, world: World, first: ArtifactRetentionJournal) -> None:
        self._world = world
        self._first = first
        self.reports: list[ReconciliationReport] = []  # the first reconciler's

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> object:
        return self._world.owner.publish(transaction_id, claim)

    def remove(self, transaction_id: str) -> None:
        self._world.owner.remove(transaction_id)

    @contextlib.contextmanager
    def inspect_fenced(self, transaction_id: str) -> Iterator[OwnerObservation]:
        report = self._first.reconcile_reference(transaction_id, self._world.owner)
        self.reports.append(report)
        if report.status is ReconcileStatus.PENDING_CONFLICT:
            self._world.conflicts_reported.add(transaction_id)
        with self._world.owner.inspect_fenced(transaction_id) as observation:
            yield observation


def _run_two_reconcilers(world: World) -> None:
    """Two reconcilers on one PREPARED lease: ``world.journal`` wins the fence, a second waits.

    The second (another process: its own journal object) has read t1 as
    PREPARED before the first settles it; it must append nothing (S5) and
    report ``already_*``.
    """
    second = world.new_journal()
    for report in second.reconcile_pending(_FirstReconcilerWins(world, world.journal)):
        if report.status is ReconcileStatus.PENDING_CONFLICT:
            world.conflicts_reported.add(report.transaction_id)


STANDARD_SCENARIOS: tuple[Scenario, ...] = (
    Scenario(name="externalize", setup=_nothing, run=_run_externalize),
    Scenario(name="externalize_after_existing", setup=_one_artifact, run=_run_externalize),
    Scenario(name="publish_ok", setup=_one_artifact, run=_publish_t2(None)),
    Scenario(name="publish_rejected", setup=_one_artifact, run=_publish_t2("reject")),
    Scenario(
        name="publish_uncertain_before_write",
        setup=_one_artifact,
        run=_publish_t2("fail_before_write"),
    ),
    Scenario(
        name="publish_uncertain_after_write",
        setup=_one_artifact,
        run=_publish_t2("lost_ack"),
    ),
    Scenario(name="publish_in_flight", setup=_one_artifact, run=_publish_t2("in_flight")),
    Scenario(
        name="publish_then_unknown",
        setup=_one_artifact,
        run=_publish_t2("lost_ack"),
        recovery_faults=("unknown", "inspect_error"),
    ),
    Scenario(
        name="publish_replayed_after_restart",
        setup=_one_artifact,
        run=_run_replay_after_restart,
        expected_errors=_also_expecting(TransactionExistsError),
    ),
    Scenario(
        name="publish_after_gc",
        setup=_one_artifact,
        run=_run_publish_after_gc,
        expected_errors=_also_expecting(DanglingReferenceError),
    ),
    Scenario(
        name="raw_gc_with_journal",
        setup=_raw_gc_setup,
        run=_run_raw_gc,
        expected_errors=_also_expecting(JournalRequiredError),
    ),
    Scenario(name="reconcile_published", setup=_prepared_and_published, run=_run_reconcile(None)),
    Scenario(name="reconcile_absent", setup=_prepared, run=_run_reconcile(None)),
    Scenario(
        name="reconcile_lost_tombstone", setup=_prepared, run=_run_reconcile("lost_tombstone")
    ),
    Scenario(name="reconcile_unknown", setup=_prepared, run=_run_reconcile("unknown")),
    Scenario(name="reconcile_stale", setup=_prepared, run=_run_reconcile("stale_seal")),
    Scenario(
        name="reconcile_conflict",
        setup=_conflicting,
        run=_run_reconcile(None),
    ),
    Scenario(
        name="reconcile_conflict_then_gc",
        setup=_conflicting_with_an_old_other,
        run=_run_reconcile_then_gc,
    ),
    Scenario(name="remove", setup=_published, run=_run_remove(None)),
    Scenario(name="remove_failed", setup=_published, run=_run_remove("remove_error")),
    Scenario(name="remove_lost_ack", setup=_published, run=_run_remove("remove_lost_ack")),
    Scenario(name="gc", setup=_gc_setup, run=_run_gc(False)),
    Scenario(name="gc_concurrent_prepare", setup=_gc_setup, run=_run_gc(True)),
    Scenario(name="gc_hostile_entries", setup=_hostile_setup, run=_run_gc(False)),
    Scenario(name="gc_after_release", setup=_released_setup, run=_run_gc(False)),
    Scenario(name="gc_unknown_entries", setup=_unknown_only, run=_run_gc(False)),
    Scenario(name="gc_expired_prepared", setup=_expired_prepared_setup, run=_run_gc(False)),
    Scenario(
        name="gc_corrupt_journal",
        setup=_corrupt_journal_setup,
        run=_run_gc_expecting_refusal,
        journal_corrupt=True,
    ),
    Scenario(
        name="gc_digest_conflict",
        setup=_digest_conflict_setup,
        run=_run_gc(False),
    ),
    Scenario(name="externalize_races_gc", setup=_nothing, run=_run_externalize_racing_gc),
    Scenario(name="gc_owner_witness", setup=_lost_lease_setup, run=_run_gc(False), gc_owner=True),
    Scenario(
        name="append_after_torn_tail",
        setup=_torn_journal_setup,
        run=_run_after_torn_tail,
    ),
    Scenario(
        name="publish_races_reconcile",
        setup=_one_artifact,
        run=_publish_racing_reconcile(),
    ),
    Scenario(name="two_reconcilers_absent", setup=_prepared, run=_run_two_reconcilers),
    Scenario(
        name="two_reconcilers_published",
        setup=_prepared_and_published,
        run=_run_two_reconcilers,
    ),
    Scenario(name="compact", setup=_compaction_setup, run=_run_compact),
    Scenario(
        name="compact_delete_old_then_publish",
        setup=_compaction_setup,
        run=_run_compact_delete_old_then_publish,
    ),
)


# -- protocol misuse: each must be caught ------------------------------------------------------


class _NoDirSync:
    """A seam that forgets every directory fsync (the classic "rename is durable" mistake)."""

    def __init__(self, disk: SimulatedDisk) -> None:
        self._disk = disk

    def __getattr__(self, name: str) -> Any:
        return getattr(self._disk, name)

    def fsync_dir(self, path: str) -> None:
        return None  # deliberately forgets: a created entry may vanish in a crash


class _NoJournalFsync(_NoDirSync):
    """A seam that forgets to fsync the lease journal ("publish before the claim is durable")."""

    def fsync_dir(self, path: str) -> None:
        self._disk.fsync_dir(path)

    def fsync(self, handle: int) -> None:
        facts = self._disk.fstat(handle)
        journal = self._disk.lstat(posixpath.join(SESSION, "retention-leases.jsonl"))
        if (facts.device, facts.inode) != (journal.device, journal.inode):
            self._disk.fsync(handle)


def _misuse_unsynced_journal(world: World) -> None:
    world.journal = ArtifactRetentionJournal(
        SESSION, fs=_NoJournalFsync(world.disk), clock=world.clock
    )
    world.publish(world.refs["tool_result_002.txt"], "t2")


def _misuse_no_dir_sync(world: World) -> None:
    world.ext = ToolResultExternalizer(
        SESSION, fs=_NoDirSync(world.disk), clock=world.clock, threshold_bytes=THRESHOLD, environ={}
    )
    world.externalize()


def _misuse_publish_before_prepare(world: World) -> None:
    ref = world.refs["tool_result_001.txt"]
    claim = world.claim_for(ref)
    world.claims["t2"] = claim
    world.owner.publish("t2", claim)  # visible before any PREPARED record
    world.journal.prepare(claim, "t2")
    world.journal.commit("t2")


def _misuse_abort_on_uncertain(world: World) -> None:
    ref = world.refs["tool_result_001.txt"]
    claim = world.claim_for(ref)
    world.claims["t2"] = claim
    world.journal.prepare(claim, "t2")
    world.arm("lost_ack")
    try:
        world.owner.publish("t2", claim)
    except ConnectionError:
        world.journal.abort("t2")  # no tombstone: the write may have landed (it did)


def _misuse_release_before_remove(world: World) -> None:
    world.journal.release("t1")
    world.disk.crash_point("misuse.between_release_and_remove")
    world.owner.remove("t1")


def _misuse_trust_memory_path(world: World) -> None:
    """Delete what a (hostile) Memory record's path says instead of deriving it (S7)."""
    memory_path = OUTSIDE  # a Memory record claims this is the artifact
    world.disk.unlink(memory_path)
    world.disk.fsync_dir(posixpath.dirname(memory_path))


MISUSE_SCENARIOS: tuple[tuple[Scenario, str], ...] = (
    (Scenario(name="misuse_no_dir_sync", setup=_nothing, run=_misuse_no_dir_sync), Invariant.S1),
    (
        Scenario(
            name="misuse_publish_before_prepare",
            setup=_one_artifact,
            run=_misuse_publish_before_prepare,
        ),
        Invariant.S2,
    ),
    (
        Scenario(name="misuse_unsynced_journal", setup=_gc_setup, run=_misuse_unsynced_journal),
        Invariant.S2,
    ),
    (
        Scenario(
            name="misuse_abort_on_uncertain",
            setup=_one_artifact,
            run=_misuse_abort_on_uncertain,
        ),
        Invariant.S3,
    ),
    (
        Scenario(
            name="misuse_release_before_remove", setup=_published, run=_misuse_release_before_remove
        ),
        Invariant.S4,
    ),
    (
        Scenario(
            name="misuse_trust_memory_path", setup=_hostile_setup, run=_misuse_trust_memory_path
        ),
        Invariant.S7,
    ),
)
"""Scenarios that break the protocol on purpose, with the invariant that must catch each."""


def scenario_named(name: str) -> Scenario:
    """The standard or misuse scenario called ``name``; KeyError if there is none."""
    for scenario in (*STANDARD_SCENARIOS, *(s for s, _ in MISUSE_SCENARIOS)):
        if scenario.name == name:
            return scenario
    raise KeyError(name)


# -- one crash state -------------------------------------------------------------------------


def _arm(world: World, target: Target) -> None:
    if target.kind == "io":
        world.disk.arm_io(target.nth)
    elif target.kind == "point":
        world.disk.arm(target.name, target.nth)


def _run_guarded(world: World, scenario: Scenario) -> bool:
    """Run the scenario; True if the disk crashed during it."""
    try:
        scenario.run(world)
    except OwnerFaultUnsupported:
        raise  # this owner cannot show the scenario's fault: the explorer skips it
    except SimulatedCrash:
        return True
    except scenario.expected_errors:
        return False
    except Exception as exc:  # an uncrashed step failed: report it, keep exploring
        if world.owner.maybe_written(exc):
            return False  # the owner's own "maybe written" error, whatever its type (O2)
        world.violations.append(("run_error", f"{type(exc).__name__}: {exc}"))
    return False


def run_state(
    scenario: Scenario,
    target: Target,
    mode: str,
    *,
    granularity: int | None = None,
    seed: str = "",
    recovery_crash_at: int | None = None,
    check: Callable[[World, dict[str, bytes]], list[tuple[str, str]]] | None = None,
    owner: Callable[[], OwnerSource] | None = None,
) -> tuple[list[CrashViolation], list[CrashViolation], World]:
    """Build, run with one armed crash, reboot, recover and check: (violations, progress, world).

    ``recovery_crash_at=k`` crashes the recovery itself before its k-th I/O
    operation (same mode), then recovers again from scratch before checking.
    ``world.recovery_ops`` tells how many I/O operations the (last) recovery made.
    ``owner`` makes the fresh owner source of this crash state (default: the
    built-in owner); the source is closed before returning.
    """
    world = World(None if owner is None else owner())
    world.witness = scenario.gc_owner
    try:
        scenario.setup(world)
        world.disk.disarm()
        world.disk.io_log = []
        _arm(world, target)
        _run_guarded(world, scenario)
        world.disk.disarm()
        chooser = Chooser(random.Random(seed))
        world.disk.crash(mode, chooser, granularity=granularity)
        found = _recover_and_check(
            world, scenario, chooser, check, mode, granularity, recovery_crash_at
        )
    finally:
        world.source.close()
    return (*found, world)


def _tool_results(disk: SimulatedDisk) -> dict[str, bytes]:
    prefix = posixpath.join(SESSION, "tool-results") + "/"
    return {
        path[len(prefix) :]: data
        for path, data in disk.snapshot().items()
        if path.startswith(prefix) and isinstance(data, bytes) and "/" not in path[len(prefix) :]
    }


def _recover_and_check(
    world: World,
    scenario: Scenario,
    chooser: Chooser,
    check: Callable[[World, dict[str, bytes]], list[tuple[str, str]]] | None,
    mode: str = "drop",
    granularity: int | None = None,
    recovery_crash_at: int | None = None,
) -> tuple[list[CrashViolation], list[CrashViolation]]:
    found: list[tuple[str, str]] = []
    progress: list[tuple[str, str]] = []
    disk = world.disk
    owner = world.source  # crashes, in-flight writes: the owner's own mechanics
    before = _tool_results(disk)
    # S1 (durability): every externalization that returned left its bytes, unless the
    # run itself deleted the file (whether that was allowed is checked below)
    unlinked = {posixpath.basename(p) for op, p in disk.io_log or [] if op == "unlink"}
    for name, data in world.expected.items():
        if before.get(name) != data and name not in unlinked:
            found.append((Invariant.S1, f"{name} was returned but is not durable after the crash"))
    # the owner process may restart too: an in-flight write lands or is lost now,
    # or lands late, after the first reconciliation (a tombstone must refuse it)
    late_delivery = bool(owner.in_flight) and chooser.choose(2) == 1
    if not late_delivery:
        owner.crash(chooser)
    if recovery_crash_at is not None:
        disk.arm_io(recovery_crash_at)
    start = disk.io_count
    try:
        ok = _recover(world, scenario, found, late_delivery)
    except SimulatedCrash:  # a crash during recovery: reboot and recover from scratch
        world.recovery_crashed = True
        disk.crash(mode, chooser, granularity=granularity)
        owner.crash(chooser)
        start = disk.io_count
        ok = _recover(world, scenario, found, late_delivery=False)
    disk.disarm()  # an arm past the end of recovery must not fire in the checks
    world.recovery_ops = disk.io_count - start
    found.extend(_unknown_entries_kept(world))
    if scenario.journal_corrupt:
        found.extend(_fail_closed(world, before))
    if not ok:
        return _finish(found + world.s2_violations() + world.violations, progress)
    recovery = world.journal.recover()
    after = _tool_results(disk)
    # what the owner holds, learned through its fences only (healed by now)
    view = world.owner.view({*world.claims, *recovery.states})
    if view.unanswered:
        found.append(("view", f"the healed owner cannot tell: {', '.join(view.unanswered)}"))
    second = _externalize_once(world, found)  # S6: a new name never reuses an old one
    reused = second is not None and (second in before or second in world.names_ever)
    seen = observe_real(
        journal=world.journal_history(),
        intents={**world.claims, **recovery.transactions},
        now=FAR,  # the clock cleanup ran at: retention is judged there
        view=view,
        files=after,
        ours=world.names_ever,
        landing=world.owner.uncertain,
        in_flight=[t for t, _ in owner.in_flight],
        rejected=world.owner.rejected,
        acknowledged=world.acknowledged,
        unprepared=world.owner.s2_violations,
        conflicts={
            t: {(c.source_id, c.content_sha256) for c in ids}
            for t, ids in recovery.conflicts.items()
        },
        tampered=world.tampered,
        first=before,
        reused=[second] if second is not None and reused else [],
        claimed={parse_source_id(c.source_id).filename for c in recovery.protecting_claims(FAR)}
        | _witnessed(world, view),
        outside=_outside(world, disk),
    )
    found.extend(findings(seen))
    progress.extend((Invariant.L1, why) for why in l1_unfinished(seen))
    if check is not None:
        found.extend(check(world, before))
    return _finish(found + world.violations, progress)


def _witnessed(world: World, view: ProtocolView) -> set[str]:
    """The artifacts cleanup's second witness protects: every one a visible reference names.

    Only when cleanup was given the owner (L1 asks nothing of what it keeps then).
    """
    if not world.witness:
        return set()
    names = {_filename(source_id) for source_id, _ in view.visible().values()}
    return {name for name in names if name is not None}


def _outside(world: World, disk: SimulatedDisk) -> tuple[str, ...]:
    """S7's observations: the hostile entries outside and planted inside, and the I/O log."""
    seen: list[str] = []
    results = posixpath.join(SESSION, "tool-results")
    if world.hostile:
        if not disk.exists(OUTSIDE) or disk.read_file(OUTSIDE) != b"not ours\n":
            seen.append(f"{OUTSIDE} outside the session was changed or deleted")
        for planted in ("tool_result_900.txt", "tool_result_901.txt", "tool_result_902.txt"):
            if not disk.exists(posixpath.join(results, planted)):
                seen.append(f"GC deleted {planted}, which is not ours")
    for op, path in disk.io_log or []:
        if path and not _inside(path, ancestors_ok=op == "makedirs"):
            seen.append(f"{op} touched {path} outside the session")
            break
    return tuple(seen)


def _recover(
    world: World, scenario: Scenario, found: list[tuple[str, str]], late_delivery: bool
) -> bool:
    """Fresh objects, recovery, reconciliation (faulty, then healed), GC past the TTL.

    Returns False when recovery could not proceed (the reason is in ``found``).
    A :class:`SimulatedCrash` propagates (a crash during recovery).
    """
    owner = world.owner  # the watched handle: faults by name, rejections recorded
    world.ext = world.new_externalizer()
    if scenario.journal_corrupt:
        _recover_refusing(world, found)
        return False  # a corrupt journal stops recovery by design: nothing else to check
    try:
        world.journal = world.new_journal()
        world.journal.recover()
    except Exception as exc:
        found.append(
            (Invariant.S6, f"journal does not open after the crash: {type(exc).__name__}: {exc}")
        )
        return False
    first = _externalize_once(world, found)  # before GC: a restart never reuses a name
    if first is not None:
        world.names_ever.add(first)
    owner.heal()
    for fault in scenario.recovery_faults:
        owner.arm(fault, times=1000)
    try:
        for report in world.journal.reconcile_pending(owner):
            if scenario.recovery_faults and report.status.value in {"committed", "aborted"}:
                found.append(
                    (Invariant.S3, f"{report.transaction_id} resolved on a faulty owner's answer")
                )
        owner.heal()
        if late_delivery:
            world.source.deliver_in_flight()
        world.journal.reconcile_pending(owner)
        world.gc()
    except Exception as exc:
        found.append((Invariant.L1, f"recovery failed: {type(exc).__name__}: {exc}"))
        return False
    return True


def _recover_refusing(world: World, found: list[tuple[str, str]]) -> None:
    """Recovery over a corrupt journal: GC must refuse (fail closed, S1)."""
    try:
        world.journal = world.new_journal()
        world.gc()
    except CorruptStateError:
        return
    found.append((S1_FAIL_CLOSED, "GC ran over a corrupt journal in recovery, no refusal"))


def _fail_closed(world: World, before: dict[str, bytes]) -> list[tuple[str, str]]:
    """S1 (fail closed): over a corrupt journal no artifact was unlinked or changed."""
    found: list[tuple[str, str]] = []
    for op, path in world.disk.io_log or []:
        if op == "unlink" and posixpath.dirname(posixpath.normpath(path)) == RESULTS:
            found.append((S1_FAIL_CLOSED, f"{path} unlinked over a corrupt journal"))
    after = _tool_results(world.disk)
    for name, data in sorted(before.items()):
        if after.get(name) != data:
            found.append((S1_FAIL_CLOSED, f"{name} deleted or changed over a corrupt journal"))
    return found


def _unknown_entries_kept(world: World) -> list[tuple[str, str]]:
    """S7: every planted entry that is not ours is still there, bytes (or directory) intact."""
    if not world.foreign:
        return []
    now = world.disk.snapshot()
    missing = object()
    return [
        (
            Invariant.S7,
            f"{posixpath.relpath(path, RESULTS)} is not ours, yet was deleted or changed",
        )
        for path, data in sorted(world.foreign.items())
        if now.get(path, missing) != data
    ]


def _externalize_once(world: World, found: list[tuple[str, str]]) -> str | None:
    """One new externalization; S6 if it took a name that existed right before."""
    existing = _tool_results(world.disk)
    try:
        ref = world.ext.externalize([b"after restart\n" * 100], "grep").artifact
    except Exception as exc:
        found.append(
            (Invariant.L1, f"externalize after restart failed: {type(exc).__name__}: {exc}")
        )
        return None
    assert ref is not None
    name = posixpath.basename(ref.path)
    if name in existing:
        found.append((Invariant.S6, f"new externalization overwrote existing {name}"))
    return name


def _finish(
    found: Iterable[tuple[str, str]], progress: Iterable[tuple[str, str]]
) -> tuple[list[CrashViolation], list[CrashViolation]]:
    def build(invariant: str, detail: str) -> CrashViolation:
        return CrashViolation(
            invariant=invariant, scenario="", target="", mode="", detail=detail, seed=""
        )

    return [build(*f) for f in found], [build(*p) for p in progress]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _inside(path: str, *, ancestors_ok: bool = False) -> bool:
    norm = posixpath.normpath(path)
    if norm == SESSION or norm.startswith(SESSION + "/"):
        return True
    return ancestors_ok and SESSION.startswith(norm.rstrip("/") + "/")


# -- the explorer -----------------------------------------------------------------------------


@attrs.define(kw_only=True)
class ExplorationResult:
    """What an exploration found; ``violations`` keeps at most ``max_violations`` examples."""

    states: int = 0
    violations: list[CrashViolation] = attrs.field(factory=list)
    progress: list[CrashViolation] = attrs.field(factory=list)
    violation_counts: Counter[str] = attrs.field(factory=Counter)
    progress_counts: Counter[str] = attrs.field(factory=Counter)
    ignored_counts: Counter[str] = attrs.field(factory=Counter)
    crash_point_states: Counter[str] = attrs.field(factory=Counter)
    recovery_crash_states: int = 0
    per_scenario: dict[str, int] = attrs.field(factory=dict)
    skipped: dict[str, str] = attrs.field(factory=dict)  # scenario -> why this owner cannot
    known_points: tuple[str, ...] = ()
    seconds: float = 0.0

    @property
    def violation_total(self) -> int:
        return sum(self.violation_counts.values())

    @property
    def uncovered(self) -> list[str]:
        return [p for p in self.known_points if self.crash_point_states[p] == 0]

    def to_dict(self) -> dict[str, Any]:
        return {
            "crash_states": self.states,
            "recovery_crash_states": self.recovery_crash_states,
            "violation_count": self.violation_total,
            "violations_by_invariant": dict(sorted(self.violation_counts.items())),
            "violations": [v.to_dict() for v in self.violations],
            "ignored_by_invariant": dict(sorted(self.ignored_counts.items())),
            "progress_count": sum(self.progress_counts.values()),
            "progress_findings": [v.to_dict() for v in self.progress],
            "crash_point_coverage": {
                p: self.crash_point_states[p]
                for p in sorted(set(self.known_points) | set(self.crash_point_states))
            },
            "uncovered_crash_points": self.uncovered,
            "per_scenario": dict(self.per_scenario),
            "skipped_scenarios": dict(self.skipped),
            "seconds": round(self.seconds, 2),
        }


def known_crash_points() -> tuple[str, ...]:
    """Every ``crash_point("...")`` name in the toolswap sources (the coverage goal)."""
    import toolswap

    root = Path(toolswap.__file__).parent
    names: set[str] = set()
    for source in root.rglob("*.py"):
        names.update(re.findall(r"crash_point\(\s*[\"']([^\"']+)[\"']", source.read_text()))
    return tuple(sorted(names))


class CrashExplorer:
    """Crash each scenario at every target in every mode; see the module docstring.

    ``seeds`` seeded choice streams are tried per target for each torn
    granularity and for ``dir_subset``; ``drop`` is deterministic and runs once.
    Violations of the invariants in ``ignore`` are counted apart and do not
    count as violations.

    ``owner`` makes a fresh :class:`~toolswap.faultinject.owner_source.OwnerSource`
    for every crash state (default: the built-in crashable owner); a scenario
    whose owner fault that owner cannot show is skipped and listed in
    :attr:`ExplorationResult.skipped` with the reason, never counted as passed.
    ``targets`` restricts the crash targets by kind (``io``, ``point``, ``end``).
    """

    def __init__(
        self,
        scenarios: Sequence[Scenario] = STANDARD_SCENARIOS,
        *,
        seeds: int = 2,
        modes: Sequence[str] = CRASH_MODES,
        max_violations: int = 50,
        ignore: Iterable[str] = (),
        recovery_crashes: int = 1,
        owner: Callable[[], OwnerSource] | None = None,
        target_kinds: Iterable[str] = ("io", "point", "end"),
    ) -> None:
        if seeds < 1:
            raise ValueError("seeds must be >= 1")
        unknown = [m for m in modes if m not in CRASH_MODES]
        if unknown:
            raise ValueError(f"unknown crash modes {unknown}; want some of {CRASH_MODES}")
        self.scenarios = tuple(scenarios)
        self.seeds = seeds
        self.modes = tuple(modes)
        self.max_violations = max_violations
        self.ignore = frozenset(ignore)
        if recovery_crashes < 0:
            raise ValueError("recovery_crashes must be >= 0")
        self.recovery_crashes = recovery_crashes
        self.owner = owner
        self.target_kinds = frozenset(target_kinds)
        unknown = sorted(self.target_kinds - {"io", "point", "end"})
        if unknown:
            raise ValueError(f"unknown target kinds {unknown}; want some of io, point, end")

    def targets(self, scenario: Scenario) -> list[Target]:
        """Every I/O op and crash-point pass of one uncrashed run, plus its end.

        Raises :class:`OwnerFaultUnsupported` when the owner cannot show a fault
        the scenario arms (in its run or its recovery).
        """
        world = World(None if self.owner is None else self.owner())
        try:
            for fault in scenario.recovery_faults:
                reason = world.source.unsupported(fault)
                if reason is not None:
                    raise OwnerFaultUnsupported(fault, reason)
            scenario.setup(world)
            disk = world.disk
            start_io = disk.io_count
            start_points = len(disk.crash_points_seen)
            _run_guarded(world, scenario)
        finally:
            world.source.close()
        targets = [Target("io", nth=k) for k in range(1, disk.io_count - start_io + 1)]
        seen: Counter[str] = Counter()
        for name in disk.crash_points_seen[start_points:]:
            seen[name] += 1
            targets.append(Target("point", name, seen[name]))
        targets.append(Target("end"))
        return [t for t in targets if t.kind in self.target_kinds]

    def variants(self) -> list[tuple[str, int | None, int]]:
        """(mode, torn granularity, seed index) for every crash of one target."""
        out: list[tuple[str, int | None, int]] = []
        for mode in self.modes:
            if mode == "drop":
                out.append((mode, None, 0))
            elif mode == "torn":
                out.extend((mode, g, i) for g in TORN_GRANULARITIES for i in range(self.seeds))
            else:
                out.extend((mode, None, i) for i in range(self.seeds))
        return out

    def explore(
        self,
        progress: Callable[[str, int], None] | None = None,
        *,
        on_state: Callable[[str, int, int], None] | None = None,
    ) -> ExplorationResult:
        """Run every crash state of every scenario.

        ``progress(scenario, count)`` hears each scenario's total when it ends;
        ``on_state(scenario, count, total)`` hears every crash state as it is
        checked (for a live display: it must not raise).
        """
        started = time.perf_counter()
        result = ExplorationResult(known_points=known_crash_points())
        for scenario in self.scenarios:
            count = 0
            try:
                targets = self.targets(scenario)
            except OwnerFaultUnsupported as exc:
                result.skipped[scenario.name] = exc.reason
                if progress is not None:
                    progress(scenario.name, 0)
                continue
            for target in targets:
                recovery_ops = 0
                for mode, granularity, index in self.variants():
                    seed = f"{scenario.name}|{target}|{mode}|{granularity}|{index}"
                    violations, findings, world = run_state(
                        scenario, target, mode, granularity=granularity, seed=seed, owner=self.owner
                    )
                    recovery_ops = max(recovery_ops, world.recovery_ops)
                    count += 1
                    if on_state is not None:
                        on_state(scenario.name, count, result.states + count)
                    if target.kind == "point":
                        result.crash_point_states[target.name] += 1
                    shown = mode if granularity is None else f"{mode}/{granularity}"
                    self._record(result, violations, findings, scenario, target, shown, seed)
                for index in range(self.recovery_crashes if recovery_ops else 0):
                    mode = self.modes[index % len(self.modes)]
                    seed = f"{scenario.name}|{target}|{mode}|recovery|{index}"
                    at = 1 + random.Random(seed).randrange(recovery_ops)
                    violations, findings, world = run_state(
                        scenario, target, mode, seed=seed, recovery_crash_at=at, owner=self.owner
                    )
                    count += 1
                    if on_state is not None:
                        on_state(scenario.name, count, result.states + count)
                    result.recovery_crash_states += world.recovery_crashed
                    shown = f"{mode}+recovery-crash@io#{at}"
                    self._record(result, violations, findings, scenario, target, shown, seed)
            result.per_scenario[scenario.name] = count
            result.states += count
            if progress is not None:
                progress(scenario.name, count)
        result.seconds = time.perf_counter() - started
        return result

    def _record(
        self,
        result: ExplorationResult,
        violations: list[CrashViolation],
        findings: list[CrashViolation],
        scenario: Scenario,
        target: Target,
        mode: str,
        seed: str,
    ) -> None:
        def place(v: CrashViolation) -> CrashViolation:
            return attrs.evolve(v, scenario=scenario.name, target=str(target), mode=mode, seed=seed)

        for v in violations:
            if v.invariant in self.ignore:
                result.ignored_counts[v.invariant] += 1
                continue
            result.violation_counts[v.invariant] += 1
            if len(result.violations) < self.max_violations:
                result.violations.append(place(v))
        for v in findings:
            result.progress_counts[v.invariant] += 1
            if len(result.progress) < self.max_violations:
                result.progress.append(place(v))


def replay(
    violation: CrashViolation,
    scenarios: Sequence[Scenario] = STANDARD_SCENARIOS,
    owner: Callable[[], OwnerSource] | None = None,
) -> tuple[list[CrashViolation], list[CrashViolation], World]:
    """Re-run the crash state of ``violation``: (violations, progress, world) like run_state."""
    scenario = next(s for s in scenarios if s.name == violation.scenario)
    shown, _, crash_at = violation.mode.partition("+recovery-crash@io#")
    mode, _, gran = shown.partition("/")
    text = violation.target
    if text == "end":
        target = Target("end")
    elif text.startswith("io#"):
        target = Target("io", nth=int(text[3:]))
    else:
        name, _, nth = text.rpartition("#")
        target = Target("point", name, int(nth))
    granularity = int(gran) if gran else None
    return run_state(
        scenario,
        target,
        mode,
        granularity=granularity,
        seed=violation.seed,
        recovery_crash_at=int(crash_at) if crash_at else None,
        owner=owner,
    )
