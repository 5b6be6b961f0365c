"""grep_artifact: the lines a per-line grep finds, at their offsets, bounded, resumable."""

from __future__ import annotations

import pathlib
import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from toolswap import artifact_grep
from toolswap.errors import ArtifactIntegrityError, UsageError
from toolswap.externalizer import ToolResultExternalizer
from toolswap.reading import MAX_TRAILER_BYTES, render_grep

from ._artifacts import lines


def _put(tmp: pathlib.Path, data: bytes) -> tuple[ToolResultExternalizer, str]:
    ext = ToolResultExternalizer(tmp / "s", environ={}, threshold_bytes=1)
    result = ext.externalize(data, "tool")
    assert result.artifact is not None
    return ext, result.artifact.source_id


def _reference(data: bytes, pattern: str, *, fixed: bool, ignore_case: bool) -> list[int]:
    text = data.decode("utf-8", "replace")
    rows = text.split("\n")
    if text.endswith("\n"):
        rows.pop()
    flags = re.IGNORECASE if ignore_case else 0
    regex = re.compile(re.escape(pattern) if fixed else pattern, flags)
    return [i for i, row in enumerate(rows) if regex.search(row)]


@pytest.fixture
def tiny_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of a few bytes, so every boundary case happens in a small file.

    The same sizes for every generated input, so sharing the fixture is safe.
    """
    monkeypatch.setattr(artifact_grep, "BLOCK", 7)
    monkeypatch.setattr(artifact_grep, "MAX_PIECE", 24)
    monkeypatch.setattr(artifact_grep, "OVERLAP", 8)


# Patterns that cannot match a newline, so a per-line search is the reference.
PATTERNS = ["ab", "b", "a+b", "^a", "b$", "(ab|c)", "é", "😀b", "a.b", "x", "^$", "A", "ᴀ"]
chars = st.sampled_from(["a", "b", "c", "x", "é", "😀", "A", "\udcff"])
one_line = st.one_of(
    st.just(""),
    st.lists(chars, max_size=8).map("".join),
    st.lists(chars, min_size=20, max_size=90).map("".join),  # longer than a piece
)
files = (
    st.tuples(st.lists(one_line, min_size=1, max_size=25), st.booleans())
    .map(lambda t: ("\n".join(t[0]) + ("\n" if t[1] else "")).encode("utf-8", "surrogateescape"))
    .filter(lambda data: len(data) > 1)
)  # one byte is under every threshold


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@example(b"\n\nab\n\n", "^$", False, False, 1)
@example(b"x" * 22 + b"ab" + b"x" * 40 + b"\nab", "ab", True, False, 1)
@example(b"x" * 22 + b"ab" + b"x" * 40 + b"\nab", "ab", False, False, 2)
@given(
    files,
    st.sampled_from(PATTERNS),
    st.booleans(),
    st.booleans(),
    st.integers(1, 3),
)
def test_grep_finds_exactly_the_lines_a_per_line_search_finds(
    tmp_path_factory: pytest.TempPathFactory,
    tiny_blocks: None,
    data: bytes,
    pattern: str,
    fixed: bool,
    ignore_case: bool,
    step: int,
) -> None:
    ext, sid = _put(tmp_path_factory.mktemp("g"), data)
    want = _reference(data, pattern, fixed=fixed, ignore_case=ignore_case)
    found: list[int] = []
    offset = 0
    while True:  # resume by next_offset, a few matches at a time
        result = ext.grep_artifact(
            sid, pattern, fixed=fixed, ignore_case=ignore_case, max_matches=step, offset=offset
        )
        found.extend(m.offset for m in result.matches)
        if result.next_offset is None:
            break
        assert result.truncated and result.next_offset > offset
        offset = result.next_offset
    assert found == want


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@example(b"\n\n\n\n\na\n\naaaaaaa", 2)  # context that spans two short blocks
@given(files, st.integers(0, 3))
def test_context_lines_are_the_neighbours_of_each_match(
    tmp_path_factory: pytest.TempPathFactory, tiny_blocks: None, data: bytes, context: int
) -> None:
    ext, sid = _put(tmp_path_factory.mktemp("g"), data)
    rows = data.decode("utf-8", "replace").split("\n")
    count = len(rows) - (1 if data.endswith(b"\n") else 0)
    result = ext.grep_artifact(sid, "a", fixed=True, context=context, max_matches=1000)
    for match in result.matches:
        if len(rows[match.offset]) > artifact_grep.MAX_PIECE // 2:
            continue  # a line cut into pieces shows fragments around it
        before = [o for o, _ in match.before]
        after = [o for o, _ in match.after]
        near_long = any(
            len(rows[o]) > artifact_grep.MAX_PIECE // 2
            for o in range(max(0, match.offset - context), min(count, match.offset + context + 1))
        )
        if near_long:
            continue
        assert before == list(range(max(0, match.offset - context), match.offset))
        assert after == list(range(match.offset + 1, min(count, match.offset + context + 1)))
        for offset, text in (*match.before, *match.after):
            assert text == rows[offset]


long_lines = st.lists(
    st.one_of(st.text(max_size=40), st.integers(0, 5000).map(lambda n: "ab" * n)),
    min_size=1,
    max_size=80,
).map(lambda ls: "\n".join(ls).encode("utf-8", "surrogatepass"))


@settings(max_examples=60, deadline=None)
@given(long_lines, st.integers(64, 3000), st.integers(0, 5), st.integers(1, 200))
def test_grep_output_never_passes_its_cap(
    tmp_path_factory: pytest.TempPathFactory,
    data: bytes,
    cap: int,
    context: int,
    max_matches: int,
) -> None:
    ext, sid = _put(tmp_path_factory.mktemp("g"), data + b"!!")
    result = ext.grep_artifact(sid, "a|!", context=context, max_bytes=cap, max_matches=max_matches)
    assert len(render_grep(result).encode()) <= cap + MAX_TRAILER_BYTES + 1
    assert len(result.matches) <= max_matches
    if result.next_offset is None:
        assert not result.truncated
    else:  # progress: at least one match before stopping, and resuming moves on
        assert result.matches and result.next_offset > result.matches[-1].offset


def test_the_middle_error_is_found_at_its_offset_with_context(tmp_path: pathlib.Path) -> None:
    ext, sid = _put(tmp_path, lines(80_000, marker_at=40_000))
    result = ext.grep_artifact(sid, r"ERROR: \w+", context=1)
    assert [m.offset for m in result.matches] == [40_000]
    match = result.matches[0]
    assert match.text == "ERROR: the distinctive failure"
    assert [o for o, _ in match.before] == [39_999] and [o for o, _ in match.after] == [40_001]
    assert ext.read_page(sid, 40_000, 1).text == "ERROR: the distinctive failure\n"
    shown = render_grep(result)
    assert "40000:ERROR: the distinctive failure\n" in shown and "39999-line 39999" in shown


def test_a_long_matching_line_is_clipped_around_the_match(tmp_path: pathlib.Path) -> None:
    ext, sid = _put(tmp_path, b"start\n" + b"z" * 3_000_000 + b"NEEDLE" + b"z" * 1000 + b"\nend\n")
    result = ext.grep_artifact(sid, "NEEDLE", fixed=True)
    assert [m.offset for m in result.matches] == [1]
    assert result.matches[0].clipped and "NEEDLE" in result.matches[0].text
    assert len(result.matches[0].text) <= artifact_grep.LINE_CHARS


def test_max_matches_stops_and_names_the_next_matching_line(tmp_path: pathlib.Path) -> None:
    ext, sid = _put(tmp_path, lines(1000))
    result = ext.grep_artifact(sid, "line 1", max_matches=3)
    assert [m.offset for m in result.matches] == [1, 10, 11]
    assert result.truncated and result.next_offset == 12
    assert "--offset 12" in render_grep(result)


def test_ignore_case_and_fixed_strings(tmp_path: pathlib.Path) -> None:
    ext, sid = _put(tmp_path, b"a.b\naXb\nA.B\n")
    assert [m.offset for m in ext.grep_artifact(sid, "a.b").matches] == [0, 1]
    assert [m.offset for m in ext.grep_artifact(sid, "a.b", fixed=True).matches] == [0]
    found = ext.grep_artifact(sid, "a.b", fixed=True, ignore_case=True).matches
    assert [m.offset for m in found] == [0, 2]


@pytest.mark.parametrize(
    "kw",
    [
        {"pattern": "("},
        {"pattern": "x", "context": -1},
        {"pattern": "x", "context": 51},
        {"pattern": "x", "max_matches": 0},
        {"pattern": "x", "max_bytes": 10},
        {"pattern": "x", "offset": 99},
        {"pattern": "x" * 5000},
    ],
)
def test_bad_grep_arguments_are_usage_errors(tmp_path: pathlib.Path, kw: dict[str, object]) -> None:
    ext, sid = _put(tmp_path, lines(10))
    with pytest.raises(UsageError):
        ext.grep_artifact(sid, **kw)  # type: ignore[arg-type]


def test_grep_verifies_the_artifact_first(tmp_path: pathlib.Path) -> None:
    ext, sid = _put(tmp_path, lines(100))
    path = pathlib.Path(ext.paths.path_for_source(sid))
    path.write_bytes(path.read_bytes().replace(b"line 5 ", b"line 6 "))
    fresh = ToolResultExternalizer(tmp_path / "s", environ={})
    with pytest.raises(ArtifactIntegrityError):
        fresh.grep_artifact(sid, "line")
