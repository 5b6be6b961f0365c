"""What an independent mutation sample of cleanup.py found untested (issue 39).

Claims, one per test: a plan entry read from outside is refused with
``HostilePlanError`` when it has a key too many, a key too few, or is not a
mapping at all; apply keeps a file that vanishes between its ``lstat`` and the
re-read (``already_missing``, never a crash); and every reason apply gives for
keeping a changed file names what changed.
"""

from __future__ import annotations

import os
import pathlib
from typing import Any

import attrs
import pytest

from toolswap.cleanup import HostilePlanError, PlanEntry, apply_cleanup, plan_cleanup
from toolswap.fs import FileFacts, OsFileSystem

from .test_cleanup import DELETE, NOW, exists, make_session, put

NAME = "tool_result_001.txt"


def _entry_dict(tmp_path: pathlib.Path) -> dict[str, Any]:
    paths = make_session(tmp_path)
    put(paths, 1, b"an orphan\n")
    return plan_cleanup(paths, (), policy=DELETE, now=NOW).entry(NAME).to_dict()


def test_a_plan_entry_with_an_unknown_key_is_hostile(tmp_path: pathlib.Path) -> None:
    data = {**_entry_dict(tmp_path), "path": "/etc/passwd"}
    with pytest.raises(HostilePlanError, match=r"unknown \['path'\]"):
        PlanEntry.from_dict(data)


def test_a_plan_entry_missing_a_key_is_hostile_not_a_key_error(tmp_path: pathlib.Path) -> None:
    data = _entry_dict(tmp_path)
    del data["snapshot"]
    with pytest.raises(HostilePlanError, match=r"missing \['snapshot'\]"):
        PlanEntry.from_dict(data)


def test_a_plan_entry_that_is_not_a_mapping_is_hostile_not_a_type_error() -> None:
    with pytest.raises(HostilePlanError, match="wants a mapping, got list"):
        PlanEntry.from_dict([NAME, "planned_delete"])  # type: ignore[arg-type]


class _VanishesBeforeRead(OsFileSystem):
    """The real seam; the artifact is unlinked by someone else right after apply's lstat."""

    def __init__(self) -> None:
        self.armed = False

    def lstat(self, path: str) -> FileFacts:
        facts = super().lstat(path)
        if self.armed and path.endswith(NAME):
            self.armed = False
            os.unlink(path)
        return facts


def test_apply_reports_a_file_gone_between_lstat_and_read_as_already_missing(
    tmp_path: pathlib.Path,
) -> None:
    paths = make_session(tmp_path)
    put(paths, 1, b"an orphan\n")
    plan = plan_cleanup(paths, (), policy=DELETE, now=NOW)
    fs = _VanishesBeforeRead()
    fs.armed = True
    report = apply_cleanup(paths, plan, claims=(), fs=fs, now=NOW)
    assert (report.entry(NAME).status, report.entry(NAME).reason) == (
        "already_missing",
        "vanished during re-validation",
    )


class _Renumbered(OsFileSystem):
    """The real seam, seeing every file as owned by another uid (a chown since the plan)."""

    def lstat(self, path: str) -> FileFacts:
        facts = super().lstat(path)
        return attrs.evolve(facts, uid=facts.uid + 1) if path.endswith(NAME) else facts


def _kept_because(tmp_path: pathlib.Path, change: str) -> tuple[str, str]:
    paths = make_session(tmp_path)
    path = pathlib.Path(paths.tool_results) / NAME
    put(paths, 1, b"an orphan\n")
    plan = plan_cleanup(paths, (), policy=DELETE, now=NOW)
    fs = OsFileSystem()
    if change == "owner":
        fs = _Renumbered()
    elif change == "size":
        with path.open("ab") as handle:
            handle.write(b"grown since the plan\n")
        mtime = plan.entry(NAME).snapshot.mtime_ns  # type: ignore[union-attr]
        os.utime(path, ns=(mtime, mtime))
    elif change == "link":
        os.link(path, tmp_path / "second-name")
    report = apply_cleanup(paths, plan, claims=(), fs=fs, now=NOW)
    assert exists(paths, NAME)
    return report.entry(NAME).status, report.entry(NAME).reason


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("owner", f"now owned by uid {os.geteuid() + 1}"),
        ("size", "size, mtime, device or inode changed since the plan"),
        ("link", "hard-linked since the plan (2 links)"),
    ],
)
def test_apply_says_what_changed_about_a_file_it_keeps(
    tmp_path: pathlib.Path, change: str, reason: str
) -> None:
    assert _kept_because(tmp_path, change) == ("race_detected", reason)
