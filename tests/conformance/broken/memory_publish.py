"""Broken in-memory adapters whose ``publish`` misjudges identity or conflict (O1).

``SourceIdOnlyIdentity`` is wrong only for a near-identical identity;
``SeenAbsentSkipsCheck`` only after another handle's write.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from toolswap.domain import ArtifactRetentionClaim
from toolswap.journal_format import validate_transaction_id
from toolswap.owner import ArtifactPublicationRejected, OwnerConflictError
from toolswap.owners.memory import InMemoryHarness, InMemoryOwner, MemoryObservation

from ._base import MemoryRow

__all__ = [
    "ConflictIsRejectionHarness",
    "RepublishRefreshesHarness",
    "SeenAbsentSkipsCheckHarness",
    "SourceIdOnlyIdentityHarness",
    "SwapThenCheckHarness",
]


def _row(claim: ArtifactRetentionClaim, generation: int) -> MemoryRow:
    return MemoryRow(
        kind="published",
        source_id=claim.source_id,
        content_sha256=claim.content_sha256,
        generation=generation,
    )


class RepublishRefreshesOwner(InMemoryOwner):
    """Breaks O1 "Publishing the identity an id already holds is a no-op ... generation
    unchanged".

    A publish of the held identity "refreshes" the row (the author wants the
    latest reference count stored), which writes a new version.  A retried
    publish moves the generation, and a seal racing with the retry loses.
    """

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        txn = validate_transaction_id(transaction_id)
        with self._fence(txn):
            row = self._rows.get(txn)
            if row is not None and row.kind == "tombstone":
                raise ArtifactPublicationRejected(f"transaction {txn!r} is tombstoned")
            if row is not None and (row.source_id, row.content_sha256) != (
                claim.source_id,
                claim.content_sha256,
            ):
                raise OwnerConflictError(f"transaction {txn!r} holds another reference")
            self._rows[txn] = _row(claim, 1 if row is None else row.generation + 1)


class RepublishRefreshesHarness(InMemoryHarness):
    owner_class = RepublishRefreshesOwner


class SwapThenCheckOwner(InMemoryOwner):
    """Breaks O1 "Another identity ... raises OwnerConflictError and changes nothing".

    The author stores first and compares afterwards (``old = rows.get(id);
    rows[id] = new; if old differs: raise``), as one would with an upsert
    that returns the previous value.  The conflict is reported, but the held
    reference has already been replaced.
    """

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        txn = validate_transaction_id(transaction_id)
        with self._fence(txn):
            old = self._rows.get(txn)
            if old is not None and old.kind == "tombstone":
                raise ArtifactPublicationRejected(f"transaction {txn!r} is tombstoned")
            if old is not None and (old.source_id, old.content_sha256) == (
                claim.source_id,
                claim.content_sha256,
            ):
                return
            self._rows[txn] = _row(claim, 1 if old is None else old.generation + 1)
            if old is not None:
                raise OwnerConflictError(f"transaction {txn!r} held another reference")


class SwapThenCheckHarness(InMemoryHarness):
    owner_class = SwapThenCheckOwner


class ConflictIsRejectionOwner(InMemoryOwner):
    """Breaks O1 "Another identity under an id that holds a reference raises
    OwnerConflictError".

    The author treats "this id is taken" like "this id is tombstoned" and
    raises :class:`ArtifactPublicationRejected` for both.  The journal then
    aborts a lease whose id holds a live reference, instead of keeping it
    pending for a person to resolve.
    """

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        try:
            super().publish(transaction_id, claim)
        except OwnerConflictError as exc:
            raise ArtifactPublicationRejected(
                f"transaction {transaction_id!r} is already taken"
            ) from exc


class ConflictIsRejectionHarness(InMemoryHarness):
    owner_class = ConflictIsRejectionOwner


class SourceIdOnlyIdentityOwner(InMemoryOwner):
    """Breaks O1 "identity is the pair (source_id, full content_sha256)".

    The author compares only the source id ("the source id already embeds
    the digest").  It embeds only a digest prefix, so another artifact with
    the same source id and prefix passes as the held one.
    """

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        txn = validate_transaction_id(transaction_id)
        with self._fence(txn):
            row = self._rows.get(txn)
            if row is not None and row.kind == "tombstone":
                raise ArtifactPublicationRejected(f"transaction {txn!r} is tombstoned")
            if row is not None:
                if row.source_id == claim.source_id:
                    return
                raise OwnerConflictError(f"transaction {txn!r} holds another reference")
            self._rows[txn] = _row(claim, 1)


class SourceIdOnlyIdentityHarness(InMemoryHarness):
    owner_class = SourceIdOnlyIdentityOwner


class SeenAbsentSkipsCheckOwner(InMemoryOwner):
    """Breaks O1 "Another identity under an id that holds a reference raises
    OwnerConflictError and changes nothing" -- seen only after another handle's write.

    A handle remembers the ids its fences saw ABSENT and unsealed, and
    publishes them with a plain write ("we just looked: it is free"),
    skipping the check.  If another handle published in between, the
    reference is overwritten with another identity.
    """

    def _attach(self, store: Any) -> None:
        super()._attach(store)
        self._free: set[str] = set()

    @contextmanager
    def inspect_fenced(self, transaction_id: str) -> Iterator[MemoryObservation]:
        with super().inspect_fenced(transaction_id) as observation:
            if observation.state == "ABSENT" and not observation.sealed:
                self._free.add(observation.transaction_id)
            yield observation

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        txn = validate_transaction_id(transaction_id)
        if txn not in self._free:
            super().publish(txn, claim)
            return
        self._free.discard(txn)
        with self._fence(txn):
            self._rows[txn] = _row(claim, self.generation(txn) + 1)


class SeenAbsentSkipsCheckHarness(InMemoryHarness):
    owner_class = SeenAbsentSkipsCheckOwner
