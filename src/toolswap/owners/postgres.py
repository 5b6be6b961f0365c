"""A PostgreSQL owner: one Memory store shared by several hosts (driver: psycopg 3).

Mapping of the owner promises (see :mod:`toolswap.owner`) onto PostgreSQL;
``docs/postgres.md`` says how to deploy it and what breaks it.

* **Fence (O5).**  ``inspect_fenced`` takes a *session-level* advisory lock on
  a 64-bit key derived from the schema and the transaction id, on a
  connection of its own, and holds it for the whole block.  ``publish``,
  ``remove`` and the seal take the *transaction-scoped* advisory lock on the
  same key before they read or write, so they wait while a fence is held, in
  this process or on another host.  (A row lock would not do: ``SELECT ... FOR
  UPDATE`` on an absent row locks nothing.)  Two ids whose keys collide only
  wait for each other; correctness never depends on the key being unique.
* **Census (O9).**  ``census_fenced`` takes a session-level advisory lock on
  a key derived from the schema and each artifact's prefix (in key order, so
  two cleanups never wait for each other in a circle), on a connection of its
  own, for the whole block, then reads the visible references whose source
  id starts with each prefix.  ``publish`` takes the transaction-scoped lock
  on its claim's artifact key after the id's key, in the same round trip, so
  a publish naming a counted artifact waits.  The census never waits for an
  id's key, so the two orders never cross.
* **Snapshots.**  Every transaction runs at READ COMMITTED and reads in a
  statement *after* the one that took the lock, so it sees every change
  committed before the lock was granted.  (At REPEATABLE READ the snapshot
  would predate the lock.)
* **The seal (O6)** is a compare-and-set that does not trust the fence: a
  never-seen id is sealed by ``INSERT ... ON CONFLICT DO NOTHING``, a known
  row by ``UPDATE ... WHERE generation = <observed>``.  (Rows are never
  deleted and a tombstone is not sealed twice, so today only a never-seen id
  reaches the seal; the guarded UPDATE keeps any other case a CAS too.)  A
  fence whose connection dropped has lost its lock; the seal then runs on
  that dead connection and fails ("maybe sealed"), and even a seal through a
  new connection could only write over the generation it observed.
* **Tombstones are rows**, never deletes; a tombstoned id refuses ``publish``
  with :class:`~toolswap.owner.ArtifactPublicationRejected`, forever.
* **Generation:** a ``bigint`` drawn from a sequence on every change (never
  ``xmin``, which wraps around and is reused).  A committed value is never
  handed out again: the sequence's WAL record precedes the commit record
  that makes it durable.
* **Durability:** every connection sets ``synchronous_commit = on``, so a
  COMMIT has returned only once it is flushed; a connection to a standby is
  refused (reads come from the primary only, O8).
* **Timeouts** (connect, statement, lock) are options.  A timeout or a lost
  connection is "maybe written": :class:`~toolswap.errors.OwnerStoreError`
  with the driver's exception as ``__cause__``, never ABSENT and never a
  rejection (O2).
* **No secrets (O7).**  Messages name the failing step and a reason taken
  from a fixed list (or the SQLSTATE), never the driver's text, which names
  the host, the socket or the user.  The DSN is never stored in a repr.
* **Schema:** versioned (``toolswap_schema_version``), created only by
  :func:`initialize_schema` (``toolswap owner init``), idempotent and safe to
  run concurrently.  The ``schema`` option lets several deployments share one
  database.  Transaction ids are stored as UTF-8 ``bytea``: any id the
  journal accepts (even one holding NUL) is stored exactly.

Threads and processes: one object may be shared by threads.  Each call
checks a connection out of the object's small pool for its own use (a fence
keeps its connection for the whole block), so calls never share a
connection.  After ``fork()`` the child never touches the parent's
connections.  A pooled connection found dead on its first statement (the
server restarted) is replaced once, transparently: nothing was written yet.

:class:`PostgresHarness` puts it through the conformance kit against the
server named by ``TOOLSWAP_POSTGRES_DSN``.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from ..domain import ArtifactRetentionClaim, artifact_prefix
from ..errors import OwnerStoreError, UsageError
from ..journal_format import validate_transaction_id
from ..owner import (
    ArtifactPublicationRejected,
    ArtifactReferenceOwner,
    Census,
    ObservedState,
    OwnerConflictError,
    require_sealable,
)
from ..testing.harness import (
    Capability,
    HarnessError,
    OwnerHarness,
    RestartFromEnvironment,
    StoreFault,
)

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "DEFAULT_SCHEMA",
    "SCHEMA_VERSION",
    "PostgresHarness",
    "PostgresObservation",
    "PostgresOwner",
    "SchemaStatus",
    "initialize_schema",
]

DEFAULT_SCHEMA = "toolswap"
SCHEMA_VERSION = 1
TABLE = "toolswap_references"
_VERSION_TABLE = "toolswap_schema_version"
_SEQUENCE = "toolswap_generation"
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_MAX_IDLE = 4

# Each step brings the schema from version N-1 to N; ``{s}`` is the schema.
_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        "CREATE SEQUENCE IF NOT EXISTS {s}." + _SEQUENCE + " AS bigint MINVALUE 1",
        "CREATE TABLE IF NOT EXISTS {s}." + TABLE + " ("
        " transaction_id bytea PRIMARY KEY,"
        " kind text NOT NULL CHECK (kind IN ('published', 'tombstone')),"
        " source_id text,"
        " content_sha256 text,"
        " reference_count integer,"
        " generation bigint NOT NULL CHECK (generation >= 1),"
        " CHECK ((kind = 'published') ="
        " (source_id IS NOT NULL AND content_sha256 IS NOT NULL)),"
        " CHECK (kind = 'published' OR reference_count IS NULL))",
    ),
}


def _psycopg() -> ModuleType:
    """The driver, imported on first use: the core does not depend on it."""
    try:
        import psycopg
    except ImportError as exc:
        raise UsageError(
            "the PostgreSQL owner needs psycopg 3: pip install 'toolswap[postgres]'"
        ) from exc
    return psycopg


# -- errors without secrets ---------------------------------------------------

_SQLSTATE_REASONS = {
    "57014": "statement cancelled (statement timeout)",
    "55P03": "lock not available (lock timeout)",
    "28P01": "password authentication failed",
    "28000": "authorization rejected",
    "3D000": "the database does not exist",
    "42501": "permission denied",
    "53300": "too many connections",
    "57P01": "the server is shutting down",
    "57P02": "the server is shutting down",
    "57P03": "the server is not accepting connections yet",
    "25006": "read-only transaction; is this a standby?",
    "40P01": "deadlock detected",
    "40001": "serialization failure",
}

# libpq reports connection failures without a SQLSTATE, in text that names the
# host, the socket or the user; only these fixed reasons are ever shown.
_CLIENT_REASONS = (
    ("password authentication failed", "password authentication failed"),
    ("no password supplied", "no password supplied"),
    ("timeout expired", "connect timeout"),
    ("connection refused", "connection refused; is the server running?"),
    ("no such file or directory", "no server socket; is the server running?"),
    ("could not translate host name", "unknown host name"),
    ("server closed the connection", "the server closed the connection"),
    ("is starting up", "the server is starting up"),
    ("is shutting down", "the server is shutting down"),
    ("is in recovery mode", "the server is recovering from a crash"),
    ("the connection is lost", "the connection is lost"),
    ("the connection is closed", "the connection is closed"),
    ("definition of service", "the service named in the spec is not in the service file"),
    ("service file", "the service file cannot be read"),
    ("invalid connection option", "a parameter of the URL is not a libpq option"),
    ("invalid sslmode", "the URL's sslmode is not valid"),
    ("invalid integer value", "a numeric parameter of the URL is not a number"),
    ("invalid uri", "the URL is malformed"),
    ('missing "="', "the URL is malformed"),
    ("database", "the database does not exist"),
    ("role", "the role does not exist"),
)


# What a server that is restarting answers (a harness waits these out).
_TRANSIENT = frozenset(
    {
        "the server is starting up",
        "the server is shutting down",
        "the server is recovering from a crash",
        "the server is not accepting connections yet",
        "no server socket; is the server running?",
        "connection refused; is the server running?",
        "the server closed the connection",
    }
)


def _reason(exc: BaseException) -> str:
    sqlstate = getattr(exc, "sqlstate", None)
    if isinstance(sqlstate, str) and sqlstate:
        known = _SQLSTATE_REASONS.get(sqlstate)
        return known or f"{type(exc).__name__}, SQLSTATE {sqlstate}"
    text = str(exc).lower()
    for needle, reason in _CLIENT_REASONS:
        if needle in text and (needle not in {"database", "role"} or "does not exist" in text):
            return reason
    return type(exc).__name__


@contextmanager
def _store_errors(doing: str) -> Iterator[None]:
    """Turn a driver error into :class:`OwnerStoreError` ("maybe done", no secrets)."""
    try:
        yield
    except _psycopg().Error as exc:
        raise OwnerStoreError(f"PostgreSQL owner: {doing} failed ({_reason(exc)})") from exc


def _check_schema_name(schema: str) -> str:
    if not isinstance(schema, str) or not _SCHEMA_NAME.fullmatch(schema):
        raise UsageError(
            "a PostgreSQL owner schema name is 1-63 of [a-z0-9_], not starting with a digit"
        )
    return schema


def _seconds(value: float, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise UsageError(f"{name} must be a positive number of seconds")
    if not math.isfinite(value):
        raise UsageError(f"{name} must be finite")
    return float(value)


# -- the schema ---------------------------------------------------------------


@attrs.frozen(kw_only=True)
class SchemaStatus:
    """What :func:`initialize_schema` found and left: schema versions (0 = none)."""

    schema: str
    previous_version: int
    version: int

    @property
    def created(self) -> bool:
        return self.previous_version < self.version


def _lock_key(schema: str, name: str) -> int:
    digest = hashlib.sha256(f"{schema}\0{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _installed_version(conn: psycopg.Connection[Any], schema: str) -> int:
    """The schema's version; 0 when the schema or its version table is missing."""
    row = conn.execute(
        "SELECT to_regclass(%s) IS NOT NULL", (f"{schema}.{_VERSION_TABLE}",)
    ).fetchone()
    if row is None or not row[0]:
        return 0
    found = conn.execute(f"SELECT version FROM {schema}.{_VERSION_TABLE}").fetchone()
    return 0 if found is None else int(found[0])


