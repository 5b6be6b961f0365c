"""Journal compaction: the live leases move into a snapshot, settled history leaves the file.

The implementation of the model in ``spec/compaction.py`` (issue 38; docs/design.md
section 5, "Compaction").  :class:`~toolswap.journal.ArtifactRetentionJournal`
calls :func:`read_base` when it verifies from the start and :class:`Compactor`
when asked to compact.

Rules
=====

Files at the session root (:class:`~toolswap.session.SessionPaths`):

* ``.journal-checkpoints``: the checkpoint log, never compacted.  One canonical
  JSON line per checkpoint, exactly :data:`CHECKPOINT_KEYS`: ``index`` 1, 2, ...;
  ``records`` and ``head_sha256``, the chain head the checkpoint covers (the
  journal's record count and last ``event_sha256`` then); ``base_records`` and
  ``base_sha256``, the head the compacted file started from (the previous
  checkpoint's, or 0 and the genesis hash); ``file_sha256`` and ``file_bytes`` of
  the compacted file as it was; ``snapshot_sha256`` of its snapshot;
  ``live_leases``; ``settled_sha256`` and ``settled_count`` of its settled
  index; ``previous_sha256`` (the previous entry's ``entry_sha256``,
  the genesis hash for the first) and ``entry_sha256``, the SHA-256 of the
  canonical JSON of every other key.  A last piece without a newline never
  reached its fsync: it is ignored and cut before the next append.
* ``.journal-snapshot-<k>``: checkpoint ``k``'s snapshot, one canonical JSON
  document and a newline, exactly :data:`SNAPSHOT_KEYS`: the live leases
  (PREPARED and COMMITTED) at the checkpoint's head, in journal order, each
  with its intent, its intent digest, the sequence and time of its latest
  record and the identities its CONFLICT notes named; and
  ``artifact_high_water``, the highest artifact number any intent ever named.
* ``.journal-settled-<k>``: checkpoint ``k``'s settled index, one canonical
  JSON document and a newline, exactly :data:`SETTLED_KEYS`: every transaction
  id that was settled (RELEASED or ABORTED) in a compacted file, up to and
  including checkpoint ``k``'s (cumulative: checkpoint ``k - 1``'s ids and
  those settled in the file ``k`` compacts), sorted and unique.  S5 (one
  terminal event per transaction, ever) outlives compaction through it:
  ``prepare`` refuses such an id as it refused it before, and no transition
  moves it.  It is read lazily, only when an operation meets a transaction id
  the live state does not hold, and its SHA-256 (``settled_sha256``) is
  checked every time it is read; recovery of the live leases never reads it.
* ``retention-leases.jsonl`` after checkpoint ``k`` holds the tail: its first
  record has sequence ``records + 1`` and names ``head_sha256`` as the
  previous hash.  The line format is :mod:`toolswap.journal_format`'s, and
  sequence numbers go on from the checkpoint, so the record count (and the
  anchor, :mod:`toolswap.journal_anchor`) counts the whole chain.
* ``retention-leases.jsonl.next`` (the next file, before it becomes the live
  one), ``retention-leases.jsonl.compacted-<k>`` (the compacted file set
  aside) and ``journal-archive/retention-leases-<k>.jsonl`` (the archive:
  records ``base_records + 1`` to ``records``).

The steps, in the order of ``spec/compaction.py``'s ``COMPACTION_TRANSITIONS``
(:data:`STEPS` maps each to one method), all under the session lock:

1. write the snapshot and the settled index; 2. fsync them and the directory;
3. append the checkpoint; 4. fsync the checkpoint log (and the directory, the
   first time): the checkpoint is durable;
5. start the next file: create ``.next`` empty, fsync it and the directory,
   rename the live file aside, rename ``.next`` to the live name, fsync the
   directory;
6. rename the file set aside into the archive folder (fsync both directories);
7. unlink it, or keep it (the default).

The lock is held through step 7 (the spec needs it until step 5; holding it
longer only removes interleavings), so no reader ever sees the live name
missing while a compaction runs.

Recovery (:func:`read_base`) reads the last complete checkpoint, checks its
snapshot's SHA-256 and parses it strictly, and then the live file must chain
from the checkpoint's head.  It finishes a compaction a crash stopped after
its checkpoint was durable: a live file that is exactly the compacted file
(``file_sha256``) is set aside and replaced by an empty next file; a missing
live file with a ``.next`` beside it is the swap cut in the middle.  Anything
else fails closed with :class:`~toolswap.errors.JournalCorruptError`
(reasons ``checkpoint``, ``snapshot``, ``not_chained``, ``vanished``; a
settled index that is missing or not the one its checkpoint names is a
``snapshot`` refusal too, when it is read).  A snapshot or settled index left
by a compaction that died before its checkpoint was durable is named by no
checkpoint: the next compaction writes over it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

import attrs

from toolswap.spec.compaction import COMPACTION_TRANSITIONS, CompactionStep, Pc
from toolswap.spec.lease import LeaseState

from .domain import ArtifactRetentionClaim, artifact_number, parse_source_id
from .errors import EnvironmentFailure, JournalCorruptError, UsageError
from .fs import (
    FileSystem,
    HardLinkedFileError,
    NotRegularFileError,
    hard_link_message,
    read_fully,
)
from .journal_format import (
    FORMAT_VERSION,
    GENESIS_SHA256,
    MAX_RECORD_BYTES,
    ObservedIdentity,
    canonical_json,
    intent_digest,
    parse_line,
    sha256_hex,
    validate_transaction_id,
)
from .session import SessionPaths

__all__ = [
    "CHECKPOINT_KEYS",
    "SNAPSHOT_KEYS",
    "SETTLED_KEYS",
    "SETTLED_PREFIX",
    "LEASE_KEYS",
    "STEPS",
    "Checkpoint",
    "SnapshotLease",
    "Snapshot",
    "Base",
    "CompactionResult",
    "Compactor",
    "encode_checkpoint",
    "parse_checkpoint",
    "read_checkpoints",
    "encode_snapshot",
    "parse_snapshot",
    "settled_index_path",
    "encode_settled",
    "parse_settled",
    "read_settled",
    "read_base",
    "verify_archive",
    "artifact_high_water",
]

CHECKPOINT_KEYS = frozenset(
    {
        "version",
        "index",
        "session_id",
        "records",
        "head_sha256",
        "base_records",
        "base_sha256",
        "file_sha256",
        "file_bytes",
        "snapshot_sha256",
        "live_leases",
        "settled_sha256",
        "settled_count",
        "previous_sha256",
        "entry_sha256",
    }
)
SNAPSHOT_KEYS = frozenset(
    {
        "version",
        "session_id",
        "checkpoint",
        "records",
        "head_sha256",
        "artifact_high_water",
        "leases",
    }
)
SETTLED_KEYS = frozenset({"version", "session_id", "checkpoint", "transaction_ids"})
SETTLED_PREFIX = ".journal-settled-"
LEASE_KEYS = frozenset(
    {"transaction_id", "phase", "intent", "intent_sha256", "sequence", "time", "conflicts"}
)
_LIVE_PHASES = {s.value: s for s in (LeaseState.PREPARED, LeaseState.COMMITTED)}
_HEX64 = re.compile(r"[0-9a-f]{64}")
_CHUNK = 1 << 20
#: A checkpoint line is a few hundred bytes; anything longer is not one.
MAX_CHECKPOINT_BYTES = 4096


# -- the checkpoint log ---------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Checkpoint:
    """One verified entry of the checkpoint log."""

    index: int
    session_id: str
    records: int
    head_sha256: str
    base_records: int
    base_sha256: str
    file_sha256: str
    file_bytes: int
    snapshot_sha256: str
    live_leases: int
    settled_sha256: str
    settled_count: int
    previous_sha256: str
    entry_sha256: str = ""

    def body(self) -> dict[str, Any]:
        data = attrs.asdict(self)
        del data["entry_sha256"]
        data["version"] = FORMAT_VERSION
        return data

    def sealed(self) -> Checkpoint:
        return attrs.evolve(self, entry_sha256=sha256_hex(canonical_json(self.body())))


def encode_checkpoint(checkpoint: Checkpoint) -> bytes:
    data = checkpoint.body()
    data["entry_sha256"] = checkpoint.entry_sha256
    return canonical_json(data) + b"\n"


def _bad_checkpoint(line: int, detail: str) -> JournalCorruptError:
    return JournalCorruptError(line, "checkpoint", detail)


def _count(value: object, *, least: int = 0) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def _hex(value: object) -> bool:
    return isinstance(value, str) and _HEX64.fullmatch(value) is not None


def parse_checkpoint(line: bytes, number: int) -> Checkpoint:
    """One checkpoint line (without its newline), checked on its own: keys, types, bytes, hash."""
    try:
        data = json.loads(line.decode("ascii"))
    except (ValueError, RecursionError):
        raise _bad_checkpoint(number, "not JSON") from None
    if not isinstance(data, dict) or set(data) != CHECKPOINT_KEYS:
        raise _bad_checkpoint(number, "wrong keys")
    if data["version"] != FORMAT_VERSION or isinstance(data["version"], bool):
        raise _bad_checkpoint(number, "unsupported version")
    for key in ("index", "records"):
        if not _count(data[key], least=1):
            raise _bad_checkpoint(number, key)
    for key in ("base_records", "file_bytes", "live_leases", "settled_count"):
        if not _count(data[key]):
            raise _bad_checkpoint(number, key)
    for key in ("head_sha256", "base_sha256", "file_sha256", "snapshot_sha256", "settled_sha256"):
        if not _hex(data[key]):
            raise _bad_checkpoint(number, key)
    for key in ("previous_sha256", "entry_sha256"):
        if not _hex(data[key]):
            raise _bad_checkpoint(number, key)
    if not isinstance(data["session_id"], str) or not data["session_id"]:
        raise _bad_checkpoint(number, "session_id")
    if canonical_json(data) != line:
        raise _bad_checkpoint(number, "not canonical JSON")
    del data["version"]
    checkpoint = Checkpoint(**data)
    if checkpoint.sealed().entry_sha256 != checkpoint.entry_sha256:
        raise _bad_checkpoint(number, "entry_sha256 does not match")
    return checkpoint


def _check_follows(checkpoint: Checkpoint, before: Checkpoint | None, session_id: str) -> None:
    """Checkpoint ``k`` names checkpoint ``k - 1`` and starts where it ended."""
    number = checkpoint.index
    expected = 1 if before is None else before.index + 1
    if checkpoint.index != expected:
        raise _bad_checkpoint(number, f"index {checkpoint.index}, expected {expected}")
    if checkpoint.session_id != session_id:
        raise _bad_checkpoint(number, "checkpoint of another session")
    previous = GENESIS_SHA256 if before is None else before.entry_sha256
    base = (0, GENESIS_SHA256) if before is None else (before.records, before.head_sha256)
    if checkpoint.previous_sha256 != previous:
        raise _bad_checkpoint(number, "previous_sha256 does not name the entry before")
    if (checkpoint.base_records, checkpoint.base_sha256) != base:
        raise _bad_checkpoint(number, "does not start at the head of the checkpoint before")
    if checkpoint.records <= checkpoint.base_records:
        raise _bad_checkpoint(number, "covers no record")


def read_checkpoints(
    paths: SessionPaths, fs: FileSystem
) -> tuple[tuple[Checkpoint, ...], int, int] | None:
    """(every complete checkpoint, end of the last complete line, size), or None: no log."""
    try:
        handle = fs.open_read(paths.checkpoint_log)
    except FileNotFoundError:
        return None
    except NotRegularFileError as exc:
        raise _bad_checkpoint(1, "the checkpoint log is not a regular file") from exc
    except OSError as exc:
        raise EnvironmentFailure(f"cannot open the checkpoint log: {exc.strerror}") from exc
    try:
        facts = fs.fstat(handle)
        if facts.nlink > 1:
            raise _bad_checkpoint(1, hard_link_message(facts.nlink))
        data = read_fully(fs, handle, facts.size)
    except OSError as exc:
        raise EnvironmentFailure(f"cannot read the checkpoint log: {exc.strerror}") from exc
    finally:
        fs.close(handle)
    end = data.rfind(b"\n") + 1
    if len(data) - end > MAX_CHECKPOINT_BYTES:
        raise _bad_checkpoint(1, "a final piece longer than any checkpoint")
    checkpoints: list[Checkpoint] = []
    for number, line in enumerate(data[:end].split(b"\n")[:-1], start=1):
        if len(line) > MAX_CHECKPOINT_BYTES:
            raise _bad_checkpoint(number, "longer than any checkpoint")
        checkpoint = parse_checkpoint(line, number)
        _check_follows(checkpoint, checkpoints[-1] if checkpoints else None, paths.session_id)
        checkpoints.append(checkpoint)
    return tuple(checkpoints), end, len(data)


# -- the snapshot ----------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class SnapshotLease:
    """One live lease as of a checkpoint."""

    transaction_id: str
    phase: LeaseState
    intent: ArtifactRetentionClaim
    intent_sha256: str
    sequence: int
    time: float
    conflicts: tuple[ObservedIdentity, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "transaction_id": self.transaction_id,
            "phase": self.phase.value,
            "intent": self.intent.to_dict(),
            "intent_sha256": self.intent_sha256,
            "sequence": self.sequence,
            "time": self.time,
            "conflicts": [c.to_dict() for c in self.conflicts],
        }


@attrs.frozen(kw_only=True)
class Snapshot:
    """The live leases at a checkpoint's head, in journal order."""

    session_id: str
    checkpoint: int
    records: int
    head_sha256: str
    artifact_high_water: int
    leases: tuple[SnapshotLease, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": FORMAT_VERSION,
            "session_id": self.session_id,
            "checkpoint": self.checkpoint,
            "records": self.records,
            "head_sha256": self.head_sha256,
            "artifact_high_water": self.artifact_high_water,
            "leases": [lease.to_dict() for lease in self.leases],
        }


