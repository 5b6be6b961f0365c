"""A session file of ours that is a hard link to a file outside: one line, exit 2, outside kept.

Issue 31: ``retention-leases.jsonl``, ``.session.lock`` or ``.artifact-high-water``
replaced by a hard link to a file outside the session made toolswap use (and
append to) that outside file.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from toolswap.high_water import HIGH_WATER_NAME
from toolswap.journal import ArtifactRetentionJournal
from toolswap.session import JOURNAL_NAME, LOCK_NAME

from ..core._journal_support import make_artifact


def _toolswap(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolswap.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _session(tmp_path: pathlib.Path) -> pathlib.Path:
    """A session with a lease, its lock, anchor and high-water mark."""
    session = tmp_path / "s"
    done = _toolswap("run", "--session", str(session), "--", sys.executable, "-c", BIG)
    assert done.returncode == 0, done.stderr
    ArtifactRetentionJournal(session).prepare(make_artifact(session, b"leased\n", 2), "t1")
    return session


BIG = "print('row\\n' * 40000)"


def _link_out(session: pathlib.Path, name: str, outside: pathlib.Path) -> bytes:
    os.replace(session / name, outside)
    os.link(outside, session / name)
    return outside.read_bytes()


def _one_line_exit_2(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr.startswith("toolswap: error: ") and done.stderr.count("\n") == 1
    assert "2 hard links" in done.stderr


def test_journal_verify_refuses_a_hard_linked_journal(tmp_path: pathlib.Path) -> None:
    session = _session(tmp_path)
    before = _link_out(session, JOURNAL_NAME, tmp_path / "outside")
    _one_line_exit_2(_toolswap("journal", "verify", "--session", str(session)))
    assert (tmp_path / "outside").read_bytes() == before


def test_gc_apply_refuses_a_hard_linked_journal_and_deletes_nothing(
    tmp_path: pathlib.Path,
) -> None:
    session = _session(tmp_path)
    before = _link_out(session, JOURNAL_NAME, tmp_path / "outside")
    artifacts = sorted(os.listdir(session / "tool-results"))
    done = _toolswap("gc", "apply", "--yes", "--ttl", "0s", "--session", str(session))
    _one_line_exit_2(done)
    assert sorted(os.listdir(session / "tool-results")) == artifacts
    assert (tmp_path / "outside").read_bytes() == before


@pytest.mark.parametrize("name", [LOCK_NAME, HIGH_WATER_NAME])
def test_run_refuses_a_hard_linked_file_it_writes(tmp_path: pathlib.Path, name: str) -> None:
    session = _session(tmp_path)
    before = _link_out(session, name, tmp_path / "outside")
    _one_line_exit_2(_toolswap("run", "--session", str(session), "--", sys.executable, "-c", BIG))
    assert (tmp_path / "outside").read_bytes() == before


def test_run_refuses_to_rebuild_the_mark_from_a_hard_linked_journal(
    tmp_path: pathlib.Path,
) -> None:
    session = _session(tmp_path)
    (session / HIGH_WATER_NAME).unlink()
    before = _link_out(session, JOURNAL_NAME, tmp_path / "outside")
    _one_line_exit_2(_toolswap("run", "--session", str(session), "--", sys.executable, "-c", BIG))
    assert (tmp_path / "outside").read_bytes() == before
