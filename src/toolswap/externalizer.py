"""Externalization: large tool output becomes an artifact plus a bounded pointer.

Commit order of one externalization (each step through the file-system seam):

1. Validate the tool name and the caller's summary (nothing is written yet).
2. Stream the output; below the threshold it goes to the context unchanged.
3. Over the threshold, reserve ``tool-results/tool_result_NNN.txt`` by
   exclusive create (mode 0600), under the session lock.  ``NNN`` comes from
   the durable high-water mark (:mod:`toolswap.high_water`), so no name is
   ever reused, not even one that cleanup has deleted (S6).  Still under
   that lock, take the **writer's mark**: an exclusive ``flock`` on the new
   file, held until step 5 is done.  Cleanup keeps a marked file
   (``retained_writing``), however old its last write (S1.writing).
4. Write every byte while hashing, indexing lines and keeping head and tail.
5. Set the file's mtime to now (its age counts from completion), fsync the
   file, then fsync the directory, close (dropping the mark); only then
   return the reference.

A failure in 3-5 removes the never-referenced file and raises
:class:`ArtifactWriteError` (``__cause__`` is the OSError).

``read_artifact`` is the page fault: the path comes from the source id (never
from a stored path), the file must be a regular file owned by us and not a
symlink, and its digest is verified before any byte is returned.  A
verification is reused while the file's identity is unchanged, and the
identity is compared again after the bytes are read: bytes read while it
moved (a rewrite in place) are never returned, the file is verified again.

Which digest a read checks:

* a reference (``ArtifactReference``, ``ArtifactMemoryReference``) carries the
  full SHA-256, and the file must have exactly it;
* a bare source id carries only 12 hex digits (48 bits).  The session's lease
  journal may know more: every claim (any phase) and every CONFLICT identity
  names a source id with a full digest (:class:`_JournalDigests`).  If that
  evidence names one full digest for the id, the file must have it; if it
  names two, the read refuses with :class:`CorruptStateError` (S6: a name is
  bound to one content); if it names none, only the 48-bit prefix is checked.
  The externalizer keeps no sidecar next to an artifact, so the journal is the
  only durable record of a full digest.  After a compaction the evidence is
  the live state (the last snapshot's leases and the tail); a settled lease's
  claim is in the archive only, and a bare id it alone named is checked by its
  prefix (docs/design.md section 5, "Compaction").
* a journal that is missing, corrupt or cannot be read does not block a read
  of an intact artifact: the file is still verified, against what was verified
  of the journal before, else against the id's prefix.  Evidence can only add
  a refusal, never let a file through that the prefix check refuses.
"""

from __future__ import annotations

import codecs
import contextlib
import functools
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from .domain import (
    ArtifactMemoryReference,
    ArtifactReference,
    ArtifactSource,
    artifact_filename,
    artifact_number,
    format_source_id,
    is_artifact_filename,
    parse_source_id,
    validate_sha256,
)
from .errors import (
    ArtifactIntegrityError,
    ArtifactNotOwnedError,
    ArtifactWriteError,
    CorruptStateError,
    EnvironmentFailure,
    InvalidSummary,
    InvalidThreshold,
    UsageError,
)
from .fs import REAL_FS, FileFacts, FileSystem
from .high_water import ArtifactHighWaterMark
from .line_index import LineIndex, LineIndexBuilder
from .pointer import (
    HEAD_BYTES,
    NOTABLE_LINES,
    TAIL_BYTES,
    NotablePattern,
    PreviewCollector,
    render_pointer,
)
from .reading import (
    DEFAULT_PAGE_LINES,
    ArtifactInfo,
    GrepMatch,
    GrepResult,
    Page,
    char_boundary,
    page_bytes_from_env,
    validate_page_bytes,
)
from .session import SessionPaths
from .verified_record import VerifiedRecord

if TYPE_CHECKING:
    from .artifact_grep import WindowedFile
    from .cleanup import ArtifactCleanupPolicy, CleanupPlan, CleanupReport
    from .domain import ArtifactRetentionClaim
    from .journal import ArtifactRetentionJournal, Recovery
    from .owner import ArtifactReferenceOwner

__all__ = [
    "ToolResultExternalizer",
    "ExternalizationResult",
    "BASH_THRESHOLD_CHARS",
    "DEFAULT_THRESHOLD_BYTES",
    "MAX_SUMMARY_CHARS",
]

BASH_THRESHOLD_CHARS = 30_000
DEFAULT_THRESHOLD_BYTES = 50 * 1024
MAX_SUMMARY_CHARS = 240
BASH_ENV = "BASH_MAX_OUTPUT_LENGTH"
THRESHOLD_ENV = "TOOL_RESULT_THRESHOLD_KB"
_CHUNK = 1024 * 1024
_TOOL_RE = re.compile(r"[A-Za-z0-9_.:/@+-]{1,128}")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]")
_MAX_RESERVE_ATTEMPTS = 100_000
_MAX_THRESHOLD_BYTES = 1 << 50  # 1 PiB: any larger threshold is a typo, not a setting
_READ_ATTEMPTS = 3  # verifications per read of a file whose identity keeps moving
_T = TypeVar("_T")

Output = str | bytes | bytearray | memoryview | Iterable[bytes]


@attrs.frozen(kw_only=True)
class ExternalizationResult:
    """``context_text`` goes into the context; ``artifact`` is None below the threshold."""

    context_text: str
    artifact: ArtifactReference | None

    @property
    def externalized(self) -> bool:
        return self.artifact is not None


@attrs.frozen
class _Verified:
    identity: tuple[int, int, int, int, int]
    sha256: str
    index: LineIndex


def _positive_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidThreshold(f"{name} must be a positive integer, got {value!r}")
    return value


def _env_threshold(environ: Mapping[str, str], name: str, *, kib: bool) -> int | None:
    raw = environ.get(name)
    if raw is None:
        return None
    text = raw.strip()
    try:
        number = float(text) if kib else int(text)
    except ValueError:
        number = -1
    limit = _MAX_THRESHOLD_BYTES / 1024 if kib else _MAX_THRESHOLD_BYTES
    if not 0 < number <= limit:  # also refuses nan, inf and 1e308 (int(1e308 * 1024) overflows)
        raise InvalidThreshold(
            f"environment variable {name}={raw!r} is not a positive "
            f"{'number of KiB' if kib else 'integer'} of at most {limit:,.0f}"
        )
    return max(1, int(number * 1024)) if kib else int(number)


