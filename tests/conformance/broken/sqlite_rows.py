"""Broken SQLite adapters with a wrong row: identity, tombstone, generation or field types.

``DigestPrefixIdentity`` is wrong only for a near-identical identity (same
source id and digest prefix); the others are wrong in ordinary use.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import attrs

from toolswap.domain import ArtifactRetentionClaim
from toolswap.journal_format import validate_transaction_id
from toolswap.owner import ArtifactPublicationRejected, OwnerConflictError
from toolswap.owners.sqlite import TABLE, SQLiteHarness, SQLiteOwner

from ._base import Observation, held_fence, insert_published, read_row

__all__ = [
    "DigestPrefixIdentityHarness",
    "ObservationShowsDatabaseHarness",
    "SealedIsIntHarness",
    "StateIsColumnTextHarness",
    "TouchOnRejectHarness",
    "UpdateOnlyRemoveHarness",
]

SHORT = 12


class DigestPrefixIdentityOwner(SQLiteOwner):
    """Breaks O1 "identity is the pair (source_id, full content_sha256)".

    The author compares identities the way people read digests: source id
    plus the 12-hex short digest ("collisions in 48 bits never happen").  A
    different artifact whose digest shares the prefix is taken for the held
    one: the publish returns normally as a no-op instead of a conflict.
    """

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        txn = validate_transaction_id(transaction_id)
        with self._transaction("publishing a reference") as conn:
            row = read_row(conn, txn)
            if row is not None and row[0] == "tombstone":
                raise ArtifactPublicationRejected(f"transaction {txn!r} is tombstoned")
            if row is not None:
                held = (row[1], (row[2] or "")[:SHORT])
                if held == (claim.source_id, claim.content_sha256[:SHORT]):
                    return
                raise OwnerConflictError(f"transaction {txn!r} holds another reference")
            insert_published(conn, txn, claim)


class DigestPrefixIdentityHarness(SQLiteHarness):
    owner_class = DigestPrefixIdentityOwner


class UpdateOnlyRemoveOwner(SQLiteOwner):
    """Breaks O4 "a never-seen id gets a tombstone".

    ``remove`` is a single ``UPDATE ... SET kind = 'tombstone'``: an id that
    was never published has no row to update, so nothing is written, and a
    publish that was still in flight lands afterwards.
    """

    def remove(self, transaction_id: str) -> None:
        txn = validate_transaction_id(transaction_id)
        with self._transaction("removing a reference") as conn:
            conn.execute(
                f"UPDATE {TABLE} SET kind = 'tombstone', source_id = NULL, "
                "content_sha256 = NULL, reference_count = NULL, generation = generation + 1 "
                "WHERE transaction_id = ? AND kind <> 'tombstone'",
                (txn,),
            )


class UpdateOnlyRemoveHarness(SQLiteHarness):
    owner_class = UpdateOnlyRemoveOwner


class SealedIsIntOwner(SQLiteOwner):
    """Breaks O8 "``sealed`` is a real ``bool``".

    The fence lets SQL compute the flag (``kind = 'tombstone' AS sealed``),
    and SQLite answers ``0`` or ``1``.  The journal compares ``sealed is
    True``, so a removed id is taken for an unsealed absence.
    """

    def inspect_fenced(  # type: ignore[override]
        self, transaction_id: str
    ) -> AbstractContextManager[Observation]:
        return self._fenced(transaction_id)

    @contextmanager
    def _fenced(self, transaction_id: str) -> Iterator[Observation]:
        with held_fence(self, transaction_id) as observation:
            flag = (
                self._connection()
                .execute(
                    f"SELECT kind = 'tombstone' FROM {TABLE} WHERE transaction_id = ?",
                    (observation.transaction_id,),
                )
                .fetchone()
            )
            yield attrs.evolve(observation, sealed=False if flag is None else flag[0])


class SealedIsIntHarness(SQLiteHarness):
    owner_class = SealedIsIntOwner


class StateIsColumnTextOwner(SQLiteOwner):
    """Breaks O8 "``state`` is exactly one of :class:`ObservedState`".

    The author stores the state as text and hands the column straight to the
    observation: ``"PUBLISHED"`` compares equal to the member, so every
    ``==`` test passes, but it is not the member, and the journal (which asks
    ``state is ObservedState.PUBLISHED``) reads every answer as UNKNOWN.
    """

    def inspect_fenced(  # type: ignore[override]
        self, transaction_id: str
    ) -> AbstractContextManager[Observation]:
        return self._fenced(transaction_id)

    @contextmanager
    def _fenced(self, transaction_id: str) -> Iterator[Observation]:
        with held_fence(self, transaction_id) as observation:
            text: Any = str(observation.state.value)
            yield attrs.evolve(observation, state=text)


class StateIsColumnTextHarness(SQLiteHarness):
    owner_class = StateIsColumnTextOwner


class TouchOnRejectOwner(SQLiteOwner):
    """Breaks O2 "``ArtifactPublicationRejected`` means nothing was written for that id by
    this call".

    The row's version doubles as an activity counter: a refused replay on a
    tombstone is recorded by bumping it ("so we can see replays in the
    audit"), committed before the rejection is raised.  The id's generation
    moves although the caller is told nothing was written.
    """

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        txn = validate_transaction_id(transaction_id)
        refused = False
        with self._transaction("publishing a reference") as conn:
            row = read_row(conn, txn)
            if row is not None and row[0] == "tombstone":
                conn.execute(
                    f"UPDATE {TABLE} SET generation = generation + 1 WHERE transaction_id = ?",
                    (txn,),
                )
                refused = True
            elif row is not None:
                if (row[1], row[2]) != (claim.source_id, claim.content_sha256):
                    raise OwnerConflictError(f"transaction {txn!r} holds another reference")
            else:
                insert_published(conn, txn, claim)
        if refused:
            raise ArtifactPublicationRejected(f"transaction {txn!r} is tombstoned")


class TouchOnRejectHarness(SQLiteHarness):
    owner_class = TouchOnRejectOwner


@attrs.frozen(kw_only=True)
class _TracedObservation(Observation):
    database: str
    """Where the row came from, for debugging (shown by ``repr``)."""


class ObservationShowsDatabaseOwner(SQLiteOwner):
    """Breaks O7 "Observations ... carry no ... file path".

    For debugging, the author's observation records which database it was
    read from, as an ordinary field -- so its ``repr`` (and every log line or
    report that prints it) shows the database path.
    """

    def inspect_fenced(  # type: ignore[override]
        self, transaction_id: str
    ) -> AbstractContextManager[Observation]:
        return self._fenced(transaction_id)

    @contextmanager
    def _fenced(self, transaction_id: str) -> Iterator[Observation]:
        with held_fence(self, transaction_id) as observation:
            yield _TracedObservation(
                transaction_id=observation.transaction_id,
                state=observation.state,
                source_id=observation.source_id,
                content_sha256=observation.content_sha256,
                generation=observation.generation,
                sealed=observation.sealed,
                sealer=observation._sealer,
                database=self._path,
            )


class ObservationShowsDatabaseHarness(SQLiteHarness):
    owner_class = ObservationShowsDatabaseOwner
