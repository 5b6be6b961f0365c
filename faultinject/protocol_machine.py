"""The implementation-vs-model machine: the real implementation next to the spec, any owner.

Shipped in the package (``toolswap.faultinject.protocol_machine``) so that an
adapter author's CI, which has no toolswap source tree, can run it against
their owner: :func:`machine_with_owner` binds a machine class to an owner
factory (:mod:`toolswap.faultinject.owner_source`), and
:func:`toolswap.testing.deep.run_protocol_machine` runs it for a harness.
Hypothesis is imported here and in :mod:`.crashing_machine` only.

Theory of operation
-------------------
Each rule does one operation twice:

1. on a *clone* of the :class:`Expected` -- the expected outcome is taken from the
   spec's tables and functions (``spec.lease.step``, ``spec.owner.apply`` /
   ``seal`` / ``observe``, ``spec.reconcile.decide`` / ``after_seal``,
   ``spec.cleanup.plan`` / ``revalidate``), never from rules written again here;
2. on the real objects (externalizer, journal, crashable owner, cleanup) over a
   file-system seam.

The outcome is compared, and only then does the clone become the model.  After
every step the invariant ``observables_match_model`` compares what the model
predicts with what the implementation shows: per-transaction phases, intents,
claims (by source id), pending ids in journal order, the owner's visible rows
and generations, which artifact files exist and their bytes.  The invariant
``s1_to_s7`` calls the spec's own S1-S7 (``toolswap.spec.invariants``, the
functions the spec explorer and the crash explorer call) on the real state, as
:func:`.observe.observe_real` shows it, so they also hold the implementation to
account after a crash, when the model adopts the recovered state.

The rules (one per operation or fault; each names what the spec decides):

* operations: ``externalize``, ``prepare``, ``publish_reference`` (ok,
  rejected, error before the write, lost acknowledgement after the write, write
  in flight), ``direct_transition`` (commit / abort / release),
  ``remove_reference`` (ok, error, lost acknowledgement), ``reconcile_reference``
  and ``reconcile_pending`` (every observation: published with the right or
  another identity, unknown, inspection error, absent unsealed or sealed, a lost
  tombstone, a stale seal), ``gc`` / ``gc_plan`` / ``gc_apply`` and
  ``prepare_during_gc`` (a claim lands between plan and apply), ``read_artifact``
  and ``read_hostile_reference`` (a Memory record whose path points outside);
* the world: ``advance_clock``, ``tamper`` (artifact bytes), ``tamper_journal``
  (one byte of a complete record: every reader must refuse with a typed error,
  cleanup must refuse and delete nothing), ``plant_foreign`` (a symlink out of
  the session, a directory, an odd-named file in ``tool-results/``);
* the owner: ``foreign_publish`` (another identity under a fresh id),
  ``deliver_in_flight``, ``owner_crash`` (each in-flight write lands or is lost).

The machine on the simulated disk (:class:`CrashingMachine`) adds the crash
rules: ``dirty_reboot`` between operations (everything returned must be
durable: the recovered state equals the model exactly) and ``crash_during``,
which arms a named crash point or the k-th I/O operation, runs an operation,
reboots in a drawn mode and checks that the recovered state is a *prefix* of
what the operation meant to do (each touched transaction is at a state on its
spec path; no untouched file changed) before adopting it.

The owner
---------
The machine reaches its owner through an
:class:`~toolswap.faultinject.owner_source.OwnerSource` (default: the
built-in crashable owner) and a watched handle.  What the owner holds is
compared with the model **through the protocol only**: a fence on every id of
:data:`TXNS` (:class:`~toolswap.faultinject.owner_source.ProtocolView`) gives
each id's state (published, tombstone, absent), identity and generation.
Generations are opaque: the model's numbers and the owner's values must be in
one-to-one correspondence per id (a new value on every durable change, never
an old one again).  Rejections are recorded at the call site.  A fault that
the owner cannot show runs as the nearest outcome it can (``in_flight`` as
``error_before_write``, the others as the fault-free outcome) and says so
with ``hypothesis.event``; ``owner_crash`` restarts a harness's store for real
(every handle closed, ``restart_store()`` if offered, a new handle).

A switch kept for study:

* ``TOLERATE_NAME_REUSE`` (off): a name that cleanup deleted must never be
  handed out again for other bytes (S6).  The durable high-water mark
  (``toolswap.high_water``) guarantees it; before it, the externalizer numbered
  after the highest name on disk and the machine had to tolerate the reuse.
  Turn it on only to study an old implementation (it records ``KNOWN BUG``).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import posixpath
from collections.abc import Callable
from typing import Any, TypeVar

import attrs
from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from toolswap.spec import cleanup as spec_cleanup
from toolswap.spec import lease as spec_lease
from toolswap.spec import owner as spec_owner
from toolswap.spec import reconcile as spec_reconcile
from toolswap.spec.errors import IllegalTransition
from toolswap.spec.invariants import findings
from toolswap.spec.lease import LeaseAction, LeaseState
from toolswap.spec.observable import Observable
from toolswap.spec.owner import OwnerRecord, OwnerState

from toolswap.cleanup import ArtifactCleanupPolicy, CleanupRefused
from toolswap.domain import (
    ArtifactReference,
    ArtifactRetentionClaim,
    format_source_id,
    is_artifact_filename,
)
from toolswap.errors import ArtifactIntegrityError, ArtifactNotOwnedError
from toolswap.externalizer import ToolResultExternalizer
from toolswap.journal import (
    ArtifactRetentionJournal,
    DanglingReferenceError,
    IllegalTransitionError,
    TransactionExistsError,
    UnknownTransactionError,
)
from toolswap.journal_format import JournalCorruptError
from toolswap.owner import (
    ArtifactPublicationRejected,
    OwnerConflictError,
    owner_publisher,
    owner_remover,
)

from .observe import observe_real
from .owner import OwnerFault
from .owner_source import CrashableSource, OwnerSource, ProtocolView, WatchedOwner

__all__ = [
    "CONTENTS",
    "MACHINE_EXAMPLES",
    "OUTSIDE_BYTES",
    "PUBLISH_OUTCOMES",
    "RECONCILE_ANSWERS",
    "REMOVE_OUTCOMES",
    "THRESHOLD_BYTES",
    "TTLS",
    "TXNS",
    "Crashed",
    "LeaseAction",
    "LeaseState",
    "Expected",
    "OwnerRecord",
    "OwnerState",
    "ProtocolMachine",
    "RecordingFS",
    "Touch",
    "claim_identity",
    "identity",
    "lease_of",
    "machine_with_owner",
    "name_of",
    "owner_kind",
    "sha",
]


def owner_kind(record: spec_owner.OwnerRecord) -> str:
    """The kind a fence must show for a model record (:attr:`Seen.kind`)."""
    if record.state is spec_owner.OwnerState.PUBLISHED:
        return "published"
    if record.state is spec_owner.OwnerState.TOMBSTONED:
        return "tombstone"
    return "absent"


def tombstone_first(record: spec_owner.OwnerRecord) -> spec_owner.OwnerRecord:
    """The record after ``remove`` of an id, for a publish that must then be refused (O3, O4)."""
    removed, _ = spec_owner.apply(record, spec_owner.OwnerAction.REMOVE)
    return removed


TOOL = "probe"
THRESHOLD_BYTES = 32
TXNS = tuple(f"t{i}" for i in range(8))
PUBLISH_OUTCOMES = ("ok", "rejected", "error_before_write", "lost_ack", "in_flight")
REMOVE_OUTCOMES = ("ok", "remove_error", "remove_lost_ack")
RECONCILE_ANSWERS = ("truthful", "unknown", "inspect_error", "lost_tombstone", "stale_seal")
#: Outcome or answer -> the owner fault (by its built-in name) that produces it.
PUBLISH_FAULTS: dict[str, OwnerFault] = {
    "rejected": "reject",
    "error_before_write": "fail_before_write",
    "lost_ack": "lost_ack",
    "in_flight": "in_flight",
}
REMOVE_FAULTS: dict[str, OwnerFault] = {
    "remove_error": "remove_error",
    "remove_lost_ack": "remove_lost_ack",
}
RECONCILE_FAULTS: dict[str, OwnerFault] = {
    "unknown": "unknown",
    "inspect_error": "inspect_error",
    "lost_tombstone": "lost_tombstone",
    "stale_seal": "stale_seal",
}
#: What may be planted in tool-results/ behind toolswap's back: (name, kind).
FOREIGN = (
    ("tool_result_950.txt", "symlink"),  # an artifact name, but a link out of the session
    ("notes.txt", "regular"),  # not an artifact name
    ("tool_result_960.txt", "directory"),
    ("link.txt", "symlink"),
)
JOURNAL_FLIPS = (0x01, 0x20, 0xFF)
#: The bytes of a file outside the session that a planted symlink points at (S7).
OUTSIDE_BYTES = b"outside the session: never read, never deleted\n"
TTLS = (0, 60, 86_400)
#: The fewest examples a machine test runs, whatever the profile (see the test modules).
MACHINE_EXAMPLES = 150
CLOCK_STEPS = (1, 90, 100_000)

#: Artifact contents: text lines, non-UTF-8 bytes, repeats (equal digests under two names).
CONTENTS = st.lists(
    st.sampled_from([b"a", b"line\n", b"\xff\xfe", b"x" * 20, b"\n", b"caf\xc3\xa9 ok\n"]),
    max_size=10,
).map(b"".join)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def identity(source_id: str, content_sha256: str) -> int:
    """The owner's identity of a reference (source id + full digest) as a spec digest."""
    return int(sha(f"{source_id}\0{content_sha256}".encode()), 16)


