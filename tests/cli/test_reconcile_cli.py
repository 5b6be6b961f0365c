"""``toolswap reconcile --owner sqlite:PATH`` as a user sees it."""

from __future__ import annotations

import json
import pathlib

import pytest

from toolswap.cli import main
from toolswap.journal import ArtifactRetentionJournal, Phase
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
    assert dict(states) == {"published": Phase.COMMITTED, "absent": Phase.ABORTED}


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
    assert json.loads(capsys.readouterr().out) == {"reports": []}


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


@pytest.mark.parametrize("spec", ["postgres:db", "sqlite:", "memory.db"])
def test_unsupported_owner_specs_are_refused(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str], spec: str
) -> None:
    session, _ = _setup(tmp_path)
    assert main(["reconcile", "--owner", spec, "--session", str(session)]) == 2
    assert capsys.readouterr().err.startswith("toolswap: error:")


def test_reconcile_on_a_corrupt_journal_exits_2(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session, db = _setup(tmp_path)
    path = session / "retention-leases.jsonl"
    path.write_bytes(b"garbage\n" + path.read_bytes())
    assert main(["reconcile", "--owner", f"sqlite:{db}", "--session", str(session)]) == 2
    assert "line 1: json" in capsys.readouterr().err
