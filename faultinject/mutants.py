"""Implementation mutants: the seed's classic mistakes, switched into the real code.

Theory of operation
-------------------
Each :class:`Mutant` names one classic mistake of the teaching code, the
invariant that must catch it, the crash-explorer scenarios that exercise it,
and the one method or function of the *real* implementation it replaces.
``with mutant.active():`` swaps that attribute (on the class or module that
defines it) for a mutated version and puts the original back on exit, even on
an error.  No production source is edited; outside the block the real code
runs unchanged.  Only one mutant is active at a time.

Most mutants wrap the original and change one decision (an fsync skipped, an
observation that claims a seal, a step moved), so they follow the production
code as it evolves.  Three replace a whole method with the mistaken version of
it (``remove_reference``, the artifact name reservation, the journal reader;
``reconcile_reference`` for the two reconciler mutants, which keep the real
``_decide``); if the production signature changes, :func:`swap` or the
explorer's ``run_error`` says so, and a mutant killed only by ``run_error`` does not count
(:attr:`MutantResult.killed` wants the expected invariant).  A mistake that
lives in two places (a plan and its apply) swaps both at once (:func:`swap_all`).

:func:`kill_matrix` runs the unmutated code and then every mutant over its
scenarios in the :class:`~toolswap.faultinject.explorer.CrashExplorer` and
reports, per mutant, which invariants fired and the first violation.

The mutants
-----------
==============================  ================================================  =====
name                            seed mistake                                      catch
==============================  ================================================  =====
``publish_before_fsync``        PREPARED is written but not fsynced before        S2
                                the owner makes the reference visible
``release_before_remove``       RELEASED is appended before the owner             S4
                                removes the reference
``abort_without_tombstone``     ABORTED on an unsealed absence, no                S3
                                tombstone written first
``skip_revalidation``           GC apply deletes what the plan listed, with       S1
                                no re-check of claims, snapshot or digest
``trust_memory_path``           GC deletes the ``artifact_path`` a Memory         S7
                                record of a released reference names
``counter_overwrites``          the name counter restarts at 001 in every         S6
                                new externalizer and overwrites the file
``splitlines_journal``          recovery splits the journal with                  S6
                                ``str.splitlines`` (a torn tail becomes a
                                "line"; U+2028, U+0085, ``\\r`` ... would split)
``gc_ignores_corrupt_journal``  cleanup reads a corrupt lease journal as          S1
                                one with no leases instead of refusing
``gc_ignores_digest_conflict``  a claim whose digest disagrees with the           S1
                                file does not protect it (a tampered
                                artifact, a conflicting claim)
``prepared_lease_expires``      cleanup honours ``retain_until`` on a PREPARED    S1
                                lease (nobody knows yet whether the owner has
                                the reference)
``uncertain_error_aborts``      publish_reference's ``except`` clause appends     S3
                                ABORTED on a timeout or a lost ack (the owner
                                may have written), as on a rejection
``replay_transaction_id``       a restarted publisher sends a transaction id      S1
                                the journal holds (a rejected one: no
                                tombstone refuses it, ABORTED protects nothing)
``prepare_skips_checks``        prepare appends PREPARED without re-checking      S1
                                the artifact under the lock (GC deleted it:
                                a dangling reference is published)
raw_cleanup_bypasses_journal    raw-claims cleanup runs although the session      S1
                                has a lease journal: a PREPARED lease, which
                                raw claims cannot show, protects nothing
``gc_skips_name_denial``        the plan does not deny non-artifact names;        L1
                                SessionPaths still refuses them, so every
                                cleanup fails while a stray file exists
``unanchored_artifact_name``    the artifact-name pattern matches a prefix:       S7
                                ``tool_result_007.txt.bak`` counts as ours
                                and is deleted
``client_side_generation``      the reconciler reads the generation again         S3
                                itself and, if unchanged, tombstones with
                                ``remove`` instead of the owner's CAS: a
                                publish landing in between is buried
``reconcile_without_fence``     the reconciler reads the owner, lets the          S3
                                fence go, then decides; with no observation
                                to seal it tombstones with ``remove``, over
                                a publish that landed after the read
``gc_ignores_writer``           cleanup judges a file by its age alone and        S1
                                never asks for the writer's mark: a command
                                quiet past the TTL loses its half-written
                                artifact
``gc_without_owner_witness``    cleanup given the owner never asks it: a          S1
                                reference the owner shows, whose lease the
                                journal lost, protects nothing
``compaction_removes_early``    compaction starts the next file and archives      S6
                                the old one before the checkpoint is fsynced
                                (spec/compaction.py's mistake (a), C2)
``compaction_drops_prepared``   the snapshot keeps COMMITTED leases only, as      S1
                                if a PREPARED lease were settled (mistake
                                (b), C1)
==============================  ================================================  =====
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import attrs
from toolswap.spec import catalogue as spec_catalogue
from toolswap.spec import cleanup as spec_cleanup
from toolswap.spec.invariants import Invariant
from toolswap.spec.lease import LeaseState

from toolswap import cleanup, domain
from toolswap.decisions import unobserved_decision
from toolswap.domain import ArtifactMemoryReference, artifact_filename
from toolswap.externalizer import ToolResultExternalizer
from toolswap.fs import REAL_FS, FileSystem
from toolswap.journal import (
    ArtifactRetentionJournal,
    IllegalTransitionError,
    Recovery,
    Transaction,
    TransactionExistsError,
)
from toolswap.journal_compaction import Compactor
from toolswap.journal_format import parse_line, validate_transaction_id
from toolswap.owner import (
    ArtifactPublicationRejected,
    ObservedState,
    OwnerObservation,
    ReconcileStatus,
    ReconciliationReport,
)

from .disk import CRASH_MODES
from .explorer import CrashExplorer, CrashViolation, ExplorationResult, World, scenario_named

__all__ = [
    "MUTANTS",
    "Mutant",
    "MutantResult",
    "KillMatrix",
    "kill_matrix",
    "mutant_named",
    "swap",
    "swap_all",
]

_ACTIVE = threading.Lock()  # one mutant at a time, process-wide


def _original(owner: Any, name: str) -> Any:
    """``owner.name`` as ``owner`` itself defines it; AttributeError if the target is gone."""
    namespace = vars(owner)
    if name not in namespace:
        raise AttributeError(f"mutant target {owner.__name__}.{name} no longer exists")
    return namespace[name]


@contextlib.contextmanager
def swap(owner: Any, name: str, replacement: object) -> Iterator[None]:
    """Replace ``owner.name`` (defined on ``owner`` itself) and restore it on exit."""
    original = _original(owner, name)
    setattr(owner, name, replacement)
    try:
        yield
    finally:
        setattr(owner, name, original)


@contextlib.contextmanager
def swap_all(*swaps: tuple[Any, str, object]) -> Iterator[None]:
    """Several :func:`swap` at once, for a mistake made in more than one place.

    Entered only when the mutant is, and undone in reverse order (even when a
    later target is gone and its swap raises).
    """
    with contextlib.ExitStack() as stack:
        for owner, name, replacement in swaps:
            stack.enter_context(swap(owner, name, replacement))
        yield


@attrs.frozen(kw_only=True)
class Mutant:
    """One classic mistake applied to one real method or function."""

    name: str
    mistake: str
    target: str  # dotted name of what is swapped
    scenarios: tuple[str, ...]  # explorer scenarios that exercise it
    _install: Callable[[], contextlib.AbstractContextManager[None]] = attrs.field(
        alias="install", repr=False
    )
    #: What a user types and sees (``crashcheck --mutants``, reports): hyphenated, and the
    #: name of the spec variant (``toolswap explore --variant``) when it is the same mistake.
    #: ``name`` stays the identifier code refers to; both are accepted wherever one is typed.
    label: str = ""

    def __attrs_post_init__(self) -> None:
        if not self.label:
            object.__setattr__(self, "label", self.name.replace("_", "-"))
        spec_catalogue.invariant_of(self.label, "code")  # refused unless the catalogue lists it

    @property
    def invariant(self) -> Invariant:
        """The invariant expected to catch it: its catalogue entry's."""
        return spec_catalogue.invariant_of(self.label, "code")

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """Run the block with the mutated code in place (never nested)."""
        if not _ACTIVE.acquire(blocking=False):
            raise RuntimeError("another mutant is already active")
        try:
            with self._install():
                yield
        finally:
            _ACTIVE.release()


