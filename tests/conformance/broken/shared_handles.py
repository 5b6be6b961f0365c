"""Broken adapters whose docstring says one handle may be shared by threads, wrongly.

Each is correct as long as every thread has its own handle: only the second
thread of one handle gets through a fence the first thread of that handle
holds.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from toolswap.errors import OwnerStoreError
from toolswap.owners.memory import InMemoryHarness, InMemoryOwner
from toolswap.owners.sqlite import SQLiteHarness, SQLiteOwner, _sqlite_reason, _store_errors

__all__ = ["HandleReentrantFenceHarness", "SavepointInFenceHarness"]


class HandleReentrantFenceOwner(InMemoryOwner):
    """Breaks O5 "no ``publish`` ... by any other caller (thread, process or host) takes effect".

    "One object may be shared by threads", says its docstring.  To let the
    journal call the owner from inside its own fence without deadlocking,
    the author remembers which ids this handle holds a fence on and skips
    the lock for them -- but "this handle" is not "this caller": another
    thread with the same handle walks straight through the fence.
    """

    def _attach(self, store: Any) -> None:
        super()._attach(store)
        self._holding: set[str] = set()

    def _fence(self, transaction_id: str) -> Any:
        if transaction_id in self._holding:
            return threading.Lock()  # "we hold it already"
        return super()._fence(transaction_id)

    @contextmanager
    def inspect_fenced(self, transaction_id: str) -> Iterator[Any]:
        with super().inspect_fenced(transaction_id) as seen:
            self._holding.add(transaction_id)
            try:
                yield seen
            finally:
                self._holding.discard(transaction_id)


class HandleReentrantFenceHarness(InMemoryHarness):
    owner_class = HandleReentrantFenceOwner


class SavepointInFenceOwner(SQLiteOwner):
    """Breaks O5 "no ``publish`` ... by any other caller ... takes effect", across threads.

    The author keeps one connection per handle ("connections are expensive")
    and makes every write a savepoint when a transaction is already open, so
    that a write inside the handle's own fence nests instead of failing.  A
    second thread's publish then runs inside the first thread's fence: it
    returns normally, and the fence's rollback throws it away.
    """

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self, "_only", None)
        if conn is None:
            conn = super()._connection()
            self._only = conn
        return conn

    def close(self) -> None:
        self._only = None
        super().close()

    @contextmanager
    def _transaction(self, doing: str) -> Iterator[sqlite3.Connection]:
        conn = self._connection()
        if not conn.in_transaction:
            with super()._transaction(doing) as fresh:
                yield fresh
            return
        with _store_errors(doing):
            conn.execute("SAVEPOINT nested")
        try:
            yield conn
        except BaseException:
            with _store_errors(f"rolling back {doing}"):
                conn.execute("ROLLBACK TO nested")
            raise
        try:
            conn.execute("RELEASE nested")
        except sqlite3.Error as exc:
            raise OwnerStoreError(f"{doing} failed ({_sqlite_reason(exc)})") from exc


class SavepointInFenceHarness(SQLiteHarness):
    owner_class = SavepointInFenceOwner