def _chunks(output: Output) -> Iterator[bytes]:
    """Normalize any accepted output to byte chunks of at most 1 MiB."""
    if isinstance(output, str):
        for start in range(0, len(output), _CHUNK):
            piece = output[start : start + _CHUNK]
            try:
                yield piece.encode("utf-8", errors="surrogateescape")
            except UnicodeEncodeError:
                yield piece.encode("utf-8", errors="surrogatepass")
        return
    if isinstance(output, bytes | bytearray | memoryview):
        view = memoryview(output)
        for start in range(0, len(view), _CHUNK):
            yield bytes(view[start : start + _CHUNK])
        return
    try:
        iterator = iter(output)
    except TypeError:
        raise UsageError(
            f"output must be str, bytes or an iterable of bytes, got {type(output).__name__}"
        ) from None
    for chunk in iterator:
        if isinstance(chunk, str):
            chunk = chunk.encode("utf-8", errors="surrogateescape")
        elif not isinstance(chunk, bytes | bytearray | memoryview):
            raise UsageError(f"output chunks must be bytes, got {type(chunk).__name__}")
        data = bytes(chunk)
        for start in range(0, len(data), _CHUNK):
            yield data[start : start + _CHUNK]


def _validate_summary(summary: object) -> str | None:
    if summary is None:
        return None
    if not isinstance(summary, str):
        raise InvalidSummary(f"summary must be a string, got {type(summary).__name__}")
    text = summary.strip()
    if not text:
        raise InvalidSummary("summary is blank")
    if len(text) > MAX_SUMMARY_CHARS:
        raise InvalidSummary(f"summary is {len(text)} characters; the limit is {MAX_SUMMARY_CHARS}")
    if _CONTROL_RE.search(text):
        raise InvalidSummary("summary must be one line without control characters")
    return text


def _derive_summary(head: str, size: int, line_count: int) -> str:
    first = next((line.strip() for line in head.split("\n") if line.strip()), "")
    first = _CONTROL_RE.sub(" ", first)
    if len(first) > 120:
        first = first[:117] + "..."
    facts = f"({size:,} bytes, {line_count:,} lines)"
    return f"{first} {facts}" if first else f"output without text in its head {facts}"


