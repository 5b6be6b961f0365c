"""The file-system seam: the only module that touches durable storage.

Every exclusive create, write, fsync, directory fsync, rename, unlink, lstat,
flock, touch and ftruncate of toolswap goes through a :class:`FileSystem`.  The core
receives one as a parameter (default :data:`REAL_FS`), so the fault-injection
layer can substitute a simulated disk that loses whatever was not synced, and
name every persistence point through :meth:`FileSystem.crash_point`.

Handles are plain integers.  For the real seam they are OS file descriptors;
a simulated disk hands out its own.  Callers never pass them to ``os``.

Durability rules the callers rely on (and the simulated disk enforces):

1. Data written to a file is durable only after :meth:`fsync` of that handle.
2. A created, renamed or unlinked directory entry is durable only after
   :meth:`fsync_dir` of the directory that holds it.
3. :meth:`create_exclusive` never replaces an existing entry (``O_EXCL``), and
   no open follows a symlink in its last component (``O_NOFOLLOW``).
4. No open can block: every existing file is opened non-blocking and refused
   with :class:`NotRegularFileError` unless it is a regular file (a FIFO or a
   device in place of a journal, lock or artifact is hostile state).
5. No write open (:meth:`FileSystem.open_append`, :meth:`FileSystem.open_lock`)
   accepts a file with more than one hard link (:class:`HardLinkedFileError`):
   the other name may be outside the session, and the append would go there.

Crash points are no-ops on the real seam, except in a process started with
``TOOLSWAP_FAILPOINT=<crash point>[#N]``: it dies at that point's N-th pass
(``os._exit(FAILPOINT_EXIT_STATUS)``, or SIGKILL with
``TOOLSWAP_FAILPOINT_MODE=sigkill``), which is how the real-process kill tests
crash the real code on the real disk.  A failpoint that is malformed or names
no point of :data:`CRASH_POINTS` is refused (:class:`FailpointError`), never
silently ignored.
"""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol, runtime_checkable

import attrs

from .errors import (
    FailpointError,  # noqa: F401 (re-exported)
)

__all__ = [
    "CRASH_POINTS",
    "FAILPOINT_EXIT_STATUS",
    "FailpointError",
    "FileFacts",
    "FileSystem",
    "HardLinkedFileError",
    "NotRegularFileError",
    "OsFileSystem",
    "REAL_FS",
    "check_failpoint_environment",
    "hard_link_message",
    "locked",
    "read_fully",
]


class NotRegularFileError(OSError):
    """A file of ours is a FIFO, a device, a socket or a directory: refused unopened-for-use."""


class HardLinkedFileError(OSError):
    """A file of ours that we would write has more than one name: refused, never written.

    Another name may be outside the session (or another user's file), and an
    append would land there.  ``strerror`` says how many links it has;
    ``filename`` is the path asked for.
    """


@attrs.frozen(kw_only=True)
class FileFacts:
    """What ``lstat``/``fstat`` says about one entry, frozen for comparison."""

    size: int
    mtime_ns: int
    ctime_ns: int
    device: int
    inode: int
    uid: int
    mode: int
    nlink: int = 1
    """Hard links to the inode: above one, the file may also be someone else's."""

    @property
    def is_regular(self) -> bool:
        return stat.S_ISREG(self.mode)

    @property
    def is_symlink(self) -> bool:
        return stat.S_ISLNK(self.mode)

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)

    @property
    def identity(self) -> tuple[int, int, int, int, int]:
        """Changes whenever the file is replaced or its bytes may have changed."""
        return (self.device, self.inode, self.size, self.mtime_ns, self.ctime_ns)


