"""A durable owner on the standard library's ``sqlite3`` (the embedded default).

Mapping of the owner promises (see :mod:`toolswap.owner`) onto SQLite:

* Durability: WAL mode with ``synchronous=FULL``, so every COMMIT is on disk
  when it returns.  References and tombstones survive close and reopen.
* Fence: ``inspect_fenced`` runs inside ``BEGIN IMMEDIATE``, which holds the
  database's write lock; no other connection (thread or process) can publish,
  remove or seal anything until the block ends.  (The fence is database-wide,
  which is coarse but exactly linearizable.)
* Tombstone: a compare-and-set on the observed generation inside the fence:
  ``UPDATE ... WHERE transaction_id = ? AND generation = ?`` for a known row,
  ``INSERT OR IGNORE`` for a never-seen id (generation 0, so the CAS fails if
  any row appeared).  It is committed at once, so it is durable before the
  journal appends ABORTED (S3); the write lock is then taken again for the
  rest of the block.  (In the short gap the id cannot change: a tombstone is
  final.)  A tombstoned id refuses ``publish`` with
  :class:`~toolswap.owner.ArtifactPublicationRejected`, forever.
* Stable publication id: the transaction id is the primary key.
* Census (O9): ``census_fenced`` holds ``BEGIN IMMEDIATE`` for the whole
  block, like the fence, and reads the visible references whose source id
  starts with each artifact's prefix; no publish of anything lands meanwhile.
* Errors of the database are :class:`~toolswap.errors.OwnerStoreError`
  (``__cause__`` holds the ``sqlite3`` error): "maybe done", never "not written".

Each thread (and each process) uses its own connection, so one object may be
shared by threads; several processes may share one file.  :class:`SQLiteHarness`
puts it through the conformance kit.  The database is the
owner's store, not session evidence, so it is not routed through the toolswap
file-system seam.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import attrs

from ..domain import ArtifactRetentionClaim, artifact_prefix
from ..errors import OwnerStoreError, UsageError
from ..fs import REAL_FS
from ..journal_format import validate_transaction_id
from ..owner import (
    ArtifactPublicationRejected,
    Census,
    ObservedState,
    OwnerConflictError,
    require_sealable,
)
from ..testing.faults import FaultPlan
from ..testing.harness import OwnerHarness, StoreFault

__all__ = ["SCHEMA_VERSION", "SQLiteHarness", "SQLiteOwner", "SQLiteObservation", "TABLE"]

TABLE = "toolswap_references"
SCHEMA_VERSION = 1
"""Kept in ``PRAGMA user_version``; a database of a newer version is refused."""

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    transaction_id TEXT PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('published', 'tombstone')),
    source_id TEXT,
    content_sha256 TEXT,
    reference_count INTEGER,
    generation INTEGER NOT NULL CHECK (generation >= 1)
)
"""


class _Fence:
    """One ``inspect_fenced`` block; its observation may seal only while it is open."""

    __slots__ = ("open",)

    def __init__(self) -> None:
        self.open = True


@contextmanager
def _store_errors(doing: str) -> Iterator[None]:
    """Turn a ``sqlite3`` error into :class:`OwnerStoreError` (no path, no SQL)."""
    try:
        yield
    except sqlite3.Error as exc:
        raise OwnerStoreError(
            f"SQLite owner: {doing} failed ({type(exc).__name__}: {_sqlite_reason(exc)})"
        ) from exc


def _sqlite_reason(exc: sqlite3.Error) -> str:
    # sqlite3 messages name the failure ("database is locked", "disk I/O error"),
    # never a file name; keep a fixed, short form anyway.
    name = getattr(exc, "sqlite_errorname", None)
    return str(name) if name else "sqlite error"


def _create_private(path: str) -> None:
    """Create a missing database file as mode 0600, like every session file.

    ``sqlite3.connect`` would create it with the umask's mode (often 0644),
    readable by every local user; SQLite gives its ``-wal`` and ``-shm`` files
    the database file's mode, so creating this one first covers them too.
    An existing file is left as it is.
    """
    try:
        REAL_FS.close(REAL_FS.create_exclusive(path, 0o600))
    except FileExistsError:
        return
    except OSError as exc:
        raise OwnerStoreError(
            f"cannot create the SQLite owner database ({exc.strerror or type(exc).__name__})"
        ) from exc