def _migrate(conn: psycopg.Connection[Any], schema: str) -> SchemaStatus:
    """Bring ``schema`` to :data:`SCHEMA_VERSION` inside one transaction.

    An advisory lock serializes concurrent initializations (``CREATE ... IF
    NOT EXISTS`` alone races on the catalog).
    """
    conn.execute(
        f"BEGIN ISOLATION LEVEL READ COMMITTED; "
        f"SELECT pg_advisory_xact_lock({_lock_key(schema, ' schema')})"
    )
    try:
        previous = _installed_version(conn, schema)
        if previous > SCHEMA_VERSION:
            raise UsageError(
                f"the PostgreSQL owner schema {schema!r} is at version {previous}, newer "
                f"than this toolswap supports ({SCHEMA_VERSION}): upgrade toolswap"
            )
        if previous < SCHEMA_VERSION:
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {schema}.{_VERSION_TABLE} ("
                " singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),"
                " version integer NOT NULL)"
            )
            for version in range(previous + 1, SCHEMA_VERSION + 1):
                for statement in _MIGRATIONS[version]:
                    conn.execute(statement.format(s=schema))
            conn.execute(
                f"INSERT INTO {schema}.{_VERSION_TABLE} (singleton, version) VALUES (true, %s) "
                "ON CONFLICT (singleton) DO UPDATE SET version = EXCLUDED.version",
                (SCHEMA_VERSION,),
            )
        conn.execute("COMMIT")
    except BaseException:
        if not conn.closed and not conn.broken:
            try:
                conn.execute("ROLLBACK")
            except Exception:
                conn.close()
        raise
    return SchemaStatus(schema=schema, previous_version=previous, version=SCHEMA_VERSION)


