"""The bounded pointer that replaces a large output in the context.

Rules (docs/design.md section 4):

1. The pointer is bounded whatever the output size: a header, a head preview
   of at most ``head_bytes``, one omission marker, up to :data:`NOTABLE_LINES`
   notable lines, and a tail preview of at most ``tail_bytes`` minus the room
   the notable lines take (sizes of the UTF-8 *text*, after replacement
   characters).  With the defaults the whole pointer stays under 32 KiB.
2. Head and tail never overlap or repeat text: the tail starts at or after the
   end of the head.
3. The previews fill their budgets: the head ends at its window's last line
   boundary only if that keeps at least half the window, and the tail starts
   at its window's first line boundary only if that keeps at least half;
   otherwise the cut falls inside a long line, on a character boundary, and
   the marker says so (line offset and byte within that line).
4. Every position shown is a **0-based line offset** (what ``toolswap read
   --offset`` takes).  The marker names the omitted lines and bytes and the
   exact first read, which is byte-capped like every read
   (``--byte`` resumes inside a line), so the hint can never return more than
   a page.
5. Notable lines: while streaming, with no second pass, the collector keeps
   up to :data:`NOTABLE_LINES` lines of the omitted part that match the
   notable pattern, each with its offset, clipped to
   :data:`NOTABLE_LINE_BYTES`.  The default pattern
   (:data:`DEFAULT_NOTABLE_PATTERN`) is a set of failure words matched as
   substrings, ASCII case-insensitively; a custom pattern
   (``TOOLSWAP_NOTABLE_PATTERN`` or the externalizer's ``notable_pattern``)
   is a Python regex on the raw bytes, case-sensitive unless it says
   ``(?i)``; an empty one turns the feature off.  Each line (without its
   newline) is matched on its first :data:`NOTABLE_SCAN_BYTES` bytes, cut
   there, whatever the writes the output came in: a word must end inside
   that window, and a custom pattern sees the cut as the end of the line
   (an anchor or a lookaround that looks past the line, such as ``\\Z`` or
   ``(?!\\n)``, is outside this promise).  The earliest matches are kept (the
   first failure is usually the cause).

:class:`PreviewCollector` sees every byte once and keeps only the first
``head_bytes``, a ring of the last ``tail_bytes`` and the few notable lines
(bounded memory).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from .errors import UsageError
from .reading import DEFAULT_PAGE_BYTES, char_boundary

__all__ = [
    "PreviewCollector",
    "Preview",
    "NotableLine",
    "NotablePattern",
    "render_pointer",
    "read_hint",
    "HEAD_BYTES",
    "TAIL_BYTES",
    "NOTABLE_LINES",
    "NOTABLE_LINE_BYTES",
    "NOTABLE_SCAN_BYTES",
    "DEFAULT_NOTABLE_PATTERN",
    "NOTABLE_PATTERN_ENV",
]

HEAD_BYTES = 6000
TAIL_BYTES = 24000
NOTABLE_LINES = 5
NOTABLE_LINE_BYTES = 240
NOTABLE_SCAN_BYTES = 64 * 1024
NOTABLE_PATTERN_ENV = "TOOLSWAP_NOTABLE_PATTERN"
#: Failure words, matched as lowercase substrings of the ASCII-lowercased line.
DEFAULT_NOTABLE_PATTERN = (
    "error|fail|fatal|panic|exception|traceback|segfault|segmentation fault|core dumped|abort"
)
_SLACK = 8  # a few bytes more than the window, to see the byte before a cut
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


@attrs.frozen
class NotablePattern:
    """A compiled notable-line pattern; ``lowercase`` says it runs on ASCII-lowercased bytes."""

    regex: re.Pattern[bytes]
    lowercase: bool
    source: str
    # The default set is plain words, searched as such (see _WordFinder).
    literals: tuple[bytes, ...] = ()

    @classmethod
    def default(cls) -> NotablePattern:
        words = tuple(word.encode() for word in DEFAULT_NOTABLE_PATTERN.split("|"))
        return cls(re.compile(DEFAULT_NOTABLE_PATTERN.encode()), True, "default", words)

    def line_matches(self, line: bytes) -> bool:
        """Is ``line`` (one line, without its newline, already cut to the scan window) notable?"""
        if self.literals:
            lowered = line.lower()
            return any(word in lowered for word in self.literals)
        return self.regex.search(line) is not None

    @classmethod
    def resolve(cls, pattern: str | None, environ: Mapping[str, str]) -> NotablePattern | None:
        """The argument, else ``TOOLSWAP_NOTABLE_PATTERN``, else the default; "" turns it off."""
        if pattern is None:
            pattern = environ.get(NOTABLE_PATTERN_ENV)
            where = f"environment variable {NOTABLE_PATTERN_ENV}"
        else:
            where = "notable_pattern"
        if pattern is None:
            return cls.default()
        if not isinstance(pattern, str):
            raise UsageError(f"{where} must be a string, got {type(pattern).__name__}")
        if not pattern:
            return None
        try:
            regex = re.compile(pattern.encode("utf-8", errors="surrogateescape"), re.MULTILINE)
        except (re.error, OverflowError, RecursionError) as exc:
            # The compiler refuses some patterns by raising more than re.error
            # (a repeat count past its range, groups nested too deep).
            raise UsageError(f"{where} is not a valid regular expression: {exc}") from None
        if regex.search(b""):
            raise UsageError(f"{where} matches the empty line; every line would be notable")
        return cls(regex, False, pattern)


class _WordFinder:
    """Where failure words may start in a chunk: a superset of the lines that hold one.

    The common case is output with no failure word at all, so this is the
    cost every large output pays.  With the ``ahocorasick_rs`` automaton (a
    dependency) one pass over the ASCII-lowercased chunk finds every word at
    once; without it, each word is searched with ``bytes.find``, about ten
    times slower (docs/design.md section 11 has the numbers).  The automaton
    reports leftmost matches without overlap, which is enough here: a word
    hidden by an overlapping match lies on that match's line, and the caller
    checks whole lines.
    """

    _automaton: Any = None
    _loaded = False

    def __init__(self, words: tuple[bytes, ...]) -> None:
        self._words = words
        automaton = _WordFinder._load(words)
        self._find_all: Callable[[bytes], list[tuple[int, int, int]]] | None = (
            None if automaton is None else automaton.find_matches_as_indexes
        )

    @classmethod
    def _load(cls, words: tuple[bytes, ...]) -> Any:
        if not cls._loaded:  # once per process: building it is the cost of an import
            cls._loaded = True
            try:
                import ahocorasick_rs
            except ImportError:  # pragma: no cover - installed with the package
                return None
            cls._automaton = ahocorasick_rs.BytesAhoCorasick(
                DEFAULT_WORDS, matchkind=ahocorasick_rs.MatchKind.LeftmostFirst
            )
        return cls._automaton if words == DEFAULT_WORDS else None

    def starts(self, chunk: bytes, start: int, end: int) -> Callable[[int], int]:
        """``pos ->`` the first candidate at or after ``pos`` in ``[start, end)``, or -1."""
        lowered = chunk.lower()
        if self._find_all is not None:
            hits = [at for _, at, _ in self._find_all(lowered) if start <= at < end]
            index = 0

            def next_hit(pos: int) -> int:
                nonlocal index
                while index < len(hits) and hits[index] < pos:
                    index += 1
                return hits[index] if index < len(hits) else -1

            return next_hit
        memo: dict[bytes, int] = {}  # each word's next occurrence: one find per word and hit

        def next_found(pos: int) -> int:
            best = -1
            for word in self._words:
                at = memo.get(word, -2)
                if at == -2 or (at != -1 and at < pos):
                    at = lowered.find(word, pos, end)
                    memo[word] = at
                if at != -1 and (best == -1 or at < best):
                    best = at
            return best

        return next_found


DEFAULT_WORDS = tuple(word.encode() for word in DEFAULT_NOTABLE_PATTERN.split("|"))


@attrs.frozen(order=True)
class NotableLine:
    start: int  # byte offset where the line starts
    offset: int  # 0-based line offset
    text: str  # clipped to NOTABLE_LINE_BYTES, control characters replaced
    clipped: bool


@attrs.frozen(kw_only=True)
class Preview:
    head: str
    tail: str
    head_end: int  # byte offset where the head stops
    tail_start: int  # byte offset where the tail starts (>= head_end)
    size: int
    line_count: int
    omitted_first_line: int  # 0-based; meaningful only if omitted_bytes > 0
    omitted_first_byte: int  # bytes of omitted_first_line that are in the head
    omitted_line_count: int
    head_lines: int  # lines that start inside the head
    tail_first_line: int  # 0-based line where the tail starts (or resumes)
    tail_first_byte: int  # bytes of tail_first_line that come before the tail
    notable: tuple[NotableLine, ...] = ()
    notable_source: str | None = None

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


class _NotableScanner:
    """Finds notable lines in a stream of chunks, keeping the earliest few.

    A line is notable when :meth:`NotablePattern.line_matches` holds for its
    first ``scan_bytes`` bytes, however the stream was cut into chunks: the
    line that spans chunks is kept (its first ``scan_bytes`` bytes only) and
    checked once it ends; inside a chunk, a fast search over the whole chunk
    names candidate positions and only their lines are checked.
    """

    def __init__(
        self,
        pattern: NotablePattern,
        keep: int,
        head_window: int,
        scan_bytes: int = NOTABLE_SCAN_BYTES,
    ) -> None:
        self._pattern = pattern
        self._words = _WordFinder(pattern.literals) if pattern.literals else None
        self._keep = keep
        self._head_window = head_window
        self._scan = scan_bytes
        self._kept = max(scan_bytes, NOTABLE_LINE_BYTES)  # what a line spanning writes keeps
        self._head_end: int | None = None  # known once the head window is full
        self._early: list[NotableLine] = []  # inside the head window, cut not known yet
        self.found: list[NotableLine] = []  # the earliest lines after the head, in order
        self._partial = bytearray()  # the start of the line that spans chunks (``_kept`` bytes)
        self._partial_length = 0  # that line's length so far (it is kept only in part)
        self._partial_start = 0
        self._partial_line = 0

    @property
    def done(self) -> bool:
        return len(self.found) >= self._keep

    def _add(self, start: int, offset: int, raw: bytes, length: int) -> None:
        text = raw[:NOTABLE_LINE_BYTES].decode("utf-8", errors="replace")
        clipped = length > NOTABLE_LINE_BYTES
        text = _CONTROL.sub(" ", text.rstrip("\r"))
        line = NotableLine(start=start, offset=offset, text=text, clipped=clipped)
        if self._head_end is None and start < self._head_window:
            self._early.append(line)  # at most one per line of the window: bounded
        elif start >= (self._head_end or 0) and len(self.found) < self._keep:
            self.found.append(line)

    def head_cut(self, head_end: int) -> None:
        """The head ends at ``head_end``: keep the window's lines after it, in order."""
        if self._head_end is None:
            self._head_end = head_end
            after = [n for n in self._early if n.start >= head_end]
            self.found = (after + self.found)[: self._keep]
            self._early = []

    def _candidates(self, chunk: bytes, start: int, end: int) -> Callable[[int], int]:
        """``pos ->`` the next position in ``[pos, end)`` where a match may start, or -1."""
        if self._words is not None:
            return self._words.starts(chunk, start, end)
        regex = self._pattern.regex

        def next_match(pos: int) -> int:
            found = regex.search(chunk, pos, end)
            return -1 if found is None else found.start()

        return next_match

    def feed(self, chunk: bytes, position: int, newlines_before: int, newlines: int) -> None:
        """``chunk`` (with ``newlines``) starts at ``position``, after ``newlines_before``."""
        kept = self._kept
        if not newlines:
            room = kept - len(self._partial)
            if room > 0:
                self._partial += chunk[:room]
            self._partial_length += len(chunk)
            return
        first = chunk.find(b"\n")
        pending = bytes(self._partial) + chunk[: max(0, min(first, kept - len(self._partial)))]
        if self._pattern.line_matches(pending[: self._scan]):
            self._add(
                self._partial_start, self._partial_line, pending, self._partial_length + first
            )
        last = chunk.rfind(b"\n")
        if last > first and not self.done:
            self._scan_lines(chunk, first + 1, last, position, newlines_before + 1)
        self._partial = bytearray(chunk[last + 1 : last + 1 + kept])
        self._partial_length = len(chunk) - last - 1
        self._partial_start = position + last + 1
        self._partial_line = newlines_before + newlines

    def _scan_lines(self, chunk: bytes, begin: int, end: int, position: int, line: int) -> None:
        """The whole lines of ``chunk[begin:end]`` (``end``: a newline); ``line``: the first's."""
        next_candidate = self._candidates(chunk, begin, end)
        matches = self._pattern.line_matches
        scan = self._scan
        pos = counted = begin
        while not self.done:
            hit = next_candidate(pos)
            if hit < 0:
                return
            start = chunk.rfind(b"\n", begin, hit) + 1 or begin
            stop = chunk.find(b"\n", hit, end + 1)
            if matches(chunk[start : min(stop, start + scan)]):
                line += chunk.count(b"\n", counted, start)
                counted = start
                self._add(position + start, line, chunk[start:stop], stop - start)
            pos = stop + 1

    def finish(self) -> None:
        partial = bytes(self._partial)
        if partial and not self.done and self._pattern.line_matches(partial[: self._scan]):
            self._add(self._partial_start, self._partial_line, partial, self._partial_length)


