"""The fast notable-line scanner finds exactly the lines a plain per-line reading finds.

The reference below splits the whole output into lines, cuts each to the scan
window and matches it: the meaning the README and pointer.py give.  The
scanner sees the same bytes in arbitrary writes (words and lines cut across
them) and must agree line for line, text and clip flag included, with the
automaton and with the ``bytes.find`` fallback alike.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolswap.pointer import (
    DEFAULT_NOTABLE_PATTERN,
    DEFAULT_WORDS,
    NOTABLE_LINE_BYTES,
    NotablePattern,
    _NotableScanner,
    _WordFinder,
)

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_WORDS_ANY_CASE = re.compile(DEFAULT_NOTABLE_PATTERN.encode(), re.IGNORECASE)  # ASCII-only on bytes

# Line-local custom patterns: what they match in a line does not depend on
# the text around it (the documented promise); one can also match across a
# newline in the chunk, which must not make its line notable by itself.
CUSTOM = ["WARN", "(?i)disk\\s+full", "^x", "[0-9]{3}", "a|bc|cab", "e.r", "a\\sb"]


def reference(data: bytes, pattern: NotablePattern, scan: int) -> list[tuple[int, int, str, bool]]:
    """(line offset, start byte, text, clipped) of every notable line, by the rules alone."""
    pieces = data.split(b"\n")
    if pieces and pieces[-1] == b"":
        pieces.pop()  # a final newline ends the last line; it starts none
    found = []
    start = 0
    for offset, line in enumerate(pieces):
        window = line[:scan]
        if pattern.literals:
            hit = _WORDS_ANY_CASE.search(window) is not None
        else:
            hit = pattern.regex.search(window) is not None
        if hit:
            text = line[:NOTABLE_LINE_BYTES].decode("utf-8", errors="replace").rstrip("\r")
            found.append((offset, start, _CONTROL.sub(" ", text), len(line) > NOTABLE_LINE_BYTES))
        start += len(line) + 1
    return found


def scanned(
    data: bytes, cuts: list[int], pattern: NotablePattern, scan: int
) -> list[tuple[int, int, str, bool]]:
    scanner = _NotableScanner(pattern, keep=10**9, head_window=0, scan_bytes=scan)
    position = newlines = 0
    for chunk in _split(data, cuts):
        count = chunk.count(b"\n")
        scanner.feed(chunk, position, newlines, count)
        position += len(chunk)
        newlines += count
    scanner.finish()
    return [(n.offset, n.start, n.text, n.clipped) for n in scanner.found]


def _split(data: bytes, cuts: list[int]) -> Iterator[bytes]:
    at = 0
    for cut in sorted({c % (len(data) + 1) for c in cuts}):
        if cut > at:
            yield data[at:cut]
            at = cut
    if at < len(data):
        yield data[at:]


def _any_case(word: str) -> st.SearchStrategy[str]:
    return st.lists(st.booleans(), min_size=len(word), max_size=len(word)).map(
        lambda flips: "".join(c.upper() if f else c for c, f in zip(word, flips, strict=True))
    )


word = st.sampled_from(DEFAULT_NOTABLE_PATTERN.split("|")).flatmap(_any_case)
filler = st.sampled_from(["ok", "row 12 ", "x", "WARN ", "disk  full", "a b", "cab", "e-r", "\r"])
piece = st.one_of(word, filler, st.text(max_size=12).map(lambda t: t.replace("\n", "")))
# Lines up to a few windows long, so words fall inside, across and past the cut.
line = st.lists(piece, max_size=12).map("".join)
outputs = st.lists(line, max_size=40).flatmap(
    lambda rows: st.sampled_from(["", "\n"]).map(lambda end: ("\n".join(rows) + end).encode())
)
cuts = st.lists(st.integers(0, 10_000), max_size=30)
scans = st.integers(1, 40)


def _finder(automaton: bool) -> contextlib.AbstractContextManager[object]:
    if automaton:
        assert _WordFinder._load(DEFAULT_WORDS) is not None  # the dependency is installed
        return contextlib.nullcontext()
    return mock.patch.object(_WordFinder, "_load", classmethod(lambda cls, words: None))


@pytest.mark.parametrize("automaton", [True, False], ids=["automaton", "find"])
@settings(max_examples=300, deadline=None)
@given(data=outputs, cuts=cuts, scan=scans)
def test_failure_words_are_found_as_a_per_line_reading_finds_them(
    automaton: bool, data: bytes, cuts: list[int], scan: int
) -> None:
    pattern = NotablePattern.default()
    with _finder(automaton):
        assert scanned(data, cuts, pattern, scan) == reference(data, pattern, scan)


@settings(max_examples=300, deadline=None)
@given(data=outputs, cuts=cuts, scan=scans, source=st.sampled_from(CUSTOM))
def test_a_custom_pattern_is_matched_per_line_however_the_writes_fall(
    data: bytes, cuts: list[int], scan: int, source: str
) -> None:
    pattern = NotablePattern.resolve(source, {})
    assert pattern is not None
    assert scanned(data, cuts, pattern, scan) == reference(data, pattern, scan)


def test_a_word_cut_by_the_window_is_not_found_but_one_inside_it_is() -> None:
    pattern = NotablePattern.default()
    data = b"xxxxERROR\nxxERROR\n"
    assert [row[0] for row in scanned(data, [], pattern, 8)] == [1]


def test_a_word_split_across_two_writes_is_found() -> None:
    pattern = NotablePattern.default()
    data = b"ok\n" * 10 + b"disk ERR" + b"OR here\n" + b"ok\n"
    assert [row[0] for row in scanned(data, [len(data) - 11], pattern, 1 << 16)] == [10]
