"""The fixed-string search reads the file a window at a time, and says what bytes say.

Claims: ``WindowedFile.find``/``rfind``/slices answer exactly as the same
methods of the whole file's bytes, whatever the window size (matches across a
window's end included); and a file cut short under a fixed-string grep is a
clean, typed refusal, never a dead process (a memory map would SIGBUS).
"""

from __future__ import annotations

import os
import pathlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolswap.artifact_grep import WindowedFile
from toolswap.errors import ToolswapError
from toolswap.externalizer import ToolResultExternalizer
from toolswap.fs import OsFileSystem

_BYTES = st.binary(max_size=300).map(lambda b: b.replace(b"\x00", b"ab"))
_NEEDLES = st.sampled_from([b"a", b"ab", b"\n", b"ba\n", b"zz", b"abab"])


def _windowed(data: bytes, window: int) -> WindowedFile:
    return WindowedFile(lambda size, at: data[at : at + size], len(data), window=window)


@given(data=_BYTES, needle=_NEEDLES, window=st.integers(1, 64), start=st.integers(0, 320))
def test_find_agrees_with_bytes(data: bytes, needle: bytes, window: int, start: int) -> None:
    assert _windowed(data, window).find(needle, start) == data.find(needle, start)


@given(
    data=_BYTES,
    needle=_NEEDLES,
    window=st.integers(1, 64),
    start=st.integers(0, 320),
    end=st.integers(0, 320),
)
def test_rfind_agrees_with_bytes(
    data: bytes, needle: bytes, window: int, start: int, end: int
) -> None:
    assert _windowed(data, window).rfind(needle, start, end) == data.rfind(needle, start, end)


@given(data=_BYTES, window=st.integers(1, 64), a=st.integers(0, 320), b=st.integers(0, 320))
def test_slices_agree_with_bytes(data: bytes, window: int, a: int, b: int) -> None:
    buffer = _windowed(data, window)
    buffer.find(b"a", a)  # a window is cached somewhere: slices read through it or around it
    assert buffer[a:b] == data[a:b]


class _CutShort(OsFileSystem):
    """The real seam; someone truncates the artifact right after grep's first read."""

    def __init__(self) -> None:
        self.path = ""

    def pread(self, handle: int, size: int, offset: int) -> bytes:
        if self.path and size > 1024:
            os.truncate(self.path, 100)
            self.path = ""
        return super().pread(handle, size, offset)


def test_a_file_cut_short_under_a_fixed_string_grep_is_refused_cleanly(
    tmp_path: pathlib.Path,
) -> None:
    fs = _CutShort()
    ext = ToolResultExternalizer(tmp_path / "s1", environ={}, fs=fs)
    result = ext.externalize(b"".join(b"line %d ok\n" % i for i in range(200_000)), "grep")
    assert result.artifact is not None
    ext.read_artifact(result.artifact, offset=0, limit=1)  # verified
    fs.path = result.artifact.path
    with pytest.raises(ToolswapError):
        ext.grep_artifact(result.artifact, "line 199999 ok", fixed=True)
