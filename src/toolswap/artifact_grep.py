"""Search inside an artifact with bounded memory and bounded output.

Rules:

1. Matching is per line, like ``grep -n``: a line is reported once, at its
   0-based offset, however many times it matches.
2. A regex is Python :mod:`re` syntax on the *decoded* text (UTF-8, invalid
   bytes read as U+FFFD), compiled with ``re.MULTILINE`` so ``^``/``$`` anchor
   at line ends; ``ignore_case`` is Unicode case folding.  A fixed string
   without ``ignore_case`` is searched on the raw bytes (its UTF-8 encoding),
   which is the fast path.
3. The file is read in blocks of about :data:`BLOCK` bytes that end on a line
   boundary; a line longer than :data:`MAX_PIECE` is searched in pieces that
   overlap by :data:`OVERLAP` bytes, so a match longer than the overlap that
   straddles two pieces of such a line can be missed (documented limit).
   Memory stays about two blocks whatever the file.
4. Output is bounded: each shown line is clipped to :data:`LINE_CHARS`
   characters around the match; the scan stops at ``max_matches`` or when the
   next match would push the rendered output past ``max_bytes``, and reports
   the offset to resume from.  The first match is always shown, shrunk (its
   context dropped, its text clipped) until it fits.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import attrs

from .errors import UsageError
from .reading import GrepMatch, char_boundary, grep_match_cost

__all__ = ["BLOCK", "MAX_PIECE", "OVERLAP", "LINE_CHARS", "MAX_CONTEXT", "Searcher", "scan"]

BLOCK = 1024 * 1024
MAX_PIECE = 1024 * 1024
OVERLAP = 4096
LINE_CHARS = 300
MAX_CONTEXT = 50
MAX_PATTERN_CHARS = 4096

Reader = Callable[[int, int], bytes]


@attrs.frozen
class Searcher:
    """How to find the next match in a block: on bytes (fixed) or on decoded text."""

    on_bytes: bool
    find: Callable[[Any, int], tuple[int, int]]  # (block, pos) -> (start, end) or (-1, -1)
    # For a pure-ASCII block, the same regex on bytes (no decoding): None if the
    # pattern could mean something else there (non-ASCII, or \s, which in
    # Unicode also matches the control bytes 0x1c-0x1f).
    find_ascii: Callable[[Any, int], tuple[int, int]] | None = None

    @classmethod
    def build(cls, pattern: str, *, fixed: bool, ignore_case: bool) -> Searcher:
        if not isinstance(pattern, str):
            raise UsageError(f"pattern must be a string, got {type(pattern).__name__}")
        if len(pattern) > MAX_PATTERN_CHARS:
            raise UsageError(
                f"pattern is {len(pattern)} characters; the limit is {MAX_PATTERN_CHARS}"
            )
        if fixed and not ignore_case:
            needle = pattern.encode("utf-8", errors="surrogateescape")

            def find_bytes(block: Any, pos: int) -> tuple[int, int]:
                start = block.find(needle, pos)
                return (start, start + len(needle)) if start >= 0 else (-1, -1)

            return cls(True, find_bytes)
        flags = re.MULTILINE | (re.IGNORECASE if ignore_case else 0)
        try:
            compiled = re.compile(re.escape(pattern) if fixed else pattern, flags)
        except re.error as exc:
            raise UsageError(f"invalid regular expression {pattern!r}: {exc}") from None

        def find(block: Any, pos: int) -> tuple[int, int]:
            found = compiled.search(block, pos)
            return (-1, -1) if found is None else found.span()

        find_ascii = None
        source = re.escape(pattern) if fixed else pattern
        if source.isascii() and "\\s" not in source and "\\S" not in source:
            on_ascii = re.compile(source.encode("ascii"), flags)

            def find_ascii(block: Any, pos: int) -> tuple[int, int]:
                found = on_ascii.search(block, pos)
                return (-1, -1) if found is None else found.span()

        return cls(False, find, find_ascii)


@attrs.define
class _Block:
    data: Any  # bytes or str
    first_line: int  # offset of the line the block starts in
    starts_mid: bool  # the first line began in an earlier piece
    ends_mid: bool  # the last line continues in the next piece


def _blocks(
    read: Reader, start: int, size: int, first_line: int, decode: bool, keep_ascii: bool
) -> Iterator[_Block]:
    """Blocks that end on a newline; a line over MAX_PIECE comes in overlapping pieces.

    With ``decode``, a block is text, unless ``keep_ascii`` and it is pure ASCII
    (then bytes and text are the same characters at the same positions).
    """
    position = start
    carry = b""
    line = first_line
    mid = False
    while True:
        data = read(BLOCK, position) if position < size else b""
        position += len(data)
        at_end = position >= size or not data
        buffer = carry + data if carry else data
        if not buffer:
            return
        ends_mid = False
        if at_end:
            cut = len(buffer)
        else:
            cut = buffer.rfind(b"\n") + 1
            if cut == 0:
                if len(buffer) < MAX_PIECE:
                    carry = buffer
                    continue
                cut = char_boundary(buffer, len(buffer) - OVERLAP)
                ends_mid = True
        piece = buffer[:cut]
        carry = buffer[cut - OVERLAP :] if ends_mid else buffer[cut:]
        as_text = decode and not (keep_ascii and piece.isascii())
        yield _Block(
            data=piece.decode("utf-8", errors="replace") if as_text else piece,
            first_line=line,
            starts_mid=mid,
            ends_mid=ends_mid,
        )
        line += piece.count(b"\n")
        mid = ends_mid
        if at_end:
            return


def _text(value: Any) -> str:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


def _clip(line: Any, column: int) -> tuple[str, bool]:
    """A window of at most LINE_CHARS characters of ``line`` showing ``column``."""
    if len(line) <= LINE_CHARS:
        return _text(line).rstrip("\r"), False
    if isinstance(line, str):
        begin = max(0, column - LINE_CHARS // 4)
        return line[begin : begin + LINE_CHARS], True
    begin = max(0, column - LINE_CHARS // 4)
    text = _text(line[begin : begin + LINE_CHARS * 4])
    if len(text) <= LINE_CHARS and begin == 0 and begin + LINE_CHARS * 4 >= len(line):
        return text.rstrip("\r"), False
    return text[:LINE_CHARS], True


@attrs.define
class _Open:
    """A match whose after-context may continue in the next block."""

    offset: int
    text: str
    clipped: bool
    before: tuple[tuple[int, str], ...]
    after: list[tuple[int, str]]
    want: int

    def to_match(self) -> GrepMatch:
        return GrepMatch(
            offset=self.offset,
            text=self.text,
            before=self.before,
            after=tuple(self.after),
            clipped=self.clipped,
        )


class _Budget:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.spent = 0
        self.matches: list[GrepMatch] = []

    def accept(self, item: _Open) -> bool:
        match = item.to_match()
        cost = grep_match_cost(match)
        if not self.matches and cost > self.max_bytes:
            match, cost = _shrink(match, self.max_bytes)
        if self.spent + cost > self.max_bytes:
            return False
        self.spent += cost
        self.matches.append(match)
        return True


def scan(
    read: Reader,
    *,
    start: int,
    size: int,
    first_line: int,
    searcher: Searcher,
    context: int,
    max_matches: int,
    max_bytes: int,
) -> tuple[list[GrepMatch], int | None]:
    """Matches from byte ``start`` (line ``first_line``) and the offset to resume from."""
    budget = _Budget(max_bytes)
    waiting: list[_Open] = []
    recent: deque[tuple[int, str]] = deque(maxlen=max(context, 1))
    skip_line = -1  # a line already reported that continues into the next piece

    def flush(everything: bool) -> int | None:
        """Accept waiting matches in order: all of them, or those whose context is complete."""
        while waiting and (everything or waiting[0].want == 0):
            item = waiting.pop(0)
            if not budget.accept(item):
                return item.offset
        return None

    blocks = _blocks(
        read, start, size, first_line, not searcher.on_bytes, searcher.find_ascii is not None
    )
    for block in blocks:
        data = block.data
        raw = isinstance(data, bytes)
        nl: Any = b"\n" if raw else "\n"
        find = searcher.find if searcher.on_bytes or not raw else searcher.find_ascii
        assert find is not None
        if waiting:  # after-context owed by the previous block's last matches
            for offset, text in _first_lines(data, nl, context, block):
                for item in waiting:
                    if item.want and offset == item.offset + len(item.after) + 1:
                        item.after.append((offset, text))
                        item.want -= 1
            for item in waiting:
                if block.starts_mid and item.offset + len(item.after) + 1 == block.first_line:
                    item.want = 0  # the next line is one cut into pieces: show no more
            stop = flush(False)
            if stop is not None:
                return budget.matches, stop
        pos = counted = 0
        line = block.first_line
        if skip_line == block.first_line:
            end = data.find(nl)
            if end < 0:
                continue
            pos = counted = end + 1
            line += 1
        skip_line = -1
        while True:
            hit, hit_end = find(data, pos)
            if hit < 0 or hit >= len(data):
                break
            if (block.starts_mid and hit == 0) or (block.ends_mid and hit_end == len(data)):
                # The edge of a piece is not a line edge (``^``, ``$``, ``\b`` would
                # lie there); a match touching it also lies in the overlapping piece.
                pos = hit + 1
                continue
            line_start = data.rfind(nl, 0, hit) + 1
            line_end = data.find(nl, hit)
            open_end = line_end < 0
            if open_end:
                line_end = len(data)
            line += data.count(nl, counted, line_start)
            counted = line_start
            if len(budget.matches) + len(waiting) >= max_matches:
                stop = flush(True)
                return budget.matches, line if stop is None else stop
            text, clipped = _clip(data[line_start:line_end], hit - line_start)
            item = _Open(
                offset=line,
                text=text,
                clipped=clipped
                or (line_start == 0 and block.starts_mid)
                or (open_end and block.ends_mid),
                before=_before(data, nl, line_start, line, context, recent) if context else (),
                after=[],
                want=context,
            )
            following = line_end + 1
            while item.want and not open_end and following <= len(data):
                nxt = data.find(nl, following)
                if nxt < 0:
                    if block.ends_mid or following == len(data):
                        break
                    nxt = len(data)
                item.after.append((line + len(item.after) + 1, _clip(data[following:nxt], 0)[0]))
                item.want -= 1
                following = nxt + 1
            waiting.append(item)
            if open_end:
                if block.ends_mid:
                    skip_line = line
                break
            pos = line_end + 1
        if context:
            _remember(data, nl, block, recent, context)
        stop = flush(False)
        if stop is not None:
            return budget.matches, stop
    return budget.matches, flush(True)


def _first_lines(data: Any, nl: Any, count: int, block: _Block) -> list[tuple[int, str]]:
    lines: list[tuple[int, str]] = []
    position = 0
    offset = block.first_line + (1 if block.starts_mid else 0)
    if block.starts_mid:
        end = data.find(nl)
        if end < 0:
            return lines
        position = end + 1
    while len(lines) < count and position < len(data):
        end = data.find(nl, position)
        if end < 0:
            if block.ends_mid:
                break
            end = len(data)
        lines.append((offset, _clip(data[position:end], 0)[0]))
        offset += 1
        position = end + 1
    return lines


def _before(
    data: Any, nl: Any, line_start: int, line: int, context: int, recent: deque[tuple[int, str]]
) -> tuple[tuple[int, str], ...]:
    found: list[tuple[int, str]] = []
    end = line_start - 1  # the newline before the matching line
    while len(found) < context and end >= 0:
        begin = data.rfind(nl, 0, end) + 1
        found.append((line - len(found) - 1, _clip(data[begin:end], 0)[0]))
        end = begin - 1
    if len(found) < context:
        wanted = line - len(found) - 1
        for offset, text in reversed(recent):
            if len(found) >= context:
                break
            if offset == wanted:
                found.append((offset, text))
                wanted -= 1
    return tuple(reversed(found))


def _remember(
    data: Any, nl: Any, block: _Block, recent: deque[tuple[int, str]], context: int
) -> None:
    if block.ends_mid:
        return
    body = data[:-1] if data.endswith(nl) else data
    last_lines = body.rsplit(nl, context)
    total = data.count(nl) + (0 if data.endswith(nl) else 1)
    first = block.first_line + total - len(last_lines)
    for i, piece in enumerate(last_lines):
        recent.append((first + i, _clip(piece, 0)[0]))


def _shrink(match: GrepMatch, budget: int) -> tuple[GrepMatch, int]:
    """Drop context, then clip the text, until one match fits ``budget`` bytes."""
    match = attrs.evolve(match, after=())
    if grep_match_cost(match) > budget:
        match = attrs.evolve(match, before=())
    text = match.text
    while grep_match_cost(match) > budget and text:
        text = text[: max(0, len(text) - max(1, (grep_match_cost(match) - budget)))]
        match = attrs.evolve(match, text=text, clipped=True)
    return match, grep_match_cost(match)
