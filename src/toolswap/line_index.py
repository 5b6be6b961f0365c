"""A sparse line index, so a page read costs O(window), not O(file).

While an artifact streams past (at write time, or at its first verified read)
the builder records *checkpoints* ``(byte_offset, newlines_before)`` at least
``stride`` bytes apart, at chunk boundaries.  Finding line ``k`` starts at the
last checkpoint with fewer than ``k`` newlines before it and scans forward
from there, so a read touches at most one stride plus its own window.  Only the
window is ever decoded.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

import attrs

__all__ = ["LineIndex", "LineIndexBuilder", "DEFAULT_STRIDE"]

DEFAULT_STRIDE = 256 * 1024
_BLOCK = 64 * 1024

# pread(size, offset) -> bytes; the seam's pread bound to one open handle.
Reader = Callable[[int, int], bytes]


@attrs.frozen(kw_only=True)
class LineIndex:
    size: int
    newline_count: int
    ends_with_newline: bool
    checkpoint_offsets: tuple[int, ...]
    checkpoint_newlines: tuple[int, ...]

    @property
    def line_count(self) -> int:
        """Lines as an editor counts them: a final piece without newline is a line."""
        if self.size == 0:
            return 0
        return self.newline_count + (0 if self.ends_with_newline else 1)

    def line_start(self, line: int, pread: Reader) -> int:
        """Byte offset where 0-based ``line`` starts (``size`` if it is past the end)."""
        if line <= 0:
            return 0
        if line > self.newline_count:
            return self.size
        # last checkpoint with strictly fewer than `line` newlines before it
        i = bisect.bisect_left(self.checkpoint_newlines, line) - 1
        position = self.checkpoint_offsets[i]
        needed = line - self.checkpoint_newlines[i]
        while True:
            block = pread(_BLOCK, position)
            if not block:
                return self.size
            found = block.count(b"\n")
            if found < needed:
                needed -= found
                position += len(block)
                continue
            cut = -1
            for _ in range(needed):
                cut = block.find(b"\n", cut + 1)
            return position + cut + 1

    def read_lines(self, offset: int, limit: int, pread: Reader) -> bytes:
        """The raw bytes of lines ``[offset, offset + limit)``."""
        start = self.line_start(offset, pread)
        pieces: list[bytes] = []
        remaining = limit
        position = start
        while remaining > 0 and position < self.size:
            block = pread(_BLOCK, position)
            if not block:
                break
            found = block.count(b"\n")
            if found < remaining:
                pieces.append(block)
                remaining -= found
                position += len(block)
                continue
            cut = -1
            for _ in range(remaining):
                cut = block.find(b"\n", cut + 1)
            pieces.append(block[: cut + 1])
            break
        return b"".join(pieces)


class LineIndexBuilder:
    """Feed the artifact's bytes in order; :meth:`finish` returns the index."""

    def __init__(self, stride: int = DEFAULT_STRIDE) -> None:
        if stride < 1:
            raise ValueError("stride must be positive")
        self._stride = stride
        self._offsets = [0]
        self._newlines = [0]
        self._size = 0
        self._count = 0
        self._last_byte = b""

    def feed(self, chunk: bytes, newlines: int | None = None) -> None:
        """The next bytes; ``newlines``: ``chunk.count(b"\\n")`` if the caller counted it."""
        if not chunk:
            return
        if self._size - self._offsets[-1] >= self._stride:
            self._offsets.append(self._size)
            self._newlines.append(self._count)
        self._count += chunk.count(b"\n") if newlines is None else newlines
        self._size += len(chunk)
        self._last_byte = chunk[-1:]

    def finish(self) -> LineIndex:
        return LineIndex(
            size=self._size,
            newline_count=self._count,
            ends_with_newline=self._last_byte == b"\n",
            checkpoint_offsets=tuple(self._offsets),
            checkpoint_newlines=tuple(self._newlines),
        )
