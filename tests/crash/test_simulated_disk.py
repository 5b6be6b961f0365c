"""The simulated disk keeps exactly what the seam's durability rules promise.

Each test states one claim.  The ``check_*`` functions hold the claims so the
mutant test at the end can run them against a disk that (wrongly) treats
everything as durable and show that they fail.
"""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from toolswap.faultinject.disk import (
    CRASH_MODES,
    Chooser,
    SimulatedCrash,
    SimulatedDisk,
    torn_cut_sizes,
)

from toolswap.fs import FileSystem, HardLinkedFileError, locked

D = "/s"


def fresh() -> SimulatedDisk:
    disk = SimulatedDisk()
    disk.makedirs(D)
    return disk


def durable_file(disk: SimulatedDisk, path: str, data: bytes) -> None:
    handle = disk.create_exclusive(path)
    disk.write(handle, data)
    disk.fsync(handle)
    disk.close(handle)
    disk.fsync_dir(D)


# ---------------------------------------------------------------- claims


def check_unsynced_write_lost(disk: SimulatedDisk) -> None:
    durable_file(disk, f"{D}/a", b"")
    handle = disk.open_append(f"{D}/a")
    disk.write(handle, b"volatile")
    disk.crash("drop")
    assert disk.read_file(f"{D}/a") == b""


def check_created_file_vanishes(disk: SimulatedDisk) -> None:
    handle = disk.create_exclusive(f"{D}/new")
    disk.write(handle, b"x")
    disk.fsync(handle)  # data synced, but the directory entry is not
    disk.crash("drop")
    assert disk.listdir(D) == []


def check_rename_reverts(disk: SimulatedDisk) -> None:
    durable_file(disk, f"{D}/old", b"1")
    disk.rename(f"{D}/old", f"{D}/new")
    disk.crash("drop")
    assert disk.listdir(D) == ["old"]


def check_unlink_reverts(disk: SimulatedDisk) -> None:
    durable_file(disk, f"{D}/a", b"keep")
    disk.unlink(f"{D}/a")
    disk.crash("drop")
    assert disk.snapshot().get(f"{D}/a") == b"keep"


def test_unsynced_write_is_lost_on_crash() -> None:
    check_unsynced_write_lost(fresh())


def test_synced_write_survives_crash_in_every_mode() -> None:
    for mode in CRASH_MODES:
        disk = fresh()
        durable_file(disk, f"{D}/a", b"durable")
        disk.crash(mode, 7)
        assert disk.read_file(f"{D}/a") == b"durable"


def test_created_but_directory_unsynced_file_vanishes_on_drop() -> None:
    check_created_file_vanishes(fresh())


def test_unsynced_rename_reverts() -> None:
    check_rename_reverts(fresh())


def test_unsynced_unlink_reverts() -> None:
    check_unlink_reverts(fresh())


def test_directory_fsync_makes_create_rename_unlink_durable() -> None:
    disk = fresh()
    durable_file(disk, f"{D}/a", b"a")
    durable_file(disk, f"{D}/b", b"b")
    disk.rename(f"{D}/a", f"{D}/c")
    disk.unlink(f"{D}/b")
    disk.fsync_dir(D)
    disk.crash("drop")
    assert disk.listdir(D) == ["c"]


def test_makedirs_is_durable() -> None:
    disk = SimulatedDisk()
    disk.makedirs("/x/y/z")
    disk.crash("drop")
    assert disk.listdir("/x/y") == ["z"]


def test_torn_prefix_respects_granularity() -> None:
    for granularity in (1, 512, 4096):
        seen: set[int] = set()
        for seed in range(60):
            disk = fresh()
            durable_file(disk, f"{D}/j", b"h" * 100)
            handle = disk.open_append(f"{D}/j")
            disk.write(handle, b"a" * 5000)
            disk.write(handle, b"b" * 3000)
            disk.crash("torn", seed, granularity=granularity)
            data = disk.read_file(f"{D}/j")
            size = len(data)
            assert data == (b"h" * 100 + b"a" * 5000 + b"b" * 3000)[:size]
            assert size in (100, 5100, 8100) or size % granularity == 0
            seen.add(size)
        if granularity > 1:
            assert seen <= {100, 5100, 8100, *range(0, 8100, granularity)}
        assert len(seen) > 2  # torn states really occur


def test_torn_cut_sizes_lists_aligned_boundaries() -> None:
    assert torn_cut_sizes(100, 1100, 512) == [100, 512, 1024, 1100]
    assert torn_cut_sizes(0, 3, 1) == [0, 1, 2, 3]


