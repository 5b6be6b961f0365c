"""Adapters whose store reads a clock: a correct one, and three that time breaks.

:class:`ClockedMemoryHarness` is the family: an in-memory owner whose store
has a clock the harness moves (``advance_clock``, ``Capability.CLOCK``), as a
Redis or DynamoDB adapter whose keys may expire would.  The correct owner
never lets time change what it promised; each broken one does, in the way
such stores invite.  A fourth adapter's generation wraps after many changes,
which only a long run of back-to-back changes shows.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from toolswap.domain import ArtifactRetentionClaim
from toolswap.journal_format import validate_transaction_id
from toolswap.owner import ArtifactPublicationRejected, OwnerConflictError
from toolswap.owners.memory import InMemoryHarness, InMemoryOwner

from ._base import MemoryRow

__all__ = [
    "ClockedMemoryHarness",
    "ExpiringTombstonesHarness",
    "LeasedFenceHarness",
    "TinyVersionGenerationHarness",
]

_EPOCH = 1_700_000_000.0


class _Clock:
    """The store's clock (it moves only when the harness advances it), and what the store
    keeps beside its rows: when each tombstone was written, the lease of each fence."""

    def __init__(self) -> None:
        self.now = _EPOCH
        self.times: dict[str, float] = {}
        self.leases: dict[str, _LeaseLock] = {}


class ClockedMemoryOwner(InMemoryOwner):
    """The reference in-memory owner on a store with a clock (correct: time changes nothing)."""

    clock: _Clock


class ClockedMemoryHarness(InMemoryHarness):
    """The clocked family's harness: one clock per store, advanced by the kit."""

    owner_class = ClockedMemoryOwner

    def __init__(self, workdir: str) -> None:
        super().__init__(workdir)
        self.clock = _Clock()

    def open_owner(self) -> InMemoryOwner:
        owner = super().open_owner()
        owner.clock = self.clock  # type: ignore[attr-defined]
        return owner

    def advance_clock(self, seconds: float) -> None:
        self.clock.now += seconds


_TOMBSTONE_DAYS = 30


class ExpiringTombstonesOwner(ClockedMemoryOwner):
    """Breaks O3 "It refuses every later publish of that id, forever".

    Every key in the author's store has a time to live, and tombstones get
    30 days ("nobody replays a publish a month later").  Once the clock has
    passed that, a tombstone is gone and a late publish lands on an id the
    journal aborted.
    """

    def _expire(self, txn: str) -> None:
        row = self._rows.get(txn)
        born = self.clock.times.get(txn)
        expired = born is not None and self.clock.now - born > _TOMBSTONE_DAYS * 86400
        if row is not None and row.kind == "tombstone" and expired:
            del self._rows[txn]

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        self._expire(transaction_id)
        super().publish(transaction_id, claim)

    def remove(self, transaction_id: str) -> None:
        self._expire(transaction_id)
        super().remove(transaction_id)

    @contextmanager
    def inspect_fenced(self, transaction_id: str) -> Iterator[Any]:
        self._expire(transaction_id)
        with super().inspect_fenced(transaction_id) as seen:
            yield seen

    def _write_tombstone(self, transaction_id: str, current: int) -> None:
        super()._write_tombstone(transaction_id, current)
        self.clock.times[transaction_id] = self.clock.now


class ExpiringTombstonesHarness(ClockedMemoryHarness):
    owner_class = ExpiringTombstonesOwner


_LEASE_SECONDS = 10.0


class _LeaseLock:
    """A lock that is a lease: once the store's clock passes its expiry, anyone may take it."""

    def __init__(self, clock: _Clock) -> None:
        self._clock = clock
        self._guard = threading.Lock()
        self._expiry: float | None = None

    def __enter__(self) -> None:
        while True:
            with self._guard:
                if self._expiry is None or self._clock.now >= self._expiry:
                    self._expiry = self._clock.now + _LEASE_SECONDS
                    return
            time.sleep(0.005)

    def __exit__(self, *exc: object) -> None:
        with self._guard:
            self._expiry = None


class LeasedFenceOwner(ClockedMemoryOwner):
    """Breaks O5 "For the whole block no publish ... by any other caller ... takes effect".

    The fence is a lock with a lease, as a Redis ``SET key NX PX`` lock is:
    it expires after 10 seconds so that a crashed holder cannot block the id
    forever.  A fence held longer than the lease -- a slow journal append, a
    paused process -- lets another caller's publish land inside it.
    """

    def _fence(self, transaction_id: str) -> Any:
        with self._guard:
            return self.clock.leases.setdefault(transaction_id, _LeaseLock(self.clock))


class LeasedFenceHarness(ClockedMemoryHarness):
    owner_class = LeasedFenceOwner


class TinyVersionGenerationOwner(InMemoryOwner):
    """Breaks the terms' "a generation ... changes on every durable change ... never reuses".

    The generation is the store's change counter, kept in a signed byte
    (``TINYINT``) as the rest of the author's schema does: it wraps to 0
    after 127 changes of the whole store.  One id never sees two equal
    generations in a short test, but an id changed at the wrap gets 0 -- the
    generation of a never-seen id -- and a stale seal's compare-and-set on
    "never seen" then succeeds over a published reference.
    """

    counter: list[int]

    def _next(self) -> int:
        self.counter[0] += 1
        return self.counter[0] % 128

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
                generation=self._next(),
            )

    def _write_tombstone(self, transaction_id: str, current: int) -> None:
        self._rows[transaction_id] = MemoryRow(
            kind="tombstone", source_id=None, content_sha256=None, generation=self._next()
        )


class TinyVersionGenerationHarness(InMemoryHarness):
    owner_class = TinyVersionGenerationOwner

    def __init__(self, workdir: str) -> None:
        super().__init__(workdir)
        self.counter = [0]

    def open_owner(self) -> InMemoryOwner:
        owner = super().open_owner()
        owner.counter = self.counter  # type: ignore[attr-defined]
        return owner
