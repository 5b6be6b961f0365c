"""Real-process kills: a child dies at a named crash point, the parent recovers on the real disk.

The child runs :func:`workflow` (externalize, publish, a rejected publish, a
reconciled abort, remove, an append after a torn tail, a compaction, GC) with
``TOOLSWAP_FAILPOINT`` naming one crash point, and dies there with
``os._exit`` or SIGKILL (``TOOLSWAP_FAILPOINT_MODE``).  The parent then
recovers with fresh objects -- the journal, a new :class:`SQLiteOwner` on the
same database, journal-aware GC with the orphan TTL expired (once while leases
may still be pending, once after reconciliation) -- and checks the invariants
on what is on disk.

Run as a script (``python test_process_kill.py SESSION DB``) this file is the child.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import attrs
import pytest
from toolswap.faultinject.explorer import known_crash_points
from toolswap.faultinject.mutants import mutant_named
from toolswap.spec.lease import LeaseState

from toolswap.cleanup import ArtifactCleanupPolicy
from toolswap.domain import ArtifactReference, ArtifactRetentionClaim, parse_source_id
from toolswap.externalizer import ToolResultExternalizer
from toolswap.fs import FAILPOINT_EXIT_STATUS, REAL_FS, FileSystem, OsFileSystem
from toolswap.journal import ArtifactRetentionJournal
from toolswap.journal_format import JournalCorruptError
from toolswap.owner import ArtifactPublicationRejected, owner_publisher, owner_remover
from toolswap.owners.sqlite import TABLE, SQLiteOwner

TTL = 86_400
SECRET = b"not ours\n"
REJECTED = "t2"  # the transaction whose publisher explicitly rejects (S3 allows ABORTED)


def _far() -> float:
    return time.time() + 30 * TTL  # every orphan is past its TTL


def _claim(ref: ArtifactReference | None) -> ArtifactRetentionClaim:
    assert ref is not None
    return ArtifactRetentionClaim.from_memory_reference(ref.for_memory())


def _reject() -> object:
    raise ArtifactPublicationRejected("the owner refuses this reference")


def _gc(ext: ToolResultExternalizer, journal: ArtifactRetentionJournal) -> None:
    policy = ArtifactCleanupPolicy(orphan_ttl_seconds=TTL, max_deletions=100, dry_run=False)
    plan = ext.plan_cleanup_from_journal(journal, policy=policy, now=_far())
    ext.apply_cleanup_from_journal(plan, journal, now=_far())


def workflow(session: str, db: str, fs: FileSystem = REAL_FS) -> None:
    """Pass every crash point of the core at least once."""
    ext = ToolResultExternalizer(session, fs=fs, threshold_bytes=1024, environ={})
    journal = ArtifactRetentionJournal(session, fs=fs)
    owner = SQLiteOwner(db)

    def output(n: int) -> list[bytes]:
        return [f"line {n}.{i}\n".encode() * 90 for i in range(3)]

    ext.externalize(output(1), "grep")  # an orphan for GC
    kept = _claim(ext.externalize(output(2), "grep").artifact)
    journal.publish_reference(kept, owner_publisher(owner, "t1", kept), "t1")
    other = _claim(ext.externalize(output(3), "grep").artifact)
    with contextlib.suppress(ArtifactPublicationRejected):
        journal.publish_reference(other, _reject, REJECTED)
    journal.prepare(other, "t3")  # its publisher never runs: reconciliation seals it
    journal.reconcile_pending(owner)
    journal.remove_reference("t1", owner_remover(owner, "t1"))
    with open(journal.path, "ab") as torn:  # what a crash inside an append leaves
        torn.write(b'{"version":1,"seq')
    journal = ArtifactRetentionJournal(session, fs=fs)
    journal.publish_reference(kept, owner_publisher(owner, "t4", kept), "t4")
    journal.compact()  # the settled history leaves the live file; t4's lease stays
    _gc(ext, journal)
    owner.close()


class _Recorder(OsFileSystem):
    def __init__(self) -> None:
        self.points: list[str] = []

    def crash_point(self, name: str) -> None:
        self.points.append(name)


MODES = ("exit", "sigkill")
POINTS = known_crash_points()


@attrs.frozen(kw_only=True)
class Killed:
    """The child's fate and what the parent found and did after it."""

    point: str
    mode: str
    returncode: int
    stderr: str
    outside: Path
    link: Path
    before: dict[str, bytes]  # artifact name -> bytes, right after the kill
    pending_before_gc: dict[str, ArtifactRetentionClaim]
    after_first_gc: dict[str, bytes]
    after: dict[str, bytes]  # after reconciliation and the second GC
    states: dict[str, LeaseState]
    intents: dict[str, ArtifactRetentionClaim]
    pending: tuple[str, ...]
    published: dict[str, tuple[str, str]]  # owner rows: txn -> (source id, digest)
    tombstoned: frozenset[str]
    new_name: str