def encode_snapshot(snapshot: Snapshot) -> bytes:
    return canonical_json(snapshot.to_dict()) + b"\n"


def _bad_snapshot(checkpoint: int, detail: str) -> JournalCorruptError:
    return JournalCorruptError(checkpoint, "snapshot", detail)


def _parse_lease(raw: object, k: int, records: int) -> SnapshotLease:
    if not isinstance(raw, dict) or set(raw) != LEASE_KEYS:
        raise _bad_snapshot(k, "a lease with wrong keys")
    phase = _LIVE_PHASES.get(raw["phase"]) if isinstance(raw["phase"], str) else None
    if phase is None:
        raise _bad_snapshot(k, "a lease that is not live (PREPARED or COMMITTED)")
    try:
        txn = validate_transaction_id(raw["transaction_id"])
    except UsageError:
        raise _bad_snapshot(k, "transaction_id") from None
    try:
        claim = ArtifactRetentionClaim.from_dict(raw["intent"])
    except (UsageError, TypeError, AttributeError, KeyError, ValueError) as exc:
        raise _bad_snapshot(k, f"an invalid intent ({type(exc).__name__})") from None
    if claim.to_dict() != raw["intent"] or raw["intent_sha256"] != intent_digest(claim):
        raise _bad_snapshot(k, "intent_sha256 does not match the intent")
    if not _count(raw["sequence"], least=1) or raw["sequence"] > records:
        raise _bad_snapshot(k, "sequence")
    moment = raw["time"]
    if isinstance(moment, bool) or not isinstance(moment, int | float):
        raise _bad_snapshot(k, "time")
    conflicts = raw["conflicts"]
    if not isinstance(conflicts, list):
        raise _bad_snapshot(k, "conflicts")
    seen: list[ObservedIdentity] = []
    for item in conflicts:
        identity = ObservedIdentity.from_dict(item)
        if identity is None or identity in seen:
            raise _bad_snapshot(k, "a conflict that is not one observed identity")
        seen.append(identity)
    return SnapshotLease(
        transaction_id=txn,
        phase=phase,
        intent=claim,
        intent_sha256=raw["intent_sha256"],
        sequence=raw["sequence"],
        time=moment,
        conflicts=tuple(seen),
    )