class ToolResultExternalizer:
    """Externalize tool output into ``<session_dir>/tool-results``; see the module rules."""

    def __init__(
        self,
        session_dir: str | os.PathLike[str],
        *,
        session_id: str | None = None,
        fs: FileSystem = REAL_FS,
        clock: Callable[[], float] = time.time,
        bash_threshold_chars: int | None = None,
        threshold_bytes: int | None = None,
        head_bytes: int = HEAD_BYTES,
        tail_bytes: int = TAIL_BYTES,
        environ: Mapping[str, str] | None = None,
        page_bytes: int | None = None,
        notable_pattern: str | None = None,
        notable_lines: int = NOTABLE_LINES,
    ) -> None:
        env = os.environ if environ is None else environ
        self.paths = SessionPaths.at(session_dir, session_id)
        self._fs = fs
        self._clock = clock
        self.bash_threshold_chars = (
            _positive_int(bash_threshold_chars, "bash_threshold_chars")
            if bash_threshold_chars is not None
            else _env_threshold(env, BASH_ENV, kib=False) or BASH_THRESHOLD_CHARS
        )
        self.threshold_bytes = (
            _positive_int(threshold_bytes, "threshold_bytes")
            if threshold_bytes is not None
            else _env_threshold(env, THRESHOLD_ENV, kib=True) or DEFAULT_THRESHOLD_BYTES
        )
        self.page_bytes = (
            page_bytes_from_env(env)
            if page_bytes is None
            else validate_page_bytes(page_bytes, "page_bytes")
        )
        self._notable = NotablePattern.resolve(notable_pattern, env)
        self._notable_lines = notable_lines
        # validates the window sizes and the notable-line count
        try:
            PreviewCollector(head_bytes, tail_bytes, notable_lines=notable_lines)
        except (ValueError, TypeError) as exc:
            raise UsageError(str(exc)) from None
        self._head_bytes = head_bytes
        self._tail_bytes = tail_bytes
        self._high_water = ArtifactHighWaterMark(self.paths, fs)
        self._verified: dict[str, _Verified] = {}
        self._cache_lock = threading.Lock()
        self._journal_digests = _JournalDigests(self.paths, fs)
        self._record = VerifiedRecord(self.paths, fs)
        self._states_lock = threading.Lock()
        self._states_journal: ArtifactRetentionJournal | None = None
        self._states: tuple[tuple[int, str], dict[str, str]] | None = None

    @property
    def session_id(self) -> str:
        return self.paths.session_id

    @property
    def tool_results_dir(self) -> str:
        return self.paths.tool_results

    # -- writing -----------------------------------------------------------------

    def externalize(
        self, output: Output, tool: str = "bash", summary: str | None = None
    ) -> ExternalizationResult:
        """Return the context text for ``output``; over the threshold, write an artifact."""
        if not isinstance(tool, str) or not _TOOL_RE.fullmatch(tool):
            raise UsageError(f"invalid tool name {tool!r}: want 1-128 of [A-Za-z0-9_.:/@+-]")
        chosen_summary = _validate_summary(summary)
        chunks = _chunks(output)
        buffered: list[bytes] = []
        over = self._buffer_until_threshold(chunks, tool, buffered)
        if not over:
            if isinstance(output, str):
                return ExternalizationResult(context_text=output, artifact=None)
            text = b"".join(buffered).decode("utf-8", errors="replace")
            return ExternalizationResult(context_text=text, artifact=None)
        return self._write_artifact(buffered, chunks, tool, chosen_summary)

    def should_externalize(
        self, output: str | bytes | bytearray | memoryview, tool_name: str = "bash"
    ) -> bool:
        """Would :meth:`externalize` write an artifact for ``output``?  Writes nothing.

        The same rule as :meth:`externalize` (characters for ``bash``, bytes
        for other tools).  Only whole values are accepted: asking about a
        stream would consume it.
        """
        if not isinstance(tool_name, str) or not _TOOL_RE.fullmatch(tool_name):
            raise UsageError(f"invalid tool name {tool_name!r}: want 1-128 of [A-Za-z0-9_.:/@+-]")
        if not isinstance(output, str | bytes | bytearray | memoryview):
            raise UsageError(
                "should_externalize takes a str or bytes-like value, not "
                f"{type(output).__name__}: asking about a stream would consume it"
            )
        return self._buffer_until_threshold(_chunks(output), tool_name, [])

    def _buffer_until_threshold(
        self, chunks: Iterator[bytes], tool: str, buffered: list[bytes]
    ) -> bool:
        """Buffer at most one threshold's worth; True once the output exceeds it."""
        size = 0
        if tool == "bash":
            decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
            chars = 0
            for chunk in chunks:
                buffered.append(chunk)
                chars += len(decoder.decode(chunk))
                if chars > self.bash_threshold_chars:
                    return True
            return chars + len(decoder.decode(b"", final=True)) > self.bash_threshold_chars
        for chunk in chunks:
            buffered.append(chunk)
            size += len(chunk)
            if size > self.threshold_bytes:
                return True
        return False

    def _reserve(self) -> tuple[str, str, int]:
        fs = self._fs
        directory = self.paths.tool_results
        try:
            fs.makedirs(directory)
            facts = fs.lstat(directory)
        except OSError as exc:
            raise EnvironmentFailure(f"cannot create {TOOL_RESULTS_NAME}: {exc}") from exc
        if facts.is_symlink or not facts.is_dir:
            raise ArtifactNotOwnedError(f"{TOOL_RESULTS_NAME} is not a real directory (S7)")
        try:
            names = fs.listdir(directory)
        except OSError as exc:
            raise EnvironmentFailure(f"cannot list {TOOL_RESULTS_NAME}: {exc}") from exc
        on_disk = max((artifact_number(n) for n in names if is_artifact_filename(n)), default=0)
        try:
            with self.paths.session_lock(fs):
                return self._reserve_locked(directory, on_disk)
        except OSError as exc:
            raise EnvironmentFailure(f"cannot take the session lock: {exc}") from exc

    def _reserve_locked(self, directory: str, on_disk: int) -> tuple[str, str, int]:
        number = on_disk
        for _ in range(_MAX_RESERVE_ATTEMPTS):
            # S6: the mark is durable before the name exists, so a name that
            # cleanup later deletes is still never handed out again.
            number = self._high_water.advance(number)
            filename = artifact_filename(number)
            path = os.path.join(directory, filename)
            try:
                handle = self._fs.create_exclusive(path, 0o600)
            except FileExistsError:
                continue  # written by a process that bypassed the mark; skip it
            except OSError as exc:
                raise ArtifactWriteError(f"cannot create {filename}: {exc}") from exc
            try:
                # The writer's mark, taken before the session lock is released:
                # cleanup (which re-validates under that lock) never sees this
                # file unmarked while it is written (S1.writing).
                self._fs.flock(handle)
            except OSError as exc:
                self._discard(path, handle, closed=False)
                raise ArtifactWriteError(f"cannot mark {filename} as being written: {exc}") from exc
            return filename, path, handle
        raise ArtifactWriteError("no free artifact name")  # pragma: no cover

    def _write_artifact(
        self,
        buffered: list[bytes],
        rest: Iterator[bytes],
        tool: str,
        summary: str | None,
    ) -> ExternalizationResult:
        import datetime  # the write path's own imports: a page read never needs them

        from .stream_hash import StreamSha256

        fs = self._fs
        filename, path, handle = self._reserve()
        fs.crash_point("externalize.after_create")
        digest = StreamSha256()
        index = LineIndexBuilder()
        preview = PreviewCollector(
            self._head_bytes,
            self._tail_bytes,
            notable=self._notable,
            notable_lines=self._notable_lines,
        )
        closed = False
        try:
            for source in (buffered, rest):
                for chunk in source:
                    fs.write(handle, chunk)
                    digest.update(chunk)
                    newlines = chunk.count(b"\n")  # once, for the index and the preview
                    index.feed(chunk, newlines)
                    preview.feed(chunk, newlines)
                buffered = []  # let the first threshold's worth go
            # Its age starts when it is complete: a command that went quiet
            # for longer than the orphan TTL still leaves a fresh artifact.
            fs.touch(handle)
            fs.crash_point("externalize.before_fsync")
            fs.fsync(handle)
            facts = fs.fstat(handle)
            fs.crash_point("externalize.before_dir_fsync")
            fs.fsync_dir(self.paths.tool_results)
            # Closing drops the writer's mark, only once the name is durable.
            closed = True
            fs.close(handle)
        except (Exception, KeyboardInterrupt) as exc:
            digest.close()
            self._discard(path, handle, closed)
            if isinstance(exc, OSError):
                raise ArtifactWriteError(
                    f"writing {filename} failed and it was removed: {exc}"
                ) from exc
            raise
        except BaseException:
            digest.close()  # a simulated crash or an exit: no helper thread left waiting
            raise
        sha256 = digest.hexdigest()
        line_index = index.finish()
        shown = preview.finish()
        source_id = format_source_id(self.session_id, filename, sha256)
        final_summary = summary or _derive_summary(shown.head, shown.size, shown.line_count)
        captured = datetime.datetime.fromtimestamp(self._clock(), datetime.UTC)
        reference = ArtifactReference(
            source=ArtifactSource(
                source_id=source_id,
                title=f"{tool} output",
                captured_at=captured.isoformat(timespec="seconds"),
            ),
            path=path,
            summary=final_summary,
            source_tool=tool,
            content_sha256=sha256,
            size_bytes=shown.size,
            line_count=line_index.line_count,
        )
        with self._cache_lock:
            self._verified[path] = _Verified(facts.identity, sha256, line_index)
        text = render_pointer(
            shown,
            source_id=source_id,
            summary=final_summary,
            source_tool=tool,
            content_sha256=sha256,
            path=path,
            page_bytes=self.page_bytes,
        )
        return ExternalizationResult(context_text=text, artifact=reference)

    def _discard(self, path: str, handle: int, closed: bool) -> None:
        """Remove a never-referenced artifact after a failed write (best effort)."""
        fs = self._fs
        if not closed:
            with contextlib.suppress(OSError):
                fs.close(handle)
        try:
            fs.unlink(path)
            fs.fsync_dir(self.paths.tool_results)
        except OSError:
            pass  # cleanup plans report it; nothing references it

    # -- the page fault ----------------------------------------------------------

    def read_artifact(
        self,
        ref: ArtifactReference | ArtifactMemoryReference | str,
        offset: int = 0,
        limit: int = DEFAULT_PAGE_LINES,
        *,
        max_bytes: int | None = None,
    ) -> str:
        """The text of :meth:`read_page` (lines from ``offset``, 0-based, capped in bytes)."""
        return self.read_page(ref, offset, limit, max_bytes=max_bytes).text

    def read_page(
        self,
        ref: ArtifactReference | ArtifactMemoryReference | str,
        offset: int = 0,
        limit: int = DEFAULT_PAGE_LINES,
        *,
        max_bytes: int | None = None,
        start_byte: int = 0,
    ) -> Page:
        """Up to ``limit`` lines from line ``offset`` (byte ``start_byte`` of it), capped in bytes.

        See :mod:`toolswap.reading` for the page rules.  The artifact is
        verified first; the read costs one index stride plus the page, and one
        ``fstat`` to see that the file did not move while it was read.
        """
        _require_index(offset, "offset", minimum=0)
        _require_index(limit, "limit", minimum=1)
        _require_index(start_byte, "start_byte", minimum=0)
        cap = self.page_bytes if max_bytes is None else validate_page_bytes(max_bytes)

        def window(
            pread: Callable[[int, int], bytes], index: LineIndex, handle: int
        ) -> tuple[int, bytes]:
            total = index.line_count
            if offset > 0 and offset >= total:
                raise UsageError(f"offset {offset} is past the end: the artifact has {total} lines")
            line_start = index.line_start(offset, pread)
            if start_byte:
                line_end = index.line_start(offset + 1, pread)
                if start_byte >= line_end - line_start:
                    raise UsageError(
                        f"start_byte {start_byte} is past the end of line {offset} "
                        f"({line_end - line_start} bytes)"
                    )
            start = line_start + start_byte
            return start, _pread_full(pread, cap, start, index.size)

        source_id, index, (start, data) = self._read_verified(ref, "reading", window)
        return _cut_page(
            data,
            source_id=source_id,
            offset=offset,
            limit=limit,
            cap=cap,
            start=start,
            start_byte=start_byte,
            index=index,
        )

    def grep_artifact(
        self,
        ref: ArtifactReference | ArtifactMemoryReference | str,
        pattern: str,
        *,
        fixed: bool = False,
        ignore_case: bool = False,
        context: int = 0,
        max_matches: int = 100,
        max_bytes: int | None = None,
        offset: int = 0,
        time_limit: float | None = None,
    ) -> GrepResult:
        """Lines matching ``pattern`` from line ``offset`` (rules: :mod:`toolswap.artifact_grep`).

        The artifact is verified first; the scan streams in bounded memory and
        stops at ``max_matches`` or when the rendered output would pass
        ``max_bytes`` (default: the page cap), reporting where to resume.  A
        regex search that runs past ``time_limit`` seconds (default
        :data:`toolswap.artifact_grep.TIME_LIMIT`) is refused with
        :class:`~toolswap.errors.InvalidPattern`.
        """
        from . import artifact_grep

        _require_index(offset, "offset", minimum=0)
        _require_index(context, "context", minimum=0)
        _require_index(max_matches, "max_matches", minimum=1)
        if context > artifact_grep.MAX_CONTEXT:
            raise UsageError(f"context must be at most {artifact_grep.MAX_CONTEXT}, got {context}")
        cap = self.page_bytes if max_bytes is None else validate_page_bytes(max_bytes)
        limit = artifact_grep.TIME_LIMIT if time_limit is None else time_limit
        if isinstance(limit, bool) or not isinstance(limit, int | float) or not 0 < limit <= 3600:
            raise UsageError(f"time_limit must be a number of seconds in (0, 3600], got {limit!r}")
        searcher = artifact_grep.Searcher.build(pattern, fixed=fixed, ignore_case=ignore_case)

        def search(
            pread: Callable[[int, int], bytes], index: LineIndex, handle: int
        ) -> tuple[list[GrepMatch], int | None]:
            total = index.line_count
            if offset > 0 and offset >= total:
                raise UsageError(f"offset {offset} is past the end: the artifact has {total} lines")
            with self._mapped(handle, index, searcher) as buffer:
                skipper = (
                    None
                    if buffer is None or searcher.needle is None
                    else artifact_grep.Skipper(buffer, searcher.needle, index, context)
                )
                return artifact_grep.scan(
                    pread,
                    start=index.line_start(offset, pread),
                    size=index.size,
                    first_line=offset,
                    searcher=searcher,
                    context=context,
                    max_matches=max_matches,
                    max_bytes=cap,
                    skipper=skipper,
                    time_limit=limit,
                )

        source_id, index, (matches, next_offset) = self._read_verified(ref, "searching", search)
        total = index.line_count
        return GrepResult(
            source_id=source_id,
            pattern=pattern,
            fixed=bool(fixed),
            ignore_case=bool(ignore_case),
            context=context,
            matches=tuple(matches),
            total_lines=total,
            start_offset=offset,
            truncated=next_offset is not None,
            next_offset=next_offset,
            max_matches=max_matches,
            max_bytes=cap,
        )

    @contextlib.contextmanager
    def _mapped(
        self, handle: int, index: LineIndex, searcher: Any
    ) -> Iterator[WindowedFile | None]:
        """The verified file as one buffer for a fixed-string search; None if unused."""
        from .artifact_grep import WindowedFile  # grep's module loads only when grep runs

        if searcher.needle is None or not searcher.needle or index.size == 0:
            yield None
            return
        fs = self._fs

        def pread(size: int, at: int) -> bytes:
            return fs.pread(handle, size, at)

        buffer = WindowedFile(pread, index.size)
        try:
            yield buffer
        finally:
            buffer.close()

    def stat_artifact(self, ref: ArtifactReference | ArtifactMemoryReference | str) -> ArtifactInfo:
        """Size, lines, mtime and lease state of one verified artifact."""
        source_id, path, expected, origin = self._expected(ref)
        handle, index = self._open_verified(path, source_id, expected, origin)
        try:
            facts = self._fs.fstat(handle)
        except OSError as exc:
            raise EnvironmentFailure(f"cannot inspect {source_id}: {exc}") from exc
        finally:
            self._fs.close(handle)
        states = self._lease_states()
        return ArtifactInfo(
            source_id=source_id,
            name=os.path.basename(path),
            size=index.size,
            line_count=index.line_count,
            mtime=facts.mtime_ns / 1e9,
            lease_state=states.get(os.path.basename(path)),
        )

    def list_artifacts(self) -> list[ArtifactInfo]:
        """Every artifact file of the session, by name; foreign entries are skipped.

        An entry is listed only if it is an artifact name and a regular file
        of ours with one link (checked before and after a non-blocking open);
        anything else in ``tool-results/`` is someone else's and left alone.
        Listing hashes each artifact (its source id carries the digest);
        verifications are cached per file identity.
        """
        fs = self._fs
        directory = self.paths.tool_results
        try:
            facts = fs.lstat(directory)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise EnvironmentFailure(f"cannot inspect {TOOL_RESULTS_NAME}: {exc}") from exc
        if facts.is_symlink or not facts.is_dir:
            raise ArtifactNotOwnedError(f"{TOOL_RESULTS_NAME} is not a real directory (S7)")
        try:
            names = fs.listdir(directory)
        except OSError as exc:
            raise EnvironmentFailure(f"cannot list {TOOL_RESULTS_NAME}: {exc}") from exc
        states = self._lease_states()
        infos: list[ArtifactInfo] = []
        for name in names:
            if not is_artifact_filename(name):
                continue
            path = os.path.join(directory, name)
            try:
                handle, identity, sha256, index, _ = self._open_owned(path, name)
            except (ArtifactNotOwnedError, ArtifactIntegrityError):
                continue  # not ours (or changing under us): never listed, never touched
            self._fs.close(handle)
            infos.append(
                ArtifactInfo(
                    source_id=format_source_id(self.session_id, name, sha256),
                    name=name,
                    size=index.size,
                    line_count=index.line_count,
                    mtime=identity[3] / 1e9,
                    lease_state=states.get(name),
                )
            )
        return infos

    def _lease_states(self) -> dict[str, str]:
        """Artifact file name -> the strongest phase of the leases naming it (from the journal).

        The journal object is kept: the first call verifies the whole journal,
        later ones only what was appended since (the journal refreshes
        incrementally under the session lock, and verifies again in full if
        the file was replaced).  The answer is kept too, until a record is
        added.  A journal found corrupt is dropped, so that one restored later
        is verified afresh.
        """
        from .journal import ArtifactRetentionJournal
        from .spec.lease import LeaseState

        with self._states_lock:
            journal = self._states_journal
            if journal is None:
                journal = ArtifactRetentionJournal(
                    self.paths.root, fs=self._fs, session_id=self.session_id
                )
            if not journal.exists():
                self._states_journal, self._states = None, None
                return {}
            self._states_journal = journal
            try:
                with journal.locked_state() as state:
                    key = (state.record_count, state.last_sha256)
                    if self._states is not None and self._states[0] == key:
                        return dict(self._states[1])
                    states = LeaseState
                    rank = {
                        states.PREPARED: 4,
                        states.COMMITTED: 3,
                        states.RELEASED: 2,
                        states.ABORTED: 1,
                    }
                    best: dict[str, LeaseState] = {}
                    for txn, phase in state.states.items():
                        name = parse_source_id(state.transactions[txn].source_id).filename
                        if name not in best or rank[phase] > rank[best[name]]:
                            best[name] = phase
            except CorruptStateError:
                self._states_journal, self._states = None, None
                raise
            answer = {name: phase.value for name, phase in best.items()}
            self._states = (key, answer)
            return dict(answer)

    def verify_artifact(self, ref: ArtifactReference | ArtifactMemoryReference | str) -> LineIndex:
        """Check ownership, type and digest; return the artifact's line index."""
        source_id, path, expected, origin = self._expected(ref)
        handle, index = self._open_verified(path, source_id, expected, origin)
        self._fs.close(handle)
        return index

    def _expected(
        self, ref: ArtifactReference | ArtifactMemoryReference | str
    ) -> tuple[str, str, str, str | None]:
        """(source id, path, the digest the file must have, the journal entry it comes from).

        The last is None unless a bare id's full digest came from the journal
        (module docstring: which digest a read checks).
        """
        source_id, expected = _expected_digest(ref)
        path = self.paths.path_for_source(source_id)  # refuses a foreign id before any lookup
        if not isinstance(ref, str):
            return source_id, path, expected, None
        recorded = self._journal_digests.for_source(source_id)
        if len(recorded) > 1:
            listing = "; ".join(f"{digest} ({where})" for digest, where in sorted(recorded.items()))
            raise CorruptStateError(
                f"the lease journal records {len(recorded)} different full digests for "
                f"{source_id}: {listing}; an artifact name is bound to one content (S6), "
                f"so the file cannot be checked against them (fail closed)"
            )
        if recorded:
            ((digest, where),) = recorded.items()
            return source_id, path, digest, where
        return source_id, path, expected, None

    def _read_verified(
        self,
        ref: ArtifactReference | ArtifactMemoryReference | str,
        action: str,
        body: Callable[[Callable[[int, int], bytes], LineIndex, int], _T],
    ) -> tuple[str, LineIndex, _T]:
        """``body(pread, index, handle)`` on the verified file; only what it read unmoved counts.

        A verification is reused while the identity holds, and ``body`` reads
        after that check, so a rewrite in place in between would otherwise be
        served unverified.  One ``fstat`` after ``body`` compares the identity
        again; if it moved, the file is verified from scratch (changed bytes
        fail closed) and ``body`` runs again.  A file that keeps moving fails
        closed too, rather than being read forever.
        """
        source_id, path, expected, origin = self._expected(ref)
        fs = self._fs
        for _ in range(_READ_ATTEMPTS):
            handle, identity, index = self._open_checked(path, source_id, expected, origin)
            try:
                result = body(functools.partial(fs.pread, handle), index, handle)
                moved = fs.fstat(handle).identity != identity
            except OSError as exc:
                raise EnvironmentFailure(f"{action} {source_id} failed: {exc}") from exc
            finally:
                fs.close(handle)
            if not moved:
                return source_id, index, result
            with self._cache_lock:
                self._verified.pop(path, None)
        raise ArtifactIntegrityError(
            f"{os.path.basename(path)} kept changing while it was read ({_READ_ATTEMPTS} tries); "
            f"nothing read from it is returned (fail closed)"
        )

    def _open_verified(
        self, path: str, source_id: str, expected: str, origin: str | None = None
    ) -> tuple[int, LineIndex]:
        handle, _, index = self._open_checked(path, source_id, expected, origin)
        return handle, index

    def _open_checked(
        self, path: str, source_id: str, expected: str, origin: str | None = None
    ) -> tuple[int, tuple[int, int, int, int, int], LineIndex]:
        """An open handle, the identity it was verified at, and the line index."""
        name = os.path.basename(path)
        handle, identity, sha256, index, fresh = self._open_owned(path, name)
        if not sha256.startswith(expected) and not fresh:
            # A digest remembered (here or in the session's record) is only a
            # cache: a mismatch is reported only from a hash of the bytes now.
            self._fs.close(handle)
            handle, identity, sha256, index, fresh = self._open_owned(path, name, remembered=False)
        if not sha256.startswith(expected):
            self._fs.close(handle)
            with self._cache_lock:
                self._verified.pop(path, None)
            if origin is not None:
                raise ArtifactIntegrityError(
                    f"the file {name} does not match the digest the lease journal recorded "
                    f"for {source_id} ({origin}): expected sha256 {expected}, the file has "
                    f"{sha256} (fail closed)"
                )
            # A 12-hex id is what people type, so a mismatch there is most
            # likely a wrong id; either way the read fails closed.
            raise ArtifactIntegrityError(
                f"source id {source_id} does not match the file {name} (its SHA-256 digest "
                f"differs): the id is wrong, "
                f"or the file changed since the id was made (fail closed): "
                f"expected sha256 {expected[:12]}..., the file has {sha256[:12]}..."
            )
        with self._cache_lock:
            self._verified[path] = _Verified(identity, sha256, index)
        return handle, identity, index

    def _open_owned(
        self, path: str, name: str, *, remembered: bool = True
    ) -> tuple[int, tuple[int, int, int, int, int], str, LineIndex, bool]:
        """Open an artifact of ours without blocking; its identity, digest, index, and fresh.

        The digest is remembered (this object's cache, else the session's
        record of verifications, :mod:`toolswap.verified_record`) when the
        identity is the one it was taken at, unless ``remembered`` is False;
        ``fresh`` says it was hashed now.
        """
        fs = self._fs
        try:
            directory = fs.lstat(self.paths.tool_results)
            facts = fs.lstat(path)
        except FileNotFoundError as exc:
            raise ArtifactNotOwnedError(f"artifact {name} does not exist") from exc
        except OSError as exc:
            raise EnvironmentFailure(f"cannot inspect {name}: {exc}") from exc
        if directory.is_symlink or not directory.is_dir:
            raise ArtifactNotOwnedError(f"{TOOL_RESULTS_NAME} is not a real directory (S7)")
        _require_owned(facts, name, fs.current_uid())
        try:
            handle = fs.open_read(path)
        except OSError as exc:
            raise ArtifactNotOwnedError(f"cannot open {name} safely: {exc}") from exc
        try:
            opened = fs.fstat(handle)
            if opened.identity[:2] != facts.identity[:2]:
                raise ArtifactNotOwnedError(f"{name} was replaced while opening it")
            _require_owned(opened, name, fs.current_uid())
            identity = opened.identity
            if remembered:
                with self._cache_lock:
                    cached = self._verified.get(path)
                if cached is not None and cached.identity == identity:
                    return handle, identity, cached.sha256, cached.index, False
                recorded = self._record.lookup(name, identity)
                if recorded is not None:
                    return handle, identity, recorded[0], recorded[1], False
            started = fs.now_ns()
            sha256, index = _hash_and_index(fs, handle)
            if fs.fstat(handle).identity != identity:
                raise ArtifactIntegrityError(f"{name} changed while it was verified")
            self._record.remember(name, identity, sha256, index, hashed_at_ns=started)
        except OSError as exc:
            fs.close(handle)
            raise EnvironmentFailure(f"cannot verify {name}: {exc}") from exc
        except BaseException:
            fs.close(handle)
            raise
        return handle, identity, sha256, index, True

    # -- cleanup (delegates to toolswap.cleanup) -----------------------------------

    def plan_cleanup(
        self,
        claims: Iterable[ArtifactRetentionClaim] | None = None,
        *,
        journal: ArtifactRetentionJournal | None = None,
        policy: ArtifactCleanupPolicy | None = None,
        now: float | None = None,
        **options: Any,
    ) -> CleanupPlan:
        """:func:`toolswap.cleanup.plan_cleanup` for this session (it chooses the claims)."""
        from . import cleanup

        return cleanup.plan_cleanup(
            self.paths,
            claims,
            journal=journal,
            policy=_policy(policy),
            fs=self._fs,
            now=self._now(now),
            **options,
        )

    def apply_cleanup(
        self,
        plan: CleanupPlan,
        *,
        claims: Iterable[ArtifactRetentionClaim] | None = None,
        journal: ArtifactRetentionJournal | None = None,
        owner: ArtifactReferenceOwner | None = None,
        now: float | None = None,
    ) -> CleanupReport:
        """:func:`toolswap.cleanup.apply_cleanup` for this session (it chooses the claims).

        ``owner``: the second witness (promise O9), asked before anything is deleted.
        """
        from . import cleanup

        return cleanup.apply_cleanup(
            self.paths,
            plan,
            claims=claims,
            journal=journal,
            owner=owner,
            fs=self._fs,
            now=self._now(now),
        )

    def plan_cleanup_from_journal(  # the journal-aware form, by name
        self,
        journal: ArtifactRetentionJournal,
        *,
        policy: ArtifactCleanupPolicy | None = None,
        now: float | None = None,
        **options: Any,
    ) -> CleanupPlan:
        from . import cleanup

        return cleanup.plan_cleanup_from_journal(
            self.paths, journal, policy=_policy(policy), fs=self._fs, now=self._now(now), **options
        )

    def apply_cleanup_from_journal(
        self,
        plan: CleanupPlan,
        journal: ArtifactRetentionJournal,
        *,
        owner: ArtifactReferenceOwner | None = None,
        now: float | None = None,
    ) -> CleanupReport:
        from . import cleanup

        return cleanup.apply_cleanup_from_journal(
            self.paths, plan, journal, owner=owner, fs=self._fs, now=self._now(now)
        )

    def _now(self, now: float | None) -> float:
        return self._clock() if now is None else now


