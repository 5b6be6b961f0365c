"""Random programs of file-system calls, run on the simulated disk and on the forgetful one.

A program is a list of seam calls (:mod:`toolswap.fs` names) over a few paths.
:func:`run` plays it on any seam and records, per call, ``"ok"`` or the errno
it failed with, so two seams can be compared call by call.  The forgetful tree
is driven through :class:`TreeSeam` (no kernel in between); the real mount
through :class:`MountSeam` (the real seam with the mount's path in front).
"""

from __future__ import annotations

import errno
import os
import posixpath
from collections.abc import Sequence
from typing import Any, Protocol

from hypothesis import strategies as st
from toolswap.faultinject._forgetful_tree import PRIVATE_NAME, ForgetfulTree

from toolswap.fs import OsFileSystem

NAMES = ["a", "b", "d", "d/a", "d/b", "d/e", "d/e/a"]

name = st.sampled_from(NAMES)
handle_ix = st.integers(0, 5)
# directory operations weigh double: the crash modes differ most on them
op = st.one_of(
    st.tuples(st.just("create_exclusive"), name),
    st.tuples(st.just("create_exclusive"), name),
    st.tuples(st.just("rename"), name, name),
    st.tuples(st.just("unlink"), name),
    st.tuples(st.just("open_append"), name),
    st.tuples(st.just("write"), handle_ix, st.binary(min_size=1, max_size=700)),
    st.tuples(st.just("fsync"), handle_ix),
    st.tuples(st.just("ftruncate"), handle_ix, st.integers(0, 1500)),
    st.tuples(st.just("close"), handle_ix),
    st.tuples(st.just("rename"), name, name),
    st.tuples(st.just("unlink"), name),
    st.tuples(st.just("makedirs"), st.sampled_from(["d", "d/e"])),
    st.tuples(st.just("fsync_dir"), st.sampled_from(["", "d", "d/e"])),
)
programs = st.lists(op, max_size=40)
modes = st.sampled_from(["drop", "torn", "dir_subset"])


class Seam(Protocol):
    def create_exclusive(self, path: str, mode: int = 0o600) -> int: ...
    def open_append(self, path: str, mode: int = 0o600) -> int: ...
    def write(self, handle: int, data: bytes) -> None: ...
    def fsync(self, handle: int) -> None: ...
    def ftruncate(self, handle: int, size: int) -> None: ...
    def close(self, handle: int) -> None: ...
    def rename(self, source: str, target: str) -> None: ...
    def unlink(self, path: str) -> None: ...
    def makedirs(self, path: str) -> None: ...
    def fsync_dir(self, path: str) -> None: ...
    def is_dir(self, path: str) -> bool: ...


class TreeSeam:
    """The seam calls the programs use, made on a :class:`ForgetfulTree` directly."""

    def __init__(self, tree: ForgetfulTree) -> None:
        self.tree = tree
        self._handles: dict[int, tuple[int, bool]] = {}  # fh -> (position, append)

    def create_exclusive(self, path: str, mode: int = 0o600) -> int:
        fh = self.tree.create(path, mode, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        self._handles[fh] = (0, False)
        return fh

    def open_append(self, path: str, mode: int = 0o600) -> int:
        try:
            fh = self.tree.open(path, os.O_RDWR | os.O_APPEND)
        except FileNotFoundError:
            fh = self.tree.create(path, mode, os.O_RDWR | os.O_APPEND)
        self._handles[fh] = (0, True)
        return fh

    def write(self, handle: int, data: bytes) -> None:
        position, append = self._handles[handle]
        if append:
            position = self.tree.getattr(None, handle)["st_size"]
        self.tree.write(handle, data, position)
        self._handles[handle] = (position + len(data), append)

    def fsync(self, handle: int) -> None:
        self.tree.fsync(handle)

    def ftruncate(self, handle: int, size: int) -> None:
        self.tree.truncate(None, size, fh=handle)

    def close(self, handle: int) -> None:
        self.tree.release(handle)
        del self._handles[handle]

    def rename(self, source: str, target: str) -> None:
        self.tree.rename(source, target)

    def unlink(self, path: str) -> None:
        self.tree.unlink(path)

    def _exists(self, path: str) -> bool:
        try:
            self.tree.getattr(path)
        except OSError:
            return False
        return True

    def makedirs(self, path: str) -> None:  # the real seam's algorithm, call for call
        missing: list[str] = []
        probe = path
        while not self._exists(probe):
            missing.append(probe)
            parent = posixpath.dirname(probe)
            if parent == probe:
                break
            probe = parent
        for directory in reversed(missing):
            try:
                self.tree.mkdir(directory, 0o700)
            except FileExistsError:
                continue
            self.tree.fsync_dir_path(posixpath.dirname(directory))

    def fsync_dir(self, path: str) -> None:
        self.tree.fsync_dir_path(path)

    def is_dir(self, path: str) -> bool:
        try:
            return bool(self.tree.getattr(path)["st_mode"] & 0o040000)
        except OSError:
            return False


class DiskSeam:
    """The simulated disk, with the one question the runner asks of every seam."""

    def __init__(self, disk: Any) -> None:
        self.disk = disk

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.disk, attr)

    def is_dir(self, path: str) -> bool:
        try:
            return bool(self.disk.lstat(path).is_dir)
        except OSError:
            return False


