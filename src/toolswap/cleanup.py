"""Two-phase, fail-closed cleanup of a session's ``tool-results/`` (docs/design.md section 7).

Theory of operation
-------------------
Cleanup is a **plan** (read-only) followed by an **apply** (the only step that
deletes).  Nothing is deleted on doubt: every question whose answer is not a
clear "this is our own unreferenced, old, unchanged orphan" keeps the file.

Plan (:func:`plan_cleanup`, :func:`plan_cleanup_from_journal`):

1. ``lstat`` ``tool-results/``; a symlink or non-directory refuses (S7).
2. ``lstat`` every entry; stream a SHA-256 of every regular artifact file
   (1 MiB chunks), freezing a snapshot (size, mtime_ns, device, inode).
3. Decide one status per entry, first match wins (the spec's
   ``cleanup.PLAN_RULES`` decides, through :func:`toolswap.decisions.plan_status`;
   this module gathers the facts the rows read):

   =====================  ====================================================
   ``denied``             not ours: a symlink (never followed), a directory,
                          any non-regular entry, a name that is not
                          ``tool_result_NNN.txt``
   ``retained_unknown``   an artifact name we cannot vouch for: another uid,
                          unreadable, or changed while it was hashed
   ``retained_writing``   still being written: its writer holds the mark (an
                          exclusive ``flock`` taken under the session lock
                          when the name was created), however old its last
                          write
   ``retained_corrupt``   an active claim names it, and a claim's digest
                          disagrees with the file's bytes
   ``retained_referenced`` active claims name it and their digests match
   ``retained_recent``    younger than ``orphan_ttl_seconds`` (or from the future)
   ``retained_limit``     an orphan past the TTL, beyond ``max_deletions``
                          (oldest orphans are planned first)
   ``planned_delete``     an orphan past the TTL, within the limit
   =====================  ====================================================

   A claim whose file is gone is reported as ``missing_referenced``: a
   dangling pointer someone must hear about.  A claim for another session
   refuses the whole plan (:class:`ForeignClaimError`): the caller is cleaning
   a session it does not hold claims for, and ignoring the claim could delete
   the file it meant to keep (S1).  It never maps to a path either way (S7).

Apply (:func:`apply_cleanup`, :func:`apply_cleanup_from_journal`):

1. Refuse a hostile plan (odd names, duplicates, another session or root,
   more planned deletions than the plan's own limit) before touching anything.
2. Given an owner (the second witness), enter its census fence for every
   planned artifact (promise O9 of :mod:`toolswap.owner`): until apply ends,
   no publish naming one of them lands, and the owner says which visible
   references name each.  An owner that cannot tell keeps every file.  The
   fence comes before the session lock, as the journal's does.
3. Take the session lock -- the same lock ``prepare`` takes -- and obtain the
   **current** claims inside it (the journal-aware form re-reads the journal
   there; the raw form refuses if the session has a journal at all).
4. For each ``planned_delete`` entry, still inside the lock: a current claim,
   or a visible reference the owner shows, keeps it; re-check file type
   (``lstat``, never through a symlink), owner, snapshot, the writer's mark,
   age and the **full** streamed digest.  Any change is ``race_detected``; a
   vanished file is ``already_missing``.
5. Unlink; after the last unlink fsync the directory once; release the lock,
   then the owner's fence.

Which claims protect is always said, never assumed: the journal's leases, or
the caller's raw claims (``claims=()`` for a session whose artifacts nothing
references).  Given neither, cleanup uses the session's journal; a session
that never had one refuses (:class:`ClaimsRequiredError`) rather than read a
forgotten argument as "nothing is referenced".

A plan is only a list of candidates: apply trusts nothing in it but the name
(validated again) and the expected facts it compares against.  Applying the
same plan twice never deletes more (the second run finds ``already_missing``).
A dry run (``policy.dry_run``) re-validates and reports ``dry_run`` for what
would be deleted, and deletes nothing.
"""

from __future__ import annotations

import errno
import hashlib
import math
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import attrs

from toolswap.spec.cleanup import ApplyStatus as _ApplyStatus
from toolswap.spec.cleanup import EntryKind as _EntryKind
from toolswap.spec.cleanup import PlanStatus as _PlanStatus

from .decisions import (
    WITNESS,
    apply_status,
    claim_active,
    digest_of,
    hashed_digest,
    plan_status,
    planned_facts,
    spec_claims,
    spec_facts,
    spec_policy,
)
from .domain import (
    ArtifactRetentionClaim,
    artifact_number,
    format_source_id,
    is_artifact_filename,
    parse_source_id,
)
from .errors import (
    ClaimsRequiredError,
    CleanupRefused,
    CorruptStateError,
    EnvironmentFailure,
    ForeignClaimError,
    HostilePlanError,
    JournalRequiredError,
    UsageError,
)
from .fs import REAL_FS, FileFacts, FileSystem
from .journal_anchor import ANCHOR_NAME
from .session import TOOL_RESULTS, SessionPaths

if TYPE_CHECKING:
    from .journal import ArtifactRetentionJournal
    from .owner import ArtifactReferenceOwner

__all__ = [
    "ArtifactCleanupPolicy",
    "CleanupPlan",
    "CleanupReport",
    "PlanEntry",
    "ReportEntry",
    "FileSnapshot",
    "ScanProgress",
    "CleanupRefused",
    "ClaimsRequiredError",
    "ForeignClaimError",
    "HostilePlanError",
    "JournalRequiredError",
    "PLAN_STATUSES",
    "APPLY_STATUSES",
    "plan_cleanup",
    "apply_cleanup",
    "plan_cleanup_from_journal",
    "apply_cleanup_from_journal",
    "cleanup_session",
    "cleanup_session_from_journal",
    "session_journal",
]

CHUNK_SIZE = 1024 * 1024
PLAN_VERSION = 2  # 2: no ``foreign_claims`` (a foreign claim refuses the plan)