def _artifacts(results: Path) -> dict[str, bytes]:
    if not results.is_dir():
        return {}
    return {
        p.name: p.read_bytes()
        for p in sorted(results.iterdir())
        if p.name.startswith("tool_result_") and not p.is_symlink() and p.is_file()
    }


def _owner_rows(db: Path) -> tuple[dict[str, tuple[str, str]], frozenset[str]]:
    connection = sqlite3.connect(db)
    try:
        rows = connection.execute(
            f"SELECT transaction_id, kind, source_id, content_sha256 FROM {TABLE}"
        ).fetchall()
    finally:
        connection.close()
    published = {txn: (source, digest) for txn, kind, source, digest in rows if kind == "published"}
    return published, frozenset(txn for txn, kind, _, _ in rows if kind == "tombstone")


def _run_and_recover(root: Path, point: str, mode: str) -> Killed:
    session = root / "s1"
    results = session / "tool-results"
    outside = root / "outside" / "secret.txt"
    outside.parent.mkdir(parents=True)
    outside.write_bytes(SECRET)
    results.mkdir(parents=True, mode=0o700)
    link = results / "tool_result_900.txt"  # an artifact name GC must never follow
    link.symlink_to(outside)
    db = root / "owner.sqlite"
    env = {"TOOLSWAP_FAILPOINT": point, "TOOLSWAP_FAILPOINT_MODE": mode}
    child = _child(root, **env)
    before = _artifacts(results)
    # fresh objects over what the kill left
    journal = ArtifactRetentionJournal(session)
    ext = ToolResultExternalizer(session, threshold_bytes=1024, environ={})
    recovery = journal.recover()
    pending_before_gc = {t: recovery.transactions[t] for t in recovery.pending_transaction_ids}
    _gc(ext, journal)  # pending leases must protect, whatever the TTL
    after_first_gc = _artifacts(results)
    with SQLiteOwner(db) as owner:
        journal.reconcile_pending(owner)
    _gc(ext, journal)
    final = journal.recover()
    published, tombstoned = _owner_rows(db)
    after = _artifacts(results)
    new_ref = ext.externalize([b"after the kill\n" * 100], "grep").artifact
    assert new_ref is not None
    return Killed(
        point=point,
        mode=mode,
        returncode=child.returncode,
        stderr=child.stderr,
        outside=outside,
        link=link,
        before=before,
        pending_before_gc=pending_before_gc,
        after_first_gc=after_first_gc,
        after=after,
        states=dict(final.states),
        intents=dict(final.transactions),
        pending=final.pending_transaction_ids,
        published=published,
        tombstoned=tombstoned,
        new_name=os.path.basename(new_ref.path),
    )


@pytest.fixture(
    scope="module",
    params=[(p, m) for p in POINTS for m in MODES],
    ids=[f"{p}-{m}" for p in POINTS for m in MODES],
)
def killed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Killed:
    point, mode = request.param
    return _run_and_recover(tmp_path_factory.mktemp("kill"), point, mode)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _filename(source_id: str) -> str:
    return parse_source_id(source_id).filename


def test_the_workflow_passes_every_crash_point_of_the_core(tmp_path: Path) -> None:
    recorder = _Recorder()
    workflow(str(tmp_path / "s1"), str(tmp_path / "owner.sqlite"), fs=recorder)
    assert set(POINTS) <= set(recorder.points), sorted(set(POINTS) - set(recorder.points))


def test_the_child_died_at_the_failpoint(killed: Killed) -> None:
    expected = FAILPOINT_EXIT_STATUS if killed.mode == "exit" else -signal.SIGKILL
    assert killed.returncode == expected, killed.stderr[-2000:]