class PreviewCollector:
    def __init__(
        self,
        head_bytes: int = HEAD_BYTES,
        tail_bytes: int = TAIL_BYTES,
        *,
        notable: NotablePattern | None = None,
        notable_lines: int = NOTABLE_LINES,
    ) -> None:
        if head_bytes < 64 or tail_bytes < 64:
            raise ValueError("preview windows must be at least 64 bytes")
        if not 0 <= notable_lines <= 50:
            raise ValueError("notable_lines must be between 0 and 50")
        self._head_bytes = head_bytes
        self._tail_bytes = tail_bytes
        self._head = bytearray()
        self._ring: deque[bytes] = deque()
        self._ring_size = 0
        self._size = 0
        self._newlines = 0
        self._last_newline_dropped = -1  # last newline before the ring, absolute
        self._notable_lines = notable_lines
        self._scanner = (
            _NotableScanner(notable, notable_lines, head_bytes + _SLACK)
            if notable is not None and notable_lines
            else None
        )
        self._notable_source = None if notable is None else notable.source

    def feed(self, chunk: bytes, newlines: int | None = None) -> None:
        """The next bytes; ``newlines``: ``chunk.count(b"\\n")`` if the caller counted it."""
        if not chunk:
            return
        if newlines is None:
            newlines = chunk.count(b"\n")
        if self._scanner is not None and not self._scanner.done:
            self._scanner.feed(chunk, self._size, self._newlines, newlines)
        if len(self._head) < self._head_bytes + _SLACK:
            self._head += chunk[: self._head_bytes + _SLACK - len(self._head)]
            if self._scanner is not None and len(self._head) == self._head_bytes + _SLACK:
                self._scanner.head_cut(self._head_cut(bytes(self._head), self._size + len(chunk)))
        self._ring.append(chunk)
        self._ring_size += len(chunk)
        cap = self._tail_bytes + _SLACK
        while self._ring_size - len(self._ring[0]) >= cap:
            dropped = self._ring.popleft()
            newline = dropped.rfind(b"\n")
            if newline >= 0:
                self._last_newline_dropped = self._size + len(chunk) - self._ring_size + newline
            self._ring_size -= len(dropped)
        self._size += len(chunk)
        self._newlines += newlines

    def _head_cut(self, head_buf: bytes, size: int) -> int:
        """Where the head ends: whole lines if that keeps half the window, else a character cut.

        The cut depends only on the first ``head_bytes + _SLACK`` bytes, so the
        notable-line scanner learns it as soon as those have streamed past.
        """
        if size <= self._head_bytes:
            head_end = size
        else:
            newline = head_buf.rfind(b"\n", 0, self._head_bytes)
            if newline + 1 >= self._head_bytes // 2:
                head_end = newline + 1
            else:
                head_end = char_boundary(head_buf, self._head_bytes)
        return _decode_bounded(head_buf[:head_end], self._head_bytes, keep_start=True)[1]

    def finish(self) -> Preview:
        size = self._size
        head_buf = bytes(self._head)
        ring = b"".join(self._ring)
        ring_start = size - len(ring)

        def byte_at(position: int) -> int:
            if position < len(head_buf):
                return head_buf[position]
            return ring[position - ring_start]

        # 1. the head (depends only on the first head_bytes + _SLACK bytes)
        head_end = self._head_cut(head_buf, size)
        # 2. notable lines of the omitted part take their room from the tail
        notable: list[NotableLine] = []
        if self._scanner is not None:
            self._scanner.finish()
            self._scanner.head_cut(head_end)
            floor = size - self._tail_bytes
            notable = [n for n in self._scanner.found if n.start < floor]
        tail_budget = max(64, self._tail_bytes - len(render_notable(notable, "").encode()))
        # 3. the tail: from a line start if that keeps half the window, else a character cut
        tail_start = max(head_end, size - tail_budget)
        if tail_start > head_end and byte_at(tail_start - 1) != 0x0A:
            newline = ring.find(b"\n", tail_start - ring_start)
            if 0 <= newline < len(ring) - 1 and ring_start + newline + 1 - tail_start <= (
                tail_budget // 2
            ):
                tail_start = ring_start + newline + 1
            else:
                for _ in range(3):
                    if tail_start < size and _is_continuation(byte_at(tail_start)):
                        tail_start += 1
        head_text, head_end = _decode_bounded(
            head_buf[:head_end], self._head_bytes, keep_start=True
        )
        tail_text, used = _decode_bounded(
            ring[tail_start - ring_start :], tail_budget, keep_start=False
        )
        tail_start = size - used
        notable = [n for n in notable if n.start < tail_start]
        # 4. line offsets of the cuts
        head_newlines = head_buf[:head_end].count(b"\n")
        head_line_start = head_buf.rfind(b"\n", 0, head_end) + 1
        tail_newlines = ring[tail_start - ring_start :].count(b"\n")
        newlines_before_tail = self._newlines - tail_newlines
        before = ring.rfind(b"\n", 0, tail_start - ring_start)
        if before >= 0:
            tail_line_start = ring_start + before + 1
        elif ring_start > 0:
            tail_line_start = self._last_newline_dropped + 1
        else:
            tail_line_start = 0
        line_count = self._newlines + (1 if size and byte_at(size - 1) != 0x0A else 0)
        if tail_start > head_end:
            first = head_newlines
            last = newlines_before_tail - (1 if tail_start == tail_line_start else 0)
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
            omitted_first_byte=head_end - head_line_start,
            omitted_line_count=omitted_lines,
            head_lines=head_newlines + (1 if head_end and head_buf[head_end - 1] != 0x0A else 0),
            tail_first_line=newlines_before_tail,
            tail_first_byte=tail_start - tail_line_start,
            notable=tuple(notable),
            notable_source=self._notable_source,
        )


