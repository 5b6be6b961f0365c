"""``toolswap reconcile --owner sqlite:PATH`` as a user sees it."""

from __future__ import annotations

import json
import os
import pathlib
import sqlite3

import pytest
from toolswap.spec.lease import LeaseState

from toolswap.cli import main
from toolswap.cli import reconcile as reconcile_cli
from toolswap.journal import ArtifactRetentionJournal
from toolswap.owners import uri
from toolswap.owners.sqlite import SQLiteOwner

from ..core._journal_support import make_artifact


def _setup(tmp_path: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    session = tmp_path / "s1"
    claim = make_artifact(session)
    journal = ArtifactRetentionJournal(session)
    journal.prepare(claim, "published")
    journal.prepare(claim, "absent")
    db = tmp_path / "memory.db"
    with SQLiteOwner(db) as owner:
        owner.publish("published", claim)
    return session, db


def test_reconcile_resolves_pending_leases(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session, db = _setup(tmp_path)
    assert main(["reconcile", "--owner", f"sqlite:{db}", "--session", str(session)]) == 0
    out = capsys.readouterr().out
    assert "committed" in out and "aborted" in out and "2 pending lease(s)" in out
    states = ArtifactRetentionJournal(session).recover().states
    assert dict(states) == {"published": LeaseState.COMMITTED, "absent": LeaseState.ABORTED}


def test_reconcile_json_is_idempotent(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session, db = _setup(tmp_path)
    argv = ["reconcile", "--owner", f"sqlite:{db}", "--session", str(session), "--json"]
    assert main(argv) == 0
    reports = json.loads(capsys.readouterr().out)["reports"]
    assert {r["transaction_id"]: r["status"] for r in reports} == {
        "published": "committed",
        "absent": "aborted",
    }
    assert str(tmp_path) not in json.dumps(reports)
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out) == {"reports": [], "left_pending": 0}


def test_a_missing_owner_database_is_an_error_not_an_absence(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session, _ = _setup(tmp_path)
    before = (session / "retention-leases.jsonl").read_bytes()
    argv = ["reconcile", "--owner", f"sqlite:{tmp_path / 'typo.db'}", "--session", str(session)]
    assert main(argv) == 2
    assert "does not exist" in capsys.readouterr().err
    assert (session / "retention-leases.jsonl").read_bytes() == before
    assert not (tmp_path / "typo.db").exists()


@pytest.mark.parametrize(
    "spec", ["postgres:{db}", "sqlite:", "{db}", ":{db}", "SQLITE:{db}", "sqlite:{dir}"]
)
def test_bad_owner_specs_get_one_clear_line_and_exit_2(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str], spec: str
) -> None:
    session, db = _setup(tmp_path)  # the database exists: only the spec is wrong
    before = (session / "retention-leases.jsonl").read_bytes()
    argv = ["reconcile", "--owner", spec.format(db=db, dir=tmp_path), "--session", str(session)]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("toolswap: error:") and captured.err.count("\n") == 1
    assert "Traceback" not in captured.err
    assert (session / "retention-leases.jsonl").read_bytes() == before


def test_an_owner_file_that_is_not_a_database_is_an_error(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session, _ = _setup(tmp_path)
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"plain text, not SQLite " * 50)
    assert main(["reconcile", "--owner", f"sqlite:{notes}", "--session", str(session)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("toolswap: error:") and err.count("\n") == 1
    assert str(tmp_path) not in err
    states = ArtifactRetentionJournal(session).recover().states
    assert set(states.values()) == {LeaseState.PREPARED}


def test_reconcile_on_a_corrupt_journal_exits_2(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session, db = _setup(tmp_path)
    path = session / "retention-leases.jsonl"
    path.write_bytes(b"garbage\n" + path.read_bytes())
    assert main(["reconcile", "--owner", f"sqlite:{db}", "--session", str(session)]) == 2
    assert "line 1: json" in capsys.readouterr().err


def test_reconcile_without_a_journal_examines_nothing_and_creates_nothing(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, db = _setup(tmp_path)
    empty = tmp_path / "empty-session"
    empty.mkdir()
    assert main(["reconcile", "--owner", f"sqlite:{db}", "--session", str(empty)]) == 0
    assert "0 pending lease(s) examined" in capsys.readouterr().out
    assert os.listdir(empty) == []


def test_reconcile_of_a_session_folder_that_does_not_exist_is_an_error(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, db = _setup(tmp_path)
    missing = tmp_path / "typo-session"
    assert main(["reconcile", "--owner", f"sqlite:{db}", "--session", str(missing)]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert not missing.exists()


def test_reconcile_help_describes_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reconcile", "--help"]) == 0
    out = capsys.readouterr().out
    assert "resolve pending leases against an owner" in out and "--deadline" in out


def test_the_busy_timeout_reaches_the_owner_and_a_locked_store_leaves_leases_pending(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    session, db = _setup(tmp_path)
    asked: list[float | None] = []

    def spy(spec: str, *, busy_timeout: float | None = None) -> object:
        asked.append(busy_timeout)
        return uri.open_owner(spec, busy_timeout=busy_timeout)

    monkeypatch.setattr(reconcile_cli, "open_owner", spy)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        argv = ["reconcile", "--owner", f"sqlite:{db}", "--session", str(session)]
        assert main([*argv, "--busy-timeout", "0.05", "--json"]) == 0
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert asked == [0.05]
    reports = json.loads(capsys.readouterr().out)["reports"]
    assert {r["status"] for r in reports} == {"pending_unknown"}
    states = ArtifactRetentionJournal(session).recover().states
    assert set(states.values()) == {LeaseState.PREPARED}


@pytest.mark.parametrize("value", ["0", "-1", "soon", "inf", "nan"])
def test_a_bad_busy_timeout_or_deadline_is_one_line(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    session, db = _setup(tmp_path)
    for option in ("--busy-timeout", "--deadline"):
        argv = ["reconcile", "--owner", f"sqlite:{db}", "--session", str(session), option, value]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"{option} wants a number of seconds" in err


def test_the_deadline_stops_cleanly_and_says_how_many_were_left(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    session, db = _setup(tmp_path)
    journal = ArtifactRetentionJournal(session)
    claim = journal.recover().transactions["absent"]
    journal.prepare(claim, "third")
    ticks = iter(range(0, 1000, 10))  # every look at the clock: 10 s later
    monkeypatch.setattr(reconcile_cli, "_clock", lambda: float(next(ticks)))
    argv = ["reconcile", "--owner", f"sqlite:{db}", "--session", str(session)]
    assert main([*argv, "--deadline", "25", "--json"]) == reconcile_cli.EXIT_DEADLINE
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert document["left_pending"] == 1 and len(document["reports"]) == 2
    assert captured.err == (
        "toolswap: error: deadline of 25s reached; 1 lease(s) left pending, not examined\n"
    )
    states = ArtifactRetentionJournal(session).recover().states
    assert dict(states) == {
        "published": LeaseState.COMMITTED,
        "absent": LeaseState.ABORTED,
        "third": LeaseState.PREPARED,
    }