@attrs.frozen(kw_only=True)
class SQLiteObservation:
    """An observation of :class:`SQLiteOwner`, valid inside its fence only."""

    transaction_id: str
    state: ObservedState
    source_id: str | None
    content_sha256: str | None
    generation: int
    sealed: bool
    _connection: sqlite3.Connection = attrs.field(repr=False, eq=False, alias="connection")
    _fence: _Fence = attrs.field(repr=False, eq=False, alias="fence")

    def seal_absence(self) -> bool:
        require_sealable(self)
        conn = self._connection
        if not self._fence.open or not conn.in_transaction:
            raise UsageError("seal_absence is allowed only inside its inspect_fenced block")
        with _store_errors("sealing an absence"):
            if self.generation == 0:
                cursor = conn.execute(
                    f"INSERT OR IGNORE INTO {TABLE} (transaction_id, kind, generation) "
                    "VALUES (?, 'tombstone', 1)",
                    (self.transaction_id,),
                )
            else:  # never tombstones a visible reference, whatever the observation says
                cursor = conn.execute(
                    f"UPDATE {TABLE} SET kind = 'tombstone', source_id = NULL, "
                    "content_sha256 = NULL, reference_count = NULL, "
                    "generation = generation + 1 "
                    "WHERE transaction_id = ? AND generation = ? AND kind <> 'published'",
                    (self.transaction_id, self.generation),
                )
            if cursor.rowcount != 1:
                return False
            conn.execute("COMMIT")  # durable now (S3); then take the fence again
            conn.execute("BEGIN IMMEDIATE")
        return True