def _n(value: int) -> str:
    return f"{value:,}"


def render_notable(notable: list[NotableLine] | tuple[NotableLine, ...], source: str | None) -> str:
    """The notable-lines block (empty when there are none); its size is bounded."""
    if not notable:
        return ""
    pattern = "failure words" if source in (None, "", "default") else "TOOLSWAP_NOTABLE_PATTERN"
    rows = [f"--- notable lines in the omitted part ({pattern}; offset: text) ---\n"]
    for line in notable:
        rows.append(f"{line.offset}: {line.text}{' [...]' if line.clipped else ''}\n")
    return "".join(rows)


def read_hint(source_id: str, offset: int, byte: int, page_bytes: int, *, form: str = "cli") -> str:
    """How to read the omitted part, as the marker says it.

    ``form="cli"`` names the command and the library call; ``form="mcp"``
    names the MCP server's tool call, the id quoted so that nothing around
    it can be taken for part of it.
    """
    if form == "mcp":
        call = f'read_artifact(source_id="{source_id}", offset={offset}'
        call += f", start_byte={byte})" if byte else ")"
        return f"{call}; each page is at most {_n(page_bytes)} bytes and names the next read"
    if form != "cli":
        raise UsageError(f"form must be 'cli' or 'mcp', got {form!r}")
    command = f"toolswap read {source_id} --offset {offset}"
    call = f"read_page(offset={offset}"
    if byte:
        command += f" --byte {byte}"
        call += f", start_byte={byte}"
    return (
        f"`{command}` or {call}); each page is at most {_n(page_bytes)} bytes "
        "and names the next read"
    )