# One spelling per status: the spec's enums own the names (docs/where-things-live.md).
RETAINED_REFERENCED = _PlanStatus.RETAINED_REFERENCED
RETAINED_RECENT = _PlanStatus.RETAINED_RECENT
RETAINED_LIMIT = _PlanStatus.RETAINED_LIMIT
RETAINED_UNKNOWN = _PlanStatus.RETAINED_UNKNOWN
RETAINED_WRITING = _PlanStatus.RETAINED_WRITING
DENIED = _PlanStatus.DENIED
RETAINED_CORRUPT = _PlanStatus.RETAINED_CORRUPT
MISSING_REFERENCED = _PlanStatus.MISSING_REFERENCED
PLANNED_DELETE = _PlanStatus.PLANNED_DELETE

DELETED = _ApplyStatus.DELETED
RACE_DETECTED = _ApplyStatus.RACE_DETECTED
ALREADY_MISSING = _ApplyStatus.ALREADY_MISSING
DRY_RUN = "dry_run"  # the implementation's dry run: re-validated, not deleted

PLAN_STATUSES: frozenset[str] = frozenset(_PlanStatus)
#: Apply reports what the plan rows would say now when a claim or the clock keeps a file.
APPLY_STATUSES: frozenset[str] = frozenset(
    {
        *_ApplyStatus,
        DRY_RUN,
        RETAINED_CORRUPT,
        RETAINED_RECENT,
        RETAINED_UNKNOWN,
        RETAINED_WRITING,
    }
)
_SYMLINK = _EntryKind.SYMLINK


# -- errors ----------------------------------------------------------------------


# -- policy ----------------------------------------------------------------------


