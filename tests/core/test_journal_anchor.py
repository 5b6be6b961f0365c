"""Missing evidence is not "no leases": the journal anchor makes cleanup refuse (S1).

With a COMMITTED and a PREPARED lease in the journal, emptying or deleting the
journal used to make ``gc apply`` delete both leased artifacts, because a
fresh process read the session as one that never had a lease.
"""

from __future__ import annotations

import contextlib
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
from toolswap.fs import REAL_FS, OsFileSystem
from toolswap.journal_anchor import (
    ANCHOR_NAME,
    COMPACT_AT_BYTES,
    MAX_ANCHOR_BYTES,
    RAISE_EVERY_RECORDS,
    RAISE_EVERY_SECONDS,
    JournalAnchor,
)
from toolswap.journal_format import JournalCorruptError
from toolswap.owner import owner_publisher
from toolswap.owners.memory import InMemoryOwner
from toolswap.session import SessionPaths

from ._journal_support import Clock, make_artifact


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


# -- the anchor follows a long-lived journal object (issue 31) -------------------------
#
# The anchor used to be written once per journal object, at its first append:
# a publisher that kept one object for weeks left it at 1, and a journal cut
# back (or an older copy restored) before any cleanup lost the leases above it.


def _publish_days_apart(session: Path, count: int, copy_after: int) -> bytes:
    """One journal object publishes ``count`` references a day apart; returns the
    journal as it was after ``copy_after`` publications (an older copy)."""
    ext = ToolResultExternalizer(session)
    clock = Clock()
    journal, owner = ArtifactRetentionJournal(session, clock=clock), InMemoryOwner()
    older = b""
    for index in range(count):
        ref = ext.externalize(f"artifact {index}\n" * 40_000, "bash").artifact
        assert ref is not None
        claim = ArtifactRetentionClaim.from_memory_reference(ref.for_memory())
        txn = f"ref{index}"
        journal.publish_reference(claim, owner_publisher(owner, txn, claim), transaction_id=txn)
        if index + 1 == copy_after:
            older = Path(journal.path).read_bytes()
        clock.now += 86_400
    return older


@pytest.mark.parametrize("tamper", ["cut back", "older copy restored"])
def test_a_long_lived_publishers_journal_cut_back_is_refused_and_every_artifact_kept(
    tmp_path: Path, tamper: str
) -> None:
    session = tmp_path / "s"
    older = _publish_days_apart(session, 6, copy_after=3)
    journal = session / "retention-leases.jsonl"
    if tamper == "cut back":  # at a record boundary: a valid, shorter chain
        journal.write_bytes(b"".join(journal.read_bytes().splitlines(keepends=True)[:2]))
    else:
        journal.write_bytes(older)
    before = _artifacts(session)
    assert len(before) == 6
    done = _gc_apply(session)
    assert done.returncode == 2 and "shrank" in done.stderr, done.stderr
    assert _artifacts(session) == before


def test_a_burst_of_appends_leaves_fewer_records_than_the_window_above_the_anchor(
    tmp_path: Path,
) -> None:
    session = tmp_path / "s"
    claim = make_artifact(session)
    journal = ArtifactRetentionJournal(session, clock=Clock())  # the clock never moves
    anchor = JournalAnchor(SessionPaths.at(session), REAL_FS)
    for index in range(3 * RAISE_EVERY_RECORDS):
        journal.prepare(claim, f"t{index}")
        records = index + 1
        assert records - anchor.expected() < RAISE_EVERY_RECORDS, records


def test_a_publisher_slower_than_the_time_window_leaves_no_record_above_the_anchor(
    tmp_path: Path,
) -> None:
    session = tmp_path / "s"
    claim = make_artifact(session)
    clock = Clock()
    journal = ArtifactRetentionJournal(session, clock=clock)
    anchor = JournalAnchor(SessionPaths.at(session), REAL_FS)
    for index in range(5):
        clock.now += RAISE_EVERY_SECONDS
        journal.prepare(claim, f"t{index}")
        assert anchor.expected() == index + 1


class _AnchorWrites(OsFileSystem):
    """The real seam, counting the appends to the anchor."""

    def __init__(self) -> None:
        self.anchor_writes = 0
        self._anchor_handles: set[int] = set()

    def open_append(self, path: str, mode: int = 0o600) -> int:
        handle = super().open_append(path, mode)
        if path.endswith(ANCHOR_NAME):
            self._anchor_handles.add(handle)
        return handle

    def write(self, handle: int, data: bytes) -> None:
        self.anchor_writes += handle in self._anchor_handles
        super().write(handle, data)

    def close(self, handle: int) -> None:
        self._anchor_handles.discard(handle)
        super().close(handle)


def test_a_burst_pays_one_anchor_append_per_window_of_records(tmp_path: Path) -> None:
    session = tmp_path / "s"
    claim = make_artifact(session)
    fs = _AnchorWrites()
    journal = ArtifactRetentionJournal(session, fs=fs, clock=Clock())
    for index in range(2 * RAISE_EVERY_RECORDS + 1):
        journal.prepare(claim, f"t{index}")
    # the first append, then one per RAISE_EVERY_RECORDS records: 1, 17, 33
    assert fs.anchor_writes == 3


# -- a lowered anchor is refused on read (its numbers only grow) -----------------------


def _anchor(session: Path) -> Path:
    return session / ANCHOR_NAME


def test_a_number_below_the_one_before_it_is_refused(tmp_path: Path) -> None:
    session = _leased_session(tmp_path)
    _anchor(session).write_bytes(b"3\n1\n")  # "1" appended after "3"
    with pytest.raises(CorruptStateError, match="went down from 3 to 1"):
        ArtifactRetentionJournal(session).recover()


