"""The file-system seam is the only place that touches durable storage."""

from __future__ import annotations

import ast
import errno
import os
import pathlib
import threading
import time

import pytest

from toolswap.fs import REAL_FS, FileSystem, HardLinkedFileError, OsFileSystem, locked

ROOT = pathlib.Path(__file__).resolve().parents[2]
SEAM = ROOT / "src" / "toolswap" / "fs.py"
# os/fcntl calls that create, change, sync or inspect durable state.
STORAGE_CALLS = {
    "open",
    "write",
    "fsync",
    "fdatasync",
    "rename",
    "replace",
    "unlink",
    "remove",
    "lstat",
    "stat",
    "ftruncate",
    "truncate",
    "mkdir",
    "makedirs",
    "rmdir",
    "listdir",
    "scandir",
    "pread",
    "pwrite",
    "flock",
    "lockf",
    "symlink",
    "link",
    "utime",
    "chmod",
}


def _storage_calls(path: pathlib.Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in {"os", "fcntl", "shutil"}
            and (node.func.attr in STORAGE_CALLS or node.func.value.id == "shutil")
        ):
            found.append(
                f"{path.relative_to(ROOT)}:{node.lineno} {node.func.value.id}.{node.func.attr}"
            )
    return found


# Scratch folders for stores under test are not session evidence: the
# conformance kit and the owner sources of the crash explorer make and remove
# them directly.  Nothing else may.
SCRATCH_ONLY = {"os.makedirs", "os.mkdir", "shutil.rmtree"}
SCRATCH_MODULES = ("src/toolswap/testing/", "faultinject/owner_source.py")

# A harness that runs a database server of its own makes the server's data
# folder, hands it to the server's user and removes it: the server's storage,
# never a session's (its one directory fsync goes through the seam).
SERVER_FOLDERS = {
    ("src/toolswap/owners/postgres_cluster.py", call)
    for call in ("os.makedirs", "os.mkdir", "os.chmod", "os.stat", "shutil.rmtree")
}

# File systems of their own: the forgetful FUSE mount (issue 33) stores what the
# processes on it write, below every seam, as the simulated disk does in memory.
# Nothing of a session goes through them but by a real process's own calls.
FILE_SYSTEMS = (
    "faultinject/_forgetful_tree.py",
    "faultinject/_forgetful_fuse.py",
    "faultinject/powerloss.py",
)

# Not storage at all: the command runner wakes its own select() by writing one
# byte to a self-pipe it made (no file, no path); the command line lists its
# own package folder (program code) to name its sub-commands without
# importing them.
NOT_STORAGE = {
    ("src/toolswap/command.py", "os.write"),
    ("src/toolswap/cli/__init__.py", "os.listdir"),
}


def test_only_the_seam_module_calls_storage_operations() -> None:
    offenders = []
    for folder in ("src/toolswap", "spec", "faultinject"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path != SEAM and not str(path.relative_to(ROOT)).startswith(FILE_SYSTEMS):
                offenders += _storage_calls(path)
    offenders = [
        o
        for o in offenders
        if not (o.startswith(SCRATCH_MODULES) and o.rsplit(" ", 1)[1] in SCRATCH_ONLY)
        and (o.split(":", 1)[0], o.rsplit(" ", 1)[1]) not in NOT_STORAGE | SERVER_FOLDERS
    ]
    assert offenders == []


def test_the_real_seam_satisfies_the_protocol() -> None:
    assert isinstance(REAL_FS, FileSystem)


def test_create_exclusive_never_replaces_an_existing_file(tmp_path: pathlib.Path) -> None:
    fs = OsFileSystem()
    target = tmp_path / "f"
    target.write_bytes(b"keep")
    try:
        fs.create_exclusive(str(target))
    except FileExistsError:
        pass
    else:  # pragma: no cover - the claim is broken
        raise AssertionError("exclusive create replaced a file")
    assert target.read_bytes() == b"keep"


def test_open_read_refuses_to_follow_a_symlink(tmp_path: pathlib.Path) -> None:
    (tmp_path / "secret").write_bytes(b"s")
    os.symlink(tmp_path / "secret", tmp_path / "link")
    try:
        OsFileSystem().open_read(str(tmp_path / "link"))
    except OSError:
        return
    raise AssertionError("open_read followed a symlink")  # pragma: no cover


@pytest.mark.parametrize("opener", ["open_append", "open_lock"])
def test_a_write_open_refuses_a_hard_linked_file_and_writes_nothing(
    tmp_path: pathlib.Path, opener: str
) -> None:
    outside = tmp_path / "outside"
    outside.write_bytes(b"someone else's\n")
    os.link(outside, tmp_path / "ours")
    with pytest.raises(HardLinkedFileError, match="2 hard links") as caught:
        getattr(OsFileSystem(), opener)(str(tmp_path / "ours"))
    assert caught.value.errno == errno.EMLINK
    assert outside.read_bytes() == b"someone else's\n"


def test_locked_excludes_a_second_holder(tmp_path: pathlib.Path) -> None:
    lock = str(tmp_path / "lock")
    inside: list[int] = []
    overlaps: list[int] = []

    def worker() -> None:
        for _ in range(20):
            with locked(REAL_FS, lock):
                inside.append(1)
                if len(inside) > 1:
                    overlaps.append(1)
                time.sleep(0.0005)
                inside.pop()

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlaps == []


def test_the_known_crash_points_are_exactly_those_in_the_sources() -> None:
    """TOOLSWAP_FAILPOINT is checked against CRASH_POINTS: the list must not drift."""
    import re
    from pathlib import Path

    import toolswap
    from toolswap.fs import CRASH_POINTS

    root = Path(toolswap.__file__).parent
    named: set[str] = set()
    for source in root.rglob("*.py"):
        named.update(re.findall(r"crash_point\(\s*[\"']([^\"']+)[\"']", source.read_text()))
    assert named == set(CRASH_POINTS)