@runtime_checkable
class FileSystem(Protocol):
    """Storage operations of the core; see the module rules for durability."""

    def create_exclusive(self, path: str, mode: int = 0o600) -> int:
        """Create ``path`` (which must not exist) for writing; FileExistsError if it does."""

    def open_append(self, path: str, mode: int = 0o600) -> int:
        """Open ``path`` for appending, creating it if missing; never through a symlink."""

    def open_read(self, path: str) -> int:
        """Open an existing ``path`` read-only; never through a symlink."""

    def open_lock(self, path: str) -> int:
        """Open (creating) a lock file; the handle is only for :meth:`flock`."""

    def write(self, handle: int, data: bytes) -> None:
        """Write all of ``data`` at the handle's position (or the end, for append)."""

    def read(self, handle: int, size: int) -> bytes:
        """Read up to ``size`` bytes at the handle's position."""

    def pread(self, handle: int, size: int, offset: int) -> bytes:
        """Read up to ``size`` bytes at ``offset`` without moving the position."""

    def fsync(self, handle: int) -> None:
        """Make the handle's data durable."""

    def fsync_dir(self, path: str) -> None:
        """Make the directory's entries (creates, renames, unlinks) durable."""

    def ftruncate(self, handle: int, size: int) -> None:
        """Cut the file to ``size`` bytes."""

    def flock(self, handle: int, *, exclusive: bool = True) -> None:
        """Block until the advisory lock is held."""

    def try_flock(self, handle: int, *, exclusive: bool = True) -> bool:
        """Take the advisory lock if nobody holds a conflicting one; never wait.

        ``False``: another open of the file holds it (the lock is per open,
        so two handles of one process conflict too).
        """

    def touch(self, handle: int) -> None:
        """Set the file's modification time to now (its age starts again)."""

    def funlock(self, handle: int) -> None:
        """Release the advisory lock."""

    def close(self, handle: int) -> None:
        """Close the handle."""

    def fstat(self, handle: int) -> FileFacts:
        """Facts about an open handle."""

    def lstat(self, path: str) -> FileFacts:
        """Facts about an entry, not following a symlink; FileNotFoundError if absent."""

    def rename(self, source: str, target: str) -> None:
        """Atomically rename within one directory."""

    def unlink(self, path: str) -> None:
        """Remove one directory entry (never a directory, never recursively)."""

    def listdir(self, path: str) -> list[str]:
        """Names in a directory, sorted."""

    def makedirs(self, path: str) -> None:
        """Create ``path`` and missing parents (mode 0700), syncing each new entry."""

    def current_uid(self) -> int:
        """The uid that owns files this process creates."""

    def now_ns(self) -> int:
        """The time (ns since the epoch) a change made now would be stamped with."""

    def crash_point(self, name: str) -> None:
        """A named protocol boundary; no-op on a real disk, a possible crash when simulated."""


