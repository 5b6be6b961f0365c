"""Our own session files are never written through a hard link (issue 31).

``retention-leases.jsonl``, ``.journal-anchor``, ``.artifact-high-water``,
``.artifact-deleted-high-water`` and ``.session.lock`` replaced by a hard link
to a file outside the session used to make toolswap append to that outside
file.  Each is now refused with a typed, one-line error, and the outside file
keeps its bytes -- whether the link was there before toolswap looked or
appeared between its look and its open.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Callable

import pytest

from toolswap.cleanup import apply_cleanup_from_journal, plan_cleanup_from_journal
from toolswap.errors import CorruptStateError, EnvironmentFailure, ToolswapError
from toolswap.externalizer import ToolResultExternalizer
from toolswap.fs import REAL_FS, FileSystem, OsFileSystem
from toolswap.high_water import DELETED_NAME, HIGH_WATER_NAME
from toolswap.journal import ArtifactRetentionJournal, JournalCorruptError
from toolswap.journal_anchor import ANCHOR_NAME
from toolswap.session import LOCK_NAME, SessionPaths

from ._artifacts import lines
from ._journal_support import make_artifact
from .test_cleanup import DELETE

BIG = lines(4000)


def _session(tmp_path: pathlib.Path) -> pathlib.Path:
    """A session with every file of ours: a lease, its anchor, both marks and the lock."""
    session = tmp_path / "s"
    ToolResultExternalizer(session, environ={}).externalize(BIG, "bash")  # the mark, the lock
    claim = make_artifact(session, b"leased\n", 2)
    ArtifactRetentionJournal(session).prepare(claim, "t1")  # the journal and its anchor
    (session / DELETED_NAME).write_bytes(b"1\n")
    return session


def _link_out(session: pathlib.Path, name: str, outside: pathlib.Path) -> bytes:
    """Replace the session's ``name`` by a hard link to ``outside`` (same bytes)."""
    os.replace(session / name, outside)
    os.link(outside, session / name)
    return outside.read_bytes()


def _prepare(session: pathlib.Path, fs: FileSystem = REAL_FS) -> None:
    claim = make_artifact(session, b"another\n", 3)
    ArtifactRetentionJournal(session, fs=fs).prepare(claim, "t2")


def _externalize(session: pathlib.Path, fs: FileSystem = REAL_FS) -> None:
    ToolResultExternalizer(session, fs=fs, environ={}).externalize(BIG, "bash")


def _clean(session: pathlib.Path, fs: FileSystem = REAL_FS) -> None:
    """Cleanup with an orphan to delete: it records the deletion before any unlink."""
    paths = SessionPaths.at(session)
    journal = ArtifactRetentionJournal(session, fs=fs)
    plan = plan_cleanup_from_journal(paths, journal, policy=DELETE, fs=fs, now=10**12)
    assert plan.planned, "the orphan tool_result_001.txt is planned for deletion"
    apply_cleanup_from_journal(paths, plan, journal, fs=fs, now=10**12)


# (file, the operation that writes it, the error it must raise)
WRITERS: list[tuple[str, Callable[..., None], type[ToolswapError]]] = [
    ("retention-leases.jsonl", _prepare, JournalCorruptError),
    (ANCHOR_NAME, _prepare, CorruptStateError),
    (HIGH_WATER_NAME, _externalize, CorruptStateError),
    (DELETED_NAME, _clean, CorruptStateError),
    (LOCK_NAME, _prepare, EnvironmentFailure),
]


@pytest.mark.parametrize(("name", "write", "error"), WRITERS, ids=[w[0] for w in WRITERS])
def test_a_hard_linked_file_of_ours_is_refused_and_the_outside_file_kept(
    tmp_path: pathlib.Path,
    name: str,
    write: Callable[[pathlib.Path], None],
    error: type[ToolswapError],
) -> None:
    session = _session(tmp_path)
    outside = tmp_path / "outside"
    before = _link_out(session, name, outside)
    with pytest.raises(error, match="2 hard links"):
        write(session)
    assert outside.read_bytes() == before


class _LinksBeforeOpen(OsFileSystem):
    """The real seam, where someone links ``name`` out just before toolswap opens it to write.

    Every look before the open (lstat, a read) saw one name; only the open's
    own check can refuse.
    """

    def __init__(self, session: pathlib.Path, name: str, outside: pathlib.Path) -> None:
        self._target = str(session / name)
        self._session = session
        self._name = name
        self._outside = outside
        self.before: bytes | None = None

    def _link_now(self, path: str) -> None:
        if path == self._target and self.before is None:
            self.before = _link_out(self._session, self._name, self._outside)

    def open_append(self, path: str, mode: int = 0o600) -> int:
        self._link_now(path)
        return super().open_append(path, mode)

    def open_lock(self, path: str) -> int:
        self._link_now(path)
        return super().open_lock(path)


@pytest.mark.parametrize(("name", "write", "error"), WRITERS, ids=[w[0] for w in WRITERS])
def test_a_hard_link_made_between_the_look_and_the_open_is_refused_as_typed(
    tmp_path: pathlib.Path,
    name: str,
    write: Callable[[pathlib.Path, FileSystem], None],
    error: type[ToolswapError],
) -> None:
    session = _session(tmp_path)
    outside = tmp_path / "outside"
    fs = _LinksBeforeOpen(session, name, outside)
    with pytest.raises(error, match="2 hard links"):
        write(session, fs)
    assert fs.before is not None and outside.read_bytes() == fs.before


def test_the_journal_is_not_read_through_a_hard_link(tmp_path: pathlib.Path) -> None:
    session = _session(tmp_path)
    _link_out(session, "retention-leases.jsonl", tmp_path / "outside")
    with pytest.raises(JournalCorruptError, match="not_regular"):
        ArtifactRetentionJournal(session).recover()


def test_a_hard_linked_journal_is_refused_on_the_simulated_disk_too() -> None:
    from toolswap.faultinject.disk import SimulatedDisk

    disk = SimulatedDisk()
    root = "/s"
    disk.makedirs(root)
    disk.put_file(f"{root}/outside", b"")
    disk.make_hard_link(f"{root}/retention-leases.jsonl", f"{root}/outside")
    with pytest.raises(JournalCorruptError, match="2 hard links"):
        ArtifactRetentionJournal(root, fs=disk).recover()
    assert disk.read_file(f"{root}/outside") == b""


def test_the_anchor_is_not_read_through_a_hard_link(tmp_path: pathlib.Path) -> None:
    session = _session(tmp_path)
    _link_out(session, ANCHOR_NAME, tmp_path / "outside")
    with pytest.raises(CorruptStateError, match="2 hard links"):
        ArtifactRetentionJournal(session).recover()


def test_a_hard_linked_deletion_record_is_not_read_to_rebuild_the_mark(
    tmp_path: pathlib.Path,
) -> None:
    session = _session(tmp_path)
    (session / HIGH_WATER_NAME).unlink()  # the mark must be rebuilt from the other sources
    _link_out(session, DELETED_NAME, tmp_path / "outside")
    with pytest.raises(CorruptStateError, match="2 hard links"):
        _externalize(session)
