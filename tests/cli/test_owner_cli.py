"""``toolswap owner init``, owner specs, and the PostgreSQL examples of the docs.

Spec parsing and the SQLite store need no server.  The PostgreSQL tests need
one (they skip without it, and fail under CI).  The examples of
``docs/postgres.md`` and of the README's "PostgreSQL owner" section are
executed as written: shell blocks with bash, Python blocks with the
interpreter, SQL blocks through psycopg, in document order, in a scratch
folder, with a libpq service file named ``toolswap`` that points at the test
server (what a user's ``~/.pg_service.conf`` would do).
"""

from __future__ import annotations

import glob
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest
from toolswap.spec.lease import LeaseState

from toolswap.cli import main
from toolswap.errors import UsageError
from toolswap.journal import ArtifactRetentionJournal
from toolswap.owner import ObservedState
from toolswap.owners.postgres import PostgresOwner
from toolswap.owners.sqlite import SQLiteOwner
from toolswap.owners.uri import parse_owner_spec

from .._postgres import drop_schema
from ..core._journal_support import make_artifact

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("toolswap: error: ") and captured.err.count("\n") == 1
    return captured.err


# -- specs (no server) ----------------------------------------------------------


def test_a_postgres_spec_keeps_libpq_parameters_and_takes_out_the_schema() -> None:
    spec = parse_owner_spec(
        "postgresql://u:pw@db.internal:6432/memory?sslmode=require&schema=team_a"
    )
    assert (spec.kind, spec.schema) == ("postgresql", "team_a")
    assert spec.location == "postgresql://u:pw@db.internal:6432/memory?sslmode=require"
    assert "pw" not in repr(spec) and "db.internal" not in repr(spec)


@pytest.mark.parametrize(
    ("spec", "dsn", "schema"),
    [
        ("postgres://?service=toolswap", "postgres://?service=toolswap", "toolswap"),
        ("postgresql://?schema=a", "postgresql://", "a"),
        ("postgresql:///memory?schema=b&host=%2Fsock", "postgresql:///memory?host=%2Fsock", "b"),
    ],
)
def test_schema_defaults_and_url_forms(spec: str, dsn: str, schema: str) -> None:
    parsed = parse_owner_spec(spec)
    assert (parsed.location, parsed.schema) == (dsn, schema)