def test_s1_pending_leases_protect_their_artifacts_from_gc_past_the_ttl(killed: Killed) -> None:
    for txn, claim in killed.pending_before_gc.items():
        data = killed.after_first_gc.get(_filename(claim.source_id))
        assert data is not None and _sha(data) == claim.content_sha256, txn


def test_s1_every_owner_visible_reference_names_an_intact_artifact(killed: Killed) -> None:
    for txn, (source, digest) in killed.published.items():
        data = killed.after.get(_filename(source))
        assert data is not None and _sha(data) == digest, txn


def test_s2_every_owner_visible_reference_was_prepared_in_the_journal(killed: Killed) -> None:
    assert set(killed.published) <= set(killed.intents)


def test_s3_every_aborted_lease_is_tombstoned_or_was_rejected(killed: Killed) -> None:
    aborted = {t for t, p in killed.states.items() if p is LeaseState.ABORTED}
    assert aborted <= killed.tombstoned | {REJECTED}


def test_s4_no_released_lease_is_still_visible_in_the_owner(killed: Killed) -> None:
    released = {t for t, p in killed.states.items() if p is LeaseState.RELEASED}
    assert not released & set(killed.published)


def test_s6_surviving_artifacts_kept_their_bytes(killed: Killed) -> None:
    changed = [n for n, data in killed.after.items() if killed.before.get(n, data) != data]
    assert changed == []


def test_s6_a_new_artifact_after_recovery_takes_a_fresh_name(killed: Killed) -> None:
    used = set(killed.before) | {_filename(c.source_id) for c in killed.intents.values()}
    assert killed.new_name not in used


def test_s7_nothing_outside_the_session_was_touched(killed: Killed) -> None:
    assert killed.outside.read_bytes() == SECRET
    assert killed.link.is_symlink() and os.readlink(killed.link) == str(killed.outside)


def test_l1_with_the_owner_answering_no_lease_stays_pending(killed: Killed) -> None:
    assert killed.pending == ()


def test_l1_gc_leaves_no_unreferenced_artifact_past_its_ttl(killed: Killed) -> None:
    live = {
        _filename(killed.intents[t].source_id)
        for t, p in killed.states.items()
        if p in {LeaseState.PREPARED, LeaseState.COMMITTED}
    }
    assert set(killed.after) <= live


def _child(root: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, __file__, str(root / "s1"), str(root / "owner.sqlite")],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_failpoint_with_a_count_dies_at_that_pass(tmp_path: Path) -> None:
    child = _child(tmp_path, TOOLSWAP_FAILPOINT="journal.after_fsync#2")
    assert child.returncode == FAILPOINT_EXIT_STATUS
    assert (tmp_path / "s1" / "retention-leases.jsonl").read_bytes().count(b"\n") == 2


def test_a_malformed_failpoint_mode_is_a_clear_error(tmp_path: Path) -> None:
    child = _child(tmp_path, TOOLSWAP_FAILPOINT="journal.after_fsync", TOOLSWAP_FAILPOINT_MODE="x")
    assert child.returncode == 1 and "TOOLSWAP_FAILPOINT_MODE" in child.stderr


def test_an_unknown_failpoint_name_is_refused_not_ignored(tmp_path: Path) -> None:
    child = _child(tmp_path, TOOLSWAP_FAILPOINT="journal.after_fsynk")
    assert child.returncode == 1 and "no known crash point: 'journal.after_fsynk'" in child.stderr
    assert not (tmp_path / "s1" / "retention-leases.jsonl").exists()


# -- the checks can fail: a mutant switched into the parent's recovery is caught ----------


def test_an_abort_without_tombstone_in_recovery_fails_the_s3_check(tmp_path: Path) -> None:
    with mutant_named("abort_without_tombstone").active():
        found = _run_and_recover(tmp_path, "publish.after_prepared", "exit")
    with pytest.raises(AssertionError):
        test_s3_every_aborted_lease_is_tombstoned_or_was_rejected(found)


def test_a_splitlines_reader_in_recovery_refuses_the_torn_tail(tmp_path: Path) -> None:
    with mutant_named("splitlines_journal").active(), pytest.raises(JournalCorruptError):
        _run_and_recover(tmp_path, "journal.before_truncate", "exit")


if __name__ == "__main__":
    workflow(sys.argv[1], sys.argv[2])