def test_dir_subset_keeps_order_consistent_subsets() -> None:
    outcomes: set[tuple[tuple[str, bytes | str | None], ...]] = set()
    for seed in range(200):
        disk = fresh()
        disk.create_exclusive(f"{D}/x")  # op 1 on name x
        disk.rename(f"{D}/x", f"{D}/y")  # op 2 on x and y: only after op 1
        disk.crash("dir_subset", seed)
        outcomes.add(tuple(sorted(disk.snapshot().items())))
    assert {tuple(p.rsplit("/", 1)[1] for p, _ in o if p != D) for o in outcomes} == {
        (),
        ("x",),
        ("y",),
    }


def test_dir_subset_may_keep_independent_later_operations() -> None:
    outcomes: set[tuple[str, ...]] = set()
    for seed in range(200):
        disk = fresh()
        durable_file(disk, f"{D}/a", b"a")
        disk.rename(f"{D}/a", f"{D}/b")  # op 1 on names a, b
        disk.create_exclusive(f"{D}/a")  # op 2 on name a: needs op 1 kept
        disk.unlink(f"{D}/b")  # op 3 on name b: needs op 1 kept
        disk.crash("dir_subset", seed)
        snap = disk.snapshot()
        if f"{D}/b" in snap:  # the rename survived: b is the old file
            assert snap[f"{D}/b"] == b"a"
            assert snap.get(f"{D}/a", b"") == b""
        outcomes.add(tuple(disk.listdir(D)))
    assert outcomes == {(), ("a",), ("b",), ("a", "b")}


def test_same_seed_same_post_crash_state() -> None:
    def run(seed: int) -> tuple[dict[str, bytes | str | None], tuple[int, ...]]:
        disk = fresh()
        durable_file(disk, f"{D}/j", b"x" * 10)
        handle = disk.open_append(f"{D}/j")
        for i in range(5):
            disk.write(handle, bytes([65 + i]) * 700)
            disk.create_exclusive(f"{D}/f{i}")
        disk.unlink(f"{D}/j")
        report = disk.crash(CRASH_MODES[seed % 3], seed)
        return disk.snapshot(), report.choices

    for seed in range(12):
        assert run(seed) == run(seed)
    assert len({repr(run(s)[0]) for s in range(12)}) > 3


def test_explicit_choice_sequence_replays_a_random_crash() -> None:
    def workload() -> SimulatedDisk:
        disk = fresh()
        durable_file(disk, f"{D}/j", b"")
        handle = disk.open_append(f"{D}/j")
        disk.write(handle, b"q" * 3000)
        disk.create_exclusive(f"{D}/n")
        return disk

    first = workload()
    report = first.crash("torn", 99)
    again = workload()
    again.crash("torn", list(report.choices))
    assert again.snapshot() == first.snapshot()


def test_chooser_accepts_callable_and_rejects_out_of_range() -> None:
    assert Chooser(lambda n: n - 1).choose(5) == 4
    with pytest.raises(ValueError):
        Chooser(lambda n: n).choose(5)


def test_create_exclusive_refuses_existing_entry() -> None:
    disk = fresh()
    durable_file(disk, f"{D}/a", b"")
    disk.make_symlink(f"{D}/link", "/nowhere")
    for name in ("a", "link"):
        with pytest.raises(FileExistsError):
            disk.create_exclusive(f"{D}/{name}")


def test_no_open_follows_a_symlink() -> None:
    disk = fresh()
    durable_file(disk, f"{D}/real", b"secret")
    disk.make_symlink(f"{D}/link", f"{D}/real")
    for opener in (disk.open_read, disk.open_append, disk.open_lock):
        with pytest.raises(OSError) as caught:
            opener(f"{D}/link")
        assert caught.value.errno == errno.ELOOP
    assert disk.lstat(f"{D}/link").is_symlink


@pytest.mark.parametrize("opener", ["open_append", "open_lock"])
def test_a_write_open_refuses_a_hard_linked_file_like_the_real_seam(opener: str) -> None:
    disk = fresh()
    durable_file(disk, f"{D}/outside", b"theirs")
    disk.make_hard_link(f"{D}/ours", f"{D}/outside")
    with pytest.raises(HardLinkedFileError, match="2 hard links") as caught:
        getattr(disk, opener)(f"{D}/ours")
    assert caught.value.errno == errno.EMLINK


def test_stat_counts_the_names_of_a_file() -> None:
    disk = fresh()
    durable_file(disk, f"{D}/a", b"x")
    disk.make_hard_link(f"{D}/b", f"{D}/a")
    assert (disk.lstat(f"{D}/a").nlink, disk.lstat(f"{D}/b").nlink) == (2, 2)
    disk.unlink(f"{D}/b")
    assert disk.lstat(f"{D}/a").nlink == 1


def test_renaming_over_a_second_name_leaves_the_file_one() -> None:
    disk = fresh()
    durable_file(disk, f"{D}/a", b"x")
    disk.make_hard_link(f"{D}/b", f"{D}/a")
    durable_file(disk, f"{D}/new", b"y")
    disk.rename(f"{D}/new", f"{D}/b")
    assert disk.lstat(f"{D}/a").nlink == 1


