"""Differential claim: without crashes, the simulated disk answers like the real seam.

The same random program of seam calls runs against :class:`OsFileSystem` in a
temporary folder and against :class:`SimulatedDisk`; every result (bytes,
listings, sizes, kinds, permissions, and the type and errno of every error)
and the final tree must agree.
"""

from __future__ import annotations

import os
import stat
import tempfile
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from toolswap.faultinject.disk import SimulatedDisk

from toolswap.fs import FileSystem, OsFileSystem

NAMES = ["a", "b", "d", "d/a", "d/e", "d/e/f"]
_UMASK = os.umask(0o022)
os.umask(_UMASK)

name = st.sampled_from(NAMES)
handle_ix = st.integers(0, 7)
size = st.integers(0, 40)
op = st.one_of(
    st.tuples(st.just("create_exclusive"), name),
    st.tuples(st.just("open_append"), name),
    st.tuples(st.just("open_read"), name),
    st.tuples(st.just("open_lock"), name),
    st.tuples(st.just("write"), handle_ix, st.binary(max_size=24)),
    st.tuples(st.just("read"), handle_ix, size),
    st.tuples(st.just("pread"), handle_ix, size, size),
    st.tuples(st.just("fsync"), handle_ix),
    st.tuples(st.just("ftruncate"), handle_ix, size),
    st.tuples(st.just("close"), handle_ix),
    st.tuples(st.just("fstat"), handle_ix),
    st.tuples(st.just("lstat"), name),
    st.tuples(st.just("rename"), name, name),
    st.tuples(st.just("unlink"), name),
    st.tuples(st.just("listdir"), st.sampled_from(["", "d", "a", "d/e"])),
    st.tuples(st.just("makedirs"), name),
    st.tuples(st.just("fsync_dir"), st.sampled_from(["", "d", "a"])),
    st.tuples(st.just("symlink"), name, st.sampled_from(["a", "d", "missing"])),
    st.tuples(st.just("flock"), handle_ix),
)


def _kind(mode: int) -> str:
    return "dir" if stat.S_ISDIR(mode) else "link" if stat.S_ISLNK(mode) else "file"


def _facts(facts: Any) -> tuple[object, ...]:
    kind = _kind(facts.mode)
    shown_size = facts.size if kind == "file" else None
    # permissions follow the real umask; the simulated disk assumes 022
    perm = stat.S_IMODE(facts.mode) if kind == "file" and _UMASK == 0o022 else None
    return (kind, shown_size, perm)


class Side:
    """One file system with its root and the handles it opened."""

    def __init__(self, fs: FileSystem, root: str, symlink: Any) -> None:
        self.fs = fs
        self.root = root
        self.symlink = symlink
        self.handles: list[int | None] = []

    def path(self, rel: str) -> str:
        return os.path.join(self.root, rel) if rel else self.root

    def run(self, step: tuple[Any, ...]) -> object:
        kind = step[0]
        try:
            return ("ok", self._call(kind, step[1:]))
        except OSError as exc:
            return ("err", type(exc).__name__, exc.errno)

    def _call(self, kind: str, args: tuple[Any, ...]) -> object:
        fs = self.fs
        if kind in {"create_exclusive", "open_append", "open_read", "open_lock"}:
            opened = getattr(fs, kind)(self.path(args[0]))
            self.handles.append(opened)
            return len(self.handles) - 1
        if kind == "lstat":
            return _facts(fs.lstat(self.path(args[0])))
        if kind == "listdir":
            return fs.listdir(self.path(args[0]))
        if kind == "rename":
            fs.rename(self.path(args[0]), self.path(args[1]))
        elif kind in {"unlink", "makedirs", "fsync_dir"}:
            getattr(fs, kind)(self.path(args[0]))
        elif kind == "symlink":
            self.symlink(self.path(args[0]), self.path(args[1]))
        else:
            return self._handle_call(kind, args)
        return None

    def _handle_call(self, kind: str, args: tuple[Any, ...]) -> object:
        fs = self.fs
        handle = self.handles[args[0]]
        assert handle is not None
        if kind == "read":
            return fs.read(handle, args[1])
        if kind == "pread":
            return fs.pread(handle, args[1], args[2])
        if kind == "fstat":
            return _facts(fs.fstat(handle))
        if kind == "write":
            fs.write(handle, args[1])
        elif kind == "ftruncate":
            fs.ftruncate(handle, args[1])
        elif kind == "fsync":
            fs.fsync(handle)
        elif kind == "flock":
            fs.flock(handle)
            fs.funlock(handle)
        else:
            assert kind == "close"
            self.handles[args[0]] = None
            fs.close(handle)
        return None

    def tree(self, rel: str = "") -> dict[str, object]:
        out: dict[str, object] = {}
        for entry in self.fs.listdir(self.path(rel)):
            child = f"{rel}/{entry}" if rel else entry
            facts = self.fs.lstat(self.path(child))
            if facts.is_dir:
                out[child] = "dir"
                out.update(self.tree(child))
            elif facts.is_symlink:
                out[child] = "link"
            else:
                handle = self.fs.open_read(self.path(child))
                try:
                    out[child] = self.fs.read(handle, 1 << 20)
                finally:
                    self.fs.close(handle)
        return out

    def close_all(self) -> None:
        for handle in self.handles:
            if handle is not None:
                self.fs.close(handle)


def _usable(step: tuple[Any, ...], sides: list[Side]) -> bool:
    """Handle steps need an open handle index (closed fds may be reused by the OS)."""
    if step[0] in {"write", "read", "pread", "fsync", "ftruncate", "close", "fstat", "flock"}:
        handles = sides[0].handles
        return step[1] < len(handles) and handles[step[1]] is not None
    return True


@given(program=st.lists(op, max_size=30))
def test_simulated_disk_answers_like_the_real_seam(program: list[tuple[Any, ...]]) -> None:
    disk = SimulatedDisk()
    disk.makedirs("/sim/root")
    with tempfile.TemporaryDirectory() as tmp:
        real = Side(OsFileSystem(), tmp, lambda path, target: os.symlink(target, path))
        sim = Side(disk, "/sim/root", disk.make_symlink)
        try:
            for step in program:
                if not _usable(step, [real, sim]):
                    continue
                got_real = real.run(step)
                got_sim = sim.run(step)
                assert got_sim == got_real, step
            assert sim.tree() == real.tree()
        finally:
            real.close_all()
