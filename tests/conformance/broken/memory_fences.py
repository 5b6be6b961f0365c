"""Broken in-memory adapters whose fence does not hold, or whose reads are not fresh (O5, O3).

Every bug here needs a second caller: another handle, or another thread.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from toolswap.domain import ArtifactRetentionClaim
from toolswap.journal_format import validate_transaction_id
from toolswap.owner import ArtifactPublicationRejected, OwnerConflictError
from toolswap.owners.memory import InMemoryHarness, InMemoryOwner, MemoryObservation

from ._base import MemoryFence, MemoryRow, memory_observation

__all__ = [
    "HandleObservationCacheHarness",
    "LockFreeRemoveHarness",
    "PerHandleFenceLocksHarness",
    "ReadThenWritePublishMemoryHarness",
    "SharedReadFenceHarness",
]


class PerHandleFenceLocksOwner(InMemoryOwner):
    """Breaks O5 "no ``publish`` ... of that id by any other caller ... takes effect".

    The rows are shared, but the author keeps the per-id locks in the client
    object ("each client manages its own locks").  Two handles never wait for
    each other: another handle's publish lands while this one's fence is held.
    """

    def _attach(self, store: Any) -> None:
        super()._attach(store)
        self._fences = {}


class PerHandleFenceLocksHarness(InMemoryHarness):
    owner_class = PerHandleFenceLocksOwner


class LockFreeRemoveOwner(InMemoryOwner):
    """Breaks O5 "no ... ``remove`` ... of that id by any other caller ... takes effect".

    ``remove`` skips the id's lock: "a tombstone is final and a dict
    assignment is atomic under the GIL, so there is nothing to race with".
    A remove then lands in the middle of someone else's fence, under the
    observation that fence is deciding on.
    """

    def remove(self, transaction_id: str) -> None:
        txn = validate_transaction_id(transaction_id)
        row = self._rows.get(txn)
        if row is not None and row.kind == "tombstone":
            return
        self._write_tombstone(txn, 0 if row is None else row.generation)


class LockFreeRemoveHarness(InMemoryHarness):
    owner_class = LockFreeRemoveOwner


class _ReadWriteLock:
    """Many shared holders or one exclusive holder; ``with lock:`` is the exclusive side."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False

    def __enter__(self) -> None:
        with self._cond:
            self._cond.wait_for(lambda: not self._writer and self._readers == 0)
            self._writer = True

    def __exit__(self, *exc: object) -> None:
        with self._cond:
            self._writer = False
            self._cond.notify_all()

    @contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._writer)
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()


class SharedReadFenceOwner(InMemoryOwner):
    """Breaks O5 "no ... seal of that id by any other caller takes effect".

    The author made the per-id lock a reader-writer lock: ``publish`` and
    ``remove`` take it exclusively, and fences share it ("a fence only
    reads").  But a fence may seal: two fences over one id are open at once,
    and the second one's seal changes the id under the first one's decision.
    """

    def _fence(self, transaction_id: str) -> Any:
        with self._guard:
            return self._fences.setdefault(transaction_id, _ReadWriteLock())  # type: ignore[arg-type]

    @contextmanager
    def inspect_fenced(self, transaction_id: str) -> Iterator[MemoryObservation]:
        txn = validate_transaction_id(transaction_id)
        with self._fence(txn).shared():
            fence = MemoryFence()
            try:
                yield memory_observation(self, txn, self._rows.get(txn), fence)
            finally:
                fence.open = False


class SharedReadFenceHarness(InMemoryHarness):
    owner_class = SharedReadFenceOwner


class HandleObservationCacheOwner(InMemoryOwner):
    """Breaks O5 "The block yields an observation of the id's durable state at entry"
    (and O8: ABSENT is never read from a cache) -- seen only after another handle's write.

    Each handle remembers the last row it saw or wrote for an id and answers
    fences from that memory, keeping it up to date with its own publishes,
    removes and seals.  Another handle's write never reaches it.
    """

    def _attach(self, store: Any) -> None:
        super()._attach(store)
        self._seen: dict[str, MemoryRow | None] = {}

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        try:
            super().publish(transaction_id, claim)
        finally:
            self._seen[transaction_id] = self._rows.get(transaction_id)

    def remove(self, transaction_id: str) -> None:
        try:
            super().remove(transaction_id)
        finally:
            self._seen[transaction_id] = self._rows.get(transaction_id)

    def _cas_tombstone(self, transaction_id: str, observed: int) -> bool:
        try:
            return super()._cas_tombstone(transaction_id, observed)
        finally:
            self._seen[transaction_id] = self._rows.get(transaction_id)

    @contextmanager
    def inspect_fenced(self, transaction_id: str) -> Iterator[MemoryObservation]:
        txn = validate_transaction_id(transaction_id)
        with self._fence(txn):
            if txn not in self._seen:
                self._seen[txn] = self._rows.get(txn)
            fence = MemoryFence()
            try:
                yield memory_observation(self, txn, self._seen[txn], fence)
            finally:
                fence.open = False


class HandleObservationCacheHarness(InMemoryHarness):
    owner_class = HandleObservationCacheOwner


class ReadThenWritePublishMemoryOwner(InMemoryOwner):
    """Breaks O3 "refuses every later publish ... including a write that was still in
    flight when the tombstone was made".

    The author decides on the row before taking the id's lock ("reading a
    dict is safe") and takes the lock only to store the new row.  A publish
    that read "never seen" and then waited behind a fence writes its
    reference over the tombstone that fence sealed.
    """

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        txn = validate_transaction_id(transaction_id)
        row = self._rows.get(txn)
        if row is not None and row.kind == "tombstone":
            raise ArtifactPublicationRejected(f"transaction {txn!r} is tombstoned")
        if row is not None:
            if (row.source_id, row.content_sha256) == (claim.source_id, claim.content_sha256):
                return
            raise OwnerConflictError(f"transaction {txn!r} holds another reference")
        with self._fence(txn):
            current = self._rows.get(txn)
            self._rows[txn] = MemoryRow(
                kind="published",
                source_id=claim.source_id,
                content_sha256=claim.content_sha256,
                generation=1 if current is None else current.generation + 1,
            )


class ReadThenWritePublishMemoryHarness(InMemoryHarness):
    owner_class = ReadThenWritePublishMemoryOwner
