"""``toolswap journal verify|show`` as a user sees them."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from toolswap.cli import main
from toolswap.journal import ArtifactRetentionJournal

from ..core._journal_support import make_artifact


def _session(tmp_path: pathlib.Path) -> pathlib.Path:
    session = tmp_path / "s1"
    claim = make_artifact(session)
    journal = ArtifactRetentionJournal(session)
    journal.prepare(claim, "done")
    journal.commit("done")
    journal.prepare(claim, "open\u2028id")
    return session


def _corrupt_line_two(session: pathlib.Path) -> None:
    path = session / "retention-leases.jsonl"
    lines = path.read_bytes().split(b"\n")
    lines[1] = lines[1].replace(b'"COMMITTED"', b'"RELEASED"')
    path.write_bytes(b"\n".join(lines))


def test_verify_reports_ok(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    session = _session(tmp_path)
    assert main(["journal", "verify", "--session", str(session)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ok: 3 records, 2 transactions, 1 pending")


def test_verify_json(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    session = _session(tmp_path)
    assert main(["journal", "verify", "--session", str(session), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document == {"ok": True, "record_count": 3, "pending": 1, "torn_tail": None}


def test_verify_names_the_first_bad_line_and_exits_2(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = _session(tmp_path)
    _corrupt_line_two(session)
    assert main(["journal", "verify", "--session", str(session)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert "line 2" in captured.err and "hash" in captured.err
    assert str(tmp_path) not in captured.err


@pytest.mark.parametrize("json_flag", [[], ["--json"]], ids=["text", "json"])
def test_show_on_a_bad_journal_exits_2_naming_the_line(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str], json_flag: list[str]
) -> None:
    session = _session(tmp_path)
    _corrupt_line_two(session)
    assert main(["journal", "show", "--session", str(session), *json_flag]) == 2
    captured = capsys.readouterr()
    if json_flag:
        document = json.loads(captured.out)
        assert (document["ok"], document["line"], document["reason"]) == (False, 2, "hash")
        assert (document["kind"], document["exit_status"]) == ("state", 2)
        assert captured.err.count("\n") == 1 and "line 2: hash" in captured.err
    else:
        assert captured.out == "" and captured.err.count("\n") == 1
        assert "line 2: hash" in captured.err


def test_verify_json_on_a_bad_journal(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = _session(tmp_path)
    _corrupt_line_two(session)
    assert main(["journal", "verify", "--session", str(session), "--json"]) == 2
    document = json.loads(capsys.readouterr().out)
    assert (document["ok"], document["line"], document["reason"]) == (False, 2, "hash")


def test_verify_reports_a_torn_tail(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = _session(tmp_path)
    with open(session / "retention-leases.jsonl", "ab") as handle:
        handle.write(b'{"event')
    assert main(["journal", "verify", "--session", str(session)]) == 0
    assert "torn tail: 7 bytes (ignored)" in capsys.readouterr().out


def test_verify_of_a_session_without_a_journal(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["journal", "verify", "--session", str(tmp_path / "empty")]) == 0
    assert capsys.readouterr().out.startswith("ok: 0 records")
    assert os.listdir(tmp_path / "empty") == []


@pytest.mark.parametrize("action", ["verify", "show"])
def test_a_session_folder_that_does_not_exist_is_an_error_not_zero_records(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str], action: str
) -> None:
    typo = tmp_path / "typo" / "dir"
    assert main(["journal", action, "--session", str(typo)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"toolswap: error: no session folder at {typo} (it does not exist)\n"
    assert not (tmp_path / "typo").exists()


def test_show_lists_transactions(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = _session(tmp_path)
    assert main(["journal", "show", "--session", str(session)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("COMMITTED 'done' artifact:s1:tool_result_001.txt:")
    assert out[1].startswith("PREPARED  'open\\u2028id'")
    assert out[-1] == "3 records, 1 claimed digests, 1 pending"


def test_show_json(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    session = _session(tmp_path)
    assert main(["journal", "show", "--session", str(session), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["states"] == {"done": "COMMITTED", "open\u2028id": "PREPARED"}
    assert document["pending_transaction_ids"] == ["open\u2028id"]
    assert document["transactions"]["done"]["reference_count"] == 1
    assert str(tmp_path) not in json.dumps(document)


def test_default_session_comes_from_the_environment(tmp_path: pathlib.Path) -> None:
    session = _session(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "toolswap.cli", "journal", "verify"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "TOOLSWAP_SESSION_DIR": str(session)},
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok: 3 records")


def test_verify_of_an_absurdly_nested_line_exits_2_naming_it(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = _session(tmp_path)
    with open(session / "retention-leases.jsonl", "ab") as handle:
        handle.write(b"[" * 60_000 + b"\n")
    assert main(["journal", "verify", "--session", str(session)]) == 2
    assert "line 4: json" in capsys.readouterr().err


def test_show_json_names_every_artifact_behind_a_digest(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = tmp_path / "s1"
    first = make_artifact(session, b"twin\n", 1)
    second = make_artifact(session, b"twin\n", 2)
    journal = ArtifactRetentionJournal(session)
    journal.prepare(first, "a")
    journal.prepare(second, "b")
    assert main(["journal", "show", "--session", str(session), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["claim_sources"] == {first.content_sha256: [first.source_id, second.source_id]}


def test_compact_says_what_it_did_and_keeps_the_live_leases(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`journal compact` prints one line (records before/after, live leases, where the old
    file went); `journal show` then lists the same leases on the same record count."""
    session = _session(tmp_path)
    assert main(["journal", "compact", "--session", str(session)]) == 0
    out = capsys.readouterr().out
    assert out == (
        "compacted: 3 records -> 0 in the live file (checkpoint 1, 3 records in the chain), "
        "2 live leases kept, old file archived to journal-archive/retention-leases-1.jsonl\n"
    )
    assert (session / "journal-archive" / "retention-leases-1.jsonl").exists()
    assert main(["journal", "show", "--session", str(session), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["states"] == {"done": "COMMITTED", "open\u2028id": "PREPARED"}
    assert document["record_count"] == 3


def test_compact_delete_old_and_nothing_to_compact(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--delete-old` unlinks the compacted file; compacting again with no new record is a
    one-line error (exit 2), not a second checkpoint."""
    session = _session(tmp_path)
    assert main(["journal", "compact", "--session", str(session), "--delete-old"]) == 0
    assert capsys.readouterr().out.endswith("old file deleted\n")
    assert not (session / "journal-archive" / "retention-leases-1.jsonl").exists()
    assert main(["journal", "compact", "--session", str(session)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nothing to compact" in err


def test_compact_refuses_a_corrupt_journal_with_exit_2(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A journal that does not verify is never compacted: exit 2, the reason, nothing written."""
    session = _session(tmp_path)
    _corrupt_line_two(session)
    assert main(["journal", "compact", "--session", str(session), "--json"]) == 2
    document = json.loads(capsys.readouterr().out)
    assert document["ok"] is False and document["reason"] == "hash"
    assert not (session / ".journal-checkpoints").exists()


def test_verify_reads_the_settled_index_and_exits_2_when_it_is_gone(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Recovery never needs the settled index (S5 after compaction); `journal verify` reads
    it all the same, so a deleted one is exit 2 (reason snapshot) before anything needs it."""
    session = _session(tmp_path)
    assert main(["journal", "compact", "--session", str(session)]) == 0
    assert main(["journal", "verify", "--session", str(session)]) == 0
    capsys.readouterr()
    (session / ".journal-settled-1").unlink()
    assert main(["journal", "verify", "--session", str(session), "--json"]) == 2
    document = json.loads(capsys.readouterr().out)
    assert document["reason"] == "snapshot" and "settled index 1" in document["detail"]