def claim_identity(claim: ArtifactRetentionClaim) -> int:
    return identity(claim.source_id, claim.content_sha256)


def name_of(source_id: str) -> str:
    return source_id.split(":")[2]


def lease_of(phase: object) -> LeaseState:
    return LeaseState(str(getattr(phase, "value", phase)))


class Crashed(Exception):
    """Raised by :meth:`ProtocolMachine.real` when the simulated disk crashed inside a call."""


class RecordingFS:
    """A pass-through seam that records every path an operation touches (for S7)."""

    _PATH_OPS = (
        "create_exclusive",
        "open_append",
        "open_read",
        "open_lock",
        "lstat",
        "unlink",
        "listdir",
        "makedirs",
        "fsync_dir",
    )

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.log: list[tuple[str, str]] = []
        for op in self._PATH_OPS:
            setattr(self, op, self._recording(op))

    def _recording(self, op: str) -> Callable[..., Any]:
        target = getattr(self.inner, op)

        def call(path: str, *args: Any, **kwargs: Any) -> Any:
            self.log.append((op, path))
            return target(path, *args, **kwargs)

        return call

    def rename(self, source: str, target: str) -> None:
        self.log.append(("rename", source))
        self.log.append(("rename", target))
        self.inner.rename(source, target)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@attrs.define
class Expected:
    """What the spec says the world is: leases, owner records, files (the machine's ``model``)."""

    lease: dict[str, LeaseState] = attrs.Factory(dict)
    intent: dict[str, ArtifactRetentionClaim] = attrs.Factory(dict)
    order: list[str] = attrs.Factory(list)  # transaction ids in PREPARED (journal) order
    owner: dict[str, OwnerRecord] = attrs.Factory(dict)
    in_flight: list[tuple[str, ArtifactRetentionClaim]] = attrs.Factory(list)
    files: dict[str, bytes] = attrs.Factory(dict)  # artifact name -> bytes now
    first: dict[str, bytes] = attrs.Factory(dict)  # artifact name -> bytes first written (S6)
    tampered: set[str] = attrs.Factory(set)
    foreign: dict[str, str] = attrs.Factory(dict)  # planted entry name -> kind
    refs: list[ArtifactReference] = attrs.Factory(list)
    # owner identity (claim_identity) -> (source id, digest) of every claim ever published
    identities: dict[int, tuple[str, str]] = attrs.Factory(dict)
    # txn -> identities its CONFLICT records name (reconcile saw the owner show them)
    conflicts: dict[str, tuple[tuple[str, str], ...]] = attrs.Factory(dict)

    def clone(self) -> Expected:
        return Expected(
            **{f.name: copy.copy(getattr(self, f.name)) for f in attrs.fields(Expected)}
        )

    def phase(self, txn: str) -> LeaseState:
        return self.lease.get(txn, LeaseState.NEW)

    def step(
        self, txn: str, action: LeaseAction, claim: ArtifactRetentionClaim | None = None
    ) -> LeaseState:
        """Apply a lease action through the spec table (raises IllegalTransition)."""
        after = spec_lease.step(self.phase(txn), action)
        if action is LeaseAction.PREPARE:
            assert claim is not None
            self.intent[txn] = claim
            self.order.append(txn)
        self.lease[txn] = after
        return after

    def record(self, txn: str) -> OwnerRecord:
        return self.owner.get(txn, OwnerRecord())

    def published(self, claim: ArtifactRetentionClaim) -> int:
        """Remember the identity a publish stores (a conflict names it later)."""
        key = claim_identity(claim)
        self.identities[key] = (claim.source_id, claim.content_sha256)
        return key

    def pending(self) -> list[str]:
        return [t for t in self.order if spec_lease.is_pending(self.lease[t])]

    def spec_claims(self, name: str) -> list[spec_cleanup.Claim]:
        """Spec claims on one artifact name: one per lease that protects (PREPARED/COMMITTED)."""
        out = []
        for txn in self.order:
            state, claim = self.lease[txn], self.intent[txn]
            if name_of(claim.source_id) != name or not spec_lease.protects(state):
                continue
            out.append(
                spec_cleanup.Claim(
                    digest=int(claim.content_sha256, 16),
                    pending=spec_lease.is_pending(state),
                    reference_count=claim.reference_count,
                    retain_until=claim.retain_until,
                )
            )
        for txn, seen in self.conflicts.items():  # protected like the intent, no expiry
            state = self.lease[txn]
            if not spec_lease.protects(state):
                continue
            out.extend(
                spec_cleanup.Claim(digest=int(digest, 16), pending=spec_lease.is_pending(state))
                for source_id, digest in seen
                if name_of(source_id) == name
            )
        return out

    def claimed_names(self) -> set[str]:
        names = {name_of(self.intent[t].source_id) for t in self.order}
        return names | {name_of(i) for seen in self.conflicts.values() for i, _ in seen}


@attrs.frozen
class Touch:
    """What an operation may change, for judging a crash in the middle of it."""

    actions: dict[str, tuple[LeaseAction, ...]] = attrs.Factory(dict)
    may_delete: frozenset[str] = frozenset()
    may_create: bool = False


