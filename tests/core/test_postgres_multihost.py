"""Several hosts, one Memory store: N processes against one PostgreSQL schema.

Each process is a host with its own session folder (artifacts and lease
journal).  All of them externalize, publish, remove and reconcile against the
same owner schema at the same time; some of their leases are left PREPARED on
purpose (a "crash" before or after the owner write), and one host is
SIGKILLed in the middle of a publish, at the COMMIT (before it is sent, or
after it reached the server).  Then every host's journal is reconciled, as a
restarted host would, and GC runs on every host with a zero TTL.

The claims checked afterwards:

* every lease is settled (COMMITTED, ABORTED or RELEASED), and consistently
  with the owner: COMMITTED <=> a visible reference with the lease's
  identity; ABORTED and RELEASED <=> a tombstone;
* the owner shows no reference that is not a COMMITTED lease, and none whose
  artifact is missing or altered;
* GC on every host deletes what is unreferenced and keeps every artifact a
  visible reference names.

The figures (processes, leases, kills, outcomes) are printed (``-s``).
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
from collections import Counter
from typing import Any

import pytest
from toolswap.spec.lease import LeaseState

from toolswap.cleanup import ArtifactCleanupPolicy
from toolswap.domain import ArtifactRetentionClaim, parse_source_id
from toolswap.externalizer import ToolResultExternalizer
from toolswap.journal import ArtifactRetentionJournal
from toolswap.owner import ObservedState, owner_publisher, owner_remover
from toolswap.owners.postgres import PostgresOwner

from .._postgres import require_psycopg

require_psycopg()  # skips the module without the driver; fails under CI
import psycopg  # noqa: E402

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

HOSTS = 4
LEASES = 60
VICTIM = 0
VICTIM_AT = 7  # the victim dies at its 7th owner publish
ROOT = pathlib.Path(__file__).resolve().parents[2]


def host(session: str, dsn: str, schema: str, index: int, victim_mode: str, marker: str) -> None:
    """One host's workload (run in a child process by the test)."""
    ext = ToolResultExternalizer(session, threshold_bytes=1, environ={})
    journal = ArtifactRetentionJournal(session)
    connection_class = None
    if victim_mode:
        connection_class = _victim_connection(victim_mode, marker)
    owner = PostgresOwner(dsn, schema=schema, connection_class=connection_class)
    for i in range(LEASES):
        result = ext.externalize(f"host {index} output {i}\n".encode() * 40, "bench")
        assert result.artifact is not None
        claim = ArtifactRetentionClaim.from_memory_reference(result.artifact.for_memory())
        txn = f"h{index}-t{i}"
        kind = i % 6
        if kind == 5:  # crashed after PREPARED, before the owner write
            journal.prepare(claim, txn)
        elif kind == 4:  # crashed after the owner write, before COMMITTED
            journal.prepare(claim, txn)
            owner.publish(txn, claim)
        else:
            journal.publish_reference(claim, owner_publisher(owner, txn, claim), txn)
            if kind in (1, 3):
                journal.remove_reference(txn, owner_remover(owner, txn))
        if i % 9 == 8:
            journal.reconcile_pending(owner)
    owner.close()


def _victim_connection(mode: str, marker: str) -> type[psycopg.Connection[Any]]:
    """Stops the process at the COMMIT of its VICTIM_AT-th publish and waits to be killed."""
    seen = [0]

    def stop_here() -> None:
        pathlib.Path(marker).write_text("ready")
        time.sleep(120)  # SIGKILL arrives here

    class Victim(psycopg.Connection[Any]):
        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            publishing = isinstance(query, str) and "'published'" in query
            if publishing:
                seen[0] += 1
            at_commit = isinstance(query, str) and query == "COMMIT" and seen[0] == VICTIM_AT
            if at_commit and mode == "before-commit":
                stop_here()
            result = super().execute(query, params, **kwargs)
            if at_commit and mode == "after-commit":
                stop_here()
            return result

    return Victim


