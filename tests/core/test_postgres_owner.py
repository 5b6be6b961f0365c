"""``PostgresOwner`` on a real server: the claims its docstring makes.

The owner promises themselves are checked by the conformance kit (see
``tests/conformance``); these tests pin the PostgreSQL-specific mechanisms:
the advisory-lock fence, the schema, the connection settings, the pool and
what messages may say.  Without a server they skip (they fail under CI).
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from toolswap.errors import OwnerStoreError, UsageError
from toolswap.owner import ArtifactPublicationRejected, ObservedState
from toolswap.owners.postgres import (
    SCHEMA_VERSION,
    PostgresOwner,
    dsn_secrets,
    initialize_schema,
)

from .._postgres import drop_schema, require_psycopg
from ._journal_support import make_artifact

require_psycopg()  # skips the module without the driver; fails under CI
import psycopg  # noqa: E402

pytestmark = pytest.mark.postgres


@pytest.fixture
def owner(pg_dsn: str, pg_schema: str) -> Any:
    with PostgresOwner(pg_dsn, schema=pg_schema) as handle:
        yield handle


def _claim(tmp_path: pathlib.Path, number: int = 1) -> Any:
    return make_artifact(tmp_path / "s1", f"output {number}\n".encode(), number)


def _schemas(dsn: str, name: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", (name,))
        return int(row.fetchone()[0])  # type: ignore[index]


def test_importing_the_owners_package_does_not_import_the_driver() -> None:
    code = "import sys, toolswap, toolswap.owners; print('psycopg' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_opening_an_uninitialized_schema_is_an_error_and_creates_nothing(pg_dsn: str) -> None:
    with pytest.raises(UsageError, match="not initialized"):
        PostgresOwner(pg_dsn, schema="toolswap_never_made")
    assert _schemas(pg_dsn, "toolswap_never_made") == 0


def test_initialize_is_idempotent_and_versioned(pg_dsn: str) -> None:
    schema = "toolswap_test_init_twice"
    try:
        first = initialize_schema(pg_dsn, schema=schema)
        second = initialize_schema(pg_dsn, schema=schema)
        assert (first.previous_version, first.version) == (0, SCHEMA_VERSION)
        assert (second.previous_version, second.created) == (SCHEMA_VERSION, False)
    finally:
        drop_schema(pg_dsn, schema)


def test_concurrent_initializations_all_succeed(pg_dsn: str) -> None:
    schema = "toolswap_test_init_race"
    code = (
        "import sys; from toolswap.owners.postgres import initialize_schema; "
        f"print(initialize_schema(sys.argv[1], schema={schema!r}).created)"
    )
    try:
        children = [
            subprocess.Popen(
                [sys.executable, "-c", code, pg_dsn], stdout=subprocess.PIPE, text=True
            )
            for _ in range(4)
        ]
        outputs = [child.communicate(timeout=60)[0].strip() for child in children]
        assert [child.returncode for child in children] == [0, 0, 0, 0]
        assert sorted(outputs) == ["False", "False", "False", "True"]
    finally:
        drop_schema(pg_dsn, schema)


def test_a_newer_schema_version_is_refused(pg_dsn: str, pg_schema: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"UPDATE {pg_schema}.toolswap_schema_version SET version = version + 1")
    with pytest.raises(UsageError, match="newer than this toolswap supports"):
        initialize_schema(pg_dsn, schema=pg_schema)
    with pytest.raises(UsageError, match="needs"):
        PostgresOwner(pg_dsn, schema=pg_schema)


@pytest.mark.parametrize("schema", ["", "Upper", "1abc", "a-b", "a;drop", "x" * 64])
def test_schema_names_are_validated(pg_dsn: str, schema: str) -> None:
    with pytest.raises(UsageError, match="schema name"):
        PostgresOwner(pg_dsn, schema=schema)


def test_two_schemas_in_one_database_are_two_stores(
    pg_dsn: str, pg_schema: str, tmp_path: pathlib.Path
) -> None:
    other = "toolswap_test_second_deployment"
    initialize_schema(pg_dsn, schema=other)
    try:
        with PostgresOwner(pg_dsn, schema=pg_schema) as a, PostgresOwner(pg_dsn, schema=other) as b:
            a.publish("t1", _claim(tmp_path))
            with b.inspect_fenced("t1") as seen:
                assert (seen.state, seen.sealed, seen.generation) == (
                    ObservedState.ABSENT,
                    False,
                    0,
                )
    finally:
        drop_schema(pg_dsn, other)


@pytest.mark.parametrize(
    "txn",
    ["nul\x00inside", "line\nbreak", "quote'\"", "é✓🙂", "✓" * 512],
    ids=["nul", "newline", "quotes", "unicode", "longest"],
)
def test_any_transaction_id_the_journal_accepts_is_stored_exactly(
    owner: PostgresOwner, tmp_path: pathlib.Path, txn: str
) -> None:
    claim = _claim(tmp_path)
    owner.publish(txn, claim)
    with owner.inspect_fenced(txn) as seen:
        assert (seen.transaction_id, seen.state) == (txn, ObservedState.PUBLISHED)
    with owner.inspect_fenced(txn[:-1] + "?") as other:  # a near twin is another id
        assert other.state is ObservedState.ABSENT


def test_generations_come_from_a_sequence_and_only_grow(
    owner: PostgresOwner, tmp_path: pathlib.Path
) -> None:
    claim = _claim(tmp_path)
    owner.publish("a", claim)
    published = owner.generation("a")
    owner.publish("a", claim)  # the same identity again: no change
    assert owner.generation("a") == published
    owner.publish("b", claim)
    owner.remove("a")
    removed = owner.generation("a")
    owner.remove("a")  # idempotent: the tombstone is not rewritten
    assert owner.generation("a") == removed
    assert 0 < published < owner.generation("b") < removed
    assert all(type(owner.generation(t)) is int for t in ("a", "b", "never"))


def test_the_fence_holds_back_a_publish_from_another_connection(
    pg_dsn: str, pg_schema: str, owner: PostgresOwner, tmp_path: pathlib.Path
) -> None:
    claim = _claim(tmp_path)
    outcome: list[object] = []
    with PostgresOwner(pg_dsn, schema=pg_schema) as other:

        def publish() -> None:
            try:
                other.publish("t1", claim)
                outcome.append("published")
            except ArtifactPublicationRejected:
                outcome.append("rejected")

        with owner.inspect_fenced("t1") as seen:
            writer = threading.Thread(target=publish)
            writer.start()
            writer.join(0.5)
            assert writer.is_alive() and outcome == []  # waiting on the advisory lock
            assert seen.seal_absence() is True  # the seal itself passes (same session)
        writer.join(30)
    assert outcome == ["rejected"]


def test_a_wait_behind_a_fence_that_times_out_is_maybe_written_not_rejected(
    pg_dsn: str, pg_schema: str, owner: PostgresOwner, tmp_path: pathlib.Path
) -> None:
    claim = _claim(tmp_path)
    with PostgresOwner(pg_dsn, schema=pg_schema, lock_timeout=0.2) as impatient:
        with owner.inspect_fenced("t1"):
            with pytest.raises(OwnerStoreError, match="lock timeout") as caught:
                impatient.publish("t1", claim)
            assert not isinstance(caught.value, ArtifactPublicationRejected)
            assert isinstance(caught.value.__cause__, psycopg.Error)
        impatient.publish("t1", claim)  # the fence is gone: it goes through now
    with owner.inspect_fenced("t1") as seen:
        assert seen.state is ObservedState.PUBLISHED


def test_a_fence_whose_session_dies_releases_its_lock_and_cannot_seal(
    pg_dsn: str, pg_schema: str, owner: PostgresOwner, tmp_path: pathlib.Path
) -> None:
    claim = _claim(tmp_path)
    with PostgresOwner(pg_dsn, schema=pg_schema) as other:
        with owner.inspect_fenced("t1") as seen:
            pid = seen._connection.info.backend_pid
            with psycopg.connect(pg_dsn, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            other.publish("t1", claim)  # the lock went with the session
            with pytest.raises(OwnerStoreError):
                seen.seal_absence()
        with other.inspect_fenced("t1") as now:
            assert (now.state, now.source_id) == (ObservedState.PUBLISHED, claim.source_id)


def test_connections_commit_synchronously_whatever_the_dsn_says(
    pg_dsn: str, pg_schema: str
) -> None:
    separator = "&" if "?" in pg_dsn else "?"
    lax = f"{pg_dsn}{separator}options=-csynchronous_commit%3Doff"
    with psycopg.connect(lax, autocommit=True) as plain:
        assert plain.execute("SHOW synchronous_commit").fetchone() == ("off",)
    with PostgresOwner(lax, schema=pg_schema) as owner:
        conn, _ = owner._checkout("test")
        assert conn.execute("SHOW synchronous_commit").fetchone() == ("on",)
        assert conn.execute("SHOW transaction_read_only").fetchone() == ("off",)
        owner._checkin(conn)


def test_a_standby_is_refused(pg_dsn: str, pg_schema: str) -> None:
    class LooksLikeAStandby(psycopg.Connection[Any]):
        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            if isinstance(query, str) and "pg_is_in_recovery()" in query:
                query = query.replace("pg_is_in_recovery()", "true")
            return super().execute(query, params, **kwargs)

    with pytest.raises(OwnerStoreError, match="standby"):
        PostgresOwner(pg_dsn, schema=pg_schema, connection_class=LooksLikeAStandby)


def test_one_object_is_shared_safely_by_threads(
    owner: PostgresOwner, tmp_path: pathlib.Path
) -> None:
    claims = [_claim(tmp_path, n) for n in range(1, 9)]
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(10):
                owner.publish(f"t{n}-{i}", claims[n])
                with owner.inspect_fenced(f"t{n}-{i}") as seen:
                    assert seen.source_id == claims[n].source_id
                if i % 2:
                    owner.remove(f"t{n}-{i}")
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert [owner.generation(f"t3-{i}") > 0 for i in range(10)] == [True] * 10
    assert len(owner._idle) <= 4


def test_a_closed_owner_refuses_calls(owner: PostgresOwner, tmp_path: pathlib.Path) -> None:
    owner.close()
    with pytest.raises(UsageError, match="closed"):
        owner.publish("t1", _claim(tmp_path))


def test_no_message_or_repr_names_the_dsn_password_or_host(pg_dsn: str, pg_schema: str) -> None:
    secrets = dsn_secrets(pg_dsn)
    assert len(secrets) >= 3  # the DSN, the password and the socket folder
    shown: list[str] = []
    owner = PostgresOwner(pg_dsn, schema=pg_schema)
    shown.append(repr(owner))
    with pytest.raises(UsageError) as missing:
        PostgresOwner(pg_dsn, schema="toolswap_absent_schema")
    shown.append(str(missing.value))
    wrong = pg_dsn.replace(secrets[1], "not-the-password")
    with pytest.raises(OwnerStoreError) as refused:
        PostgresOwner(wrong, schema=pg_schema)
    shown.append(str(refused.value))
    assert "password authentication failed" in shown[-1]
    owner.close()
    for text in shown:
        for secret in secrets:
            assert secret not in text


def test_the_pool_replaces_connections_the_server_dropped(
    pg_dsn: str, owner: PostgresOwner, tmp_path: pathlib.Path
) -> None:
    claim = _claim(tmp_path)
    owner.publish("t1", claim)  # leaves a pooled connection behind
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'toolswap-owner' AND pid <> pg_backend_pid()"
        )
    time.sleep(0.2)
    owner.publish("t2", claim)  # the dead connection is replaced, not reported
    with owner.inspect_fenced("t2") as seen:
        assert seen.state is ObservedState.PUBLISHED


def test_timeouts_must_be_positive(pg_dsn: str, pg_schema: str) -> None:
    for bad in (0, -1, float("nan"), float("inf"), True):
        with pytest.raises(UsageError):
            PostgresOwner(pg_dsn, schema=pg_schema, statement_timeout=bad)


def test_the_harness_needs_a_dsn(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    from toolswap.owners.postgres import PostgresHarness
    from toolswap.testing import Capability, HarnessError

    monkeypatch.delenv("TOOLSWAP_POSTGRES_DSN", raising=False)
    monkeypatch.delenv("TOOLSWAP_POSTGRES_RESTART", raising=False)
    with pytest.raises(HarnessError, match="TOOLSWAP_POSTGRES_DSN"):
        PostgresHarness(str(tmp_path))
    assert "TOOLSWAP_POSTGRES_RESTART" in PostgresHarness.unsupported[Capability.RESTART]
    monkeypatch.setenv("TOOLSWAP_POSTGRES_RESTART", "true")
    # Only power loss stays out: the named server's data lies where the kit cannot cut it.
    assert set(PostgresHarness.unsupported) == {Capability.POWER_LOSS}
    assert "PostgresClusterHarness" in PostgresHarness.unsupported[Capability.POWER_LOSS]


def test_harnesses_with_one_workdir_share_a_store_and_destroy_drops_it(
    pg_dsn: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolswap.owners.postgres import PostgresHarness

    monkeypatch.setenv("TOOLSWAP_POSTGRES_DSN", pg_dsn)
    first, second = PostgresHarness(str(tmp_path)), PostgresHarness(str(tmp_path))
    assert first.schema == second.schema
    a, b = first.open_owner(), second.open_owner()
    a.publish("t1", _claim(tmp_path))
    with b.inspect_fenced("t1") as seen:
        assert seen.state is ObservedState.PUBLISHED
    for handle in (a, b):
        handle.close()
    first.destroy()
    assert _schemas(pg_dsn, first.schema) == 0
    assert not os.path.exists(os.path.join(tmp_path, "owner.db"))


def test_a_missing_server_skips_locally_but_fails_under_ci(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from .._postgres import require_dsn

    monkeypatch.delenv("TOOLSWAP_POSTGRES_DSN", raising=False)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="TOOLSWAP_POSTGRES_DSN is unset"):
        require_dsn()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true but no PostgreSQL server"):
        require_dsn()


def test_a_harness_built_during_a_restart_waits_for_the_server(
    pg_dsn: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import toolswap.owners.postgres as module

    real = module.initialize_schema
    answers = ["the database system is starting up", "server closed the connection unexpectedly"]

    def flaky(dsn: str, **kwargs: Any) -> Any:
        if answers:
            cause = psycopg.OperationalError(f"connection failed: {answers.pop(0)}")
            raise OwnerStoreError("PostgreSQL owner: connecting failed") from cause
        return real(dsn, **kwargs)

    monkeypatch.setenv("TOOLSWAP_POSTGRES_DSN", pg_dsn)
    monkeypatch.setattr(module, "initialize_schema", flaky)
    harness = module.PostgresHarness(str(tmp_path))
    assert answers == []
    harness.destroy()
    answers.append("password authentication failed for user")  # not transient: no wait
    with pytest.raises(OwnerStoreError):
        module.PostgresHarness(str(tmp_path))
    assert answers == []
