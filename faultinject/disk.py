"""A simulated disk behind the file-system seam, that loses what was not synced.

Theory of operation
-------------------
The disk is a table of inodes (regular files, directories, symlinks) plus, for
every directory, two views of its entries: the *volatile* view that running
code sees and the *durable* view that survives a crash.  Every regular file
likewise has volatile bytes and durable bytes.

Rules (the same as :mod:`toolswap.fs` promises for a real disk):

1. ``fsync(handle)`` makes that file's bytes durable (any handle of the file).
2. A directory entry created, unlinked or renamed is only volatile until
   ``fsync_dir`` of the directory that holds it.  ``makedirs`` syncs the
   parent of every directory it makes, exactly like the real seam does.
3. ``crash(mode, choices)`` reboots: only durable state is kept, every handle
   and every lock is invalidated.  The modes:

   * ``drop`` -- every unsynced write and directory operation is lost.
   * ``torn`` -- unsynced directory operations are lost; each file keeps a
     torn prefix of its unsynced writes, cut at a byte, 512 B or 4 KiB
     boundary of the file (``granularity``; chosen when not given).
   * ``dir_subset`` -- unsynced data is lost; an arbitrary subset of the
     unsynced directory operations is kept.  The subset is order-consistent:
     once an operation on a name is dropped, every later operation touching
     that name is dropped too, and the kept ones are applied in order.

Every choice comes from a :class:`Chooser` built from a seed, a
``random.Random``, an explicit sequence of integers or a callable (so a
Hypothesis draw can drive it); the same choices give the same state.

Crash points and I/O operations can be *armed*.  When an armed one fires the
disk raises :class:`SimulatedCrash` (a ``BaseException``, so ``except
Exception`` in the core cannot swallow it) and halts: every later operation
raises :class:`SimulatedCrash` too, so ``finally`` blocks of the dying code do
no I/O, until :meth:`SimulatedDisk.crash` reboots it.

A cross-directory rename is modelled as an unlink in the source directory and
a link in the target directory, each durable with its own directory's fsync
(the core only renames within one directory).
"""

from __future__ import annotations

import errno
import functools
import os
import posixpath
import random
import stat
import threading
from collections.abc import Callable, Sequence
from typing import Literal

import attrs

from toolswap.fs import FileFacts, HardLinkedFileError, NotRegularFileError, hard_link_message

__all__ = [
    "SimulatedDisk",
    "SimulatedCrash",
    "Chooser",
    "CrashReport",
    "CRASH_MODES",
    "TORN_GRANULARITIES",
    "MUTATING_OPS",
    "torn_cut_sizes",
]

CrashMode = Literal["drop", "torn", "dir_subset"]
CRASH_MODES: tuple[CrashMode, ...] = ("drop", "torn", "dir_subset")
TORN_GRANULARITIES: tuple[int, ...] = (1, 512, 4096)

#: Seam operations that can change durable or volatile state (``arm_io(..., mutating_only=True)``).
MUTATING_OPS = frozenset(
    {
        "create_exclusive",
        "open_append",
        "open_lock",
        "write",
        "fsync",
        "fsync_dir",
        "ftruncate",
        "touch",
        "rename",
        "unlink",
        "makedirs",
    }
)

_DEVICE = 0x5D15
_UMASK = 0o022
_MAX_SYMLINKS = 40


class SimulatedCrash(BaseException):
    """The simulated machine lost power here; only durable state remains after ``crash``."""


# ---------------------------------------------------------------------------
# choices


class Chooser:
    """Deterministic source of choices: ``choose(n)`` is an int in ``range(n)``.

    Built from an ``int`` seed, a ``random.Random``, a sequence of ints (taken
    in order, modulo ``n``; ``0`` once exhausted, which means "lose it") or a
    callable ``(n) -> int`` such as a wrapper around a Hypothesis draw.
    Every choice made is recorded in :attr:`made`, so a run can be replayed.
    """

    def __init__(
        self, source: int | random.Random | Sequence[int] | Callable[[int], int] | Chooser
    ) -> None:
        self.made: list[int] = []
        self._rng: random.Random | None = None
        self._seq: Sequence[int] | None = None
        self._fn: Callable[[int], int] | None = None
        self._pos = 0
        if isinstance(source, Chooser):
            self._fn = source.choose
        elif isinstance(source, bool):
            raise TypeError("a Chooser needs a seed, Random, sequence or callable")
        elif isinstance(source, int):
            self._rng = random.Random(source)
        elif isinstance(source, random.Random):
            self._rng = source
        elif callable(source):
            self._fn = source
        else:
            self._seq = source

    def choose(self, n: int) -> int:
        if n <= 0:
            raise ValueError("choose needs n >= 1")
        if n == 1:
            return 0
        if self._rng is not None:
            value = self._rng.randrange(n)
        elif self._fn is not None:
            value = int(self._fn(n))
            if not 0 <= value < n:
                raise ValueError(f"choice {value} out of range({n})")
        else:
            assert self._seq is not None
            value = self._seq[self._pos] % n if self._pos < len(self._seq) else 0
            self._pos += 1
        self.made.append(value)
        return value


