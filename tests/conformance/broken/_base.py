"""Correct pieces the broken adapters are built from, so each adapter changes one thing.

Rules
=====

1. Nothing here is broken: the SQL is the reference adapter's, the
   observation keeps every field as given, and a seal is whatever the adapter
   passes in.  A broken adapter's bug is always in its own module, next to the
   docstring that names it.
2. Observations here carry no connection or path, so a broken adapter that
   does not mean to break O7 cannot break it by accident.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import attrs

from toolswap.domain import ArtifactRetentionClaim
from toolswap.errors import UsageError
from toolswap.journal_format import validate_transaction_id
from toolswap.owner import ObservedState, require_sealable
from toolswap.owners.memory import InMemoryOwner, MemoryObservation
from toolswap.owners.memory import _Fence as MemoryFence
from toolswap.owners.memory import _Row as MemoryRow
from toolswap.owners.sqlite import TABLE, SQLiteOwner, _store_errors

Sealer = Callable[[sqlite3.Connection, "Observation", bool], bool]
"""An adapter's seal: (the fence's connection, the observation, whether the block is open)."""

__all__ = [
    "Observation",
    "Row",
    "Sealer",
    "cas_tombstone",
    "commit_seal",
    "held_fence",
    "reference_seal",
    "MemoryFence",
    "MemoryRow",
    "insert_published",
    "memory_observation",
    "observation_of",
    "read_row",
    "tombstone_now",
]

Row = tuple[str, str | None, str | None, int]
"""A stored row: (kind, source_id, content_sha256, generation)."""


@attrs.frozen(kw_only=True)
class Observation:
    """An observation whose seal is the adapter's own function."""

    transaction_id: str
    state: Any
    source_id: str | None
    content_sha256: str | None
    generation: Any
    sealed: Any
    _sealer: Callable[[Observation], bool] = attrs.field(repr=False, eq=False, alias="sealer")

    def seal_absence(self) -> bool:
        return self._sealer(self)


def observation_of(txn: str, row: Row | None, sealer: Callable[[Observation], bool]) -> Observation:
    """The reference mapping of a stored row (``None``: never seen) to an observation."""
    if row is None or row[0] == "tombstone":
        state, source_id, digest = ObservedState.ABSENT, None, None
    else:
        state, source_id, digest = ObservedState.PUBLISHED, row[1], row[2]
    return Observation(
        transaction_id=txn,
        state=state,
        source_id=source_id,
        content_sha256=digest,
        generation=0 if row is None else row[3],
        sealed=row is not None and row[0] == "tombstone",
        sealer=sealer,
    )


def read_row(conn: sqlite3.Connection, txn: str) -> Row | None:
    row = conn.execute(
        f"SELECT kind, source_id, content_sha256, generation FROM {TABLE} WHERE transaction_id = ?",
        (txn,),
    ).fetchone()
    return None if row is None else (str(row[0]), row[1], row[2], int(row[3]))


def insert_published(
    conn: sqlite3.Connection, txn: str, claim: ArtifactRetentionClaim, generation: int = 1
) -> None:
    conn.execute(
        f"INSERT INTO {TABLE} (transaction_id, kind, source_id, content_sha256, "
        "reference_count, generation) VALUES (?, 'published', ?, ?, ?, ?)",
        (txn, claim.source_id, claim.content_sha256, claim.reference_count, generation),
    )


def tombstone_now(conn: sqlite3.Connection, txn: str, generation: int | None = None) -> None:
    """Tombstone the id unconditionally (what ``remove`` does); ``generation`` or +1."""
    if conn.execute(f"SELECT 1 FROM {TABLE} WHERE transaction_id = ?", (txn,)).fetchone():
        conn.execute(
            f"UPDATE {TABLE} SET kind = 'tombstone', source_id = NULL, content_sha256 = NULL, "
            "reference_count = NULL, generation = COALESCE(?, generation + 1) "
            "WHERE transaction_id = ? AND kind <> 'tombstone'",
            (generation, txn),
        )
    else:
        conn.execute(
            f"INSERT INTO {TABLE} (transaction_id, kind, generation) VALUES (?, 'tombstone', ?)",
            (txn, 1 if generation is None else generation),
        )


def cas_tombstone(
    conn: sqlite3.Connection, txn: str, observed: int, new_generation: int | None = None
) -> bool:
    """The reference seal: tombstone only if the id is still at ``observed`` (never a reference)."""
    if observed == 0:
        cursor = conn.execute(
            f"INSERT OR IGNORE INTO {TABLE} (transaction_id, kind, generation) "
            "VALUES (?, 'tombstone', ?)",
            (txn, 1 if new_generation is None else new_generation),
        )
    else:
        cursor = conn.execute(
            f"UPDATE {TABLE} SET kind = 'tombstone', source_id = NULL, content_sha256 = NULL, "
            "reference_count = NULL, generation = COALESCE(?, generation + 1) "
            "WHERE transaction_id = ? AND generation = ? AND kind <> 'published'",
            (new_generation, txn, observed),
        )
    return cursor.rowcount == 1


def commit_seal(conn: sqlite3.Connection) -> None:
    """Make a seal durable now, then take the fence's write lock again (as the reference does)."""
    conn.execute("COMMIT")
    conn.execute("BEGIN IMMEDIATE")


def reference_seal(conn: sqlite3.Connection, observation: Observation, is_open: bool) -> bool:
    require_sealable(observation)
    if not is_open or not conn.in_transaction:
        raise UsageError("seal_absence is allowed only inside its inspect_fenced block")
    if not cas_tombstone(conn, observation.transaction_id, observation.generation):
        return False
    commit_seal(conn)
    return True


@contextmanager
def held_fence(
    owner: SQLiteOwner,
    transaction_id: str,
    seal: Sealer = reference_seal,
    read: Callable[[sqlite3.Connection, str], Row | None] = read_row,
) -> Iterator[Observation]:
    """The reference fence (``BEGIN IMMEDIATE`` for the block, ``ROLLBACK`` at exit).

    ``seal`` and ``read`` are the adapter's; the defaults are the reference's.
    """
    txn = validate_transaction_id(transaction_id)
    conn = owner._connection()
    with _store_errors("taking the fence"):
        conn.execute("BEGIN IMMEDIATE")
    open_ = [True]

    def sealer(observation: Observation) -> bool:
        with _store_errors("sealing an absence"):
            return seal(conn, observation, open_[0])

    try:
        with _store_errors("inspecting a reference"):
            row = read(conn, txn)
        yield observation_of(txn, row, sealer)
    finally:
        open_[0] = False
        if conn.in_transaction:
            with _store_errors("releasing the fence"):
                conn.execute("ROLLBACK")


def memory_observation(
    owner: InMemoryOwner, txn: str, row: MemoryRow | None, fence: MemoryFence, **changed: Any
) -> MemoryObservation:
    """The in-memory reference's observation of ``row`` (``None``: never seen), with
    ``changed`` fields replaced."""
    published = row is not None and row.kind == "published"
    fields: dict[str, Any] = {
        "transaction_id": txn,
        "state": ObservedState.PUBLISHED if published else ObservedState.ABSENT,
        "source_id": row.source_id if published and row is not None else None,
        "content_sha256": row.content_sha256 if published and row is not None else None,
        "generation": 0 if row is None else row.generation,
        "sealed": row is not None and row.kind == "tombstone",
    }
    fields.update(changed)
    return MemoryObservation(owner=owner, fence=fence, **fields)