def parse_snapshot(data: bytes, checkpoint: Checkpoint) -> Snapshot:
    """Checkpoint ``checkpoint``'s snapshot from its bytes: hash, canonical form, keys, leases."""
    k = checkpoint.index
    if sha256_hex(data) != checkpoint.snapshot_sha256:
        raise _bad_snapshot(k, "its sha256 is not the one checkpoint names")
    if not data.endswith(b"\n"):
        raise _bad_snapshot(k, "not terminated by a newline")
    try:
        raw = json.loads(data[:-1].decode("ascii"))
    except (ValueError, RecursionError):
        raise _bad_snapshot(k, "not JSON") from None
    if not isinstance(raw, dict) or set(raw) != SNAPSHOT_KEYS:
        raise _bad_snapshot(k, "wrong keys")
    if canonical_json(raw) + b"\n" != data:
        raise _bad_snapshot(k, "not canonical JSON")
    if raw["version"] != FORMAT_VERSION or isinstance(raw["version"], bool):
        raise _bad_snapshot(k, "unsupported version")
    if (raw["session_id"], raw["checkpoint"], raw["records"], raw["head_sha256"]) != (
        checkpoint.session_id,
        k,
        checkpoint.records,
        checkpoint.head_sha256,
    ):
        raise _bad_snapshot(k, "names another checkpoint")
    if not _count(raw["artifact_high_water"]) or not isinstance(raw["leases"], list):
        raise _bad_snapshot(k, "artifact_high_water or leases")
    leases = tuple(_parse_lease(item, k, checkpoint.records) for item in raw["leases"])
    if len({lease.transaction_id for lease in leases}) != len(leases):
        raise _bad_snapshot(k, "a transaction twice")
    if len(leases) != checkpoint.live_leases:
        raise _bad_snapshot(k, "not as many leases as the checkpoint says")
    return Snapshot(
        session_id=raw["session_id"],
        checkpoint=k,
        records=raw["records"],
        head_sha256=raw["head_sha256"],
        artifact_high_water=raw["artifact_high_water"],
        leases=leases,
    )


