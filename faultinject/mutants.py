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
it (``remove_reference``, the artifact name reservation, the journal reader);
if the production signature changes, :func:`_swap` or the explorer's
``run_error`` says so, and a mutant killed only by ``run_error`` does not count
(:attr:`MutantResult.killed` wants the expected invariant).  A mistake that
lives in two places (a plan and its apply) swaps both at once (:func:`_swaps`).

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
``gc_skips_name_denial``        the plan does not deny non-artifact names;        L1
                                SessionPaths still refuses them, so every
                                cleanup fails while a stray file exists
``unanchored_artifact_name``    the artifact-name pattern matches a prefix:       S7
                                ``tool_result_007.txt.bak`` counts as ours
                                and is deleted
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

from toolswap import cleanup, domain
from toolswap.domain import ArtifactMemoryReference, artifact_filename
from toolswap.externalizer import ToolResultExternalizer
from toolswap.fs import REAL_FS, FileSystem
from toolswap.journal import ArtifactRetentionJournal, IllegalTransitionError
from toolswap.journal_format import Phase, parse_line, validate_transaction_id
from toolswap.owner import ObservedState, OwnerObservation

from .disk import CRASH_MODES
from .explorer import CrashExplorer, ExplorationResult, Violation, World, scenario_named

__all__ = [
    "MUTANTS",
    "Mutant",
    "MutantResult",
    "KillMatrix",
    "kill_matrix",
    "mutant_named",
]

_ACTIVE = threading.Lock()  # one mutant at a time, process-wide


@contextlib.contextmanager
def _swap(owner: Any, name: str, replacement: object) -> Iterator[None]:
    """Replace ``owner.name`` (defined on ``owner`` itself) and restore it on exit."""
    namespace = vars(owner)
    if name not in namespace:
        raise AttributeError(f"mutant target {owner.__name__}.{name} no longer exists")
    original = namespace[name]
    setattr(owner, name, replacement)
    try:
        yield
    finally:
        setattr(owner, name, original)


@contextlib.contextmanager
def _swaps(*swaps: tuple[Any, str, object]) -> Iterator[None]:
    """Several :func:`_swap` at once, for a mistake made in more than one place.

    Entered only when the mutant is, and undone in reverse order (even when a
    later target is gone and its swap raises).
    """
    with contextlib.ExitStack() as stack:
        for owner, name, replacement in swaps:
            stack.enter_context(_swap(owner, name, replacement))
        yield


@attrs.frozen(kw_only=True)
class Mutant:
    """One classic mistake applied to one real method or function."""

    name: str
    mistake: str
    invariant: str  # the invariant expected to catch it
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
        self: ArtifactRetentionJournal, txn: str, phase: Phase, claim: Any, now: float | None
    ) -> None:
        if phase is not Phase.PREPARED:
            original(self, txn, phase, claim, now)
            return
        real = self._fs
        self._fs = _NoFsync(real)
        try:
            original(self, txn, phase, claim, now)  # written, never fsynced
        finally:
            self._fs = real

    return _swap(ArtifactRetentionJournal, "_append", _append)


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
        if phase is Phase.RELEASED:
            return None
        if phase is not Phase.COMMITTED:
            raise IllegalTransitionError(f"transaction {txn!r} is {phase.value}")
        self.release(txn, now=now)  # the mistake: the journal first
        self._fs.crash_point("mutant.after_release")
        return remover()

    return _swap(ArtifactRetentionJournal, "remove_reference", remove_reference)


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

    return _swap(ArtifactRetentionJournal, "_decide", _decide)


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

    return _swap(cleanup, "_revalidate_and_delete", _revalidate_and_delete)


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
            record = memory(txn) if phase is Phase.RELEASED else None
            if record is None:
                continue
            try:  # the mistake: the path comes from Memory, not from the session
                fs.unlink(record.artifact_path)
            except FileNotFoundError:
                continue
            fs.fsync_dir(posixpath.dirname(record.artifact_path))
        return report

    return _swap(cleanup, "apply_cleanup_from_journal", apply_cleanup_from_journal)


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

    return _swap(ToolResultExternalizer, "_reserve", _reserve)


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

    return _swap(ArtifactRetentionJournal, "_read_from", _read_from)


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
        fs: FileSystem = REAL_FS,
        now: float | None = None,
    ) -> Any:
        try:
            return apply_original(paths, plan, journal, fs=fs, now=now)
        except cleanup.CleanupRefused:  # ... and so protects nothing at apply either
            assert now is not None
            with paths.session_lock(fs):
                return cleanup._apply_locked(paths, plan, no_claims, fs, now)

    return _swaps(
        (cleanup, "plan_cleanup_from_journal", plan_cleanup_from_journal),
        (cleanup, "apply_cleanup_from_journal", apply_cleanup_from_journal),
    )