TOOL_RESULTS_NAME = "tool-results/"


class _JournalDigests:
    """Source id -> the full digests the session's lease journal records for it.

    A claim's digest was checked against the file when it was prepared, and a
    CONFLICT identity is what an owner showed; either names the content a
    source id stands for in all 64 hex digits.

    Reads must stay cheap, so the evidence is kept per externalizer and the
    journal is verified only when it may say something new about the id read:

    * a warm read (the journal's identity unchanged) costs one lstat;
    * after a compaction, the last checkpoint's snapshot (the live leases it
      moved out of the file) is searched for the id's text too, once per id
      while the checkpoint log is unchanged (``_snapshot_scanned``);
    * complete lines of the journal that were folded into ``_known``
      (``_complete``), or already searched for this id (``_scanned``), are not
      read again while the file only grows; the rest is searched for the id's
      text, which toolswap writes verbatim (records are ASCII JSON, and an id
      needs no escape).  Both stop at a line end: a torn tail may be cut off
      and written over;
    * only if the id occurs is the journal verified, through its own API (in
      full once, then incrementally); then nothing is looked at again until
      the journal's identity changes (``_settled``).

    What was verified stays known: the journal only grows (S6), so a journal
    that later vanishes or turns corrupt takes nothing away (and adds nothing
    until it verifies again).  A file replaced, cut or rewritten in place is
    searched again from its start.
    """

    def __init__(self, paths: SessionPaths, fs: FileSystem) -> None:
        self._paths = paths
        self._fs = fs
        self._lock = threading.Lock()
        self._journal: ArtifactRetentionJournal | None = None
        self._known: dict[str, dict[str, str]] = {}  # source id -> full digest -> where recorded
        self._seen: tuple[int, int, int, int, int] | None = None  # the journal file's identity
        self._settled: tuple[int, int, int, int, int] | None = None  # identity last verified
        self._complete = 0  # bytes of that file whose records are all in _known
        self._scanned: dict[str, int] = {}  # source id -> bytes of that file without its text
        # After a compaction the live leases are in the last snapshot, not the file:
        # (the checkpoint log's identity, its line count = the last checkpoint's index),
        # and source id -> the log's identity when its snapshot was searched in vain.
        self._checkpoints: tuple[tuple[int, int, int, int, int], int] | None = None
        self._snapshot_scanned: dict[str, tuple[int, int, int, int, int]] = {}

    def for_source(self, source_id: str) -> dict[str, str]:
        """Full digest -> where the journal records it, for one (validated) source id."""
        try:
            facts: FileFacts | None = self._fs.lstat(self._paths.journal)
        except OSError:  # no journal, or none we can look at: what was verified still holds
            facts = None
        with self._lock:
            if facts is not None:
                self._catch_up(source_id, facts)
            return dict(self._known.get(source_id, {}))

    def _catch_up(self, source_id: str, facts: FileFacts) -> None:
        if facts.identity == self._settled:
            return  # verified (or found corrupt) as it is now: nothing new to find
        seen, self._seen = self._seen, facts.identity
        if seen != facts.identity and (
            seen is None or seen[:2] != facts.identity[:2] or facts.size <= seen[2]
        ):
            self._complete = 0  # replaced, cut or rewritten in place: search it all again
            self._scanned.clear()
        start = max(self._complete, self._scanned.get(source_id, 0))
        found = False
        if start < facts.size:
            found, end = self._search(self._paths.journal, source_id, start)
            if not found:
                self._scanned[source_id] = end
        if not found and not self._in_snapshot(source_id):
            return
        if self._refresh():
            self._settled = facts.identity

    def _in_snapshot(self, source_id: str) -> bool:
        """Does the last checkpoint's snapshot name the id (a live lease compacted out of the
        journal file)?  True when unsure.  Never compacted: one lstat, False.

        The checkpoint log's entries are numbered 1, 2, ... one per line (the journal
        checks it when it verifies), so the last snapshot is the log's line count; a
        snapshot searched for an id is not searched again while the log is unchanged.
        """
        fs = self._fs
        try:
            log = fs.lstat(self._paths.checkpoint_log)
        except FileNotFoundError:
            return False
        except OSError:
            return True
        if self._snapshot_scanned.get(source_id) == log.identity:
            return False
        if self._checkpoints is None or self._checkpoints[0] != log.identity:
            try:
                handle = fs.open_read(self._paths.checkpoint_log)
                try:
                    data = _pread_full(lambda n, at: fs.pread(handle, n, at), log.size, 0, log.size)
                finally:
                    fs.close(handle)
            except OSError:
                return True
            self._checkpoints = (log.identity, data.count(b"\n"))
        if not self._checkpoints[1]:
            return False
        found, _ = self._search(self._paths.snapshot(self._checkpoints[1]), source_id, 0)
        if not found:
            self._snapshot_scanned[source_id] = log.identity
        return found

    def _search(self, path: str, source_id: str, start: int) -> tuple[bool, int]:
        """(does the id's text occur in ``path`` from ``start`` on, the line end it is absent
        up to).

        ``start`` is a line end.  True when unsure (the file cannot be read).
        """
        fs = self._fs
        needle = source_id.encode("ascii")  # parse_source_id allows ASCII only
        position = clean = start  # an id lies inside one line, so none straddles ``start``
        try:
            handle = fs.open_read(path)
        except OSError:
            return True, start  # let the journal's own verification decide
        try:
            # The end of what was read, where an id may go on (the seam may read short).
            tail = b""
            while True:
                chunk = fs.pread(handle, _CHUNK, position)
                if not chunk:
                    return False, clean
                window = tail + chunk
                if needle in window:
                    return True, clean
                newline = chunk.rfind(b"\n")
                if newline >= 0:
                    clean = position + newline + 1
                tail = window[-(len(needle) - 1) :]
                position += len(chunk)
        except OSError:
            return True, start
        finally:
            fs.close(handle)

    def _refresh(self) -> bool:
        """Fold the verified journal into ``_known``; False: try again on the next read."""
        from .journal import ArtifactRetentionJournal

        try:
            if self._journal is None:
                self._journal = ArtifactRetentionJournal(
                    self._paths.root, fs=self._fs, session_id=self._paths.session_id
                )
            with self._journal.locked_state() as state:
                pass
        except CorruptStateError:
            # Recovery and cleanup refuse a corrupt journal and say so; a read
            # still verifies the file itself.  Not again until the file changes;
            # a poisoned journal object never verifies again, so a restored
            # journal gets a new one.
            self._journal = None
            return True
        except (EnvironmentFailure, UsageError):
            # The lock cannot be taken (a read-only session, or this thread
            # already holds it through another object): nothing new this time.
            self._journal = None
            return False
        self._merge(state)
        self._complete = max(self._complete, state.verified_bytes)
        return True

    def _merge(self, state: Recovery) -> None:
        for txn, claim in state.transactions.items():
            # A claim's digest agrees with its id's prefix by construction.
            digests = self._known.setdefault(claim.source_id, {})
            digests.setdefault(claim.content_sha256, f"lease {txn}")
        for txn, identities in state.conflicts.items():
            for identity in identities:
                if identity.source_id is not None and identity.content_sha256 is not None:
                    self._note(identity.source_id, identity.content_sha256, f"CONFLICT on {txn}")

    def _note(self, source_id: str, digest: str, where: str) -> None:
        """Record a full digest for an id; one that cannot be the id's content names nothing."""
        try:
            prefix = parse_source_id(source_id).digest_prefix
            validate_sha256(digest)
        except UsageError:
            return  # an owner's garbage identity: recorded and reported, names no file
        if digest.startswith(prefix):
            self._known.setdefault(source_id, {}).setdefault(digest, where)