# -- the settled index -----------------------------------------------------------------


def settled_index_path(paths: SessionPaths, checkpoint: int) -> str:
    """``<session>/.journal-settled-<k>``: checkpoint ``k``'s settled transaction ids."""
    return os.path.join(paths.root, f"{SETTLED_PREFIX}{int(checkpoint)}")


def encode_settled(session_id: str, checkpoint: int, transaction_ids: Iterable[str]) -> bytes:
    """The canonical bytes of a settled index: the ids sorted, each once."""
    document = {
        "version": FORMAT_VERSION,
        "session_id": session_id,
        "checkpoint": checkpoint,
        "transaction_ids": sorted(set(transaction_ids)),
    }
    return canonical_json(document) + b"\n"


def _bad_settled(checkpoint: int, detail: str) -> JournalCorruptError:
    # Written in the snapshot step and named beside the snapshot: the same reason.
    return JournalCorruptError(checkpoint, "snapshot", f"settled index {checkpoint}: {detail}")


def parse_settled(data: bytes, checkpoint: Checkpoint) -> frozenset[str]:
    """Checkpoint ``checkpoint``'s settled ids from the index's bytes, checked strictly:
    its SHA-256 is ``settled_sha256``, canonical bytes, exact keys, valid ids sorted and
    unique, ``settled_count`` of them."""
    k = checkpoint.index
    if sha256_hex(data) != checkpoint.settled_sha256:
        raise _bad_settled(k, "its sha256 is not the one the checkpoint names")
    if not data.endswith(b"\n"):
        raise _bad_settled(k, "not terminated by a newline")
    try:
        raw = json.loads(data[:-1].decode("ascii"))
    except (ValueError, RecursionError):
        raise _bad_settled(k, "not JSON") from None
    if not isinstance(raw, dict) or set(raw) != SETTLED_KEYS:
        raise _bad_settled(k, "wrong keys")
    if raw["version"] != FORMAT_VERSION or isinstance(raw["version"], bool):
        raise _bad_settled(k, "unsupported version")
    if (raw["session_id"], raw["checkpoint"]) != (checkpoint.session_id, k):
        raise _bad_settled(k, "names another checkpoint")
    ids = raw["transaction_ids"]
    if not isinstance(ids, list):
        raise _bad_settled(k, "transaction_ids")
    try:
        for txn in ids:
            validate_transaction_id(txn)
    except UsageError:
        raise _bad_settled(k, "an invalid transaction id") from None
    if any(a >= b for a, b in zip(ids, ids[1:], strict=False)):
        raise _bad_settled(k, "transaction ids not sorted and unique")
    if len(ids) != checkpoint.settled_count:
        raise _bad_settled(k, "not as many ids as the checkpoint says")
    if canonical_json(raw) + b"\n" != data:
        raise _bad_settled(k, "not canonical JSON")
    return frozenset(ids)


