"""Search inside an artifact with bounded memory, bounded output and bounded time.

Rules:

1. Matching is per line, like ``grep -n``: a line is reported once, at its
   0-based offset, however many times it matches.
2. A regex is Python :mod:`re` syntax on the *decoded* text (UTF-8, invalid
   bytes read as U+FFFD), compiled with ``re.MULTILINE`` so ``^``/``$`` anchor
   at line ends; ``ignore_case`` is Unicode case folding.  The pattern must
   compile with :mod:`re` (that is the syntax promised) and it runs on the
   ``regex`` module, which can stop a search: a pattern that backtracks
   without end (``(a+)+$``) is stopped at :data:`TIME_LIMIT` seconds (or the
   caller's ``time_limit``) and refused with one clear
   :class:`~toolswap.errors.InvalidPattern` that says how far the search got.
   A pattern whose repeats would compile into more than
   :data:`MAX_PATTERN_SIZE` steps (``(a{1000}){1000}``), one longer than
   :data:`MAX_PATTERN_CHARS`, and one :mod:`re` refuses (by any error,
   ``a{4294967296}`` and a thousand nested groups included) are refused the
   same way before any search.  A fixed string without ``ignore_case`` is
   searched on the raw bytes (its UTF-8 encoding), which is the fast path:
   it skips from match to match over the whole file (read a window at a
   time, :class:`WindowedFile`; line numbers from the line index) and reads
   only the blocks that hold one.
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

import bisect
import errno
import importlib
import re
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import attrs

from .errors import InvalidPattern, UsageError
from .line_index import LineIndex
from .reading import GrepMatch, char_boundary, grep_match_cost

__all__ = [
    "BLOCK",
    "MAX_PIECE",
    "OVERLAP",
    "LINE_CHARS",
    "MAX_CONTEXT",
    "MAX_PATTERN_CHARS",
    "MAX_PATTERN_SIZE",
    "TIME_LIMIT",
    "Searcher",
    "Skipper",
    "WindowedFile",
    "scan",
]

BLOCK = 1024 * 1024
MAX_PIECE = 1024 * 1024
OVERLAP = 4096
LINE_CHARS = 300
MAX_CONTEXT = 50
MAX_PATTERN_CHARS = 4096
MAX_PATTERN_SIZE = 20_000  # steps a pattern compiles into, its counted repeats unrolled
TIME_LIMIT = 10.0  # seconds a whole search may take

Reader = Callable[[int, int], bytes]
Find = Callable[[Any, int], tuple[int, int]]  # (block, pos) -> (start, end) or (-1, -1)


def _shown(pattern: str) -> str:
    return repr(pattern if len(pattern) <= 60 else pattern[:57] + "...")


def _compiled_size(source: str, flags: int) -> int:
    """How many steps ``source`` compiles into, each counted repeat unrolled (a bound).

    Checked on :mod:`re`'s own parse, which also refuses what is not
    Python ``re`` syntax; the ``regex`` module unrolls counted repeats when it
    compiles, so ``(a{1000}){1000}`` would take seconds and hundreds of MB.
    """
    # re's own parser (private, stable since 3.11): the one that defines the syntax.
    c: Any = importlib.import_module("re._constants")
    parser: Any = importlib.import_module("re._parser")

    repeats = (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", c.MAX_REPEAT))

    def size(items: Any) -> int:
        total = 0
        for op, av in items:
            if op in repeats:
                low, high, item = av
                total += max(1, low if high == c.MAXREPEAT else high) * size(item)
            elif op is c.SUBPATTERN:
                total += size(av[-1])
            elif op is c.BRANCH:
                total += sum(size(branch) for branch in av[1])
            elif op in (c.ASSERT, c.ASSERT_NOT):
                total += size(av[1])
            elif op is getattr(c, "ATOMIC_GROUP", None):
                total += size(av)
            elif op is c.GROUPREF_EXISTS:
                total += size(av[1]) + (size(av[2]) if av[2] else 0)
            else:
                total += 1
            if total > MAX_PATTERN_SIZE:
                return total  # enough to refuse; the rest may be huge
        return total

    return size(parser.parse(source, flags))


def _compile(source: str, flags: int) -> Any:
    """``source`` on the ``regex`` engine, after :mod:`re` accepts it and its size is bounded."""
    regex = _regex()

    try:
        steps = _compiled_size(source, flags)
    except (re.error, OverflowError, RecursionError, MemoryError, ValueError) as exc:
        # re refuses some patterns by raising more than re.error (a repeat
        # count past its range, groups nested too deep): all are the caller's.
        reason = f"{type(exc).__name__}: {exc}" if not isinstance(exc, re.error) else str(exc)
        raise InvalidPattern(f"invalid regular expression {_shown(source)}: {reason}") from None
    if steps > MAX_PATTERN_SIZE:
        raise InvalidPattern(
            f"regular expression {_shown(source)} is too large: its counted repeats unroll "
            f"into more than {MAX_PATTERN_SIZE:,} steps"
        )
    engine_flags = (regex.MULTILINE if flags & re.MULTILINE else 0) | (
        regex.IGNORECASE if flags & re.IGNORECASE else 0
    )
    try:
        return regex.compile(source, engine_flags | regex.VERSION0)
    except (regex.error, OverflowError, RecursionError, MemoryError, ValueError) as exc:
        raise InvalidPattern(f"invalid regular expression {_shown(source)}: {exc}") from None


@attrs.frozen
class Searcher:
    """How to find the next match in a block: on bytes (fixed) or on decoded text.

    ``needle``: a fixed string searched on the raw bytes.  Otherwise
    ``compiled`` runs on decoded text and, for a pure-ASCII block,
    ``compiled_ascii`` on the bytes themselves (no decoding); None if the
    pattern could mean something else there (non-ASCII, or ``\\s``, which in
    Unicode also matches the control bytes 0x1c-0x1f).
    """

    pattern: str
    needle: bytes | None = None
    compiled: Any = None
    compiled_ascii: Any = None

    @property
    def on_bytes(self) -> bool:
        return self.needle is not None

    @classmethod
    def build(cls, pattern: str, *, fixed: bool, ignore_case: bool) -> Searcher:
        if not isinstance(pattern, str):
            raise UsageError(f"pattern must be a string, got {type(pattern).__name__}")
        if len(pattern) > MAX_PATTERN_CHARS:
            raise InvalidPattern(
                f"pattern is {len(pattern)} characters; the limit is {MAX_PATTERN_CHARS}"
            )
        if fixed and not ignore_case:
            return cls(pattern, needle=pattern.encode("utf-8", errors="surrogateescape"))
        source = re.escape(pattern) if fixed else pattern
        flags = re.MULTILINE | (re.IGNORECASE if ignore_case else 0)
        compiled = _compile(source, flags)
        on_ascii = None
        if source.isascii() and "\\s" not in source and "\\S" not in source:
            on_ascii = _compile_bytes(source, flags)
        return cls(pattern, compiled=compiled, compiled_ascii=on_ascii)

    def finders(self, deadline: float) -> tuple[Find, Find | None]:
        """(find on the block as it comes, find on a pure-ASCII block kept as bytes)."""
        needle = self.needle
        if needle is not None:

            def find_bytes(block: Any, pos: int) -> tuple[int, int]:
                start = block.find(needle, pos)
                return (start, start + len(needle)) if start >= 0 else (-1, -1)

            return find_bytes, None
        return _timed(self.compiled, deadline), (
            None if self.compiled_ascii is None else _timed(self.compiled_ascii, deadline)
        )


def _compile_bytes(source: str, flags: int) -> Any:
    regex = _regex()

    engine_flags = (regex.MULTILINE if flags & re.MULTILINE else 0) | (
        regex.IGNORECASE if flags & re.IGNORECASE else 0
    )
    try:
        return regex.compile(source.encode("ascii"), engine_flags | regex.VERSION0)
    except (regex.error, OverflowError, RecursionError, MemoryError, ValueError):
        return None  # the text form compiled: use it on every block


def _regex() -> Any:
    """The ``regex`` module (a dependency; imported by the searches that need it)."""
    return importlib.import_module("regex")


class _TimeUp(Exception):
    """A regex search reached the deadline (raised inside :func:`scan`)."""


def _timed(compiled: Any, deadline: float) -> Find:
    def find(block: Any, pos: int) -> tuple[int, int]:
        left = deadline - time.monotonic()
        if left <= 0:
            raise _TimeUp
        try:
            # concurrent: the GIL is let go while the engine runs, so a
            # server's other requests are answered meanwhile.
            found = compiled.search(block, pos, timeout=left, concurrent=True)
        except TimeoutError:
            raise _TimeUp from None
        return (-1, -1) if found is None else found.span()

    return find


class WindowedFile:
    """The verified file as one searchable buffer, read through ``pread`` a window at a time.

    What :class:`Skipper` needs of the file (``find``, ``rfind``, slices) in
    bounded memory: one window of :data:`WINDOW` bytes is kept, and a search
    that runs past it reads the next one, overlapping by the needle's length.
    Reading, unlike a memory map, cannot kill the process when someone cuts
    the file short under it (SIGBUS): a short read is an ``OSError`` here,
    and the caller's identity check after the read refuses what changed.
    """

    WINDOW = 4 * 1024 * 1024

    def __init__(self, pread: Reader, size: int, window: int = WINDOW) -> None:
        self._pread = pread
        self._size = size
        self._window = window
        self._at = 0
        self._data = b""

    def __len__(self) -> int:
        return self._size

    def close(self) -> None:
        self._data = b""

    def _read(self, start: int, length: int) -> bytes:
        length = max(0, min(length, self._size - start))
        data = self._pread(length, start) if length else b""
        if len(data) != length:
            raise OSError(errno.EIO, "the artifact is shorter than verified")
        return data

    def __getitem__(self, index: slice, /) -> bytes:
        start, stop, _ = index.indices(self._size)
        if self._at <= start and stop <= self._at + len(self._data):
            return self._data[start - self._at : stop - self._at]
        return self._read(start, stop - start)

    def find(self, sub: bytes, start: int = 0, end: int | None = None) -> int:
        end = self._size if end is None else min(end, self._size)
        position = max(start, 0)
        while position + len(sub) <= end:
            if not (self._at <= position < self._at + len(self._data) - len(sub) + 1):
                # at least the needle's length: a window always moves forward
                width = max(self._window, 2 * len(sub))
                self._at, self._data = position, self._read(position, width)
            limit = min(end, self._at + len(self._data))
            found = self._data.find(sub, position - self._at, limit - self._at)
            if found >= 0:
                return self._at + found
            if limit >= end:
                return -1
            position = limit - len(sub) + 1  # a match across the window's end
        return -1

    def rfind(self, sub: bytes, start: int = 0, end: int | None = None) -> int:
        end = self._size if end is None else min(end, self._size)
        stop = end
        width = max(self._window, 2 * len(sub))  # a window always moves back
        while stop - max(start, 0) >= len(sub):
            lo = max(start, stop - width)
            found = self[lo:stop].rfind(sub)
            if found >= 0:
                return lo + found
            stop = lo + len(sub) - 1
            if lo <= start:
                break
        return -1


class Skipper:
    """Jumps a fixed-string search from one match to the next over the file.

    ``buffer`` is the whole file (a :class:`WindowedFile`);
    a jump lands ``context`` lines before the next match, at a line start,
    and its line number comes from the line index: a checkpoint, then the
    newlines counted from there (at most one index stride).

    The search looks first for the needle's rarest byte (rarest in a sample of
    the file), which ``memchr`` finds several times faster than ``find``
    finds a string, and checks the needle around each; when that byte turns
    out common, it hands over to ``find`` from there.
    """

    SAMPLE = 64 * 1024
    TRIES = 64  # misses before the byte is judged too common

    def __init__(self, buffer: Any, needle: bytes, index: LineIndex, context: int) -> None:
        self._buffer = buffer
        self._needle = needle
        self._index = index
        self._context = context
        sample = buffer[: self.SAMPLE]
        rarest = min(range(len(needle)), key=lambda i: sample.count(needle[i : i + 1]))
        self._rare: tuple[bytes, int] | None = (needle[rarest : rarest + 1], rarest)

    def _find(self, position: int) -> int:
        """The first occurrence of the needle at or after ``position``, or -1."""
        buffer, needle = self._buffer, self._needle
        if self._rare is not None:
            byte, shift = self._rare
            at = position + shift
            for _ in range(self.TRIES):
                seen = buffer.find(byte, at)
                if seen < 0:
                    return -1
                start: int = seen - shift
                if buffer[start : start + len(needle)] == needle:
                    return start
                at = seen + 1
            self._rare = None  # common here: let find do the rest
            position = at - shift
        return int(buffer.find(needle, position))

    def next_from(self, position: int, line: int) -> tuple[int, int] | None:
        """(line start, its line number) to read from, for the first match at or after
        ``position`` (a line start whose number is ``line``); None if none is left."""
        buffer = self._buffer
        hit = self._find(position)
        if hit < 0:
            return None
        start = buffer.rfind(b"\n", position, hit) + 1 or position
        for _ in range(self._context):
            if start <= position:
                break
            start = buffer.rfind(b"\n", position, start - 1) + 1 or position
        if start <= position:
            return position, line
        index = self._index
        i = bisect.bisect_right(index.checkpoint_offsets, start) - 1
        base, counted = index.checkpoint_offsets[i], index.checkpoint_newlines[i]
        if base < position:
            base, counted = position, line
        return start, counted + buffer[base:start].count(b"\n")


@attrs.define
class _Block:
    data: Any  # bytes or str
    first_line: int  # offset of the line the block starts in
    starts_mid: bool  # the first line began in an earlier piece
    ends_mid: bool  # the last line continues in the next piece


def _blocks(
    read: Reader,
    start: int,
    size: int,
    first_line: int,
    decode: bool,
    keep_ascii: bool,
    skip: Callable[[int, int], tuple[int, int] | None] | None = None,
    may_skip: Callable[[], bool] = lambda: True,
) -> Iterator[_Block]:
    """Blocks that end on a newline; a line over MAX_PIECE comes in overlapping pieces.

    With ``decode``, a block is text, unless ``keep_ascii`` and it is pure ASCII
    (then bytes and text are the same characters at the same positions).
    ``skip(line start, its line)``: where the next block may start instead
    (:meth:`Skipper.next_from`), asked at line starts when ``may_skip()``.
    """
    position = start
    carry = b""
    line = first_line
    mid = False
    while True:
        if skip is not None and not mid and may_skip():
            here = position - len(carry)
            target = skip(here, line)
            if target is None:
                return  # no match left in the file
            if target[0] > here:
                (position, line), carry = target, b""
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
    skipper: Skipper | None = None,
    time_limit: float = TIME_LIMIT,
) -> tuple[list[GrepMatch], int | None]:
    """Matches from byte ``start`` (line ``first_line``) and the offset to resume from.

    Raises :class:`~toolswap.errors.InvalidPattern` when a regex search runs
    past ``time_limit`` seconds (rule 2).
    """
    reached = [first_line]
    try:
        return _scan(
            read,
            start=start,
            size=size,
            first_line=first_line,
            searcher=searcher,
            context=context,
            max_matches=max_matches,
            max_bytes=max_bytes,
            skipper=skipper,
            deadline=time.monotonic() + time_limit,
            reached=reached,
        )
    except _TimeUp:
        raise InvalidPattern(
            f"the pattern {_shown(searcher.pattern)} took longer than {time_limit:g} s "
            f"(searched up to line offset {reached[0]}); a nested repeat such as (a+)+ can "
            f"backtrack without end: simplify it, or search a fixed string (-F)"
        ) from None


def _scan(
    read: Reader,
    *,
    start: int,
    size: int,
    first_line: int,
    searcher: Searcher,
    context: int,
    max_matches: int,
    max_bytes: int,
    skipper: Skipper | None,
    deadline: float,
    reached: list[int],
) -> tuple[list[GrepMatch], int | None]:
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

    find_text, find_ascii = searcher.finders(deadline)
    blocks = _blocks(
        read,
        start,
        size,
        first_line,
        not searcher.on_bytes,
        find_ascii is not None,
        skip=None if skipper is None else skipper.next_from,
        may_skip=lambda: not any(item.want for item in waiting),  # no after-context owed
    )
    for block in blocks:
        reached[0] = block.first_line
        data = block.data
        raw = isinstance(data, bytes)
        nl: Any = b"\n" if raw else "\n"
        find = find_text if searcher.on_bytes or not raw else find_ascii
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
