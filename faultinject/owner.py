"""A crashable owner: the in-memory reference owner with injectable faults.

The owner is another process than toolswap: a crash of the simulated disk
does not touch it.  It has its own faults, each armed for a number of calls:

* ``reject``           -- ``publish`` raises :class:`ArtifactPublicationRejected`
                          and writes nothing (an explicit, trustworthy "no").
* ``fail_before_write`` -- ``publish`` raises ``ConnectionError`` and writes nothing.
* ``lost_ack``         -- ``publish`` makes the reference durable, then raises
                          ``ConnectionError`` (the acknowledgement was lost).
* ``in_flight``        -- ``publish`` raises ``TimeoutError`` while the write is
                          still in flight; :meth:`CrashableOwner.crash` or
                          :meth:`CrashableOwner.deliver_in_flight` later lands it
                          (a tombstone refuses it) or loses it.
* ``lost_tombstone``   -- ``seal_absence`` writes a tombstone that the owner
                          loses in a crash before it became durable; the call
                          raises ``ConnectionError``.
* ``stale_seal``       -- ``seal_absence`` finds the generation moved: returns
                          ``False`` and writes nothing.
* ``unknown``          -- ``inspect_fenced`` yields an UNKNOWN observation.
* ``inspect_error``    -- ``inspect_fenced`` raises ``ConnectionError``.
* ``remove_error``     -- ``remove`` raises ``ConnectionError`` (nothing removed).
* ``remove_lost_ack``  -- ``remove`` removes durably, then raises ``ConnectionError``.

Rows that a call made durable stay durable; :meth:`CrashableOwner.crash`
(an owner restart) only decides the writes still in flight and releases the
fences.  Every visible publication is recorded in :attr:`CrashableOwner.history`
and checked by the optional ``before_publish`` hook (the explorer uses it for
S2: the PREPARED record must already be durable).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Literal

import attrs

from toolswap.domain import ArtifactRetentionClaim
from toolswap.owner import (
    ArtifactPublicationRejected,
    Census,
    ObservedState,
    OwnerConflictError,
    OwnerObservation,
    require_sealable,
)
from toolswap.owners.memory import InMemoryOwner, MemoryObservation

from .disk import Chooser

__all__ = ["CrashableOwner", "OwnerFault", "OWNER_FAULTS", "UnknownObservation"]

OwnerFault = Literal[
    "reject",
    "fail_before_write",
    "lost_ack",
    "in_flight",
    "lost_tombstone",
    "stale_seal",
    "unknown",
    "inspect_error",
    "remove_error",
    "remove_lost_ack",
]
OWNER_FAULTS: tuple[OwnerFault, ...] = (
    "reject",
    "fail_before_write",
    "lost_ack",
    "in_flight",
    "lost_tombstone",
    "stale_seal",
    "unknown",
    "inspect_error",
    "remove_error",
    "remove_lost_ack",
)


@attrs.frozen(kw_only=True)
class UnknownObservation:
    """The owner cannot tell (UNKNOWN); it must never be sealed."""

    transaction_id: str
    state: ObservedState = ObservedState.UNKNOWN
    source_id: str | None = None
    content_sha256: str | None = None
    generation: int = -1
    sealed: bool = False

    def seal_absence(self) -> bool:
        require_sealable(self)  # raises: an UNKNOWN observation is never sealable
        raise AssertionError("unreachable")  # pragma: no cover


class _SealingObservation:
    """An ABSENT, unsealed observation whose ``seal_absence`` may lose its tombstone."""

    def __init__(self, inner: MemoryObservation, owner: CrashableOwner) -> None:
        self._inner = inner
        self._owner = owner
        self.transaction_id = inner.transaction_id
        self.state = inner.state
        self.source_id = inner.source_id
        self.content_sha256 = inner.content_sha256
        self.generation = inner.generation
        self.sealed = inner.sealed

    def seal_absence(self) -> bool:
        require_sealable(self._inner)
        if self._owner._take("lost_tombstone"):
            self._owner.faults_fired.append("lost_tombstone")
            raise ConnectionError("owner crashed before the tombstone was durable")
        if self._owner._take("stale_seal"):
            self._owner.faults_fired.append("stale_seal")
            return False
        sealed = self._inner.seal_absence()
        if sealed:
            self._owner.history.append(("sealed", self.transaction_id))
        return sealed


class CrashableOwner:
    """An :class:`~toolswap.owner.ArtifactReferenceOwner` with faults (see the module rules)."""

    def __init__(
        self,
        inner: InMemoryOwner | None = None,
        *,
        before_publish: Callable[[str, ArtifactRetentionClaim], None] | None = None,
    ) -> None:
        self.inner = InMemoryOwner() if inner is None else inner
        self.before_publish = before_publish
        self._armed: dict[str, int] = {}
        self._in_flight: list[tuple[str, ArtifactRetentionClaim]] = []
        self.rejected: set[str] = set()
        self.history: list[tuple[str, str]] = []  # (event, transaction id)
        self.faults_fired: list[str] = []
        self.crash_count = 0

    # -- faults ----------------------------------------------------------------

    def arm(self, fault: OwnerFault, times: int = 1) -> None:
        if fault not in OWNER_FAULTS:
            raise ValueError(f"unknown owner fault {fault!r}")
        self._armed[fault] = self._armed.get(fault, 0) + times

    def heal(self) -> None:
        """Disarm every fault (the owner answers truthfully from now on)."""
        self._armed.clear()

    def _take(self, fault: str) -> bool:
        remaining = self._armed.get(fault, 0)
        if remaining <= 0:
            return False
        if remaining == 1:
            del self._armed[fault]
        else:
            self._armed[fault] = remaining - 1
        return True

    @property
    def in_flight(self) -> tuple[tuple[str, ArtifactRetentionClaim], ...]:
        return tuple(self._in_flight)

    def deliver_in_flight(self) -> None:
        """Land every write still in flight (a tombstone refuses it)."""
        pending, self._in_flight = self._in_flight, []
        for txn, claim in pending:
            self._write(txn, claim, late=True)

    def crash(self, choices: int | random.Random | Sequence[int] | Chooser = 0) -> None:
        """Restart the owner: each in-flight write lands or is lost; fences are released."""
        chooser = choices if isinstance(choices, Chooser) else Chooser(choices)
        pending, self._in_flight = self._in_flight, []
        for txn, claim in pending:
            if chooser.choose(2) == 1:
                self._write(txn, claim, late=True)
        self.inner._fences.clear()
        self.inner._store.artifact_fences.clear()
        self._armed.clear()
        self.crash_count += 1

    # -- state, for invariant checks ------------------------------------------

    def rows(self) -> dict[str, tuple[str, str | None, str | None, int]]:
        """Transaction id -> (kind, source id, digest, generation) of the durable rows."""
        return {
            txn: (row.kind, row.source_id, row.content_sha256, row.generation)
            for txn, row in self.inner._rows.items()
        }

    def visible(self) -> dict[str, tuple[str, str]]:
        """Published references: transaction id -> (source id, digest)."""
        out: dict[str, tuple[str, str]] = {}
        for txn, (kind, source, digest, _) in self.rows().items():
            if kind == "published" and source is not None and digest is not None:
                out[txn] = (source, digest)
        return out

    def tombstoned(self, transaction_id: str) -> bool:
        row = self.inner._rows.get(transaction_id)
        return row is not None and row.kind == "tombstone"

    # -- the owner protocol --------------------------------------------------------

    def _write(self, txn: str, claim: ArtifactRetentionClaim, *, late: bool = False) -> None:
        """Make the reference durable; a tombstone refuses (silently for a late write)."""
        if self.tombstoned(txn):
            self.history.append(("refused_late" if late else "refused", txn))
            if late:
                return
            self.rejected.add(txn)
            raise ArtifactPublicationRejected(f"transaction {txn!r} is tombstoned")
        if self.before_publish is not None and txn not in self.visible():
            self.before_publish(txn, claim)
        try:
            self.inner.publish(txn, claim)
        except OwnerConflictError:
            if not late:
                raise
            # Nobody waits for a late write: the owner refuses it and moves on
            # to the next one, as a real store applying a queue would.
            self.history.append(("conflict_late", txn))
            return
        self.history.append(("published_late" if late else "published", txn))

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        if self._take("reject"):
            self.faults_fired.append("reject")
            self.rejected.add(transaction_id)
            raise ArtifactPublicationRejected("owner refused before writing")
        if self._take("fail_before_write"):
            self.faults_fired.append("fail_before_write")
            raise ConnectionError("owner unreachable; nothing was written")
        if self._take("in_flight"):
            self.faults_fired.append("in_flight")
            self._in_flight.append((transaction_id, claim))
            raise TimeoutError("owner did not answer; the write is still in flight")
        self._write(transaction_id, claim)
        if self._take("lost_ack"):
            self.faults_fired.append("lost_ack")
            raise ConnectionError("the acknowledgement of a durable write was lost")

    def remove(self, transaction_id: str) -> None:
        if self._take("remove_error"):
            self.faults_fired.append("remove_error")
            raise ConnectionError("owner unreachable; nothing was removed")
        self.inner.remove(transaction_id)
        self.history.append(("removed", transaction_id))
        if self._take("remove_lost_ack"):
            self.faults_fired.append("remove_lost_ack")
            raise ConnectionError("the acknowledgement of a durable removal was lost")

    @contextmanager
    def census_fenced(self, source_ids: Sequence[str]) -> Iterator[Census]:
        """O9, as the in-memory store keeps it (the census has no faults of its own)."""
        with self.inner.census_fenced(source_ids) as census:
            yield census

    @contextmanager
    def inspect_fenced(self, transaction_id: str) -> Iterator[OwnerObservation]:
        if self._take("inspect_error"):
            self.faults_fired.append("inspect_error")
            raise ConnectionError("owner unreachable")
        if self._take("unknown"):
            self.faults_fired.append("unknown")
            yield UnknownObservation(transaction_id=transaction_id)
            return
        with self.inner.inspect_fenced(transaction_id) as observation:
            if observation.state is ObservedState.ABSENT and not observation.sealed:
                # the journal seals inside this same fence
                yield _SealingObservation(inner=observation, owner=self)
            else:
                yield observation
