"""Externalization survives a crash at every I/O operation and crash point, in every mode.

After each crash a fresh externalizer runs on the durable state.  The claims:
an externalization that returned left a fully durable artifact whose digest
verifies; one that did not return left no file or only a never-referenced
one; and a new externalization never overwrites an existing name (S6).
This test drives the disk directly (not through the explorer) so that the
two check each other.
"""

from __future__ import annotations

import contextlib
import hashlib
import posixpath
from collections.abc import Iterator
from typing import Any

import pytest
from toolswap.faultinject.disk import CRASH_MODES, SimulatedCrash, SimulatedDisk

from toolswap.errors import ArtifactWriteError
from toolswap.externalizer import ToolResultExternalizer
from toolswap.fs import FileSystem

SESSION = "/sessions/s1"
RESULTS = f"{SESSION}/tool-results"
OUTPUT = [f"chunk {i}\n".encode() * 300 for i in range(3)]  # three writes, 7.2 KB


def _externalizer(fs: FileSystem) -> ToolResultExternalizer:
    return ToolResultExternalizer(
        SESSION, fs=fs, clock=lambda: 1_700_000_000.0, threshold_bytes=1024, environ={}
    )


class _NoDirSync:
    """Mutant seam: forgets every directory fsync."""

    def __init__(self, disk: SimulatedDisk) -> None:
        self._disk = disk

    def __getattr__(self, name: str) -> Any:
        return getattr(self._disk, name)

    def fsync_dir(self, path: str) -> None:
        return None


def _files(disk: SimulatedDisk) -> dict[str, bytes]:
    prefix = RESULTS + "/"
    return {
        p[len(prefix) :]: d
        for p, d in disk.snapshot().items()
        if p.startswith(prefix) and isinstance(d, bytes)
    }


def _targets() -> Iterator[tuple[str, int | str]]:
    disk = SimulatedDisk()
    _externalizer(disk).externalize([b"old\n" * 400], "grep")  # an existing artifact
    start_io, start_points = disk.io_count, len(disk.crash_points_seen)
    _externalizer(disk).externalize(OUTPUT, "grep")
    for k in range(1, disk.io_count - start_io + 2):
        yield ("io", k)
    for name in disk.crash_points_seen[start_points:]:
        yield ("point", name)


def _check_one(target: tuple[str, int | str], mode: str, seed: int, wrap: Any = None) -> list[str]:
    problems: list[str] = []
    disk = SimulatedDisk()
    old = _externalizer(disk).externalize([b"old\n" * 400], "grep").artifact
    assert old is not None
    fs = disk if wrap is None else wrap(disk)
    kind, where = target
    if kind == "io":
        disk.arm_io(int(where))
    else:
        disk.arm(str(where))
    returned = None
    with contextlib.suppress(SimulatedCrash):
        returned = _externalizer(fs).externalize(OUTPUT, "grep").artifact
    disk.crash(mode, seed)
    before = _files(disk)
    fresh = _externalizer(disk)
    if before.get("tool_result_001.txt") != b"old\n" * 400:
        problems.append("the earlier artifact changed")
    if returned is not None:
        name = posixpath.basename(returned.path)
        data = before.get(name)
        if data != b"".join(OUTPUT):
            problems.append(f"{name} returned but not durable")
        elif hashlib.sha256(data).hexdigest() != returned.content_sha256:
            problems.append(f"{name} digest differs")
        else:
            fresh.verify_artifact(returned)
            assert fresh.read_artifact(returned, 0, 1) == "chunk 0\n"
    new = fresh.externalize([b"new\n" * 400], "grep").artifact
    assert new is not None
    if posixpath.basename(new.path) in before:
        problems.append(f"new externalization took existing name {new.path}")
    for name, data in before.items():
        if _files(disk).get(name) != data:
            problems.append(f"{name} was overwritten")
    return problems


@pytest.mark.parametrize("mode", CRASH_MODES)
def test_externalize_is_crash_safe_at_every_io_op_and_crash_point(mode: str) -> None:
    states = 0
    for target in _targets():
        for seed in range(4 if mode != "drop" else 1):
            assert _check_one(target, mode, seed) == [], (target, mode, seed)
            states += 1
    assert states > 10


def test_every_externalize_crash_point_is_a_target() -> None:
    points = {where for kind, where in _targets() if kind == "point"}
    assert points == {
        "externalize.before_high_water_fsync",
        "externalize.after_create",
        "externalize.before_fsync",
        "externalize.before_dir_fsync",
    }


def test_a_seam_without_directory_fsync_is_caught() -> None:
    caught = [
        problem
        for target in _targets()
        for problem in _check_one(target, "drop", 0, wrap=_NoDirSync)
    ]
    assert any("returned but not durable" in p for p in caught)


@pytest.mark.parametrize(
    "fault",
    ["quota", "write", "fsync", "fsync_dir"],
)
def test_a_failed_write_removes_the_never_referenced_file(fault: str) -> None:
    disk = SimulatedDisk()
    fresh = _externalizer(disk)
    fresh.externalize([b"old\n" * 400], "grep")
    if fault == "quota":
        disk.set_quota(1600 + 2000)  # the old artifact fits, the new one does not
    else:
        disk.inject_error(fault)
    with pytest.raises(ArtifactWriteError) as caught:
        fresh.externalize(OUTPUT, "grep")
    assert isinstance(caught.value.__cause__, OSError)
    assert sorted(_files(disk)) == ["tool_result_001.txt"]
    disk.crash("drop")
    assert sorted(_files(disk)) == ["tool_result_001.txt"]
