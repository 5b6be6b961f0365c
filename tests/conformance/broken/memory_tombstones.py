"""Broken in-memory adapters with a wrong tombstone, removal or seal (O4, O6, O8)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from toolswap.errors import OwnerStoreError
from toolswap.journal_format import validate_transaction_id
from toolswap.owner import ArtifactPublicationRejected, ObservedState
from toolswap.owners.memory import InMemoryHarness, InMemoryOwner, MemoryObservation

from ._base import MemoryFence, MemoryRow, memory_observation

__all__ = [
    "DeleteOnRemoveHarness",
    "RemoveKeepsReferenceHarness",
    "RemoveNotIdempotentHarness",
    "ResealRewritesHarness",
    "SealAfterBlockHarness",
    "SealedNoneWhenNeverSeenHarness",
    "TombstoneKeepsIdentityHarness",
]


class DeleteOnRemoveOwner(InMemoryOwner):
    """Breaks O4 "a tombstone for it is durable (so a late replay cannot resurrect it)".

    ``remove`` deletes the entry (``rows.pop(id)``): the reference is gone, so
    the author saw nothing left to keep.  A delayed replay of the original
    publish then finds a never-seen id and publishes it again.
    """

    def remove(self, transaction_id: str) -> None:
        txn = validate_transaction_id(transaction_id)
        with self._fence(txn):
            self._rows.pop(txn, None)


class DeleteOnRemoveHarness(InMemoryHarness):
    owner_class = DeleteOnRemoveOwner


class RemoveKeepsReferenceOwner(InMemoryOwner):
    """Breaks O4 "returns normally only once no reference is visible under the id".

    Tombstones live in their own set, which ``publish`` consults; ``remove``
    adds the id to that set but forgets to drop the reference row, and the
    fence looks at the rows first.  The reference stays visible after
    ``remove`` returned.
    """

    _tombstones: set[str]  # the "tombstones table", shared by the harness

    def publish(self, transaction_id: str, claim: Any) -> None:
        if transaction_id in self._tombstones:
            raise ArtifactPublicationRejected(f"transaction {transaction_id!r} is tombstoned")
        super().publish(transaction_id, claim)

    def remove(self, transaction_id: str) -> None:
        txn = validate_transaction_id(transaction_id)
        with self._fence(txn):
            self._tombstones.add(txn)
            if txn not in self._rows:
                self._write_tombstone(txn, 0)


class RemoveKeepsReferenceHarness(InMemoryHarness):
    owner_class = RemoveKeepsReferenceOwner

    def __init__(self, workdir: str) -> None:
        super().__init__(workdir)
        self._tombstones: set[str] = set()

    def open_owner(self) -> InMemoryOwner:
        handle = super().open_owner()
        handle._tombstones = self._tombstones  # type: ignore[attr-defined]
        return handle


class RemoveNotIdempotentOwner(InMemoryOwner):
    """Breaks O4 "It is idempotent".

    A second ``remove`` of an id raises ("nothing to remove: already
    tombstoned"), which the journal reads as "maybe removed" -- a retried
    release never completes.
    """

    def remove(self, transaction_id: str) -> None:
        txn = validate_transaction_id(transaction_id)
        row = self._rows.get(txn)
        if row is not None and row.kind == "tombstone":
            raise OwnerStoreError(f"transaction {txn!r} has nothing left to remove")
        super().remove(txn)


class RemoveNotIdempotentHarness(InMemoryHarness):
    owner_class = RemoveNotIdempotentOwner


class _LooseObservation(MemoryObservation):
    def seal_absence(self) -> bool:
        from toolswap.owner import require_sealable

        require_sealable(self)
        return self._owner._cas_tombstone(self.transaction_id, self.generation)


class SealAfterBlockOwner(InMemoryOwner):
    """Breaks O6 "``seal_absence()`` is allowed only ... inside its block".

    The observation's seal checks the state but not that its fence is still
    held (the author assumed nobody keeps an observation after its block).
    A seal from a stale observation writes a tombstone with no fence around
    it.
    """

    @contextmanager
    def inspect_fenced(self, transaction_id: str) -> Iterator[MemoryObservation]:
        txn = validate_transaction_id(transaction_id)
        with self._fence(txn):
            row = self._rows.get(txn)
            base = memory_observation(self, txn, row, MemoryFence())
            yield _LooseObservation(
                transaction_id=base.transaction_id,
                state=base.state,
                source_id=base.source_id,
                content_sha256=base.content_sha256,
                generation=base.generation,
                sealed=base.sealed,
                owner=self,
                fence=MemoryFence(),
            )


class SealAfterBlockHarness(InMemoryHarness):
    owner_class = SealAfterBlockOwner


class _ResealObservation(MemoryObservation):
    def seal_absence(self) -> bool:
        if self.state is not ObservedState.ABSENT:
            from toolswap.errors import UsageError

            raise UsageError("cannot seal a PUBLISHED observation")
        if not self._fence.open:
            from toolswap.errors import UsageError

            raise UsageError("seal_absence is allowed only inside its inspect_fenced block")
        return self._owner._cas_tombstone(self.transaction_id, self.generation)


class ResealRewritesOwner(InMemoryOwner):
    """Breaks O6 "allowed only on an ABSENT, unsealed observation (otherwise UsageError,
    nothing written)".

    The author lets a seal of an already sealed id go through ("sealing is
    idempotent, why refuse it?"): the compare-and-set matches, so the
    tombstone is written again with a new generation, and every other
    caller's observation of it becomes stale.
    """

    @contextmanager
    def inspect_fenced(self, transaction_id: str) -> Iterator[MemoryObservation]:
        txn = validate_transaction_id(transaction_id)
        with self._fence(txn):
            fence = MemoryFence()
            base = memory_observation(self, txn, self._rows.get(txn), fence)
            try:
                yield _ResealObservation(
                    transaction_id=base.transaction_id,
                    state=base.state,
                    source_id=base.source_id,
                    content_sha256=base.content_sha256,
                    generation=base.generation,
                    sealed=base.sealed,
                    owner=self,
                    fence=fence,
                )
            finally:
                fence.open = False


class ResealRewritesHarness(InMemoryHarness):
    owner_class = ResealRewritesOwner


class TombstoneKeepsIdentityOwner(InMemoryOwner):
    """Breaks O8 "ABSENT (...; both identity fields are ``None``...)".

    For auditing, the tombstone keeps the identity it replaced, and the
    observation copies the row's fields as they are: a removed id is ABSENT
    but still shows a source id and digest.
    """

    def _write_tombstone(self, transaction_id: str, current: int) -> None:
        old = self._rows.get(transaction_id)
        self._rows[transaction_id] = MemoryRow(
            kind="tombstone",
            source_id=None if old is None else old.source_id,
            content_sha256=None if old is None else old.content_sha256,
            generation=current + 1,
        )

    @contextmanager
    def inspect_fenced(self, transaction_id: str) -> Iterator[MemoryObservation]:
        txn = validate_transaction_id(transaction_id)
        with self._fence(txn):
            row = self._rows.get(txn)
            fence = MemoryFence()
            try:
                yield memory_observation(
                    self,
                    txn,
                    row,
                    fence,
                    source_id=None if row is None else row.source_id,
                    content_sha256=None if row is None else row.content_sha256,
                )
            finally:
                fence.open = False


class TombstoneKeepsIdentityHarness(InMemoryHarness):
    owner_class = TombstoneKeepsIdentityOwner


class SealedNoneWhenNeverSeenOwner(InMemoryOwner):
    """Breaks O8 "``sealed`` is ``True`` exactly when a tombstone exists ... a real
    ``bool``" -- for a never-seen id.

    The flag is written ``row and row.kind == "tombstone"``, which is
    ``None`` when there is no row.  Falsy, so the author's own tests pass;
    the journal asks ``sealed is True`` and the kit asks for a bool.
    """

    @contextmanager
    def inspect_fenced(self, transaction_id: str) -> Iterator[MemoryObservation]:
        txn = validate_transaction_id(transaction_id)
        with self._fence(txn):
            row = self._rows.get(txn)
            fence = MemoryFence()
            try:
                yield memory_observation(
                    self, txn, row, fence, sealed=row and row.kind == "tombstone"
                )
            finally:
                fence.open = False


class SealedNoneWhenNeverSeenHarness(InMemoryHarness):
    owner_class = SealedNoneWhenNeverSeenOwner