class SQLiteOwner:
    """A durable owner in one SQLite database file; safe across threads and processes."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = True,
        timeout: float = 30.0,
        connection_factory: type[sqlite3.Connection] = sqlite3.Connection,
    ) -> None:
        """Open (``create=True``: and create) the owner database at ``path``.

        ``connection_factory`` is passed to :func:`sqlite3.connect` as its
        ``factory``: a seam for tests that make the store itself fail.
        """
        self._path = os.fspath(path)
        self._factory = connection_factory
        self.previous_version = SCHEMA_VERSION
        """The schema version the database had before this object opened it (0: new)."""
        if self._path in {"", ":memory:"}:  # a private, per-connection database
            raise UsageError("the SQLite owner needs a database file path (it must be durable)")
        self._timeout = timeout
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._guard = threading.Lock()
        if not create and not os.path.isfile(self._path):
            raise UsageError("the SQLite owner database does not exist (or is not a regular file)")
        if create:
            _create_private(self._path)
        conn = self._connection()
        try:
            with _store_errors("opening the database"):
                version = int(conn.execute("PRAGMA user_version").fetchone()[0])
                if version > SCHEMA_VERSION:
                    raise UsageError(
                        f"the SQLite owner database has schema version {version}; this "
                        f"toolswap knows version {SCHEMA_VERSION} (upgrade toolswap)"
                    )
                if create:
                    exists = self._has_table(conn)
                    self.previous_version = version if version or not exists else 1
                    if exists and version == SCHEMA_VERSION:
                        return  # nothing to write: no lock taken (a fence may be held)
                    with self._transaction("creating the schema") as created:
                        created.execute(_SCHEMA)
                        created.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                    return
            if not self._has_table(conn):
                raise UsageError(f"the SQLite database has no {TABLE} table")
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _has_table(conn: sqlite3.Connection) -> bool:
        row = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (TABLE,)
        ).fetchone()
        return row is not None

    # -- connections ----------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None and getattr(self._local, "pid", None) == os.getpid():
            return conn
        conn = None  # never use a connection inherited over fork()
        try:
            conn = sqlite3.connect(
                self._path,
                timeout=self._timeout,
                isolation_level=None,
                check_same_thread=False,
                factory=self._factory,
            )
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() not in {"wal", "memory"}:
                conn.execute("PRAGMA journal_mode=DELETE")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute(f"PRAGMA busy_timeout={int(self._timeout * 1000)}")
        except sqlite3.Error as exc:
            if conn is not None:
                conn.close()
            raise OwnerStoreError(
                f"cannot open the SQLite owner ({type(exc).__name__}: {_sqlite_reason(exc)})"
            ) from exc
        self._local.conn = conn
        self._local.pid = os.getpid()
        with self._guard:
            self._all.append(conn)
        return conn

    def close(self) -> None:
        """Close every connection this object opened."""
        with self._guard:
            connections, self._all = self._all, []
        for conn in connections:
            conn.close()
        self._local = threading.local()

    def __enter__(self) -> SQLiteOwner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _transaction(self, doing: str) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` (the database's write lock) ... ``COMMIT``; rollback on error."""
        conn = self._connection()
        with _store_errors(doing):
            conn.execute("BEGIN IMMEDIATE")
        try:
            with _store_errors(doing):
                yield conn
        except BaseException:
            if conn.in_transaction:
                with _store_errors(f"rolling back {doing}"):
                    conn.execute("ROLLBACK")
            raise
        with _store_errors(doing):
            conn.execute("COMMIT")

    @staticmethod
    def _row(conn: sqlite3.Connection, txn: str) -> tuple[str, str | None, str | None, int] | None:
        row = conn.execute(
            f"SELECT kind, source_id, content_sha256, generation FROM {TABLE} "
            "WHERE transaction_id = ?",
            (txn,),
        ).fetchone()
        if row is None:
            return None
        return (str(row[0]), row[1], row[2], int(row[3]))

    # -- the owner protocol ---------------------------------------------------

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        txn = validate_transaction_id(transaction_id)
        with self._transaction("publishing a reference") as conn:
            row = self._row(conn, txn)
            if row is not None and row[0] == "tombstone":
                raise ArtifactPublicationRejected(f"transaction {txn!r} is tombstoned")
            if row is not None:
                if (row[1], row[2]) == (claim.source_id, claim.content_sha256):
                    return
                raise OwnerConflictError(f"transaction {txn!r} holds another reference")
            conn.execute(
                f"INSERT INTO {TABLE} (transaction_id, kind, source_id, content_sha256, "
                "reference_count, generation) VALUES (?, 'published', ?, ?, ?, 1)",
                (txn, claim.source_id, claim.content_sha256, claim.reference_count),
            )

    def remove(self, transaction_id: str) -> None:
        txn = validate_transaction_id(transaction_id)
        with self._transaction("removing a reference") as conn:
            row = self._row(conn, txn)
            if row is None:
                conn.execute(
                    f"INSERT INTO {TABLE} (transaction_id, kind, generation) "
                    "VALUES (?, 'tombstone', 1)",
                    (txn,),
                )
            elif row[0] != "tombstone":
                conn.execute(
                    f"UPDATE {TABLE} SET kind = 'tombstone', source_id = NULL, "
                    "content_sha256 = NULL, reference_count = NULL, "
                    "generation = generation + 1 WHERE transaction_id = ?",
                    (txn,),
                )

    @contextmanager
    def inspect_fenced(self, transaction_id: str) -> Iterator[SQLiteObservation]:
        """The fence is ``BEGIN IMMEDIATE`` held for the whole block (database-wide).

        The block ends with ``ROLLBACK``: it reads only, and a seal commits itself.
        """
        txn = validate_transaction_id(transaction_id)
        conn = self._connection()
        with _store_errors("taking the fence"):
            conn.execute("BEGIN IMMEDIATE")
        fence = _Fence()
        try:
            with _store_errors("inspecting a reference"):
                row = self._row(conn, txn)
            if row is None or row[0] == "tombstone":
                state, source_id, digest = ObservedState.ABSENT, None, None
            else:
                state, source_id, digest = ObservedState.PUBLISHED, row[1], row[2]
            yield SQLiteObservation(
                transaction_id=txn,
                state=state,
                source_id=source_id,
                content_sha256=digest,
                generation=0 if row is None else row[3],
                sealed=row is not None and row[0] == "tombstone",
                connection=conn,
                fence=fence,
            )
        finally:
            fence.open = False
            if conn.in_transaction:
                with _store_errors("releasing the fence"):
                    conn.execute("ROLLBACK")

    @contextmanager
    def census_fenced(self, source_ids: Sequence[str]) -> Iterator[Census]:
        """O9: ``BEGIN IMMEDIATE`` (database-wide) for the block; ends with ``ROLLBACK``."""
        prefixes = {source_id: artifact_prefix(source_id) for source_id in source_ids}
        conn = self._connection()
        with _store_errors("taking the census fence"):
            conn.execute("BEGIN IMMEDIATE")
        try:
            with _store_errors("counting references"):
                census = _census(conn, prefixes)
            yield census
        finally:
            if conn.in_transaction:
                with _store_errors("releasing the census fence"):
                    conn.execute("ROLLBACK")

    def generation(self, transaction_id: str) -> int:
        """The current generation of an id (0 if never seen); for tests and audits."""
        with _store_errors("reading a generation"):
            row = self._row(self._connection(), transaction_id)
        return 0 if row is None else row[3]


