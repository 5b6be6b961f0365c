"""S6: the durable high-water mark never hands out a name twice."""

from __future__ import annotations

import os
import pathlib

import pytest

from toolswap.errors import CorruptStateError
from toolswap.externalizer import ToolResultExternalizer
from toolswap.fs import REAL_FS
from toolswap.high_water import HIGH_WATER_NAME, ArtifactHighWaterMark
from toolswap.session import SessionPaths

from ._artifacts import lines

BIG = lines(4000)


def _ext(tmp_path: pathlib.Path) -> ToolResultExternalizer:
    return ToolResultExternalizer(tmp_path / "sess", environ={})


def _name(ext: ToolResultExternalizer, data: bytes) -> str:
    result = ext.externalize(data, "bash")
    assert result.artifact is not None
    return os.path.basename(result.artifact.path)


def _mark(tmp_path: pathlib.Path) -> pathlib.Path:
    return tmp_path / "sess" / HIGH_WATER_NAME


def test_a_deleted_highest_name_is_not_reused_after_a_restart(tmp_path: pathlib.Path) -> None:
    ext = _ext(tmp_path)
    _name(ext, BIG)
    second = _name(ext, BIG + b"two\n")
    os.unlink(os.path.join(ext.tool_results_dir, second))  # what cleanup does to an orphan
    assert _name(_ext(tmp_path), BIG + b"three\n") == "tool_result_003.txt"


def test_the_mark_records_every_name_in_order(tmp_path: pathlib.Path) -> None:
    ext = _ext(tmp_path)
    for i in range(3):
        _name(ext, BIG + b"%d\n" % i)
    assert _mark(tmp_path).read_bytes() == b"1\n2\n3\n"


def test_a_torn_last_line_is_cut_before_the_next_append(tmp_path: pathlib.Path) -> None:
    ext = _ext(tmp_path)
    _name(ext, BIG)
    with _mark(tmp_path).open("ab") as mark:
        mark.write(b"2")  # a crash inside the append: never fsynced, name never created
    assert _name(_ext(tmp_path), BIG + b"again\n") == "tool_result_002.txt"
    assert _mark(tmp_path).read_bytes() == b"1\n2\n"


def test_only_the_tail_of_a_long_mark_is_read(tmp_path: pathlib.Path) -> None:
    sess = tmp_path / "sess"
    sess.mkdir()
    _mark(tmp_path).write_bytes(b"".join(b"%d\n" % n for n in range(1, 5001)))
    assert _name(_ext(tmp_path), BIG) == "tool_result_5001.txt"


def test_advance_goes_above_both_the_mark_and_the_directory(tmp_path: pathlib.Path) -> None:
    mark = ArtifactHighWaterMark(SessionPaths.at(tmp_path / "sess"), REAL_FS)
    (tmp_path / "sess").mkdir()
    assert mark.advance(0) == 1
    assert mark.advance(0) == 2
    assert mark.advance(10) == 11  # and the directory wins over an older mark


@pytest.mark.parametrize("content", [b"7\nseven\n", b"007\n", b"\n", b"-3\n", b"1\n\xff\n"])
def test_a_corrupt_mark_refuses_and_keeps_everything(
    tmp_path: pathlib.Path, content: bytes
) -> None:
    (tmp_path / "sess").mkdir()
    _mark(tmp_path).write_bytes(content)
    ext = _ext(tmp_path)
    with pytest.raises(CorruptStateError, match=HIGH_WATER_NAME):
        ext.externalize(BIG, "bash")
    assert _mark(tmp_path).read_bytes() == content
    assert not os.path.isdir(ext.tool_results_dir) or os.listdir(ext.tool_results_dir) == []


def test_a_mark_line_longer_than_the_tail_window_is_corrupt(tmp_path: pathlib.Path) -> None:
    (tmp_path / "sess").mkdir()
    _mark(tmp_path).write_bytes(b"1" * 200 + b"\n")
    with pytest.raises(CorruptStateError, match="too long"):
        _ext(tmp_path).externalize(BIG, "bash")


def test_a_symlinked_mark_is_refused(tmp_path: pathlib.Path) -> None:
    (tmp_path / "sess").mkdir()
    outside = tmp_path / "outside"
    outside.write_bytes(b"1\n")
    _mark(tmp_path).symlink_to(outside)
    with pytest.raises(CorruptStateError, match="regular file"):
        _ext(tmp_path).externalize(BIG, "bash")
    assert outside.read_bytes() == b"1\n"


# -- issue 14 item 3: a lost mark does not restart numbering ---------------------------


def _gc_everything(tmp_path: pathlib.Path) -> None:
    from toolswap.cleanup import ArtifactCleanupPolicy, apply_cleanup, plan_cleanup

    paths = SessionPaths.at(tmp_path / "sess")
    for name in os.listdir(paths.tool_results):
        os.utime(os.path.join(paths.tool_results, name), (0, 0))
    policy = ArtifactCleanupPolicy(orphan_ttl_seconds=0, max_deletions=100, dry_run=False)
    plan = plan_cleanup(paths, [], policy=policy)
    apply_cleanup(paths, plan, claims=[])
    assert os.listdir(paths.tool_results) == []