def test_a_journal_object_refuses_an_anchor_rewritten_below_what_it_read(
    tmp_path: Path,
) -> None:
    session = _leased_session(tmp_path)
    journal = ArtifactRetentionJournal(session)  # reads the anchor at open: 3
    journal.anchor_verified()
    _anchor(session).write_bytes(b"1\n")  # a whole, increasing file, but lower
    with pytest.raises(CorruptStateError, match="lowered"):
        journal.anchor_verified()


def test_a_journal_object_refuses_an_anchor_lowered_when_it_verifies_again(
    tmp_path: Path,
) -> None:
    session = _leased_session(tmp_path)
    journal = ArtifactRetentionJournal(session)
    journal.recover()
    journal.anchor_verified()  # the anchor now says 3, and this object knows it
    _anchor(session).write_bytes(b"1\n")
    with pytest.raises(CorruptStateError, match="lowered"):
        journal.recover()  # every later recover() verifies in full, anchor included


def test_a_journal_object_refuses_an_anchor_deleted_since_it_read_it(tmp_path: Path) -> None:
    session = _leased_session(tmp_path)
    journal = ArtifactRetentionJournal(session)
    journal.anchor_verified()
    _anchor(session).unlink()
    with pytest.raises(CorruptStateError, match="is gone"):
        journal.anchor_verified()
    assert not _anchor(session).exists(), "nothing is repaired"


def test_a_last_piece_that_cannot_be_a_torn_number_is_refused(tmp_path: Path) -> None:
    session = _leased_session(tmp_path)
    _anchor(session).write_bytes(b"1\n0x")
    with pytest.raises(CorruptStateError, match="not a torn number"):
        ArtifactRetentionJournal(session).recover()


def test_a_number_with_more_digits_than_any_count_is_refused(tmp_path: Path) -> None:
    session = _leased_session(tmp_path)
    _anchor(session).write_bytes(b"1\n" + b"9" * 5000 + b"\n")  # int() would refuse it too
    with pytest.raises(CorruptStateError, match="is not a number"):
        ArtifactRetentionJournal(session).recover()


class _CountingReads(OsFileSystem):
    def __init__(self) -> None:
        self.read_bytes = 0

    def pread(self, handle: int, size: int, offset: int) -> bytes:
        data = super().pread(handle, size, offset)
        self.read_bytes += len(data)
        return data


def test_an_anchor_longer_than_toolswap_ever_writes_is_refused_unread(tmp_path: Path) -> None:
    session = _leased_session(tmp_path)
    ArtifactRetentionJournal(session).recover()  # verified before the anchor grows
    _anchor(session).write_bytes(b"1\n" * (MAX_ANCHOR_BYTES // 2 + 1))
    fs = _CountingReads()
    anchor = JournalAnchor(SessionPaths.at(session), fs)
    with pytest.raises(CorruptStateError, match="more than toolswap ever writes"):
        anchor.expected()
    assert fs.read_bytes == 0


# -- the file stays small: a raise past COMPACT_AT_BYTES rewrites it as one line -------


def _long_anchor(session: Path) -> bytes:
    """Valid lines (none above the journal's 3 records) past the compaction size."""
    content = b"1\n" * (COMPACT_AT_BYTES // 2 + 1)
    _anchor(session).write_bytes(content)
    return content


def test_a_raise_past_the_compaction_size_leaves_one_line(tmp_path: Path) -> None:
    session = _leased_session(tmp_path)
    _long_anchor(session)
    ArtifactRetentionJournal(session).anchor_verified()
    assert _anchor(session).read_bytes() == b"3\n"


def test_compaction_replaces_what_a_compaction_that_died_left(tmp_path: Path) -> None:
    session = _leased_session(tmp_path)
    _long_anchor(session)
    (session / (ANCHOR_NAME + ".new")).write_bytes(b"999\n")  # never renamed over the anchor
    ArtifactRetentionJournal(session).anchor_verified()
    assert _anchor(session).read_bytes() == b"3\n"
    assert not (session / (ANCHOR_NAME + ".new")).exists()


def test_a_crash_anywhere_in_a_compaction_leaves_the_anchor_at_least_where_it_was() -> None:
    from toolswap.faultinject.disk import CRASH_MODES, SimulatedCrash, SimulatedDisk

    root = "/s"
    paths = SessionPaths.at(root)
    anchor_path = f"{root}/{ANCHOR_NAME}"

    def world() -> SimulatedDisk:
        disk = SimulatedDisk()
        disk.makedirs(root)
        disk.put_file(anchor_path, b"1\n" * (COMPACT_AT_BYTES // 2) + b"2\n")
        return disk

    calm = world()
    before = calm.io_count
    JournalAnchor(paths, calm).raise_to(3)
    assert calm.read_file(anchor_path) == b"3\n", "the run compacts"
    operations = calm.io_count - before
    for k in range(1, operations + 2):
        for mode in CRASH_MODES:
            disk = world()
            disk.arm_io(k)
            with contextlib.suppress(SimulatedCrash):
                JournalAnchor(paths, disk).raise_to(3)
            disk.crash(mode, k)
            assert JournalAnchor(paths, disk).expected() >= 2, (k, mode)


def test_a_clock_set_back_makes_the_next_append_raise_the_anchor(tmp_path: Path) -> None:
    session = tmp_path / "s"
    claim = make_artifact(session)
    clock = Clock()
    journal = ArtifactRetentionJournal(session, clock=clock)
    journal.prepare(claim, "t0")
    journal.prepare(claim, "t1")  # neither window has passed: not raised
    clock.now -= 3600
    journal.prepare(claim, "t2")
    assert JournalAnchor(SessionPaths.at(session), REAL_FS).expected() == 3