def read_settled(paths: SessionPaths, fs: FileSystem, checkpoint: Checkpoint) -> frozenset[str]:
    """Read and check checkpoint ``checkpoint``'s settled index (fail closed: a missing,
    edited or hard-linked index is a :class:`JournalCorruptError`, reason ``snapshot``)."""
    k = checkpoint.index
    try:
        handle = fs.open_read(settled_index_path(paths, k))
    except FileNotFoundError:
        raise _bad_settled(k, "the index the checkpoint names is gone") from None
    except NotRegularFileError as exc:
        raise _bad_settled(k, "not a regular file") from exc
    except OSError as exc:
        raise EnvironmentFailure(f"cannot open the settled index: {exc.strerror}") from exc
    try:
        facts = fs.fstat(handle)
        if facts.nlink > 1:
            raise _bad_settled(k, hard_link_message(facts.nlink))
        data = read_fully(fs, handle, facts.size)
    except OSError as exc:
        raise EnvironmentFailure(f"cannot read the settled index: {exc.strerror}") from exc
    finally:
        fs.close(handle)
    return parse_settled(data, checkpoint)


# -- recovery --------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Base:
    """Where the live file starts: the last checkpoint and its snapshot."""

    checkpoint: Checkpoint
    snapshot: Snapshot


def read_base(paths: SessionPaths, fs: FileSystem) -> Base | None:
    """The last durable checkpoint and its snapshot (None: never compacted), under the lock.

    Finishes a compaction a crash stopped after its checkpoint was durable
    (spec: a recovery that finds a checkpoint whose next file was never
    started starts it), and refuses a live file that does not chain from the
    checkpoint.
    """
    found = read_checkpoints(paths, fs)
    if found is None or not found[0]:
        return None
    last = found[0][-1]
    snapshot = parse_snapshot(_read_snapshot(paths, fs, last), last)
    _resume(paths, fs, last)
    return Base(checkpoint=last, snapshot=snapshot)


