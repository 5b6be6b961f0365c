"""A read never returns bytes read while the artifact's identity moved.

A verification is reused while the file's identity (device, inode, size,
mtime, ctime) is unchanged, and the page is read after that check.  Someone
who rewrites the file in place between the check and the read must not get
their bytes served: the identity is checked again after the read, and if it
moved the file is verified again (a changed content fails closed).

The race is made deterministic with a seam that rewrites the file on its own
descriptor at the first read after the check.  The file's mtime is set far in
the past beforehand, so the rewrite moves the identity even on a file system
whose timestamps are coarser than the time the test takes.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Callable

import pytest

from toolswap.errors import ArtifactIntegrityError
from toolswap.externalizer import ToolResultExternalizer
from toolswap.fs import OsFileSystem

from ._artifacts import lines


class RewritingFS(OsFileSystem):
    """The real seam; once armed, its next ``pread`` first rewrites ``target`` in place."""

    def __init__(self) -> None:
        self.target = ""
        self.replacement = b""
        self.armed = False
        self.bytes_read = 0

    def arm(self, target: str, replacement: bytes) -> None:
        self.target, self.replacement, self.armed = target, replacement, True

    def pread(self, handle: int, size: int, offset: int) -> bytes:
        if self.armed:
            self.armed = False
            other = os.open(self.target, os.O_WRONLY)
            try:
                os.pwrite(other, self.replacement, 0)  # same size: only the bytes change
            finally:
                os.close(other)
        data = super().pread(handle, size, offset)
        self.bytes_read += len(data)
        return data


def _verified(tmp: pathlib.Path, data: bytes) -> tuple[ToolResultExternalizer, RewritingFS, str]:
    """An artifact of ``data`` whose verification is cached by a reader on a RewritingFS."""
    writer = ToolResultExternalizer(tmp / "s", environ={}, threshold_bytes=1)
    result = writer.externalize(data, "tool")
    assert result.artifact is not None
    sid = result.artifact.source_id
    os.utime(writer.paths.path_for_source(sid), ns=(0, 0))
    fs = RewritingFS()
    reader = ToolResultExternalizer(tmp / "s", environ={}, fs=fs)
    reader.verify_artifact(sid)
    return reader, fs, sid


READS: dict[str, Callable[[ToolResultExternalizer, str], object]] = {
    "read_page": lambda ext, sid: ext.read_page(sid),
    "read_artifact": lambda ext, sid: ext.read_artifact(sid),
    "grep_artifact": lambda ext, sid: ext.grep_artifact(sid, "FORGED"),
}


@pytest.mark.parametrize("read", sorted(READS))
def test_a_read_racing_an_in_place_rewrite_fails_closed(tmp_path: pathlib.Path, read: str) -> None:
    data = lines(200)
    reader, fs, sid = _verified(tmp_path, data)
    fs.arm(reader.paths.path_for_source(sid), b"FORGED\n".ljust(len(data), b"x"))
    with pytest.raises(ArtifactIntegrityError):
        READS[read](reader, sid)


def test_a_moved_identity_with_unchanged_bytes_is_verified_again_and_read(
    tmp_path: pathlib.Path,
) -> None:
    data = lines(200)
    reader, fs, sid = _verified(tmp_path, data)
    fs.arm(reader.paths.path_for_source(sid), data)  # rewritten with the same bytes
    fs.bytes_read = 0
    assert reader.read_page(sid).text.encode() == data
    assert fs.bytes_read >= 2 * len(data)  # the page read, then the whole file hashed again