def render_pointer(
    preview: Preview,
    *,
    source_id: str,
    summary: str,
    source_tool: str,
    content_sha256: str,
    path: str,
    page_bytes: int = DEFAULT_PAGE_BYTES,
) -> str:
    """The context text for an externalized output (line numbers are 0-based offsets)."""
    last_line = max(preview.line_count - 1, 0)
    lines = [
        f"[toolswap] {source_tool} output externalized: "
        f"{_n(preview.size)} bytes, {_n(preview.line_count)} lines "
        f"(line offsets 0-{_n(last_line)}, as `toolswap read --offset` takes them).",
        f"source_id: {source_id}",
        f"summary: {summary}",
        f"sha256: {content_sha256}",
        f"path: {path}",
    ]
    head_note = f"{_n(preview.head_end)} bytes"
    if preview.omitted_bytes > 0 and preview.omitted_first_byte:
        head_note += (
            f"; cut inside line {_n(preview.omitted_first_line)} "
            f"after {_n(preview.omitted_first_byte)} bytes of it"
        )
    lines.append(f"--- head: {head_note} ---")
    text = "\n".join(lines) + "\n" + preview.head
    if preview.head and not preview.head.endswith("\n"):
        text += "\n"
    if preview.omitted_bytes > 0:
        first = preview.omitted_first_line
        count = preview.omitted_line_count
        last = first + count - 1
        where = f"line offset {_n(first)}" if count == 1 else f"line offsets {_n(first)}-{_n(last)}"
        if preview.omitted_first_byte:
            where += f" (from byte {_n(preview.omitted_first_byte)} of line {_n(first)})"
        text += (
            f"--- omitted: {where} ({_n(count)} line{'' if count == 1 else 's'}), "
            f"bytes {_n(preview.head_end)}-"
            f"{_n(preview.tail_start)} ({_n(preview.omitted_bytes)} bytes); read them with "
            f"{read_hint(source_id, first, preview.omitted_first_byte, page_bytes)} ---\n"
        )
    else:
        text += "--- omitted: nothing (0 lines, 0 bytes) ---\n"
    text += render_notable(preview.notable, preview.notable_source)
    tail_note = f"{_n(preview.size - preview.tail_start)} bytes"
    if preview.omitted_bytes > 0 and preview.tail_first_byte:
        tail_note += (
            f"; starts inside line {_n(preview.tail_first_line)} "
            f"at byte {_n(preview.tail_first_byte)} of it"
        )
    text += f"--- tail: {tail_note} ---\n" + preview.tail
    if preview.tail and not preview.tail.endswith("\n"):
        text += "\n"
    text += "--- end of pointer ---\n"
    return text
