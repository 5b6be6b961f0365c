"""``toolswap gc`` loses nothing silently: a command still writing, a lease the journal lost.

Real processes, as a user runs them (docs/design.md section 7).  Each test
states one claim.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import time

import pytest

from toolswap.domain import ArtifactRetentionClaim, format_source_id
from toolswap.owners.sqlite import SQLiteOwner

TOOLSWAP = [sys.executable, "-m", "toolswap"]


def _toolswap(*args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*TOOLSWAP, *args], capture_output=True, text=True, timeout=120, check=False, **kw
    )  # type: ignore[call-overload, no-any-return]


def test_gc_during_a_slow_command_keeps_its_artifact_and_the_pointer_works(
    tmp_path: pathlib.Path,
) -> None:
    # the report: 40 KB, a quiet spell longer than the TTL, then the rest
    session = tmp_path / "s1"
    script = "import sys,time; print('a'*40000, flush=True); time.sleep(4); print('the rest')"
    run = subprocess.Popen(
        [*TOOLSWAP, "run", "--session", str(session), "--", sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        artifact = session / "tool-results" / "tool_result_001.txt"
        deadline = time.monotonic() + 30
        while not (artifact.exists() and artifact.stat().st_size >= 40000):
            assert time.monotonic() < deadline, "the command never wrote its first part"
            time.sleep(0.05)
        time.sleep(2.2)  # the last write is now older than the TTL below
        gc = _toolswap("gc", "apply", "--yes", "--ttl", "1s", "--session", str(session), "--json")
        assert gc.returncode == 0, gc.stderr
        entries = json.loads(gc.stdout)["plan"]["entries"]
        assert [(e["name"], e["status"]) for e in entries] == [
            ("tool_result_001.txt", "retained_writing")
        ]
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, err
    source_id = next(line.split()[-1] for line in out.splitlines() if "artifact:s1:" in line)
    source_id = source_id.strip(";,")
    read = _toolswap("read", "--session", str(session), source_id, "--offset", "1", "--limit", "1")
    assert read.returncode == 0, read.stderr
    assert "the rest" in read.stdout


def _old_artifact(session: pathlib.Path) -> tuple[str, str]:
    results = session / "tool-results"
    results.mkdir(parents=True)
    data = b"referenced only by the owner\n" * 10
    path = results / "tool_result_001.txt"
    path.write_bytes(data)
    os.utime(path, (1_000_000, 1_000_000))
    import hashlib

    digest = hashlib.sha256(data).hexdigest()
    return format_source_id("s1", "tool_result_001.txt", digest), digest


def test_gc_apply_with_an_owner_keeps_what_the_owner_still_references(
    tmp_path: pathlib.Path,
) -> None:
    # the journal knows no lease (lost, or never written here); the owner shows one
    session = tmp_path / "s1"
    source_id, digest = _old_artifact(session)
    db = tmp_path / "owner.db"
    with SQLiteOwner(db) as owner:
        owner.publish("t-lost", ArtifactRetentionClaim(source_id=source_id, content_sha256=digest))
    gc = _toolswap(
        "gc", "apply", "--yes", "--session", str(session), "--owner", f"sqlite:{db}", "--json"
    )
    assert gc.returncode == 0, gc.stderr
    (entry,) = json.loads(gc.stdout)["report"]["entries"]
    assert entry["status"] == "retained_referenced"
    assert "t-lost" in entry["reason"]
    assert (session / "tool-results" / "tool_result_001.txt").exists()


def test_gc_apply_without_an_owner_has_only_the_journal_to_go_by(tmp_path: pathlib.Path) -> None:
    # the limit the owner witness removes: the same session, no --owner, is deleted
    session = tmp_path / "s1"
    _old_artifact(session)
    gc = _toolswap("gc", "apply", "--yes", "--session", str(session), "--json")
    assert gc.returncode == 0, gc.stderr
    assert json.loads(gc.stdout)["report"]["counts"] == {"deleted": 1}


@pytest.mark.parametrize("spec", ["sqlite:{db}"])
def test_gc_apply_with_an_owner_that_cannot_answer_keeps_everything(
    tmp_path: pathlib.Path, spec: str
) -> None:
    session = tmp_path / "s1"
    _old_artifact(session)
    db = tmp_path / "owner.db"
    SQLiteOwner(db).close()
    holder = subprocess.Popen(  # another process holds the database's write lock
        [
            sys.executable,
            "-c",
            "import sqlite3,sys,time; c=sqlite3.connect(sys.argv[1], isolation_level=None); "
            "c.execute('BEGIN IMMEDIATE'); print('held', flush=True); time.sleep(30)",
            str(db),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        env = {**os.environ}
        gc = _toolswap(
            "gc",
            "apply",
            "--yes",
            "--session",
            str(session),
            "--owner",
            spec.format(db=db),
            "--busy-timeout",
            "0.5",
            "--json",
            env=env,
        )
    finally:
        holder.kill()
        holder.wait()
    assert gc.returncode == 0, gc.stderr
    (entry,) = json.loads(gc.stdout)["report"]["entries"]
    assert entry["status"] == "retained_unknown"
    assert "cannot tell" in entry["reason"]
    assert (session / "tool-results" / "tool_result_001.txt").exists()