def initialize_schema(
    dsn: str = "", *, schema: str = DEFAULT_SCHEMA, connect_timeout: float = 10.0
) -> SchemaStatus:
    """Create (or upgrade) the owner's schema; idempotent, safe to run concurrently.

    ``dsn`` is a libpq connection string or URL; what it leaves out comes from
    the libpq environment (``PGHOST``, ``PGPASSWORD``, a service file, ...).
    """
    with PostgresOwner(dsn, schema=schema, connect_timeout=connect_timeout, create=True) as owner:
        status = owner.schema_status
    assert status is not None
    return status


# -- the owner ----------------------------------------------------------------


class _Fence:
    """One ``inspect_fenced`` block; its observation may seal only while it is open."""

    __slots__ = ("open",)

    def __init__(self) -> None:
        self.open = True


@attrs.frozen(kw_only=True)
class PostgresObservation:
    """An observation of :class:`PostgresOwner`, valid inside its fence only."""

    transaction_id: str
    state: ObservedState
    source_id: str | None
    content_sha256: str | None
    generation: int
    sealed: bool
    _owner: PostgresOwner = attrs.field(repr=False, eq=False, alias="owner")
    _connection: psycopg.Connection[Any] = attrs.field(repr=False, eq=False, alias="connection")
    _fence: _Fence = attrs.field(repr=False, eq=False, alias="fence")

    def seal_absence(self) -> bool:
        require_sealable(self)
        if not self._fence.open:
            raise UsageError("seal_absence is allowed only inside its inspect_fenced block")
        return self._owner._seal(self._connection, self.transaction_id, self.generation)


