"""The forgetful mount, on its own: what a power cut keeps, for real processes.

Each test writes through a real FUSE mount (:class:`ForgetfulMount`), cuts the
power, and looks at the remounted file system.  The rules under test are the
module docstring's of :mod:`toolswap.faultinject.powerloss`.  The tests skip
without FUSE and fail without it under ``CI=true`` (``_fuse.require_mount``).
"""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from toolswap.faultinject.disk import Chooser, SimulatedDisk
from toolswap.faultinject.powerloss import ForgetfulMount, is_mounted

from ._fuse import fsync_dir, require_mount, server_processes, wait_until, write_file
from ._powerloss_programs import DiskSeam, MountSeam, folder_snapshot, modes, programs, run


@pytest.fixture
def forgetful(tmp_path: Path) -> Iterator[ForgetfulMount]:
    """A forgetful mount of an empty folder, unmounted after the test whatever happens."""
    require_mount()
    backing = tmp_path / "backing"
    backing.mkdir()
    with ForgetfulMount(backing) as mount:
        yield mount


def _read(path: Path | str) -> bytes:
    return Path(path).read_bytes()


def _durable_file(mount: ForgetfulMount, name: str, data: bytes) -> Path:
    path = Path(mount.path) / name
    write_file(path, data, fsync=True)
    fsync_dir(mount.path)
    return path


# -- the rules, one at a time ------------------------------------------------------------------


def test_a_file_written_fsynced_and_named_durably_survives_a_cut(forgetful: ForgetfulMount) -> None:
    path = _durable_file(forgetful, "kept.txt", b"durable bytes")
    forgetful.power_cut("drop")
    assert _read(path) == b"durable bytes"


def test_data_written_without_fsync_is_gone_after_a_cut(forgetful: ForgetfulMount) -> None:
    path = _durable_file(forgetful, "f.txt", b"old")
    with open(path, "ab") as handle:
        handle.write(b" and new")
    assert _read(path) == b"old and new"
    forgetful.power_cut("drop")
    assert _read(path) == b"old"


def test_a_created_file_without_a_directory_fsync_is_gone(forgetful: ForgetfulMount) -> None:
    path = Path(forgetful.path) / "new.txt"
    write_file(path, b"its data was fsynced, its name was not", fsync=True)
    forgetful.power_cut("drop")
    assert not path.exists()


def test_a_directory_fsync_keeps_the_name_but_not_unsynced_data(forgetful: ForgetfulMount) -> None:
    path = Path(forgetful.path) / "named.txt"
    write_file(path, b"never fsynced", fsync=False)
    fsync_dir(forgetful.path)
    forgetful.power_cut("drop")
    assert _read(path) == b""


def test_a_rename_without_a_directory_fsync_is_undone(forgetful: ForgetfulMount) -> None:
    source = _durable_file(forgetful, "source", b"new version")
    target = _durable_file(forgetful, "target", b"old version")
    os.rename(source, target)
    forgetful.power_cut("drop")
    assert (_read(source), _read(target)) == (b"new version", b"old version")


def test_a_rename_with_a_directory_fsync_stays(forgetful: ForgetfulMount) -> None:
    source = _durable_file(forgetful, "source", b"new version")
    target = _durable_file(forgetful, "target", b"old version")
    os.rename(source, target)
    fsync_dir(forgetful.path)
    forgetful.power_cut("drop")
    assert not source.exists() and _read(target) == b"new version"


def test_an_unlink_without_a_directory_fsync_is_undone(forgetful: ForgetfulMount) -> None:
    path = _durable_file(forgetful, "victim", b"still here")
    path.unlink()
    forgetful.power_cut("drop")
    assert _read(path) == b"still here"


def test_a_new_directory_needs_its_parents_fsync(forgetful: ForgetfulMount) -> None:
    made = Path(forgetful.path) / "made"
    synced = Path(forgetful.path) / "synced"
    made.mkdir()
    synced.mkdir()
    fsync_dir(forgetful.path)  # names both
    (Path(forgetful.path) / "lost").mkdir()
    forgetful.power_cut("drop")
    assert sorted(os.listdir(forgetful.path)) == ["made", "synced"]


def test_an_fdatasync_makes_data_durable_like_fsync(forgetful: ForgetfulMount) -> None:
    path = _durable_file(forgetful, "f", b"")
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, b"datasynced")
        os.fdatasync(fd)
    finally:
        os.close(fd)
    forgetful.power_cut("drop")
    assert _read(path) == b"datasynced"