class MountSeam(OsFileSystem):
    """The real seam on the mount: program paths are relative to ``root``."""

    def __init__(self, root: str) -> None:
        self.root = root

    def _at(self, path: str) -> str:
        return self.root + path if path != "/" else self.root

    def create_exclusive(self, path: str, mode: int = 0o600) -> int:
        return super().create_exclusive(self._at(path), mode)

    def open_append(self, path: str, mode: int = 0o600) -> int:
        return super().open_append(self._at(path), mode)

    def rename(self, source: str, target: str) -> None:
        super().rename(self._at(source), self._at(target))

    def unlink(self, path: str) -> None:
        super().unlink(self._at(path))

    def makedirs(self, path: str) -> None:
        super().makedirs(self._at(path))

    def fsync_dir(self, path: str) -> None:
        inside = path == self.root or path.startswith(self.root + "/")  # from makedirs
        super().fsync_dir(path if inside else self._at(path))

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(self._at(path)) and not os.path.islink(self._at(path))


def run(seam: Seam, program: Sequence[tuple[Any, ...]]) -> list[str]:
    """Play ``program``; per call ``"ok"``, ``"skip"`` or the errno name it failed with."""
    handles: list[int] = []
    results: list[str] = []

    def handle(ix: int) -> int | None:
        return handles[ix % len(handles)] if handles else None

    for call in program:
        kind = call[0]
        try:
            if kind in ("create_exclusive", "open_append"):
                handles.append(getattr(seam, kind)("/" + call[1]))
            elif kind in ("write", "fsync", "ftruncate", "close"):
                h = handle(call[1])
                if h is None:
                    results.append("skip")
                    continue
                if kind == "close":
                    handles.remove(h)
                getattr(seam, kind)(h, *call[2:])
            elif kind == "rename":
                if seam.is_dir("/" + call[1]):  # directories are not renamed (rule 5 of the tree)
                    results.append("skip")
                    continue
                seam.rename("/" + call[1], "/" + call[2])
            elif kind == "unlink":
                seam.unlink("/" + call[1])
            elif kind in ("makedirs", "fsync_dir"):
                getattr(seam, kind)("/" + call[1])
            else:  # pragma: no cover - the strategy makes no other call
                raise AssertionError(kind)
        except OSError as error:
            results.append(errno.errorcode.get(error.errno or 0, str(error.errno)))
            continue
        results.append("ok")
    for h in handles:  # close is no durability event: only leaves no handle open on a mount
        seam.close(h)
    return results


def folder_snapshot(root: str) -> dict[str, bytes | None]:
    """Every path under ``root`` -> its bytes (file) or None (directory); the store is left out."""
    out: dict[str, bytes | None] = {}

    def walk(path: str, shown: str) -> None:
        for entry in sorted(os.listdir(path)):
            if shown == "/" and entry == PRIVATE_NAME:
                continue
            full = os.path.join(path, entry)
            at = posixpath.join(shown, entry)
            if os.path.isdir(full) and not os.path.islink(full):
                out[at] = None
                walk(full, at)
            else:
                with open(full, "rb") as f:
                    out[at] = f.read()

    walk(root, "/")
    return out