class PostgresOwner:
    """A durable owner in one PostgreSQL schema; safe across threads, processes and hosts."""

    def __init__(
        self,
        dsn: str = "",
        *,
        schema: str = DEFAULT_SCHEMA,
        create: bool = False,
        connect_timeout: float = 10.0,
        statement_timeout: float = 30.0,
        lock_timeout: float = 20.0,
        connection_class: type[psycopg.Connection[Any]] | None = None,
    ) -> None:
        """Connect to the server ``dsn`` names and check the schema's version.

        ``create=True`` creates or upgrades the schema first (what
        :func:`initialize_schema` does); otherwise a missing schema is a
        :class:`~toolswap.errors.UsageError`, never an empty store.
        ``lock_timeout`` bounds how long a call waits behind another caller's
        fence.  ``connection_class`` (a ``psycopg.Connection`` subclass) is a
        seam for tests that make the store itself fail.
        """
        driver = _psycopg()
        self._dsn = dsn
        self._schema = _check_schema_name(schema)
        self._connect_timeout = max(1, math.ceil(_seconds(connect_timeout, "connect_timeout")))
        self._statement_ms = int(_seconds(statement_timeout, "statement_timeout") * 1000)
        self._lock_ms = int(_seconds(lock_timeout, "lock_timeout") * 1000)
        self._class: type[psycopg.Connection[Any]] = connection_class or driver.Connection
        self._guard = threading.Lock()
        self._idle: list[psycopg.Connection[Any]] = []
        self._pid = os.getpid()
        self._inherited: list[psycopg.Connection[Any]] = []
        self._closed = False
        self.schema_status: SchemaStatus | None = None
        t = f"{self._schema}.{TABLE}"
        self._select = (
            f"SELECT kind, source_id, content_sha256, generation FROM {t} WHERE transaction_id = %s"
        )
        self._insert_published = (
            f"INSERT INTO {t} (transaction_id, kind, source_id, content_sha256, "
            f"reference_count, generation) VALUES (%s, 'published', %s, %s, %s, "
            f"nextval('{self._schema}.{_SEQUENCE}')) "
            "ON CONFLICT (transaction_id) DO NOTHING RETURNING generation"
        )
        self._tombstone = (
            f"INSERT INTO {t} AS r (transaction_id, kind, generation) "
            f"VALUES (%s, 'tombstone', nextval('{self._schema}.{_SEQUENCE}')) "
            "ON CONFLICT (transaction_id) DO UPDATE SET kind = 'tombstone', "
            "source_id = NULL, content_sha256 = NULL, reference_count = NULL, "
            "generation = EXCLUDED.generation WHERE r.kind <> 'tombstone'"
        )
        self._seal_new = (
            f"INSERT INTO {t} (transaction_id, kind, generation) "
            f"VALUES (%s, 'tombstone', nextval('{self._schema}.{_SEQUENCE}')) "
            "ON CONFLICT (transaction_id) DO NOTHING"
        )
        self._census = (
            f"SELECT transaction_id FROM {t} WHERE kind = 'published' "
            "AND starts_with(source_id, %s)"
        )
        self._seal_known = (
            f"UPDATE {t} SET kind = 'tombstone', source_id = NULL, content_sha256 = NULL, "
            f"reference_count = NULL, generation = nextval('{self._schema}.{_SEQUENCE}') "
            "WHERE transaction_id = %s AND generation = %s AND kind <> 'published'"
        )
        conn, _ = self._checkout("opening the owner")
        try:
            with _store_errors("opening the owner schema"):
                if create:
                    self.schema_status = _migrate(conn, self._schema)
                    version = self.schema_status.version
                else:
                    version = _installed_version(conn, self._schema)
        except BaseException:
            self._drop(conn)
            self.close()
            raise
        self._checkin(conn)
        if version != SCHEMA_VERSION:
            self.close()
            if version == 0:
                raise UsageError(
                    f"the PostgreSQL owner schema {self._schema!r} is not initialized "
                    "(run `toolswap owner init` with the same owner spec)"
                )
            raise UsageError(
                f"the PostgreSQL owner schema {self._schema!r} is at version {version}, "
                f"this toolswap needs {SCHEMA_VERSION} (run `toolswap owner init` to upgrade)"
            )

    def __repr__(self) -> str:  # never the DSN
        return f"PostgresOwner(schema={self._schema!r})"

    @property
    def schema(self) -> str:
        return self._schema

    # -- connections ----------------------------------------------------------

    def _connect(self, doing: str) -> psycopg.Connection[Any]:
        conn: psycopg.Connection[Any] | None = None
        with _store_errors(f"{doing}: connecting"):
            conn = self._class.connect(
                self._dsn,
                autocommit=True,
                connect_timeout=self._connect_timeout,
                fallback_application_name="toolswap-owner",
            )
        try:
            with _store_errors(f"{doing}: configuring the connection"):
                row = conn.execute(
                    "SELECT pg_is_in_recovery(), "
                    "set_config('synchronous_commit', 'on', false), "
                    "set_config('default_transaction_read_only', 'off', false), "
                    "set_config('statement_timeout', %s, false), "
                    "set_config('lock_timeout', %s, false)",
                    (f"{self._statement_ms}ms", f"{self._lock_ms}ms"),
                ).fetchone()
            if row is None or row[0]:
                raise OwnerStoreError(
                    f"PostgreSQL owner: {doing} failed (the server is a standby: "
                    "the owner must read and write on the primary)"
                )
        except BaseException:
            conn.close()
            raise
        return conn

    def _checkout(self, doing: str) -> tuple[psycopg.Connection[Any], bool]:
        """A connection for one caller; ``True`` when it was reused from the pool."""
        with self._guard:
            if self._closed:
                raise UsageError("the PostgreSQL owner is closed")
            if self._pid != os.getpid():
                # After fork(): the parent's sessions are not ours; closing them
                # would end them for the parent too, so they are only dropped.
                self._inherited.extend(self._idle)
                self._idle = []
                self._pid = os.getpid()
            if self._idle:
                return self._idle.pop(), True
        return self._connect(doing), False

    def _checkin(self, conn: psycopg.Connection[Any]) -> None:
        driver = _psycopg()
        idle = (
            not conn.closed
            and conn.info.transaction_status == driver.pq.TransactionStatus.IDLE
            and os.getpid() == self._pid
        )
        with self._guard:
            if idle and not self._closed and len(self._idle) < _MAX_IDLE:
                self._idle.append(conn)
                return
        self._drop(conn)

    @staticmethod
    def _drop(conn: psycopg.Connection[Any]) -> None:
        """Close a connection; the server then ends its session and every lock it held."""
        with contextlib.suppress(Exception):  # already broken: nothing left to release
            conn.close()

    def _abandon(self, conn: psycopg.Connection[Any]) -> None:
        """After a failure: roll back what is open, keep the connection only if it is sane."""
        if not conn.closed and not conn.broken:
            try:
                conn.execute("ROLLBACK")
            except Exception:
                self._drop(conn)
                return
            self._checkin(conn)
            return
        self._drop(conn)

    def _first(
        self, doing: str, sql: str, params: Sequence[object] | None = None
    ) -> psycopg.Connection[Any]:
        """Check out a connection and run ``sql`` as its first statement.

        A pooled connection that turns out dead here (the server restarted
        since it was last used) is replaced once: the statement never ran.
        """
        driver = _psycopg()
        while True:
            conn, reused = self._checkout(doing)
            try:
                conn.execute(sql, params)
            except driver.Error as exc:
                retry = reused and conn.broken
                self._abandon(conn)
                if retry:
                    continue
                raise OwnerStoreError(f"PostgreSQL owner: {doing} failed ({_reason(exc)})") from exc
            except BaseException:
                self._abandon(conn)
                raise
            return conn

    def _locked_transaction(self, doing: str, *keys: int) -> psycopg.Connection[Any]:
        # The keys are ints computed here, so they are written into the text:
        # BEGIN and the locks then travel in one round trip.
        locks = "".join(f"; SELECT pg_advisory_xact_lock({key})" for key in keys)
        return self._first(doing, f"BEGIN ISOLATION LEVEL READ COMMITTED{locks}")

    def _key(self, transaction_id: str) -> int:
        return _lock_key(self._schema, transaction_id)

    def _artifact_key(self, prefix: str) -> int:
        # its own name space: a transaction id is never this text with its NUL
        return _lock_key(self._schema, f"\0artifact\0{prefix}")

    def close(self) -> None:
        """Close every idle connection; connections in use close when they come back."""
        with self._guard:
            self._closed = True
            idle, self._idle = self._idle, []
            mine = self._pid == os.getpid()
        if mine:
            for conn in idle:
                self._drop(conn)

    def __enter__(self) -> PostgresOwner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the owner protocol ---------------------------------------------------

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        txn = validate_transaction_id(transaction_id)
        doing = "publishing a reference"
        artifact = self._artifact_key(artifact_prefix(claim.source_id))
        conn = self._locked_transaction(doing, self._key(txn), artifact)
        try:
            with _store_errors(doing):
                inserted = conn.execute(
                    self._insert_published,
                    (txn.encode(), claim.source_id, claim.content_sha256, claim.reference_count),
                ).fetchone()
                if inserted is None:  # the id is known: decide without writing
                    row = conn.execute(self._select, (txn.encode(),)).fetchone()
                    if row is None or row[0] == "tombstone":
                        # (row is None cannot happen under the lock: a row is never deleted)
                        raise ArtifactPublicationRejected(f"transaction {txn!r} is tombstoned")
                    if (row[1], row[2]) != (claim.source_id, claim.content_sha256):
                        raise OwnerConflictError(f"transaction {txn!r} holds another reference")
                    conn.execute("ROLLBACK")
                else:
                    conn.execute("COMMIT")
        except BaseException:
            self._abandon(conn)
            raise
        self._checkin(conn)

    def remove(self, transaction_id: str) -> None:
        txn = validate_transaction_id(transaction_id)
        doing = "removing a reference"
        conn = self._locked_transaction(doing, self._key(txn))
        try:
            with _store_errors(doing):
                conn.execute(self._tombstone, (txn.encode(),))
                conn.execute("COMMIT")
        except BaseException:
            self._abandon(conn)
            raise
        self._checkin(conn)

    @contextmanager
    def inspect_fenced(self, transaction_id: str) -> Iterator[PostgresObservation]:
        """The fence is a session-level advisory lock, held on its own connection.

        The lock is released when the block ends; if releasing fails, the
        connection is closed, which ends the session and releases it too.
        """
        txn = validate_transaction_id(transaction_id)
        key = self._key(txn)
        conn = self._first("taking the fence", f"SELECT pg_advisory_lock({key})")
        fence = _Fence()
        try:
            with _store_errors("inspecting a reference"):
                row = conn.execute(self._select, (txn.encode(),)).fetchone()
            if row is None or row[0] == "tombstone":
                state, source_id, digest = ObservedState.ABSENT, None, None
            elif row[0] == "published":
                state, source_id, digest = ObservedState.PUBLISHED, row[1], row[2]
            else:  # pragma: no cover - the table's CHECK allows nothing else
                state, source_id, digest = ObservedState.UNKNOWN, None, None
            yield PostgresObservation(
                transaction_id=txn,
                state=state,
                source_id=source_id,
                content_sha256=digest,
                generation=0 if row is None else int(row[3]),
                sealed=row is not None and row[0] == "tombstone",
                owner=self,
                connection=conn,
                fence=fence,
            )
        finally:
            fence.open = False
            self._release(conn, key)

    def _release(self, conn: psycopg.Connection[Any], *keys: int) -> None:
        for key in keys:
            try:
                row = conn.execute(f"SELECT pg_advisory_unlock({key})").fetchone()
            except Exception:
                self._drop(conn)
                return
            if row is None or row[0] is not True:
                self._drop(conn)  # ends the session: whatever it still held goes with it
                return
        self._checkin(conn)

    @contextmanager
    def census_fenced(self, source_ids: Sequence[str]) -> Iterator[Census]:
        """O9: session-level locks on the artifacts' keys, on a connection of its own.

        If releasing fails, the connection is closed, which releases the rest.
        """
        prefixes = {source_id: artifact_prefix(source_id) for source_id in source_ids}
        keys = sorted({self._artifact_key(p) for p in prefixes.values()})
        locks = "; ".join(f"SELECT pg_advisory_lock({key})" for key in keys) or "SELECT 1"
        conn = self._first("taking the census fence", locks)
        try:
            census: dict[str, tuple[str, ...]] = {}
            with _store_errors("counting references"):
                for source_id, prefix in prefixes.items():
                    rows = conn.execute(self._census, (prefix,)).fetchall()
                    census[source_id] = tuple(sorted(bytes(row[0]).decode("utf-8") for row in rows))
            yield census
        finally:
            self._release(conn, *keys)

    def _seal(self, conn: psycopg.Connection[Any], txn: str, generation: int) -> bool:
        """The compare-and-set of O6, on the fence's own connection."""
        doing = "sealing an absence"
        try:
            with _store_errors(doing):
                conn.execute(
                    "BEGIN ISOLATION LEVEL READ COMMITTED; "
                    f"SELECT pg_advisory_xact_lock({self._key(txn)})"
                )
                if generation == 0:
                    cursor = conn.execute(self._seal_new, (txn.encode(),))
                else:  # never tombstones a visible reference, whatever was observed
                    cursor = conn.execute(self._seal_known, (txn.encode(), generation))
                if cursor.rowcount != 1:
                    conn.execute("ROLLBACK")
                    return False
                conn.execute("COMMIT")
        except BaseException:
            if not conn.closed and not conn.broken:
                try:
                    conn.execute("ROLLBACK")
                except Exception:
                    self._drop(conn)  # ends the session: the fence is gone with it
            raise
        return True

    def generation(self, transaction_id: str) -> int:
        """The current generation of an id (0 if never seen); for tests and audits."""
        txn = validate_transaction_id(transaction_id)
        conn = self._first("reading a generation", "SELECT 1")
        try:
            with _store_errors("reading a generation"):
                row = conn.execute(self._select, (txn.encode(),)).fetchone()
        except BaseException:
            self._abandon(conn)
            raise
        self._checkin(conn)
        return 0 if row is None else int(row[3])


