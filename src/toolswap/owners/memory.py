"""An in-memory owner: the reference adapter for teaching and tests.

It keeps one row per transaction id in a dict.  The fence is a per-id lock
held for the whole ``inspect_fenced`` block; every publish/remove of that id
takes the same lock, so nothing about the id changes while the journal decides
(the lock is not re-entrant: do not call the owner from inside its own fence).
``generation`` starts at 0 (never seen) and advances on every change; a
tombstone is final.  One object may be shared by any number of threads.  It is
not durable, so it models an owner that never crashes.

The census (O9) takes one lock per artifact it names, in name order, for the
whole block; ``publish`` takes the lock of the artifact its claim names while
it holds the id's lock, so a publish naming a counted artifact waits.  (The
census never waits for an id's lock, so the two orders never cross.)

Several handles may share one store: :meth:`InMemoryOwner.new_handle` opens
another object on the same rows and fences (what the conformance kit needs to
tell a handle from its store).  :class:`InMemoryHarness` puts it through the kit.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from typing import ClassVar, Literal

import attrs

from ..domain import ArtifactRetentionClaim, artifact_prefix
from ..errors import UsageError
from ..journal_format import validate_transaction_id
from ..owner import (
    ArtifactPublicationRejected,
    Census,
    ObservedState,
    OwnerConflictError,
    require_sealable,
)
from ..testing.harness import Capability, OwnerHarness

__all__ = ["InMemoryHarness", "InMemoryOwner", "MemoryObservation"]


@attrs.frozen(kw_only=True)
class _Row:
    kind: Literal["published", "tombstone"]
    source_id: str | None
    content_sha256: str | None
    generation: int


class _Fence:
    """One ``inspect_fenced`` block; its observation may seal only while it is open."""

    __slots__ = ("open",)

    def __init__(self) -> None:
        self.open = True


@attrs.frozen(kw_only=True)
class MemoryObservation:
    """An observation of :class:`InMemoryOwner`; see :class:`toolswap.owner.OwnerObservation`."""

    transaction_id: str
    state: ObservedState
    source_id: str | None
    content_sha256: str | None
    generation: int
    sealed: bool
    _owner: InMemoryOwner = attrs.field(repr=False, eq=False, alias="owner")
    _fence: _Fence = attrs.field(repr=False, eq=False, alias="fence")

    def seal_absence(self) -> bool:
        require_sealable(self)
        if not self._fence.open:
            raise UsageError("seal_absence is allowed only inside its inspect_fenced block")
        return self._owner._cas_tombstone(self.transaction_id, self.generation)


class _Store:
    """The rows and per-id fence locks that every handle of one store shares."""

    __slots__ = ("guard", "fences", "artifact_fences", "rows")

    def __init__(self) -> None:
        self.guard = threading.Lock()
        self.fences: dict[str, threading.Lock] = {}
        self.artifact_fences: dict[str, threading.Lock] = {}
        self.rows: dict[str, _Row] = {}


class InMemoryOwner:
    """A thread-safe, non-durable owner (docs/design.md section 6)."""

    def __init__(self) -> None:
        self._attach(_Store())

    def _attach(self, store: _Store) -> None:
        self._store = store
        self._guard = store.guard
        self._fences = store.fences
        self._rows = store.rows

    def new_handle(self) -> InMemoryOwner:
        """Another handle on the same store (same rows, same fences)."""
        handle = type(self).__new__(type(self))
        handle._attach(self._store)
        return handle

    def _fence(self, transaction_id: str) -> threading.Lock:
        with self._guard:
            return self._fences.setdefault(transaction_id, threading.Lock())

    def _artifact_fence(self, prefix: str) -> threading.Lock:
        with self._guard:
            return self._store.artifact_fences.setdefault(prefix, threading.Lock())

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        txn = validate_transaction_id(transaction_id)
        with self._fence(txn), self._artifact_fence(artifact_prefix(claim.source_id)):
            row = self._rows.get(txn)
            if row is not None and row.kind == "tombstone":
                raise ArtifactPublicationRejected(f"transaction {txn!r} is tombstoned")
            if row is not None:
                if (row.source_id, row.content_sha256) == (claim.source_id, claim.content_sha256):
                    return
                raise OwnerConflictError(f"transaction {txn!r} holds another reference")
            self._rows[txn] = _Row(
                kind="published",
                source_id=claim.source_id,
                content_sha256=claim.content_sha256,
                generation=1,
            )

    def remove(self, transaction_id: str) -> None:
        txn = validate_transaction_id(transaction_id)
        with self._fence(txn):
            row = self._rows.get(txn)
            if row is not None and row.kind == "tombstone":
                return
            self._write_tombstone(txn, 0 if row is None else row.generation)

    @contextmanager
    def inspect_fenced(self, transaction_id: str) -> Iterator[MemoryObservation]:
        txn = validate_transaction_id(transaction_id)
        with self._fence(txn):
            fence = _Fence()
            row = self._rows.get(txn)
            if row is None or row.kind == "tombstone":
                state, source_id, digest = ObservedState.ABSENT, None, None
            else:
                state, source_id, digest = (
                    ObservedState.PUBLISHED,
                    row.source_id,
                    row.content_sha256,
                )
            try:
                yield MemoryObservation(
                    transaction_id=txn,
                    state=state,
                    source_id=source_id,
                    content_sha256=digest,
                    generation=0 if row is None else row.generation,
                    sealed=row is not None and row.kind == "tombstone",
                    owner=self,
                    fence=fence,
                )
            finally:
                fence.open = False

    @contextmanager
    def census_fenced(self, source_ids: Sequence[str]) -> Iterator[Census]:
        """O9: the artifacts' locks, in name order, for the whole block."""
        prefixes = {source_id: artifact_prefix(source_id) for source_id in source_ids}
        with ExitStack() as held:
            for prefix in sorted(set(prefixes.values())):
                held.enter_context(self._artifact_fence(prefix))
            rows = list(self._rows.items())  # one step under the GIL: publishers may run
            visible = [
                (txn, row.source_id)
                for txn, row in rows
                if row.kind == "published" and row.source_id is not None
            ]
            yield {
                source_id: tuple(sorted(t for t, named in visible if named.startswith(prefix)))
                for source_id, prefix in prefixes.items()
            }

    def generation(self, transaction_id: str) -> int:
        """The current generation of an id (0 if never seen); for tests and audits."""
        row = self._rows.get(transaction_id)
        return 0 if row is None else row.generation

    # Called only from inside the fence of ``transaction_id``.
    def _cas_tombstone(self, transaction_id: str, observed: int) -> bool:
        """Tombstone if the id is still at ``observed``; never over a visible reference."""
        row = self._rows.get(transaction_id)
        current = 0 if row is None else row.generation
        if current != observed or (row is not None and row.kind == "published"):
            return False
        self._write_tombstone(transaction_id, current)
        return True

    def _write_tombstone(self, transaction_id: str, current: int) -> None:
        self._rows[transaction_id] = _Row(
            kind="tombstone", source_id=None, content_sha256=None, generation=current + 1
        )


class InMemoryHarness(OwnerHarness):
    """The conformance-kit harness of :class:`InMemoryOwner` (one store per instance)."""

    unsupported: ClassVar[Mapping[Capability, str]] = {
        Capability.RESTART: "the in-memory store is not durable: it models an owner that "
        "never crashes, so a restart would lose every row by design",
        Capability.OTHER_PROCESS: "the in-memory store lives in one process",
        Capability.FAULTS: "the in-memory store makes no store call that could fail",
        Capability.FAULT_PLAN: "the in-memory store makes no store call that could fail",
        Capability.POWER_LOSS: "the in-memory store keeps nothing on disk: a power cut "
        "would lose every row by design",
    }

    owner_class: type[InMemoryOwner] = InMemoryOwner
    """The adapter class to open (a subclass of :class:`InMemoryOwner` may be put here)."""

    shared_handles = True  # the adapter's docstring: one object may be shared by threads

    def advance_clock(self, seconds: float) -> None:
        """Nothing to do: the in-memory owner reads no clock."""

    def __init__(self, workdir: str) -> None:
        super().__init__(workdir)
        self._root = self.owner_class()

    def open_owner(self) -> InMemoryOwner:
        return self._root.new_handle()