def _check_ttl(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise UsageError(f"orphan_ttl_seconds must be a finite number >= 0, got {value!r}")


def _check_limit(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageError(f"max_deletions must be an integer >= 0, got {value!r}")


def _check_bool(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, bool):
        raise UsageError(f"{attribute.name} must be True or False, got {value!r}")


@attrs.frozen(kw_only=True)
class ArtifactCleanupPolicy:
    """How much cleanup may do; the defaults keep a day and only report (``dry_run``)."""

    orphan_ttl_seconds: float = attrs.field(default=86400, validator=_check_ttl)
    max_deletions: int = attrs.field(default=100, validator=_check_limit)
    dry_run: bool = attrs.field(default=True, validator=_check_bool)

    def to_dict(self) -> dict[str, Any]:
        return {
            "orphan_ttl_seconds": self.orphan_ttl_seconds,
            "max_deletions": self.max_deletions,
            "dry_run": self.dry_run,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ArtifactCleanupPolicy:
        _exact_keys(data, cls.__name__, {"orphan_ttl_seconds", "max_deletions", "dry_run"})
        return cls(
            orphan_ttl_seconds=data["orphan_ttl_seconds"],
            max_deletions=data["max_deletions"],
            dry_run=data["dry_run"],
        )


# -- plan and report values -------------------------------------------------------


@attrs.frozen(kw_only=True)
class FileSnapshot:
    """The facts apply compares before it deletes; any difference is a race."""

    size: int
    mtime_ns: int
    device: int
    inode: int

    @classmethod
    def of(cls, facts: FileFacts) -> FileSnapshot:
        return cls(size=facts.size, mtime_ns=facts.mtime_ns, device=facts.device, inode=facts.inode)

    def to_dict(self) -> dict[str, int]:
        return {
            "size": self.size,
            "mtime_ns": self.mtime_ns,
            "device": self.device,
            "inode": self.inode,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FileSnapshot:
        _exact_keys(data, cls.__name__, {"size", "mtime_ns", "device", "inode"})
        values = {key: data[key] for key in ("size", "mtime_ns", "device", "inode")}
        for key, value in values.items():
            if isinstance(value, bool) or not isinstance(value, int):
                raise HostilePlanError(f"snapshot {key} must be an integer, got {value!r}")
        return cls(**values)


@attrs.frozen(kw_only=True)
class PlanEntry:
    """One decision of a plan: a file name (never a path), a status and why."""

    name: str
    status: str
    reason: str
    snapshot: FileSnapshot | None = None
    sha256: str | None = None
    reference_count: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "reason": self.reason,
            "snapshot": None if self.snapshot is None else self.snapshot.to_dict(),
            "sha256": self.sha256,
            "reference_count": self.reference_count,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PlanEntry:
        keys = {"name", "status", "reason", "snapshot", "sha256", "reference_count"}
        _exact_keys(data, cls.__name__, keys)
        snapshot = data["snapshot"]
        return cls(
            name=data["name"],
            status=data["status"],
            reason=data["reason"],
            snapshot=None if snapshot is None else FileSnapshot.from_dict(snapshot),
            sha256=data["sha256"],
            reference_count=data["reference_count"],
        )


@attrs.frozen(kw_only=True)
class CleanupPlan:
    """The read-only half of cleanup: what apply may delete, and why the rest stays."""

    session_id: str
    directory: tuple[int, int] | None  # (device, inode) of tool-results/, None if absent
    planned_at: float
    policy: ArtifactCleanupPolicy
    entries: tuple[PlanEntry, ...]
    journal_aware: bool = False

    @property
    def counts(self) -> dict[str, int]:
        return _count(entry.status for entry in self.entries)

    @property
    def planned(self) -> tuple[PlanEntry, ...]:
        return tuple(entry for entry in self.entries if entry.status == PLANNED_DELETE)

    def entry(self, name: str) -> PlanEntry:
        for candidate in self.entries:
            if candidate.name == name:
                return candidate
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": PLAN_VERSION,
            "session_id": self.session_id,
            "directory": None if self.directory is None else list(self.directory),
            "planned_at": self.planned_at,
            "policy": self.policy.to_dict(),
            "journal_aware": self.journal_aware,
            "counts": self.counts,
            "entries": [entry.to_dict() for entry in self.entries],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CleanupPlan:
        keys = {
            "version",
            "session_id",
            "directory",
            "planned_at",
            "policy",
            "journal_aware",
            "counts",
            "entries",
        }
        _exact_keys(data, cls.__name__, keys)
        if data["version"] != PLAN_VERSION:
            raise HostilePlanError(f"unsupported plan version {data['version']!r}")
        directory = data["directory"]
        if directory is not None:
            if not isinstance(directory, list | tuple) or len(directory) != 2:
                raise HostilePlanError(f"plan directory must be [device, inode], got {directory!r}")
            directory = (directory[0], directory[1])
        plan = cls(
            session_id=data["session_id"],
            directory=directory,
            planned_at=data["planned_at"],
            policy=ArtifactCleanupPolicy.from_dict(data["policy"]),
            entries=tuple(PlanEntry.from_dict(entry) for entry in data["entries"]),
            journal_aware=bool(data["journal_aware"]),
        )
        _check_plan_shape(plan)
        return plan


@attrs.frozen(kw_only=True)
class ReportEntry:
    """What apply did to one planned entry."""

    name: str
    status: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "status": self.status, "reason": self.reason}


@attrs.frozen(kw_only=True)
class CleanupReport:
    """The outcome of apply: one entry per ``planned_delete`` entry of the plan."""

    session_id: str
    applied_at: float
    dry_run: bool
    entries: tuple[ReportEntry, ...]

    @property
    def counts(self) -> dict[str, int]:
        return _count(entry.status for entry in self.entries)

    @property
    def deleted(self) -> tuple[str, ...]:
        return tuple(entry.name for entry in self.entries if entry.status == DELETED)

    def entry(self, name: str) -> ReportEntry:
        for candidate in self.entries:
            if candidate.name == name:
                return candidate
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "applied_at": self.applied_at,
            "dry_run": self.dry_run,
            "counts": self.counts,
            "entries": [entry.to_dict() for entry in self.entries],
        }


@attrs.frozen(kw_only=True)
class ScanProgress:
    """Handed to a planning ``progress`` callback after each chunk and each file."""

    files_done: int
    files_total: int
    bytes_done: int
    bytes_total: int


Progress = Callable[[ScanProgress], None]


def _count(statuses: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for status in statuses:
        counts[status] = counts.get(status, 0) + 1
    return dict(sorted(counts.items()))


def _exact_keys(data: object, what: str, keys: set[str]) -> None:
    if not isinstance(data, Mapping):
        raise HostilePlanError(f"{what}.from_dict wants a mapping, got {type(data).__name__}")
    if set(data) != keys:
        raise HostilePlanError(
            f"{what}.from_dict: missing {sorted(keys - set(data))}, "
            f"unknown {sorted(set(data) - keys)}"
        )


# -- claims ------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class _ClaimIndex:
    """Active claims of this session by file name: {name: {digest: reference count}}."""

    by_name: Mapping[str, Mapping[str, int]]


def _index_claims(
    paths: SessionPaths, claims: Iterable[ArtifactRetentionClaim], now: float
) -> _ClaimIndex:
    by_name: dict[str, dict[str, int]] = {}
    for claim in claims:
        if not isinstance(claim, ArtifactRetentionClaim):
            raise UsageError(f"claims must be ArtifactRetentionClaim, got {type(claim).__name__}")
        parsed = parse_source_id(claim.source_id)
        if parsed.session_id != paths.session_id:
            raise ForeignClaimError(
                f"claim {claim.source_id} names session {parsed.session_id!r}, not "
                f"{paths.session_id!r}: refusing to clean with it (is this the right session?)"
            )
        if not claim_active(claim, now):
            continue  # an expired claim no longer protects
        digests = by_name.setdefault(parsed.filename, {})
        digests[claim.content_sha256] = digests.get(claim.content_sha256, 0) + claim.reference_count
    return _ClaimIndex(by_name=by_name)


def _claim_reason(digests: Mapping[str, int], sha256: str) -> str:
    """Why active claims keep the file, in words (the table decides corrupt vs referenced)."""
    if set(digests) != {sha256}:
        return (
            f"a claim's digest disagrees with the file (file {sha256[:12]}..., "
            f"claims {', '.join(d[:12] + '...' for d in sorted(digests))})"
        )
    return f"{sum(digests.values())} active reference(s), digest matches"


# -- hashing -------------------------------------------------------------------------


class _Hashed(Protocol):
    def __call__(self, done: int) -> None: ...


class _BeingWritten(Exception):
    """The file's writer still holds its mark: its bytes are not complete."""


def _stream_sha256(
    fs: FileSystem, path: str, expected: FileFacts, on_chunk: _Hashed | None = None
) -> str | None:
    """The SHA-256 of ``path`` if it is still the file ``expected`` describes, else None.

    Opens a regular file without following a symlink and first asks for the
    writer's mark: a shared lock that a writer's exclusive one refuses
    (:class:`_BeingWritten`; the probe holds its lock until the handle closes,
    which no writer waits for: a writer locks only the name it just created).
    Then streams at most one byte more than ``expected.size`` in 1 MiB chunks,
    and checks on the open handle that it is the file that was ``lstat``-ed
    (device, inode) and that it did not change while it was read (size,
    mtime).  The identity is checked after the read, not before: a handle's
    file never changes, and the read is bounded, so one ``fstat`` tells both.
    """
    handle = fs.open_read(path)
    try:
        if not fs.try_flock(handle, exclusive=False):
            raise _BeingWritten(path)
        digest = hashlib.sha256()
        done = 0
        while True:
            # One byte past the size the lstat saw: a small file takes one read,
            # not a second one to find its end, and a byte more is a change.
            left = expected.size - done + 1
            chunk = fs.read(handle, CHUNK_SIZE if left > CHUNK_SIZE else left)
            if not chunk:
                break
            digest.update(chunk)
            done += len(chunk)
            if on_chunk is not None:
                on_chunk(done)
            if done >= expected.size:
                break  # the size it had, or more: the fstat below tells a grown file
        after = fs.fstat(handle)
    finally:
        fs.close(handle)
    same = (after.device, after.inode, after.size, after.mtime_ns) == (
        expected.device,
        expected.inode,
        expected.size,
        expected.mtime_ns,
    )
    if done != expected.size or not after.is_regular or not same:
        return None
    return digest.hexdigest()


# -- planning -------------------------------------------------------------------------


def _directory_identity(paths: SessionPaths, fs: FileSystem) -> tuple[int, int] | None:
    try:
        facts = fs.lstat(paths.tool_results)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise EnvironmentFailure(f"cannot inspect {TOOL_RESULTS}/: {exc}") from exc
    if facts.is_symlink or not facts.is_dir:
        raise CleanupRefused(f"{TOOL_RESULTS}/ is not a real directory; cleanup refuses (S7)")
    return (facts.device, facts.inode)


def _plan(
    paths: SessionPaths,
    index: _ClaimIndex,
    policy: ArtifactCleanupPolicy,
    fs: FileSystem,
    now: float,
    progress: Progress | None,
    journal_aware: bool,
) -> CleanupPlan:
    if not isinstance(policy, ArtifactCleanupPolicy):
        raise UsageError(f"policy must be an ArtifactCleanupPolicy, got {type(policy).__name__}")
    directory = _directory_identity(paths, fs)
    names: list[str] = []
    if directory is not None:
        try:
            names = fs.listdir(paths.tool_results)
        except OSError as exc:
            raise EnvironmentFailure(f"cannot list {TOOL_RESULTS}/: {exc}") from exc

    rules = spec_policy(policy.orphan_ttl_seconds, policy.max_deletions)
    decided: dict[str, PlanEntry] = {}
    facts_of: dict[str, FileFacts] = {}
    for name in names:
        if name in {".", ".."} or "/" in name or "\0" in name:  # pragma: no cover - OS never
            continue
        try:
            facts = fs.lstat(os.path.join(paths.tool_results, name))
        except FileNotFoundError:
            continue  # vanished between listdir and lstat: nothing to decide
        except OSError as exc:
            claims = spec_claims(index.by_name.get(name))
            status = plan_status(spec_facts(name, None), claims, rules, now, 0)
            decided[name] = PlanEntry(name=name, status=status, reason=f"cannot inspect: {exc}")
            continue
        denial = _denial(name, facts)
        if denial is not None:
            claims = spec_claims(index.by_name.get(name))
            status = plan_status(spec_facts(name, facts), claims, rules, now, 0)
            decided[name] = PlanEntry(name=name, status=status, reason=denial)
            continue
        facts_of[name] = facts

    uid = fs.current_uid()
    files_total = len(facts_of)
    bytes_total = sum(f.size for f in facts_of.values())
    files_done = 0
    bytes_before = 0
    hashed: list[tuple[int, str, FileSnapshot, _Read]] = []
    planned = 0

    def report(done: int) -> None:
        if progress is not None:
            progress(
                ScanProgress(
                    files_done=files_done,
                    files_total=files_total,
                    bytes_done=bytes_before + done,
                    bytes_total=bytes_total,
                )
            )

    for name, facts in facts_of.items():
        snapshot = FileSnapshot.of(facts)
        entry = _decide_file(paths, name, facts, snapshot, uid, index, rules, fs, now, report)
        files_done += 1
        bytes_before += facts.size
        report(0)
        if isinstance(entry, PlanEntry):
            decided[name] = entry
        else:
            hashed.append((facts.mtime_ns, name, snapshot, entry))

    # Every file that was read is asked once, oldest first, with what is planned so
    # far: the oldest orphans count toward max_deletions first.
    hashed.sort(key=lambda h: (h[0], h[1]))
    for _, name, snapshot, read in hashed:
        status = plan_status(read.seen, read.claims, rules, now, planned)
        reason = read.reason
        if status == PLANNED_DELETE:
            planned += 1
            reason = "unreferenced orphan past the TTL"
        elif status == RETAINED_LIMIT:
            reason = f"orphan past the TTL beyond max_deletions={policy.max_deletions}"
        elif reason is None:
            age = max(now - read.seen.mtime, 0.0)
            reason = f"unreferenced, {age:.0f}s old < TTL {policy.orphan_ttl_seconds:g}s"
        decided[name] = PlanEntry(
            name=name,
            status=status,
            reason=reason,
            snapshot=snapshot,
            sha256=read.sha256,
            reference_count=read.references,
        )

    for name, digests in index.by_name.items():
        if name not in decided:
            count = sum(digests.values())
            decided[name] = PlanEntry(
                name=name,
                status=plan_status(None, spec_claims(digests), rules, now, planned),
                reason=f"{count} active reference(s) but the file is gone (dangling pointer)",
                reference_count=count,
            )

    entries = tuple(decided[name] for name in sorted(decided))
    return CleanupPlan(
        session_id=paths.session_id,
        directory=directory,
        planned_at=now,
        policy=policy,
        entries=entries,
        journal_aware=journal_aware,
    )


def _denial(name: str, facts: FileFacts) -> str | None:
    if facts.is_symlink:
        return "a symlink: never followed, never deleted"
    if facts.is_dir:
        return "a directory: cleanup only removes artifact files"
    if not facts.is_regular:
        return "not a regular file"
    if facts.nlink > 1:
        return f"hard-linked ({facts.nlink} links): may be someone else's file, never deleted"
    if not is_artifact_filename(name):
        return "not an artifact name (tool_result_NNN.txt)"
    return None


class _Read(NamedTuple):
    """A file whose bytes were read: what the plan rows need, asked in age order."""

    sha256: str
    seen: Any  # the spec's EntryFacts
    claims: tuple[Any, ...]
    references: int
    # Why, unless the rows plan it or the limit keeps it; None: unclaimed, so
    # its age (worded only if the table keeps it, most are planned).
    reason: str | None


def _decide_file(
    paths: SessionPaths,
    name: str,
    facts: FileFacts,
    snapshot: FileSnapshot,
    uid: int,
    index: _ClaimIndex,
    rules: Any,
    fs: FileSystem,
    now: float,
    report: _Hashed,
) -> PlanEntry | _Read:
    """A final entry for a file that was not read, or what was read (asked later, by age).

    Facts are gathered in the order the rows read them, so a file the table
    already decided on (another uid) is never read.
    """
    digests = index.by_name.get(name)
    claims = spec_claims(digests)
    count = sum(digests.values()) if digests else 0
    sha256: str | None = None
    gone = False
    if facts.uid != uid:
        reason = f"owned by uid {facts.uid}, not {uid}"
    else:
        try:
            sha256 = _stream_sha256(fs, paths.artifact_path(name), facts, report)
            reason = "changed while it was hashed"
        except _BeingWritten:
            writing = spec_facts(name, facts, owned=True, writing=True)
            return PlanEntry(
                name=name,
                status=plan_status(writing, claims, rules, now, 0),
                reason="being written: its writer holds the mark",
                snapshot=snapshot,
                reference_count=count,
            )
        except FileNotFoundError:
            gone = True
            reason = "vanished while it was planned"
        except OSError as exc:
            reason = f"cannot read: {exc.strerror or exc}"
    if sha256 is not None:
        seen = spec_facts(name, facts, owned=True, digest=hashed_digest(sha256))
        why = _claim_reason(digests, sha256) if digests else None
        return _Read(sha256, seen, claims, count, why)
    if gone and digests:
        reason += "; it is referenced"
        unread = None  # the claimed file is gone: the table's first row
    else:
        unread = spec_facts(name, facts, trusted=False, owned=True)
    status = plan_status(unread, claims, rules, now, 0)
    return PlanEntry(
        name=name, status=status, reason=reason, snapshot=snapshot, reference_count=count
    )


def plan_cleanup(
    paths: SessionPaths,
    claims: Iterable[ArtifactRetentionClaim] | None = None,
    *,
    journal: ArtifactRetentionJournal | None = None,
    policy: ArtifactCleanupPolicy,
    fs: FileSystem = REAL_FS,
    now: float | None = None,
    clock: Callable[[], float] = time.time,
    progress: Progress | None = None,
) -> CleanupPlan:
    """Plan a cleanup of one session; read-only.  Which claims protect is chosen here:

    * ``journal`` given: the leases it recovers; a corrupt journal refuses;
    * ``claims`` given (raw claims, a session without a lease journal; ``()``
      when nothing references its artifacts): refuses with
      :class:`JournalRequiredError` once the session has a journal, because
      raw claims cannot see a PREPARED lease, so they cannot protect it (S1);
    * neither: the session's own journal if it has, or once had, one
      (:func:`session_journal`, with ``clock`` as its clock); a session that
      never had one refuses with :class:`ClaimsRequiredError`.

    With a journal, time is the journal's: ``now``, else its clock.
    """
    journal = _choose(paths, claims, journal, fs, clock)
    if journal is not None:
        return plan_cleanup_from_journal(
            paths, journal, policy=policy, fs=fs, now=now, progress=progress
        )
    _refuse_if_journal(paths, fs)
    moment = clock() if now is None else now
    index = _index_claims(paths, _claim_list(claims), moment)
    return _plan(paths, index, policy, fs, moment, progress, journal_aware=False)


def session_journal(
    paths: SessionPaths, fs: FileSystem = REAL_FS, *, clock: Callable[[], float] = time.time
) -> ArtifactRetentionJournal | None:
    """The lease journal cleanup must honour: None only for a session that never had one.

    A session that has had a journal (its anchor says so) keeps the
    journal-aware form even when the journal is gone, so that form refuses.
    A journal that does not verify refuses now (:class:`CleanupRefused`).
    """
    from .journal import ArtifactRetentionJournal

    if not _has_journal(paths, fs):
        return None
    try:
        return ArtifactRetentionJournal(paths.root, fs=fs, clock=clock)
    except CorruptStateError as exc:
        raise CleanupRefused.corrupt_journal(exc) from exc


def _choose(
    paths: SessionPaths,
    claims: Iterable[ArtifactRetentionClaim] | None,
    journal: ArtifactRetentionJournal | None,
    fs: FileSystem,
    clock: Callable[[], float],
    plan: CleanupPlan | None = None,
) -> ArtifactRetentionJournal | None:
    """The journal to clean with, or None for raw claims (see :func:`plan_cleanup`).

    Given neither, the session's journal; a session without one refuses
    (:class:`ClaimsRequiredError`), and so does apply of a raw plan (its
    claims must be given again, as they are now).  A journal-aware plan needs
    the session's journal (and refuses if it is gone).
    """
    if journal is not None:
        if claims is not None:
            raise UsageError("pass claims or a journal, not both: the journal's leases protect")
        return journal
    if claims is not None:
        return None
    if plan is not None and not plan.journal_aware:
        raise ClaimsRequiredError(
            "the plan was made with raw claims: apply needs the current ones (claims=..., "
            "or claims=() when nothing references the session's artifacts)"
        )
    chosen = session_journal(paths, fs, clock=clock)
    if chosen is None:
        if plan is not None:
            raise CleanupRefused(
                "the plan was made with the session's lease journal, which is gone; cleanup refuses"
            )
        raise ClaimsRequiredError(
            "this session has no lease journal and no claims were given: pass claims=() "
            "if nothing references its artifacts (S1: a forgotten argument is not "
            "'no references')"
        )
    return chosen


def _claim_list(claims: Iterable[ArtifactRetentionClaim] | None) -> list[ArtifactRetentionClaim]:
    return [] if claims is None else list(claims)


def plan_cleanup_from_journal(
    paths: SessionPaths,
    journal: ArtifactRetentionJournal,
    *,
    policy: ArtifactCleanupPolicy,
    fs: FileSystem = REAL_FS,
    now: float | None = None,
    progress: Progress | None = None,
) -> CleanupPlan:
    """``plan_cleanup(paths, journal=journal, ...)``: the journal-aware form, by name."""
    _check_journal_session(paths, journal)
    try:
        recovery = journal.recover(now=now)
    except CorruptStateError as exc:
        raise CleanupRefused.corrupt_journal(exc) from exc
    moment = recovery.observed_at
    index = _index_claims(paths, recovery.protecting_claims(), moment)
    return _plan(paths, index, policy, fs, moment, progress, journal_aware=True)


# -- journal glue ------------------------------------------------------------------------


def _check_journal_session(paths: SessionPaths, journal: ArtifactRetentionJournal) -> None:
    if journal.path != paths.journal or journal.session_id != paths.session_id:
        raise UsageError("the journal belongs to another session")


def _journal_evidence(paths: SessionPaths, fs: FileSystem) -> str | None:
    """What says the session has leases: its journal, or the anchor of one it had."""
    for name, what in ((paths.journal, "a lease journal"), (_anchor_path(paths), "had one")):
        try:
            fs.lstat(name)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise EnvironmentFailure(f"cannot inspect the lease journal: {exc}") from exc
        return what
    return None


def _has_journal(paths: SessionPaths, fs: FileSystem) -> bool:
    return _journal_evidence(paths, fs) is not None


def _refuse_if_journal(paths: SessionPaths, fs: FileSystem) -> None:
    what = _journal_evidence(paths, fs)
    if what is not None:
        raise JournalRequiredError(
            f"this session has {what}: raw claims cannot see its leases; "
            "use the journal-aware cleanup (S1)"
        )


def _anchor_path(paths: SessionPaths) -> str:
    return os.path.join(paths.root, ANCHOR_NAME)


# -- apply -------------------------------------------------------------------------------


def _check_plan_shape(plan: CleanupPlan) -> None:
    """Refuse a plan that planning could not have produced; touches nothing."""
    if not isinstance(plan, CleanupPlan):
        raise HostilePlanError(f"expected a CleanupPlan, got {type(plan).__name__}")
    if not isinstance(plan.policy, ArtifactCleanupPolicy):
        raise HostilePlanError("the plan's policy is not an ArtifactCleanupPolicy")
    seen: set[str] = set()
    planned = 0
    for entry in plan.entries:
        if not isinstance(entry, PlanEntry):
            raise HostilePlanError(f"plan entry is not a PlanEntry: {type(entry).__name__}")
        name = entry.name
        # Only what a directory listing can never return; artifact names are checked below.
        if not isinstance(name, str) or name in {"", ".", ".."} or "/" in name or "\0" in name:
            raise HostilePlanError(f"plan names a path, not a file name: {name!r} (S7)")
        if name in seen:
            raise HostilePlanError(f"plan names {name!r} twice")
        seen.add(name)
        if entry.status not in PLAN_STATUSES:
            raise HostilePlanError(f"plan entry {name!r} has unknown status {entry.status!r}")
        if entry.status != PLANNED_DELETE:
            continue
        planned += 1
        if not is_artifact_filename(name):
            raise HostilePlanError(f"plan would delete {name!r}, not an artifact name (S7)")
        if entry.snapshot is None or not isinstance(entry.snapshot, FileSnapshot):
            raise HostilePlanError(f"planned deletion {name!r} has no snapshot")
        if not isinstance(entry.sha256, str) or len(entry.sha256) != 64:
            raise HostilePlanError(f"planned deletion {name!r} has no full digest")
    if planned > plan.policy.max_deletions:
        raise HostilePlanError(
            f"plan deletes {planned} files, over its own max_deletions={plan.policy.max_deletions}"
        )


def _check_plan_target(paths: SessionPaths, plan: CleanupPlan, fs: FileSystem) -> None:
    if plan.session_id != paths.session_id:
        raise HostilePlanError(f"plan is for session {plan.session_id!r}, not {paths.session_id!r}")
    if plan.planned and _directory_identity(paths, fs) != plan.directory:
        raise HostilePlanError("plan was made for another tool-results/ folder (root differs)")


def _apply_locked(
    paths: SessionPaths,
    plan: CleanupPlan,
    index: _ClaimIndex,
    fs: FileSystem,
    now: float,
    witness: _Witness | None = None,
) -> CleanupReport:
    """Steps 4-5 of apply; the caller holds the session lock and passed current claims.

    ``witness``: what the owner said of each planned name (None: no owner given).
    """
    _check_plan_target(paths, plan, fs)
    uid = fs.current_uid()
    dry = plan.policy.dry_run
    rules = spec_policy(plan.policy.orphan_ttl_seconds, plan.policy.max_deletions)
    if not dry and plan.planned:
        # S6: remember the deleted names apart from the mark, durably, before
        # any unlink, so a lost mark is reconstructed above them (high_water).
        from .high_water import ArtifactHighWaterMark

        highest = max(artifact_number(entry.name) for entry in plan.planned)
        ArtifactHighWaterMark(paths, fs).record_deletion(highest)
    outcomes: list[ReportEntry] = []
    deleted_any = False
    for entry in plan.planned:
        said = None if witness is None else witness.get(entry.name, _CANNOT_TELL)
        status, reason = _revalidate_and_delete(paths, entry, index, rules, fs, uid, now, dry, said)
        deleted_any = deleted_any or status == DELETED
        outcomes.append(ReportEntry(name=entry.name, status=status, reason=reason))
    if deleted_any:
        try:
            fs.fsync_dir(paths.tool_results)
        except OSError as exc:
            raise EnvironmentFailure(f"deleted, but cannot sync {TOOL_RESULTS}/: {exc}") from exc
    return CleanupReport(
        session_id=paths.session_id, applied_at=now, dry_run=dry, entries=tuple(outcomes)
    )


def _revalidate_and_delete(
    paths: SessionPaths,
    entry: PlanEntry,
    index: _ClaimIndex,
    rules: Any,
    fs: FileSystem,
    uid: int,
    now: float,
    dry: bool,
    said: _Said | None = None,
) -> tuple[str, str]:
    """Gather what is true now, in the apply rows' order; the spec's APPLY_RULES decides.

    Each step asks the table with what is known so far (a fact not read yet is
    taken as planned), and stops at the first row that keeps the file.
    ``said``: the owner's word on this artifact (None: cleanup has no owner).
    """
    expected = entry.snapshot
    assert expected is not None and entry.sha256 is not None  # _check_plan_shape
    digests = index.by_name.get(entry.name)
    claims = spec_claims(digests)
    planned = planned_facts(
        entry.sha256, expected.size, expected.mtime_ns, expected.device, expected.inode
    )

    witness = None if said is None else said.witness

    def decide(current: Any) -> str:
        status: str = apply_status(planned, current, claims, now, rules, witness)
        return status

    if digests:  # rows 1-2 read only the claims
        return decide(planned), f"claimed since the plan: {_claim_reason(digests, entry.sha256)}"
    path = paths.artifact_path(entry.name)
    try:
        facts = fs.lstat(path)
    except FileNotFoundError:
        return decide(None), "already gone"
    except OSError as exc:
        return decide(spec_facts(entry.name, None)), f"cannot inspect: {exc.strerror or exc}"
    now_seen = spec_facts(
        entry.name, facts, trusted=facts.uid == uid, owned=True, digest=planned.digest
    )
    status = decide(now_seen)
    if status != DELETED:
        if said is not None and said.witness is not WITNESS["none"]:
            return status, said.reason  # the owner's word (rows 4-5) comes before the file's
        return status, _why_kept_now(status, facts, expected, uid)
    try:
        sha256 = _stream_sha256(fs, path, facts)
    except _BeingWritten:
        status = decide(now_seen._replace(writing=True))
        return status, "being written since the plan: its writer holds the mark"
    except FileNotFoundError:
        return decide(None), "vanished during re-validation"
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # replaced by a symlink between lstat and open
            symlink = spec_facts(entry.name, facts)._replace(kind=_SYMLINK)
            return decide(symlink), "replaced by a symlink"
        unreadable = spec_facts(entry.name, facts, sha256=entry.sha256, readable=False)
        return decide(unreadable), f"cannot read: {exc.strerror or exc}"
    if sha256 != entry.sha256:  # the facts the table just saw, but for the digest
        status = decide(now_seen._replace(digest=digest_of(sha256)))  # None: changed
        if status != DELETED:
            return status, "content changed since the plan (digest differs)"
    if dry:
        return DRY_RUN, "would be deleted (dry run)"
    fs.crash_point("cleanup.after_revalidate")
    try:
        fs.unlink(path)
    except FileNotFoundError:
        return ALREADY_MISSING, "vanished just before unlink"
    except OSError as exc:
        return RETAINED_UNKNOWN, f"unlink failed: {exc.strerror or exc}"
    fs.crash_point("cleanup.after_unlink")
    return DELETED, "unreferenced orphan, re-validated"


class _Said(NamedTuple):
    """What the owner said of one planned artifact, and why it keeps the file (if it does)."""

    witness: Any  # the spec's Witness
    reason: str


_Witness = Mapping[str, _Said]
_CANNOT_TELL = _Said(WITNESS["unknown"], "the owner's census did not name it: cannot tell")
_MAX_NAMED = 3


@contextmanager
def _census(
    paths: SessionPaths, plan: CleanupPlan, owner: ArtifactReferenceOwner | None
) -> Iterator[_Witness | None]:
    """Step 2 of apply: the owner's census fence over the planned artifacts (O9).

    Yields name -> what the owner said, for the whole of apply (its fence
    holds back every publish naming one of them); None without an owner.  An
    owner that cannot tell (its fence fails, an answer is missing or not a
    list of ids) keeps the file; the reason names the error's type only, as
    an owner's message may carry what it should not (O7).
    """
    if owner is None:
        yield None
        return
    census_fenced = getattr(owner, "census_fenced", None)
    if not callable(census_fenced):
        raise UsageError(
            f"{type(owner).__name__} offers no census of references (promise O9), so it "
            "cannot be cleanup's second witness; clean without an owner"
        )
    ids: dict[str, str] = {}
    for entry in plan.planned:
        try:
            ids[entry.name] = format_source_id(paths.session_id, entry.name, entry.sha256 or "")
        except UsageError:
            continue  # a forged digest: the file is kept as a race, and the owner is not asked
    if not ids:
        yield {}
        return
    try:
        manager = census_fenced(tuple(ids.values()))
        census = manager.__enter__()
    except Exception as exc:
        said = _Said(WITNESS["unknown"], f"the owner cannot tell ({type(exc).__name__})")
        yield dict.fromkeys(ids, said)
        return
    try:
        yield {name: _said(census, source_id) for name, source_id in ids.items()}
    except BaseException as exc:
        if not manager.__exit__(type(exc), exc, exc.__traceback__):
            raise
    else:
        manager.__exit__(None, None, None)


def _said(census: object, source_id: str) -> _Said:
    try:
        named = census[source_id]  # type: ignore[index]
    except Exception:
        return _CANNOT_TELL
    if not isinstance(named, tuple | list) or not all(isinstance(t, str) for t in named):
        return _Said(WITNESS["unknown"], "the owner's census answer is not a list of ids")
    if not named:
        return _Said(WITNESS["none"], "")
    shown = ", ".join(repr(t[:40]) for t in named[:_MAX_NAMED])
    more = f" and {len(named) - _MAX_NAMED} more" if len(named) > _MAX_NAMED else ""
    return _Said(WITNESS["shown"], f"the owner shows a visible reference naming it ({shown}{more})")


def _why_kept_now(status: str, facts: FileFacts, expected: FileSnapshot, uid: int) -> str:
    """Why the table kept a file after its ``lstat``, in words (the table chose ``status``)."""
    if status == RETAINED_RECENT:
        return "younger than the TTL at apply time"
    if facts.is_symlink or not facts.is_regular:
        return "no longer a regular file"
    if facts.nlink > 1:
        return f"hard-linked since the plan ({facts.nlink} links)"
    if facts.uid != uid:
        return f"now owned by uid {facts.uid}"
    return "size, mtime, device or inode changed since the plan"


def apply_cleanup(
    paths: SessionPaths,
    plan: CleanupPlan,
    *,
    claims: Iterable[ArtifactRetentionClaim] | None = None,
    journal: ArtifactRetentionJournal | None = None,
    owner: ArtifactReferenceOwner | None = None,
    fs: FileSystem = REAL_FS,
    now: float | None = None,
    clock: Callable[[], float] = time.time,
) -> CleanupReport:
    """Apply ``plan`` against the *current* claims, under the session lock.

    The claims are chosen as in :func:`plan_cleanup`: the journal's leases
    (re-read under the lock), the caller's raw claims (refused with
    :class:`JournalRequiredError` if the session has a lease journal), or,
    given neither, the session's journal for a journal-aware plan (refused if
    it is gone); a raw plan needs its claims given again
    (:class:`ClaimsRequiredError`), ``claims=()`` when nothing references the
    session's artifacts.

    ``owner`` (optional, an owner that keeps promise O9) is the second
    witness: a file the owner shows a visible reference to, or cannot tell
    about, is kept, whatever the journal says.
    """
    _check_plan_shape(plan)
    journal = _choose(paths, claims, journal, fs, clock, plan)
    if journal is not None:
        return apply_cleanup_from_journal(paths, plan, journal, owner=owner, fs=fs, now=now)
    claim_list = _claim_list(claims)
    with _census(paths, plan, owner) as witness, paths.session_lock(fs):
        _refuse_if_journal(paths, fs)
        moment = clock() if now is None else now
        index = _index_claims(paths, claim_list, moment)
        return _apply_locked(paths, plan, index, fs, moment, witness)


def apply_cleanup_from_journal(
    paths: SessionPaths,
    plan: CleanupPlan,
    journal: ArtifactRetentionJournal,
    *,
    owner: ArtifactReferenceOwner | None = None,
    fs: FileSystem = REAL_FS,
    now: float | None = None,
) -> CleanupReport:
    """``apply_cleanup(paths, plan, journal=journal)``: re-read the journal under the lock.

    Inside the lock the whole journal is verified again (not only what was
    appended since the last look), so a record corrupted in place after the
    plan still refuses; then the current leases decide.  ``journal`` must be
    on the same file system as ``fs`` (its lock is the one that counts).
    """
    _check_plan_shape(plan)
    _check_journal_session(paths, journal)
    with _census(paths, plan, owner) as witness, _journal_locked(journal, now):
        try:
            recovery = journal.recover(now=now)  # re-entrant: the lock is already ours
        except CorruptStateError as exc:
            raise CleanupRefused.corrupt_journal(exc) from exc
        moment = recovery.observed_at
        index = _index_claims(paths, recovery.protecting_claims(), moment)
        # Remember what was verified before anything is deleted: a journal cut
        # back later is refused instead of read as fewer leases.
        journal.anchor_verified()
        return _apply_locked(paths, plan, index, fs, moment, witness)


@contextmanager
def _journal_locked(journal: ArtifactRetentionJournal, now: float | None) -> Iterator[None]:
    """Hold the journal's session lock (the one ``prepare`` takes); corruption refuses."""
    manager = journal.locked_state(now=now)
    try:
        manager.__enter__()
    except CorruptStateError as exc:
        raise CleanupRefused.corrupt_journal(exc) from exc
    try:
        yield
    except BaseException as exc:
        if not manager.__exit__(type(exc), exc, exc.__traceback__):
            raise
    else:
        manager.__exit__(None, None, None)


# -- convenience -------------------------------------------------------------------------


def cleanup_session(
    paths: SessionPaths,
    claims: Iterable[ArtifactRetentionClaim] | None = None,
    *,
    journal: ArtifactRetentionJournal | None = None,
    owner: ArtifactReferenceOwner | None = None,
    policy: ArtifactCleanupPolicy,
    fs: FileSystem = REAL_FS,
    now: float | None = None,
    clock: Callable[[], float] = time.time,
    progress: Progress | None = None,
) -> tuple[CleanupPlan, CleanupReport]:
    """Plan and apply with the same choice of claims (see :func:`plan_cleanup`)."""
    claim_list = None if claims is None else list(claims)
    journal = _choose(paths, claim_list, journal, fs, clock)
    if journal is not None:
        return cleanup_session_from_journal(
            paths, journal, owner=owner, policy=policy, fs=fs, now=now, progress=progress
        )
    raw = _claim_list(claim_list)
    plan = plan_cleanup(paths, raw, policy=policy, fs=fs, now=now, clock=clock, progress=progress)
    report = apply_cleanup(paths, plan, claims=raw, owner=owner, fs=fs, now=now, clock=clock)
    return plan, report


def cleanup_session_from_journal(
    paths: SessionPaths,
    journal: ArtifactRetentionJournal,
    *,
    owner: ArtifactReferenceOwner | None = None,
    policy: ArtifactCleanupPolicy,
    fs: FileSystem = REAL_FS,
    now: float | None = None,
    progress: Progress | None = None,
) -> tuple[CleanupPlan, CleanupReport]:
    """``cleanup_session(paths, journal=journal, ...)``: the journal-aware form, by name."""
    plan = plan_cleanup_from_journal(
        paths, journal, policy=policy, fs=fs, now=now, progress=progress
    )
    report = apply_cleanup_from_journal(paths, plan, journal, owner=owner, fs=fs, now=now)
    return plan, report
