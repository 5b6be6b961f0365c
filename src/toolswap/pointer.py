"""The bounded pointer that replaces a large output in the context.

Rules (docs/design.md section 4):

1. The pointer is bounded whatever the output size: a header, a head preview
   of at most ``head_bytes``, one omission marker, a tail preview of at most
   ``tail_bytes`` (sizes of the UTF-8 *text*, after replacement characters).
2. Head and tail never overlap or repeat text: the tail starts at or after the
   end of the head.
3. Cuts fall on line boundaries when a line boundary is inside the preview
   window, otherwise on a character boundary.
4. The marker states exactly which lines and bytes are omitted and the
   ``offset``/``limit`` read (0-based line offset) that returns all of them.

:class:`PreviewCollector` sees every byte once and keeps only the first
``head_bytes`` and a ring of the last ``tail_bytes`` (bounded memory).
"""

from __future__ import annotations

from collections import deque

import attrs

__all__ = ["PreviewCollector", "Preview", "render_pointer", "HEAD_BYTES", "TAIL_BYTES"]

HEAD_BYTES = 6000
TAIL_BYTES = 24000
_SLACK = 8  # a few bytes more than the window, to see the byte before a cut


@attrs.frozen(kw_only=True)
class Preview:
    head: str
    tail: str
    head_end: int  # byte offset where the head stops
    tail_start: int  # byte offset where the tail starts (>= head_end)
    size: int
    line_count: int
    omitted_first_line: int  # 0-based; meaningful only if omitted_bytes > 0
    omitted_line_count: int
    head_lines: int  # lines that start inside the head
    tail_first_line: int  # 0-based line where the tail starts (or resumes)

    @property
    def omitted_bytes(self) -> int:
        return self.tail_start - self.head_end


def _is_continuation(byte: int) -> bool:
    return 0x80 <= byte <= 0xBF


def _decode_bounded(data: bytes, budget: int, *, keep_start: bool) -> tuple[str, int]:
    """Decode with replacement; trim until the UTF-8 text fits ``budget``.

    Returns the text and how many input bytes it covers.  Invalid bytes expand
    to three-byte replacement characters, so a byte budget alone is not enough.
    """
    used = len(data)
    while True:
        piece = data[:used] if keep_start else data[len(data) - used :]
        text = piece.decode("utf-8", errors="replace")
        excess = len(text.encode("utf-8")) - budget
        if excess <= 0:
            return text, used
        used = max(0, used - max(excess // 3, 1))


class PreviewCollector:
    def __init__(self, head_bytes: int = HEAD_BYTES, tail_bytes: int = TAIL_BYTES) -> None:
        if head_bytes < 64 or tail_bytes < 64:
            raise ValueError("preview windows must be at least 64 bytes")
        self._head_bytes = head_bytes
        self._tail_bytes = tail_bytes
        self._head = bytearray()
        self._ring: deque[bytes] = deque()
        self._ring_size = 0
        self._size = 0
        self._newlines = 0

    def feed(self, chunk: bytes) -> None:
        if not chunk:
            return
        if len(self._head) < self._head_bytes + _SLACK:
            self._head += chunk[: self._head_bytes + _SLACK - len(self._head)]
        self._ring.append(chunk)
        self._ring_size += len(chunk)
        cap = self._tail_bytes + _SLACK
        while self._ring_size - len(self._ring[0]) >= cap:
            self._ring_size -= len(self._ring.popleft())
        self._size += len(chunk)
        self._newlines += chunk.count(b"\n")

    def finish(self) -> Preview:
        size = self._size
        head_buf = bytes(self._head)
        ring = b"".join(self._ring)
        ring_start = size - len(ring)

        def byte_at(position: int) -> int:
            if position < len(head_buf):
                return head_buf[position]
            return ring[position - ring_start]

        # 1. the head: whole lines inside the window, else a character cut
        if size <= self._head_bytes:
            head_end = size
        else:
            window = head_buf[: self._head_bytes]
            newline = window.rfind(b"\n")
            if newline >= 0:
                head_end = newline + 1
            else:
                head_end = self._head_bytes
                for _ in range(3):
                    if head_end > 0 and _is_continuation(head_buf[head_end]):
                        head_end -= 1
        # 2. the tail: starts at a line start inside its window, never before head_end
        tail_start = max(head_end, size - self._tail_bytes)
        if tail_start > head_end and byte_at(tail_start - 1) != 0x0A:
            newline = ring.find(b"\n", tail_start - ring_start)
            if 0 <= newline < len(ring) - 1:
                tail_start = ring_start + newline + 1
            else:
                for _ in range(3):
                    if tail_start < size and _is_continuation(byte_at(tail_start)):
                        tail_start += 1
        head_bytes_raw = head_buf[:head_end]
        tail_bytes_raw = ring[tail_start - ring_start :]
        head_text, used = _decode_bounded(head_bytes_raw, self._head_bytes, keep_start=True)
        head_end = used
        tail_text, used = _decode_bounded(tail_bytes_raw, self._tail_bytes, keep_start=False)
        tail_start = size - used
        head_newlines = head_buf[:head_end].count(b"\n")
        tail_newlines = ring[tail_start - ring_start :].count(b"\n")
        line_count = self._newlines + (1 if size and byte_at(size - 1) != 0x0A else 0)
        newlines_before_tail = self._newlines - tail_newlines
        if tail_start > head_end:
            first = head_newlines
            last = newlines_before_tail - (1 if byte_at(tail_start - 1) == 0x0A else 0)
            omitted_lines = last - first + 1
        else:
            first, omitted_lines = head_newlines, 0
        return Preview(
            head=head_text,
            tail=tail_text,
            head_end=head_end,
            tail_start=tail_start,
            size=size,
            line_count=line_count,
            omitted_first_line=first,
            omitted_line_count=omitted_lines,
            head_lines=head_newlines + (1 if head_end and head_buf[head_end - 1] != 0x0A else 0),
            tail_first_line=newlines_before_tail,
        )


def _n(value: int) -> str:
    return f"{value:,}"


def render_pointer(
    preview: Preview,
    *,
    source_id: str,
    summary: str,
    source_tool: str,
    content_sha256: str,
    path: str,
) -> str:
    """The context text for an externalized output."""
    lines = [
        f"[toolswap] {source_tool} output externalized: "
        f"{_n(preview.size)} bytes, {_n(preview.line_count)} lines.",
        f"source_id: {source_id}",
        f"summary: {summary}",
        f"sha256: {content_sha256}",
        f"path: {path}",
        f"--- head: {_n(preview.head_end)} bytes ---",
    ]
    text = "\n".join(lines) + "\n" + preview.head
    if preview.head and not preview.head.endswith("\n"):
        text += "\n"
    if preview.omitted_bytes > 0:
        first = preview.omitted_first_line
        count = preview.omitted_line_count
        text += (
            f"--- omitted: lines {_n(first + 1)}-{_n(first + count)} "
            f"({_n(count)} lines), bytes {_n(preview.head_end)}-{_n(preview.tail_start)} "
            f"({_n(preview.omitted_bytes)} bytes); read them with "
            f"read_artifact(offset={first}, limit={count}) or "
            f"`toolswap read {source_id} --offset {first} --limit {count}` ---\n"
        )
    else:
        text += "--- omitted: nothing (0 lines, 0 bytes) ---\n"
    text += f"--- tail: {_n(preview.size - preview.tail_start)} bytes ---\n" + preview.tail
    if preview.tail and not preview.tail.endswith("\n"):
        text += "\n"
    text += "--- end of pointer ---\n"
    return text
