"""The pointer never repeats text, is bounded, and its marker names the exact read."""

from __future__ import annotations

import pathlib
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolswap.externalizer import ToolResultExternalizer
from toolswap.pointer import PreviewCollector

MARKER_RE = re.compile(r"read_artifact\(offset=(\d+), limit=(\d+)\)")

line = st.one_of(
    st.text(max_size=80).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.binary(max_size=80),
    st.integers(0, 40_000).map(lambda n: b"w" * n),  # a line longer than a window
)
outputs = st.lists(line, max_size=400).map(lambda ls: b"\n".join(ls))


def _preview(data: bytes, head: int, tail: int, step: int) -> tuple[PreviewCollector, object]:
    collector = PreviewCollector(head, tail)
    for i in range(0, len(data), step):
        collector.feed(data[i : i + step])
    return collector, collector.finish()


@given(outputs, st.integers(64, 3000), st.integers(64, 9000), st.integers(1, 5000))
def test_head_and_tail_partition_the_output_without_overlap(
    data: bytes, head: int, tail: int, step: int
) -> None:
    _, p = _preview(data, head, tail, step)
    assert 0 <= p.head_end <= p.tail_start <= len(data)  # type: ignore[attr-defined]
    assert p.head == data[: p.head_end].decode("utf-8", "replace")  # type: ignore[attr-defined]
    assert p.tail == data[p.tail_start :].decode("utf-8", "replace")  # type: ignore[attr-defined]


@given(outputs, st.integers(64, 3000), st.integers(64, 9000))
def test_previews_fit_their_budgets_even_with_replacement_characters(
    data: bytes, head: int, tail: int
) -> None:
    _, p = _preview(data, head, tail, 4096)
    assert len(p.head.encode()) <= head  # type: ignore[attr-defined]
    assert len(p.tail.encode()) <= tail  # type: ignore[attr-defined]


def _line_span(data: bytes, first: int, count: int) -> tuple[int, int]:
    """Byte range of lines [first, first + count) of ``data``."""
    starts = [0] + [i + 1 for i, b in enumerate(data) if b == 0x0A]
    begin = starts[first]
    end = starts[first + count] if first + count < len(starts) else len(data)
    return begin, end


@given(outputs)
def test_the_marker_read_returns_every_omitted_byte(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    full = data + b"!!"
    ext = ToolResultExternalizer(
        tmp_path_factory.mktemp("p") / "s",
        environ={},
        threshold_bytes=1,
        head_bytes=200,
        tail_bytes=300,
    )
    result = ext.externalize(full, "tool")
    assert result.artifact is not None
    match = MARKER_RE.search(result.context_text)
    omitted = re.search(r"bytes ([\d,]+)-([\d,]+) \(", result.context_text)
    if match is None:
        assert "omitted: nothing" in result.context_text and omitted is None
        return
    assert omitted is not None
    first, count = int(match[1]), int(match[2])
    start, end = (int(g.replace(",", "")) for g in omitted.groups())
    begin, finish = _line_span(full, first, count)
    assert begin <= start < end <= finish
    page = ext.read_artifact(result.artifact, first, count)
    assert page == full[begin:finish].decode("utf-8", "replace")


def test_the_pointer_stays_bounded_for_a_single_enormous_line(tmp_path: pathlib.Path) -> None:
    ext = ToolResultExternalizer(tmp_path / "s", environ={})
    result = ext.externalize(iter([b"z" * (1 << 20)] * 20), "bash")
    assert len(result.context_text.encode()) < 32 * 1024
    assert "omitted: lines 1-1 (1 lines)" in result.context_text