class OsFileSystem:
    """The real seam, on the operating system's calls."""

    _NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
    _CLOEXEC = getattr(os, "O_CLOEXEC", 0)

    def create_exclusive(self, path: str, mode: int = 0o600) -> int:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | self._NOFOLLOW | self._CLOEXEC
        return os.open(path, flags, mode)

    def open_append(self, path: str, mode: int = 0o600) -> int:
        return self._open_regular(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, mode, single=True)

    def open_read(self, path: str) -> int:
        return self._open_regular(path, os.O_RDONLY)

    def open_lock(self, path: str) -> int:
        return self._open_regular(path, os.O_RDWR | os.O_CREAT, 0o600, single=True)

    def _open_regular(
        self, path: str, flags: int, mode: int = 0o600, *, single: bool = False
    ) -> int:
        """Open ``path`` only if it is a regular file; never block, never follow a link.

        ``O_NONBLOCK`` makes the open itself return at once on a FIFO or a
        device (an open of a FIFO with no writer would wait forever), and
        ``O_NOCTTY`` keeps a terminal from becoming ours; the type is then
        checked on the open handle, so nothing can be swapped in between.
        ``single``: the file must have one name only (rule 5), checked on the
        same ``fstat``, so it costs no extra system call.
        """
        flags |= os.O_NOCTTY | self._NOFOLLOW | self._CLOEXEC
        fd = os.open(path, flags | os.O_NONBLOCK, mode)
        try:
            facts = os.fstat(fd)
            if not stat.S_ISREG(facts.st_mode):
                raise NotRegularFileError(errno.EINVAL, "not a regular file", path)
            if single and facts.st_nlink > 1:
                raise HardLinkedFileError(errno.EMLINK, hard_link_message(facts.st_nlink), path)
            # F_SETFL changes only the status flags (O_APPEND, O_NONBLOCK, ...) and
            # ignores the rest, so the flags it was opened with, less O_NONBLOCK,
            # are its flags now: no F_GETFL needed (one system call fewer per open).
            fcntl.fcntl(fd, fcntl.F_SETFL, flags)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def write(self, handle: int, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(handle, view)
            if written <= 0:  # pragma: no cover - the kernel reports errors as OSError
                raise OSError(errno.EIO, "short write")
            view = view[written:]

    def read(self, handle: int, size: int) -> bytes:
        return os.read(handle, size)

    def pread(self, handle: int, size: int, offset: int) -> bytes:
        return os.pread(handle, size, offset)

    def fsync(self, handle: int) -> None:
        os.fsync(handle)

    def fsync_dir(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | self._CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def ftruncate(self, handle: int, size: int) -> None:
        os.ftruncate(handle, size)

    def flock(self, handle: int, *, exclusive: bool = True) -> None:
        fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)

    def try_flock(self, handle: int, *, exclusive: bool = True) -> bool:
        try:
            fcntl.flock(handle, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def touch(self, handle: int) -> None:
        os.utime(handle)

    def funlock(self, handle: int) -> None:
        fcntl.flock(handle, fcntl.LOCK_UN)

    def close(self, handle: int) -> None:
        os.close(handle)

    def fstat(self, handle: int) -> FileFacts:
        return _facts(os.fstat(handle))

    def lstat(self, path: str) -> FileFacts:
        return _facts(os.lstat(path))

    def rename(self, source: str, target: str) -> None:
        os.rename(source, target)

    def unlink(self, path: str) -> None:
        os.unlink(path)

    def listdir(self, path: str) -> list[str]:
        return sorted(os.listdir(path))

    def makedirs(self, path: str) -> None:
        path = os.path.abspath(path)
        missing: list[str] = []
        probe = path
        while not os.path.lexists(probe):
            missing.append(probe)
            parent = os.path.dirname(probe)
            if parent == probe:
                break
            probe = parent
        for directory in reversed(missing):
            try:
                os.mkdir(directory, 0o700)
            except FileExistsError:
                continue  # another process made it first; its parent sync covers it
            self.fsync_dir(os.path.dirname(directory))

    def current_uid(self) -> int:
        return os.geteuid()

    def now_ns(self) -> int:
        return time.time_ns()

    def crash_point(self, name: str) -> None:
        """A no-op, unless the environment names this point as a failpoint (tests only).

        With ``TOOLSWAP_FAILPOINT=<name>`` (or ``<name>#<n>`` for its n-th pass,
        default the first) the process dies right here, with no cleanup:
        ``TOOLSWAP_FAILPOINT_MODE=exit`` (the default) calls ``os._exit`` with
        status :data:`FAILPOINT_EXIT_STATUS`, ``sigkill`` sends itself SIGKILL.
        The variables are read once per process, at the first crash point.
        """
        failpoint = _Failpoint.from_environ()
        if failpoint is not None:
            failpoint.reached(name)


#: ``os._exit`` status of a process stopped by ``TOOLSWAP_FAILPOINT_MODE=exit``.
FAILPOINT_EXIT_STATUS = 86


#: Every crash point name the core passes to :meth:`FileSystem.crash_point`.
#: ``TOOLSWAP_FAILPOINT`` must name one of these: a misspelt failpoint would
#: otherwise never fire, and a kill test would pass without killing anything.
#: (tests/core/test_fs_seam.py checks this list against the sources.)
CRASH_POINTS = frozenset(
    {
        "cleanup.after_revalidate",
        "cleanup.after_unlink",
        "compact.after_archive",
        "compact.after_checkpoint_fsync",
        "compact.after_next_started",
        "compact.after_set_aside",
        "compact.after_snapshot_fsync",
        "externalize.after_create",
        "externalize.before_dir_fsync",
        "externalize.before_fsync",
        "externalize.before_high_water_fsync",
        "journal.after_fsync",
        "journal.after_truncate",
        "journal.before_append",
        "journal.before_fsync",
        "journal.before_truncate",
        "publish.after_owner_write",
        "publish.after_prepared",
        "publish.after_rejected",
        "reconcile.after_tombstone",
        "remove.after_owner_remove",
    }
)


def check_failpoint_environment() -> None:
    """Refuse a malformed or unknown failpoint now, not at the first crash point.

    The command line calls this before running a command, so a bad value is
    one clear error (exit 2) even if the command never reaches a crash point.
    """
    _Failpoint.from_environ()


class _Failpoint:
    """The failpoint named by ``TOOLSWAP_FAILPOINT``; see :meth:`OsFileSystem.crash_point`."""

    _loaded: tuple[_Failpoint | None] | None = None

    def __init__(self, spec: str, mode: str) -> None:
        name, _, nth = spec.partition("#")
        if not name or (nth and (not nth.isdigit() or int(nth) < 1)):
            raise FailpointError(
                f"TOOLSWAP_FAILPOINT must be NAME or NAME#N (N >= 1), got {spec!r}"
            )
        if name not in CRASH_POINTS:
            raise FailpointError(
                f"TOOLSWAP_FAILPOINT names no known crash point: {name!r} "
                f"(known: {', '.join(sorted(CRASH_POINTS))})"
            )
        if mode not in {"exit", "sigkill"}:
            raise FailpointError(f"TOOLSWAP_FAILPOINT_MODE must be exit or sigkill, got {mode!r}")
        self.name = name
        self.left = int(nth) if nth else 1
        self.mode = mode

    def reached(self, name: str) -> None:
        if name != self.name:
            return
        self.left -= 1
        if self.left:
            return
        if self.mode == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        os._exit(FAILPOINT_EXIT_STATUS)

    @classmethod
    def from_environ(cls) -> _Failpoint | None:
        if cls._loaded is None:
            spec = os.environ.get("TOOLSWAP_FAILPOINT", "")
            mode = os.environ.get("TOOLSWAP_FAILPOINT_MODE", "exit")
            if not spec and mode not in {"exit", "sigkill"}:  # refused even unused
                raise FailpointError(
                    f"TOOLSWAP_FAILPOINT_MODE must be exit or sigkill, got {mode!r}"
                )
            cls._loaded = (cls(spec, mode) if spec else None,)
        return cls._loaded[0]


def read_fully(fs: FileSystem, handle: int, size: int, chunk: int = 1 << 20) -> bytes:
    """Up to ``size`` bytes from offset 0, ``chunk`` at a time; fewer if the file is shorter."""
    pieces: list[bytes] = []
    position = 0
    while position < size:
        piece = fs.pread(handle, min(chunk, size - position), position)
        if not piece:
            break
        pieces.append(piece)
        position += len(piece)
    return b"".join(pieces)


def hard_link_message(links: int) -> str:
    """How every refusal of a hard-linked file of ours says why."""
    return f"it has {links} hard links; another name may be outside the session"


def _facts(result: os.stat_result) -> FileFacts:
    return FileFacts(
        size=result.st_size,
        mtime_ns=result.st_mtime_ns,
        ctime_ns=result.st_ctime_ns,
        device=result.st_dev,
        inode=result.st_ino,
        uid=result.st_uid,
        mode=result.st_mode,
        nlink=result.st_nlink,
    )


REAL_FS: FileSystem = OsFileSystem()


@contextmanager
def locked(fs: FileSystem, lock_path: str) -> Iterator[None]:
    """Hold the exclusive advisory lock on ``lock_path`` (threads and processes)."""
    handle = fs.open_lock(lock_path)
    try:
        fs.flock(handle)
        try:
            yield
        finally:
            fs.funlock(handle)
    finally:
        fs.close(handle)