# -- a digest conflict does not protect ----------------------------------------------------


def _gc_ignores_digest_conflict() -> contextlib.AbstractContextManager[None]:
    verdict_original = vars(cleanup)["_claim_verdict"]
    revalidate_original: Callable[..., tuple[str, str]] = vars(cleanup)["_revalidate_and_delete"]

    def _claim_verdict(digests: Any, sha256: str) -> Any:
        # the mistake: only a claim on these very bytes counts; another digest is
        # "some other file", so a tampered or conflicting claim protects nothing
        matching = {d: n for d, n in (digests or {}).items() if d == sha256}
        return verdict_original(matching, sha256)

    def _revalidate_and_delete(paths: Any, entry: Any, index: Any, *rest: Any) -> tuple[str, str]:
        digests = index.by_name.get(entry.name) or {}
        kept = {d: n for d, n in digests.items() if d == entry.sha256}  # the same mistake
        by_name = {**index.by_name, entry.name: kept}
        return revalidate_original(paths, entry, cleanup._ClaimIndex(by_name=by_name), *rest)

    return _swaps(
        (cleanup, "_claim_verdict", _claim_verdict),
        (cleanup, "_revalidate_and_delete", _revalidate_and_delete),
    )


# -- a PREPARED lease that expires -------------------------------------------------------


def _prepared_lease_expires() -> contextlib.AbstractContextManager[None]:
    original: Callable[[Any], list[Any]] = vars(cleanup)["_protecting_claims"]

    def _protecting_claims(recovery: Any) -> list[Any]:
        # the mistake: a PREPARED lease keeps the retain_until its intent carries
        expiring = [
            recovery.transactions[t]
            for t, phase in recovery.states.items()
            if phase is Phase.PREPARED
        ]
        pending = {c.source_id for c in expiring}
        return [c for c in original(recovery) if c.source_id not in pending] + expiring

    return _swap(cleanup, "_protecting_claims", _protecting_claims)


# -- unknown names in tool-results/ --------------------------------------------------------


def _gc_skips_name_denial() -> contextlib.AbstractContextManager[None]:
    original: Callable[[str, Any], str | None] = vars(cleanup)["_denial"]

    def _denial(name: str, facts: Any) -> str | None:
        # the mistake: only the entry's type is judged, as if every name were an artifact's
        return original(artifact_filename(1), facts)

    return _swap(cleanup, "_denial", _denial)


