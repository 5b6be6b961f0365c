"""``toolswap gc plan|apply`` as a user sees it."""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import subprocess
import sys
import time

import pytest

from toolswap.cli import main
from toolswap.cli.gc import parse_duration
from toolswap.domain import ArtifactRetentionClaim, format_source_id
from toolswap.errors import UsageError
from toolswap.journal import ArtifactRetentionJournal

OLD = time.time() - 10 * 86400


def _session(tmp_path: pathlib.Path, name: str = "s1") -> pathlib.Path:
    root = tmp_path / name
    (root / "tool-results").mkdir(parents=True)
    return root


def _put(root: pathlib.Path, number: int, data: bytes, mtime: float = OLD) -> str:
    name = f"tool_result_{number:03d}.txt"
    path = root / "tool-results" / name
    path.write_bytes(data)
    os.utime(path, (mtime, mtime))
    return name


def _gc(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["gc", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_plan_prints_a_table_of_decisions_and_deletes_nothing(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _session(tmp_path)
    old = _put(root, 1, b"old orphan")
    young = _put(root, 2, b"young", mtime=time.time())
    code, out, err = _gc("plan", "--session", str(root), capsys=capsys)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert any(old in line and "planned_delete" in line for line in lines)
    assert any(young in line and "retained_recent" in line for line in lines)
    assert lines[-1] == "plan: planned_delete 1, retained_recent 1"
    assert (root / "tool-results" / old).exists()


def test_apply_without_yes_is_a_dry_run(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _session(tmp_path)
    old = _put(root, 1, b"old orphan")
    code, out, _ = _gc("apply", "--session", str(root), capsys=capsys)
    assert code == 0 and "dry run" in out.splitlines()[-1]
    assert (root / "tool-results" / old).exists()


def test_apply_with_yes_deletes_old_orphans_only(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _session(tmp_path)
    old = _put(root, 1, b"old orphan")
    young = _put(root, 2, b"young", mtime=time.time())
    code, out, _ = _gc("apply", "--yes", "--session", str(root), capsys=capsys)
    assert code == 0 and out.splitlines()[-1] == "apply: deleted 1"
    assert not (root / "tool-results" / old).exists()
    assert (root / "tool-results" / young).exists()


def test_ttl_accepts_suffixes(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert [parse_duration(t) for t in ("90", "30s", "10m", "2h", "1d", "1w", "1.5h")] == [
        90,
        30,
        600,
        7200,
        86400,
        604800,
        5400,
    ]
    root = _session(tmp_path)
    name = _put(root, 1, b"two hours old", mtime=time.time() - 7200)
    _, out, _ = _gc("plan", "--session", str(root), "--ttl", "3h", "--json", capsys=capsys)
    assert json.loads(out)["plan"]["counts"] == {"retained_recent": 1}
    _, out, _ = _gc("plan", "--session", str(root), "--ttl", "90m", "--json", capsys=capsys)
    assert json.loads(out)["plan"]["entries"][0]["name"] == name
    assert json.loads(out)["plan"]["counts"] == {"planned_delete": 1}


@pytest.mark.parametrize("ttl", ["abc", "-5", "1y", "", "5 days", "nan", "1e999"])
def test_a_malformed_ttl_is_one_error_line(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str], ttl: str
) -> None:
    root = _session(tmp_path)
    code, out, err = _gc("plan", "--session", str(root), "--ttl", ttl, capsys=capsys)
    assert (code, out) == (2, "") and len(err.splitlines()) == 1 and "--ttl" in err
    with pytest.raises(UsageError):
        parse_duration(ttl)


def test_max_deletions_limits_the_plan(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _session(tmp_path)
    for number in range(1, 4):
        _put(root, number, b"orphan %d" % number, mtime=OLD + number)
    code, out, _ = _gc(
        "apply", "--yes", "--max-deletions", "2", "--session", str(root), "--json", capsys=capsys
    )
    document = json.loads(out)
    assert document["plan"]["counts"] == {"planned_delete": 2, "retained_limit": 1}
    assert document["report"]["counts"] == {"deleted": 2}
    assert os.listdir(root / "tool-results") == ["tool_result_003.txt"]


def test_a_negative_max_deletions_is_one_error_line(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _session(tmp_path)
    code, _, err = _gc("plan", "--max-deletions", "-1", "--session", str(root), capsys=capsys)
    assert code == 2 and len(err.splitlines()) == 1


def test_json_output_names_files_never_paths(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _session(tmp_path)
    _put(root, 1, b"orphan")
    code, out, _ = _gc("apply", "--session", str(root), "--json", capsys=capsys)
    document = json.loads(out)
    assert code == 0 and set(document) == {"plan", "report"}
    assert document["report"]["counts"] == {"dry_run": 1}
    assert str(tmp_path) not in out


def test_a_journal_lease_protects_through_the_cli(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _session(tmp_path)
    leased = _put(root, 1, b"leased")
    orphan = _put(root, 2, b"orphan")
    digest = hashlib.sha256(b"leased").hexdigest()
    claim = ArtifactRetentionClaim(
        source_id=format_source_id("s1", leased, digest), content_sha256=digest
    )
    ArtifactRetentionJournal(root).prepare(claim, "t1")
    code, out, _ = _gc("apply", "--yes", "--session", str(root), capsys=capsys)
    assert code == 0 and "claims: the lease journal" in out
    assert (root / "tool-results" / leased).exists()
    assert not (root / "tool-results" / orphan).exists()


def test_a_corrupt_journal_refuses_with_one_line_and_deletes_nothing(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _session(tmp_path)
    orphan = _put(root, 1, b"orphan")
    (root / "retention-leases.jsonl").write_bytes(b"{not a record}\n")
    code, out, err = _gc("apply", "--yes", "--session", str(root), capsys=capsys)
    assert (code, out) == (2, "") and len(err.splitlines()) == 1 and "refuses" in err
    assert (root / "tool-results" / orphan).exists()


def test_progress_goes_to_stderr_when_asked(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _session(tmp_path)
    _put(root, 1, b"x" * (2 * 1024 * 1024))
    code, _, err = _gc("plan", "--progress", "--session", str(root), capsys=capsys)
    assert code == 0 and "scanning [" in err and "1/1 files" in err
    code, _, err = _gc("plan", "--session", str(root), capsys=capsys)  # stderr is no TTY
    assert (code, err) == (0, "")


def test_the_session_defaults_to_the_environment_then_the_working_folder(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _session(tmp_path, "from-env")
    _put(root, 1, b"orphan")
    monkeypatch.setenv("TOOLSWAP_SESSION_DIR", str(root))
    _, out, _ = _gc("plan", capsys=capsys)
    assert out.startswith("session from-env:")
    monkeypatch.delenv("TOOLSWAP_SESSION_DIR")
    default = tmp_path / "work" / ".toolswap" / "default"
    (default / "tool-results").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "work")
    _, out, _ = _gc("plan", capsys=capsys)
    assert out.startswith("session default:")


def test_a_missing_session_is_an_error_and_creates_nothing(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _gc("apply", "--yes", "--session", str(tmp_path / "nope"), capsys=capsys)
    assert code == 2 and "no session" in err
    assert not (tmp_path / "nope").exists()


def test_gc_runs_as_a_program(tmp_path: pathlib.Path) -> None:
    root = _session(tmp_path)
    _put(root, 1, b"orphan")
    done = subprocess.run(
        [sys.executable, "-m", "toolswap.cli", "gc", "apply", "--yes", "--session", str(root)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "apply: deleted 1"