# -- the conformance-kit harness ------------------------------------------------

DSN_ENV = "TOOLSWAP_POSTGRES_DSN"
RESTART_ENV = "TOOLSWAP_POSTGRES_RESTART"


_NO_POWER_LOSS = (
    "the server named by TOOLSWAP_POSTGRES_DSN keeps its data directory where the kit "
    "cannot cut its power; toolswap.owners.postgres_cluster:PostgresClusterHarness runs a "
    "server of its own per store, with its data in the work folder"
)


def _faultable_class(armed: list[StoreFault]) -> type[psycopg.Connection[Any]]:
    """A ``psycopg.Connection`` whose next statement fails as armed (one class per handle)."""
    driver = _psycopg()

    class _FaultableConnection(driver.Connection):  # type: ignore[name-defined,misc]
        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            if armed and not (armed[0] is StoreFault.LOST_ACK and not _is_commit(query)):
                fault = armed.pop(0)
                if fault is StoreFault.FAIL:  # never reaches the server; the link is gone
                    self.close()
                    raise driver.OperationalError("injected: the connection is lost")
                if fault is StoreFault.TIMEOUT:  # cancelled before it could apply
                    raise driver.errors.QueryCanceled(
                        "injected: canceling statement due to statement timeout"
                    )
                super().execute(query, params, **kwargs)  # committed, then the answer is lost
                self.close()
                raise driver.OperationalError("injected: the connection is lost")
            return super().execute(query, params, **kwargs)

    return _FaultableConnection


