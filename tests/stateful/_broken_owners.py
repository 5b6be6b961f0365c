"""Deliberately broken SQLite adapters for the deep harnesses (explorer and machine).

Each keeps every answer a caller sees plausible and breaks what only the
store's durable state shows, so a harness that catches it must have seen it
through the protocol (fences), not through the adapter's rows:

* :class:`RemoveDeletesHarness` -- ``remove`` deletes the row instead of
  writing a tombstone (O4: a late replay could resurrect the reference);
* :class:`SealForgetsHarness` -- ``seal_absence`` answers ``True`` without
  writing the tombstone (O6);
* :class:`RejectAfterWriteHarness` -- ``publish`` writes the row, then raises
  :class:`ArtifactPublicationRejected` (O2: a rejection means nothing was written).

Each harness counts its ``destroy()`` calls, so a test can check the deep
harnesses clean every store up.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

from toolswap.domain import ArtifactRetentionClaim
from toolswap.owner import ArtifactPublicationRejected, ObservedState, require_sealable
from toolswap.owners.sqlite import TABLE, SQLiteHarness, SQLiteOwner


class _RemoveDeletes(SQLiteOwner):
    def remove(self, transaction_id: str) -> None:
        with self._transaction("removing a reference") as conn:
            conn.execute(f"DELETE FROM {TABLE} WHERE transaction_id = ?", (transaction_id,))


class _ForgetfulObservation:
    def __init__(self, inner: Any) -> None:
        self.transaction_id = inner.transaction_id
        self.state: ObservedState = inner.state
        self.source_id = inner.source_id
        self.content_sha256 = inner.content_sha256
        self.generation = inner.generation
        self.sealed = inner.sealed

    def seal_absence(self) -> bool:
        require_sealable(self)
        return True  # claims a durable tombstone it never wrote


class _SealForgets(SQLiteOwner):
    @contextmanager
    def inspect_fenced(self, transaction_id: str) -> Iterator[Any]:
        with super().inspect_fenced(transaction_id) as observation:
            yield _ForgetfulObservation(observation)


class _RejectAfterWrite(SQLiteOwner):
    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        super().publish(transaction_id, claim)
        raise ArtifactPublicationRejected("the store refused the reference")  # but it is written


class _Broken(SQLiteHarness):
    """An SQLite harness whose handles are of the broken class (faults still work)."""

    broken: ClassVar[type[SQLiteOwner]]
    destroyed: ClassVar[int] = 0

    def open_owner(self) -> SQLiteOwner:
        owner = super().open_owner()
        owner.__class__ = self.broken  # same state, broken behaviour
        return owner

    def destroy(self) -> None:
        type(self).destroyed += 1
        super().destroy()


class RemoveDeletesHarness(_Broken):
    broken = _RemoveDeletes


class SealForgetsHarness(_Broken):
    broken = _SealForgets


class RejectAfterWriteHarness(_Broken):
    broken = _RejectAfterWrite


class CountingSQLiteHarness(_Broken):
    """The correct SQLite owner, counting ``destroy()`` calls."""

    broken = SQLiteOwner
