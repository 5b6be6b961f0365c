"""Broken SQLite adapters wrong only when a store call in the middle of an operation fails.

A fault on an operation's first statement (``BEGIN``) or its ``COMMIT`` finds
nothing wrong with them: each mishandles a failure, a lost answer or damaged
data from one statement in between.  The last harness is correct in its
adapter but wrong in itself: its fault hook is not where the store calls are.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from toolswap.domain import ArtifactRetentionClaim
from toolswap.errors import UsageError
from toolswap.journal_format import validate_transaction_id
from toolswap.owner import ArtifactPublicationRejected, OwnerConflictError, require_sealable
from toolswap.owners.sqlite import TABLE, SQLiteHarness, SQLiteOwner, _store_errors
from toolswap.testing import StoreFault
from toolswap.testing.faults import FaultPlan

from ._base import Observation, cas_tombstone, held_fence, insert_published, read_row, tombstone_now

__all__ = [
    "FaultHookAroundMethodsHarness",
    "MidReadRejectsHarness",
    "RemoveSwallowsWriteErrorHarness",
    "SealIgnoresCommitErrorHarness",
    "TornRowIsAbsentHarness",
]

_log = logging.getLogger(__name__)


class TornRowIsAbsentOwner(SQLiteOwner):
    """Breaks O8 "When the store cannot answer with certainty, say UNKNOWN ... never ABSENT".

    The row parser is forgiving: a row whose generation does not parse is
    taken for no row ("a half-written row never happened").  A torn read of a
    published id then answers ABSENT, and the journal seals and aborts a
    lease whose reference exists.
    """

    @staticmethod
    def _row(conn: sqlite3.Connection, txn: str) -> tuple[str, str | None, str | None, int] | None:
        raw = conn.execute(
            f"SELECT kind, source_id, content_sha256, generation FROM {TABLE} "
            "WHERE transaction_id = ?",
            (txn,),
        ).fetchone()
        if raw is None:
            return None
        try:
            return (str(raw[0]), raw[1], raw[2], int(raw[3]))
        except (TypeError, ValueError):
            return None


class TornRowIsAbsentHarness(SQLiteHarness):
    owner_class = TornRowIsAbsentOwner


class MidReadRejectsOwner(SQLiteOwner):
    """Breaks O2 "every other exception ... means 'maybe written'": never a rejection.

    Errors of ``BEGIN`` and ``COMMIT`` propagate, but a failing read of the
    id is answered with ArtifactPublicationRejected ("we cannot confirm the
    id is free, so we refuse").  Refusing is a promise that nothing will be
    written; a read that failed cannot back it, and only a tombstone may.
    """

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        txn = validate_transaction_id(transaction_id)
        with self._transaction("publishing a reference") as conn:
            try:
                row = read_row(conn, txn)
            except sqlite3.Error:
                raise ArtifactPublicationRejected("cannot confirm the id is free") from None
            if row is not None and row[0] == "tombstone":
                raise ArtifactPublicationRejected(f"transaction {txn!r} is tombstoned")
            if row is not None:
                if (row[1], row[2]) == (claim.source_id, claim.content_sha256):
                    return
                raise OwnerConflictError(f"transaction {txn!r} holds another reference")
            insert_published(conn, txn, claim)


class MidReadRejectsHarness(SQLiteHarness):
    owner_class = MidReadRejectsOwner


class RemoveSwallowsWriteErrorOwner(SQLiteOwner):
    """Breaks O4 "``remove`` returns normally only once ... a tombstone for it is durable".

    The tombstone write is "best effort inside the transaction": its error is
    logged and the transaction committed anyway ("the commit will tell us if
    the store is really down").  When only the write fails, remove returns
    normally with the reference still visible.
    """

    def remove(self, transaction_id: str) -> None:
        txn = validate_transaction_id(transaction_id)
        with self._transaction("removing a reference") as conn:
            row = read_row(conn, txn)
            if row is not None and row[0] == "tombstone":
                return
            try:
                tombstone_now(conn, txn)
            except sqlite3.Error:
                _log.warning("the tombstone write failed; committing anyway")


class RemoveSwallowsWriteErrorHarness(SQLiteHarness):
    owner_class = RemoveSwallowsWriteErrorOwner


def _seal_ignoring_commit(
    conn: sqlite3.Connection, observation: Observation, is_open: bool
) -> bool:
    require_sealable(observation)
    if not is_open or not conn.in_transaction:
        raise UsageError("seal_absence is allowed only inside its inspect_fenced block")
    if not cas_tombstone(conn, observation.transaction_id, observation.generation):
        return False
    try:
        conn.execute("COMMIT")
    except sqlite3.Error:
        _log.warning("the seal's commit failed; the fence's own end will retry it")
    if not conn.in_transaction:
        conn.execute("BEGIN IMMEDIATE")
    return True


class SealIgnoresCommitErrorOwner(SQLiteOwner):
    """Breaks O6 "it returns ``True`` only once the tombstone is durable".

    The seal's ``COMMIT`` error is logged, not raised, in the belief that the
    fence's end commits what is left.  The fence ends with a rollback: the
    seal said True, the journal appended ABORTED, and no tombstone exists.
    """

    @contextmanager
    def inspect_fenced(self, transaction_id: str) -> Iterator[Observation]:  # type: ignore[override]
        with held_fence(self, transaction_id, seal=_seal_ignoring_commit) as observation:
            yield observation


class SealIgnoresCommitErrorHarness(SQLiteHarness):
    owner_class = SealIgnoresCommitErrorOwner


class _HookedOwner(SQLiteOwner):
    """The reference adapter; the harness below consults its fault plan around ``publish``."""

    plan: FaultPlan

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        step = self.plan.step(completes=True)
        if step.fails:
            with _store_errors("publishing a reference"):
                raise sqlite3.OperationalError("injected")
        super().publish(transaction_id, claim)


class FaultHookAroundMethodsHarness(SQLiteHarness):
    """A harness defect: its fault plan is consulted around the adapter's ``publish``, not
    under the adapter at its store calls, so a fence or a remove never meets a fault.

    The kit sees armed faults that never fire, and an operation that makes no
    store call the plan saw, and says so.
    """

    def open_owner(self) -> SQLiteOwner:
        owner = _HookedOwner(self.path)
        owner.plan = FaultPlan()
        return owner

    def fault_plan(self, owner: Any) -> FaultPlan:
        plan: FaultPlan = owner.plan
        return plan

    def inject_fault(self, owner: Any, fault: StoreFault) -> None:
        owner.plan.arm(fault)
