"""list_artifacts / stat_artifact: our artifacts only, lease state read from the journal."""

from __future__ import annotations

import hashlib
import os
import pathlib

import pytest

from toolswap.domain import ArtifactRetentionClaim
from toolswap.errors import ArtifactIntegrityError, ArtifactNotOwnedError
from toolswap.externalizer import ToolResultExternalizer
from toolswap.fs import OsFileSystem
from toolswap.journal import ArtifactRetentionJournal
from toolswap.reading import render_listing

from ._artifacts import lines


def _session(tmp: pathlib.Path, count: int = 3) -> tuple[ToolResultExternalizer, list[str]]:
    ext = ToolResultExternalizer(tmp / "s", environ={}, threshold_bytes=1)
    ids = []
    for i in range(count):
        result = ext.externalize(lines(10 * (i + 1)), "tool")
        assert result.artifact is not None
        ids.append(result.artifact.source_id)
    return ext, ids


def test_the_listing_names_every_artifact_with_its_facts(tmp_path: pathlib.Path) -> None:
    ext, ids = _session(tmp_path)
    infos = ToolResultExternalizer(tmp_path / "s", environ={}).list_artifacts()
    assert [i.source_id for i in infos] == ids
    assert [i.line_count for i in infos] == [10, 20, 30]
    assert [i.size for i in infos] == [len(lines(n)) for n in (10, 20, 30)]
    assert all(i.lease_state is None for i in infos)
    for info in infos:  # every listed id reads
        assert ext.read_page(info.source_id, 0, 1).first_line == 0
        assert ext.stat_artifact(info.source_id) == info


def test_a_session_without_results_lists_nothing(tmp_path: pathlib.Path) -> None:
    ext = ToolResultExternalizer(tmp_path / "empty", environ={})
    assert ext.list_artifacts() == []
    assert render_listing([]) == "no artifacts\n"


def test_the_lease_state_is_the_strongest_lease_in_the_journal(tmp_path: pathlib.Path) -> None:
    ext, ids = _session(tmp_path)
    journal = ArtifactRetentionJournal(tmp_path / "s")
    claims = [
        ArtifactRetentionClaim(
            source_id=sid,
            content_sha256=_full_digest(ext, sid),
        )
        for sid in ids
    ]
    first = journal.prepare(claims[0])  # PREPARED
    second = journal.prepare(claims[1])
    journal.commit(second.transaction_id)  # COMMITTED
    third = journal.prepare(claims[2])
    journal.commit(third.transaction_id)
    journal.release(third.transaction_id)  # RELEASED
    journal.prepare(claims[1])  # a second lease on the same artifact does not weaken it
    before = pathlib.Path(journal.path).read_bytes()
    states = [i.lease_state for i in ToolResultExternalizer(tmp_path / "s").list_artifacts()]
    assert states == ["PREPARED", "PREPARED", "RELEASED"]
    assert pathlib.Path(journal.path).read_bytes() == before
    journal.commit(first.transaction_id)
    assert ext.stat_artifact(ids[0]).lease_state == "COMMITTED"


def _full_digest(ext: ToolResultExternalizer, source_id: str) -> str:
    return hashlib.sha256(
        pathlib.Path(ext.paths.path_for_source(source_id)).read_bytes()
    ).hexdigest()


def test_listing_never_writes_the_journal(tmp_path: pathlib.Path) -> None:
    ext, ids = _session(tmp_path, 1)
    journal = ArtifactRetentionJournal(tmp_path / "s")
    journal.prepare(
        ArtifactRetentionClaim(source_id=ids[0], content_sha256=_full_digest(ext, ids[0]))
    )
    before = pathlib.Path(journal.path).read_bytes()
    ext.list_artifacts()
    ext.stat_artifact(ids[0])
    assert pathlib.Path(journal.path).read_bytes() == before


class _RecordingFS(OsFileSystem):
    def __init__(self) -> None:
        self.opened: list[str] = []

    def open_read(self, path: str) -> int:
        self.opened.append(os.path.basename(path))
        return super().open_read(path)


def test_foreign_entries_are_skipped_and_never_opened(tmp_path: pathlib.Path) -> None:
    ext, ids = _session(tmp_path, 1)
    results = pathlib.Path(ext.tool_results_dir)
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"secret\n")
    os.mkfifo(results / "tool_result_007.txt")  # would block an ordinary open
    os.symlink(outside, results / "tool_result_008.txt")
    os.link(outside, results / "tool_result_009.txt")  # a hard link to a file elsewhere
    (results / "tool_result_010.txt").mkdir()
    (results / "notes.txt").write_bytes(b"not an artifact name\n")
    recording = _RecordingFS()
    infos = ToolResultExternalizer(tmp_path / "s", environ={}, fs=recording).list_artifacts()
    assert [i.source_id for i in infos] == ids
    assert recording.opened == ["tool_result_001.txt"]
    assert sorted(os.listdir(results)) == sorted(
        ["tool_result_001.txt", "tool_result_007.txt", "tool_result_008.txt",
         "tool_result_009.txt", "tool_result_010.txt", "notes.txt"]
    )  # fmt: skip


def test_stat_verifies_like_a_read(tmp_path: pathlib.Path) -> None:
    ext, ids = _session(tmp_path, 1)
    path = pathlib.Path(ext.paths.path_for_source(ids[0]))
    path.write_bytes(path.read_bytes() + b"tampered\n")
    with pytest.raises(ArtifactIntegrityError):
        ToolResultExternalizer(tmp_path / "s", environ={}).stat_artifact(ids[0])
    path.unlink()
    with pytest.raises(ArtifactNotOwnedError, match="does not exist"):
        ext.stat_artifact(ids[0])


def test_the_listing_renders_one_row_per_artifact(tmp_path: pathlib.Path) -> None:
    ext, ids = _session(tmp_path, 2)
    infos = ext.list_artifacts()
    shown = render_listing(infos, now=infos[0].mtime + 3 * 3600 + 5)
    rows = shown.splitlines()
    assert rows[0].split() == ["NAME", "BYTES", "LINES", "AGE", "LEASE", "SOURCE_ID"]
    assert rows[1].split() == ["tool_result_001.txt", "410", "10", "3h", "-", ids[0]]
    assert infos[0].to_json()["lease_state"] is None
