"""The PostgreSQL owner vs the floor of one durable row on the same connection.

Baseline: ``BEGIN; INSERT ...; COMMIT`` of a row of the same shape, on the
very connection the owner's pool uses, with ``synchronous_commit = on`` (what
any application pays to make one row durable).  The ratios are what the
advisory lock, the conflict check and the generation sequence cost on top:

* publish: lock, insert-or-nothing, commit;
* remove: lock, tombstone upsert, commit;
* fence + observe: take the session lock, read the row, release the lock.

Run with the server ``TOOLSWAP_POSTGRES_DSN`` names (``.ci/postgres-cluster
start``); skipped with that reason otherwise.
"""

from __future__ import annotations

import itertools
import os
import pathlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from toolswap.domain import ArtifactRetentionClaim
from toolswap.externalizer import ToolResultExternalizer

DSN_ENV = "TOOLSWAP_POSTGRES_DSN"


@pytest.fixture(scope="module")
def pg() -> Iterator[tuple[Any, Any, str]]:
    dsn = os.environ.get(DSN_ENV, "").strip()
    if not dsn:
        pytest.skip(f"no PostgreSQL server: set {DSN_ENV} (see .ci/postgres-cluster)")
    pytest.importorskip("psycopg", reason="psycopg is not installed (pip install '.[postgres]')")
    from toolswap.owners.postgres import PostgresOwner, initialize_schema

    schema = f"toolswap_bench_{uuid.uuid4().hex[:12]}"
    initialize_schema(dsn, schema=schema)
    owner = PostgresOwner(dsn, schema=schema)
    conn, _ = owner._checkout("benchmark")  # the pool's one connection, shared below
    conn.execute(
        f"CREATE TABLE {schema}.raw (id bytea PRIMARY KEY, kind text, source_id text, "
        "content_sha256 text, reference_count integer, generation bigint)"
    )
    owner._checkin(conn)
    try:
        yield owner, conn, schema
    finally:
        owner.close()
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture(scope="module")
def claim(tmp_path_factory: pytest.TempPathFactory) -> ArtifactRetentionClaim:
    session: pathlib.Path = tmp_path_factory.mktemp("pg") / "s"
    ext = ToolResultExternalizer(session, threshold_bytes=1, environ={})
    result = ext.externalize(b"benchmark artifact\n" * 100, "bench")
    assert result.artifact is not None
    return ArtifactRetentionClaim.from_memory_reference(result.artifact.for_memory())


def _raw_insert(pg: tuple[Any, Any, str], claim: ArtifactRetentionClaim) -> Any:
    _, conn, schema = pg
    ids = itertools.count()
    prefix = uuid.uuid4().hex[:8]
    sql = f"INSERT INTO {schema}.raw VALUES (%s, 'published', %s, %s, %s, %s)"

    def run() -> None:
        n = next(ids)
        conn.execute("BEGIN")
        conn.execute(sql, (f"{prefix}-{n}".encode(), claim.source_id, claim.content_sha256, 1, n))
        conn.execute("COMMIT")

    return run


@pytest.mark.benchmark(group="postgres-publish")
def test_postgres_publish(benchmark, pg, claim) -> None:  # type: ignore[no-untyped-def]
    owner = pg[0]
    ids = itertools.count()
    benchmark(lambda: owner.publish(f"p{next(ids)}", claim))
    assert len(owner._idle) == 1  # the same connection served every round


@pytest.mark.benchmark(group="postgres-publish")
def test_baseline_insert_commit_for_publish(benchmark, pg, claim) -> None:  # type: ignore[no-untyped-def]
    benchmark(_raw_insert(pg, claim))


@pytest.mark.benchmark(group="postgres-remove")
def test_postgres_remove(benchmark, pg, claim) -> None:  # type: ignore[no-untyped-def]
    owner = pg[0]
    ids = itertools.count()

    def setup() -> tuple[tuple[str], dict[str, Any]]:
        txn = f"r{next(ids)}"
        owner.publish(txn, claim)
        return (txn,), {}

    benchmark.pedantic(owner.remove, setup=setup, rounds=300, warmup_rounds=10)


@pytest.mark.benchmark(group="postgres-remove")
def test_baseline_insert_commit_for_remove(benchmark, pg, claim) -> None:  # type: ignore[no-untyped-def]
    benchmark.pedantic(_raw_insert(pg, claim), rounds=300, warmup_rounds=10)


@pytest.mark.benchmark(group="postgres-fence")
def test_postgres_fence_and_observe(benchmark, pg, claim) -> None:  # type: ignore[no-untyped-def]
    owner = pg[0]
    owner.publish("fenced", claim)

    def run() -> None:
        with owner.inspect_fenced("fenced") as seen:
            assert seen.source_id == claim.source_id

    benchmark(run)


@pytest.mark.benchmark(group="postgres-fence")
def test_baseline_insert_commit_for_fence(benchmark, pg, claim) -> None:  # type: ignore[no-untyped-def]
    benchmark(_raw_insert(pg, claim))
