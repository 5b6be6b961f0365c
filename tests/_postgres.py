"""The PostgreSQL server the tests run against, if there is one.

Rules:

* ``TOOLSWAP_POSTGRES_DSN`` names the server (``.ci/postgres-cluster start``
  prints it).  Without it (or without psycopg) the PostgreSQL tests skip, with
  a reason that says how to get a server -- except under ``CI=true``, where a
  missing server is a failure: CI must never pass by skipping them.
* ``TOOLSWAP_POSTGRES_RESTART`` is a shell command that crash-restarts that
  server (an immediate shutdown, then a start); :func:`restart_server` runs it
  under the same skip-or-fail rule.  A restart ends every session, so tests
  that restart run one at a time (pytest runs a file's tests in order).
* Every test gets its own schema (:func:`pg_schema`), dropped afterwards, so
  tests never see each other's rows and can share one database.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator

import pytest

from toolswap.owners.postgres import DSN_ENV, RESTART_ENV, initialize_schema

__all__ = [
    "drop_schema",
    "pg_dsn",
    "pg_schema",
    "require_dsn",
    "require_psycopg",
    "restart_server",
]


def _missing(reason: str) -> None:
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        pytest.fail(f"CI=true but {reason}: CI must run the PostgreSQL tests", pytrace=False)
    pytest.skip(reason)


def require_psycopg() -> None:
    """At the top of a test module that imports psycopg: skip it without the driver
    (a collection failure under CI)."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        reason = "psycopg is not installed (pip install -e '.[test]')"
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            raise RuntimeError(f"CI=true but {reason}: CI must run the PostgreSQL tests") from None
        pytest.skip(reason, allow_module_level=True)


def require_dsn() -> str:
    """The server's DSN, or skip (fail under CI) with the reason."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _missing("psycopg is not installed (pip install -e '.[test]')")
    dsn = os.environ.get(DSN_ENV, "").strip()
    if not dsn:
        _missing(
            f"no PostgreSQL server: {DSN_ENV} is unset "
            '(start one with: eval "$(.ci/postgres-cluster start)")'
        )
    return dsn


def restart_server() -> None:
    """Crash-restart the server (every session ends; durable state stays)."""
    command = os.environ.get(RESTART_ENV, "").strip()
    if not command:
        _missing(f"{RESTART_ENV} is unset: the server cannot be restarted")
    subprocess.run(command, shell=True, check=True, stdin=subprocess.DEVNULL, timeout=180)


def drop_schema(dsn: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        conn.execute("SET lock_timeout = '30s'")
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.fixture
def pg_dsn() -> str:
    return require_dsn()


@pytest.fixture
def pg_schema(pg_dsn: str) -> Iterator[str]:
    """A fresh, initialized owner schema for one test; dropped afterwards."""
    schema = f"toolswap_test_{uuid.uuid4().hex[:16]}"
    initialize_schema(pg_dsn, schema=schema)
    try:
        yield schema
    finally:
        drop_schema(pg_dsn, schema)
