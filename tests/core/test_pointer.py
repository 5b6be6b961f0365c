"""The pointer never repeats text, is bounded, fills its budgets, names the exact read,
and lifts notable lines out of the omitted middle."""

from __future__ import annotations

import pathlib
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolswap.errors import UsageError
from toolswap.externalizer import ToolResultExternalizer
from toolswap.pointer import NOTABLE_LINE_BYTES, NotablePattern, PreviewCollector
from toolswap.reading import DEFAULT_PAGE_BYTES

MARKER_RE = re.compile(r"`toolswap read \S+ --offset (\d+)(?: --byte (\d+))?`")

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


@settings(max_examples=60, deadline=None)
@given(outputs, st.integers(64, 2000))
def test_paging_from_the_marker_returns_every_omitted_byte_within_the_cap(
    tmp_path_factory: pytest.TempPathFactory, data: bytes, cap: int
) -> None:
    full = data + b"!!"
    ext = ToolResultExternalizer(
        tmp_path_factory.mktemp("p") / "s",
        environ={},
        threshold_bytes=1,
        head_bytes=200,
        tail_bytes=300,
        page_bytes=cap,
    )
    result = ext.externalize(full, "tool")
    assert result.artifact is not None
    match = MARKER_RE.search(result.context_text)
    omitted = re.search(r"bytes ([\d,]+)-([\d,]+) \(", result.context_text)
    if match is None:
        assert "omitted: nothing" in result.context_text and omitted is None
        return
    assert omitted is not None
    start, end = (int(g.replace(",", "")) for g in omitted.groups())
    offset, byte = int(match[1]), int(match[2] or 0)
    got = b""
    position = None
    while position is None or position < end:
        page = ext.read_page(result.artifact, offset, start_byte=byte)
        assert len(page.text.encode()) <= cap  # the hint never returns more than a page
        if position is None:
            assert page.byte_start == start  # the hint starts exactly where the head stops
        position = page.byte_end
        got += full[page.byte_start : page.byte_end]
        if page.next_offset is None:
            break
        offset, byte = page.next_offset, page.next_byte
    assert got[: end - start] == full[start:end]


def _pointer(data: bytes, tmp: pathlib.Path, **kw: object) -> str:
    ext = ToolResultExternalizer(tmp / "s", environ={}, **kw)  # type: ignore[arg-type]
    result = ext.externalize(data, "bash")
    assert result.artifact is not None
    return result.context_text


def _section(text: str, name: str) -> str:
    after = text.split(f"--- {name}: ", 1)[1].split("\n", 1)[1]
    return after.split("\n--- ", 1)[0]


def test_a_long_line_still_fills_the_head_and_the_tail(tmp_path: pathlib.Path) -> None:
    """Issue 18 item 1: a 3-byte head and a 17-byte tail were the old result."""
    data = b"ok\n" + b"x" * (1 << 20) + b"\nFAILED: 3 errors\n"
    text = _pointer(data, tmp_path)
    head, tail = _section(text, "head"), _section(text, "tail")
    assert 6000 - 8 <= len(head.encode()) <= 6000
    assert tail.endswith("FAILED: 3 errors") and 24000 - 8 <= len(tail.encode()) + 1 <= 24000
    assert "cut inside line 1 after 5,997 bytes of it" in text
    assert "starts inside line 1 at byte" in text
    assert "--offset 1 --byte 5997`" in text
    assert len(text.encode()) < 32 * 1024


def test_the_read_hint_of_a_huge_line_returns_one_page(tmp_path: pathlib.Path) -> None:
    data = b"start\n" + b"y" * (5 * 1000 * 1000) + b"\nend\n"
    ext = ToolResultExternalizer(tmp_path / "s", environ={})
    result = ext.externalize(data, "bash")
    assert result.artifact is not None
    match = MARKER_RE.search(result.context_text)
    assert match is not None
    page = ext.read_page(result.artifact, int(match[1]), start_byte=int(match[2] or 0))
    assert len(page.text.encode()) == DEFAULT_PAGE_BYTES and page.next_byte > 0
    assert len(ext.read_artifact(result.artifact, int(match[1]), 1).encode()) <= DEFAULT_PAGE_BYTES


def test_short_lines_still_cut_on_line_boundaries(tmp_path: pathlib.Path) -> None:
    text = _pointer(b"".join(b"row %d\n" % i for i in range(100_000)), tmp_path)
    assert text.split("--- omitted: ")[0].endswith("row 762\n")
    assert "cut inside" not in text and "starts inside" not in text
    assert re.search(r"omitted: line offsets ([\d,]+)-", text)


