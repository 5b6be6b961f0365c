"""Broken SQLite adapters whose ``seal_absence`` is not the compare-and-set O6 asks for.

The fence and everything else are the reference's; only the seal differs.
``SealCasOnKind`` is visible only after the fence was lost to a restart.
"""

from __future__ import annotations

import sqlite3
from contextlib import AbstractContextManager

from toolswap.errors import UsageError
from toolswap.owner import require_sealable
from toolswap.owners.sqlite import TABLE, SQLiteHarness, SQLiteOwner

from ._base import Observation, Sealer, cas_tombstone, commit_seal, held_fence

__all__ = [
    "SealBlindUpsertHarness",
    "SealCasOnKindHarness",
    "SealReturnsRowcountHarness",
    "SealRolledBackHarness",
    "SealTombstonesPublishedHarness",
]


class _SealOwner(SQLiteOwner):
    """The reference owner with the fence's seal replaced by :meth:`_seal`."""

    def _seal(self, conn: sqlite3.Connection, observation: Observation, is_open: bool) -> bool:
        raise NotImplementedError

    def inspect_fenced(  # type: ignore[override]
        self, transaction_id: str
    ) -> AbstractContextManager[Observation]:
        seal: Sealer = self._seal
        return held_fence(self, transaction_id, seal)


def _inside(observation: Observation, is_open: bool) -> None:
    require_sealable(observation)
    if not is_open:
        raise UsageError("seal_absence is allowed only inside its inspect_fenced block")


class SealBlindUpsertOwner(_SealOwner):
    """Breaks O6 "a compare-and-set on the observed generation ... ``False`` when the id's
    generation is no longer the observed one".

    The author reasoned that inside the fence nothing can change, so the seal
    is a plain ``INSERT OR REPLACE`` of a tombstone and always answers
    ``True``: the observed generation is used only to compute the next one.
    """

    def _seal(self, conn: sqlite3.Connection, observation: Observation, is_open: bool) -> bool:
        _inside(observation, is_open)
        conn.execute(
            f"INSERT OR REPLACE INTO {TABLE} (transaction_id, kind, generation) "
            "VALUES (?, 'tombstone', ?)",
            (observation.transaction_id, observation.generation + 1),
        )
        commit_seal(conn)
        return True


class SealBlindUpsertHarness(SQLiteHarness):
    owner_class = SealBlindUpsertOwner


_UPSERT_TOMBSTONE = (
    f"INSERT INTO {TABLE} (transaction_id, kind, generation) VALUES (?, 'tombstone', 1) "
    "ON CONFLICT (transaction_id) DO UPDATE SET kind = 'tombstone', source_id = NULL, "
    "content_sha256 = NULL, reference_count = NULL, generation = generation + 1 "
    "WHERE kind <> 'tombstone'"
)


class SealCasOnKindOwner(_SealOwner):
    """Breaks O6 "a compare-and-set on the observed generation" -- seen only after a restart.

    The author's seal is an idempotent upsert guarded on "not a tombstone yet"
    instead of on the observed generation, and it retries on a fresh
    connection when its own connection dropped ("the write is idempotent, so
    redoing it is safe").  Inside a live fence nothing can have changed, so
    every ordinary check passes; after a restart lost the fence and someone
    published, the retried seal buries the published reference.
    """

    def _seal(self, conn: sqlite3.Connection, observation: Observation, is_open: bool) -> bool:
        _inside(observation, is_open)
        txn = observation.transaction_id
        try:
            if conn.execute(_UPSERT_TOMBSTONE, (txn,)).rowcount != 1:
                return False
            commit_seal(conn)
            return True
        except sqlite3.Error:  # the connection dropped: reconnect and redo the write
            with self._transaction("sealing an absence again") as fresh:
                return fresh.execute(_UPSERT_TOMBSTONE, (txn,)).rowcount == 1


class SealCasOnKindHarness(SQLiteHarness):
    owner_class = SealCasOnKindOwner


class SealRolledBackOwner(_SealOwner):
    """Breaks O6 "returns ``True`` only once the tombstone is durable".

    The seal runs the reference compare-and-set inside the fence's
    transaction and returns its answer, expecting the block's end to commit
    it -- but the fence only reads, so its end is a ``ROLLBACK``, which takes
    the tombstone with it after the journal was told it exists.
    """

    def _seal(self, conn: sqlite3.Connection, observation: Observation, is_open: bool) -> bool:
        _inside(observation, is_open)
        return cas_tombstone(conn, observation.transaction_id, observation.generation)


class SealRolledBackHarness(SQLiteHarness):
    owner_class = SealRolledBackOwner


class SealTombstonesPublishedOwner(_SealOwner):
    """Breaks O6 "allowed only on an ABSENT, unsealed observation (otherwise UsageError,
    nothing written)".

    The author dropped the state check ("the compare-and-set on the
    generation already makes it safe") and the ``kind <> 'published'`` guard
    with it.  On a PUBLISHED observation the generation still matches, so the
    seal tombstones a live reference -- the artifact it protects can then be
    collected.
    """

    def _seal(self, conn: sqlite3.Connection, observation: Observation, is_open: bool) -> bool:
        if not is_open:
            raise UsageError("seal_absence is allowed only inside its inspect_fenced block")
        txn = observation.transaction_id
        if observation.generation == 0:
            cursor = conn.execute(
                f"INSERT OR IGNORE INTO {TABLE} (transaction_id, kind, generation) "
                "VALUES (?, 'tombstone', 1)",
                (txn,),
            )
        else:
            cursor = conn.execute(
                f"UPDATE {TABLE} SET kind = 'tombstone', source_id = NULL, "
                "content_sha256 = NULL, reference_count = NULL, generation = generation + 1 "
                "WHERE transaction_id = ? AND generation = ?",
                (txn, observation.generation),
            )
        if cursor.rowcount != 1:
            return False
        commit_seal(conn)
        return True


class SealTombstonesPublishedHarness(SQLiteHarness):
    owner_class = SealTombstonesPublishedOwner


class SealReturnsRowcountOwner(_SealOwner):
    """Breaks O6 "returns ``True`` only once the tombstone is durable ... ``False`` when ...".

    The author returns the cursor's row count ("1 means sealed, 0 means the
    generation moved"), which is truthy but not ``True``.  The journal takes
    only ``True`` as a seal, so every abort of a never-published lease stays
    pending forever.
    """

    def _seal(self, conn: sqlite3.Connection, observation: Observation, is_open: bool) -> bool:
        _inside(observation, is_open)
        # An unsealed absence is a never-seen id in this schema: no row to compare with.
        cursor = conn.execute(
            f"INSERT OR IGNORE INTO {TABLE} (transaction_id, kind, generation) "
            "VALUES (?, 'tombstone', 1)",
            (observation.transaction_id,),
        )
        if cursor.rowcount:
            commit_seal(conn)
        sealed: bool = cursor.rowcount  # type: ignore[assignment]
        return sealed


class SealReturnsRowcountHarness(SQLiteHarness):
    owner_class = SealReturnsRowcountOwner
