"""Power loss for real processes: a FUSE mount that forgets what was not fsynced.

Rules (the durability model)
============================

The model is the simulated disk's (:mod:`.disk`, and the rules
:mod:`toolswap.fs` promises callers), applied to every process on the mount:

1. Data written to a file is durable only after ``fsync``/``fdatasync`` of
   that file, on any of its handles.  A write through an ``O_SYNC``/``O_DSYNC``
   handle is durable when it returns, and ``msync(MS_SYNC)`` makes a mapping's
   writes durable (the kernel asks for the fsync in both cases).  Nothing else
   does: ``close``, ``sync``/``syncfs`` and ``sync_file_range`` do not reach the
   file system through FUSE, so the mount is stricter there than most disks.
2. A created, renamed, hard-linked or removed name -- of a file, a directory,
   a symlink -- is durable only after ``fsync`` of the directory that holds it
   (a new directory's own name: its parent's fsync).
3. A power cut (:meth:`ForgetfulMount.power_cut`, or a line written to the
   control file) drops everything not durable, in one of the crash explorer's
   modes, with a seed: ``drop`` (all unsynced work), ``torn`` (each file keeps
   a seeded prefix of its unsynced writes, cut at 1 B, 512 B or 4 KiB), or
   ``dir_subset`` (a seeded, order-consistent subset of the unsynced directory
   operations survives).  The same program and seed keep exactly what
   :meth:`.disk.SimulatedDisk.crash` keeps (``tests/crash/test_powerloss_model.py``
   and ``test_powerloss_fs.py`` hold the two to that).  After the cut the mount
   shows exactly what was kept.
4. A power cut stops every process using the mount (open files, working
   directory, mapped files) and those named in ``pids``, with SIGKILL, at the
   instant of the cut: an operation that starts after it never completes, so no
   process can acknowledge anything the cut lost.
5. Attributes (mode, owner, times) are not modelled: a change is written
   through at once and survives.  Locks are the kernel's and go with the
   processes.  A directory cannot be moved into another directory (``EXDEV``).
6. :meth:`ForgetfulMount.close` is a clean shutdown: the processes still using
   the mount are killed, then everything becomes durable, as a clean unmount
   makes it on a real machine.  The mount and its server are gone afterwards,
   also after an exception or Ctrl-C in the caller; if the caller dies (SIGTERM,
   SIGKILL) the server notices, unmounts and exits by itself, leaving only the
   durable state.

Theory of operation
===================

A mount is one server process (:mod:`._forgetful_fuse`, over the state in
:mod:`._forgetful_tree`) serving the kernel's FUSE requests for the mount path.
The backing folder always holds the durable state; unsynced data lives in the
server's memory.  A power cut asks the server to cut -- under the lock every
operation takes, so the cut falls between operations -- which writes what the
mode keeps into the backing folder and freezes the file system: any later
operation waits.  The caller then kills the processes using the mount, lets the
waiting operations fail (the killed processes never see the answer), stops the
server and starts a new one on the same folder and path, which shows the
durable state: a real unmount and mount, so no kernel cache survives the cut.

The control file is a FIFO beside the mount (:attr:`ForgetfulMount.control`).
Each line written to it is a command: ``cut [MODE] [SEED] [GRANULARITY]``
(default ``drop 0``).  The outcome of each is appended as one JSON object to
:attr:`ForgetfulMount.control_log`.  ``python -m toolswap.faultinject.powerloss
BACKING [MOUNTPOINT]`` mounts in the foreground and serves the control file
until SIGINT or SIGTERM.

Needs Linux with ``/dev/fuse``, libfuse 3 and ``fusermount3`` (Debian:
``fuse3``) and the ``mfusepy`` binding; :func:`fuse_unavailable_reason` says
what is missing.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes.util
import functools
import importlib.util
import json
import os
import queue
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import IO, Any

import attrs

from .disk import CRASH_MODES, CrashReport

__all__ = [
    "ForgetfulMount",
    "FuseUnavailableError",
    "MountError",
    "PowerCut",
    "fuse_unavailable_reason",
    "is_mounted",
    "mount_unavailable_reason",
    "processes_using",
]

_SERVER_MODULE = "toolswap.faultinject._forgetful_fuse"
_START_TIMEOUT = 30.0
_COMMAND_TIMEOUT = 120.0
_GONE_TIMEOUT = 20.0


class MountError(RuntimeError):
    """The forgetful mount could not be started, driven or stopped."""


class FuseUnavailableError(MountError):
    """This machine cannot mount FUSE file systems (the message says what is missing)."""


@attrs.frozen(kw_only=True)
class PowerCut:
    """One power cut: what the crash kept and lost, and the processes it killed."""

    report: CrashReport
    killed: tuple[int, ...]


def fuse_unavailable_reason() -> str | None:
    """Why a forgetful mount cannot work here, or None when everything it needs is present."""
    if not sys.platform.startswith("linux"):
        return f"FUSE mounts need Linux, not {sys.platform}"
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse (the kernel has no FUSE, or the container does not pass it in)"
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "/dev/fuse is not readable and writable by this user"
    if shutil.which("fusermount3") is None:
        return "no fusermount3 (Debian: apt-get install fuse3)"
    if ctypes.util.find_library("fuse3") is None:
        return "no libfuse3 (Debian: apt-get install fuse3)"
    if importlib.util.find_spec("mfusepy") is None:
        return "the mfusepy binding is not installed (pip install mfusepy)"
    return None


def _unescape_mount_field(field: str) -> str:
    return (field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n")).replace(
        "\\134", "\\"
    )


def is_mounted(path: str) -> bool:
    """Whether a FUSE file system is mounted at ``path`` (this process's mount table).

    ``path`` is taken as written (absolute, no symlinks): resolving it would ask
    the file system mounted there, which may be frozen by a cut.
    """
    target = os.path.abspath(path)
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as table:
        for line in table:
            fields = line.split()
            if len(fields) < 5 or _unescape_mount_field(fields[4]) != target:
                continue
            dash = fields.index("-") if "-" in fields else -1
            if dash > 0 and fields[dash + 1].startswith("fuse"):
                return True
    return False


def processes_using(path: str, *, exclude: Iterable[int] = ()) -> list[int]:
    """Processes whose working or root directory, or an open or mapped file, is under ``path``.

    ``path`` is taken as written, never resolved (see :func:`is_mounted`).
    """
    root = os.path.abspath(path)
    prefix = root.rstrip("/") + "/"
    skip = {os.getpid(), *exclude}

    def under(link: str) -> bool:
        return link == root or link.startswith(prefix)

    found: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in skip:
            continue
        base = f"/proc/{entry}"
        links: list[str] = []
        with contextlib.suppress(OSError):
            links.append(os.readlink(f"{base}/cwd"))
        with contextlib.suppress(OSError):
            links.append(os.readlink(f"{base}/root"))
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"{base}/fd"):
                with contextlib.suppress(OSError):
                    links.append(os.readlink(f"{base}/fd/{fd}"))
        with contextlib.suppress(OSError), open(f"{base}/maps", encoding="utf-8") as maps:
            for line in maps:
                fields = line.split(None, 5)
                if len(fields) == 6:
                    links.append(fields[5].strip())
        if any(under(link) for link in links):
            found.append(int(entry))
    return found


def _is_gone(pid: int) -> bool:
    """Whether ``pid`` has exited (a zombie waiting for its parent counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


class _Server:
    """One FUSE server process for one mount generation, with its command pipe."""

    def __init__(self, backing: str, mountpoint: str, home: str) -> None:
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", _SERVER_MODULE, backing, mountpoint, home],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            start_new_session=True,  # rule 1 of the server: a Ctrl-C reaches the caller only
        )
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        threading.Thread(target=self._read, name="forgetful-replies", daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def stderr_tail(self) -> str:
        with contextlib.suppress(OSError, ValueError):
            self._stderr.seek(0)
            return self._stderr.read()[-2000:].decode(errors="replace").strip()
        return ""

    def receive(self, timeout: float) -> dict[str, Any]:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise MountError(f"the FUSE server did not answer within {timeout:.0f} s") from None
        if line is None:
            self.process.wait(timeout=5)
            raise MountError(
                f"the FUSE server exited ({self.process.returncode}): {self.stderr_tail()}"
            )
        message: dict[str, Any] = json.loads(line)
        return message

    def ask(self, command: dict[str, Any], timeout: float = _COMMAND_TIMEOUT) -> dict[str, Any]:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(json.dumps(command).encode() + b"\n")
            self.process.stdin.flush()
        except (BrokenPipeError, ValueError) as error:
            raise MountError(f"the FUSE server is gone: {self.stderr_tail()}") from error
        reply = self.receive(timeout)
        if not reply.get("ok"):
            raise MountError(f"the FUSE server refused {command['op']}: {reply.get('error')}")
        return reply

    def stop(self, mountpoint: str) -> None:
        """End the process and make sure nothing is mounted at ``mountpoint`` any more."""
        try:
            if self.process.poll() is None:
                with contextlib.suppress(MountError, OSError):
                    self.ask({"op": "stop"}, timeout=15)
                try:
                    self.process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait(timeout=15)
        finally:
            if is_mounted(mountpoint):  # the server died without unmounting
                _lazy_unmount(mountpoint)
            for stream in (self.process.stdin, self.process.stdout):
                with contextlib.suppress(OSError):
                    if stream is not None:
                        stream.close()
            self._stderr.close()


def _lazy_unmount(mountpoint: str) -> None:
    for command in (["fusermount3", "-u", "-z", mountpoint], ["umount", "-l", mountpoint]):
        with contextlib.suppress(OSError):
            subprocess.run(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                check=False,
                timeout=30,
            )
        if not is_mounted(mountpoint):
            return


class ForgetfulMount:
    """A forgetful FUSE mount of ``backing`` at :attr:`path` (a new temporary folder by default).

    Use it as a context manager; :meth:`power_cut` loses what was not durable.
    ``control=False`` serves no control file.
    """

    def __init__(
        self,
        backing: str | os.PathLike[str],
        mountpoint: str | os.PathLike[str] | None = None,
        *,
        control: bool = True,
    ) -> None:
        self.backing = os.path.realpath(backing)
        if not os.path.isdir(self.backing):
            raise MountError(f"the backing folder {self.backing} is not a directory")
        self._home = tempfile.mkdtemp(prefix="forgetful-")
        os.chmod(self._home, 0o711)  # a server run as another user (PostgreSQL) reaches the mount
        self._made_mountpoint = mountpoint is None
        self.path = os.path.realpath(mountpoint or os.path.join(self._home, "mnt"))
        os.makedirs(self.path, exist_ok=True)
        #: The control FIFO (None without ``control``), and the file its outcomes go to.
        self.control = os.path.join(self._home, "control") if control else None
        self.control_log = os.path.join(self._home, "control.log") if control else None
        self.cuts: list[PowerCut] = []
        self._lock = threading.RLock()
        self._server: _Server | None = None
        self._control_thread: threading.Thread | None = None
        self._wake_r, self._wake_w = -1, -1
        self._closed = False
        self._owner = os.getpid()

    # ------------------------------------------------------------------ life cycle

    def __enter__(self) -> ForgetfulMount:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def start(self) -> None:
        """Mount; raises :class:`FuseUnavailableError` when this machine cannot."""
        reason = fuse_unavailable_reason()
        if reason is not None:
            self._remove_home()
            raise FuseUnavailableError(reason)
        with self._lock:
            if self._server is not None:
                raise MountError("already mounted")
            atexit.register(self.close)
            try:
                self._mount()
                if self.control is not None:
                    self._serve_control()
            except BaseException:
                self.close()
                raise

    def _mount(self) -> None:
        if is_mounted(self.path):
            raise MountError(f"something is already mounted at {self.path}")
        server = _Server(self.backing, self.path, self._home)
        self._server = server
        message = server.receive(_START_TIMEOUT)
        if message.get("event") != "ready":
            raise MountError(f"the FUSE mount failed: {message.get('error')}")
        deadline = time.monotonic() + _START_TIMEOUT
        while not is_mounted(self.path):
            if time.monotonic() > deadline:
                raise MountError(f"the kernel shows no mount at {self.path}")
            time.sleep(0.01)

    def close(self) -> None:
        """A clean shutdown (rule 6); safe to call twice."""
        if os.getpid() != self._owner:
            return  # a forked child's exit: the mount is its parent's
        with self._lock:
            if self._closed:
                return
            self._closed = True
            atexit.unregister(self.close)
        self._stop_control()  # not under the lock: a cut it is making needs the lock to finish
        with self._lock:
            try:
                server, self._server = self._server, None
                if server is not None:
                    try:
                        _wait_gone(self._kill(()))
                        with contextlib.suppress(MountError):
                            server.ask({"op": "sync"})
                    finally:
                        server.stop(self.path)
            finally:
                self._remove_home()

    def _remove_home(self) -> None:
        if self._made_mountpoint and is_mounted(self.path):
            return  # never remove a folder something is still mounted on
        shutil.rmtree(self._home, ignore_errors=True)

    # ------------------------------------------------------------------ power

    def users(self) -> list[int]:
        """The processes using the mount now (other than this one and the server)."""
        server = self._server
        exclude = [server.process.pid] if server is not None else []
        return processes_using(self.path, exclude=exclude)

    def power_cut(
        self,
        mode: str = "drop",
        seed: int | Sequence[int] = 0,
        *,
        granularity: int | None = None,
        kill: bool = True,
        pids: Iterable[int] = (),
    ) -> PowerCut:
        """Lose everything not durable (rule 3), kill the processes (rule 4), remount.

        ``seed`` is an int or an explicit sequence of choices (the simulated
        disk's :class:`~.disk.Chooser`).  ``kill=False`` leaves the processes
        running: their operations on the mount then fail with ``EIO``, and with
        ``ENOTCONN`` once the old mount is gone.
        """
        if mode not in CRASH_MODES:
            raise ValueError(f"unknown crash mode {mode!r}; want one of {CRASH_MODES}")
        choices: int | list[int] = seed if isinstance(seed, int) else [int(c) for c in seed]
        with self._lock:
            server = self._server
            if server is None:
                raise MountError("not mounted")
            reply = server.ask(
                {"op": "cut", "mode": mode, "choices": choices, "granularity": granularity}
            )
            killed: list[int] = []
            try:
                if kill:
                    killed = self._kill(pids)
            finally:
                server.ask({"op": "thaw"})
                _wait_gone(killed)
                self._server = None
                server.stop(self.path)
            self._mount()
            fields = dict(reply["report"])
            fields["choices"] = tuple(fields["choices"])
            cut = PowerCut(report=CrashReport(**fields), killed=tuple(killed))
            self.cuts.append(cut)
            return cut

    def _kill(self, pids: Iterable[int]) -> list[int]:
        """SIGKILL ``pids`` and every user of the mount, until none is left (bounded)."""
        killed: list[int] = []
        targets = set(pids) - {os.getpid()}
        for _ in range(10):
            targets |= set(self.users())
            targets -= set(killed)
            if not targets:
                break
            for pid in sorted(targets):
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    continue
                killed.append(pid)
            targets = set()
        return killed

    # ------------------------------------------------------------------ control file

    def _serve_control(self) -> None:
        assert self.control is not None
        os.mkfifo(self.control, 0o600)
        self._wake_r, self._wake_w = os.pipe()
        thread = threading.Thread(target=self._control_loop, name="forgetful-control", daemon=True)
        self._control_thread = thread
        thread.start()

    def _control_loop(self) -> None:
        assert self.control is not None
        # read-write, so the FIFO never reports end-of-file between two writers
        fifo = os.open(self.control, os.O_RDWR | os.O_NONBLOCK)
        pending = b""
        try:
            while True:
                ready, _, _ = select.select([fifo, self._wake_r], [], [])
                if self._wake_r in ready:
                    return
                with contextlib.suppress(BlockingIOError):
                    pending += os.read(fifo, 65536)
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip():
                        self._log(self._control_command(line.decode(errors="replace").strip()))
        finally:
            os.close(fifo)

    def _control_command(self, line: str) -> dict[str, Any]:
        words = line.split()
        outcome: dict[str, Any] = {"command": line}
        try:
            if words[0] != "cut" or len(words) > 4:
                raise ValueError("want: cut [drop|torn|dir_subset] [SEED] [GRANULARITY]")
            mode = words[1] if len(words) > 1 else "drop"
            seed = int(words[2]) if len(words) > 2 else 0
            granularity = int(words[3]) if len(words) > 3 else None
            cut = self.power_cut(mode, seed, granularity=granularity)
        except (ValueError, MountError) as error:
            outcome.update(ok=False, error=str(error))
            return outcome
        outcome.update(ok=True, report=attrs.asdict(cut.report), killed=list(cut.killed))
        return outcome

    def _log(self, outcome: dict[str, Any]) -> None:
        assert self.control_log is not None
        with open(self.control_log, "a", encoding="utf-8") as log:
            log.write(json.dumps(outcome) + "\n")

    def _stop_control(self) -> None:
        thread, self._control_thread = self._control_thread, None
        if thread is not None:
            os.write(self._wake_w, b"x")
            if thread is not threading.current_thread():
                thread.join(timeout=_COMMAND_TIMEOUT)
        for fd in (self._wake_r, self._wake_w):
            if fd >= 0:
                os.close(fd)
        self._wake_r = self._wake_w = -1


def _wait_gone(pids: Sequence[int]) -> None:
    deadline = time.monotonic() + _GONE_TIMEOUT
    for pid in pids:
        while not _is_gone(pid):
            if time.monotonic() > deadline:
                raise MountError(f"process {pid} did not die after SIGKILL")
            time.sleep(0.005)


@functools.cache
def _probe() -> str | None:
    reason = fuse_unavailable_reason()
    if reason is not None:
        return reason
    with tempfile.TemporaryDirectory(prefix="forgetful-probe-") as backing:
        try:
            with ForgetfulMount(backing, control=False):
                pass
        except MountError as error:
            return f"a FUSE mount fails here: {error}"
    return None


def mount_unavailable_reason() -> str | None:
    """Like :func:`fuse_unavailable_reason`, and also tries one mount (once per process)."""
    return _probe()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m toolswap.faultinject.powerloss BACKING [MOUNTPOINT]``: mount until stopped."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) not in (1, 2):
        sys.stderr.write("usage: python -m toolswap.faultinject.powerloss BACKING [MOUNTPOINT]\n")
        return 2

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        with ForgetfulMount(args[0], args[1] if len(args) > 1 else None) as mount:
            print(f"mounted {mount.backing} at {mount.path}", flush=True)
            print(f"control: {mount.control} (log: {mount.control_log})", flush=True)
            while True:
                time.sleep(3600)
    except KeyboardInterrupt:
        return 0
    except MountError as error:
        sys.stderr.write(f"{error}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