class ProtocolMachine(RuleBasedStateMachine):
    """Rules shared by both machines; subclasses provide the seam (see the module doc)."""

    TOLERATE_NAME_REUSE = False

    # -- the world ------------------------------------------------------------------

    def make_seam(self) -> tuple[Any, str]:  # pragma: no cover - abstract
        raise NotImplementedError

    def advance_seam_time(self, seconds: float) -> None:
        """Move the seam's file timestamps on with the clock (real disks do it alone)."""

    def tamper_bytes(self, path: str, data: bytes) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def raw_bytes(self, path: str) -> bytes | None:  # pragma: no cover - abstract
        raise NotImplementedError

    def plant(self, path: str, kind: str) -> None:  # pragma: no cover - abstract
        """Create a symlink (to :attr:`outside`), a regular file or a directory at ``path``."""
        raise NotImplementedError

    def entry_kind(self, path: str) -> str | None:
        """What ``lstat`` says ``path`` is now (``None``: it does not exist)."""
        try:
            facts = self.base_fs.lstat(path)
        except FileNotFoundError:
            return None
        if facts.is_symlink:
            return "symlink"
        return "regular" if facts.is_regular else "directory"

    def durable_journal(self) -> bytes:
        return self.raw_bytes(self.journal_path) or b""

    def __init__(self) -> None:
        super().__init__()
        self.base_fs, self.root = self.make_seam()
        self.outside = self.make_outside()
        self.fs = RecordingFS(self.base_fs)
        self.now = self.start_time()
        self.model = Expected()
        self.source = self.make_owner_source()
        self.owner = WatchedOwner(self.source, prepared_durable=self._prepared_durable)
        self._view: tuple[int, ProtocolView] | None = None
        self._generations: dict[str, dict[int, object]] = {}  # txn -> model gen -> owner gen
        self.plan: Any = None
        self.plan_facts: dict[str, spec_cleanup.EntryFacts | None] = {}
        self.journal_prefix = b""
        self.session_id = os.path.basename(self.root)
        self.journal_path = posixpath.join(self.root, "retention-leases.jsonl")
        self.results_dir = posixpath.join(self.root, "tool-results")
        self.boot()

    def start_time(self) -> float:
        return 1_700_000_000.0

    #: Makes the owner source of each example (``None``: the built-in crashable owner).
    owner_factory: Callable[[], OwnerSource] | None = None

    def make_owner_source(self) -> OwnerSource:
        factory = type(self).owner_factory
        return CrashableSource() if factory is None else factory()

    def teardown(self) -> None:
        self.source.close()

    # -- the owner, through the protocol ---------------------------------------------

    def view(self) -> ProtocolView:
        """Every id of :data:`TXNS` as a fence shows it (once per change of the store)."""
        if self._view is None or self._view[0] != self.owner.changes:
            self._view = (self.owner.changes, self.owner.view(TXNS))
        return self._view[1]

    def store_changed(self) -> None:
        """Something changed the store behind the watched handle (a crash, a late write)."""
        self.owner.changes += 1

    def same_generation(self, txn: str, model: int, observed: object) -> bool:
        """``observed`` is the owner's value for the model's generation ``model`` of ``txn``.

        The first time a model generation is seen, its owner value is learned;
        an owner value already bound to another generation of ``txn`` is a reuse.
        """
        known = self._generations.setdefault(txn, {})
        if model in known:
            return known[model] == observed
        if any(value == observed for value in known.values()):
            return False
        known[model] = observed
        return True

    def remapped(self, wanted: str, fault: str | None, fallback: str) -> str:
        """``wanted`` if the owner can show ``fault``, else ``fallback`` (with an event)."""
        if fault is None or self.source.unsupported(fault) is None:
            return wanted
        event(f"owner cannot show {fault}: {wanted} runs as {fallback}")
        return fallback

    def make_outside(self) -> str:  # pragma: no cover - abstract
        """Write :data:`OUTSIDE_BYTES` to a file outside the session; return its path."""
        raise NotImplementedError

    def boot(self) -> None:
        """Fresh objects over whatever the seam holds (start, or after a reboot)."""
        self.boots = getattr(self, "boots", 0) + 1
        self.ext = ToolResultExternalizer(
            self.root,
            fs=self.fs,
            clock=lambda: self.now,
            environ={},
            threshold_bytes=THRESHOLD_BYTES,
        )
        self.journal = ArtifactRetentionJournal(self.root, fs=self.fs, clock=lambda: self.now)

    def real(self, call: Callable[[], Any]) -> tuple[Any, BaseException | None]:
        """Run one real call: (value, None) or (None, the exception); then disarm the owner."""
        try:
            return call(), None
        except Exception as exc:  # compared against the spec's expectation by the caller
            return None, exc
        finally:
            self.owner.heal()

    def _prepared_durable(self, txn: str) -> bool:
        """S2: the owner is asked to publish ``txn``; PREPARED must already be durable."""
        for record in self._records(self.durable_journal()):
            if record.get("transaction_id") == txn and record.get("phase") == "PREPARED":
                return True
        return False

    @staticmethod
    def _records(data: bytes) -> list[dict[str, Any]]:
        out = []
        for piece in data.split(b"\n")[:-1]:
            out.append(json.loads(piece))
        return out

    # -- draws ----------------------------------------------------------------------

    def draw_claim(self, data: st.DataObject) -> ArtifactRetentionClaim:
        ref = data.draw(st.sampled_from(self.model.refs), label="artifact")
        count = data.draw(st.integers(1, 2), label="reference_count")
        retain = data.draw(st.sampled_from([None, 30.0, 200_000.0]), label="retain_for")
        return ArtifactRetentionClaim.from_memory_reference(
            ref.for_memory(),
            reference_count=count,
            retain_until=None if retain is None else self.now + retain,
        )

    def draw_txn(self, data: st.DataObject, *prefer: LeaseState) -> str:
        """Mostly a transaction the journal knows (the interesting cases), else any id.

        With ``prefer``, a known transaction in one of those phases is drawn first
        when there is one (removal wants COMMITTED leases, reconciliation PREPARED).
        """
        known = sorted(self.model.lease)
        if known and data.draw(st.integers(0, 3), label="known txn?") > 0:
            preferred = [t for t in known if self.model.lease[t] in prefer]
            if preferred and data.draw(st.integers(0, 3), label="preferred phase?") > 0:
                return data.draw(st.sampled_from(preferred), label="txn")
            return data.draw(st.sampled_from(known), label="txn")
        return data.draw(st.sampled_from(TXNS), label="txn")

    # -- expectations shared by prepare and publish ------------------------------------

    def expected_prepare_error(
        self, m: Expected, txn: str, claim: ArtifactRetentionClaim
    ) -> type[BaseException] | None:
        try:
            spec_lease.step(m.phase(txn), LeaseAction.PREPARE)
        except IllegalTransition:
            return TransactionExistsError  # an existing id is never replayed
        name = name_of(claim.source_id)
        if name not in m.files:
            return DanglingReferenceError
        if sha(m.files[name]) != claim.content_sha256:
            return ArtifactIntegrityError
        return None

    @staticmethod
    def expect(exc: BaseException | None, wanted: type[BaseException] | None, what: str) -> None:
        if wanted is None:
            assert exc is None, f"{what}: unexpected {type(exc).__name__}: {exc}"
        elif wanted is Exception:  # "maybe written": anything but the two certain answers
            assert exc is not None and not isinstance(
                exc, (ArtifactPublicationRejected, OwnerConflictError)
            ), (
                f"{what}: expected an error that means 'maybe written', got "
                f"{'success' if exc is None else type(exc).__name__ + ': ' + str(exc)}"
            )
        else:
            assert isinstance(exc, wanted), (
                f"{what}: expected {wanted.__name__}, got "
                f"{'success' if exc is None else type(exc).__name__ + ': ' + str(exc)}"
            )

    # -- operation bodies (also driven by crash_during) ----------------------------------

    def op_externalize(self, content: bytes, chunked: bool) -> Touch:
        touch = Touch(may_create=True)
        m = self.model.clone()
        output: Any = [content[:7], content[7:]] if chunked else content
        result, exc = self.call(
            lambda: self.ext.externalize(iter(output) if chunked else output, TOOL), touch
        )
        self.expect(exc, None, "externalize")
        if len(content) <= THRESHOLD_BYTES:
            assert result.artifact is None
            assert result.context_text == content.decode("utf-8", errors="replace")
            event("externalize: below threshold")
        else:
            ref = result.artifact
            assert ref is not None and ref.content_sha256 == sha(content)
            name = name_of(ref.source.source_id)
            assert name not in m.files, f"S6: exclusive create handed out existing name {name}"
            self.adopt_name(m, name, content)
            m.files[name] = content
            m.refs.append(ref)
            event("externalize: artifact")
        self.model = m
        return touch

    def adopt_name(self, m: Expected, name: str, content: bytes) -> None:
        if name in m.first and m.first[name] != content:
            if not self.TOLERATE_NAME_REUSE:
                raise AssertionError(f"S6: artifact name {name} was reused for other bytes")
            event("KNOWN BUG: a deleted artifact name was written again")
        m.first[name] = content
        m.tampered.discard(name)

    def op_prepare(self, txn: str, claim: ArtifactRetentionClaim) -> Touch:
        touch = Touch(actions={txn: (LeaseAction.PREPARE,)})
        m = self.model.clone()
        wanted = self.expected_prepare_error(m, txn, claim)
        _, exc = self.call(lambda: self.journal.prepare(claim, txn, now=self.now), touch)
        self.expect(exc, wanted, f"prepare {txn}")
        if wanted is None:
            m.step(txn, LeaseAction.PREPARE, claim)
        event(f"prepare: {'ok' if wanted is None else wanted.__name__}")
        self.model = m
        return touch

    def op_publish(self, txn: str, claim: ArtifactRetentionClaim, outcome: str) -> Touch:
        fault = PUBLISH_FAULTS.get(outcome)
        if outcome == "in_flight":
            fallback = self.remapped("error_before_write", "fail_before_write", "ok")
            outcome = self.remapped(outcome, fault, fallback)
        else:
            outcome = self.remapped(outcome, fault, "ok")
        fault = PUBLISH_FAULTS.get(outcome)
        uncertain = self.source.uncertain_error
        resolve = (LeaseAction.COMMIT,) if outcome in ("ok",) else (LeaseAction.ABORT,)
        touch = Touch(actions={txn: (LeaseAction.PREPARE, *resolve)})
        m = self.model.clone()
        wanted = self.expected_prepare_error(m, txn, claim)
        label = outcome
        if wanted is None:
            m.step(txn, LeaseAction.PREPARE, claim)
            record = m.record(txn)
            if outcome == "rejected" and self.source.reject_by_tombstone:
                # the harness's rejection: a tombstone lands first, the publish is refused (O3)
                m.owner[txn] = tombstone_first(record)
                wanted = ArtifactPublicationRejected
            elif outcome == "rejected":
                wanted = ArtifactPublicationRejected
            elif outcome == "error_before_write":
                wanted = uncertain
            elif outcome == "in_flight":
                wanted = TimeoutError
                m.in_flight.append((txn, claim))
            elif record.state is OwnerState.PUBLISHED and record.digest != claim_identity(claim):
                wanted, label = OwnerConflictError, "conflict"  # O1: another identity, no write
            else:
                after, result = spec_owner.apply(
                    record, spec_owner.OwnerAction.PUBLISH, m.published(claim)
                )
                if result is spec_owner.OwnerResult.REFUSED:
                    wanted, label = ArtifactPublicationRejected, "refused by tombstone"
                else:
                    m.owner[txn] = after
                    wanted = None if outcome == "ok" else uncertain
            if wanted is None:
                m.step(txn, LeaseAction.COMMIT)
            elif wanted is ArtifactPublicationRejected:
                m.step(txn, LeaseAction.ABORT)
        else:
            label = wanted.__name__

        def publish() -> Any:
            if fault is not None:
                self.owner.arm(fault)
            return self.journal.publish_reference(
                claim, owner_publisher(self.owner, txn, claim), transaction_id=txn, now=self.now
            )

        _, exc = self.call(publish, touch)
        self.expect(exc, wanted, f"publish {txn} ({outcome})")
        event(f"publish: {label}")
        self.model = m
        return touch

    def op_remove(self, txn: str, outcome: str) -> Touch:
        outcome = self.remapped(outcome, REMOVE_FAULTS.get(outcome), "ok")
        fault = REMOVE_FAULTS.get(outcome)
        touch = Touch(actions={txn: (LeaseAction.RELEASE,)})
        m = self.model.clone()
        before = m.phase(txn)
        wanted: type[BaseException] | None = None
        calls_owner = False
        try:
            after = spec_lease.step(before, LeaseAction.RELEASE)
        except IllegalTransition:
            wanted = UnknownTransactionError if before is LeaseState.NEW else IllegalTransitionError
        else:
            if after is not before:
                calls_owner = True
                if outcome != "remove_error":
                    m.owner[txn], _ = spec_owner.apply(m.record(txn), spec_owner.OwnerAction.REMOVE)
                if outcome == "ok":
                    m.step(txn, LeaseAction.RELEASE)
                else:
                    wanted = self.source.uncertain_error

        def remove() -> Any:
            if fault is not None:
                self.owner.arm(fault)
            return self.journal.remove_reference(txn, owner_remover(self.owner, txn), now=self.now)

        _, exc = self.call(remove, touch)
        self.expect(exc, wanted, f"remove {txn} ({outcome})")
        event(f"remove: {outcome if calls_owner else before.name}")
        self.model = m
        return touch

    def op_direct(self, txn: str, action: LeaseAction) -> Touch | None:
        """commit/abort/release called directly -- only with the owner's evidence (S3, S4)."""
        touch = Touch(actions={txn: (action,)})
        m = self.model.clone()
        before = m.phase(txn)
        wanted: type[BaseException] | None = None
        try:
            after = spec_lease.step(before, action)
        except IllegalTransition:
            wanted = UnknownTransactionError if before is LeaseState.NEW else IllegalTransitionError
        else:
            if after is not before:
                record = m.record(txn)
                evidence = {
                    LeaseAction.COMMIT: record.state is OwnerState.PUBLISHED
                    and record.digest == claim_identity(m.intent[txn]),
                    LeaseAction.ABORT: record.state is OwnerState.TOMBSTONED,
                    LeaseAction.RELEASE: record.state is not OwnerState.PUBLISHED,
                }[action]
                if not evidence:
                    return None  # a careful caller never does this; reconciliation will
                m.step(txn, action)
        method = {
            LeaseAction.COMMIT: self.journal.commit,
            LeaseAction.ABORT: self.journal.abort,
            LeaseAction.RELEASE: self.journal.release,
        }[action]
        result, exc = self.call(lambda: method(txn, now=self.now), touch)
        self.expect(exc, wanted, f"{action.value} {txn} from {before.name}")
        if exc is None:
            assert lease_of(result.phase) is m.phase(txn)
        outcome = m.phase(txn).name if exc is None else "refused"
        event(f"direct {action.value}: {before.name} -> {outcome}")
        self.model = m
        return touch

    def expected_reconcile(
        self, m: Expected, txn: str, answered: bool, seal_lost: bool, seal_stale: bool = False
    ) -> Any:
        """The spec's status for one reconciliation, updating ``m`` (owner seal, lease)."""
        state = m.phase(txn)
        record = m.record(txn)
        observation = spec_owner.observe(record, claim_identity(m.intent[txn]), answered=answered)
        kind = spec_reconcile.classify_observation(observation)
        decision = spec_reconcile.decide(state, kind)
        if state is LeaseState.PREPARED:
            event(f"reconcile observation: {kind.value}")
        if decision.seal_first:
            if seal_lost:
                # the adapter's seal raised: the tombstone may or may not exist -> unknown
                return spec_reconcile.ReconcileStatus.PENDING_UNKNOWN
            # stale: the generation moved between the observation and the CAS
            seen = observation.generation - 1 if seal_stale else observation.generation
            m.owner[txn], sealed = spec_owner.seal(record, seen)
            decision = spec_reconcile.after_seal(sealed)
        if decision.record_observed:  # a CONFLICT record names what the owner shows
            named = m.identities[record.digest]
            if named not in m.conflicts.get(txn, ()):
                m.conflicts[txn] = (*m.conflicts.get(txn, ()), named)
        if decision.journal_action is not None:
            m.step(txn, decision.journal_action)
        return decision.status

    def op_reconcile(self, txn: str, answer: str) -> Touch:
        answer = self.remapped(answer, RECONCILE_FAULTS.get(answer), "truthful")
        fault = RECONCILE_FAULTS.get(answer)
        touch = Touch(actions={txn: (LeaseAction.COMMIT, LeaseAction.ABORT)})
        m = self.model.clone()
        wanted_exc: type[BaseException] | None = None
        status = None
        if m.phase(txn) is LeaseState.NEW:
            wanted_exc = UnknownTransactionError
            try:
                spec_reconcile.decide(LeaseState.NEW, spec_reconcile.ObservationKind.UNKNOWN)
            except IllegalTransition:
                pass
            else:  # pragma: no cover - the spec would have to change
                raise AssertionError("spec: reconciling an unknown transaction became legal")
        else:
            status = self.expected_reconcile(
                m,
                txn,
                answer not in ("unknown", "inspect_error"),
                answer == "lost_tombstone",
                answer == "stale_seal",
            )

        def reconcile() -> Any:
            if fault is not None:
                self.owner.arm(fault)
            return self.journal.reconcile_reference(txn, self.owner, now=self.now)

        report, exc = self.call(reconcile, touch)
        self.expect(exc, wanted_exc, f"reconcile {txn} ({answer})")
        if status is not None:
            assert report.status.value == status.value, (
                f"reconcile {txn} ({answer}): spec says {status.value}, got {report.status.value}"
            )
            assert report.transaction_id == txn
            event(f"reconcile: {status.value}")
        self.model = m
        return touch

    def op_reconcile_pending(self, answer: str) -> Touch:
        answer = self.remapped(answer, RECONCILE_FAULTS.get(answer), "truthful")
        m = self.model.clone()
        pending = m.pending()
        touch = Touch(actions={t: (LeaseAction.COMMIT, LeaseAction.ABORT) for t in pending})
        expected = [
            (t, self.expected_reconcile(m, t, answer == "truthful", False).value) for t in pending
        ]

        def reconcile_all() -> Any:
            if answer == "unknown" and pending:
                self.owner.arm("unknown", times=len(pending))
            return self.journal.reconcile_pending(self.owner, now=self.now)

        reports, exc = self.call(reconcile_all, touch)
        self.expect(exc, None, "reconcile_pending")
        got = [(r.transaction_id, r.status.value) for r in reports]
        assert got == expected, f"reconcile_pending: spec {expected}, got {got}"
        event(f"reconcile_pending: {len(pending)} pending")
        self.model = m
        return touch

    # -- cleanup -------------------------------------------------------------------------

    def spec_facts(self, m: Expected, name: str) -> spec_cleanup.EntryFacts | None:
        if name in m.foreign:
            facts = self.base_fs.lstat(posixpath.join(self.results_dir, name))
            kind = {
                "symlink": spec_cleanup.EntryKind.SYMLINK,
                "directory": spec_cleanup.EntryKind.DIRECTORY,
                "regular": spec_cleanup.EntryKind.REGULAR,
            }[m.foreign[name]]
            return spec_cleanup.EntryFacts(
                kind=kind,
                owned_name=is_artifact_filename(name),
                digest=int(sha(self.raw_bytes(posixpath.join(self.results_dir, name)) or b""), 16)
                if m.foreign[name] == "regular"
                else 0,
                size=facts.size,
                mtime=facts.mtime_ns / 1e9,
                mtime_exact=facts.mtime_ns,
                device=facts.device,
                inode=facts.inode,
            )
        if name not in m.files:
            return None
        facts = self.base_fs.lstat(posixpath.join(self.results_dir, name))
        return spec_cleanup.EntryFacts(
            kind=spec_cleanup.EntryKind.REGULAR,
            owned_name=True,
            digest=int(sha(m.files[name]), 16),
            size=facts.size,
            mtime=facts.mtime_ns / 1e9,
            mtime_exact=facts.mtime_ns,
            device=facts.device,
            inode=facts.inode,
        )

    def active_spec_claims(self, m: Expected, name: str) -> list[spec_cleanup.Claim]:
        # Only claims that protect now: rule 1 of the spec counts any claim (see the report).
        return [k for k in m.spec_claims(name) if spec_cleanup.claim_is_active(k, self.now)]

    def op_gc_plan(self, ttl: float, max_deletions: int, dry_run: bool) -> None:
        m = self.model
        policy = ArtifactCleanupPolicy(
            orphan_ttl_seconds=ttl, max_deletions=max_deletions, dry_run=dry_run
        )
        plan, exc = self.call(
            lambda: self.ext.plan_cleanup_from_journal(self.journal, policy=policy, now=self.now),
            Touch(),
        )
        self.expect(exc, None, "plan_cleanup_from_journal")
        names = sorted(set(m.files) | m.claimed_names() | set(m.foreign))
        facts = {n: self.spec_facts(m, n) for n in names}
        entries = [(n, facts[n], self.active_spec_claims(m, n)) for n in names]
        expected = dict(
            (n, s.value)
            for n, s in spec_cleanup.plan(
                entries,
                spec_cleanup.Policy(orphan_ttl_seconds=ttl, max_deletions=max_deletions),
                self.now,
            )
        )
        got = {e.name: e.status for e in plan.entries}
        assert got == expected, f"cleanup plan: spec {expected}, got {got}"
        for entry in plan.planned:
            assert entry.name in m.files, f"cleanup planned to delete foreign {entry.name}"
            assert entry.sha256 == sha(m.files[entry.name])
        for status in got.values():
            event(f"plan: {status}")
        self.plan = plan
        self.plan_facts = {n: facts[n] for n, s in expected.items() if s == "planned_delete"}

    def op_gc_apply(self) -> Touch:
        plan = self.plan
        touch = Touch(may_delete=frozenset(self.plan_facts))
        m = self.model.clone()
        expected = {}
        for name, planned in self.plan_facts.items():
            assert planned is not None
            status = spec_cleanup.revalidate(
                planned, self.spec_facts(m, name), m.spec_claims(name), self.now
            ).value
            if m.spec_claims(name):
                event("apply: a claim appeared since the plan")
            if status == "deleted":
                if plan.policy.dry_run:
                    status = "dry_run"
                else:
                    del m.files[name]
            expected[name] = status
        report, exc = self.call(
            lambda: self.ext.apply_cleanup_from_journal(plan, self.journal, now=self.now), touch
        )
        self.expect(exc, None, "apply_cleanup_from_journal")
        got = {e.name: e.status for e in report.entries}
        assert got == expected, f"cleanup apply: spec {expected}, got {got}"
        for status in got.values():
            event(f"apply: {status}")
        self.model = m
        return touch

    def call(self, fn: Callable[[], Any], touch: Touch) -> tuple[Any, BaseException | None]:
        """Hook for the crashing machine: here, just :meth:`real`."""
        return self.real(fn)

    # -- rules ---------------------------------------------------------------------------

    @initialize(content=CONTENTS.map(lambda c: b"x" * (THRESHOLD_BYTES + 1) + c))
    def first_artifact(self, content: bytes) -> None:
        """Start with one artifact, so the rules that need a reference are enabled at once."""
        self.op_externalize(content, False)

    @rule(content=CONTENTS, chunked=st.booleans())
    def externalize(self, content: bytes, chunked: bool) -> None:
        self.op_externalize(content, chunked)

    @precondition(lambda self: self.model.refs)
    @rule(txn=st.sampled_from(TXNS), data=st.data())
    def prepare(self, txn: str, data: st.DataObject) -> None:
        self.op_prepare(txn, self.draw_claim(data))

    @precondition(lambda self: self.model.refs)
    @rule(txn=st.sampled_from(TXNS), outcome=st.sampled_from(PUBLISH_OUTCOMES), data=st.data())
    def publish_reference(self, txn: str, outcome: str, data: st.DataObject) -> None:
        self.op_publish(txn, self.draw_claim(data), outcome)

    @precondition(lambda self: self.model.refs)
    @rule(txn=st.sampled_from(TXNS), outcome=st.sampled_from(REMOVE_OUTCOMES), data=st.data())
    def publish_then_remove(self, txn: str, outcome: str, data: st.DataObject) -> None:
        """The common life of a reference: publish (ok), later remove it (drawn outcome)."""
        self.op_publish(txn, self.draw_claim(data), "ok")
        if self.model.phase(txn) is LeaseState.COMMITTED:
            self.op_remove(txn, outcome)

    @rule(data=st.data(), outcome=st.sampled_from(REMOVE_OUTCOMES))
    def remove_reference(self, data: st.DataObject, outcome: str) -> None:
        self.op_remove(self.draw_txn(data, LeaseState.COMMITTED), outcome)

    @rule(
        data=st.data(),
        action=st.sampled_from([LeaseAction.COMMIT, LeaseAction.ABORT, LeaseAction.RELEASE]),
    )
    def direct_transition(self, data: st.DataObject, action: LeaseAction) -> None:
        self.op_direct(self.draw_txn(data), action)

    @rule(data=st.data(), answer=st.sampled_from(RECONCILE_ANSWERS))
    def reconcile_reference(self, data: st.DataObject, answer: str) -> None:
        self.op_reconcile(self.draw_txn(data, LeaseState.PREPARED), answer)

    @rule(answer=st.sampled_from(["truthful", "unknown"]))
    def reconcile_pending(self, answer: str) -> None:
        self.op_reconcile_pending(answer)

    def land_late_write(self, m: Expected, txn: str, claim: ArtifactRetentionClaim) -> None:
        """One in-flight write reaches the owner now: spec first, then the real owner.

        The spec's table answers REFUSED for a tombstone and NOOP for a row that
        already holds a reference (whatever its identity); the real owner refuses
        a tombstone silently and raises :class:`OwnerConflictError` for another
        identity.  Either way nothing is written, so the conflict is caught here:
        :meth:`CrashableOwner.deliver_in_flight` would let it escape and lose the
        writes after it (see the report).
        """
        record = m.record(txn)
        m.owner[txn], result = spec_owner.apply(
            record, spec_owner.OwnerAction.PUBLISH, m.published(claim)
        )
        conflict = result is spec_owner.OwnerResult.NOOP and record.digest != claim_identity(claim)
        label = "conflict" if conflict else result.value
        event(f"late write: {label}")
        assert isinstance(self.source, CrashableSource)  # only it has writes in flight
        self.store_changed()
        try:
            self.source.land_late(txn, claim)
        except OwnerConflictError:
            assert conflict, f"late write of {txn}: owner says conflict, spec says {label}"

    def take_in_flight(self) -> list[tuple[str, ArtifactRetentionClaim]]:
        if not isinstance(self.source, CrashableSource):
            return []
        return self.source.take_in_flight()

    @precondition(lambda self: self.model.in_flight)
    @rule()
    def deliver_in_flight(self) -> None:
        """Every write still in flight reaches the owner (a tombstone refuses it)."""
        m = self.model.clone()
        for txn, claim in self.take_in_flight():
            self.land_late_write(m, txn, claim)
        m.in_flight = []
        self.model = m

    @rule(data=st.data())
    def owner_crash(self, data: st.DataObject) -> None:
        """The owner restarts: each in-flight write lands or is lost (drawn).

        For a harness: every handle is closed, the store restarted (RESTART) and
        a new handle opened; the model does not change (what was durable stays).
        """
        m = self.model.clone()
        for txn, claim in self.take_in_flight():
            if data.draw(st.booleans(), label=f"owner keeps the write of {txn}"):
                self.land_late_write(m, txn, claim)
            else:
                event("owner crash: in-flight write lost")
        self.source.crash(0)  # nothing left in flight: releases the fences, counts the crash
        self.store_changed()
        m.in_flight = []
        self.model = m

    @precondition(lambda self: any(self.model.phase(t) is LeaseState.NEW for t in TXNS))
    @rule(data=st.data())
    def foreign_publish(self, data: st.DataObject) -> None:
        """Someone else publishes another identity under a fresh id (conflict rows)."""
        flying = {t for t, _ in self.model.in_flight}
        free = [
            t
            for t in TXNS
            if self.model.phase(t) is LeaseState.NEW
            and t not in self.model.owner
            and t not in flying
        ]
        if not free:
            return
        txn = data.draw(st.sampled_from(free), label="foreign txn")
        digest = sha(b"foreign")
        claim = ArtifactRetentionClaim(
            source_id=format_source_id(self.session_id, "tool_result_900.txt", digest),
            content_sha256=digest,
        )
        self.store_changed()
        self.source.handle.publish(txn, claim)  # behind the journal: not watched
        m = self.model.clone()
        m.owner[txn], _ = spec_owner.apply(
            m.record(txn), spec_owner.OwnerAction.PUBLISH, m.published(claim)
        )
        self.model = m

    @rule(ttl=st.sampled_from(TTLS), max_deletions=st.sampled_from([0, 100]), dry_run=st.booleans())
    def gc(self, ttl: float, max_deletions: int, dry_run: bool) -> None:
        """Plan and apply at once (journal-aware)."""
        self.op_gc_plan(ttl, max_deletions, dry_run)
        self.op_gc_apply()
        self.plan = None

    @rule(ttl=st.sampled_from(TTLS), max_deletions=st.sampled_from([0, 100]))
    def gc_plan(self, ttl: float, max_deletions: int) -> None:
        """Plan now, apply later: other rules run in between (races at apply)."""
        self.op_gc_plan(ttl, max_deletions, False)

    @precondition(lambda self: self.plan is not None)
    @rule()
    def gc_apply(self) -> None:
        self.op_gc_apply()

    @precondition(lambda self: len(self.model.foreign) < len(FOREIGN))
    @rule(data=st.data())
    def plant_foreign(self, data: st.DataObject) -> None:
        """Someone plants a symlink out of the session, a directory or an odd file (S7)."""
        free = [(n, k) for n, k in FOREIGN if n not in self.model.foreign]
        name, kind = data.draw(st.sampled_from(free), label="planted")
        self.base_fs.makedirs(self.results_dir)
        self.plant(posixpath.join(self.results_dir, name), kind)
        m = self.model.clone()
        m.foreign[name] = kind
        self.model = m
        event(f"planted {kind}{' (artifact name)' if is_artifact_filename(name) else ''}")

    @precondition(lambda self: self.model.order)
    @rule(data=st.data(), flip=st.sampled_from(JOURNAL_FLIPS))
    def tamper_journal(self, data: st.DataObject, flip: int) -> None:
        """Flip one byte inside a complete journal record: every reader must refuse, typed.

        Recovery (the open journal and a fresh one) raises :class:`JournalCorruptError`;
        cleanup planning and apply raise :class:`CleanupRefused` and delete nothing.
        Then the operator restores the bytes and the session goes on (fresh objects).
        """
        original = self.raw_bytes(self.journal_path) or b""
        end = original.rfind(b"\n")
        positions = [i for i in range(end) if original[i] != 0x0A]
        # a draw whose bounds do not depend on the journal's length (real clocks vary it)
        at = positions[data.draw(st.integers(0, 2**16), label="journal offset") % len(positions)]
        changed = original[:at] + bytes([original[at] ^ flip]) + original[at + 1 :]
        self.tamper_bytes(self.journal_path, changed)
        files_before = self.artifact_files()
        try:
            _, exc = self.real(lambda: self.journal.recover(now=self.now))
            self.expect(exc, JournalCorruptError, "recover a flipped journal (open object)")
            _, exc = self.real(
                lambda: ArtifactRetentionJournal(
                    self.root, fs=self.fs, clock=lambda: self.now
                ).recover(now=self.now)
            )
            self.expect(exc, JournalCorruptError, "recover a flipped journal (fresh object)")
            policy = ArtifactCleanupPolicy(orphan_ttl_seconds=0, max_deletions=100, dry_run=False)
            ext, journal, now = self.ext, self.journal, self.now
            _, exc = self.real(
                lambda: ext.plan_cleanup_from_journal(journal, policy=policy, now=now)
            )
            self.expect(exc, CleanupRefused, "plan cleanup over a flipped journal")
            if self.plan is not None:
                plan = self.plan
                _, exc = self.real(lambda: ext.apply_cleanup_from_journal(plan, journal, now=now))
                self.expect(exc, CleanupRefused, "apply cleanup over a flipped journal")
                event("tamper journal: pending plan refused")
            assert self.artifact_files() == files_before, "cleanup deleted over a corrupt journal"
        finally:
            self.tamper_bytes(self.journal_path, original)
        self.boot()
        event(f"tamper journal: flip 0x{flip:02x} refused")

    @precondition(lambda self: self.plan is not None and self.plan_facts)
    @rule(data=st.data(), txn=st.sampled_from(TXNS))
    def prepare_during_gc(self, data: st.DataObject, txn: str) -> None:
        """A prepare on a planned file lands between plan and apply: apply must keep the file."""
        planned = set(self.plan_facts)
        refs = [r for r in self.model.refs if name_of(r.source.source_id) in planned]
        if not refs:
            event("prepare during gc: no reference to a planned file")
            return
        ref = data.draw(st.sampled_from(refs), label="planned artifact")
        claim = ArtifactRetentionClaim.from_memory_reference(
            ref.for_memory(), reference_count=1, retain_until=None
        )
        self.op_prepare(txn, claim)
        self.op_gc_apply()
        self.plan = None

    @rule(seconds=st.sampled_from(CLOCK_STEPS))
    def advance_clock(self, seconds: float) -> None:
        self.now += seconds
        self.advance_seam_time(seconds)

    def tamper_file(self, name: str, data: st.DataObject) -> None:
        """Flip one byte of an artifact behind toolswap's back (model follows)."""
        content = self.model.files[name]
        at = data.draw(st.integers(0, 2**16), label="offset") % len(content)
        changed = content[:at] + bytes([content[at] ^ 0xFF]) + content[at + 1 :]
        self.tamper_bytes(posixpath.join(self.results_dir, name), changed)
        m = self.model.clone()
        m.files[name] = changed
        m.tampered.add(name)
        self.model = m

    @precondition(lambda self: any(self.model.files.values()))
    @rule(data=st.data())
    def tamper(self, data: st.DataObject) -> None:
        """Flip one byte of an artifact behind toolswap's back."""
        names = sorted(n for n, c in self.model.files.items() if c)
        self.tamper_file(data.draw(st.sampled_from(names), label="tampered"), data)

    @rule(
        ttl=st.sampled_from(TTLS),
        interference=st.sampled_from(["prepare", "tamper", "nothing"]),
        data=st.data(),
        txn=st.sampled_from(TXNS),
    )
    def gc_race(self, ttl: float, interference: str, data: st.DataObject, txn: str) -> None:
        """Plan, then something happens to a planned file, then apply (fail closed).

        ``prepare``: a claim lands between plan and apply (the concurrent prepare:
        apply re-reads the journal under the lock and keeps the file);
        ``tamper``: the bytes change (``race_detected``).
        """
        self.op_gc_plan(ttl, 100, False)
        planned = sorted(n for n in self.plan_facts if self.model.files.get(n))
        if planned and interference != "nothing":
            name = data.draw(st.sampled_from(planned), label="raced file")
            refs = [r for r in self.model.refs if name_of(r.source.source_id) == name]
            if interference == "prepare" and refs:
                claim = ArtifactRetentionClaim.from_memory_reference(
                    refs[-1].for_memory(), reference_count=1, retain_until=None
                )
                self.op_prepare(txn, claim)
            elif interference == "tamper":
                self.tamper_file(name, data)
            event(f"gc race: {interference}")
        self.op_gc_apply()
        self.plan = None

    @precondition(lambda self: self.model.refs)
    @rule(data=st.data())
    def read_artifact(self, data: st.DataObject) -> None:
        ref = data.draw(st.sampled_from(self.model.refs), label="read")
        name = name_of(ref.source.source_id)
        current = self.model.files.get(name)
        text, exc = self.real(lambda: self.ext.read_artifact(ref, 0, ref.line_count + 1))
        if current is None:
            self.expect(exc, ArtifactNotOwnedError, f"read missing {name}")
        elif sha(current) != ref.content_sha256:
            self.expect(exc, ArtifactIntegrityError, f"read tampered {name}")
        else:
            self.expect(exc, None, f"read {name}")
            assert text == current.decode("utf-8", errors="replace")
        event(f"read: {'ok' if exc is None else type(exc).__name__}")

    @precondition(lambda self: self.model.refs)
    @rule(data=st.data())
    def read_hostile_reference(self, data: st.DataObject) -> None:
        """A Memory record whose ``path`` points outside the session (S7: never trusted).

        The read must use the session's own path for the source id: it returns
        the artifact's text (or the same typed error as an honest read), never the
        outside file; ``s7_nothing_outside`` then checks no call touched it.
        """
        ref = data.draw(st.sampled_from(self.model.refs), label="read (hostile path)")
        hostile = attrs.evolve(ref, path=self.outside)
        current = self.model.files.get(name_of(ref.source.source_id))
        text, exc = self.real(lambda: self.ext.read_artifact(hostile, 0, ref.line_count + 1))
        if current is None:
            self.expect(exc, ArtifactNotOwnedError, "hostile read of a missing artifact")
        elif sha(current) != ref.content_sha256:
            self.expect(exc, ArtifactIntegrityError, "hostile read of a tampered artifact")
        else:
            self.expect(exc, None, "hostile read")
            assert text == current.decode("utf-8", errors="replace"), "S7: read another file"
        event(f"hostile read: {'ok' if exc is None else type(exc).__name__}")

    # -- comparison of every observable ----------------------------------------------------

    def recovered(self) -> Any:
        """``journal.recover()`` once per distinct state (the invariants share one result).

        Keyed on the boot (a fresh journal object), the clock and the journal's bytes: recovery
        is a pure function of those, so the full verification still runs after
        every step that changed anything.
        """
        key = (self.boots, self.now, self.raw_bytes(self.journal_path))
        if getattr(self, "_recovered_key", None) != key:
            self._recovered = self.journal.recover(now=self.now)
            self._recovered_key = key
        return self._recovered

    @invariant()
    def observables_match_model(self) -> None:
        m = self.model
        rec = self.recovered()
        phases = {t: lease_of(p) for t, p in rec.states.items()}
        assert phases == m.lease, f"phases: model {m.lease}, real {phases}"
        assert dict(rec.transactions) == m.intent
        assert list(rec.pending_transaction_ids) == m.pending()
        expected_claims: dict[str, tuple[int, float | None]] = {}
        for txn in m.order:
            state, claim = m.lease[txn], m.intent[txn]
            if not spec_lease.protects(state):
                continue
            until = None if spec_lease.is_pending(state) else claim.retain_until
            count, prior = expected_claims.get(claim.source_id, (0, -1.0))
            merged = None if until is None or prior is None else max(until, prior)
            expected_claims[claim.source_id] = (count + claim.reference_count, merged)
        got_claims = {
            s: (c.reference_count, c.retain_until) for s, c in rec.claims_by_source().items()
        }
        assert got_claims == expected_claims, f"claims: model {expected_claims}, real {got_claims}"
        on_disk = self.artifact_files()
        assert set(on_disk) == set(m.files), (
            f"files: model {sorted(m.files)}, real {sorted(on_disk)}"
        )
        for name, content in m.files.items():
            assert on_disk[name] == content, f"bytes of {name} differ from the model"
        view = self.view()
        assert not view.unanswered, f"the healed owner cannot tell: {view.unanswered}"
        for txn in TXNS:
            record = m.record(txn)
            seen = view.seen[txn]
            assert seen.kind == owner_kind(record), (
                f"owner row of {txn}: real {seen.kind}, model {owner_kind(record)}"
            )
            if seen.kind == "published":
                assert seen.source_id is not None and seen.content_sha256 is not None
                got = identity(seen.source_id, seen.content_sha256)
                assert got == record.digest, f"owner identity of {txn} differs from the model"
            assert self.same_generation(txn, record.generation, seen.generation), (
                f"owner generation of {txn}: model {record.generation}, "
                f"real {seen.generation!r} (changed without a change, or reused)"
            )
        assert [t for t, _ in self.source.in_flight] == [t for t, _ in m.in_flight]

    def artifact_files(self) -> dict[str, bytes]:
        try:
            names = self.base_fs.listdir(self.results_dir)
        except FileNotFoundError:
            return {}
        return {
            n: self.raw_bytes(posixpath.join(self.results_dir, n)) or b""
            for n in names
            if n not in self.model.foreign
        }

    # -- S1-S7 on the real state -------------------------------------------------------------

    @invariant()
    def s1_to_s7(self) -> None:
        """The spec's S1-S7 (``toolswap.spec.invariants``) on what the real state shows."""
        found = findings(self.observed())
        assert not found, "; ".join(f"{handle}: {why}" for handle, why in found)

    def observed(self) -> Observable:
        """The real state as the invariants read it (:func:`.observe.observe_real`).

        Also moves two watermarks: the journal bytes verified so far (S6) and the
        seam's operation log (S7), each judged once.
        """
        m = self.model
        rec = self.recovered()
        journal = self.raw_bytes(self.journal_path) or b""
        evidence = (
            "" if journal.startswith(self.journal_prefix) else "verified journal records changed"
        )
        self.journal_prefix = journal[: journal.rfind(b"\n") + 1]
        return observe_real(
            journal=journal,
            intents=rec.transactions,
            now=self.now,
            view=self.view(),
            files=self.artifact_files(),
            ours=m.first,
            landing=m.in_flight,
            in_flight=[t for t, _ in m.in_flight],
            rejected=self.owner.rejected,
            unprepared=self.owner.s2_violations,
            conflicts=m.conflicts,
            tampered=dict.fromkeys(m.tampered),
            first={n: b for n, b in m.first.items() if n not in m.tampered},
            outside=self.outside_touched(),
            evidence_changed=evidence,
        )

    def outside_touched(self) -> tuple[str, ...]:
        """S7's observations: seam operations outside the session, the outside file, plants."""
        seen: list[str] = []
        root = self.root.rstrip("/") + "/"
        for op, path in self.fs.log:
            inside = path == self.root or path.startswith(root)
            ancestor = op in ("makedirs", "fsync_dir") and root.startswith(path.rstrip("/") + "/")
            if not (inside or ancestor):
                seen.append(f"{op} touched {path}")
        self.fs.log.clear()
        if self.raw_bytes(self.outside) != OUTSIDE_BYTES:
            seen.append("the file outside changed")
        for name, kind in self.model.foreign.items():
            got = self.entry_kind(posixpath.join(self.results_dir, name))
            if got != kind:
                seen.append(f"planted {kind} {name} is now {got}")
        return tuple(seen)


_M = TypeVar("_M", bound=ProtocolMachine)


def machine_with_owner(
    base: type[_M], owner: Callable[[], OwnerSource], name: str = ""
) -> type[_M]:
    """A subclass of ``base`` whose examples each get a fresh owner source from ``owner``."""
    attrs_: dict[str, Any] = {"owner_factory": staticmethod(owner)}
    return type(name or f"{base.__name__}WithOwner", (base,), attrs_)