def _policy(policy: ArtifactCleanupPolicy | None) -> ArtifactCleanupPolicy:
    from .cleanup import ArtifactCleanupPolicy

    return ArtifactCleanupPolicy() if policy is None else policy


def _expected_digest(ref: ArtifactReference | ArtifactMemoryReference | str) -> tuple[str, str]:
    """(source id, the digest the reference carries: full, or a bare id's 12-hex prefix)."""
    if isinstance(ref, ArtifactReference | ArtifactMemoryReference):
        return ref.source.source_id, ref.content_sha256
    if isinstance(ref, str):
        return ref, parse_source_id(ref).digest_prefix
    raise UsageError(f"expected an artifact reference or source id, got {type(ref).__name__}")


def _require_index(value: object, name: str, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        kind = "a non-negative" if minimum == 0 else "a positive"
        raise UsageError(f"{name} must be {kind} integer, got {value!r}")


def _pread_full(pread: Callable[[int, int], bytes], size: int, at: int, end: int) -> bytes:
    """Up to ``size`` bytes at ``at`` (fewer only at ``end``), however the seam splits reads."""
    pieces: list[bytes] = []
    want = min(size, max(0, end - at))
    while want > 0:
        piece = pread(want, at)
        if not piece:
            break
        pieces.append(piece)
        at += len(piece)
        want -= len(piece)
    return b"".join(pieces)


def _cut_page(
    data: bytes,
    *,
    source_id: str,
    offset: int,
    limit: int,
    cap: int,
    start: int,
    start_byte: int,
    index: LineIndex,
) -> Page:
    """Cut ``data`` (at most ``cap`` bytes read at ``start``) into a page (rules: reading.py)."""
    at_end = start + len(data) >= index.size
    newline = -1
    for _ in range(limit):
        found = data.find(b"\n", newline + 1)
        if found < 0:
            break
        newline = found
    else:
        newline = -2  # limit lines found: cut after the last of them
    truncated = False
    if newline == -2:
        cut = _nth_newline_end(data, limit)
    elif at_end:
        cut = len(data)
    else:  # the cap came first
        truncated = True
        cut = newline + 1 if newline >= 0 else char_boundary(data, len(data))
    text = data[:cut].decode("utf-8", errors="replace")
    while len(text.encode("utf-8")) > cap:  # replacement characters take 3 bytes each
        truncated = True
        excess = len(text.encode("utf-8")) - cap
        shorter = max(1, cut - max(1, excess // 2))
        newline = data.rfind(b"\n", 0, shorter)
        cut = newline + 1 if newline >= 0 else char_boundary(data, shorter)
        text = data[:cut].decode("utf-8", errors="replace")
    piece = data[:cut]
    newlines = piece.count(b"\n")
    ends_line = piece.endswith(b"\n")
    last_line = offset + newlines - (1 if ends_line or not piece else 0)
    end = start + cut
    if end >= index.size:
        next_offset: int | None = None
        next_byte = 0
    elif ends_line:
        next_offset, next_byte = offset + newlines, 0
    else:
        next_offset = last_line
        next_byte = start_byte + cut if newlines == 0 else cut - (piece.rfind(b"\n") + 1)
    return Page(
        source_id=source_id,
        text=text,
        total_lines=index.line_count,
        first_line=offset,
        last_line=last_line,
        next_offset=next_offset,
        next_byte=next_byte,
        truncated=truncated and next_offset is not None,
        size_bytes=index.size,
        start_byte=start_byte,
        byte_start=start,
        byte_end=end,
        max_bytes=cap,
    )


def _nth_newline_end(data: bytes, count: int) -> int:
    position = -1
    for _ in range(count):
        position = data.find(b"\n", position + 1)
    return position + 1


def _require_owned(facts: FileFacts, name: str, uid: int) -> None:
    if facts.is_symlink:
        raise ArtifactNotOwnedError(f"{name} is a symlink; artifacts are never read through one")
    if not facts.is_regular:
        raise ArtifactNotOwnedError(f"{name} is not a regular file")
    if facts.uid != uid:
        raise ArtifactNotOwnedError(f"{name} is owned by uid {facts.uid}, not {uid}")
    if facts.nlink > 1:  # a hard link can make a file elsewhere look like ours
        raise ArtifactNotOwnedError(
            f"{name} has {facts.nlink} hard links; a linked file may be someone else's (S7)"
        )


def _hash_and_index(fs: FileSystem, handle: int) -> tuple[str, LineIndex]:
    import hashlib  # a page of an artifact verified before (the record) needs no hashing

    digest = hashlib.sha256()
    index = LineIndexBuilder()
    position = 0
    while True:
        chunk = fs.pread(handle, _CHUNK, position)
        if not chunk:
            break
        digest.update(chunk)
        index.feed(chunk)
        position += len(chunk)
    return digest.hexdigest(), index.finish()
