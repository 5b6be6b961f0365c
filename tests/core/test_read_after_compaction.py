"""A bare source id read after a compaction still checks the live lease's full digest.

Compaction moves the live leases out of the journal file into the last
checkpoint's snapshot (docs/design.md section 5, "Compaction").  The read path
looks for the id's text before it verifies the journal; it must look in the
snapshot too, or a read of a compacted live lease's artifact falls back to the
48-bit prefix.  As in ``test_read_full_digest.py``, a tampered artifact is
modelled by a claim whose full digest shares the file's 12-hex prefix (the only
difference a prefix check cannot see).
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from typing import Any

import pytest

from toolswap.domain import ArtifactReference, ArtifactRetentionClaim
from toolswap.errors import ArtifactIntegrityError
from toolswap.externalizer import ToolResultExternalizer, _JournalDigests
from toolswap.journal import ArtifactRetentionJournal


def _externalized(session: pathlib.Path, text: bytes = b"build output\n" * 40) -> ArtifactReference:
    ext = ToolResultExternalizer(session, environ={}, threshold_bytes=64)
    ref = ext.externalize(text, "tool").artifact
    assert ref is not None
    return ref


def _twin(digest: str) -> str:
    """Another full digest with the same 12-hex prefix (what a 48-bit collision looks like)."""
    return digest[:-1] + ("0" if digest[-1] != "0" else "1")


def _compacted_twin(session: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> ArtifactReference:
    """An artifact whose live (PREPARED) lease names another full digest with its prefix,
    compacted into the snapshot; the journal file holds no record of it any more."""
    ref = _externalized(session)
    claim = ArtifactRetentionClaim(
        source_id=ref.source.source_id, content_sha256=_twin(ref.content_sha256)
    )
    journal = ArtifactRetentionJournal(session)
    with monkeypatch.context() as patch:  # the journal's own check would refuse the claim
        patch.setattr(ArtifactRetentionJournal, "_verify_artifact", lambda self, claim: None)
        journal.prepare(claim, "t1")
    journal.compact()
    assert ref.source.source_id.encode() not in pathlib.Path(journal.path).read_bytes()
    return ref


def test_a_bare_id_read_refuses_a_file_a_compacted_live_lease_does_not_match(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The full digest of a live lease compacted into the snapshot is still the evidence."""
    session = tmp_path / "sess"
    ref = _compacted_twin(session, monkeypatch)
    ext = ToolResultExternalizer(session, environ={})
    with pytest.raises(ArtifactIntegrityError, match="lease t1"):
        ext.read_artifact(ref.source.source_id)


def test_the_refusal_needs_the_snapshot_search(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mutant: a reader that searches only the journal file reads the file by its prefix,
    so the test above would fail without the snapshot search."""
    session = tmp_path / "sess"
    ref = _compacted_twin(session, monkeypatch)
    monkeypatch.setattr(_JournalDigests, "_in_snapshot", lambda self, source_id: False)
    ext = ToolResultExternalizer(session, environ={})
    assert ext.read_artifact(ref.source.source_id, 0, 1) == "build output\n"


def test_an_id_the_snapshot_does_not_name_does_not_verify_the_journal(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reads stay cheap after a compaction: an id neither the tail nor the snapshot names is
    read by its prefix, the journal is never opened, and the snapshot is searched once."""
    session = tmp_path / "sess"
    _compacted_twin(session, monkeypatch)
    plain = _externalized(session, b"other output\n" * 40)
    opened: list[object] = []
    searched: list[str] = []
    real_search = _JournalDigests._search

    def counting_search(self: Any, path: str, source_id: str, start: int) -> Any:
        searched.append(path)
        return real_search(self, path, source_id, start)

    monkeypatch.setattr(ArtifactRetentionJournal, "__init__", lambda *a, **k: opened.append(a))
    monkeypatch.setattr(_JournalDigests, "_search", counting_search)
    ext = ToolResultExternalizer(session, environ={})
    for _ in range(3):
        assert ext.read_artifact(plain.source.source_id, 0, 1) == "other output\n"
    assert opened == []
    assert [p for p in searched if ".journal-snapshot-" in p] == [
        str(session / ".journal-snapshot-1")
    ]


_PROBE = """
import json, sys
from toolswap.cli import main
code = main(sys.argv[1:])
sys.stdout.flush()
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def test_a_page_read_after_a_compaction_keeps_the_import_budget(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`toolswap read` of an id the snapshot does not name searches the snapshot as bytes:
    it imports neither the journal nor the compaction code (tests/cli/test_import_budget.py)."""
    session = tmp_path / "sess"
    _compacted_twin(session, monkeypatch)
    plain = _externalized(session, b"other output\n" * 40)
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, "read", plain.source.source_id, "--session", str(session)],
        capture_output=True,
        text=True,
        check=False,
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    assert report["code"] == 0
    loaded = set(report["modules"])
    assert not loaded & {"toolswap.journal", "toolswap.journal_compaction", "toolswap.spec"}