def test_a_crash_counts_the_names_the_durable_directories_keep() -> None:
    disk = fresh()
    durable_file(disk, f"{D}/a", b"x")
    disk.make_hard_link(f"{D}/b", f"{D}/a")
    disk.unlink(f"{D}/b")  # never made durable: the crash brings the name back
    disk.crash("drop")
    assert disk.lstat(f"{D}/a").nlink == 2


def test_quota_raises_enospc_after_a_partial_write() -> None:
    disk = fresh()
    disk.set_quota(10)
    handle = disk.create_exclusive(f"{D}/a")
    disk.write(handle, b"12345")
    with pytest.raises(OSError) as caught:
        disk.write(handle, b"abcdefgh")
    assert caught.value.errno == errno.ENOSPC
    assert disk.read_file(f"{D}/a") == b"12345abcde"


def test_injected_eio_fails_the_chosen_call_and_fsync_stays_volatile() -> None:
    disk = fresh()
    handle = disk.create_exclusive(f"{D}/a")
    disk.write(handle, b"data")
    disk.inject_error("fsync")
    with pytest.raises(OSError) as caught:
        disk.fsync(handle)
    assert caught.value.errno == errno.EIO
    disk.fsync_dir(D)
    disk.crash("drop")
    assert disk.read_file(f"{D}/a") == b""


def test_handles_are_invalid_after_crash() -> None:
    disk = fresh()
    handle = disk.open_append(f"{D}/a")
    disk.crash("drop")
    with pytest.raises(OSError) as caught:
        disk.write(handle, b"x")
    assert caught.value.errno == errno.EBADF
    with pytest.raises(OSError) as caught:
        disk.close(handle)
    assert caught.value.errno == errno.EBADF


def test_locks_are_released_by_crash() -> None:
    disk = fresh()
    handle = disk.open_lock(f"{D}/.lock")
    disk.flock(handle)
    disk.crash("drop")
    with locked(disk, f"{D}/.lock"):
        pass


def test_flock_excludes_other_threads() -> None:
    disk = fresh()
    order: list[str] = []

    def worker(name: str) -> None:
        with locked(disk, f"{D}/.lock"):
            order.append(f"{name}+")
            time.sleep(0.01)
            order.append(f"{name}-")

    threads = [threading.Thread(target=worker, args=(str(i),)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(order[i][:-1] == order[i + 1][:-1] for i in range(0, len(order), 2))


def test_armed_crash_point_raises_and_halts_until_crash() -> None:
    disk = fresh()
    disk.arm("p", nth=2)
    disk.crash_point("p")
    with pytest.raises(SimulatedCrash):
        disk.crash_point("p")
    assert not isinstance(SimulatedCrash(), Exception)
    with pytest.raises(SimulatedCrash):
        disk.listdir(D)  # the dead process does no more I/O
    disk.crash("drop")
    assert disk.listdir(D) == []
    assert disk.crash_points_seen == ["p", "p"]


def test_arm_io_crashes_before_the_kth_operation() -> None:
    disk = fresh()
    disk.arm_io(3)
    handle = disk.create_exclusive(f"{D}/a")  # 1
    disk.write(handle, b"x")  # 2
    with pytest.raises(SimulatedCrash):
        disk.fsync(handle)  # 3: not executed
    disk.crash("drop")
    assert disk.listdir(D) == []


def test_arm_io_mutating_only_skips_reads() -> None:
    disk = fresh()
    durable_file(disk, f"{D}/a", b"x")
    disk.arm_io(1, mutating_only=True)
    disk.lstat(f"{D}/a")
    disk.listdir(D)
    with pytest.raises(SimulatedCrash):
        disk.unlink(f"{D}/a")


def test_simulated_disk_satisfies_the_protocol() -> None:
    assert isinstance(SimulatedDisk(), FileSystem)


# ---------------------------------------------------------------- mutant


class _EverythingDurable(SimulatedDisk):
    """A wrong disk: every write and directory operation is durable at once."""

    def crash(self, *args: Any, **kwargs: Any) -> Any:
        with self._mutex:  # reboot without losing anything
            self._handles.clear()
            self._halted = False
        return None


@pytest.mark.parametrize(
    "claim",
    [
        check_unsynced_write_lost,
        check_created_file_vanishes,
        check_rename_reverts,
        check_unlink_reverts,
    ],
)
def test_claims_catch_a_disk_that_treats_everything_as_durable(
    claim: Callable[[SimulatedDisk], None],
) -> None:
    claim(fresh())
    mutant = _EverythingDurable()
    mutant.makedirs(D)
    with pytest.raises(AssertionError):
        claim(mutant)