def test_the_readme_example_shows_the_middle_error_with_its_offset(tmp_path: pathlib.Path) -> None:
    data = "".join(
        f"line {i} {'ERROR disk full' if i == 40000 else 'ok'}\n" for i in range(80000)
    ).encode()
    text = _pointer(data, tmp_path)
    assert "\n40000: line 40000 ERROR disk full\n" in text
    assert len(text.encode()) < 32 * 1024


def _notable(data: bytes, step: int, **kw: object) -> list[tuple[int, str]]:
    collector = PreviewCollector(200, 300, notable=NotablePattern.default(), **kw)  # type: ignore[arg-type]
    for i in range(0, len(data), step):
        collector.feed(data[i : i + step])
    return [(n.offset, n.text) for n in collector.finish().notable]


failure_lines = st.lists(
    st.one_of(
        st.sampled_from(["ok", "Error: x", "FAILED test_a", "panic: boom", "fine", ""]),
        st.text(max_size=30).map(lambda t: t.replace("\n", " ")),
    ),
    max_size=200,
)


@settings(max_examples=80, deadline=None)
@given(failure_lines, st.integers(1, 700))
def test_notable_lines_are_the_first_matching_lines_of_the_omitted_part(
    rows: list[str], step: int
) -> None:
    data = "\n".join(rows).encode("utf-8", "surrogatepass") + b"\n"
    collector = PreviewCollector(200, 300, notable=NotablePattern.default())
    for i in range(0, len(data), step):
        collector.feed(data[i : i + step])
    preview = collector.finish()
    words = re.compile(NotablePattern.default().regex.pattern.decode())
    starts = [0]
    for row in rows:
        starts.append(starts[-1] + len(row.encode("utf-8", "surrogatepass")) + 1)
    want = [
        i
        for i, row in enumerate(rows)
        if preview.head_end <= starts[i] < min(preview.tail_start, len(data) - 300)
        and words.search(row.encode("utf-8", "surrogatepass").lower().decode("utf-8", "replace"))
    ][:5]
    assert [n.offset for n in preview.notable] == want


def test_notable_lines_come_in_file_order_whatever_word_matched() -> None:
    # Several different failure words inside one chunk: the earliest line wins,
    # not the first word of the pattern's list.
    filler = b"".join(b"filler %d\n" % i for i in range(40))
    middle = b"x abort now\nok\ny panic: boom\nz Error: x\nw FAILED test_a\nv traceback\n"
    data = filler + middle + filler
    found = _notable(data, len(data))
    assert [text for _, text in found] == [
        "x abort now",
        "y panic: boom",
        "z Error: x",
        "w FAILED test_a",
        "v traceback",
    ]


def test_notable_lines_are_clipped_and_bounded_in_number(tmp_path: pathlib.Path) -> None:
    data = b"head\n" * 2000 + (b"ERROR " + b"z" * 5000 + b"\n") * 50 + b"tail\n" * 8000
    found = _notable(data, 4096)
    assert len(found) == 5 and found[0][0] == 2000
    assert all(len(text.encode()) <= NOTABLE_LINE_BYTES for _, text in found)


def test_a_custom_pattern_and_turning_it_off(tmp_path: pathlib.Path) -> None:
    data = b"ok\n" * 5000 + b"WARNING: low disk\nerror: not shown\n" + b"ok\n" * 20000
    ext = ToolResultExternalizer(tmp_path / "b", environ={"TOOLSWAP_NOTABLE_PATTERN": "WARN"})
    text = ext.externalize(data, "bash").context_text
    assert "\n5000: WARNING: low disk\n" in text and "error: not shown" not in text
    off = ToolResultExternalizer(tmp_path / "c", environ={}, notable_pattern="")
    assert "notable lines" not in off.externalize(data, "bash").context_text


@pytest.mark.parametrize("pattern", ["(", "x*"])
def test_a_bad_notable_pattern_is_a_usage_error(tmp_path: pathlib.Path, pattern: str) -> None:
    with pytest.raises(UsageError, match="TOOLSWAP_NOTABLE_PATTERN"):
        ToolResultExternalizer(tmp_path / "s", environ={"TOOLSWAP_NOTABLE_PATTERN": pattern})


def test_the_pointer_stays_bounded_for_a_single_enormous_line(tmp_path: pathlib.Path) -> None:
    ext = ToolResultExternalizer(tmp_path / "s", environ={})
    result = ext.externalize(iter([b"z" * (1 << 20)] * 20), "bash")
    assert len(result.context_text.encode()) < 32 * 1024
    assert "omitted: line offset 0 (from byte 6,000 of line 0) (1 line)" in result.context_text
