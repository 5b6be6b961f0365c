"""Broken SQLite adapters whose state lives partly in the process's memory: wrong only
after the store restarts.

The harnesses model the adapter's in-process engine state (a sequence, a
write-behind buffer) as part of the store: ``restart_store`` drops it, as a
real restart of an embedded engine would.
"""

from __future__ import annotations

import itertools
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager

from toolswap.domain import ArtifactRetentionClaim
from toolswap.errors import UsageError
from toolswap.journal_format import validate_transaction_id
from toolswap.owner import ArtifactPublicationRejected, OwnerConflictError, require_sealable
from toolswap.owners.sqlite import TABLE, SQLiteHarness, SQLiteOwner

from ._base import Observation, Row, cas_tombstone, commit_seal, held_fence, read_row

__all__ = ["BufferedTombstoneHarness", "ProcessSequenceHarness"]

_GUARD = threading.Lock()
_SEQUENCES: dict[str, Iterator[int]] = {}
_BUFFERED: dict[str, set[str]] = {}


def _next_generation(path: str) -> int:
    with _GUARD:
        return next(_SEQUENCES.setdefault(path, itertools.count(1)))


class ProcessSequenceOwner(SQLiteOwner):
    """Breaks the generation term "never reuses [a generation] for that id" -- only across
    a restart.

    The author draws every generation from one sequence of the engine,
    shared by every handle in the process (so handles never collide), and
    stores it in the row.  The sequence is not persisted: after a restart it
    starts again at 1, and the next change of an id can get a generation the
    id already had -- a seal compare-and-set can then succeed on a stale
    observation.
    """

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        txn = validate_transaction_id(transaction_id)
        with self._transaction("publishing a reference") as conn:
            row = read_row(conn, txn)
            if row is not None and row[0] == "tombstone":
                raise ArtifactPublicationRejected(f"transaction {txn!r} is tombstoned")
            if row is not None:
                if (row[1], row[2]) == (claim.source_id, claim.content_sha256):
                    return
                raise OwnerConflictError(f"transaction {txn!r} holds another reference")
            conn.execute(
                f"INSERT INTO {TABLE} (transaction_id, kind, source_id, content_sha256, "
                "reference_count, generation) VALUES (?, 'published', ?, ?, ?, ?)",
                (
                    txn,
                    claim.source_id,
                    claim.content_sha256,
                    claim.reference_count,
                    _next_generation(self._path),
                ),
            )

    def remove(self, transaction_id: str) -> None:
        txn = validate_transaction_id(transaction_id)
        with self._transaction("removing a reference") as conn:
            row = read_row(conn, txn)
            if row is not None and row[0] == "tombstone":
                return
            conn.execute(
                f"INSERT OR REPLACE INTO {TABLE} (transaction_id, kind, generation) "
                "VALUES (?, 'tombstone', ?)",
                (txn, _next_generation(self._path)),
            )

    def inspect_fenced(  # type: ignore[override]
        self, transaction_id: str
    ) -> AbstractContextManager[Observation]:
        def seal(conn: sqlite3.Connection, observation: Observation, is_open: bool) -> bool:
            require_sealable(observation)
            if not is_open:
                raise UsageError("seal_absence is allowed only inside its inspect_fenced block")
            sealed = cas_tombstone(
                conn,
                observation.transaction_id,
                observation.generation,
                _next_generation(self._path),
            )
            if sealed:
                commit_seal(conn)
            return sealed

        return held_fence(self, transaction_id, seal)


class ProcessSequenceHarness(SQLiteHarness):
    owner_class = ProcessSequenceOwner

    def restart_store(self) -> None:
        with _GUARD:
            _SEQUENCES.pop(self.path, None)


class BufferedTombstoneOwner(SQLiteOwner):
    """Breaks O4 "returns normally only once ... a tombstone for it is durable".

    The author deletes the reference row at once but puts the tombstone in
    the engine's write-behind buffer (shared by every handle of the process,
    consulted by every fence and publish), to be written "in the next batch".
    Every handle agrees that the id is sealed; after a restart the buffer is
    gone, and the id is a fresh absence that a late replay can publish again.
    """

    def _buffer(self) -> set[str]:
        with _GUARD:
            return _BUFFERED.setdefault(self._path, set())

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        if transaction_id in self._buffer():
            raise ArtifactPublicationRejected(f"transaction {transaction_id!r} is tombstoned")
        super().publish(transaction_id, claim)

    def remove(self, transaction_id: str) -> None:
        txn = validate_transaction_id(transaction_id)
        with self._transaction("removing a reference") as conn:
            conn.execute(
                f"DELETE FROM {TABLE} WHERE transaction_id = ? AND kind = 'published'", (txn,)
            )
        self._buffer().add(txn)

    def inspect_fenced(  # type: ignore[override]
        self, transaction_id: str
    ) -> AbstractContextManager[Observation]:
        buffered = self._buffer()

        def read(conn: sqlite3.Connection, txn: str) -> Row | None:
            row = read_row(conn, txn)
            if row is None and txn in buffered:
                return ("tombstone", None, None, 2)
            return row

        return held_fence(self, transaction_id, read=read)


class BufferedTombstoneHarness(SQLiteHarness):
    owner_class = BufferedTombstoneOwner

    def restart_store(self) -> None:
        with _GUARD:
            _BUFFERED.pop(self.path, None)
