"""Broken SQLite adapters that mishandle a failing store: wrong only under a store fault.

Without a fault every one of them behaves exactly like the reference adapter.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from toolswap.domain import ArtifactRetentionClaim
from toolswap.errors import OwnerStoreError, UsageError
from toolswap.journal_format import validate_transaction_id
from toolswap.owner import ArtifactPublicationRejected, OwnerConflictError
from toolswap.owners.sqlite import SQLiteHarness, SQLiteOwner, _store_errors

from ._base import Observation, observation_of, read_row, reference_seal

__all__ = [
    "BestEffortRemoveHarness",
    "BusyPublishQueuedHarness",
    "FailedReadIsAbsentHarness",
    "PathInErrorsHarness",
    "RejectOnStoreErrorHarness",
]

_log = logging.getLogger(__name__)


class RejectOnStoreErrorOwner(SQLiteOwner):
    """Breaks O2 "every other exception (timeouts, lost connections, ...) means 'maybe
    written'": never :class:`ArtifactPublicationRejected`.

    The author maps every failure of the store to "publication refused" so
    that callers handle one exception: ``except Exception: raise
    ArtifactPublicationRejected(...)``.  A timed-out or unacknowledged write
    that did land is then aborted by the journal while the reference exists.
    """

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        try:
            super().publish(transaction_id, claim)
        except (ArtifactPublicationRejected, OwnerConflictError, UsageError):
            raise
        except Exception as exc:
            raise ArtifactPublicationRejected("the owner store refused the publication") from exc


class RejectOnStoreErrorHarness(SQLiteHarness):
    owner_class = RejectOnStoreErrorOwner


class FailedReadIsAbsentOwner(SQLiteOwner):
    """Breaks O8 "In doubt, answer UNKNOWN, never ABSENT".

    The fence's read goes through a get-or-none helper with a broad
    ``except sqlite3.Error: return None`` ("a row we cannot read is a row we
    do not have").  When the store fails, a published id is reported ABSENT,
    and the journal would seal and abort a lease whose reference exists.
    """

    @contextmanager
    def inspect_fenced(self, transaction_id: str) -> Iterator[Observation]:  # type: ignore[override]
        txn = validate_transaction_id(transaction_id)
        conn = self._connection()
        try:
            conn.execute("BEGIN IMMEDIATE")
            row = read_row(conn, txn)
        except sqlite3.Error:
            row = None
        is_open = [True]

        def seal(observation: Observation) -> bool:
            with _store_errors("sealing an absence"):
                return reference_seal(conn, observation, is_open[0])

        try:
            yield observation_of(txn, row, seal)
        finally:
            is_open[0] = False
            if conn.in_transaction:
                with _store_errors("releasing the fence"):
                    conn.execute("ROLLBACK")


class FailedReadIsAbsentHarness(SQLiteHarness):
    owner_class = FailedReadIsAbsentOwner


class BusyPublishQueuedOwner(SQLiteOwner):
    """Breaks O1 "returns normally only once a reference ... is durable and visible".

    When the store answers "database is locked" the author queues the publish
    for the next call of this handle and returns ("the store is just busy; the
    write will go through").  The caller is told the reference exists while
    nothing was written -- and the retry never comes if the handle is dropped.
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        self._retry: list[tuple[str, ArtifactRetentionClaim]] = []
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        retry, self._retry = self._retry, []
        for queued in retry:
            super().publish(*queued)
        try:
            super().publish(transaction_id, claim)
        except OwnerStoreError as exc:
            if "locked" not in str(exc.__cause__):
                raise
            _log.info("store busy; publish of %s queued", transaction_id)
            self._retry.append((transaction_id, claim))


class BusyPublishQueuedHarness(SQLiteHarness):
    owner_class = BusyPublishQueuedOwner


class BestEffortRemoveOwner(SQLiteOwner):
    """Breaks O4 "returns normally only once no reference is visible ... An exception means
    'maybe removed'".

    The author treats removal as best effort: a failure of the store is
    logged ("the sweeper will retry") and ``remove`` returns.  The journal
    then records the reference as released while it is still there.
    """

    def remove(self, transaction_id: str) -> None:
        try:
            super().remove(transaction_id)
        except OwnerStoreError:
            _log.warning("remove of %s failed; left for the sweeper", transaction_id)


class BestEffortRemoveHarness(SQLiteHarness):
    owner_class = BestEffortRemoveOwner


class PathInErrorsOwner(SQLiteOwner):
    """Breaks O7 "error messages carry no ... file path or credential".

    ``sqlite3`` errors do not say which database failed, so the author adds
    the database path to every store error "for the operator".  The path (and
    with it the user's folder layout) ends up in reports and logs.
    """

    @contextmanager
    def _transaction(self, doing: str) -> Iterator[sqlite3.Connection]:
        try:
            with super()._transaction(doing) as conn:
                yield conn
        except OwnerStoreError as exc:
            raise OwnerStoreError(f"{exc} (database {self._path})") from exc


class PathInErrorsHarness(SQLiteHarness):
    owner_class = PathInErrorsOwner