# -- publish before fsync ------------------------------------------------------------------


class _NoFsync:
    """A seam view whose ``fsync`` does nothing (everything else is the real seam)."""

    def __init__(self, inner: FileSystem) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def fsync(self, handle: int) -> None:
        return None


def _publish_before_fsync() -> contextlib.AbstractContextManager[None]:
    original = vars(ArtifactRetentionJournal)["_append"]

    def _append(
        self: ArtifactRetentionJournal, txn: str, phase: LeaseState, claim: Any, now: float | None
    ) -> None:
        if phase is not LeaseState.PREPARED:
            original(self, txn, phase, claim, now)
            return
        real = self._fs
        self._fs = _NoFsync(real)
        try:
            original(self, txn, phase, claim, now)  # written, never fsynced
        finally:
            self._fs = real

    return swap(ArtifactRetentionJournal, "_append", _append)


# -- release before remove -----------------------------------------------------------------


def _release_before_remove() -> contextlib.AbstractContextManager[None]:
    def remove_reference(
        self: ArtifactRetentionJournal,
        transaction_id: str,
        remover: Callable[[], Any],
        *,
        now: float | None = None,
    ) -> Any:
        txn = validate_transaction_id(transaction_id)
        phase = self._phase_of(txn)
        if phase is LeaseState.RELEASED:
            return None
        if phase is not LeaseState.COMMITTED:
            raise IllegalTransitionError(f"transaction {txn!r} is {phase.value}")
        self.release(txn, now=now)  # the mistake: the journal first
        self._fs.crash_point("mutant.after_release")
        return remover()

    return swap(ArtifactRetentionJournal, "remove_reference", remove_reference)


