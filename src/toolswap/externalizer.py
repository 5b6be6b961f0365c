"""Externalization: large tool output becomes an artifact plus a bounded pointer.

Commit order of one externalization (each step through the file-system seam):

1. Validate the tool name and the caller's summary (nothing is written yet).
2. Stream the output; below the threshold it goes to the context unchanged.
3. Over the threshold, reserve ``tool-results/tool_result_NNN.txt`` by
   exclusive create (mode 0600), under the session lock.  ``NNN`` comes from
   the durable high-water mark (:mod:`toolswap.high_water`), so no name is
   ever reused, not even one that cleanup has deleted (S6).
4. Write every byte while hashing, indexing lines and keeping head and tail.
5. fsync the file, then fsync the directory; only then return the reference.

A failure in 3-5 removes the never-referenced file and raises
:class:`ArtifactWriteError` (``__cause__`` is the OSError).

``read_artifact`` is the page fault: the path comes from the source id (never
from a stored path), the file must be a regular file owned by us and not a
symlink, and its digest is verified before any byte is returned.  A
verification is reused while the file's identity is unchanged.
"""

from __future__ import annotations

import codecs
import contextlib
import datetime
import hashlib
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

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
)
from .errors import (
    ArtifactIntegrityError,
    ArtifactNotOwnedError,
    ArtifactWriteError,
    EnvironmentFailure,
    InvalidSummary,
    InvalidThreshold,
    UsageError,
)
from .fs import REAL_FS, FileFacts, FileSystem
from .high_water import ArtifactHighWaterMark
from .line_index import LineIndex, LineIndexBuilder
from .pointer import HEAD_BYTES, TAIL_BYTES, PreviewCollector, render_pointer
from .session import SessionPaths