def _census(conn: sqlite3.Connection, prefixes: Mapping[str, str]) -> Census:
    # substr(), not LIKE: a prefix holds '_' and '.', which LIKE would read as patterns
    found: dict[str, tuple[str, ...]] = {}
    for source_id, prefix in prefixes.items():
        rows = conn.execute(
            f"SELECT transaction_id FROM {TABLE} WHERE kind = 'published' "
            "AND substr(source_id, 1, ?) = ? ORDER BY transaction_id",
            (len(prefix), prefix),
        ).fetchall()
        found[source_id] = tuple(str(row[0]) for row in rows)
    return found


class _FaultableConnection(sqlite3.Connection):
    """A connection whose statements consult the handle's fault plan (a subclass per handle).

    Every statement is one store call: a ``SELECT`` is a read, a ``COMMIT``
    completes its operation.
    """

    plan: FaultPlan

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        word = sql.lstrip()[:6].upper()
        step = self.plan.step(reads=word == "SELECT", completes=word == "COMMIT")
        if step.fault is StoreFault.TIMEOUT:
            raise sqlite3.OperationalError("database is locked")
        if step.fails:
            raise sqlite3.OperationalError("unable to open database file")
        cursor = super().execute(sql, parameters)
        if step.lost_ack:  # durable first, then the answer is lost
            raise sqlite3.OperationalError("disk I/O error")
        if step.corrupt:
            return _TornCursor(cursor)  # type: ignore[return-value]
        return cursor


class _TornCursor:
    """What a torn page reads as: rows whose every column is bytes no schema allows."""

    def __init__(self, cursor: sqlite3.Cursor) -> None:
        self._width = len(cursor.description or ()) or 1
        cursor.fetchall()

    def _row(self) -> tuple[str, ...]:
        return ("\x00torn\ufffd",) * self._width

    def fetchone(self) -> tuple[str, ...]:
        return self._row()

    def fetchall(self) -> list[tuple[str, ...]]:
        return [self._row()]


class SQLiteHarness(OwnerHarness):
    """The conformance-kit harness of :class:`SQLiteOwner`: one database file per work folder.

    A restart closes every connection (the kit closes every handle first) and
    the next handle reopens the file.  Every SQLite statement of a handle
    consults its fault plan: a fault fails a statement (``lost_ack``: it
    succeeds, then reports an error; by default on the next ``COMMIT``),
    delays it, or tears the rows a ``SELECT`` returns.  SQLite calls have no
    time-out of their own (the 30 s busy time-out only bounds the wait for the
    write lock), so ``store_timeout`` stays unset.
    """

    owner_class: type[SQLiteOwner] = SQLiteOwner
    """The adapter class to open (a subclass of :class:`SQLiteOwner` may be put here)."""

    shared_handles = True  # the adapter's docstring: one object may be shared by threads

    def __init__(self, workdir: str) -> None:
        super().__init__(workdir)
        self.path = os.path.join(self.workdir, "owner.db")
        self._faults: dict[int, FaultPlan] = {}

    def open_owner(self) -> SQLiteOwner:
        plan = FaultPlan()
        factory = type("_HandleConnection", (_FaultableConnection,), {"plan": plan})
        owner = self.owner_class(self.path, connection_factory=factory)
        self._faults[id(owner)] = plan
        return owner

    def close_owner(self, owner: object) -> None:
        self._faults.pop(id(owner), None)
        super().close_owner(owner)  # type: ignore[arg-type]

    def fault_plan(self, owner: object) -> FaultPlan:
        return self._faults[id(owner)]

    def advance_clock(self, seconds: float) -> None:
        """Nothing to do: neither SQLite nor the adapter reads a clock."""

    def restart_store(self) -> None:
        # Every handle is closed by now; nothing of SQLite outlives its
        # connections, so the next handle reopens the file from disk.
        return None

    def restart_after_power_cut(self) -> None:
        # The database, its WAL and its shared-memory index are all in the work
        # folder; SQLite recovers from them when the next handle opens the file.
        return None

    def inject_fault(self, owner: object, fault: StoreFault) -> None:
        self._faults[id(owner)].arm(fault)

    def secrets(self) -> Sequence[str]:
        return (self.path, self.workdir)