# -- abort without tombstone ---------------------------------------------------------------


class _ClaimsSealed:
    """An observation that reports an unsealed absence as already sealed."""

    def __init__(self, inner: OwnerObservation) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    @property
    def sealed(self) -> bool:
        return True

    def seal_absence(self) -> bool:  # never called: "already sealed"
        return self._inner.seal_absence()


def _abort_without_tombstone() -> contextlib.AbstractContextManager[None]:
    original = vars(ArtifactRetentionJournal)["_decide"]

    def _decide(
        self: ArtifactRetentionJournal, txn: str, observation: OwnerObservation, now: float | None
    ) -> Any:
        if observation.state is ObservedState.ABSENT and not observation.sealed:
            observation = _ClaimsSealed(observation)
        return original(self, txn, observation, now)

    return swap(ArtifactRetentionJournal, "_decide", _decide)


# -- skip re-validation (GC apply) ---------------------------------------------------------


def _skip_revalidation() -> contextlib.AbstractContextManager[None]:
    def _revalidate_and_delete(
        paths: Any,
        entry: Any,
        index: Any,
        policy: Any,
        fs: FileSystem,
        uid: int,
        now: float,
        dry: bool,
        said: Any = None,
    ) -> tuple[str, str]:
        path = paths.artifact_path(entry.name)
        if dry:
            return cleanup.DRY_RUN, "would be deleted (dry run)"
        fs.crash_point("cleanup.after_revalidate")
        try:
            fs.unlink(path)  # the mistake: the plan is trusted as it was
        except FileNotFoundError:
            return cleanup.ALREADY_MISSING, "already gone"
        fs.crash_point("cleanup.after_unlink")
        return cleanup.DELETED, "deleted as planned (no re-validation)"

    return swap(cleanup, "_revalidate_and_delete", _revalidate_and_delete)


# -- trust the Memory path -----------------------------------------------------------------


def _explorer_memory(transaction_id: str) -> ArtifactMemoryReference | None:
    """The agent's Memory record for ``transaction_id`` in the explorer's current world."""
    world = World.current
    return None if world is None else world.memory.get(transaction_id)


def _trust_memory_path(
    memory: Callable[[str], ArtifactMemoryReference | None] = _explorer_memory,
) -> contextlib.AbstractContextManager[None]:
    original = vars(cleanup)["apply_cleanup_from_journal"]

    def apply_cleanup_from_journal(
        paths: Any, plan: Any, journal: ArtifactRetentionJournal, **options: Any
    ) -> Any:
        report = original(paths, plan, journal, **options)
        fs: FileSystem = options.get("fs", REAL_FS)
        recovery = journal.recover(now=options.get("now"))
        for txn, phase in recovery.states.items():
            record = memory(txn) if phase is LeaseState.RELEASED else None
            if record is None:
                continue
            try:  # the mistake: the path comes from Memory, not from the session
                fs.unlink(record.artifact_path)
            except FileNotFoundError:
                continue
            fs.fsync_dir(posixpath.dirname(record.artifact_path))
        return report

    return swap(cleanup, "apply_cleanup_from_journal", apply_cleanup_from_journal)


# -- a counter that overwrites -------------------------------------------------------------


def _counter_overwrites() -> contextlib.AbstractContextManager[None]:
    counters: weakref.WeakKeyDictionary[ToolResultExternalizer, int] = weakref.WeakKeyDictionary()

    def _reserve(self: ToolResultExternalizer) -> tuple[str, str, int]:
        fs = self._fs
        directory = self.paths.tool_results
        fs.makedirs(directory)
        number = counters.get(self, 0) + 1  # the mistake: every instance starts at 001
        counters[self] = number
        filename = artifact_filename(number)
        path = os.path.join(directory, filename)
        try:
            return filename, path, fs.create_exclusive(path, 0o600)
        except FileExistsError:  # ... and an existing file is simply overwritten
            handle = fs.open_append(path, 0o600)
            fs.ftruncate(handle, 0)
            return filename, path, handle

    return swap(ToolResultExternalizer, "_reserve", _reserve)


# -- splitlines on the journal -------------------------------------------------------------


def _splitlines_journal() -> contextlib.AbstractContextManager[None]:
    def _read_from(self: ArtifactRetentionJournal, fold: Any) -> None:
        fs = self._fs
        try:
            handle = fs.open_read(self._paths.journal)
        except FileNotFoundError:
            self._refresh_missing()
            return
        try:
            facts = fs.fstat(handle)
            self._identity = (facts.device, facts.inode)
            self._torn = None
            data = b""
            while len(data) < facts.size - fold.size:
                chunk = fs.pread(handle, facts.size - fold.size - len(data), fold.size + len(data))
                if not chunk:
                    break
                data += chunk
            # the mistake: text lines, so any line boundary Python knows ends a record,
            # and a final piece without a newline counts as a whole record
            for text in data.decode("utf-8", "surrogateescape").splitlines():
                line = text.encode("utf-8", "surrogateescape")
                number = fold.sequence + 1
                fold.apply(parse_line(line, number), number, len(line) + 1)
        finally:
            fs.close(handle)

    return swap(ArtifactRetentionJournal, "_read_from", _read_from)


