"""The forgetful file system's FUSE server: one process per mount, driven over stdin.

Rules
=====

1. :class:`~toolswap.faultinject.powerloss.ForgetfulMount` starts it as
   ``python -m toolswap.faultinject._forgetful_fuse BACKING MOUNTPOINT [HOME]``
   in a session of its own, so a Ctrl-C at the terminal reaches the test, which then
   stops it, and never the server first.
2. Its first line on stdout is ``{"event": "ready"}`` once the kernel has the
   mount, or ``{"event": "failed", "error": ...}``.  Then each JSON line on
   stdin is one command, answered by one JSON line: ``cut`` (``mode``,
   ``choices``: a seed or a list of ints, ``granularity``) returns the crash
   report and freezes the file system; ``thaw`` lets frozen operations fail
   with ``EIO``; ``sync`` makes everything durable (a clean shutdown); ``stop``
   unmounts and exits.
3. When stdin closes or the parent dies, the server stops without writing
   anything more (the backing folder keeps the durable state), unmounts lazily,
   removes ``HOME`` (the caller's folder for the mount point and the control
   file) and exits: a killed test leaves no mount, no server and no folder.

Theory of operation
===================

The binding is ``mfusepy`` (ctypes over libfuse 3's high-level, path-based
API); libfuse 3 is asked for by name, so an installed libfuse 2 is never used.
The kernel's own locks serve ``flock`` and ``fcntl`` (no lock callbacks), and
``hard_remove`` lets a removed file stay readable through its open handles.
Operations on a handle reach the tree by that handle, never by a path.  Two
calls of mfusepy's libfuse-3 glue drop what the tree needs (the handle of an
``ftruncate``, the flags of a ``rename``): :class:`_Fuse` passes them on.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from typing import Any

import attrs

from ._forgetful_tree import ForgetfulTree

os.environ.setdefault("FUSE_LIBRARY_NAME", "fuse3")

import mfusepy  # type: ignore[import-untyped,import-not-found,unused-ignore]  # noqa: E402

_STOP_GRACE_SECONDS = 1.0
_PARENT_POLL_SECONDS = 0.5


class _Fuse(mfusepy.FUSE):  # type: ignore[misc]
    """mfusepy's glue, passing on the handle of an ftruncate and the flags of a rename."""

    def truncate_fuse_3(self, path: bytes | None, length: int, fip: Any) -> int:
        fh = fip.contents.fh if fip else None
        decoded = None if path is None else path.decode(self.encoding, self.errors)
        result: int = self.operations.truncate(decoded, length, fh)
        return result

    def rename_fuse_3(self, old: bytes, new: bytes, flags: int) -> int:
        result: int = self.operations.rename(
            old.decode(self.encoding, self.errors), new.decode(self.encoding, self.errors), flags
        )
        return result


class _Operations(mfusepy.Operations):  # type: ignore[misc]
    """The FUSE callbacks, each one call of the tree (which raises OSError with an errno)."""

    use_ns = True
    flag_nopath = True
    flag_nullpath_ok = True

    def __init__(self, tree: ForgetfulTree, say: Any) -> None:
        self.tree = tree
        self._say = say

    @staticmethod
    def _caller() -> tuple[int, int]:
        uid, gid, _ = mfusepy.fuse_get_context()
        return uid, gid

    def init(self, path: str) -> None:
        self._say({"event": "ready"})

    def getattr(self, path: str | None, fh: int | None = None) -> dict[str, int]:
        return self.tree.getattr(path, fh)

    def statfs(self, path: str) -> dict[str, int]:
        return self.tree.statfs()

    def opendir(self, path: str) -> int:
        return self.tree.opendir(path)

    def readdir(self, path: str | None, fh: int) -> list[tuple[str, dict[str, int], int]]:
        return [
            (name, {"st_mode": mode, "st_ino": ino}, 0)
            for name, mode, ino in self.tree.readdir(path, fh)
        ]

    def releasedir(self, path: str | None, fh: int) -> int:
        self.tree.releasedir(fh)
        return 0

    def fsyncdir(self, path: str | None, datasync: int, fh: int) -> int:
        self.tree.fsyncdir(fh)
        return 0

    def mkdir(self, path: str, mode: int) -> int:
        self.tree.mkdir(path, mode, *self._caller())
        return 0

    def rmdir(self, path: str) -> int:
        self.tree.rmdir(path)
        return 0

    def create(self, path: str, mode: int, flags: int) -> int:
        return self.tree.create(path, mode, flags, *self._caller())

    def open(self, path: str, flags: int) -> int:
        return self.tree.open(path, flags)

    def release(self, path: str | None, fh: int) -> int:
        self.tree.release(fh)
        return 0

    def read(self, path: str | None, size: int, offset: int, fh: int) -> bytes:
        return self.tree.read(fh, size, offset)

    def write(self, path: str | None, data: bytes, offset: int, fh: int) -> int:
        return self.tree.write(fh, data, offset)

    def truncate(self, path: str | None, length: int, fh: int | None = None) -> int:
        self.tree.truncate(path, length, fh)
        return 0

    def fsync(self, path: str | None, datasync: int, fh: int) -> int:
        self.tree.fsync(fh)
        return 0

    def unlink(self, path: str) -> int:
        self.tree.unlink(path)
        return 0

    def rename(self, old: str, new: str, flags: int = 0) -> int:
        self.tree.rename(old, new, flags)
        return 0

    def link(self, target: str, source: str) -> int:
        self.tree.link(source, target)
        return 0

    def symlink(self, target: str, source: str) -> int:
        self.tree.symlink(source, target, *self._caller())
        return 0

    def readlink(self, path: str) -> str:
        return self.tree.readlink(path)

    def mknod(self, path: str, mode: int, dev: int) -> int:
        self.tree.mknod(path, mode, dev, *self._caller())
        return 0

    def chmod(self, path: str | None, mode: int) -> int:
        self.tree.chmod(path, mode)
        return 0

    def chown(self, path: str | None, uid: int, gid: int) -> int:
        self.tree.chown(path, uid, gid)
        return 0

    def utimens(self, path: str | None, times: tuple[int, int] | None = None) -> int:
        self.tree.utimens(path, times)
        return 0


