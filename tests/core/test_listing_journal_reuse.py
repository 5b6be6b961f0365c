"""Listing reuses what it verified of the journal: only the new tail is read again.

``list_artifacts`` and ``stat_artifact`` show each artifact's lease state
from the journal.  One externalizer (the MCP server, a harness) lists many
times; the journal it verified stays verified while it only grows, so a
later listing reads only the records appended since, and a journal that was
replaced is verified in full again.
"""

from __future__ import annotations

import os
import pathlib
import shutil

import pytest

from toolswap.domain import ArtifactRetentionClaim
from toolswap.errors import JournalCorruptError
from toolswap.externalizer import ToolResultExternalizer
from toolswap.fs import OsFileSystem
from toolswap.journal import ArtifactRetentionJournal

from ._artifacts import lines

RECORDS = 400


class JournalReadsFS(OsFileSystem):
    """The real seam, counting the bytes read from the lease journal."""

    def __init__(self, journal: str) -> None:
        self.journal = journal
        self.handles: set[int] = set()
        self.journal_bytes = 0

    def open_read(self, path: str) -> int:
        handle = super().open_read(path)
        if path == self.journal:
            self.handles.add(handle)
        return handle

    def close(self, handle: int) -> None:
        self.handles.discard(handle)
        super().close(handle)

    def pread(self, handle: int, size: int, offset: int) -> bytes:
        data = super().pread(handle, size, offset)
        if handle in self.handles:
            self.journal_bytes += len(data)
        return data


def _session(tmp_path: pathlib.Path) -> tuple[pathlib.Path, ArtifactRetentionJournal, str]:
    session = tmp_path / "s"
    ext = ToolResultExternalizer(session, environ={}, threshold_bytes=1)
    ref = ext.externalize(lines(10), "tool").artifact
    assert ref is not None
    claim = ArtifactRetentionClaim(source_id=ref.source_id, content_sha256=ref.content_sha256)
    journal = ArtifactRetentionJournal(session)
    for i in range(RECORDS // 2):
        journal.prepare(claim, f"t{i}")
        journal.commit(f"t{i}")
    return session, journal, ref.source_id


def _reader(session: pathlib.Path) -> tuple[ToolResultExternalizer, JournalReadsFS]:
    fs = JournalReadsFS(str(session / "retention-leases.jsonl"))
    return ToolResultExternalizer(session, environ={}, fs=fs), fs


def test_a_second_listing_reads_only_the_records_appended_since(tmp_path: pathlib.Path) -> None:
    session, journal, source_id = _session(tmp_path)
    size = os.path.getsize(session / "retention-leases.jsonl")
    reader, fs = _reader(session)
    assert [info.lease_state for info in reader.list_artifacts()] == ["COMMITTED"]
    assert fs.journal_bytes >= size  # the first listing verifies the whole journal
    fs.journal_bytes = 0
    assert reader.list_artifacts()[0].lease_state == "COMMITTED"
    assert fs.journal_bytes == 0  # unchanged: nothing read
    claim = ArtifactRetentionClaim(
        source_id=source_id, content_sha256=journal.verified_intents()["t0"].content_sha256
    )
    journal.prepare(claim, "new")
    grown = os.path.getsize(session / "retention-leases.jsonl")
    assert reader.list_artifacts()[0].lease_state == "PREPARED"
    assert 0 < fs.journal_bytes <= grown - size  # the new record only


def test_a_replaced_journal_is_verified_again_in_full(tmp_path: pathlib.Path) -> None:
    session, _, _ = _session(tmp_path)
    path = session / "retention-leases.jsonl"
    reader, fs = _reader(session)
    reader.list_artifacts()
    shutil.copy(path, tmp_path / "copy")
    os.replace(tmp_path / "copy", path)  # same bytes, another file
    fs.journal_bytes = 0
    assert reader.list_artifacts()[0].lease_state == "COMMITTED"
    assert fs.journal_bytes >= os.path.getsize(path)


def test_a_journal_found_corrupt_is_refused_then_verified_afresh_once_restored(
    tmp_path: pathlib.Path,
) -> None:
    session, _, _ = _session(tmp_path)
    path = session / "retention-leases.jsonl"
    good = path.read_bytes()
    reader, _ = _reader(session)
    reader.list_artifacts()
    bad = tmp_path / "bad"  # cut back to half its records: it lost verified ones
    bad.write_bytes(b"".join(good.splitlines(keepends=True)[: RECORDS // 2]))
    os.replace(bad, path)
    with pytest.raises(JournalCorruptError):
        reader.list_artifacts()
    restored = tmp_path / "restored"
    restored.write_bytes(good)
    os.replace(restored, path)
    assert reader.list_artifacts()[0].lease_state == "COMMITTED"
