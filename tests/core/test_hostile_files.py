"""No file of ours is opened in a way that can block (issue: a FIFO in place of the journal).

A FIFO, a device or a directory where a session file belongs is hostile state:
every command answers at once with one error line (exit 2) and nothing hangs.
Each command runs in a child process under a time limit, so a regression
shows as a timeout, not as a hung suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolswap import ToolResultExternalizer
from toolswap.fs import REAL_FS, NotRegularFileError

LIMIT = 20.0  # seconds; every command below answers in well under one


def _toolswap(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolswap.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=LIMIT,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture
def session(tmp_path: Path) -> Path:
    ToolResultExternalizer(tmp_path / "s").externalize("x\n" * 40_000, "bash")
    return tmp_path / "s"


def _fifo_instead_of(path: Path) -> None:
    if path.exists():
        path.unlink()
    os.mkfifo(path)


@pytest.mark.parametrize(
    "command",
    [["journal", "verify"], ["journal", "show"], ["gc", "plan"], ["gc", "apply"]],
    ids=" ".join,
)
def test_a_fifo_journal_is_refused_at_once(session: Path, command: list[str]) -> None:
    _fifo_instead_of(session / "retention-leases.jsonl")
    done = _toolswap(*command, "--session", str(session), cwd=session.parent)
    assert done.returncode == 2
    # a FIFO where the journal belongs is corrupt state, not a failing disk
    (line,) = done.stderr.splitlines()
    assert line.startswith("toolswap: error: ")
    assert line.endswith("corrupt lease journal at line 1: not_regular (not a regular file)")


def test_a_fifo_high_water_mark_is_refused_at_once(session: Path) -> None:
    _fifo_instead_of(session / ".artifact-high-water")
    done = _toolswap(
        "run",
        "--session",
        str(session),
        "--",
        sys.executable,
        "-c",
        "print('y\\n' * 40000)",
        cwd=session.parent,
    )
    assert done.returncode == 2 and "not a regular file" in done.stderr


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("fifo", "not a regular file"),
        ("directory", "Is a directory"),
        ("symlink", "Too many levels of symbolic links"),
    ],
)
def test_a_hostile_session_lock_is_one_line_at_once(session: Path, kind: str, reason: str) -> None:
    lock = session / ".session.lock"
    if lock.exists():
        lock.unlink()
    if kind == "fifo":
        os.mkfifo(lock)
    elif kind == "directory":
        lock.mkdir()
    else:
        lock.symlink_to("/etc/passwd")
    done = _toolswap("gc", "apply", "--yes", "--session", str(session), cwd=session.parent)
    assert done.returncode == 2
    assert done.stderr == f"toolswap: error: cannot take the session lock: {reason}\n"


@pytest.mark.parametrize("special", ["fifo", "/dev/null", "directory"])
def test_the_seam_refuses_to_open_anything_but_a_regular_file(tmp_path: Path, special: str) -> None:
    if special == "fifo":
        path = str(tmp_path / "fifo")
        os.mkfifo(path)
    elif special == "directory":
        path = str(tmp_path)
    else:
        path = special
    for opener in (REAL_FS.open_read, REAL_FS.open_lock, REAL_FS.open_append):
        with pytest.raises((NotRegularFileError, IsADirectoryError)):
            opener(path)


def test_a_regular_file_opened_by_the_seam_blocks_normally_again(tmp_path: Path) -> None:
    import fcntl

    path = tmp_path / "f"
    path.write_bytes(b"data")
    handle = REAL_FS.open_read(str(path))
    try:
        assert not fcntl.fcntl(handle, fcntl.F_GETFL) & os.O_NONBLOCK
        assert REAL_FS.read(handle, 10) == b"data"
    finally:
        REAL_FS.close(handle)


def test_an_append_handle_still_appends_once_it_blocks_again(tmp_path: Path) -> None:
    import fcntl

    path = tmp_path / "f"
    path.write_bytes(b"first ")
    handle = REAL_FS.open_append(str(path))
    try:
        flags = fcntl.fcntl(handle, fcntl.F_GETFL)
        assert flags & os.O_APPEND and not flags & os.O_NONBLOCK
        os.lseek(handle, 0, os.SEEK_SET)
        REAL_FS.write(handle, b"second")
    finally:
        REAL_FS.close(handle)
    assert path.read_bytes() == b"first second"


# -- hard links: a link inside tool-results/ may be someone else's file (S7) -------------


def _linked_artifact(tmp_path: Path) -> tuple[ToolResultExternalizer, str, Path]:
    """An artifact of ours with a second hard link outside the session."""
    ext = ToolResultExternalizer(tmp_path / "s")
    ref = ext.externalize("secret line\n" * 5_000, "bash").artifact
    assert ref is not None
    outside = tmp_path / "elsewhere.txt"
    os.link(ref.path, outside)
    return ext, ref.source.source_id, outside


def test_a_hard_linked_artifact_is_never_read(tmp_path: Path) -> None:
    from toolswap.errors import ArtifactNotOwnedError

    ext, source_id, _ = _linked_artifact(tmp_path)
    with pytest.raises(ArtifactNotOwnedError, match="2 hard links"):
        ext.read_artifact(source_id)
    done = _toolswap("read", source_id, "--session", str(tmp_path / "s"), cwd=tmp_path)
    assert done.returncode == 2 and "hard links" in done.stderr and "secret" not in done.stdout


def test_a_hard_link_to_a_file_elsewhere_is_never_served(tmp_path: Path) -> None:
    ext = ToolResultExternalizer(tmp_path / "s")
    ext.externalize("ours\n" * 10_000, "bash")
    outside = tmp_path / "their-file.txt"
    outside.write_text("theirs\n" * 10_000)
    planted = ext.tool_results_dir + "/tool_result_002.txt"
    os.link(outside, planted)
    import hashlib

    digest = hashlib.sha256(outside.read_bytes()).hexdigest()
    source_id = f"artifact:s:tool_result_002.txt:{digest[:12]}"
    done = _toolswap("read", source_id, "--session", str(tmp_path / "s"), cwd=tmp_path)
    assert done.returncode == 2 and "hard links" in done.stderr and "theirs" not in done.stdout


def test_cleanup_never_deletes_a_hard_linked_file(tmp_path: Path) -> None:
    ext, _, outside = _linked_artifact(tmp_path)
    done = _toolswap(
        "gc",
        "apply",
        "--yes",
        "--ttl",
        "0s",
        "--json",
        "--session",
        str(tmp_path / "s"),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    import json

    [entry] = json.loads(done.stdout)["plan"]["entries"]
    assert entry["status"] == "denied" and "hard-linked" in entry["reason"]
    assert os.listdir(ext.tool_results_dir) == ["tool_result_001.txt"] and outside.exists()


def test_prepare_refuses_a_hard_linked_artifact(tmp_path: Path) -> None:
    from toolswap import ArtifactRetentionClaim, ArtifactRetentionJournal
    from toolswap.errors import ArtifactNotOwnedError

    ext, source_id, _ = _linked_artifact(tmp_path)
    [name] = os.listdir(ext.tool_results_dir)
    import hashlib

    digest = hashlib.sha256((Path(ext.tool_results_dir) / name).read_bytes()).hexdigest()
    claim = ArtifactRetentionClaim(source_id=source_id, content_sha256=digest)
    with pytest.raises(ArtifactNotOwnedError, match="not a regular file of ours"):
        ArtifactRetentionJournal(tmp_path / "s").prepare(claim, "t1")
