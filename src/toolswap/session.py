"""Where a session keeps its evidence, and the one lock that serializes it.

A session folder holds::

    <session_dir>/
        tool-results/tool_result_NNN.txt   artifacts (immutable once written)
        retention-leases.jsonl             the lease journal (after a compaction: its tail)
        .journal-checkpoints               the checkpoint log of compactions (never compacted)
        .journal-snapshot-<k>              checkpoint k's live leases
        journal-archive/retention-leases-<k>.jsonl   the file checkpoint k compacted (kept)
        .journal-anchor                    a lower bound on the journal's records
        .artifact-high-water               the highest artifact number ever handed out
        .artifact-deleted-high-water       the highest number cleanup is about to delete
        .verified-artifacts                a cache of verified artifacts, by identity
        .session.lock                      the flock taken by prepare and cleanup apply

The session id defaults to the folder's name and must be a valid session id.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import attrs

from .domain import is_artifact_filename, parse_source_id, validate_session_id
from .errors import EnvironmentFailure, InvalidSourceId, UsageError
from .fs import REAL_FS, FileSystem, locked

__all__ = [
    "SessionPaths",
    "TOOL_RESULTS",
    "JOURNAL_NAME",
    "LOCK_NAME",
    "CHECKPOINT_LOG_NAME",
    "SNAPSHOT_PREFIX",
    "ARCHIVE_DIR",
    "DEFAULT_SESSION_ENV",
]

TOOL_RESULTS = "tool-results"
JOURNAL_NAME = "retention-leases.jsonl"
LOCK_NAME = ".session.lock"
CHECKPOINT_LOG_NAME = ".journal-checkpoints"
SNAPSHOT_PREFIX = ".journal-snapshot-"
ARCHIVE_DIR = "journal-archive"
DEFAULT_SESSION_ENV = "TOOLSWAP_SESSION_DIR"


@attrs.frozen(kw_only=True)
class SessionPaths:
    """The trusted paths of one session; the only source of artifact paths (S7)."""

    root: str
    session_id: str
    # Every artifact path is built from it (cleanup: several per file), so once.
    _tool_results: str = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_tool_results", os.path.join(self.root, TOOL_RESULTS))

    @classmethod
    def at(cls, session_dir: str | os.PathLike[str], session_id: str | None = None) -> SessionPaths:
        root = os.path.abspath(os.fspath(session_dir))
        sid = session_id if session_id is not None else os.path.basename(root)
        return cls(root=root, session_id=validate_session_id(sid))

    @property
    def tool_results(self) -> str:
        return self._tool_results

    @property
    def journal(self) -> str:
        return os.path.join(self.root, JOURNAL_NAME)

    @property
    def lock(self) -> str:
        return os.path.join(self.root, LOCK_NAME)

    # -- compaction (docs/design.md section 5, "Compaction") --

    @property
    def checkpoint_log(self) -> str:
        return os.path.join(self.root, CHECKPOINT_LOG_NAME)

    def snapshot(self, checkpoint: int) -> str:
        return os.path.join(self.root, f"{SNAPSHOT_PREFIX}{int(checkpoint)}")

    @property
    def journal_next(self) -> str:
        """The next journal file while a compaction starts it."""
        return self.journal + ".next"

    def journal_set_aside(self, checkpoint: int) -> str:
        """The file checkpoint ``checkpoint`` compacted, between the swap and the archive."""
        return f"{self.journal}.compacted-{int(checkpoint)}"

    @property
    def journal_archive(self) -> str:
        return os.path.join(self.root, ARCHIVE_DIR)

    def archived_journal(self, checkpoint: int) -> str:
        return os.path.join(self.journal_archive, f"retention-leases-{int(checkpoint)}.jsonl")

    def artifact_path(self, filename: str) -> str:
        """The path of one artifact name; refuses anything but ``tool_result_NNN.txt``."""
        if not is_artifact_filename(filename):
            raise InvalidSourceId(f"not an artifact file name: {filename!r}")
        return os.path.join(self._tool_results, filename)

    def path_for_source(self, source_id: str) -> str:
        """Derive the path from a source id of *this* session, never from a stored path."""
        parsed = parse_source_id(source_id)
        if parsed.session_id != self.session_id:
            raise InvalidSourceId(
                f"source id {source_id!r} belongs to session {parsed.session_id!r}, "
                f"not {self.session_id!r}"
            )
        return self.artifact_path(parsed.filename)

    @contextmanager
    def session_lock(self, fs: FileSystem = REAL_FS) -> Iterator[None]:
        """Hold the session's exclusive lock (threads and processes alike).

        flock is held per open file, so a thread that already holds this lock
        through one object and asks again through another (a second journal,
        or an externalizer inside ``journal.locked_state()``) would wait for
        itself forever; that is refused with :class:`UsageError` instead.
        """
        key = (id(fs), self.lock)
        held: set[tuple[int, str]] = _held_by_this_thread()
        if key in held:
            raise UsageError(
                "this thread already holds the session lock through another object; "
                "waiting for it again would deadlock (finish the locked block first)"
            )
        fs.makedirs(self.root)
        stack = contextlib.ExitStack()
        try:
            stack.enter_context(locked(fs, self.lock))
        except OSError as exc:  # a FIFO, a directory or a symlink where the lock belongs
            raise EnvironmentFailure(
                f"cannot take the session lock: {exc.strerror or type(exc).__name__}"
            ) from exc
        with stack:
            held.add(key)
            try:
                yield
            finally:
                held.discard(key)


_THREAD = threading.local()


def _held_by_this_thread() -> set[tuple[int, str]]:
    held: set[tuple[int, str]] | None = getattr(_THREAD, "held", None)
    if held is None:
        held = _THREAD.held = set()
    return held