# -- cleanup over a corrupt journal -------------------------------------------------------


def _gc_ignores_corrupt_journal() -> contextlib.AbstractContextManager[None]:
    plan_original = vars(cleanup)["plan_cleanup_from_journal"]
    apply_original = vars(cleanup)["apply_cleanup_from_journal"]
    no_claims = cleanup._ClaimIndex(by_name={})

    def plan_cleanup_from_journal(
        paths: Any,
        journal: ArtifactRetentionJournal,
        *,
        policy: Any,
        fs: FileSystem = REAL_FS,
        now: float | None = None,
        progress: Any = None,
    ) -> Any:
        try:
            return plan_original(paths, journal, policy=policy, fs=fs, now=now, progress=progress)
        except cleanup.CleanupRefused:  # the mistake: an unreadable journal holds no leases
            assert now is not None  # the explorer always passes it
            return cleanup._plan(paths, no_claims, policy, fs, now, progress, journal_aware=True)

    def apply_cleanup_from_journal(
        paths: Any,
        plan: Any,
        journal: ArtifactRetentionJournal,
        *,
        owner: Any = None,
        fs: FileSystem = REAL_FS,
        now: float | None = None,
    ) -> Any:
        try:
            return apply_original(paths, plan, journal, owner=owner, fs=fs, now=now)
        except cleanup.CleanupRefused:  # ... and so protects nothing at apply either
            assert now is not None
            with paths.session_lock(fs):
                return cleanup._apply_locked(paths, plan, no_claims, fs, now)

    return swap_all(
        (cleanup, "plan_cleanup_from_journal", plan_cleanup_from_journal),
        (cleanup, "apply_cleanup_from_journal", apply_cleanup_from_journal),
    )


# -- a digest conflict does not protect ----------------------------------------------------


def _gc_ignores_digest_conflict() -> contextlib.AbstractContextManager[None]:
    # The plan's half goes through the seam the implementation decides by: the
    # spec's PLAN_RULES, without the row that keeps a file a claim disagrees with.
    rules = tuple(
        rule
        for rule in vars(spec_cleanup)["PLAN_RULES"]
        if rule[2] is not spec_cleanup.PlanStatus.RETAINED_CORRUPT
    )
    revalidate_original: Callable[..., tuple[str, str]] = vars(cleanup)["_revalidate_and_delete"]

    def _revalidate_and_delete(paths: Any, entry: Any, index: Any, *rest: Any) -> tuple[str, str]:
        digests = index.by_name.get(entry.name) or {}
        kept = {d: n for d, n in digests.items() if d == entry.sha256}  # the same mistake
        by_name = {**index.by_name, entry.name: kept}
        return revalidate_original(paths, entry, cleanup._ClaimIndex(by_name=by_name), *rest)

    return swap_all(
        (spec_cleanup, "PLAN_RULES", rules),
        (cleanup, "_revalidate_and_delete", _revalidate_and_delete),
    )


# -- a PREPARED lease that expires -------------------------------------------------------


def _prepared_lease_expires() -> contextlib.AbstractContextManager[None]:
    original: Callable[..., list[Any]] = vars(Recovery)["protecting_claims"]

    def protecting_claims(recovery: Recovery, now: float | None = None) -> list[Any]:
        # the mistake: a PREPARED lease keeps the retain_until its intent carries
        expiring = [
            recovery.transactions[t]
            for t, phase in recovery.states.items()
            if phase is LeaseState.PREPARED
        ]
        pending = {c.source_id for c in expiring}
        return [c for c in original(recovery, now) if c.source_id not in pending] + expiring

    return swap(Recovery, "protecting_claims", protecting_claims)


# -- an uncertain publish error taken for a rejection --------------------------------------