class _PrefixPattern:
    """The artifact-name pattern with ``fullmatch`` done by ``match`` (no end anchor)."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self._pattern = pattern

    def fullmatch(self, text: str) -> re.Match[str] | None:
        return self._pattern.match(text)  # the mistake: a prefix is enough


def _unanchored_artifact_name() -> contextlib.AbstractContextManager[None]:
    return _swap(domain, "_FILENAME_RE", _PrefixPattern(vars(domain)["_FILENAME_RE"]))


MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        name="publish_before_fsync",
        label="publish-before-prepared",
        mistake="publish before the PREPARED record is fsynced",
        invariant="S2",
        target="toolswap.journal.ArtifactRetentionJournal._append",
        scenarios=("publish_ok",),
        install=_publish_before_fsync,
    ),
    Mutant(
        name="release_before_remove",
        label="release-before-remove",
        mistake="append RELEASED before the owner removed the reference",
        invariant="S4",
        target="toolswap.journal.ArtifactRetentionJournal.remove_reference",
        scenarios=("remove", "remove_failed"),
        install=_release_before_remove,
    ),
    Mutant(
        name="abort_without_tombstone",
        label="abort-before-tombstone",
        mistake="append ABORTED on an unsealed absence without writing the tombstone",
        invariant="S3",
        target="toolswap.journal.ArtifactRetentionJournal._decide",
        scenarios=("reconcile_absent", "publish_in_flight"),
        install=_abort_without_tombstone,
    ),
    Mutant(
        name="skip_revalidation",
        label="gc-skips-revalidation",
        mistake="GC apply deletes the planned files without re-validating them",
        invariant="S1",
        target="toolswap.cleanup._revalidate_and_delete",
        scenarios=("gc_concurrent_prepare",),
        install=_skip_revalidation,
    ),
    Mutant(
        name="trust_memory_path",
        label="gc-trusts-memory-path",
        mistake="GC deletes the artifact_path that a Memory record names",
        invariant="S7",
        target="toolswap.cleanup.apply_cleanup_from_journal",
        scenarios=("gc_after_release",),
        install=_trust_memory_path,
    ),
    Mutant(
        name="counter_overwrites",
        label="counter-restart",
        mistake="the artifact counter restarts at 001 and overwrites the file",
        invariant="S6",
        target="toolswap.externalizer.ToolResultExternalizer._reserve",
        scenarios=("externalize_after_existing",),
        install=_counter_overwrites,
    ),
    Mutant(
        name="splitlines_journal",
        mistake="recovery splits the journal with str.splitlines",
        invariant="S6",
        target="toolswap.journal.ArtifactRetentionJournal._read_from",
        scenarios=("publish_ok", "append_after_torn_tail"),
        install=_splitlines_journal,
    ),
    Mutant(
        name="gc_ignores_corrupt_journal",
        mistake="cleanup reads a corrupt lease journal as one with no leases",
        invariant="S1",
        target="toolswap.cleanup.plan_cleanup_from_journal",
        scenarios=("gc_corrupt_journal",),
        install=_gc_ignores_corrupt_journal,
    ),
    Mutant(
        name="gc_ignores_digest_conflict",
        mistake="a claim whose digest disagrees with the file does not protect it",
        invariant="S1",
        target="toolswap.cleanup._claim_verdict",
        scenarios=("gc_digest_conflict",),
        install=_gc_ignores_digest_conflict,
    ),
    Mutant(
        name="prepared_lease_expires",
        mistake="cleanup honours retain_until on a PREPARED lease",
        invariant="S1",
        target="toolswap.cleanup._protecting_claims",
        scenarios=("gc_expired_prepared",),
        install=_prepared_lease_expires,
    ),
    Mutant(
        name="gc_skips_name_denial",
        mistake="the cleanup plan does not deny names that are not tool_result_NNN.txt",
        invariant="L1",
        target="toolswap.cleanup._denial",
        scenarios=("gc_unknown_entries",),
        install=_gc_skips_name_denial,
    ),
    Mutant(
        name="unanchored_artifact_name",
        mistake="the artifact-name pattern matches a prefix (tool_result_007.txt.bak)",
        invariant="S7",
        target="toolswap.domain._FILENAME_RE",
        scenarios=("gc_unknown_entries",),
        install=_unanchored_artifact_name,
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


def _caught_by(invariant: str, counts: Iterable[str]) -> bool:
    return any(c == invariant or c.startswith(invariant + ".") for c in counts)


@attrs.frozen(kw_only=True)
class MutantResult:
    """What the explorer found with one mutant active."""

    mutant: Mutant
    crash_states: int
    violations_by_invariant: dict[str, int]
    violations_by_scenario: dict[str, int]
    first: Violation | None
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
    mutant: Mutant, *, seeds: int, modes: Sequence[str], ignore: Iterable[str]
) -> MutantResult:
    by_scenario: dict[str, int] = {}
    found = ExplorationResult()
    first_expected: Violation | None = None
    first_any: Violation | None = None
    with mutant.active():
        for name in mutant.scenarios:
            one = CrashExplorer(
                [scenario_named(name)], seeds=seeds, modes=modes, ignore=ignore, max_violations=500
            ).explore()
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
) -> KillMatrix:
    """Explore the mutants' scenarios unmutated, then once per active mutant."""
    ignored = tuple(ignore)
    names = list(dict.fromkeys(n for m in mutants for n in m.scenarios))
    baseline = CrashExplorer(
        [scenario_named(n) for n in names], seeds=seeds, modes=modes, ignore=ignored
    ).explore()
    results: list[MutantResult] = []
    for mutant in mutants:
        result = _explore_one(mutant, seeds=seeds, modes=modes, ignore=ignored)
        results.append(result)
        if progress is not None:
            progress(result)
    return KillMatrix(baseline=baseline, results=tuple(results))