def test_an_o_dsync_write_is_durable_when_it_returns(forgetful: ForgetfulMount) -> None:
    path = _durable_file(forgetful, "f", b"")
    fd = os.open(path, os.O_WRONLY | os.O_DSYNC)
    try:
        os.write(fd, b"synchronous")
    finally:
        os.close(fd)
    forgetful.power_cut("drop")
    assert _read(path) == b"synchronous"


def test_msync_makes_mapped_writes_durable(forgetful: ForgetfulMount) -> None:
    path = _durable_file(forgetful, "mapped", b"\0" * 4096)
    with open(path, "r+b") as handle, mmap.mmap(handle.fileno(), 4096) as mapping:
        mapping[:6] = b"mapped"
        mapping.flush()  # msync(MS_SYNC)
    forgetful.power_cut("drop")
    assert _read(path)[:6] == b"mapped"


def test_sync_and_syncfs_make_nothing_durable(forgetful: ForgetfulMount) -> None:
    path = _durable_file(forgetful, "f", b"old")
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, b"new", 0)
        os.sync()
        assert ctypes.CDLL(None, use_errno=True).syncfs(fd) == 0
    finally:
        os.close(fd)
    forgetful.power_cut("drop")
    assert _read(path) == b"old"


def test_the_backing_folder_never_holds_unsynced_data(forgetful: ForgetfulMount) -> None:
    path = _durable_file(forgetful, "f", b"durable")
    with open(path, "ab") as handle:
        handle.write(b"+volatile")
    (Path(forgetful.path) / "unnamed").write_bytes(b"x")
    assert folder_snapshot(forgetful.backing) == {"/f": b"durable"}


def test_torn_mode_keeps_an_aligned_prefix_of_the_unsynced_writes(tmp_path: Path) -> None:
    require_mount()
    written = bytes(range(256)) * 32  # 8 KiB, appended unsynced to a durable empty file
    kept = set()
    for seed in range(4):
        backing = tmp_path / f"b{seed}"
        backing.mkdir()
        with ForgetfulMount(backing, control=False) as mount:
            path = _durable_file(mount, "f", b"")
            path.write_bytes(written)
            mount.power_cut("torn", seed, granularity=512)
            data = _read(path)
        assert written.startswith(data) and len(data) % 512 == 0
        kept.add(len(data))
    assert len(kept) > 1  # the seed picks the cut


def _cut_once(backing: Path, mode: str, seed: int) -> tuple[Any, dict[str, bytes | None]]:
    with ForgetfulMount(backing, control=False) as mount:
        root = Path(mount.path)
        (root / "d").mkdir()
        fsync_dir(root)
        for index in range(6):
            write_file(root / "d" / f"f{index}", bytes([65 + index]) * 3000, fsync=index % 2 == 0)
        os.rename(root / "d" / "f0", root / "d" / "g0")
        cut = mount.power_cut(mode, seed)
        return cut.report, folder_snapshot(mount.path)


@pytest.mark.parametrize("mode", ["torn", "dir_subset"])
def test_the_same_seed_keeps_the_same_state(tmp_path: Path, mode: str) -> None:
    require_mount()
    outcomes = []
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        outcomes.append(_cut_once(tmp_path / name, mode, 7))
    assert outcomes[0] == outcomes[1] and outcomes[0][0].choices


def test_a_cut_kills_the_processes_using_the_mount(forgetful: ForgetfulMount) -> None:
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; f = open(sys.argv[1], 'w'); time.sleep(60)",
            os.path.join(forgetful.path, "held"),
        ],
    )
    try:
        assert wait_until(lambda: child.pid in forgetful.users())
        cut = forgetful.power_cut("drop")
        assert child.wait(timeout=10) == -signal.SIGKILL and child.pid in cut.killed
    finally:
        child.kill()
        child.wait()


_ACKER = textwrap.dedent(
    """
    import os, sys
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
    for n in range(1_000_000):
        os.write(fd, b"%d\\n" % n)
        os.fsync(fd)
        print(n, flush=True)
    """
)


