"""The forgetful file system's state: what processes see, what a power cut keeps.

Rules
=====

1. The backing folder holds the durable state and nothing else: a file's bytes
   there are the ones its last ``fsync`` made durable, and a name is there when
   its directory was fsynced after the name was made (or it was there at mount).
   While mounted, the folder also holds a private store, :data:`PRIVATE_NAME`,
   which no process on the mount can see or make.
2. What processes on the mount see is the volatile state: the durable state plus
   every write and directory operation since.  Unsynced file data is kept in
   memory, never in the backing folder.
3. ``fsync``/``fdatasync`` of a file (any handle) writes its unsynced data into
   the backing folder; ``fsync`` of a directory makes the backing directory's
   names its volatile names.  Attributes (mode, owner, times) are not modelled:
   a change is written at once and survives.
4. :meth:`ForgetfulTree.power_cut` keeps of the unsynced work what its mode
   allows (:mod:`._crashplan`, the simulated disk's own rules), writes that into
   the backing folder, removes the private store and *freezes*: every later
   operation waits, then fails with ``EIO`` once :meth:`ForgetfulTree.release`
   is called.  :meth:`ForgetfulTree.sync_all` (a clean unmount) makes
   everything durable instead.
5. A directory cannot be renamed into another directory (``EXDEV``, which makes
   ``mv`` copy): its durable name could otherwise be in two places at once
   after a crash, which no real file system shows and a folder cannot hold.

Theory of operation
===================

The tree is the simulated disk's model -- inodes, each directory with volatile
and durable entries, a log of unsynced directory operations, each file with its
unsynced operations in order -- with the durable half kept in a real folder
instead of in memory.

Every file (and symlink, FIFO, ...) has an *anchor*: a hard link
``<store>/<ino>`` to a backing inode that holds its durable bytes, so they live
on while no durable name reaches the file (created, fsynced, its directory not
yet).  A durable name of the file is one more hard link to that inode.  A
directory's backing folder is at its durable name, or at ``<store>/<ino>``
while it has none.  Syncing a directory turns the difference between its old
and new durable entries into unlinks, links and renames of those objects;
after a power cut whatever only the store reached goes with it.

Unsynced bytes live in whole dirty pages (:data:`PAGE` bytes) over the
anchor's bytes; a truncation below the durable size hides the anchor past it
(``clean_limit``) until the next fsync.  The list of unsynced operations is
kept beside the pages for the torn mode, which replays a prefix of it onto the
anchor.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import shutil
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs

from ._crashplan import (
    DirOp,
    Pending,
    apply_dir_op,
    choose_granularity,
    surviving_dir_ops,
    torn_kept,
)
from .disk import Chooser, CrashReport

__all__ = ["PAGE", "PRIVATE_NAME", "ForgetfulTree"]

#: The private store's name in the backing folder's root (reserved on the mount).
PRIVATE_NAME = ".forgetful-fs-private"
#: Unsynced data is kept in pages of this size.
PAGE = 4096

_UTIME_NOW = (1 << 30) - 1
_UTIME_OMIT = (1 << 30) - 2
_MAX_OPEN_ANCHORS = 128
_RENAME_NOREPLACE = 1


def _error(code: int, path: str = "") -> OSError:
    return OSError(code, os.strerror(code), path) if path else OSError(code, os.strerror(code))


@attrs.define(eq=False)
class _Node:
    ino: int
    kind: int  # stat.S_IFMT bits
    perm: int
    uid: int
    gid: int
    atime_ns: int
    mtime_ns: int
    ctime_ns: int
    rdev: int = 0
    links: int = 0  # volatile names of it
    size: int = 0  # volatile size (regular files)
    durable_size: int = 0
    clean_limit: int = 0  # the anchor's bytes past this are not part of the volatile content
    pages: dict[int, bytearray] = attrs.field(factory=dict)
    pending: list[Pending] = attrs.field(factory=list)
    entries: dict[str, int] = attrs.field(factory=dict)
    durable_entries: dict[str, int] = attrs.field(factory=dict)
    durable_at: tuple[int, str] | None = None  # directories: (parent, name) in the backing folder
    target: str = ""  # symlinks


@attrs.define(eq=False)
class _Handle:
    ino: int
    flags: int


class ForgetfulTree:
    """The mounted state over ``backing``; every method is one file-system operation.

    Paths are absolute on the mount (``/a/b``).  Thread-safe: one lock orders
    every operation, the cut and the sync, so a power cut falls between two
    operations, never inside one.
    """

    def __init__(self, backing: str, *, clock: Callable[[], int] = time.time_ns) -> None:
        self.backing = os.path.realpath(backing)
        self.store = os.path.join(self.backing, PRIVATE_NAME)
        self._clock = clock
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._state = "running"  # running -> frozen (cut) -> dead
        self._nodes: dict[int, _Node] = {}
        self._handles: dict[int, _Handle] = {}
        self._next_ino = 1
        self._next_fh = 1
        self._dir_log: list[DirOp] = []
        self._anchors: OrderedDict[int, int] = OrderedDict()  # ino -> open fd, least recent first
        self._load()

    # ------------------------------------------------------------------ loading

    def _load(self) -> None:
        if os.path.lexists(self.store):  # an unclean stop: only the store held it, never durable
            shutil.rmtree(self.store)
        os.mkdir(self.store, 0o700)
        root = self._node_from_stat(os.stat(self.backing))
        self._root = root.ino
        root.links = 1
        self._walk(root, self.backing, {})

    def _node_from_stat(self, st: os.stat_result) -> _Node:
        node = _Node(
            ino=self._next_ino,
            kind=stat.S_IFMT(st.st_mode),
            perm=stat.S_IMODE(st.st_mode),
            uid=st.st_uid,
            gid=st.st_gid,
            atime_ns=st.st_atime_ns,
            mtime_ns=st.st_mtime_ns,
            ctime_ns=st.st_ctime_ns,
            rdev=st.st_rdev,
        )
        self._next_ino += 1
        self._nodes[node.ino] = node
        return node

    def _walk(self, directory: _Node, path: str, seen: dict[tuple[int, int], int]) -> None:
        for name in sorted(os.listdir(path)):
            if directory.ino == self._root and name == PRIVATE_NAME:
                continue
            full = os.path.join(path, name)
            st = os.lstat(full)
            if stat.S_ISDIR(st.st_mode):
                child = self._node_from_stat(st)
                child.durable_at = (directory.ino, name)
                self._walk(child, full, seen)
            elif (st.st_dev, st.st_ino) in seen:  # another name of a file already anchored
                child = self._nodes[seen[(st.st_dev, st.st_ino)]]
            else:
                child = self._node_from_stat(st)
                seen[(st.st_dev, st.st_ino)] = child.ino
                os.link(full, self._anchor_path(child.ino), follow_symlinks=False)
                if stat.S_ISLNK(st.st_mode):
                    child.target = os.readlink(full)
                elif stat.S_ISREG(st.st_mode):
                    child.size = child.durable_size = child.clean_limit = st.st_size
            directory.entries[name] = directory.durable_entries[name] = child.ino
            child.links += 1

    # ------------------------------------------------------------------ helpers

    @contextlib.contextmanager
    def _operation(self) -> Iterator[None]:
        with self._lock:
            while self._state == "frozen":
                self._cond.wait()
            if self._state != "running":
                raise _error(errno.EIO)
            yield

    def _anchor_path(self, ino: int) -> str:
        return os.path.join(self.store, str(ino))

    def _anchor_fd(self, node: _Node) -> int:
        fd = self._anchors.pop(node.ino, None)
        if fd is None:
            fd = os.open(self._anchor_path(node.ino), os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
            while len(self._anchors) >= _MAX_OPEN_ANCHORS:
                os.close(self._anchors.popitem(last=False)[1])
        self._anchors[node.ino] = fd
        return fd

    def _close_anchors(self) -> None:
        while self._anchors:
            os.close(self._anchors.popitem()[1])

    def _backing_dir(self, node: _Node) -> str:
        if node.ino == self._root:
            return self.backing
        if node.durable_at is None:
            return self._anchor_path(node.ino)
        parent, name = node.durable_at
        return os.path.join(self._backing_dir(self._nodes[parent]), name)

    def _backing_object(self, node: _Node) -> str:
        return self._backing_dir(node) if node.kind == stat.S_IFDIR else self._anchor_path(node.ino)

    def _resolve(self, path: str) -> _Node:
        node = self._nodes[self._root]
        for part in path.split("/"):
            if not part:
                continue
            if node.kind != stat.S_IFDIR:
                raise _error(errno.ENOTDIR, path)
            ino = node.entries.get(part)
            if ino is None:
                raise _error(errno.ENOENT, path)
            node = self._nodes[ino]
        return node

    def _split(self, path: str) -> tuple[_Node, str]:
        head, name = posixpath.split(path.rstrip("/"))
        if not name:
            raise _error(errno.EBUSY, path)
        parent = self._resolve(head)
        if parent.kind != stat.S_IFDIR:
            raise _error(errno.ENOTDIR, path)
        return parent, name

    def _new_entry(self, path: str) -> tuple[_Node, str]:
        parent, name = self._split(path)
        if name in parent.entries:
            raise _error(errno.EEXIST, path)
        if parent.ino == self._root and name == PRIVATE_NAME:
            raise _error(errno.EPERM, path)
        return parent, name

    def _node_for(self, path: str | None, fh: int | None) -> _Node:
        if fh is not None and fh in self._handles:
            return self._nodes[self._handles[fh].ino]
        if path is None:
            raise _error(errno.EBADF)
        return self._resolve(path)

    def _handle_node(self, fh: int) -> _Node:
        handle = self._handles.get(fh)
        if handle is None:
            raise _error(errno.EBADF)
        return self._nodes[handle.ino]

    def _make(self, kind: int, perm: int, uid: int, gid: int, rdev: int = 0) -> _Node:
        now = self._clock()
        node = _Node(
            ino=self._next_ino,
            kind=kind,
            perm=perm & 0o7777,
            uid=uid,
            gid=gid,
            atime_ns=now,
            mtime_ns=now,
            ctime_ns=now,
            rdev=rdev,
        )
        self._next_ino += 1
        self._nodes[node.ino] = node
        return node

    def _own(self, node: _Node) -> None:
        """Give the backing object the node's mode and owner (attributes are not modelled)."""
        where = self._backing_object(node)
        if node.kind != stat.S_IFLNK:
            os.chmod(where, node.perm)
        with contextlib.suppress(PermissionError):
            os.chown(where, node.uid, node.gid, follow_symlinks=False)

    def _touch(self, node: _Node) -> None:
        node.mtime_ns = node.ctime_ns = self._clock()

    def _link(self, parent: _Node, name: str, node: _Node) -> None:
        parent.entries[name] = node.ino
        node.links += 1
        self._touch(parent)
        self._dir_log.append(DirOp(parent.ino, "link", name, node.ino))

    def _open(self, node: _Node, flags: int) -> int:
        fh = self._next_fh
        self._next_fh += 1
        self._handles[fh] = _Handle(node.ino, flags)
        return fh

    # ------------------------------------------------------------------ metadata

    def getattr(self, path: str | None, fh: int | None = None) -> dict[str, int]:
        with self._operation():
            return self._attrs(self._node_for(path, fh))

    def _attrs(self, node: _Node) -> dict[str, int]:
        if node.kind == stat.S_IFREG:
            size, nlink = node.size, node.links
        elif node.kind == stat.S_IFDIR:
            subdirs = sum(1 for i in node.entries.values() if self._nodes[i].kind == stat.S_IFDIR)
            size, nlink = 4096, 2 + subdirs if node.links else 0
        elif node.kind == stat.S_IFLNK:
            size, nlink = len(os.fsencode(node.target)), node.links
        else:
            size, nlink = 0, node.links
        return {
            "st_ino": node.ino,
            "st_mode": node.kind | node.perm,
            "st_nlink": nlink,
            "st_uid": node.uid,
            "st_gid": node.gid,
            "st_rdev": node.rdev,
            "st_size": size,
            "st_blksize": PAGE,
            "st_blocks": (size + 511) // 512,
            "st_atime": node.atime_ns,
            "st_mtime": node.mtime_ns,
            "st_ctime": node.ctime_ns,
        }

    def chmod(self, path: str | None, mode: int, fh: int | None = None) -> None:
        with self._operation():
            node = self._node_for(path, fh)
            node.perm = mode & 0o7777
            node.ctime_ns = self._clock()
            self._own(node)

    def chown(self, path: str | None, uid: int, gid: int, fh: int | None = None) -> None:
        with self._operation():
            node = self._node_for(path, fh)
            if uid != -1:
                node.uid = uid
            if gid != -1:
                node.gid = gid
            node.ctime_ns = self._clock()
            self._own(node)

    def utimens(
        self, path: str | None, times: tuple[int, int] | None, fh: int | None = None
    ) -> None:
        with self._operation():
            node = self._node_for(path, fh)
            now = self._clock()
            atime, mtime = times if times is not None else (_UTIME_NOW, _UTIME_NOW)
            if atime != _UTIME_OMIT:
                node.atime_ns = now if atime == _UTIME_NOW else atime
            if mtime != _UTIME_OMIT:
                node.mtime_ns = now if mtime == _UTIME_NOW else mtime
            node.ctime_ns = now
            times = (node.atime_ns, node.mtime_ns)
            os.utime(self._backing_object(node), ns=times, follow_symlinks=False)

    def statfs(self) -> dict[str, int]:
        with self._operation():
            st = os.statvfs(self.backing)
            return {
                key: getattr(st, key)
                for key in (
                    "f_bsize",
                    "f_frsize",
                    "f_blocks",
                    "f_bfree",
                    "f_bavail",
                    "f_files",
                    "f_ffree",
                    "f_favail",
                    "f_namemax",
                )
            }

    # ------------------------------------------------------------------ directories

    def opendir(self, path: str) -> int:
        with self._operation():
            node = self._resolve(path)
            if node.kind != stat.S_IFDIR:
                raise _error(errno.ENOTDIR, path)
            return self._open(node, os.O_RDONLY)

    def readdir(self, path: str | None, fh: int | None = None) -> list[tuple[str, int, int]]:
        """(name, mode, inode) of every entry, ``.`` and ``..`` first."""
        with self._operation():
            node = self._node_for(path, fh)
            if node.kind != stat.S_IFDIR:
                raise _error(errno.ENOTDIR)
            out = [(".", stat.S_IFDIR, node.ino), ("..", stat.S_IFDIR, 0)]
            for name in sorted(node.entries):
                child = self._nodes[node.entries[name]]
                out.append((name, child.kind, child.ino))
            return out

    def mkdir(self, path: str, mode: int, uid: int = 0, gid: int = 0) -> None:
        with self._operation():
            parent, name = self._new_entry(path)
            node = self._make(stat.S_IFDIR, mode, uid, gid)
            node.links = 0
            os.mkdir(self._anchor_path(node.ino), 0o700)
            self._own(node)
            self._link(parent, name, node)

    def rmdir(self, path: str) -> None:
        with self._operation():
            parent, name = self._split(path)
            ino = parent.entries.get(name)
            if ino is None:
                raise _error(errno.ENOENT, path)
            node = self._nodes[ino]
            if node.kind != stat.S_IFDIR:
                raise _error(errno.ENOTDIR, path)
            if node.entries:
                raise _error(errno.ENOTEMPTY, path)
            self._unlink_entry(parent, name, node)

    def _unlink_entry(self, parent: _Node, name: str, node: _Node) -> None:
        del parent.entries[name]
        node.links -= 1
        self._touch(parent)
        node.ctime_ns = parent.ctime_ns
        self._dir_log.append(DirOp(parent.ino, "unlink", name, node.ino))

    def fsyncdir(self, fh: int) -> None:
        with self._operation():
            node = self._handle_node(fh)
            if node.kind != stat.S_IFDIR:
                raise _error(errno.ENOTDIR)
            self._sync_dir(node)

    def fsync_dir_path(self, path: str) -> None:
        """``fsync`` of the directory at ``path`` (what opening it and ``fsync`` do)."""
        with self._operation():
            node = self._resolve(path)
            if node.kind != stat.S_IFDIR:
                raise _error(errno.ENOTDIR, path)
            self._sync_dir(node)

    def releasedir(self, fh: int) -> None:
        self.release(fh)

    def _sync_dir(self, node: _Node) -> None:
        self._set_durable_entries(node, dict(node.entries))
        self._dir_log = [op for op in self._dir_log if op.dir_ino != node.ino]

    def _set_durable_entries(self, node: _Node, new: dict[str, int]) -> None:
        """Make the backing directory of ``node`` hold exactly ``new``."""
        old = node.durable_entries
        if old == new:
            return
        base = self._backing_dir(node)
        for name, ino in old.items():  # removals first: a replaced name must be free
            if new.get(name) == ino:
                continue
            child = self._nodes[ino]
            if child.kind == stat.S_IFDIR:
                os.rename(os.path.join(base, name), self._anchor_path(ino))
                child.durable_at = None
            else:
                os.unlink(os.path.join(base, name))
        for name, ino in new.items():
            if old.get(name) == ino:
                continue
            child = self._nodes[ino]
            if child.kind == stat.S_IFDIR:
                os.rename(self._anchor_path(ino), os.path.join(base, name))
                child.durable_at = (node.ino, name)
            else:
                os.link(self._anchor_path(ino), os.path.join(base, name), follow_symlinks=False)
        node.durable_entries = new

    # ------------------------------------------------------------------ names

    def unlink(self, path: str) -> None:
        with self._operation():
            parent, name = self._split(path)
            ino = parent.entries.get(name)
            if ino is None:
                raise _error(errno.ENOENT, path)
            node = self._nodes[ino]
            if node.kind == stat.S_IFDIR:
                raise _error(errno.EISDIR, path)
            self._unlink_entry(parent, name, node)

    def rename(self, source: str, target: str, flags: int = 0) -> None:
        with self._operation():
            if flags & ~_RENAME_NOREPLACE:
                raise _error(errno.EINVAL, target)  # RENAME_EXCHANGE / WHITEOUT: not modelled
            src_parent, src_name = self._split(source)
            dst_parent, dst_name = self._split(target)
            ino = src_parent.entries.get(src_name)
            if ino is None:
                raise _error(errno.ENOENT, source)
            moving = self._nodes[ino]
            existing_ino = dst_parent.entries.get(dst_name)
            if existing_ino is not None and flags & _RENAME_NOREPLACE:
                raise _error(errno.EEXIST, target)
            if existing_ino == ino:
                return  # two names of one file: rename(2) does nothing
            if dst_parent.ino == self._root and dst_name == PRIVATE_NAME:
                raise _error(errno.EPERM, target)
            src_norm, dst_norm = posixpath.normpath(source), posixpath.normpath(target)
            if dst_norm.startswith(src_norm + "/"):  # into its own subtree (as the kernel says)
                raise _error(errno.EINVAL, target)
            if src_norm.startswith(dst_norm + "/"):  # onto its own ancestor
                raise _error(errno.ENOTEMPTY, target)
            if moving.kind == stat.S_IFDIR and src_parent is not dst_parent:
                raise _error(errno.EXDEV, target)  # rule 5
            if existing_ino is not None:
                existing = self._nodes[existing_ino]
                if existing.kind == stat.S_IFDIR and moving.kind != stat.S_IFDIR:
                    raise _error(errno.EISDIR, target)
                if existing.kind != stat.S_IFDIR and moving.kind == stat.S_IFDIR:
                    raise _error(errno.ENOTDIR, target)
                if existing.kind == stat.S_IFDIR and existing.entries:
                    raise _error(errno.ENOTEMPTY, target)
                existing.links -= 1
            now = self._clock()
            del src_parent.entries[src_name]
            dst_parent.entries[dst_name] = ino
            moving.ctime_ns = now
            src_parent.mtime_ns = src_parent.ctime_ns = now
            dst_parent.mtime_ns = dst_parent.ctime_ns = now
            if src_parent is dst_parent:
                self._dir_log.append(DirOp(src_parent.ino, "rename", src_name, ino, dst_name))
            else:
                self._dir_log.append(DirOp(src_parent.ino, "unlink", src_name, ino))
                self._dir_log.append(DirOp(dst_parent.ino, "link", dst_name, ino))

    def link(self, existing: str, path: str) -> None:
        with self._operation():
            node = self._resolve(existing)
            if node.kind == stat.S_IFDIR:
                raise _error(errno.EPERM, existing)
            parent, name = self._new_entry(path)
            node.ctime_ns = self._clock()
            self._link(parent, name, node)

    def symlink(self, target: str, path: str, uid: int = 0, gid: int = 0) -> None:
        with self._operation():
            parent, name = self._new_entry(path)
            node = self._make(stat.S_IFLNK, 0o777, uid, gid)
            node.target = target
            os.symlink(target, self._anchor_path(node.ino))
            self._own(node)
            self._link(parent, name, node)

    def readlink(self, path: str) -> str:
        with self._operation():
            node = self._resolve(path)
            if node.kind != stat.S_IFLNK:
                raise _error(errno.EINVAL, path)
            return node.target

    def mknod(self, path: str, mode: int, dev: int = 0, uid: int = 0, gid: int = 0) -> None:
        with self._operation():
            parent, name = self._new_entry(path)
            kind = stat.S_IFMT(mode) or stat.S_IFREG
            device = dev if kind in (stat.S_IFCHR, stat.S_IFBLK) else 0
            node = self._make(kind, mode, uid, gid, device)
            if kind == stat.S_IFREG:
                os.close(os.open(self._anchor_path(node.ino), os.O_CREAT | os.O_EXCL, 0o600))
            else:
                os.mknod(self._anchor_path(node.ino), kind | 0o600, node.rdev)
            self._own(node)
            self._link(parent, name, node)

    # ------------------------------------------------------------------ files

    def create(
        self, path: str, mode: int, flags: int = os.O_RDWR, uid: int = 0, gid: int = 0
    ) -> int:
        with self._operation():
            parent, name = self._split(path)
            if name in parent.entries and not flags & os.O_EXCL:  # lost a race to create it
                return self.open(path, flags)
            parent, name = self._new_entry(path)
            node = self._make(stat.S_IFREG, mode, uid, gid)
            fd = os.open(self._anchor_path(node.ino), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            os.close(fd)
            self._own(node)
            self._link(parent, name, node)
            return self._open(node, flags)

    def open(self, path: str, flags: int) -> int:
        with self._operation():
            node = self._resolve(path)
            if node.kind == stat.S_IFDIR:
                raise _error(errno.EISDIR, path)
            if node.kind != stat.S_IFREG:
                raise _error(errno.ENXIO, path)  # FIFOs and devices are opened by the kernel
            if flags & os.O_TRUNC and flags & os.O_ACCMODE != os.O_RDONLY:
                self._truncate(node, 0)
            return self._open(node, flags)

    def release(self, fh: int) -> None:
        with self._lock:  # a handle may be let go even after the cut
            self._handles.pop(fh, None)

    def read(self, fh: int, size: int, offset: int) -> bytes:
        with self._operation():
            node = self._handle_node(fh)
            end = min(offset + size, node.size)
            if offset >= end:
                return b""
            out = bytearray(end - offset)
            clean_end = min(end, node.clean_limit)
            if offset < clean_end:
                chunk = os.pread(self._anchor_fd(node), clean_end - offset, offset)
                out[: len(chunk)] = chunk
            first, last = offset // PAGE, (end - 1) // PAGE
            indexes: Sequence[int]
            if len(node.pages) < last - first + 1:
                indexes = [i for i in node.pages if first <= i <= last]
            else:
                indexes = range(first, last + 1)
            for index in indexes:
                page = node.pages.get(index)
                if page is None:
                    continue
                start = index * PAGE
                lo, hi = max(start, offset), min(start + PAGE, end)
                out[lo - offset : hi - offset] = page[lo - start : hi - start]
            return bytes(out)

    def write(self, fh: int, data: bytes, offset: int) -> int:
        with self._operation():
            node = self._handle_node(fh)
            if not data:
                return 0
            end = offset + len(data)
            position = offset
            while position < end:
                index = position // PAGE
                start = index * PAGE
                page = node.pages.get(index)
                if page is None:
                    page = self._load_page(node, index)
                stop = min(start + PAGE, end)
                page[position - start : stop - start] = data[position - offset : stop - offset]
                position = stop
            node.size = max(node.size, end)
            node.pending.append(("w", offset, bytes(data)))
            self._touch(node)
            return len(data)

    def _load_page(self, node: _Node, index: int) -> bytearray:
        start = index * PAGE
        page = bytearray(PAGE)
        limit = min(start + PAGE, node.clean_limit)
        if start < limit:
            chunk = os.pread(self._anchor_fd(node), limit - start, start)
            page[: len(chunk)] = chunk
        node.pages[index] = page
        return page

    def truncate(self, path: str | None, size: int, fh: int | None = None) -> None:
        with self._operation():
            node = self._node_for(path, fh)
            if node.kind == stat.S_IFDIR:
                raise _error(errno.EISDIR)
            if node.kind != stat.S_IFREG or size < 0:
                raise _error(errno.EINVAL)
            self._truncate(node, size)

    def _truncate(self, node: _Node, size: int) -> None:
        if size < node.size:
            for index in [i for i in node.pages if i * PAGE >= size]:
                del node.pages[index]
            index = size // PAGE
            page = node.pages.get(index)
            if page is not None:  # what lies past the end reads as zeros if the file grows again
                cut = size - index * PAGE
                page[cut:] = bytes(PAGE - cut)
            node.clean_limit = min(node.clean_limit, size)
        node.size = size
        node.pending.append(("t", size, b""))
        self._touch(node)

    def fsync(self, fh: int) -> None:
        """``fsync``/``fdatasync`` of a handle: its file's data (a directory: its entries)."""
        with self._operation():
            node = self._handle_node(fh)
            if node.kind == stat.S_IFDIR:
                self._sync_dir(node)
            elif node.kind == stat.S_IFREG:
                self._flush(node)

    def _flush(self, node: _Node) -> None:
        if not node.pending:
            return
        fd = self._anchor_fd(node)
        if node.clean_limit < node.durable_size:
            os.ftruncate(fd, node.clean_limit)
        for index in sorted(node.pages):
            start = index * PAGE
            length = min(PAGE, node.size - start)
            if length > 0:
                os.pwrite(fd, node.pages[index][:length], start)
        os.ftruncate(fd, node.size)
        os.utime(fd, ns=(node.atime_ns, node.mtime_ns))
        node.pages.clear()
        node.pending.clear()
        node.clean_limit = node.durable_size = node.size

    # ------------------------------------------------------------------ power

    @property
    def state(self) -> str:
        """``running``, ``frozen`` (after a cut) or ``dead`` (released or synced)."""
        return self._state

    def unsynced(self) -> tuple[int, int]:
        """(unsynced directory operations, files with unsynced writes), as the simulated disk's."""
        with self._lock:
            files = sum(1 for n in self._nodes.values() if n.pending)
            return len(self._dir_log), files

    def power_cut(
        self,
        mode: str = "drop",
        choices: int | Sequence[int] | Callable[[int], int] | Chooser = 0,
        *,
        granularity: int | None = None,
    ) -> CrashReport:
        """Keep what ``mode`` allows of the unsynced work, write it to the backing, freeze."""
        chooser = choices if isinstance(choices, Chooser) else Chooser(choices)
        with self._lock:
            if self._state != "running":
                raise RuntimeError(f"the power is already off (state {self._state})")
            granularity = choose_granularity(mode, granularity, chooser)
            kept_ops = surviving_dir_ops(self._dir_log, chooser if mode == "dir_subset" else None)
            targets: dict[int, dict[str, int]] = {}
            for op in kept_ops:
                entries = targets.get(op.dir_ino)
                if entries is None:
                    entries = targets[op.dir_ino] = dict(self._nodes[op.dir_ino].durable_entries)
                apply_dir_op(entries, op)
            for ino in sorted(targets):
                self._set_durable_entries(self._nodes[ino], targets[ino])
            files_torn = bytes_kept = bytes_lost = 0
            for ino in sorted(self._nodes):
                node = self._nodes[ino]
                if node.kind != stat.S_IFREG:
                    continue
                if node.pending:
                    if mode == "torn":
                        assert granularity is not None
                        kept = torn_kept(node.pending, granularity, chooser)
                        if self._replay(node, kept):
                            files_torn += 1
                    bytes_lost += abs(node.size - node.durable_size)
                bytes_kept += node.durable_size
            report = CrashReport(
                mode=mode,
                granularity=granularity,
                dir_ops_kept=len(kept_ops),
                dir_ops_lost=len(self._dir_log) - len(kept_ops),
                files_torn=files_torn,
                bytes_kept=bytes_kept,
                bytes_lost=bytes_lost,
                choices=tuple(chooser.made),
            )
            self._stop("frozen")
            return report

    def _replay(self, node: _Node, kept: Sequence[Pending]) -> bool:
        """Apply kept unsynced operations to the durable bytes; whether they changed."""
        if not kept:
            return False
        fd = self._anchor_fd(node)
        before = os.pread(fd, node.durable_size, 0)
        for kind, offset, data in kept:
            if kind == "t":
                os.ftruncate(fd, offset)
            else:
                os.pwrite(fd, data, offset)  # past the end the gap reads as zeros
        node.durable_size = os.fstat(fd).st_size
        return os.pread(fd, node.durable_size, 0) != before

    def sync_all(self) -> None:
        """A clean unmount: everything becomes durable; the tree is then dead."""
        with self._lock:
            if self._state != "running":
                return
            for node in list(self._nodes.values()):
                if node.kind == stat.S_IFREG:
                    self._flush(node)
            for ino in sorted(self._nodes):
                node = self._nodes[ino]
                if node.kind == stat.S_IFDIR:
                    self._sync_dir(node)
            self._stop("dead")

    def abandon(self) -> None:
        """Stop without writing anything: the backing keeps the durable state (a ``drop`` cut)."""
        with self._lock:
            if self._state == "running":
                self._stop("dead")
            else:
                self._state = "dead"
                self._cond.notify_all()

    def _stop(self, state: str) -> None:
        self._state = state
        self._dir_log.clear()
        self._close_anchors()
        shutil.rmtree(self.store, ignore_errors=True)
        self._cond.notify_all()

    def thaw(self) -> None:
        """After a cut: every waiting and later operation fails with ``EIO``."""
        with self._lock:
            self._state = "dead"
            self._cond.notify_all()

    def snapshot(self) -> dict[str, Any]:
        """Path -> bytes (file), target (symlink) or None (directory) of the volatile view."""
        with self._lock:
            out: dict[str, Any] = {}
            self._walk_view(self._nodes[self._root], "/", out)
            return out

    def _walk_view(self, directory: _Node, path: str, out: dict[str, Any]) -> None:
        for name in sorted(directory.entries):
            node = self._nodes[directory.entries[name]]
            child = posixpath.join(path, name)
            if node.kind == stat.S_IFDIR:
                out[child] = None
                self._walk_view(node, child, out)
            elif node.kind == stat.S_IFLNK:
                out[child] = node.target
            elif node.kind == stat.S_IFREG:
                out[child] = self._read_all(node)

    def _read_all(self, node: _Node) -> bytes:
        content = bytearray(node.size)
        limit = min(node.size, node.clean_limit)
        if limit:
            chunk = os.pread(self._anchor_fd(node), limit, 0)
            content[: len(chunk)] = chunk
        for index, page in node.pages.items():
            start = index * PAGE
            stop = min(start + PAGE, node.size)
            if stop > start:
                content[start:stop] = page[: stop - start]
        return bytes(content)