@attrs.frozen(kw_only=True)
class CrashReport:
    """What one crash kept and lost (for replay and for event statistics)."""

    mode: str
    granularity: int | None
    dir_ops_kept: int
    dir_ops_lost: int
    files_torn: int
    bytes_kept: int
    bytes_lost: int
    choices: tuple[int, ...]


# ---------------------------------------------------------------------------
# state


@attrs.define(eq=False)
class _Inode:
    ino: int
    kind: int  # stat.S_IFREG / S_IFDIR / S_IFLNK
    perm: int
    uid: int
    mtime_ns: int
    ctime_ns: int
    data: bytearray = attrs.field(factory=bytearray)  # volatile bytes (regular files)
    durable: bytes = b""  # durable bytes (regular files)
    # unsynced writes since the last fsync, in order: ("w", offset, bytes) or ("t", size, b"")
    pending: list[tuple[str, int, bytes]] = attrs.field(factory=list)
    entries: dict[str, int] = attrs.field(factory=dict)  # volatile (directories)
    durable_entries: dict[str, int] = attrs.field(factory=dict)
    target: str = ""  # symlinks
    links: int = 0  # names in the volatile view (recounted from the durable one at a crash)
    open_count: int = 0
    # flock state
    lock_exclusive: int | None = None
    lock_shared: set[int] = attrs.field(factory=set)


@attrs.define(eq=False)
class _Handle:
    ino: int
    path: str
    readable: bool
    writable: bool
    append: bool
    position: int = 0


@attrs.frozen
class _DirOp:
    """One unsynced directory operation: ``link``/``unlink`` of ``name``, or ``rename``."""

    dir_ino: int
    kind: str
    name: str
    ino: int
    new_name: str = ""


@attrs.define
class _ErrorRule:
    op: str
    err: int
    path: str | None
    skip: int
    times: int


# Path text is parsed the same way every time, and the explorer's workloads use
# a few dozen distinct paths millions of times: parsing them was about a third
# of the simulated disk's time.  Only the text work is cached; resolving the
# parts against the directory tree is done on every call.
@functools.lru_cache(maxsize=8192)
def _split_path(path: str) -> tuple[str, str]:
    norm = posixpath.normpath(path)
    if norm.startswith("//"):
        norm = "/" + norm.lstrip("/")
    return posixpath.split(norm)


@functools.lru_cache(maxsize=8192)
def _path_parts(path: str) -> tuple[str, ...]:
    return tuple(p for p in posixpath.normpath(path).split("/") if p)


