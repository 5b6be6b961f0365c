"""Broken SQLite adapters whose fence or whose reads are not what O5 and O1 ask for.

Each class breaks one sentence; the bug is visible only to another process
(``ThreadLockFence``, ``ProcessRowCache``), only to another handle
(``HandleWriteBehind``) or only while a fence is held (``ReadThenWritePublish``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from toolswap.domain import ArtifactRetentionClaim
from toolswap.errors import UsageError
from toolswap.journal_format import validate_transaction_id
from toolswap.owner import ArtifactPublicationRejected, OwnerConflictError, require_sealable
from toolswap.owners.sqlite import TABLE, SQLiteHarness, SQLiteOwner

from ._base import Observation, Row, cas_tombstone, insert_published, observation_of, read_row

__all__ = [
    "HandleWriteBehindHarness",
    "ProcessRowCacheHarness",
    "ReadThenWritePublishHarness",
    "ThreadLockFenceHarness",
]

_GUARD = threading.Lock()
_ID_LOCKS: dict[tuple[str, str], threading.Lock] = {}
_ROW_CACHES: dict[str, dict[str, Row | None]] = {}


def _id_lock(path: str, txn: str) -> threading.Lock:
    with _GUARD:
        return _ID_LOCKS.setdefault((path, txn), threading.Lock())


class ThreadLockFenceOwner(SQLiteOwner):
    """Breaks O5 "no publish ... by any other caller (thread, process or host) takes effect".

    The author wanted a per-id fence instead of SQLite's database-wide write
    lock, and built it from a module-level ``threading.Lock`` per (database,
    id) that ``publish``, ``remove`` and the fence all take.  The fence reads
    the row in a short transaction and seals in another.  Every thread of the
    process waits; a second process has its own locks and walks straight in.
    """

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        with _id_lock(self._path, transaction_id):
            super().publish(transaction_id, claim)

    def remove(self, transaction_id: str) -> None:
        with _id_lock(self._path, transaction_id):
            super().remove(transaction_id)

    @contextmanager
    def inspect_fenced(self, transaction_id: str) -> Iterator[Observation]:  # type: ignore[override]
        txn = validate_transaction_id(transaction_id)
        with _id_lock(self._path, txn):
            with self._transaction("inspecting a reference") as conn:
                row = read_row(conn, txn)
            open_ = [True]

            def seal(observation: Observation) -> bool:
                require_sealable(observation)
                if not open_[0]:
                    raise UsageError("seal_absence is allowed only inside its block")
                with self._transaction("sealing an absence") as conn:
                    return cas_tombstone(conn, txn, observation.generation)

            try:
                yield observation_of(txn, row, seal)
            finally:
                open_[0] = False


class ThreadLockFenceHarness(SQLiteHarness):
    owner_class = ThreadLockFenceOwner

    def restart_store(self) -> None:
        # The lock table is the adapter's in-process engine state: a restart drops it.
        with _GUARD:
            for key in [k for k in _ID_LOCKS if k[0] == self.path]:
                del _ID_LOCKS[key]


class ProcessRowCacheOwner(SQLiteOwner):
    """Breaks O5 "yields ... the id's durable state at entry" (and O8: never from a cache).

    The author added a process-wide row cache in front of the fence's read to
    save a query, and invalidates it on every write this process makes (any
    handle, the seal included).  The fence still takes the write lock.  Writes
    of another process never reach this process's cache, so its fences keep
    answering what they saw before.
    """

    def _cache(self) -> dict[str, Row | None]:
        with _GUARD:
            return _ROW_CACHES.setdefault(self._path, {})

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        try:
            super().publish(transaction_id, claim)
        finally:
            self._cache().pop(transaction_id, None)

    def remove(self, transaction_id: str) -> None:
        try:
            super().remove(transaction_id)
        finally:
            self._cache().pop(transaction_id, None)

    @contextmanager
    def inspect_fenced(self, transaction_id: str) -> Iterator[Observation]:  # type: ignore[override]
        txn = validate_transaction_id(transaction_id)
        cache = self._cache()
        with self._transaction("inspecting a reference") as conn:
            if txn in cache:
                row = cache[txn]
            else:
                row = cache[txn] = read_row(conn, txn)
            open_ = [True]

            def seal(observation: Observation) -> bool:
                require_sealable(observation)
                if not open_[0]:
                    raise UsageError("seal_absence is allowed only inside its block")
                cache.pop(txn, None)
                if not cas_tombstone(conn, txn, observation.generation):
                    return False
                conn.execute("COMMIT")
                conn.execute("BEGIN IMMEDIATE")
                return True

            try:
                yield observation_of(txn, row, seal)
            finally:
                open_[0] = False


class ProcessRowCacheHarness(SQLiteHarness):
    owner_class = ProcessRowCacheOwner


class ReadThenWritePublishOwner(SQLiteOwner):
    """Breaks O3 "refuses ... a write that was still in flight when the tombstone was made".

    The author checks the row with a plain read (no lock: "reads never block
    in WAL mode"), then takes the write lock only for an ``INSERT OR
    REPLACE``.  A publish that read "never seen" and then waited behind a fence
    overwrites the tombstone that fence sealed, and returns normally.
    """

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        txn = validate_transaction_id(transaction_id)
        row = read_row(self._connection(), txn)
        if row is not None and row[0] == "tombstone":
            raise ArtifactPublicationRejected(f"transaction {txn!r} is tombstoned")
        if row is not None:
            if (row[1], row[2]) == (claim.source_id, claim.content_sha256):
                return
            raise OwnerConflictError(f"transaction {txn!r} holds another reference")
        with self._transaction("publishing a reference") as conn:
            conn.execute(
                f"INSERT OR REPLACE INTO {TABLE} (transaction_id, kind, source_id, "
                "content_sha256, reference_count, generation) VALUES (?, 'published', ?, ?, ?, "
                f"COALESCE((SELECT generation + 1 FROM {TABLE} WHERE transaction_id = ?), 1))",
                (txn, claim.source_id, claim.content_sha256, claim.reference_count, txn),
            )


class ReadThenWritePublishHarness(SQLiteHarness):
    owner_class = ReadThenWritePublishOwner


class HandleWriteBehindOwner(SQLiteOwner):
    """Breaks O1 "returns normally only once a reference ... is durable and visible to every
    later fence" -- seen only through another handle.

    To save round trips the author batches publishes per client object: a
    publish checks the store for a tombstone or another identity, queues the
    row and returns; the queue is written at this handle's next fence and when
    the handle closes.  The handle itself, a reopen and a restart all see the
    reference; another live handle does not.
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        self._queued: dict[str, ArtifactRetentionClaim] = {}
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        txn = validate_transaction_id(transaction_id)
        held = self._queued.get(txn)
        if held is not None:
            if (held.source_id, held.content_sha256) != (claim.source_id, claim.content_sha256):
                raise OwnerConflictError(f"transaction {txn!r} holds another reference")
            return
        row = read_row(self._connection(), txn)
        if row is not None and row[0] == "tombstone":
            raise ArtifactPublicationRejected(f"transaction {txn!r} is tombstoned")
        if row is not None:
            if (row[1], row[2]) == (claim.source_id, claim.content_sha256):
                return
            raise OwnerConflictError(f"transaction {txn!r} holds another reference")
        self._queued[txn] = claim

    def _flush(self) -> None:
        queued, self._queued = self._queued, {}
        if queued:
            with self._transaction("writing queued publishes") as conn:
                for txn, claim in queued.items():
                    if read_row(conn, txn) is None:
                        insert_published(conn, txn, claim)

    def remove(self, transaction_id: str) -> None:
        self._flush()
        super().remove(transaction_id)

    @contextmanager
    def inspect_fenced(self, transaction_id: str) -> Iterator[object]:  # type: ignore[override]
        self._flush()
        with super().inspect_fenced(transaction_id) as observation:
            yield observation

    def close(self) -> None:
        if getattr(self, "_all", None):
            self._flush()
        super().close()


class HandleWriteBehindHarness(SQLiteHarness):
    owner_class = HandleWriteBehindOwner