class _TakenForRejection(ArtifactPublicationRejected):
    """An owner error that may have written, dressed as an explicit rejection."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def _uncertain_error_aborts() -> contextlib.AbstractContextManager[None]:
    original = _original(ArtifactRetentionJournal, "publish_reference")

    def publish_reference(
        self: ArtifactRetentionJournal,
        claim: Any,
        publisher: Callable[[], Any],
        transaction_id: str | None = None,
        *,
        now: float | None = None,
    ) -> Any:
        def send() -> Any:
            try:
                return publisher()
            except ArtifactPublicationRejected:
                raise
            except Exception as exc:  # the mistake: a timeout or a lost ack is a "no"
                raise _TakenForRejection(exc) from exc

        try:  # so the real except clause appends ABORTED ...
            return original(self, claim, send, transaction_id, now=now)
        except _TakenForRejection as taken:  # ... and the caller sees the owner's error
            raise taken.error from None

    return swap(ArtifactRetentionJournal, "publish_reference", publish_reference)


# -- a transaction id sent again -----------------------------------------------------------


def _replay_transaction_id() -> contextlib.AbstractContextManager[None]:
    original: Callable[..., Transaction] = _original(ArtifactRetentionJournal, "prepare")

    def prepare(
        self: ArtifactRetentionJournal,
        claim: Any,
        transaction_id: str | None = None,
        *,
        now: float | None = None,
    ) -> Transaction:
        try:
            return original(self, claim, transaction_id, now=now)
        except TransactionExistsError:
            # the mistake: an id on record counts as prepared already, so a restarted
            # publisher goes on and sends it again
            assert transaction_id is not None
            return self._fold.transaction(validate_transaction_id(transaction_id))

    return swap(ArtifactRetentionJournal, "prepare", prepare)


# -- prepare without its checks ------------------------------------------------------------


def _prepare_skips_checks() -> contextlib.AbstractContextManager[None]:
    def _verify_artifact(self: ArtifactRetentionJournal, claim: Any) -> None:
        # the mistake: PREPARED is appended for whatever the claim names, even a
        # file that cleanup deleted before prepare took the session lock
        return None

    return swap(ArtifactRetentionJournal, "_verify_artifact", _verify_artifact)


# -- raw-claims cleanup next to a lease journal --------------------------------------------


def _raw_cleanup_bypasses_journal() -> contextlib.AbstractContextManager[None]:
    def _refuse_if_journal(paths: Any, fs: FileSystem) -> None:
        # the mistake: the caller's raw claims are trusted although the session's
        # journal holds leases they cannot see (a PREPARED one above all)
        return None

    return swap(cleanup, "_refuse_if_journal", _refuse_if_journal)


# -- unknown names in tool-results/ --------------------------------------------------------


def _gc_skips_name_denial() -> contextlib.AbstractContextManager[None]:
    original: Callable[[str, Any], str | None] = vars(cleanup)["_denial"]

    def _denial(name: str, facts: Any) -> str | None:
        # the mistake: only the entry's type is judged, as if every name were an artifact's
        return original(artifact_filename(1), facts)

    return swap(cleanup, "_denial", _denial)


class _PrefixPattern:
    """The artifact-name pattern with ``fullmatch`` done by ``match`` (no end anchor)."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self._pattern = pattern

    def fullmatch(self, text: str) -> re.Match[str] | None:
        return self._pattern.match(text)  # the mistake: a prefix is enough


def _unanchored_artifact_name() -> contextlib.AbstractContextManager[None]:
    return swap(domain, "_FILENAME_RE", _PrefixPattern(vars(domain)["_FILENAME_RE"]))


# -- reconciling outside the fence: no fence, or a generation checked on the client ----------


@attrs.frozen(kw_only=True)
class _ReadAndLetGo:
    """An observation kept after its fence closed; its "seal" is whatever the mutant does."""

    transaction_id: str
    state: ObservedState
    source_id: str | None
    content_sha256: str | None
    generation: Any
    sealed: bool
    _seal: Callable[[], bool] = attrs.field(alias="seal", repr=False)

    def seal_absence(self) -> bool:
        return self._seal()


def _reconcile_outside_the_fence(*, client_check: bool) -> contextlib.AbstractContextManager[None]:
    """``reconcile_reference`` deciding after its fence closed, tombstoning with ``remove``.

    ``client_check=False`` (no fence): the fence is left as soon as the state is
    read, and everything is decided afterwards.  With no open fence there is no
    observation to seal (O6: a seal outside its block is refused), so the
    absence is "sealed" by the one unconditional tombstone the protocol has,
    ``remove`` (O4).  ``client_check=True``: the decision stays inside the
    fence except for an unsealed absence, where the generation is read again
    (a second fenced read) and compared on the client; if it is unchanged the
    tombstone is written by ``remove``, not by the owner's compare-and-set.
    Either way a publish that lands after the last read and before ``remove``
    is buried under the tombstone, and the lease is ABORTED.
    """
    decide: Callable[..., ReconciliationReport] = _original(ArtifactRetentionJournal, "_decide")

    def reconcile_reference(
        self: ArtifactRetentionJournal,
        transaction_id: str,
        owner: Any,
        *,
        now: float | None = None,
    ) -> ReconciliationReport:
        txn = validate_transaction_id(transaction_id)
        self._refuse_owner_call_under_lock("reconcile_reference")
        known = unobserved_decision(self._phase_of(txn))
        if known is not None:  # as the real code: a terminal lease is not asked about
            return self._already(txn, known, None)

        def tombstone() -> bool:
            if client_check:  # the mistake: a second read compared here, not in the owner
                with owner.inspect_fenced(txn) as again:
                    if again.generation != seen.generation:
                        return False
            owner.remove(txn)  # ... and a tombstone written whatever landed meanwhile
            return True

        with contextlib.ExitStack() as stack:
            try:
                observation = stack.enter_context(owner.inspect_fenced(txn))
            except Exception as exc:  # as the real code: an owner failure is "unknown"
                return ReconciliationReport(
                    transaction_id=txn,
                    status=ReconcileStatus.PENDING_UNKNOWN,
                    reason=f"owner inspection failed ({type(exc).__name__})",
                )
            unsealed = observation.state is ObservedState.ABSENT and not observation.sealed
            if client_check and not unsealed:
                return decide(self, txn, observation, now)  # as the real code, fenced
            seen = _ReadAndLetGo(
                transaction_id=observation.transaction_id,
                state=observation.state,
                source_id=observation.source_id,
                content_sha256=observation.content_sha256,
                generation=observation.generation,
                sealed=observation.sealed,
                seal=tombstone,
            )
        return decide(self, txn, seen, now)  # the fence is gone: nothing holds a publish back

    return swap(ArtifactRetentionJournal, "reconcile_reference", reconcile_reference)