if TYPE_CHECKING:
    from .cleanup import ArtifactCleanupPolicy, CleanupPlan, CleanupReport
    from .domain import ArtifactRetentionClaim
    from .journal import ArtifactRetentionJournal

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
    if not number > 0 or number != number or number == float("inf"):
        raise InvalidThreshold(
            f"environment variable {name}={raw!r} is not a positive "
            f"{'number of KiB' if kib else 'integer'}"
        )
    return int(number * 1024) if kib else int(number)


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
        PreviewCollector(head_bytes, tail_bytes)  # validates the window sizes
        self._head_bytes = head_bytes
        self._tail_bytes = tail_bytes
        self._high_water = ArtifactHighWaterMark(self.paths, fs)
        self._verified: dict[str, _Verified] = {}
        self._cache_lock = threading.Lock()

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
                return filename, path, self._fs.create_exclusive(path, 0o600)
            except FileExistsError:
                continue  # written by a process that bypassed the mark; skip it
            except OSError as exc:
                raise ArtifactWriteError(f"cannot create {filename}: {exc}") from exc
        raise ArtifactWriteError("no free artifact name")  # pragma: no cover

    def _write_artifact(
        self,
        buffered: list[bytes],
        rest: Iterator[bytes],
        tool: str,
        summary: str | None,
    ) -> ExternalizationResult:
        fs = self._fs
        filename, path, handle = self._reserve()
        fs.crash_point("externalize.after_create")
        digest = hashlib.sha256()
        index = LineIndexBuilder()
        preview = PreviewCollector(self._head_bytes, self._tail_bytes)
        closed = False
        try:
            for source in (buffered, rest):
                for chunk in source:
                    fs.write(handle, chunk)
                    digest.update(chunk)
                    index.feed(chunk)
                    preview.feed(chunk)
                buffered = []  # let the first threshold's worth go
            fs.crash_point("externalize.before_fsync")
            fs.fsync(handle)
            facts = fs.fstat(handle)
            closed = True
            fs.close(handle)
            fs.crash_point("externalize.before_dir_fsync")
            fs.fsync_dir(self.paths.tool_results)
        except (Exception, KeyboardInterrupt) as exc:
            self._discard(path, handle, closed)
            if isinstance(exc, OSError):
                raise ArtifactWriteError(
                    f"writing {filename} failed and it was removed: {exc}"
                ) from exc
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
        limit: int = 2000,
    ) -> str:
        """Lines ``[offset, offset + limit)`` (0-based) of a verified artifact of this session."""
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise UsageError(f"offset must be a non-negative integer, got {offset!r}")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise UsageError(f"limit must be a positive integer, got {limit!r}")
        source_id, expected = _expected_digest(ref)
        path = self.paths.path_for_source(source_id)
        handle, index = self._open_verified(path, source_id, expected)
        try:
            if offset > 0 and offset >= index.line_count:
                raise UsageError(
                    f"offset {offset} is past the end: the artifact has {index.line_count} lines"
                )
            data = index.read_lines(offset, limit, lambda n, at: self._fs.pread(handle, n, at))
        except OSError as exc:
            raise EnvironmentFailure(f"reading {source_id} failed: {exc}") from exc
        finally:
            self._fs.close(handle)
        return data.decode("utf-8", errors="replace")

    def verify_artifact(self, ref: ArtifactReference | ArtifactMemoryReference | str) -> LineIndex:
        """Check ownership, type and digest; return the artifact's line index."""
        source_id, expected = _expected_digest(ref)
        handle, index = self._open_verified(
            self.paths.path_for_source(source_id), source_id, expected
        )
        self._fs.close(handle)
        return index

    def _open_verified(self, path: str, source_id: str, expected: str) -> tuple[int, LineIndex]:
        fs = self._fs
        name = os.path.basename(path)
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
            with self._cache_lock:
                cached = self._verified.get(path)
            if cached is not None and cached.identity == opened.identity:
                sha256, index = cached.sha256, cached.index
            else:
                sha256, index = _hash_and_index(fs, handle)
                if fs.fstat(handle).identity != opened.identity:
                    raise ArtifactIntegrityError(f"{name} changed while it was verified")
            if not sha256.startswith(expected):
                with self._cache_lock:
                    self._verified.pop(path, None)
                raise ArtifactIntegrityError(
                    f"artifact {source_id} fails its digest check (fail closed): "
                    f"expected {expected[:12]}..., found {sha256[:12]}..."
                )
            with self._cache_lock:
                self._verified[path] = _Verified(opened.identity, sha256, index)
        except BaseException:
            fs.close(handle)
            raise
        return handle, index

    # -- cleanup (delegates to toolswap.cleanup) -----------------------------------

    def plan_cleanup(
        self,
        claims: Iterable[ArtifactRetentionClaim],
        *,
        policy: ArtifactCleanupPolicy | None = None,
        now: float | None = None,
        **options: Any,
    ) -> CleanupPlan:
        from . import cleanup

        return cleanup.plan_cleanup(
            self.paths, claims, policy=_policy(policy), fs=self._fs, now=self._now(now), **options
        )

    def apply_cleanup(
        self,
        plan: CleanupPlan,
        *,
        claims: Iterable[ArtifactRetentionClaim],
        now: float | None = None,
    ) -> CleanupReport:
        from . import cleanup

        return cleanup.apply_cleanup(
            self.paths, plan, claims=claims, fs=self._fs, now=self._now(now)
        )

    def plan_cleanup_from_journal(
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
        self, plan: CleanupPlan, journal: ArtifactRetentionJournal, *, now: float | None = None
    ) -> CleanupReport:
        from . import cleanup

        return cleanup.apply_cleanup_from_journal(
            self.paths, plan, journal, fs=self._fs, now=self._now(now)
        )

    def _now(self, now: float | None) -> float:
        return self._clock() if now is None else now


TOOL_RESULTS_NAME = "tool-results/"


def _policy(policy: ArtifactCleanupPolicy | None) -> ArtifactCleanupPolicy:
    from .cleanup import ArtifactCleanupPolicy

    return ArtifactCleanupPolicy() if policy is None else policy


def _expected_digest(ref: ArtifactReference | ArtifactMemoryReference | str) -> tuple[str, str]:
    """(source id, the digest the file must have: full, or the id's 12-hex prefix)."""
    if isinstance(ref, ArtifactReference | ArtifactMemoryReference):
        return ref.source.source_id, ref.content_sha256
    if isinstance(ref, str):
        return ref, parse_source_id(ref).digest_prefix
    raise UsageError(f"expected an artifact reference or source id, got {type(ref).__name__}")


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
