"""Differential claim: the forgetful file system keeps and tears what the simulated disk does.

The same random program runs on :class:`SimulatedDisk` and on the forgetful
file system's state (:class:`ForgetfulTree`, no kernel in between); then both
lose power in the same mode with the same seed.  Before the cut, what programs
see and what is durable agree (and the backing folder holds exactly the durable
state); after it, the backing folder holds what the simulated disk kept, and
both report the same crash (the same choices, operations kept and bytes torn).
The same check through a real mount is in ``test_powerloss_fs.py``.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from toolswap.faultinject._forgetful_tree import PRIVATE_NAME, ForgetfulTree
from toolswap.faultinject.disk import Chooser, SimulatedDisk

from ._powerloss_programs import (
    DiskSeam,
    TreeSeam,
    folder_snapshot,
    modes,
    programs,
    run,
)


def _both(program: list[tuple[Any, ...]], backing: str) -> tuple[SimulatedDisk, ForgetfulTree]:
    disk, tree = SimulatedDisk(), ForgetfulTree(backing)
    assert run(DiskSeam(disk), program) == run(TreeSeam(tree), program)
    return disk, tree


@given(programs)
def test_before_a_cut_programs_see_the_same_files_and_the_backing_holds_the_durable_ones(
    program: list[tuple[Any, ...]],
) -> None:
    with tempfile.TemporaryDirectory() as backing:
        disk, tree = _both(program, backing)
        assert tree.snapshot() == disk.snapshot()
        assert folder_snapshot(backing) == disk.snapshot(durable=True)
        assert tree.unsynced() == disk.unsynced()


@given(programs, modes, st.integers(0, 2**32))
def test_a_cut_keeps_what_the_simulated_disk_keeps_with_the_same_seed(
    program: list[tuple[Any, ...]], mode: str, seed: int
) -> None:
    with tempfile.TemporaryDirectory() as backing:
        disk, tree = _both(program, backing)
        expected = disk.crash(mode, Chooser(seed))
        assert tree.power_cut(mode, Chooser(seed)) == expected
        assert folder_snapshot(backing) == disk.snapshot()
        assert not os.path.exists(os.path.join(backing, PRIVATE_NAME))


@given(programs, st.integers(0, 2**32))
def test_a_remount_after_a_cut_shows_what_the_cut_kept(
    program: list[tuple[Any, ...]], seed: int
) -> None:
    with tempfile.TemporaryDirectory() as backing:
        disk, tree = _both(program, backing)
        disk.crash("dir_subset", Chooser(seed))
        tree.power_cut("dir_subset", Chooser(seed))
        assert ForgetfulTree(backing).snapshot() == disk.snapshot()


def test_every_mode_is_met_by_the_programs_with_something_to_lose(tmp_path: Any) -> None:
    """The differential tests are not vacuous: a fixed program loses, keeps and tears."""
    program = [
        ("makedirs", "d"),
        ("create_exclusive", "d/a"),
        ("write", 0, b"x" * 600),
        ("fsync", 0),
        ("write", 0, b"y" * 600),
        ("rename", "d/a", "d/b"),
    ]
    reports = {}
    for mode in ("drop", "torn", "dir_subset"):
        backing = tmp_path / mode
        backing.mkdir()
        disk, tree = _both(program, str(backing))
        reports[mode] = tree.power_cut(mode, Chooser([1, 1, 1, 5]))
        assert reports[mode] == disk.crash(mode, Chooser([1, 1, 1, 5]))
    assert reports["drop"].dir_ops_lost == 2 and reports["drop"].bytes_lost == 600
    assert reports["torn"].files_torn == 1
    assert reports["dir_subset"].dir_ops_kept >= 1


def test_a_dropped_directory_operation_drops_every_later_one_on_its_names(tmp_path: Any) -> None:
    disk, tree = _both([("create_exclusive", "a"), ("rename", "a", "b")], str(tmp_path))
    report = tree.power_cut("dir_subset", Chooser([0, 1]))  # drop the create, keep the rename?
    assert report == disk.crash("dir_subset", Chooser([0, 1]))
    assert folder_snapshot(str(tmp_path)) == {} and report.dir_ops_lost == 2


def test_an_unknown_mode_is_refused_before_anything_is_lost(tmp_path: Any) -> None:
    tree = ForgetfulTree(str(tmp_path))
    with pytest.raises(ValueError, match="unknown crash mode"):
        tree.power_cut("reorder")
    assert tree.state == "running"