def _client_side_generation() -> contextlib.AbstractContextManager[None]:
    return _reconcile_outside_the_fence(client_check=True)


def _reconcile_without_fence() -> contextlib.AbstractContextManager[None]:
    return _reconcile_outside_the_fence(client_check=False)


# -- cleanup ignores the writer's mark ---------------------------------------------------


class _NoWriterMark:
    """A seam view on which every writer's mark is free (everything else is the real seam)."""

    def __init__(self, inner: FileSystem) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def try_flock(self, handle: int, *, exclusive: bool = True) -> bool:
        return True


def _gc_ignores_writer() -> contextlib.AbstractContextManager[None]:
    original = vars(cleanup)["_stream_sha256"]

    def _stream_sha256(fs: FileSystem, path: str, expected: Any, on_chunk: Any = None) -> Any:
        return original(_NoWriterMark(fs), path, expected, on_chunk)

    return swap(cleanup, "_stream_sha256", _stream_sha256)


# -- cleanup given the owner never asks it ------------------------------------------------


def _gc_without_owner_witness() -> contextlib.AbstractContextManager[None]:
    @contextlib.contextmanager
    def _census(paths: Any, plan: Any, owner: Any) -> Iterator[None]:
        yield None  # the mistake: the journal is the only witness, owner or not

    return swap(cleanup, "_census", _census)


# -- compaction: the checkpoint fsynced last ---------------------------------------------


def _compaction_removes_early() -> contextlib.AbstractContextManager[None]:
    def run(self: Compactor) -> None:
        # the mistake: the order of spec/compaction.py's EARLY_REMOVAL_TRANSITIONS
        self.write_snapshot()
        self.fsync_snapshot()
        self.write_checkpoint()
        self.start_next()
        self.archive_old()
        if self.delete_old:
            self.unlink_old()
        self.fsync_checkpoint()

    return swap(Compactor, "run", run)


# -- compaction: a snapshot without the settled check -------------------------------------


def _compaction_drops_prepared() -> contextlib.AbstractContextManager[None]:
    original = vars(Compactor)["prepare"]

    def prepare(self: Compactor, *, live: tuple[Any, ...], **rest: Any) -> None:
        # the mistake: "has a resolution" taken for "settled"; PREPARED has none yet
        kept = tuple(lease for lease in live if lease.phase is LeaseState.COMMITTED)
        original(self, live=kept, **rest)

    return swap(Compactor, "prepare", prepare)


MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        name="publish_before_fsync",
        label="publish-before-prepared",
        mistake="publish before the PREPARED record is fsynced",
        target="toolswap.journal.ArtifactRetentionJournal._append",
        scenarios=("publish_ok",),
        install=_publish_before_fsync,
    ),
    Mutant(
        name="release_before_remove",
        label="release-before-remove",
        mistake="append RELEASED before the owner removed the reference",
        target="toolswap.journal.ArtifactRetentionJournal.remove_reference",
        scenarios=("remove", "remove_failed"),
        install=_release_before_remove,
    ),
    Mutant(
        name="abort_without_tombstone",
        label="abort-before-tombstone",
        mistake="append ABORTED on an unsealed absence without writing the tombstone",
        target="toolswap.journal.ArtifactRetentionJournal._decide",
        scenarios=("reconcile_absent", "publish_in_flight"),
        install=_abort_without_tombstone,
    ),
    Mutant(
        name="skip_revalidation",
        label="gc-skips-revalidation",
        mistake="GC apply deletes the planned files without re-validating them",
        target="toolswap.cleanup._revalidate_and_delete",
        scenarios=("gc_concurrent_prepare",),
        install=_skip_revalidation,
    ),
    Mutant(
        name="trust_memory_path",
        label="gc-trusts-memory-path",
        mistake="GC deletes the artifact_path that a Memory record names",
        target="toolswap.cleanup.apply_cleanup_from_journal",
        scenarios=("gc_after_release",),
        install=_trust_memory_path,
    ),
    Mutant(
        name="counter_overwrites",
        label="counter-restart",
        mistake="the artifact counter restarts at 001 and overwrites the file",
        target="toolswap.externalizer.ToolResultExternalizer._reserve",
        scenarios=("externalize_after_existing",),
        install=_counter_overwrites,
    ),
    Mutant(
        name="splitlines_journal",
        mistake="recovery splits the journal with str.splitlines",
        target="toolswap.journal.ArtifactRetentionJournal._read_from",
        scenarios=("publish_ok", "append_after_torn_tail"),
        install=_splitlines_journal,
    ),
    Mutant(
        name="gc_ignores_corrupt_journal",
        mistake="cleanup reads a corrupt lease journal as one with no leases",
        target="toolswap.cleanup.plan_cleanup_from_journal",
        scenarios=("gc_corrupt_journal",),
        install=_gc_ignores_corrupt_journal,
    ),
    Mutant(
        name="gc_ignores_digest_conflict",
        mistake="a claim whose digest disagrees with the file does not protect it",
        target="toolswap.spec.cleanup.PLAN_RULES",
        scenarios=("gc_digest_conflict",),
        install=_gc_ignores_digest_conflict,
    ),
    Mutant(
        name="prepared_lease_expires",
        mistake="cleanup honours retain_until on a PREPARED lease",
        target="toolswap.journal.Recovery.protecting_claims",
        scenarios=("gc_expired_prepared",),
        install=_prepared_lease_expires,
    ),
    Mutant(
        name="uncertain_error_aborts",
        mistake="an uncertain publish error (timeout, lost ack) appends ABORTED like a rejection",
        target="toolswap.journal.ArtifactRetentionJournal.publish_reference",
        scenarios=("publish_uncertain_after_write", "publish_in_flight"),
        install=_uncertain_error_aborts,
    ),
    Mutant(
        name="replay_transaction_id",
        mistake="a restarted publisher sends a transaction id the journal already holds",
        target="toolswap.journal.ArtifactRetentionJournal.prepare",
        scenarios=("publish_replayed_after_restart",),
        install=_replay_transaction_id,
    ),
    Mutant(
        name="prepare_skips_checks",
        mistake="prepare appends PREPARED without re-checking the artifact under the lock",
        target="toolswap.journal.ArtifactRetentionJournal._verify_artifact",
        scenarios=("publish_after_gc",),
        install=_prepare_skips_checks,
    ),
    Mutant(
        name="raw_cleanup_bypasses_journal",
        mistake="raw-claims cleanup runs although the session has a lease journal",
        target="toolswap.cleanup._refuse_if_journal",
        scenarios=("raw_gc_with_journal",),
        install=_raw_cleanup_bypasses_journal,
    ),
    Mutant(
        name="gc_skips_name_denial",
        mistake="the cleanup plan does not deny names that are not tool_result_NNN.txt",
        target="toolswap.cleanup._denial",
        scenarios=("gc_unknown_entries",),
        install=_gc_skips_name_denial,
    ),
    Mutant(
        name="unanchored_artifact_name",
        mistake="the artifact-name pattern matches a prefix (tool_result_007.txt.bak)",
        target="toolswap.domain._FILENAME_RE",
        scenarios=("gc_unknown_entries",),
        install=_unanchored_artifact_name,
    ),
    Mutant(
        name="client_side_generation",
        mistake="the reconciler compares generations itself, then tombstones with remove (no CAS)",
        target="toolswap.journal.ArtifactRetentionJournal.reconcile_reference",
        scenarios=("publish_races_reconcile",),
        install=_client_side_generation,
    ),
    Mutant(
        name="reconcile_without_fence",
        mistake="the reconciler reads the owner, lets the fence go, then decides and tombstones",
        target="toolswap.journal.ArtifactRetentionJournal.reconcile_reference",
        scenarios=("publish_races_reconcile",),
        install=_reconcile_without_fence,
    ),
    Mutant(
        name="gc_ignores_writer",
        mistake="cleanup judges a file by its age alone, ignoring the writer's mark",
        target="toolswap.cleanup._stream_sha256",
        scenarios=("externalize_races_gc",),
        install=_gc_ignores_writer,
    ),
    Mutant(
        name="gc_without_owner_witness",
        mistake="cleanup given the owner deletes on the journal's word alone",
        target="toolswap.cleanup._census",
        scenarios=("gc_owner_witness",),
        install=_gc_without_owner_witness,
    ),
    Mutant(
        name="compaction_removes_early",
        label="remove-before-checkpoint-durable",
        mistake="compaction replaces and archives the old file before the checkpoint is durable",
        target="toolswap.journal_compaction.Compactor.run",
        scenarios=("compact", "compact_delete_old_then_publish"),
        install=_compaction_removes_early,
    ),
    Mutant(
        name="compaction_drops_prepared",
        label="snapshot-without-settled-check",
        mistake="the compaction snapshot keeps COMMITTED leases only (PREPARED taken as settled)",
        target="toolswap.journal_compaction.Compactor.prepare",
        scenarios=("compact", "compact_delete_old_then_publish"),
        install=_compaction_drops_prepared,
    ),
)

