"""An artifact still being written is protected like a leased one (S1.writing).

The writer takes an exclusive ``flock`` on the name it creates, under the
session lock, and keeps it until the artifact is complete and durable; cleanup
keeps every file whose mark is held (``retained_writing``), however old its
last write.  The artifact's age starts when it is complete.  Each test states
one claim (docs/design.md section 7).
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import time
from collections.abc import Iterator

from toolswap.cleanup import (
    ArtifactCleanupPolicy,
    CleanupPlan,
    FileSnapshot,
    PlanEntry,
    apply_cleanup,
    plan_cleanup,
)
from toolswap.externalizer import ToolResultExternalizer
from toolswap.session import SessionPaths

DELETE_ALL = ArtifactCleanupPolicy(orphan_ttl_seconds=0, dry_run=False)
FAR = time.time() + 10 * 86400  # every file is past any TTL then


def _ext(tmp_path: pathlib.Path) -> ToolResultExternalizer:
    return ToolResultExternalizer(tmp_path / "s1", environ={}, threshold_bytes=1024)


def _gc(paths: SessionPaths, **kw: object) -> tuple[dict[str, str], dict[str, str]]:
    plan = plan_cleanup(paths, (), policy=DELETE_ALL, now=FAR)
    report = apply_cleanup(paths, plan, claims=(), now=FAR, **kw)  # type: ignore[arg-type]
    return (
        {e.name: e.status for e in plan.entries},
        {e.name: e.status for e in report.entries},
    )


def test_cleanup_keeps_an_artifact_whose_command_is_still_writing(tmp_path: pathlib.Path) -> None:
    ext = _ext(tmp_path)
    seen: dict[str, object] = {}

    def output() -> Iterator[bytes]:
        yield b"first part\n" * 200  # over the threshold: the file exists now
        seen["during"] = _gc(ext.paths)  # a gc runs while the command is quiet
        yield b"the rest\n" * 200

    result = ext.externalize(output(), "grep")
    assert result.artifact is not None
    plan, report = seen["during"]  # type: ignore[misc]
    assert plan == {"tool_result_001.txt": "retained_writing"}
    assert report == {}
    assert pathlib.Path(result.artifact.path).read_bytes().endswith(b"the rest\n")


def test_apply_keeps_a_marked_file_that_a_plan_calls_an_orphan(tmp_path: pathlib.Path) -> None:
    # a plan is only a list of candidates: apply asks for the writer's mark itself
    ext = _ext(tmp_path)
    seen: dict[str, str] = {}

    def output() -> Iterator[bytes]:
        yield b"x\n" * 1000
        path = os.path.join(ext.paths.tool_results, "tool_result_001.txt")
        facts = os.stat(path)
        entry = PlanEntry(
            name="tool_result_001.txt",
            status="planned_delete",
            reason="an orphan, says a plan made elsewhere",
            snapshot=FileSnapshot(
                size=facts.st_size,
                mtime_ns=facts.st_mtime_ns,
                device=facts.st_dev,
                inode=facts.st_ino,
            ),
            sha256=hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest(),
        )
        plan = CleanupPlan(
            session_id="s1",
            directory=(
                os.stat(ext.paths.tool_results).st_dev,
                os.stat(ext.paths.tool_results).st_ino,
            ),
            planned_at=FAR,
            policy=DELETE_ALL,
            entries=(entry,),
        )
        report = apply_cleanup(ext.paths, plan, claims=(), now=FAR)
        seen.update({e.name: e.status for e in report.entries})
        yield b"y\n" * 1000

    result = ext.externalize(output(), "grep")
    assert seen == {"tool_result_001.txt": "retained_writing"}
    assert result.artifact is not None and os.path.exists(result.artifact.path)


def test_a_completed_artifact_is_deleted_once_past_the_ttl(tmp_path: pathlib.Path) -> None:
    # the mark goes with completion: a finished orphan is cleanup's again (L1)
    ext = _ext(tmp_path)
    result = ext.externalize(b"done\n" * 1000, "grep")
    assert result.artifact is not None
    plan, report = _gc(ext.paths)
    assert report == {"tool_result_001.txt": "deleted"}


def test_an_artifact_is_young_when_it_is_complete_whatever_its_last_write(
    tmp_path: pathlib.Path,
) -> None:
    ext = _ext(tmp_path)
    path = os.path.join(ext.paths.tool_results, "tool_result_001.txt")

    def output() -> Iterator[bytes]:
        yield b"early output\n" * 200
        os.utime(path, (1_000, 1_000))  # the last write is ancient: the command went quiet

    before = time.time()
    ext.externalize(output(), "grep")
    assert os.stat(path).st_mtime >= before - 1  # its age starts at completion
    plan = plan_cleanup(
        ext.paths, (), policy=ArtifactCleanupPolicy(orphan_ttl_seconds=3600), now=time.time()
    )
    assert plan.entry("tool_result_001.txt").status == "retained_recent"


def test_the_writers_mark_is_gone_once_the_pointer_is_returned(tmp_path: pathlib.Path) -> None:
    import fcntl

    ext = _ext(tmp_path)
    result = ext.externalize(b"z\n" * 1000, "grep")
    assert result.artifact is not None
    handle = os.open(result.artifact.path, os.O_RDONLY)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)  # nobody holds it any more
    finally:
        os.close(handle)