def _read_snapshot(paths: SessionPaths, fs: FileSystem, checkpoint: Checkpoint) -> bytes:
    try:
        handle = fs.open_read(paths.snapshot(checkpoint.index))
    except FileNotFoundError:
        raise _bad_snapshot(checkpoint.index, "the snapshot the checkpoint names is gone") from None
    except NotRegularFileError as exc:
        raise _bad_snapshot(checkpoint.index, "not a regular file") from exc
    except OSError as exc:
        raise EnvironmentFailure(f"cannot open the journal snapshot: {exc.strerror}") from exc
    try:
        facts = fs.fstat(handle)
        if facts.nlink > 1:
            raise _bad_snapshot(checkpoint.index, hard_link_message(facts.nlink))
        return read_fully(fs, handle, facts.size)
    except OSError as exc:
        raise EnvironmentFailure(f"cannot read the journal snapshot: {exc.strerror}") from exc
    finally:
        fs.close(handle)


def _first_record_start(fs: FileSystem, path: str) -> tuple[int, str] | None:
    """(sequence, previous_sha256) of the file's first complete record; None: it has none."""
    handle = fs.open_read(path)
    try:
        head = fs.pread(handle, MAX_RECORD_BYTES + 1, 0)
    finally:
        fs.close(handle)
    newline = head.find(b"\n")
    if newline < 0:
        return None  # empty, or a torn first append: the journal's own reading judges it
    record = parse_line(head[:newline], 1)
    return record.sequence, record.previous_sha256


def _resume(paths: SessionPaths, fs: FileSystem, last: Checkpoint) -> None:
    """Finish steps 5-6 of checkpoint ``last`` if a crash stopped them; refuse a stranger."""
    k = last.index
    try:
        start = _first_record_start(fs, paths.journal)
    except FileNotFoundError:
        if not _exists(fs, paths.journal_next):
            raise JournalCorruptError(
                last.records + 1, "vanished", f"no journal file chains from checkpoint {k}"
            ) from None
        # cut between setting the old file aside and renaming the next one in
        _wrap(fs.rename, paths.journal_next, paths.journal)
        _wrap(fs.fsync_dir, paths.root)
        _archive(paths, fs, k)
        return
    except NotRegularFileError as exc:
        raise JournalCorruptError(last.records + 1, "not_regular", "not a regular file") from exc
    except OSError as exc:
        raise EnvironmentFailure(f"cannot read the lease journal: {exc.strerror}") from exc
    if start is None or start == (last.records + 1, last.head_sha256):
        _archive(paths, fs, k)  # started; the set-aside file may still wait for the archive
        return
    if _file_sha256(fs, paths.journal) != (last.file_sha256, last.file_bytes):
        raise JournalCorruptError(
            last.records + 1,
            "not_chained",
            f"the live journal file starts at record {start[0]}: it neither chains from "
            f"checkpoint {k} nor is the file checkpoint {k} compacted",
        )
    # the checkpoint is durable, the next file never started: start it (spec, step 5)
    compactor = Compactor(paths, fs)
    compactor.k = k
    compactor.start_next()
    compactor.archive_old()


def _exists(fs: FileSystem, path: str) -> bool:
    try:
        fs.lstat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise EnvironmentFailure(f"cannot stat a journal file: {exc.strerror}") from exc
    return True


def _archive(paths: SessionPaths, fs: FileSystem, k: int) -> None:
    """Step 6: the file set aside goes into the archive folder (idempotent)."""
    aside = paths.journal_set_aside(k)
    if not _exists(fs, aside):
        return
    target = paths.archived_journal(k)
    _wrap(fs.makedirs, paths.journal_archive)
    try:
        there = fs.lstat(target)
    except FileNotFoundError:
        _wrap(fs.rename, aside, target)
        _wrap(fs.fsync_dir, paths.journal_archive)
        _wrap(fs.fsync_dir, paths.root)
        return
    except OSError as exc:
        raise EnvironmentFailure(f"cannot stat the journal archive: {exc.strerror}") from exc
    here = fs.lstat(aside)
    if (here.device, here.inode) == (there.device, there.inode):
        # a rename cut between its two directories: the archive name is durable
        _wrap(fs.unlink, aside)
        _wrap(fs.fsync_dir, paths.root)
    # else: something else holds the archive name; nothing is overwritten, the file stays aside


def _wrap(call: Callable[..., None], *args: str) -> None:
    try:
        call(*args)
    except OSError as exc:
        raise EnvironmentFailure(
            f"cannot finish a journal compaction: {exc.strerror or type(exc).__name__}"
        ) from exc


def _file_sha256(fs: FileSystem, path: str) -> tuple[str, int]:
    digest = hashlib.sha256()
    handle = fs.open_read(path)
    try:
        size = 0
        while True:
            piece = fs.pread(handle, _CHUNK, size)
            if not piece:
                break
            digest.update(piece)
            size += len(piece)
    finally:
        fs.close(handle)
    return digest.hexdigest(), size


# -- the compaction actor --------------------------------------------------------------