def test_every_acknowledged_fsynced_write_survives_a_cut_at_a_random_moment(
    forgetful: ForgetfulMount,
) -> None:
    path = _durable_file(forgetful, "log", b"")
    child = subprocess.Popen(
        [sys.executable, "-c", _ACKER, str(path)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    acked = [child.stdout.readline() for _ in range(50)]
    forgetful.power_cut("torn", 3, pids=[child.pid])
    acked += child.stdout.readlines()
    child.wait(timeout=10)
    lines = _read(path).split(b"\n")
    assert all(line.strip().encode() in lines for line in acked if line.strip())


def test_a_directory_cannot_move_to_another_directory(forgetful: ForgetfulMount) -> None:
    root = Path(forgetful.path)
    (root / "a").mkdir()
    (root / "b").mkdir()
    with pytest.raises(OSError) as raised:
        os.rename(root / "a", root / "b" / "a")
    assert raised.value.errno == 18  # EXDEV


def test_a_clean_close_makes_everything_durable(tmp_path: Path) -> None:
    require_mount()
    with ForgetfulMount(tmp_path, control=False) as mount:
        (Path(mount.path) / "d").mkdir()
        (Path(mount.path) / "d" / "f").write_bytes(b"never fsynced")
    assert folder_snapshot(str(tmp_path)) == {"/d": None, "/d/f": b"never fsynced"}


# -- the control file --------------------------------------------------------------------------


def _control(mount: ForgetfulMount, line: str) -> dict[str, Any]:
    assert mount.control is not None and mount.control_log is not None
    log = Path(mount.control_log)
    before = len(log.read_text().splitlines()) if log.exists() else 0
    with open(mount.control, "w") as fifo:
        fifo.write(line + "\n")
    assert wait_until(lambda: log.exists() and len(log.read_text().splitlines()) > before)
    outcome: dict[str, Any] = json.loads(log.read_text().splitlines()[before])
    return outcome


def test_a_line_in_the_control_file_cuts_the_power(forgetful: ForgetfulMount) -> None:
    path = _durable_file(forgetful, "f", b"old")
    path.write_bytes(b"unsynced")
    outcome = _control(forgetful, "cut drop 5")
    assert outcome["ok"] and outcome["report"]["mode"] == "drop" and _read(path) == b"old"


def test_a_bad_control_line_is_logged_and_cuts_nothing(forgetful: ForgetfulMount) -> None:
    path = _durable_file(forgetful, "f", b"old")
    path.write_bytes(b"unsynced")
    outcome = _control(forgetful, "cut reorder")
    assert not outcome["ok"] and "unknown crash mode" in outcome["error"]
    assert _read(path) == b"unsynced" and forgetful.cuts == []


# -- the mount keeps what the simulated disk keeps ---------------------------------------------


# a mount and a cut cost a second or two: few examples, and no shrinking (it would take minutes)
@settings(
    max_examples=8,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(programs, modes, st.integers(0, 2**32))
def test_the_mount_keeps_what_the_simulated_disk_keeps(
    tmp_path_factory: pytest.TempPathFactory, program: list[Any], mode: str, seed: int
) -> None:
    require_mount()
    backing = tmp_path_factory.mktemp("diff")
    disk = SimulatedDisk()
    with ForgetfulMount(backing, control=False) as mount:
        assert run(MountSeam(mount.path), program) == run(DiskSeam(disk), program)
        assert folder_snapshot(mount.path) == disk.snapshot()
        cut = mount.power_cut(mode, seed)
        assert cut.report == disk.crash(mode, Chooser(seed))
        assert folder_snapshot(mount.path) == disk.snapshot()


# -- the mount never outlives its user ---------------------------------------------------------

_HOLDER = textwrap.dedent(
    """
    import sys, time
    from toolswap.faultinject.powerloss import ForgetfulMount
    with ForgetfulMount(sys.argv[1]) as mount:
        open(mount.path + "/busy", "w").write("x")
        print(mount.path, flush=True)
        time.sleep(120)
    """
)


@pytest.mark.parametrize(
    "how", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["SIGINT", "SIGTERM", "SIGKILL"]
)
def test_no_mount_and_no_server_outlive_a_stopped_user(tmp_path: Path, how: int) -> None:
    require_mount()
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        mountpoint = holder.stdout.readline().strip()
        assert is_mounted(mountpoint) and server_processes(mountpoint)
        holder.send_signal(how)
        holder.wait(timeout=30)
        assert wait_until(lambda: not is_mounted(mountpoint) and not server_processes(mountpoint))
        assert not os.path.exists(mountpoint)  # nor the folders made for it
    finally:
        holder.kill()
        holder.wait()


def test_an_error_inside_the_block_still_unmounts(tmp_path: Path) -> None:
    require_mount()
    with pytest.raises(ZeroDivisionError), ForgetfulMount(tmp_path) as mount:
        mountpoint = mount.path
        1 / 0  # noqa: B018
    assert not is_mounted(mountpoint) and not server_processes(mountpoint)
    assert not os.path.exists(mountpoint)