def _is_commit(query: object) -> bool:
    return isinstance(query, str) and query.strip().upper() == "COMMIT"


class PostgresHarness(OwnerHarness):
    """The conformance-kit harness of :class:`PostgresOwner` on a real server.

    The server is the one ``TOOLSWAP_POSTGRES_DSN`` names.  Each harness gets
    its own schema, named from a hash of its work folder (so a child process
    with the same folder reaches the same store), created on construction and
    dropped by :meth:`destroy`.  A restart runs the shell command in
    ``TOOLSWAP_POSTGRES_RESTART`` (``.ci/postgres-cluster restart DIR``: an
    immediate shutdown, then a start); without it RESTART is unsupported.  A
    fault fails the handle's next statement before it reaches the server
    (``fail``: the connection is lost; ``timeout``: cancelled like a
    statement timeout) or, for ``lost_ack``, lets the next COMMIT commit and
    then loses the connection.
    """

    unsupported: ClassVar[Mapping[Capability, str]] = RestartFromEnvironment(
        {Capability.POWER_LOSS: _NO_POWER_LOSS},
        RESTART_ENV,
        "restarts the server (e.g. `.ci/postgres-cluster restart DIR`)",
    )
    slow_restart: ClassVar[bool] = True  # a server restart takes about a second
    shared_handles: ClassVar[bool] = True  # the adapter's docstring: one object, many threads
    owner_class: ClassVar[type[PostgresOwner]] = PostgresOwner
    """The adapter class to open (a subclass of :class:`PostgresOwner` may be put here)."""

    def __init__(self, workdir: str) -> None:
        super().__init__(workdir)
        dsn = os.environ.get(DSN_ENV, "").strip()
        if not dsn:
            raise HarnessError(
                f"set {DSN_ENV} to a PostgreSQL connection string (e.g. the one "
                "`.ci/postgres-cluster start` prints) to run the PostgreSQL harness"
            )
        self.dsn = dsn
        digest = hashlib.sha256(os.path.realpath(self.workdir).encode()).hexdigest()
        self.schema = f"toolswap_kit_{digest[:20]}"
        self._faults: dict[int, list[StoreFault]] = {}
        self._initialize()

    def _initialize(self) -> None:
        self._waiting_out_restarts(lambda: initialize_schema(self.dsn, schema=self.schema))

    def _waiting_out_restarts(self, step: Callable[[], object]) -> None:
        """Run ``step``; while the server answers like one that is restarting, retry.

        A harness may be built or destroyed while a restart (someone else's) is
        under way; any other failure is raised at once.
        """
        deadline = time.monotonic() + 20.0
        while True:
            try:
                with _store_errors("reaching the server"):
                    step()
                return
            except OwnerStoreError as exc:
                transient = exc.__cause__ is not None and _reason(exc.__cause__) in _TRANSIENT
                if not transient or time.monotonic() > deadline:
                    raise
            time.sleep(0.2)

    def open_owner(self) -> PostgresOwner:
        armed: list[StoreFault] = []
        owner = self.owner_class(
            self.dsn,
            schema=self.schema,
            statement_timeout=60.0,
            lock_timeout=60.0,
            connection_class=_faultable_class(armed),
        )
        self._faults[id(owner)] = armed
        return owner

    def close_owner(self, owner: ArtifactReferenceOwner) -> None:
        self._faults.pop(id(owner), None)
        super().close_owner(owner)

    def restart_store(self) -> None:
        command = os.environ.get(RESTART_ENV, "").strip()
        if not command:
            raise HarnessError(f"{RESTART_ENV} is not set: cannot restart the server")
        done = subprocess.run(
            command,
            shell=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=180,
            check=False,
        )
        if done.returncode != 0:
            raise HarnessError(f"the restart command failed (exit status {done.returncode})")

    def inject_fault(self, owner: ArtifactReferenceOwner, fault: StoreFault) -> None:
        self._faults[id(owner)].append(fault)

    def advance_clock(self, seconds: float) -> None:
        """Nothing to do: no row expires and the adapter reads no clock (generations
        come from a sequence; time-outs bound waits, they date nothing)."""

    def secrets(self) -> Sequence[str]:
        return dsn_secrets(self.dsn)

    def destroy(self) -> None:
        driver = _psycopg()

        def drop() -> None:
            with driver.connect(self.dsn, autocommit=True, connect_timeout=10) as conn:
                conn.execute("SET lock_timeout = '30s'")
                conn.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")

        self._waiting_out_restarts(drop)


def dsn_secrets(dsn: str) -> tuple[str, ...]:
    """The DSN, its password and its host(s), plus the libpq environment's: never shown."""
    found = [dsn]
    try:
        parts = _psycopg().conninfo.conninfo_to_dict(dsn)
    except Exception:
        parts = {}
    for key in ("password", "host", "hostaddr"):
        value = parts.get(key)
        if value:
            found.extend(str(value).split(","))
    for env in ("PGPASSWORD", "PGHOST", "PGHOSTADDR"):
        if os.environ.get(env):
            found.append(os.environ[env])
    return tuple(dict.fromkeys(s for s in found if len(s) >= 4))