def test_a_name_deleted_by_gc_is_not_handed_out_after_the_mark_is_removed(
    tmp_path: pathlib.Path,
) -> None:
    ext = _ext(tmp_path)
    assert _name(ext, BIG) == "tool_result_001.txt"
    _gc_everything(tmp_path)
    _mark(tmp_path).unlink()
    assert _name(_ext(tmp_path), BIG + b"new\n") == "tool_result_002.txt"


def test_an_emptied_mark_is_reconstructed_too(tmp_path: pathlib.Path) -> None:
    ext = _ext(tmp_path)
    for i in range(3):
        _name(ext, BIG + b"%d\n" % i)
    _gc_everything(tmp_path)
    _mark(tmp_path).write_bytes(b"")
    assert _name(_ext(tmp_path), BIG + b"new\n") == "tool_result_004.txt"


def test_names_claimed_in_the_journal_are_not_handed_out_again(tmp_path: pathlib.Path) -> None:
    from toolswap.domain import ArtifactRetentionClaim
    from toolswap.journal import ArtifactRetentionJournal

    ext = _ext(tmp_path)
    result = ext.externalize(BIG, "bash")
    assert result.artifact is not None
    claim = ArtifactRetentionClaim.from_memory_reference(result.artifact.for_memory())
    ArtifactRetentionJournal(tmp_path / "sess").prepare(claim, "t1")
    os.unlink(result.artifact.path)  # gone by hand, outside cleanup: only the journal knows
    _mark(tmp_path).unlink()
    assert _name(_ext(tmp_path), BIG + b"new\n") == "tool_result_002.txt"


def test_a_journal_that_fails_verification_refuses_reconstruction(
    tmp_path: pathlib.Path,
) -> None:
    from toolswap.domain import ArtifactRetentionClaim
    from toolswap.journal import ArtifactRetentionJournal

    ext = _ext(tmp_path)
    result = ext.externalize(BIG, "bash")
    assert result.artifact is not None
    claim = ArtifactRetentionClaim.from_memory_reference(result.artifact.for_memory())
    ArtifactRetentionJournal(tmp_path / "sess").prepare(claim, "t1")
    journal = tmp_path / "sess" / "retention-leases.jsonl"
    journal.write_bytes(b"garbage\n" + journal.read_bytes())
    _mark(tmp_path).unlink()
    with pytest.raises(CorruptStateError, match="cannot be reconstructed"):
        _ext(tmp_path).externalize(BIG + b"new\n", "bash")
    assert os.listdir(ext.tool_results_dir) == ["tool_result_001.txt"]


def test_a_deleted_journal_with_an_anchor_refuses_reconstruction(tmp_path: pathlib.Path) -> None:
    from toolswap.domain import ArtifactRetentionClaim
    from toolswap.journal import ArtifactRetentionJournal

    ext = _ext(tmp_path)
    result = ext.externalize(BIG, "bash")
    assert result.artifact is not None
    claim = ArtifactRetentionClaim.from_memory_reference(result.artifact.for_memory())
    ArtifactRetentionJournal(tmp_path / "sess").prepare(claim, "t1")
    (tmp_path / "sess" / "retention-leases.jsonl").unlink()
    _mark(tmp_path).unlink()
    with pytest.raises(CorruptStateError, match="anchor"):
        _ext(tmp_path).externalize(BIG + b"new\n", "bash")


def test_a_corrupt_deletion_record_refuses_reconstruction(tmp_path: pathlib.Path) -> None:
    from toolswap.high_water import DELETED_NAME

    _name(_ext(tmp_path), BIG)
    _gc_everything(tmp_path)
    (tmp_path / "sess" / DELETED_NAME).write_bytes(b"one\n")
    _mark(tmp_path).unlink()
    with pytest.raises(CorruptStateError, match=DELETED_NAME):
        _ext(tmp_path).externalize(BIG + b"new\n", "bash")


def test_a_fresh_session_still_starts_at_one(tmp_path: pathlib.Path) -> None:
    assert _name(_ext(tmp_path), BIG) == "tool_result_001.txt"


def test_names_claimed_by_compacted_settled_leases_are_not_handed_out_again(
    tmp_path: pathlib.Path,
) -> None:
    """S6 after a compaction: a settled lease's intent leaves the live state, but the name it
    claimed (artifact 9) is remembered by the snapshot's artifact_high_water."""
    from toolswap.domain import ArtifactRetentionClaim
    from toolswap.high_water import DELETED_NAME
    from toolswap.journal import ArtifactRetentionJournal

    ext = _ext(tmp_path)
    for i in range(9):
        result = ext.externalize(BIG + b"%d\n" % i, "bash")
    assert result.artifact is not None and result.artifact.path.endswith("_009.txt")
    claim = ArtifactRetentionClaim.from_memory_reference(result.artifact.for_memory())
    journal = ArtifactRetentionJournal(tmp_path / "sess")
    journal.publish_reference(claim, lambda: None, "t9")
    journal.remove_reference("t9", lambda: None)
    journal.compact()
    assert journal.verified_intents() == {}  # the settled intent is in the archive only
    for name in os.listdir(ext.tool_results_dir):  # gone by hand: no deletion record
        os.unlink(os.path.join(ext.tool_results_dir, name))
    _mark(tmp_path).unlink()
    (tmp_path / "sess" / DELETED_NAME).unlink(missing_ok=True)
    assert _name(_ext(tmp_path), BIG + b"new\n") == "tool_result_010.txt"
