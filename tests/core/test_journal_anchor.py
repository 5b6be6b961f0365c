"""Missing evidence is not "no leases": the journal anchor makes cleanup refuse (S1).

With a COMMITTED and a PREPARED lease in the journal, emptying or deleting the
journal used to make ``gc apply`` delete both leased artifacts, because a
fresh process read the session as one that never had a lease.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from toolswap import (
    ArtifactRetentionClaim,
    ArtifactRetentionJournal,
    JournalRequiredError,
    ToolResultExternalizer,
)
from toolswap.cleanup import (
    ArtifactCleanupPolicy,
    apply_cleanup_from_journal,
    plan_cleanup,
    plan_cleanup_from_journal,
)
from toolswap.errors import CorruptStateError
from toolswap.fs import REAL_FS
from toolswap.journal_anchor import ANCHOR_NAME, JournalAnchor
from toolswap.journal_format import JournalCorruptError
from toolswap.owner import owner_publisher
from toolswap.owners.memory import InMemoryOwner
from toolswap.session import SessionPaths


def _leased_session(tmp_path: Path) -> Path:
    """A session with one COMMITTED and one PREPARED lease, each on its own artifact."""
    session = tmp_path / "s"
    ext = ToolResultExternalizer(session)
    journal, owner = ArtifactRetentionJournal(session), InMemoryOwner()
    for txn in ("committed", "prepared"):
        ref = ext.externalize(f"{txn}\n" * 40_000, "bash").artifact
        assert ref is not None
        claim = ArtifactRetentionClaim.from_memory_reference(ref.for_memory())
        if txn == "committed":
            journal.publish_reference(claim, owner_publisher(owner, txn, claim), transaction_id=txn)
        else:
            journal.prepare(claim, txn)
    return session


def _gc_apply(session: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "toolswap.cli",
            "gc",
            "apply",
            "--yes",
            "--ttl",
            "0s",
            "--session",
            str(session),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _artifacts(session: Path) -> list[str]:
    return sorted(p.name for p in (session / "tool-results").iterdir())


@pytest.mark.parametrize("how", ["emptied", "deleted"])
def test_cleanup_refuses_when_the_journal_is_gone_and_keeps_every_artifact(
    tmp_path: Path, how: str
) -> None:
    session = _leased_session(tmp_path)
    before = _artifacts(session)
    journal = session / "retention-leases.jsonl"
    if how == "emptied":
        journal.write_bytes(b"")
    else:
        journal.unlink()
    done = _gc_apply(session)
    assert done.returncode == 2
    assert ".journal-anchor says it held at least 1 record" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert _artifacts(session) == before


def test_cleanup_refuses_a_journal_cut_back_below_what_it_once_verified(tmp_path: Path) -> None:
    session = _leased_session(tmp_path)
    assert _gc_apply(session).returncode == 0  # verifies 3 records and raises the anchor
    assert JournalAnchor(SessionPaths.at(session), REAL_FS).expected() == 3
    journal = session / "retention-leases.jsonl"
    lines = journal.read_bytes().splitlines(keepends=True)
    journal.write_bytes(b"".join(lines[:2]))  # a valid, shorter chain: the PREPARED lease gone
    before = _artifacts(session)
    done = _gc_apply(session)
    assert done.returncode == 2 and "shrank" in done.stderr
    assert _artifacts(session) == before


def test_a_torn_tail_is_not_a_cut_back_journal(tmp_path: Path) -> None:
    session = _leased_session(tmp_path)
    with (session / "retention-leases.jsonl").open("ab") as out:
        out.write(b'{"version": 1, "seq')  # a crash inside the next append
    assert ArtifactRetentionJournal(session).recover().record_count == 3


def test_raw_claims_cleanup_refuses_a_session_that_had_a_journal(tmp_path: Path) -> None:
    session = _leased_session(tmp_path)
    (session / "retention-leases.jsonl").unlink()
    with pytest.raises(JournalRequiredError, match="has had one"):
        plan_cleanup(SessionPaths.at(session), [], policy=ArtifactCleanupPolicy())


def test_every_reader_refuses_a_vanished_journal_not_only_cleanup(tmp_path: Path) -> None:
    session = _leased_session(tmp_path)
    (session / "retention-leases.jsonl").unlink()
    with pytest.raises(JournalCorruptError, match="vanished"):
        ArtifactRetentionJournal(session).recover()


def test_a_session_that_never_had_a_journal_needs_no_anchor(tmp_path: Path) -> None:
    session = tmp_path / "fresh"
    ToolResultExternalizer(session).externalize("x\n" * 40_000, "bash")
    assert not (session / ANCHOR_NAME).exists()
    assert ArtifactRetentionJournal(session).recover().record_count == 0
    assert _gc_apply(session).returncode == 0


def test_a_corrupt_anchor_refuses_rather_than_guess(tmp_path: Path) -> None:
    session = _leased_session(tmp_path)
    (session / ANCHOR_NAME).write_bytes(b"three\n")
    with pytest.raises(CorruptStateError, match="not a number"):
        ArtifactRetentionJournal(session).recover()


def test_without_the_anchor_the_emptied_journal_would_lose_both_artifacts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mutant: no anchor is ever written.  The test above must then fail (it does here)."""
    monkeypatch.setattr(JournalAnchor, "raise_to", lambda self, records: None)
    session = _leased_session(tmp_path)
    (session / "retention-leases.jsonl").write_bytes(b"")
    from toolswap.cleanup import (
        ArtifactCleanupPolicy,
    )

    paths, journal = SessionPaths.at(session), ArtifactRetentionJournal(session)
    policy = ArtifactCleanupPolicy(orphan_ttl_seconds=0, dry_run=False)
    plan = plan_cleanup_from_journal(paths, journal, policy=policy, now=10**12)
    apply_cleanup_from_journal(paths, plan, journal, now=10**12)
    assert _artifacts(session) == []