@attrs.frozen(kw_only=True)
class CompactionResult:
    """What one compaction did."""

    checkpoint: int
    records_before: int  # records in the live file before
    records_after: int  # records in the live file after (0: the next file starts empty)
    total_records: int  # the whole chain: checkpointed plus tail
    live_leases: int
    archived: str | None  # where the old file went (None: deleted)


class Compactor:
    """The compaction actor: one method per spec step (:data:`STEPS`), run in the table's order.

    The caller holds the session lock and has verified the journal: ``live``
    are its live leases in journal order, ``records``/``head_sha256`` its head,
    ``base`` the checkpoint the live file chains from (None: the first file).
    """

    def __init__(self, paths: SessionPaths, fs: FileSystem) -> None:
        self.paths = paths
        self.fs = fs
        self.k = 0
        self.snapshot_bytes = b""
        self.settled_bytes = b""
        self.checkpoint: Checkpoint | None = None
        self.delete_old = False
        self.live: tuple[SnapshotLease, ...] = ()
        self.high_water = 0
        self.pc = Pc.IDLE

    def prepare(
        self,
        *,
        base: Checkpoint | None,
        records: int,
        head_sha256: str,
        live: tuple[SnapshotLease, ...],
        high_water: int,
        settled: Iterable[str],
        delete_old: bool,
    ) -> None:
        """``settled``: every id settled in a compacted file, the ones in this file included
        (cumulative, for the settled index)."""
        self.k = 1 if base is None else base.index + 1
        self.delete_old = delete_old
        self.live = live
        self.high_water = high_water
        snapshot = Snapshot(
            session_id=self.paths.session_id,
            checkpoint=self.k,
            records=records,
            head_sha256=head_sha256,
            artifact_high_water=high_water,
            leases=live,
        )
        self.snapshot_bytes = encode_snapshot(snapshot)
        settled_ids = frozenset(settled)
        self.settled_bytes = encode_settled(self.paths.session_id, self.k, settled_ids)
        file_sha256, file_bytes = _file_sha256(self.fs, self.paths.journal)
        self.checkpoint = Checkpoint(
            index=self.k,
            session_id=self.paths.session_id,
            records=records,
            head_sha256=head_sha256,
            base_records=0 if base is None else base.records,
            base_sha256=GENESIS_SHA256 if base is None else base.head_sha256,
            file_sha256=file_sha256,
            file_bytes=file_bytes,
            snapshot_sha256=sha256_hex(self.snapshot_bytes),
            live_leases=len(live),
            settled_sha256=sha256_hex(self.settled_bytes),
            settled_count=len(settled_ids),
            previous_sha256=GENESIS_SHA256 if base is None else base.entry_sha256,
        ).sealed()

    def run(self) -> None:
        """Every step, in the order of the spec's table, from IDLE back to IDLE."""
        for action in self.plan():
            getattr(self, STEPS[action])()
            self.pc = COMPACTION_TRANSITIONS[(self.pc, action)]

    def plan(self) -> Iterator[CompactionStep]:
        """The steps the spec's table allows from IDLE, with keep or unlink as chosen."""
        pc = Pc.IDLE
        while True:
            choices = [a for (p, a) in COMPACTION_TRANSITIONS if p is pc]
            if len(choices) > 1:
                choices = [
                    CompactionStep.UNLINK_OLD if self.delete_old else CompactionStep.KEEP_OLD
                ]
            action = choices[0]
            yield action
            pc = COMPACTION_TRANSITIONS[(pc, action)]
            if pc is Pc.IDLE:
                return

    # -- steps 1 and 2: the snapshot --

    def write_snapshot(self) -> None:
        fs = self.fs
        for path, data in (
            (self.paths.snapshot(self.k), self.snapshot_bytes),
            (settled_index_path(self.paths, self.k), self.settled_bytes),
        ):
            try:
                handle = fs.create_exclusive(path, 0o600)
            except FileExistsError:  # left by a compaction that died before its checkpoint
                fs.unlink(path)
                handle = fs.create_exclusive(path, 0o600)
            try:
                fs.write(handle, data)
            finally:
                fs.close(handle)

    def fsync_snapshot(self) -> None:
        fs = self.fs
        for path in (self.paths.snapshot(self.k), settled_index_path(self.paths, self.k)):
            handle = fs.open_read(path)
            try:
                fs.fsync(handle)
            finally:
                fs.close(handle)
        fs.fsync_dir(self.paths.root)
        fs.crash_point("compact.after_snapshot_fsync")

    # -- steps 3 and 4: the checkpoint --

    def write_checkpoint(self) -> None:
        assert self.checkpoint is not None
        fs = self.fs
        found = read_checkpoints(self.paths, fs)
        end, size = (0, 0) if found is None else found[1:]
        try:
            handle = fs.open_append(self.paths.checkpoint_log, 0o600)
        except HardLinkedFileError as exc:
            raise _bad_checkpoint(self.k, exc.strerror or "hard-linked") from exc
        try:
            if fs.fstat(handle).size != size:
                raise _bad_checkpoint(self.k, "the checkpoint log changed under the lock")
            if end < size:  # a torn entry never reached its fsync: cut it first
                fs.ftruncate(handle, end)
                fs.fsync(handle)
            fs.write(handle, encode_checkpoint(self.checkpoint))
        finally:
            fs.close(handle)

    def fsync_checkpoint(self) -> None:
        fs = self.fs
        handle = fs.open_append(self.paths.checkpoint_log, 0o600)
        try:
            fs.fsync(handle)
        finally:
            fs.close(handle)
        fs.fsync_dir(self.paths.root)
        fs.crash_point("compact.after_checkpoint_fsync")

    # -- step 5: the next file --

    def start_next(self) -> None:
        fs, paths = self.fs, self.paths
        try:
            handle = fs.create_exclusive(paths.journal_next, 0o600)
        except FileExistsError:  # left by a start a crash cut short: it holds no record
            fs.unlink(paths.journal_next)
            handle = fs.create_exclusive(paths.journal_next, 0o600)
        try:
            fs.fsync(handle)
        finally:
            fs.close(handle)
        fs.fsync_dir(paths.root)
        fs.rename(paths.journal, paths.journal_set_aside(self.k))
        fs.crash_point("compact.after_set_aside")  # the live name is missing here
        fs.rename(paths.journal_next, paths.journal)
        fs.fsync_dir(paths.root)
        fs.crash_point("compact.after_next_started")

    # -- steps 6 and 7: the old file --

    def archive_old(self) -> None:
        _archive(self.paths, self.fs, self.k)
        self.fs.crash_point("compact.after_archive")

    def unlink_old(self) -> None:
        fs = self.fs
        fs.unlink(self.paths.archived_journal(self.k))
        fs.fsync_dir(self.paths.journal_archive)

    def keep_old(self) -> None:
        """The default: the archive keeps the compacted file, verifiable from the checkpoint."""