@pytest.mark.parametrize(
    "spec",
    [
        "postgres:/var/memory.db",
        "postgresql:db.internal",
        "postgresql://?schema=a&schema=b",
        "mysql://x",
        "hunter2@db.internal",
        "sqlite:",
        "",
    ],
)
def test_malformed_specs_are_usage_errors_that_do_not_echo_the_location(spec: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_owner_spec(spec)
    for private in ("hunter2", "db.internal", "/var/memory.db"):
        assert private not in str(caught.value)


@pytest.mark.parametrize(
    "spec", ["postgresql://?schema=", "postgresql://db.internal/m?schema=&x=1"]
)
def test_an_empty_schema_is_refused_not_read_as_the_default(spec: str) -> None:
    # the default schema may be another deployment's store
    with pytest.raises(UsageError, match="schema= is empty"):
        parse_owner_spec(spec)


def test_owner_init_on_an_unknown_service_says_so_in_one_line(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PGSERVICEFILE", str(tmp_path / "pg_service.conf"))
    (tmp_path / "pg_service.conf").write_text("[other]\nhost=/nowhere\n")
    assert main(["owner", "init", "postgresql://?service=no_such_service"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert "not in the service file" in err


# -- SQLite (no server) -----------------------------------------------------------


def test_owner_init_creates_a_sqlite_store_once(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "memory.db"
    assert main(["owner", "init", f"sqlite:{db}"]) == 0
    assert capsys.readouterr().out == "SQLite owner database: created (version 1)\n"
    assert main(["owner", "init", f"sqlite:{db}", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "result": "SQLite owner database: already at version 1"
    }
    session = tmp_path / "s1"
    make_artifact(session)
    ArtifactRetentionJournal(session).prepare(make_artifact(session), "t1")
    assert main(["reconcile", "--owner", f"sqlite:{db}", "--session", str(session)]) == 0
    assert "aborted" in capsys.readouterr().out


def test_owner_init_in_a_missing_folder_is_one_line_without_the_path(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no" / "such" / "memory.db"
    assert main(["owner", "init", f"sqlite:{missing}"]) == 2
    assert str(tmp_path) not in _one_error_line(capsys)
    assert not missing.parent.exists()


# -- PostgreSQL -----------------------------------------------------------------


def _spec(dsn: str, schema: str) -> str:
    return f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"


@pytest.mark.postgres
def test_owner_init_creates_a_postgres_schema_once_and_reconcile_uses_it(
    pg_dsn: str, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schema = "toolswap_test_cli_init"
    drop_schema(pg_dsn, schema)
    try:
        assert main(["owner", "init", _spec(pg_dsn, schema)]) == 0
        assert capsys.readouterr().out == (
            f"PostgreSQL owner schema '{schema}': created (version 1)\n"
        )
        assert main(["owner", "init", _spec(pg_dsn, schema)]) == 0
        assert capsys.readouterr().out.endswith("already at version 1\n")

        session = tmp_path / "s1"
        claim = make_artifact(session)
        journal = ArtifactRetentionJournal(session)
        journal.prepare(claim, "published")
        journal.prepare(claim, "absent")
        with PostgresOwner(pg_dsn, schema=schema) as owner:
            owner.publish("published", claim)
        argv = ["reconcile", "--owner", _spec(pg_dsn, schema), "--session", str(session)]
        assert main([*argv, "--json"]) == 0
        out = capsys.readouterr().out
        reports = json.loads(out)["reports"]
        assert {r["transaction_id"]: r["status"] for r in reports} == {
            "published": "committed",
            "absent": "aborted",
        }
        assert pg_dsn not in out
        assert dict(journal.recover().states) == {
            "published": LeaseState.COMMITTED,
            "absent": LeaseState.ABORTED,
        }
    finally:
        drop_schema(pg_dsn, schema)


@pytest.mark.postgres
def test_reconcile_against_an_uninitialized_schema_is_one_line_and_touches_nothing(
    pg_dsn: str, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = tmp_path / "s1"
    ArtifactRetentionJournal(session).prepare(make_artifact(session), "t1")
    before = (session / "retention-leases.jsonl").read_bytes()
    spec = _spec(pg_dsn, "toolswap_test_typo")
    assert main(["reconcile", "--owner", spec, "--session", str(session)]) == 2
    line = _one_error_line(capsys)
    assert "not initialized" in line and "toolswap owner init" in line and pg_dsn not in line
    assert (session / "retention-leases.jsonl").read_bytes() == before


@pytest.mark.postgres
def test_credentials_come_from_the_libpq_environment(
    pg_dsn: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg.conninfo

    parts = psycopg.conninfo.conninfo_to_dict(pg_dsn)
    monkeypatch.setenv("PGPASSWORD", str(parts["password"]))
    no_password = psycopg.conninfo.make_conninfo(
        "", **{k: v for k, v in parts.items() if k != "password"}
    )
    with PostgresOwner(no_password, schema=pg_schema) as owner:
        assert owner.generation("t1") == 0


# -- the documentation's examples, executed ----------------------------------------------

_BLOCK = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def _blocks(text: str) -> list[tuple[str, str]]:
    return [(lang, body) for lang, body in _BLOCK.findall(text) if lang in ("sh", "python", "sql")]


def _section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


@pytest.fixture
def service_env(pg_dsn: str, tmp_path: pathlib.Path) -> dict[str, str]:
    """A libpq service ``toolswap`` pointing at the test server, as the docs assume."""
    import psycopg.conninfo

    parts = psycopg.conninfo.conninfo_to_dict(pg_dsn)
    service = tmp_path / "pg_service.conf"
    service.write_text(
        f"[toolswap]\nhost={parts['host']}\ndbname={parts['dbname']}\nuser={parts['user']}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env.update(PGSERVICEFILE=str(service), PGPASSWORD=str(parts["password"]))
    return env


@pytest.fixture
def doc_names(pg_dsn: str) -> object:
    """The schema and role the docs' examples create; removed before and after."""
    import psycopg

    def clean() -> None:
        drop_schema(pg_dsn, "team_a")
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'toolswap_app'").fetchone():
                conn.execute("DROP OWNED BY toolswap_app")
                conn.execute("DROP ROLE toolswap_app")

    clean()
    yield
    clean()


def _run_blocks(
    blocks: list[tuple[str, str]], cwd: pathlib.Path, env: dict[str, str], dsn: str
) -> list[str]:
    import psycopg

    outputs = []
    for lang, body in blocks:
        if lang == "sql":
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(body)
            outputs.append("")
            continue
        command = ["bash", "-e", "-c", body] if lang == "sh" else [sys.executable, "-c", body]
        done = subprocess.run(
            command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, f"{lang} example failed:\n{body}\n{done.stdout}{done.stderr}"
        outputs.append(done.stdout)
    return outputs


@pytest.mark.postgres
@pytest.mark.usefixtures("doc_names")
def test_the_readme_postgres_section_runs_as_written(
    pg_dsn: str, tmp_path: pathlib.Path, service_env: dict[str, str]
) -> None:
    section = _section((ROOT / "README.md").read_text(), "PostgreSQL owner")
    blocks = _blocks(section)
    assert [lang for lang, _ in blocks] == ["sh"]
    # The section speaks of a host that already has its session folder (made by
    # its first `toolswap run`); reconcile refuses a folder that does not exist.
    (tmp_path / ".toolswap" / "default").mkdir(parents=True)
    [out] = _run_blocks(blocks, tmp_path, service_env, pg_dsn)
    assert out == (
        "PostgreSQL owner schema 'team_a': created (version 1)\n0 pending lease(s) examined\n"
    )


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.usefixtures("doc_names")
def test_the_postgres_deployment_page_runs_as_written(
    pg_dsn: str, tmp_path: pathlib.Path, service_env: dict[str, str]
) -> None:
    import psycopg
    import psycopg.conninfo

    blocks = _blocks((ROOT / "docs" / "postgres.md").read_text())
    assert [lang for lang, _ in blocks] == ["sh", "python", "sql", "sh"]
    (tmp_path / ".ci").symlink_to(ROOT / ".ci")  # the page's cluster commands run from a clone
    clusters_before = set(glob.glob("/tmp/toolswap-pg.*"))
    try:
        init, _, _, conformance = _run_blocks(blocks, tmp_path, service_env, pg_dsn)
    finally:
        for leaked in set(glob.glob("/tmp/toolswap-pg.*")) - clusters_before:
            subprocess.run([str(ROOT / ".ci" / "postgres-cluster"), "stop", leaked], check=False)
    assert init == (
        "PostgreSQL owner schema 'team_a': created (version 1)\n"
        "PostgreSQL owner schema 'team_a': already at version 1\n"
    )
    assert "O5.fence-holds-back-publish-process" in conformance
    assert set(glob.glob("/tmp/toolswap-pg.*")) == clusters_before  # stopped and removed

    # The Python example left its lease RELEASED and the id tombstoned.
    journal = ArtifactRetentionJournal(tmp_path / "sessions" / "host-a")
    assert dict(journal.recover().states) == {"host-a-1": LeaseState.RELEASED}

    # The role the SQL example grants can run the owner, and cannot delete a tombstone.
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute("ALTER ROLE toolswap_app PASSWORD 'app-password'")
    parts = psycopg.conninfo.conninfo_to_dict(pg_dsn)
    app = psycopg.conninfo.make_conninfo(
        host=parts["host"], dbname=parts["dbname"], user="toolswap_app", password="app-password"
    )
    claim = make_artifact(tmp_path / "s2")
    with PostgresOwner(app, schema="team_a") as owner:
        owner.publish("app-1", claim)
        owner.remove("app-1")
        with owner.inspect_fenced("host-a-1") as seen:
            assert (seen.state, seen.sealed) == (ObservedState.ABSENT, True)
    with (
        psycopg.connect(app, autocommit=True) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        conn.execute("DELETE FROM team_a.toolswap_references")


def test_owner_init_keeps_what_an_existing_sqlite_store_holds(tmp_path: pathlib.Path) -> None:
    db = tmp_path / "memory.db"
    with SQLiteOwner(db) as owner:
        owner.publish("t1", make_artifact(tmp_path / "s1"))
    assert main(["owner", "init", f"sqlite:{db}"]) == 0
    with SQLiteOwner(db, create=False) as owner, owner.inspect_fenced("t1") as seen:
        assert seen.state is ObservedState.PUBLISHED


def test_a_sqlite_store_of_a_newer_schema_version_is_refused(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import sqlite3

    db = tmp_path / "memory.db"
    assert main(["owner", "init", f"sqlite:{db}"]) == 0
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA user_version = 2")
    conn.close()
    capsys.readouterr()
    for argv in (["owner", "init", f"sqlite:{db}"], ["reconcile", "--owner", f"sqlite:{db}"]):
        assert main(argv) == 2
        assert "schema version 2; this toolswap knows version 1" in _one_error_line(capsys)


def test_a_sqlite_store_made_before_versions_counts_as_version_one(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import sqlite3

    from toolswap.owners.sqlite import TABLE

    db = tmp_path / "memory.db"
    SQLiteOwner(db).close()
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA user_version = 0")
        assert conn.execute(f"SELECT count(*) FROM {TABLE}").fetchone() == (0,)
    conn.close()
    assert main(["owner", "init", f"sqlite:{db}"]) == 0
    assert capsys.readouterr().out == "SQLite owner database: already at version 1\n"


def test_owner_init_creates_the_sqlite_database_and_its_wal_mode_0600(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = os.umask(0o022)  # the usual umask, which would give 0644
    try:
        assert main(["owner", "init", f"sqlite:{tmp_path / 'memory.db'}"]) == 0
        with SQLiteOwner(tmp_path / "memory.db", create=False) as owner:
            owner.generation("t")  # opens a connection: the -wal and -shm files exist now
            modes = {
                os.path.basename(p): os.stat(p).st_mode & 0o777
                for p in glob.glob(str(tmp_path / "memory.db*"))
            }
    finally:
        os.umask(old)
    assert modes["memory.db"] == 0o600
    assert set(modes.values()) == {0o600}


def test_an_existing_database_keeps_its_mode(tmp_path: pathlib.Path) -> None:
    db = tmp_path / "memory.db"
    SQLiteOwner(db).close()
    db.chmod(0o640)  # the operator's choice
    SQLiteOwner(db).close()
    assert db.stat().st_mode & 0o777 == 0o640
