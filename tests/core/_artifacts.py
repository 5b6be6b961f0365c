"""Small helpers shared by core tests."""

from __future__ import annotations

import errno
from typing import Any

from toolswap.fs import OsFileSystem


class CountingFS(OsFileSystem):
    """The real seam, counting bytes read so tests can see O(window) reads."""

    def __init__(self) -> None:
        self.bytes_read = 0

    def pread(self, handle: int, size: int, offset: int) -> bytes:
        data = super().pread(handle, size, offset)
        self.bytes_read += len(data)
        return data


class FullDiskFS(OsFileSystem):
    """The real seam, with a disk that fills after ``capacity`` bytes (ENOSPC).

    ``fail="fsync"`` fails the fsync of artifact files (those made by exclusive
    create); ``fail="any_fsync"`` fails every fsync, the high-water mark's too.
    """

    def __init__(self, capacity: int, fail: str = "write") -> None:
        self.capacity = capacity
        self.fail = fail
        self.written = 0
        self.artifact_handles: set[int] = set()

    def create_exclusive(self, path: str, mode: int = 0o600) -> int:
        handle = super().create_exclusive(path, mode)
        self.artifact_handles.add(handle)
        return handle

    def close(self, handle: int) -> None:
        self.artifact_handles.discard(handle)
        super().close(handle)

    def write(self, handle: int, data: bytes) -> None:
        if self.fail == "write" and self.written + len(data) > self.capacity:
            raise OSError(errno.ENOSPC, "No space left on device")
        self.written += len(data)
        super().write(handle, data)

    def fsync(self, handle: int) -> None:
        if self.fail == "any_fsync" or (self.fail == "fsync" and handle in self.artifact_handles):
            raise OSError(errno.EIO, "Input/output error")
        super().fsync(handle)


class HidingFS(OsFileSystem):
    """A seam whose directory listing misses names, as a racing process would."""

    def listdir(self, path: str) -> list[str]:
        return []


def lines(count: int, *, marker_at: int | None = None, width: int = 40) -> bytes:
    out: list[Any] = []
    for i in range(count):
        text = (
            "ERROR: the distinctive failure" if i == marker_at else f"line {i} ".ljust(width, ".")
        )
        out.append(text + "\n")
    return "".join(out).encode()