#: Each spec step's method, by name (so a failpoint or a mutant can replace one method):
#: the order is ``COMPACTION_TRANSITIONS``'s, never this table's.
STEPS: Mapping[CompactionStep, str] = MappingProxyType(
    {
        CompactionStep.WRITE_SNAPSHOT: "write_snapshot",
        CompactionStep.FSYNC_SNAPSHOT: "fsync_snapshot",
        CompactionStep.WRITE_CHECKPOINT: "write_checkpoint",
        CompactionStep.FSYNC_CHECKPOINT: "fsync_checkpoint",
        CompactionStep.START_NEXT: "start_next",
        CompactionStep.ARCHIVE_OLD: "archive_old",
        CompactionStep.UNLINK_OLD: "unlink_old",
        CompactionStep.KEEP_OLD: "keep_old",
    }
)


def artifact_high_water(intents: Mapping[str, ArtifactRetentionClaim], floor: int) -> int:
    """The highest artifact number any intent names (at least ``floor``)."""
    best = floor
    for claim in intents.values():
        try:
            best = max(best, artifact_number(parse_source_id(claim.source_id).filename))
        except (UsageError, ValueError):
            continue
    return best


def verify_archive(paths: SessionPaths, fs: FileSystem, checkpoint: Checkpoint) -> int | None:
    """Check checkpoint ``checkpoint``'s archived file: its bytes are the ones the checkpoint
    names, and its records chain from the checkpoint's base to its head.  Returns the
    record count, or None if the archive was deleted; raises :class:`JournalCorruptError`.
    """
    path = paths.archived_journal(checkpoint.index)
    try:
        found = _file_sha256(fs, path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise EnvironmentFailure(f"cannot read the journal archive: {exc.strerror}") from exc
    if found != (checkpoint.file_sha256, checkpoint.file_bytes):
        raise _bad_checkpoint(checkpoint.index, f"archive {checkpoint.index} is not that file")
    handle = fs.open_read(path)
    try:
        data = read_fully(fs, handle, checkpoint.file_bytes)
    finally:
        fs.close(handle)
    sequence, head = checkpoint.base_records, checkpoint.base_sha256
    for line in data.split(b"\n")[:-1]:
        record = parse_line(line, sequence + 1)
        if record.sequence != sequence + 1 or record.previous_sha256 != head:
            raise JournalCorruptError(sequence + 1, "chain", f"archive {checkpoint.index}")
        sequence, head = record.sequence, record.event_sha256
    if (sequence, head) != (checkpoint.records, checkpoint.head_sha256):
        raise _bad_checkpoint(checkpoint.index, "the archive does not end at its head")
    return sequence - checkpoint.base_records
