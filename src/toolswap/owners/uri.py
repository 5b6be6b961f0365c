"""Owner specs: one string that names an owner store, for the command line.

Forms
=====

* ``sqlite:PATH`` -- the SQLite owner database at ``PATH``.
* ``postgresql://...`` or ``postgres://...`` -- a libpq connection URL.  One
  extra query parameter is ours: ``schema=NAME`` picks the owner's schema
  (default ``toolswap``), so several deployments can share one database; it
  is removed before the URL reaches libpq.  Everything the URL leaves out
  comes from the libpq environment as usual (``PGHOST``, ``PGUSER``,
  ``PGPASSWORD``, ``PGSERVICE`` and the service file, ``~/.pgpass``), so
  ``postgresql://?schema=team_a`` is a complete spec.
* ``etcd://HOST:PORT[,HOST:PORT...][?prefix=NAME]`` -- the etcd owner under
  key prefix ``NAME`` (default ``toolswap``) of the cluster whose members'
  client endpoints are listed (plain HTTP, the v3 JSON gateway; see
  docs/etcd.md).

Rules
=====

* Opening never creates anything: a missing SQLite file or an uninitialized
  PostgreSQL schema is a :class:`~toolswap.errors.UsageError`, never an empty
  store whose every lease would look absent.  :func:`init_owner` (``toolswap
  owner init``) is what creates a store.
* No message built here repeats the spec's location: a URL may hold a
  password and names a host.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import TYPE_CHECKING, Literal

import attrs

from ..errors import UsageError
from .postgres import DEFAULT_SCHEMA, PostgresOwner, initialize_schema
from .sqlite import SCHEMA_VERSION as SQLITE_SCHEMA_VERSION
from .sqlite import SQLiteOwner

if TYPE_CHECKING:
    from .etcd import EtcdOwner

__all__ = ["OwnerSpec", "SPEC_HELP", "init_owner", "open_owner", "parse_owner_spec"]

SPEC_HELP = (
    "sqlite:PATH, postgresql://[user@]host/db[?schema=NAME] (libpq environment honoured) "
    "or etcd://HOST:PORT[,HOST:PORT...][?prefix=NAME]"
)

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")


@attrs.frozen(kw_only=True)
class OwnerSpec:
    """A parsed owner spec; ``location`` (a path or a DSN) never shows in its repr."""

    kind: Literal["sqlite", "postgresql", "etcd"]
    location: str = attrs.field(repr=False)
    schema: str | None = None
    prefix: str | None = None

    def describe(self) -> str:
        """What the spec names, without its location."""
        if self.kind == "sqlite":
            return "SQLite owner database"
        if self.kind == "etcd":
            return f"etcd owner prefix {self.prefix!r}"
        return f"PostgreSQL owner schema {self.schema!r}"


def parse_owner_spec(spec: str) -> OwnerSpec:
    """Split a spec into kind, location and schema; a malformed spec is a UsageError."""
    if not isinstance(spec, str):
        raise UsageError("an owner spec is a string")
    scheme, sep, rest = spec.partition(":")
    if not sep or not scheme:
        raise UsageError(f"an owner spec is scheme:location ({SPEC_HELP})")
    if scheme == "sqlite":
        if not rest:
            raise UsageError("sqlite: needs a database path, e.g. sqlite:memory.db")
        return OwnerSpec(kind="sqlite", location=rest)
    if scheme in ("postgresql", "postgres"):
        if not rest.startswith("//"):
            raise UsageError(
                f"a PostgreSQL owner spec is a URL: {scheme}://[user@]host/db[?schema=NAME]"
            )
        dsn, schema = _take_schema(spec)
        return OwnerSpec(kind="postgresql", location=dsn, schema=schema)
    if scheme == "etcd":
        return _etcd_spec(rest)
    shown = repr(scheme) if _SCHEME.fullmatch(scheme) else "in this spec"
    raise UsageError(f"unknown owner scheme {shown} (supported: sqlite, postgresql, etcd)")


def _etcd_spec(rest: str) -> OwnerSpec:
    """``//host:port,host:port?prefix=NAME``: the endpoints and our one parameter."""
    from .etcd import DEFAULT_PREFIX, parse_endpoints

    if not rest.startswith("//"):
        raise UsageError("an etcd owner spec is etcd://HOST:PORT[,HOST:PORT...][?prefix=NAME]")
    hosts, _, query = rest[2:].partition("?")
    parse_endpoints(hosts)  # a malformed endpoint is a UsageError now, not at first use
    prefixes: list[str] = []
    for item in query.split("&") if query else []:
        key, _, value = item.partition("=")
        if urllib.parse.unquote(key) != "prefix":
            raise UsageError("an etcd owner spec takes one parameter: prefix=NAME")
        prefixes.append(urllib.parse.unquote(value))
    if len(prefixes) > 1:
        raise UsageError("the owner spec names prefix= more than once")
    if prefixes and not prefixes[0]:
        raise UsageError(
            f"the owner spec's prefix= is empty; name a prefix or leave the option out "
            f"(the default is {DEFAULT_PREFIX!r})"
        )
    return OwnerSpec(
        kind="etcd", location=hosts, prefix=prefixes[0] if prefixes else DEFAULT_PREFIX
    )