"""Every implementation mutant; each must be killed by its invariant."""


def mutant_named(name: str) -> Mutant:
    """The mutant called ``name`` (its identifier or its label); KeyError if there is none."""
    for mutant in MUTANTS:
        if name in (mutant.name, mutant.label):
            return mutant
    raise KeyError(name)


# -- the kill matrix -----------------------------------------------------------------------


def _caught_by(invariant: Invariant, counts: Iterable[str]) -> bool:
    """Whether a finding of ``invariant`` (or of a refinement of it) is among ``counts``."""
    return any(invariant.covers(c) for c in counts)


@attrs.frozen(kw_only=True)
class MutantResult:
    """What the explorer found with one mutant active."""

    mutant: Mutant
    crash_states: int
    violations_by_invariant: dict[str, int]
    violations_by_scenario: dict[str, int]
    first: CrashViolation | None
    seconds: float

    @property
    def killed(self) -> bool:
        """True when the expected invariant (or a refinement of it) reported a violation."""
        return _caught_by(self.mutant.invariant, self.violations_by_invariant)

    def to_dict(self) -> dict[str, Any]:
        return {
            "mutant": self.mutant.label,
            "identifier": self.mutant.name,
            "mistake": self.mutant.mistake,
            "target": self.mutant.target,
            "expected": self.mutant.invariant,
            "killed": self.killed,
            "scenarios": list(self.mutant.scenarios),
            "crash_states": self.crash_states,
            "violations_by_invariant": dict(sorted(self.violations_by_invariant.items())),
            "violations_by_scenario": dict(sorted(self.violations_by_scenario.items())),
            "first_violation": None if self.first is None else self.first.to_dict(),
            "seconds": round(self.seconds, 2),
        }


@attrs.frozen(kw_only=True)
class KillMatrix:
    """The unmutated baseline plus one :class:`MutantResult` per mutant."""

    baseline: ExplorationResult
    results: tuple[MutantResult, ...]

    @property
    def ok(self) -> bool:
        """Every mutant killed and the unmutated code clean."""
        return self.baseline.violation_total == 0 and all(r.killed for r in self.results)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "baseline": {
                "scenarios": list(self.baseline.per_scenario),
                "crash_states": self.baseline.states,
                "violation_count": self.baseline.violation_total,
                "violations_by_invariant": dict(sorted(self.baseline.violation_counts.items())),
                "violations": [v.to_dict() for v in self.baseline.violations],
                "seconds": round(self.baseline.seconds, 2),
            },
            "mutants": [r.to_dict() for r in self.results],
            "killed": sum(r.killed for r in self.results),
            "total": len(self.results),
        }


def _explore_one(
    mutant: Mutant,
    *,
    seeds: int,
    modes: Sequence[str],
    ignore: Iterable[str],
    on_state: Callable[[str, int, int], None] | None = None,
) -> MutantResult:
    by_scenario: dict[str, int] = {}
    found = ExplorationResult()
    first_expected: CrashViolation | None = None
    first_any: CrashViolation | None = None
    with mutant.active():
        for name in mutant.scenarios:
            one = CrashExplorer(
                [scenario_named(name)], seeds=seeds, modes=modes, ignore=ignore, max_violations=500
            ).explore(on_state=on_state)
            found.states += one.states
            found.seconds += one.seconds
            found.violation_counts.update(one.violation_counts)
            by_scenario[name] = one.violation_total
            for v in one.violations:
                first_any = first_any or v
                if first_expected is None and _caught_by(mutant.invariant, [v.invariant]):
                    first_expected = v
    first = first_expected or first_any
    return MutantResult(
        mutant=mutant,
        crash_states=found.states,
        violations_by_invariant=dict(found.violation_counts),
        violations_by_scenario=by_scenario,
        first=first,
        seconds=found.seconds,
    )


def kill_matrix(
    mutants: Sequence[Mutant] = MUTANTS,
    *,
    seeds: int = 1,
    modes: Sequence[str] = CRASH_MODES,
    ignore: Iterable[str] = (),
    progress: Callable[[MutantResult], None] | None = None,
    on_state: Callable[[str, int, int], None] | None = None,
) -> KillMatrix:
    """Explore the mutants' scenarios unmutated, then once per active mutant.

    ``progress`` hears each mutant's result; ``on_state`` every crash state
    as it is checked (the unmutated run's too), as :meth:`CrashExplorer.explore`.
    """
    ignored = tuple(ignore)
    names = list(dict.fromkeys(n for m in mutants for n in m.scenarios))
    baseline = CrashExplorer(
        [scenario_named(n) for n in names], seeds=seeds, modes=modes, ignore=ignored
    ).explore(on_state=on_state)
    results: list[MutantResult] = []
    for mutant in mutants:
        result = _explore_one(mutant, seeds=seeds, modes=modes, ignore=ignored, on_state=on_state)
        results.append(result)
        if progress is not None:
            progress(result)
    return KillMatrix(baseline=baseline, results=tuple(results))