def _spawn(tmp_path: pathlib.Path, dsn: str, schema: str, index: int, mode: str) -> Any:
    marker = str(tmp_path / f"victim-{index}.ready")
    code = (
        "import sys; from tests.core.test_postgres_multihost import host; "
        "host(*sys.argv[1:4], int(sys.argv[4]), sys.argv[5], sys.argv[6])"
    )
    session = str(tmp_path / f"host{index}")
    args = [sys.executable, "-c", code, session, dsn, schema, str(index), mode, marker]
    return subprocess.Popen(args, cwd=ROOT, stderr=subprocess.PIPE, text=True), marker


@pytest.mark.parametrize("kill_at", ["before-commit", "after-commit"])
def test_hosts_share_one_store_and_survive_a_kill_mid_publish(
    pg_dsn: str, pg_schema: str, tmp_path: pathlib.Path, kill_at: str
) -> None:
    started = time.monotonic()
    children = [
        _spawn(tmp_path, pg_dsn, pg_schema, n, kill_at if n == VICTIM else "") for n in range(HOSTS)
    ]
    victim, marker = children[VICTIM]
    deadline = time.monotonic() + 120
    while not os.path.exists(marker):
        assert victim.poll() is None, victim.stderr.read()
        assert time.monotonic() < deadline, "the victim never reached its publish"
        time.sleep(0.01)
    victim.send_signal(signal.SIGKILL)
    for n, (child, _) in enumerate(children):
        _, err = child.communicate(timeout=300)
        if n == VICTIM:
            assert child.returncode == -signal.SIGKILL
        else:
            assert child.returncode == 0, err
    concurrent = time.monotonic() - started

    # Every host restarts and reconciles its own journal against the shared store.
    sessions = [tmp_path / f"host{n}" for n in range(HOSTS)]
    journals = [ArtifactRetentionJournal(s) for s in sessions]
    with PostgresOwner(pg_dsn, schema=pg_schema) as owner:
        reports = [r for j in journals for r in j.reconcile_pending(owner)]
        states = {t: p for j in journals for t, p in j.recover().states.items()}
        claims = {t: c for j in journals for t, c in j.recover().transactions.items()}

        # Settled, and consistent with the owner.
        assert Counter(states.values())[LeaseState.PREPARED] == 0
        for txn, phase in states.items():
            with owner.inspect_fenced(txn) as seen:
                if phase is LeaseState.COMMITTED:
                    assert seen.state is ObservedState.PUBLISHED, txn
                    assert (seen.source_id, seen.content_sha256) == (
                        claims[txn].source_id,
                        claims[txn].content_sha256,
                    ), txn
                else:
                    assert (seen.state, seen.sealed) == (ObservedState.ABSENT, True), txn

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT transaction_id, source_id, content_sha256 "
            f"FROM {pg_schema}.toolswap_references WHERE kind = 'published'"
        ).fetchall()
    visible = {bytes(t).decode(): (s, d) for t, s, d in rows}
    assert {t for t, p in states.items() if p is LeaseState.COMMITTED} == set(visible)

    # GC on every host, then every visible reference still has its artifact.
    deleted = 0
    for session in sessions:
        ext = ToolResultExternalizer(session, threshold_bytes=1, environ={})
        journal = ArtifactRetentionJournal(session)
        policy = ArtifactCleanupPolicy(orphan_ttl_seconds=0, max_deletions=10_000, dry_run=False)
        plan = ext.plan_cleanup_from_journal(journal, policy=policy, now=time.time() + 10)
        deleted += len(ext.apply_cleanup_from_journal(plan, journal, now=time.time() + 10).deleted)
    for txn, (source_id, digest) in visible.items():
        parsed = parse_source_id(source_id)
        path = tmp_path / parsed.session_id / "tool-results" / parsed.filename
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, txn
    settled = Counter(p.value for p in states.values())
    assert deleted == settled["RELEASED"] + settled["ABORTED"]  # GC did its part

    figures = {
        "kill_at": kill_at,
        "processes": HOSTS,
        "kills": 1,
        "leases": len(states),
        "final_reconcile": dict(Counter(r.status.value for r in reports)),
        "settled": dict(settled),
        "visible_references": len(visible),
        "gc_deleted": deleted,
        "seconds_concurrent": round(concurrent, 2),
    }
    print("\nmulti-host figures:", json.dumps(figures, sort_keys=True))