class SimulatedDisk:
    """An in-memory :class:`toolswap.fs.FileSystem` with durable vs volatile state.

    ``SimulatedDisk()`` starts with an empty, durable ``/``.  Paths are absolute
    POSIX strings.  Thread-safe; ``flock`` blocks across threads.
    """

    def __init__(self, *, uid: int | None = None, time_base_ns: int = 1_700_000_000 * 10**9):
        self._mutex = threading.RLock()
        self._cond = threading.Condition(self._mutex)
        self._uid = os.geteuid() if uid is None else uid
        self._time_base_ns = time_base_ns
        self._tick = 0
        self._next_ino = 2
        self._next_handle = 3
        self._inodes: dict[int, _Inode] = {}
        self._handles: dict[int, _Handle] = {}
        self._dir_log: list[_DirOp] = []
        self._quota: int | None = None
        self._error_rules: list[_ErrorRule] = []
        self._armed_points: dict[str, int] = {}
        self._armed_io: tuple[int, bool] | None = None  # (remaining, mutating_only)
        self._halted = False
        self.crash_points_seen: list[str] = []
        self.io_count = 0
        self.mutating_io_count = 0
        self.io_log: list[tuple[str, str]] | None = None
        self.crashes: list[CrashReport] = []
        self.crash_reason: str | None = None
        root = self._new_inode(stat.S_IFDIR, 0o755)
        self._root = root.ino

    # ------------------------------------------------------------------ helpers

    def _now(self) -> int:
        self._tick += 1
        return self._time_base_ns + self._tick

    def _new_inode(self, kind: int, perm: int) -> _Inode:
        now = self._now()
        inode = _Inode(
            ino=self._next_ino, kind=kind, perm=perm, uid=self._uid, mtime_ns=now, ctime_ns=now
        )
        self._next_ino += 1
        self._inodes[inode.ino] = inode
        return inode

    @staticmethod
    def _error(code: int, path: str = "") -> OSError:
        return OSError(code, os.strerror(code), path) if path else OSError(code, os.strerror(code))

    def _split(self, path: str) -> tuple[str, str]:
        if not isinstance(path, str) or not path.startswith("/"):
            raise ValueError(f"SimulatedDisk paths must be absolute strings, not {path!r}")
        return _split_path(path)

    def _resolve_dir(self, path: str, depth: int = 0) -> _Inode:
        """The directory inode at ``path``, following symlinks in every component."""
        if depth > _MAX_SYMLINKS:
            raise self._error(errno.ELOOP, path)
        parts = _path_parts(path)
        current = self._inodes[self._root]
        for index, part in enumerate(parts):
            if current.kind != stat.S_IFDIR:
                raise self._error(errno.ENOTDIR, path)
            ino = current.entries.get(part)
            if ino is None:
                raise self._error(errno.ENOENT, path)
            child = self._inodes[ino]
            if child.kind == stat.S_IFLNK:
                target = child.target
                if not target.startswith("/"):  # relative to the symlink's directory
                    target = posixpath.join("/" + "/".join(parts[:index]), target)
                child = self._resolve_dir(target, depth + 1)
            current = child
        if current.kind != stat.S_IFDIR:
            raise self._error(errno.ENOTDIR, path)
        return current

    def _lookup(self, path: str) -> tuple[_Inode, str, _Inode | None]:
        """(parent directory, last name, entry or None), not following the last component."""
        parent_path, name = self._split(path)
        parent = self._resolve_dir(parent_path)
        if not name:  # the root itself
            return parent, "", parent
        ino = parent.entries.get(name)
        return parent, name, None if ino is None else self._inodes[ino]

    def _lookup_existing(self, path: str) -> _Inode:
        _, _, inode = self._lookup(path)
        if inode is None:
            raise self._error(errno.ENOENT, path)
        return inode

    def _link(self, parent: _Inode, name: str, inode: _Inode) -> None:
        parent.entries[name] = inode.ino
        inode.links += 1
        parent.mtime_ns = parent.ctime_ns = self._now()
        self._dir_log.append(_DirOp(parent.ino, "link", name, inode.ino))

    def _handle(self, handle: int) -> _Handle:
        found = self._handles.get(handle)
        if found is None:
            raise self._error(errno.EBADF)
        return found

    def _open(self, inode: _Inode, path: str, *, read: bool, write: bool, append: bool) -> int:
        number = self._next_handle
        self._next_handle += 1
        self._handles[number] = _Handle(inode.ino, path, read, write, append)
        inode.open_count += 1
        return number

    def _begin(self, op: str, path: str = "") -> None:
        """Count one I/O operation; fire an armed crash or injected error."""
        if self._halted:
            raise SimulatedCrash(f"disk halted ({self.crash_reason}); {op} not executed")
        self.io_count += 1
        mutating = op in MUTATING_OPS
        if mutating:
            self.mutating_io_count += 1
        if self.io_log is not None:
            self.io_log.append((op, path))
        armed = self._armed_io
        if armed is not None and (mutating or not armed[1]):
            if armed[0] <= 1:
                self._armed_io = None
                self._halt(f"before I/O op {op} {path}".rstrip())
            self._armed_io = (armed[0] - 1, armed[1])
        for rule in self._error_rules:
            if rule.op != op or (rule.path is not None and rule.path != path):
                continue
            if rule.skip > 0:
                rule.skip -= 1
                continue
            rule.times -= 1
            if rule.times <= 0:
                self._error_rules.remove(rule)
            raise self._error(rule.err, path)

    def _halt(self, reason: str) -> None:
        self._halted = True
        self.crash_reason = reason
        self._cond.notify_all()
        raise SimulatedCrash(reason)

    def _used_bytes(self) -> int:
        """Bytes of every file that is linked (volatile view) or still open."""
        live = {h.ino for h in self._handles.values()} | self._reachable(durable=False)
        return sum(
            len(i.data) for i in self._inodes.values() if i.kind == stat.S_IFREG and i.ino in live
        )

    def _reachable(self, *, durable: bool) -> set[int]:
        reachable: set[int] = set()
        stack = [self._root]
        while stack:
            ino = stack.pop()
            if ino in reachable:
                continue
            reachable.add(ino)
            inode = self._inodes[ino]
            if inode.kind == stat.S_IFDIR:
                stack.extend((inode.durable_entries if durable else inode.entries).values())
        return reachable

    def _record_write(self, inode: _Inode, offset: int, data: bytes) -> None:
        end = offset + len(data)
        if len(inode.data) < offset:
            inode.data.extend(b"\0" * (offset - len(inode.data)))
        inode.data[offset:end] = data
        inode.pending.append(("w", offset, bytes(data)))
        inode.mtime_ns = inode.ctime_ns = self._now()

    # ------------------------------------------------------------------ the seam

    def create_exclusive(self, path: str, mode: int = 0o600) -> int:
        with self._mutex:
            self._begin("create_exclusive", path)
            parent, name, existing = self._lookup(path)
            if existing is not None:
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), path)
            inode = self._new_inode(stat.S_IFREG, mode & 0o777 & ~_UMASK)
            self._link(parent, name, inode)
            return self._open(inode, path, read=False, write=True, append=False)

    def open_append(self, path: str, mode: int = 0o600) -> int:
        with self._mutex:
            self._begin("open_append", path)
            inode = self._open_or_create(path, mode)
            return self._open(inode, path, read=True, write=True, append=True)

    def open_lock(self, path: str) -> int:
        with self._mutex:
            self._begin("open_lock", path)
            inode = self._open_or_create(path, 0o600)
            return self._open(inode, path, read=True, write=True, append=False)

    def _open_or_create(self, path: str, mode: int) -> _Inode:
        parent, name, existing = self._lookup(path)
        if existing is None:
            inode = self._new_inode(stat.S_IFREG, mode & 0o777 & ~_UMASK)
            self._link(parent, name, inode)
            return inode
        if existing.kind == stat.S_IFLNK:
            raise self._error(errno.ELOOP, path)
        if existing.kind == stat.S_IFDIR:
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        if existing.links > 1:  # as the real seam: a write open of a hard-linked file is refused
            raise HardLinkedFileError(errno.EMLINK, hard_link_message(existing.links), path)
        return existing

    def open_read(self, path: str) -> int:
        with self._mutex:
            self._begin("open_read", path)
            _, _, existing = self._lookup(path)
            if existing is None:
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
            if existing.kind == stat.S_IFLNK:
                raise self._error(errno.ELOOP, path)
            if existing.kind != stat.S_IFREG:  # as the real seam: only regular files open
                raise NotRegularFileError(errno.EINVAL, "not a regular file", path)
            return self._open(existing, path, read=True, write=False, append=False)

    def write(self, handle: int, data: bytes) -> None:
        with self._mutex:
            found = self._handle(handle)
            self._begin("write", found.path)
            if not data:
                return  # like the real seam's loop, an empty write calls nothing
            if not found.writable:
                raise self._error(errno.EBADF)
            inode = self._inodes[found.ino]
            payload = bytes(data)
            offset = len(inode.data) if found.append else found.position
            if self._quota is not None:
                overwrite = max(0, min(len(payload), len(inode.data) - offset))
                room = self._quota - self._used_bytes()
                if len(payload) - overwrite > room:
                    fits = min(len(payload), overwrite + max(0, room))
                    if fits:
                        self._record_write(inode, offset, payload[:fits])
                    found.position = offset + fits
                    raise self._error(errno.ENOSPC, found.path)
            if payload:
                self._record_write(inode, offset, payload)
            found.position = offset + len(payload)

    def read(self, handle: int, size: int) -> bytes:
        with self._mutex:
            found = self._handle(handle)
            self._begin("read", found.path)
            chunk = self._pread(found, size, found.position)
            found.position += len(chunk)
            return chunk

    def pread(self, handle: int, size: int, offset: int) -> bytes:
        with self._mutex:
            found = self._handle(handle)
            self._begin("pread", found.path)
            if offset < 0:
                raise self._error(errno.EINVAL)
            return self._pread(found, size, offset)

    def _pread(self, found: _Handle, size: int, offset: int) -> bytes:
        inode = self._inodes[found.ino]
        if inode.kind == stat.S_IFDIR:
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
        if not found.readable:
            raise self._error(errno.EBADF)
        if size < 0:
            raise self._error(errno.EINVAL)
        return bytes(inode.data[offset : offset + size])

    def fsync(self, handle: int) -> None:
        with self._mutex:
            found = self._handle(handle)
            self._begin("fsync", found.path)
            inode = self._inodes[found.ino]
            if inode.kind == stat.S_IFREG:
                inode.durable = bytes(inode.data)
                inode.pending.clear()
            elif inode.kind == stat.S_IFDIR:  # fsync of a directory handle syncs its entries
                self._fsync_dir(inode)

    def fsync_dir(self, path: str) -> None:
        with self._mutex:
            self._begin("fsync_dir", path)
            self._fsync_dir(self._resolve_dir(path))

    def _fsync_dir(self, directory: _Inode) -> None:
        directory.durable_entries = dict(directory.entries)
        self._dir_log = [op for op in self._dir_log if op.dir_ino != directory.ino]

    def ftruncate(self, handle: int, size: int) -> None:
        with self._mutex:
            found = self._handle(handle)
            self._begin("ftruncate", found.path)
            if not found.writable or size < 0:
                raise self._error(errno.EINVAL)
            inode = self._inodes[found.ino]
            if size > len(inode.data):
                inode.data.extend(b"\0" * (size - len(inode.data)))
            else:
                del inode.data[size:]
            inode.pending.append(("t", size, b""))
            inode.mtime_ns = inode.ctime_ns = self._now()

    def flock(self, handle: int, *, exclusive: bool = True) -> None:
        with self._cond:
            found = self._handle(handle)
            self._begin("flock", found.path)
            inode = self._inodes[found.ino]
            # converting a lock releases the old one first (as flock(2) may)
            self._release_lock(inode, handle)
            while True:
                if self._halted:
                    raise SimulatedCrash(f"disk halted ({self.crash_reason}) while waiting")
                if self._handles.get(handle) is not found:
                    raise self._error(errno.EBADF)
                free = inode.lock_exclusive is None and (not exclusive or not inode.lock_shared)
                if free:
                    break
                self._cond.wait()
            if exclusive:
                inode.lock_exclusive = handle
            else:
                inode.lock_shared.add(handle)

    def try_flock(self, handle: int, *, exclusive: bool = True) -> bool:
        with self._cond:
            found = self._handle(handle)
            self._begin("try_flock", found.path)
            inode = self._inodes[found.ino]
            mine = inode.lock_exclusive == handle or handle in inode.lock_shared
            others_exclusive = inode.lock_exclusive not in (None, handle)
            others_shared = bool(inode.lock_shared - {handle})
            if others_exclusive or (exclusive and others_shared):
                return False  # flock(2) with LOCK_NB keeps the lock it had
            if mine:
                self._release_lock(inode, handle)
            if exclusive:
                inode.lock_exclusive = handle
            else:
                inode.lock_shared.add(handle)
            return True

    def touch(self, handle: int) -> None:
        with self._mutex:
            found = self._handle(handle)
            self._begin("touch", found.path)
            inode = self._inodes[found.ino]
            inode.mtime_ns = inode.ctime_ns = self._now()

    def funlock(self, handle: int) -> None:
        with self._cond:
            found = self._handle(handle)
            self._begin("funlock", found.path)
            self._release_lock(self._inodes[found.ino], handle)

    def _release_lock(self, inode: _Inode, handle: int) -> None:
        if inode.lock_exclusive == handle:
            inode.lock_exclusive = None
        inode.lock_shared.discard(handle)
        self._cond.notify_all()

    def close(self, handle: int) -> None:
        with self._cond:
            found = self._handle(handle)
            self._begin("close", found.path)
            inode = self._inodes[found.ino]
            self._release_lock(inode, handle)
            inode.open_count -= 1
            del self._handles[handle]

    def fstat(self, handle: int) -> FileFacts:
        with self._mutex:
            found = self._handle(handle)
            self._begin("fstat", found.path)
            return self._facts(self._inodes[found.ino])

    def lstat(self, path: str) -> FileFacts:
        with self._mutex:
            self._begin("lstat", path)
            _, _, existing = self._lookup(path)
            if existing is None:
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
            return self._facts(existing)

    def _facts(self, inode: _Inode) -> FileFacts:
        if inode.kind == stat.S_IFREG:
            size = len(inode.data)
        elif inode.kind == stat.S_IFLNK:
            size = len(inode.target.encode())
        else:
            size = 4096
        return FileFacts(
            size=size,
            mtime_ns=inode.mtime_ns,
            ctime_ns=inode.ctime_ns,
            device=_DEVICE,
            inode=inode.ino,
            uid=inode.uid,
            mode=inode.kind | inode.perm,
            nlink=max(inode.links, 1),  # an open file with no name left still counts as one
        )

    def rename(self, source: str, target: str) -> None:
        with self._mutex:
            self._begin("rename", source)
            src_parent, src_name, moving = self._lookup(source)
            dst_parent, dst_name, existing = self._lookup(target)
            if moving is None or not src_name:
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), source)
            if not dst_name:
                raise self._error(errno.EBUSY, target)
            if existing is moving:
                return
            src_norm = posixpath.join(*self._split(source))
            dst_norm = posixpath.join(*self._split(target))
            if dst_norm.startswith(src_norm + "/"):  # into its own subtree
                raise self._error(errno.EINVAL, target)
            if src_norm.startswith(dst_norm + "/"):  # onto its own ancestor
                raise self._error(errno.ENOTEMPTY, target)
            if existing is not None:
                if existing.kind == stat.S_IFDIR and moving.kind != stat.S_IFDIR:
                    raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), target)
                if existing.kind != stat.S_IFDIR and moving.kind == stat.S_IFDIR:
                    raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), target)
                if existing.kind == stat.S_IFDIR and existing.entries:
                    raise self._error(errno.ENOTEMPTY, target)
            now = self._now()
            if existing is not None:
                existing.links -= 1
            del src_parent.entries[src_name]
            dst_parent.entries[dst_name] = moving.ino
            moving.ctime_ns = now
            src_parent.mtime_ns = src_parent.ctime_ns = now
            dst_parent.mtime_ns = dst_parent.ctime_ns = now
            if src_parent is dst_parent:
                self._dir_log.append(
                    _DirOp(src_parent.ino, "rename", src_name, moving.ino, new_name=dst_name)
                )
            else:
                self._dir_log.append(_DirOp(src_parent.ino, "unlink", src_name, moving.ino))
                self._dir_log.append(_DirOp(dst_parent.ino, "link", dst_name, moving.ino))

    def unlink(self, path: str) -> None:
        with self._mutex:
            self._begin("unlink", path)
            parent, name, existing = self._lookup(path)
            if existing is None:
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
            if existing.kind == stat.S_IFDIR:
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
            del parent.entries[name]
            existing.links -= 1
            parent.mtime_ns = parent.ctime_ns = existing.ctime_ns = self._now()
            self._dir_log.append(_DirOp(parent.ino, "unlink", name, existing.ino))

    def listdir(self, path: str) -> list[str]:
        with self._mutex:
            self._begin("listdir", path)
            return sorted(self._resolve_dir(path).entries)

    def makedirs(self, path: str) -> None:
        with self._mutex:
            self._begin("makedirs", path)
            parent_path, name = self._split(path)
            probe = posixpath.join(parent_path, name)
            missing: list[str] = []
            while not self._lexists(probe):
                missing.append(probe)
                parent_dir = posixpath.dirname(probe)
                if parent_dir == probe:
                    break
                probe = parent_dir
            for directory in reversed(missing):
                where, leaf = self._split(directory)
                parent = self._resolve_dir(where)
                if leaf in parent.entries:
                    continue
                made = self._new_inode(stat.S_IFDIR, 0o700 & ~_UMASK)
                self._link(parent, leaf, made)
                self._fsync_dir(parent)

    def _lexists(self, path: str) -> bool:
        try:
            return self._lookup(path)[2] is not None
        except OSError:
            return False

    def current_uid(self) -> int:
        return self._uid

    def crash_point(self, name: str) -> None:
        with self._mutex:
            if self._halted:
                raise SimulatedCrash(f"disk halted ({self.crash_reason}); at {name}")
            self.crash_points_seen.append(name)
            remaining = self._armed_points.get(name)
            if remaining is not None:
                if remaining <= 1:
                    del self._armed_points[name]
                    self._halt(f"crash point {name}")
                self._armed_points[name] = remaining - 1

    # ------------------------------------------------------------------ arming and faults

    def arm(self, name: str, nth: int = 1) -> None:
        """Crash at the ``nth`` occurrence (from now) of crash point ``name``."""
        if nth < 1:
            raise ValueError("nth must be >= 1")
        with self._mutex:
            self._armed_points[name] = nth

    def arm_io(self, k: int, *, mutating_only: bool = False) -> None:
        """Crash just before the ``k``-th I/O operation from now (1 = the next one)."""
        if k < 1:
            raise ValueError("k must be >= 1")
        with self._mutex:
            self._armed_io = (k, mutating_only)

    def disarm(self) -> None:
        with self._mutex:
            self._armed_points.clear()
            self._armed_io = None

    @property
    def halted(self) -> bool:
        return self._halted

    def set_quota(self, total_bytes: int | None) -> None:
        """Limit the total bytes of all regular files; a write past it raises ENOSPC."""
        with self._mutex:
            self._quota = total_bytes

    def inject_error(
        self,
        op: str,
        *,
        err: int = errno.EIO,
        path: str | None = None,
        nth: int = 1,
        times: int = 1,
    ) -> None:
        """Make the ``nth`` next call of seam operation ``op`` (on ``path``) raise OSError(err).

        A failing ``fsync`` leaves the data volatile.  ``times`` consecutive calls fail.
        """
        with self._mutex:
            self._error_rules.append(_ErrorRule(op, err, path, nth - 1, times))

    # ------------------------------------------------------------------ test helpers

    def make_symlink(self, path: str, target: str) -> None:
        """Create a symlink (durably, with its directory) -- for tests."""
        with self._mutex:
            parent, name, existing = self._lookup(path)
            if existing is not None:
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), path)
            inode = self._new_inode(stat.S_IFLNK, 0o777)
            inode.target = target
            self._link(parent, name, inode)
            self._fsync_dir(parent)

    def make_hard_link(self, path: str, existing: str) -> None:
        """Give the file at ``existing`` a second name ``path`` (durably) -- for tests."""
        with self._mutex:
            inode = self._lookup_existing(existing)
            if inode.kind == stat.S_IFDIR:
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), existing)
            parent, name, taken = self._lookup(path)
            if taken is not None:
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), path)
            self._link(parent, name, inode)
            inode.ctime_ns = self._now()
            self._fsync_dir(parent)

    def put_file(
        self, path: str, data: bytes, *, durable: bool = True, uid: int | None = None
    ) -> None:
        """Create or replace a file's bytes directly (tampering, fixtures); not counted as I/O."""
        with self._mutex:
            parent, name, existing = self._lookup(path)
            if existing is None:
                existing = self._new_inode(stat.S_IFREG, 0o600)
                self._link(parent, name, existing)
            if existing.kind != stat.S_IFREG:
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
            existing.data = bytearray(data)
            existing.mtime_ns = existing.ctime_ns = self._now()
            if uid is not None:
                existing.uid = uid
            if durable:
                existing.durable = bytes(data)
                existing.pending.clear()
                self._fsync_dir(parent)
            else:
                existing.pending.append(("t", 0, b""))
                existing.pending.append(("w", 0, bytes(data)))

    def chown(self, path: str, uid: int) -> None:
        with self._mutex:
            self._lookup_existing(path).uid = uid

    def chmod(self, path: str, perm: int) -> None:
        with self._mutex:
            self._lookup_existing(path).perm = perm & 0o7777

    def advance_time(self, seconds: float) -> None:
        """Move the disk's timestamp base (mtime/ctime of later changes) forward."""
        with self._mutex:
            self._time_base_ns += int(seconds * 1e9)

    def now_ns(self) -> int:
        """The timestamp the next change would get (without taking it)."""
        return self._time_base_ns + self._tick + 1

    def read_file(self, path: str) -> bytes:
        """The volatile bytes of a regular file (follows nothing); not counted as I/O."""
        with self._mutex:
            inode = self._lookup_existing(path)
            if inode.kind != stat.S_IFREG:
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
            return bytes(inode.data)

    def exists(self, path: str) -> bool:
        """Whether an entry is at ``path`` (volatile view, not following the last symlink)."""
        with self._mutex:
            return self._lexists(path)

    def snapshot(self, *, durable: bool = False) -> dict[str, bytes | str | None]:
        """Every path -> bytes (file), target string (symlink) or None (directory).

        ``durable=True`` shows what a ``drop`` crash would keep, without crashing.
        """
        with self._mutex:
            out: dict[str, bytes | str | None] = {}
            self._walk(self._inodes[self._root], "/", out, durable, set())
            return out

    def _walk(
        self,
        directory: _Inode,
        path: str,
        out: dict[str, bytes | str | None],
        durable: bool,
        seen: set[int],
    ) -> None:
        if directory.ino in seen:
            return
        seen.add(directory.ino)
        entries = directory.durable_entries if durable else directory.entries
        for name in sorted(entries):
            inode = self._inodes[entries[name]]
            child = posixpath.join(path, name)
            if inode.kind == stat.S_IFREG:
                out[child] = inode.durable if durable else bytes(inode.data)
            elif inode.kind == stat.S_IFLNK:
                out[child] = inode.target
            else:
                out[child] = None
                self._walk(inode, child, out, durable, seen)

    def durable_read(self, path: str) -> bytes | None:
        """The durable bytes at ``path`` if a crash now would keep the file there, else None."""
        with self._mutex:
            current = self._inodes[self._root]
            parts = [p for p in posixpath.normpath(path).split("/") if p]
            for part in parts:
                if current.kind != stat.S_IFDIR:
                    return None
                ino = current.durable_entries.get(part)
                if ino is None:
                    return None
                current = self._inodes[ino]
            return current.durable if current.kind == stat.S_IFREG else None

    def unsynced(self) -> tuple[int, int]:
        """(unsynced directory operations, files with unsynced writes)."""
        with self._mutex:
            files = sum(1 for i in self._inodes.values() if i.pending)
            return len(self._dir_log), files

    # ------------------------------------------------------------------ the crash

    def crash(
        self,
        mode: str = "drop",
        choices: int | random.Random | Sequence[int] | Callable[[int], int] | Chooser = 0,
        *,
        granularity: int | None = None,
    ) -> CrashReport:
        """Reboot: keep only durable state (plus what ``mode`` lets survive).

        Every handle and lock is invalidated; armed crashes are disarmed; the
        disk runs again.  Returns what was kept and lost.
        """
        if mode not in CRASH_MODES:
            raise ValueError(f"unknown crash mode {mode!r}; want one of {CRASH_MODES}")
        if granularity is not None and granularity < 1:
            raise ValueError("granularity must be >= 1")
        chooser = choices if isinstance(choices, Chooser) else Chooser(choices)
        with self._cond:
            if mode == "torn" and granularity is None:
                granularity = TORN_GRANULARITIES[chooser.choose(len(TORN_GRANULARITIES))]
            kept_ops, lost_ops = self._crash_dirs(chooser if mode == "dir_subset" else None)
            files_torn = bytes_kept = bytes_lost = 0
            for ino in sorted(self._inodes):
                inode = self._inodes[ino]
                if inode.kind != stat.S_IFREG:
                    continue
                if inode.pending:
                    if mode == "torn":
                        assert granularity is not None
                        torn = self._torn_content(inode, granularity, chooser)
                        if torn != inode.durable:
                            files_torn += 1
                        inode.durable = torn
                    bytes_lost += abs(len(inode.data) - len(inode.durable))
                bytes_kept += len(inode.durable)
                inode.data = bytearray(inode.durable)
                inode.pending.clear()
                inode.open_count = 0
                inode.lock_exclusive = None
                inode.lock_shared.clear()
            self._handles.clear()
            self._armed_points.clear()
            self._armed_io = None
            self._halted = False
            self.crash_reason = None
            self._collect_garbage()
            self._cond.notify_all()
            report = CrashReport(
                mode=mode,
                granularity=granularity,
                dir_ops_kept=kept_ops,
                dir_ops_lost=lost_ops,
                files_torn=files_torn,
                bytes_kept=bytes_kept,
                bytes_lost=bytes_lost,
                choices=tuple(chooser.made),
            )
            self.crashes.append(report)
            return report

    def _crash_dirs(self, chooser: Chooser | None) -> tuple[int, int]:
        kept = 0
        lost = 0
        blocked: set[tuple[int, str]] = set()
        for op in self._dir_log:
            names = {(op.dir_ino, op.name)}
            if op.kind == "rename":
                names.add((op.dir_ino, op.new_name))
            keep = chooser is not None and not (names & blocked) and chooser.choose(2) == 1
            if not keep:
                blocked |= names
                lost += 1
                continue
            kept += 1
            directory = self._inodes[op.dir_ino]
            if op.kind == "link":
                directory.durable_entries[op.name] = op.ino
            elif op.kind == "unlink":
                directory.durable_entries.pop(op.name, None)
            else:
                ino = directory.durable_entries.pop(op.name, op.ino)
                directory.durable_entries[op.new_name] = ino
        self._dir_log.clear()
        for inode in self._inodes.values():
            inode.links = 0
        for inode in list(self._inodes.values()):
            if inode.kind == stat.S_IFDIR:
                inode.entries = dict(inode.durable_entries)
                for ino in inode.entries.values():
                    self._inodes[ino].links += 1
        return kept, lost

    @staticmethod
    def _torn_content(inode: _Inode, granularity: int, chooser: Chooser) -> bytes:
        """Keep whole unsynced writes in order, then an aligned prefix of the next one."""
        # candidate cut points: index 0 = nothing kept; then per op its aligned cuts
        cuts: list[tuple[int, int]] = [(-1, 0)]  # (op index, prefix length)
        for index, (kind, offset, data) in enumerate(inode.pending):
            if kind == "w":
                first = (offset // granularity + 1) * granularity
                for boundary in range(first, offset + len(data), granularity):
                    cuts.append((index, boundary - offset))
            cuts.append((index, len(data) if kind == "w" else 0))
        op_index, prefix = cuts[chooser.choose(len(cuts))]
        content = bytearray(inode.durable)
        for index, (kind, offset, data) in enumerate(inode.pending[: op_index + 1]):
            if kind == "t":
                if offset > len(content):
                    content.extend(b"\0" * (offset - len(content)))
                else:
                    del content[offset:]
                continue
            piece = data if index < op_index else data[:prefix]
            if len(content) < offset:
                content.extend(b"\0" * (offset - len(content)))
            content[offset : offset + len(piece)] = piece
        return bytes(content)

    def _collect_garbage(self) -> None:
        reachable = self._reachable(durable=False)
        for ino in [i for i in self._inodes if i not in reachable]:
            del self._inodes[ino]


def torn_cut_sizes(durable_size: int, final_size: int, granularity: int) -> list[int]:
    """File sizes one unsynced append from ``durable_size`` to ``final_size`` may tear to."""
    first = (durable_size // granularity + 1) * granularity
    sizes = [durable_size, *range(first, final_size, granularity)]
    if final_size > durable_size:
        sizes.append(final_size)
    return sizes