def _take_schema(url: str) -> tuple[str, str]:
    """Remove our ``schema=`` parameter from the URL's query; libpq would refuse it."""
    base, _, query = url.partition("?")
    kept: list[str] = []
    schemas: list[str] = []
    for item in query.split("&") if query else []:
        key, _, value = item.partition("=")
        if urllib.parse.unquote(key) == "schema":
            schemas.append(urllib.parse.unquote(value))
        elif item:
            kept.append(item)
    if len(schemas) > 1:
        raise UsageError("the owner spec names schema= more than once")
    if schemas and not schemas[0]:
        # an empty name would quietly mean the default schema: another deployment's store
        raise UsageError(
            f"the owner spec's schema= is empty; name a schema or leave the option out "
            f"(the default is {DEFAULT_SCHEMA!r})"
        )
    dsn = f"{base}?{'&'.join(kept)}" if kept else base
    return dsn, schemas[0] if schemas else DEFAULT_SCHEMA


def open_owner(
    spec: str, *, busy_timeout: float | None = None
) -> SQLiteOwner | PostgresOwner | EtcdOwner:
    """Open the existing owner store the spec names (never creates one).

    ``busy_timeout`` (seconds) bounds how long one call waits behind a lock
    another caller holds: SQLite's busy timeout, PostgreSQL's lock timeout.
    ``None`` keeps each owner's default (for etcd, how long a call waits behind
    another caller's fence).  (It is an argument, not a spec
    parameter: a ``sqlite:`` location is a raw path, where ``?`` is a
    legal character.)
    """
    if busy_timeout is not None and not (0 < busy_timeout < float("inf")):
        raise UsageError(f"a busy timeout is a number of seconds above 0, got {busy_timeout!r}")
    parsed = parse_owner_spec(spec)
    if parsed.kind == "sqlite":
        if busy_timeout is None:
            return SQLiteOwner(parsed.location, create=False)
        return SQLiteOwner(parsed.location, create=False, timeout=busy_timeout)
    if parsed.kind == "etcd":
        from .etcd import DEFAULT_PREFIX, EtcdOwner

        prefix = parsed.prefix or DEFAULT_PREFIX
        if busy_timeout is None:
            return EtcdOwner(parsed.location, prefix=prefix)
        return EtcdOwner(parsed.location, prefix=prefix, lock_timeout=busy_timeout)
    schema = parsed.schema or DEFAULT_SCHEMA
    if busy_timeout is None:
        return PostgresOwner(parsed.location, schema=schema)
    return PostgresOwner(parsed.location, schema=schema, lock_timeout=busy_timeout)


def init_owner(spec: str) -> str:
    """Create (or upgrade) the store the spec names; idempotent.  Returns one line."""
    parsed = parse_owner_spec(spec)
    if parsed.kind == "sqlite":
        owner = SQLiteOwner(parsed.location, create=True)
        owner.close()
        if owner.previous_version == 0:
            return f"{parsed.describe()}: created (version {SQLITE_SCHEMA_VERSION})"
        return f"{parsed.describe()}: already at version {SQLITE_SCHEMA_VERSION}"
    if parsed.kind == "etcd":
        from .etcd import DEFAULT_PREFIX, initialize_prefix

        marked = initialize_prefix(parsed.location, prefix=parsed.prefix or DEFAULT_PREFIX)
        if marked.created:
            return f"{parsed.describe()}: created (version {marked.version})"
        return f"{parsed.describe()}: already at version {marked.version}"
    status = initialize_schema(parsed.location, schema=parsed.schema or DEFAULT_SCHEMA)
    if status.previous_version == 0:
        done = f"created (version {status.version})"
    elif status.created:
        done = f"upgraded from version {status.previous_version} to {status.version}"
    else:
        done = f"already at version {status.version}"
    return f"{parsed.describe()}: {done}"
