"""Broken in-memory adapters whose generation is not the one the terms define.

The generation "changes on every durable change of that id ... and is never
reused for that id"; the journal compares it only for equality.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from toolswap.domain import ArtifactRetentionClaim
from toolswap.journal_format import validate_transaction_id
from toolswap.owner import ArtifactPublicationRejected, OwnerConflictError
from toolswap.owners.memory import InMemoryHarness, InMemoryOwner, MemoryObservation

from ._base import MemoryFence, MemoryRow, memory_observation

__all__ = [
    "GenerationCountsRemovalsHarness",
    "HandleCounterGenerationHarness",
    "ReadTimeGenerationHarness",
]


class _StampingOwner(InMemoryOwner):
    """The reference publish, with the new row's generation from :meth:`_stamp`."""

    def _stamp(self, current: int) -> int:
        raise NotImplementedError

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        txn = validate_transaction_id(transaction_id)
        with self._fence(txn):
            row = self._rows.get(txn)
            if row is not None and row.kind == "tombstone":
                raise ArtifactPublicationRejected(f"transaction {txn!r} is tombstoned")
            if row is not None:
                if (row.source_id, row.content_sha256) == (claim.source_id, claim.content_sha256):
                    return
                raise OwnerConflictError(f"transaction {txn!r} holds another reference")
            self._rows[txn] = MemoryRow(
                kind="published",
                source_id=claim.source_id,
                content_sha256=claim.content_sha256,
                generation=self._stamp(0),
            )


class HandleCounterGenerationOwner(_StampingOwner):
    """Breaks "never reuses [a generation] for that id" -- across handles.

    Each client object numbers the writes it makes (``itertools.count(1)``
    in the handle).  Two handles changing one id hand out the same numbers,
    so a seal compare-and-set by one can match a state the other created.
    """

    def _attach(self, store: Any) -> None:
        super()._attach(store)
        self._counter = itertools.count(1)

    def _stamp(self, current: int) -> int:
        return next(self._counter)

    def _write_tombstone(self, transaction_id: str, current: int) -> None:
        self._rows[transaction_id] = MemoryRow(
            kind="tombstone", source_id=None, content_sha256=None, generation=self._stamp(current)
        )


class HandleCounterGenerationHarness(InMemoryHarness):
    owner_class = HandleCounterGenerationOwner


class GenerationCountsRemovalsOwner(_StampingOwner):
    """Breaks "changes on every durable change of that id (publish, ...)".

    The author reasoned that only seals compare generations, so only
    tombstones advance it; a publish keeps the id's generation.  A seal that
    observed "never seen" then compares equal after a publish landed.
    """

    def _stamp(self, current: int) -> int:
        return current


class GenerationCountsRemovalsHarness(InMemoryHarness):
    owner_class = GenerationCountsRemovalsOwner


class ReadTimeGenerationOwner(_StampingOwner):
    """Breaks "the owner changes [the generation] on every durable change" -- and only then.

    The generation is the row's last-modified time; a never-seen id has no
    row, so the author reports the time of the read.  Two fences over an
    untouched id disagree, and no compare-and-set on a never-seen id can be
    checked against anything.
    """

    def _stamp(self, current: int) -> int:
        return time.time_ns()

    def _write_tombstone(self, transaction_id: str, current: int) -> None:
        self._rows[transaction_id] = MemoryRow(
            kind="tombstone", source_id=None, content_sha256=None, generation=self._stamp(current)
        )

    def _cas_tombstone(self, transaction_id: str, observed: int) -> bool:
        row = self._rows.get(transaction_id)
        if row is None:  # "still no row: nothing changed since the read"
            self._write_tombstone(transaction_id, 0)
            return True
        return super()._cas_tombstone(transaction_id, observed)

    @contextmanager
    def inspect_fenced(self, transaction_id: str) -> Iterator[MemoryObservation]:
        txn = validate_transaction_id(transaction_id)
        with self._fence(txn):
            row = self._rows.get(txn)
            fence = MemoryFence()
            try:
                if row is None:
                    yield memory_observation(self, txn, row, fence, generation=time.time_ns())
                else:
                    yield memory_observation(self, txn, row, fence)
            finally:
                fence.open = False


class ReadTimeGenerationHarness(InMemoryHarness):
    owner_class = ReadTimeGenerationOwner