class _Server:
    def __init__(self, backing: str, mountpoint: str, home: str | None = None) -> None:
        self.mountpoint = mountpoint
        self.home = home
        self.tree = ForgetfulTree(backing)
        self._out = threading.Lock()
        self._parent = os.getppid()
        self._stopping = threading.Event()
        self.loop_done = threading.Event()

    def say(self, message: dict[str, Any]) -> None:
        with self._out:
            sys.stdout.write(json.dumps(message) + "\n")
            sys.stdout.flush()

    def serve(self) -> int:
        threading.Thread(target=self._commands, name="commands", daemon=True).start()
        threading.Thread(target=self._watch_parent, name="parent", daemon=True).start()
        try:
            _Fuse(
                _Operations(self.tree, self.say),
                self.mountpoint,
                foreground=True,
                allow_other=os.geteuid() == 0,
                default_permissions=True,
                hard_remove=True,
                use_ino=True,
                fsname="forgetful",
                subtype="forgetful",
                max_threads=16,
            )
        except Exception as error:  # noqa: BLE001 - reported to the parent, which raises
            self.say({"event": "failed", "error": f"{type(error).__name__}: {error}"})
            self.tree.abandon()
            return 1
        finally:
            self.loop_done.set()
        self.tree.abandon()  # unmounted from outside: keep the durable state only
        if self._stopping.is_set():
            threading.Event().wait()  # the command thread answers, then ends the process
        return 0

    def _commands(self) -> None:
        for line in sys.stdin:
            try:
                command = json.loads(line)
                self.say(self._run(command))
            except Exception as error:  # noqa: BLE001 - answered, the parent raises
                self.say({"ok": False, "error": f"{type(error).__name__}: {error}"})
            if self._stopping.is_set():
                self._exit()
        self._orphaned()  # stdin closed: the parent is gone

    def _run(self, command: dict[str, Any]) -> dict[str, Any]:
        op = command.get("op")
        if op == "cut":
            choices = command.get("choices", 0)
            report = self.tree.power_cut(
                str(command.get("mode", "drop")),
                choices if isinstance(choices, int) else [int(c) for c in choices],
                granularity=command.get("granularity"),
            )
            return {"ok": True, "report": attrs.asdict(report)}
        if op == "thaw":
            self.tree.thaw()
            return {"ok": True}
        if op == "sync":
            self.tree.sync_all()
            return {"ok": True}
        if op == "stop":
            self._stop()
            return {"ok": True}
        raise ValueError(f"unknown command {op!r}")

    def _watch_parent(self) -> None:
        while not self._stopping.wait(_PARENT_POLL_SECONDS):
            if os.getppid() != self._parent:
                self._orphaned()

    def _stop(self) -> None:
        """Keep only what is durable and unmount lazily (processes still on it see ENOTCONN)."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        self.tree.abandon()
        subprocess.run(
            ["fusermount3", "-u", "-z", self.mountpoint],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )

    def _orphaned(self) -> None:
        self._stop()
        if self.home is not None:
            shutil.rmtree(self.home, ignore_errors=True)
        self._exit()

    def _exit(self) -> None:
        """End the process: the loop ends by itself once nothing uses the mount, else now."""
        self.loop_done.wait(_STOP_GRACE_SECONDS)
        sys.stdout.flush()
        os._exit(0)  # closes /dev/fuse: the kernel aborts what the old mount still had


def main(argv: list[str]) -> int:
    if len(argv) not in (3, 4):
        sys.stderr.write(f"usage: python -m {__spec__.name} BACKING MOUNT [HOME]\n")
        return 2
    if mfusepy.fuse_version_major != 3:
        print(json.dumps({"event": "failed", "error": "libfuse 3 is needed"}), flush=True)
        return 1
    try:
        server = _Server(argv[1], argv[2], argv[3] if len(argv) > 3 else None)
    except OSError as error:
        print(json.dumps({"event": "failed", "error": f"backing folder: {error}"}), flush=True)
        return 1
    return server.serve()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
