"""The etcd owner when the cluster misbehaves: a lost lease, a leader change, a killed member.

* A fenced block whose lease is lost (it expired, or was revoked) cannot write:
  its seal fails and the id stays as it was.  A variant whose seal does not
  compare the fence's creation revision lands there, which is what the first
  test would catch.
* A fence survives a leader change: the new leader keeps the lease, so the
  block's seal lands once and every member shows it.
* Four hosts publish, remove and reconcile against one prefix while the
  leader is killed and restarted (twice).  Calls that fail meanwhile leave
  their leases PREPARED; after a final reconcile nothing is PREPARED, every
  lease agrees with the owner, and GC deletes no artifact a reference names.

The member-killing tests need ``TOOLSWAP_ETCD_DIR`` (``.ci/etcd-cluster start``)
and run one after another (pytest runs a file's tests in order).
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from toolswap.spec.lease import LeaseState

from tests._etcd import (
    cluster,
    fresh_prefix,
    require_endpoints,
    revoke_lease,
    visible_references,
)
from toolswap.cleanup import ArtifactCleanupPolicy
from toolswap.domain import ArtifactRetentionClaim, parse_source_id
from toolswap.errors import OwnerStoreError
from toolswap.externalizer import ToolResultExternalizer
from toolswap.journal import ArtifactRetentionJournal
from toolswap.owner import ObservedState, owner_publisher, owner_remover
from toolswap.owners.etcd import EtcdOwner, _Txn

pytestmark = pytest.mark.etcd

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def etcd_endpoints() -> str:
    return require_endpoints()


@pytest.fixture
def etcd_prefix(etcd_endpoints: str) -> Iterator[str]:
    with fresh_prefix(etcd_endpoints) as prefix:
        yield prefix


class _SealIgnoringFence(EtcdOwner):
    """Broken on purpose: the seal compares the generation only, not its fence."""

    def _txn(self, doing: str, compare: list[dict[str, object]], *rest: Any) -> _Txn:
        if doing == "sealing an absence":
            compare = compare[1:]
        return super()._txn(doing, compare, *rest)


def _seal_after_lost_lease(owner: EtcdOwner, endpoints: str, txn: str) -> tuple[str, int]:
    """Enter a fence over a never-seen id, lose its lease, seal; the outcome and the
    id's generation afterwards."""
    with owner.inspect_fenced(txn) as seen:
        assert (seen.state, seen.sealed, seen.generation) == (ObservedState.ABSENT, False, 0)
        revoke_lease(endpoints, seen._fence.lease)  # as if it had expired
        try:
            outcome = f"returned {seen.seal_absence()}"
        except OwnerStoreError as exc:
            outcome = f"raised: {exc}"
    return outcome, owner.generation(txn)


def test_a_seal_whose_lease_was_lost_fails_and_writes_nothing(
    etcd_endpoints: str, etcd_prefix: str
) -> None:
    with EtcdOwner(etcd_endpoints, prefix=etcd_prefix, lease_ttl=5) as owner:
        outcome, generation = _seal_after_lost_lease(owner, etcd_endpoints, "lost-1")
    assert outcome.startswith("raised:") and "lease was lost" in outcome
    assert generation == 0  # nothing landed: the id is still never-seen


def test_a_seal_that_ignores_its_fence_would_land_after_the_lease_is_lost(
    etcd_endpoints: str, etcd_prefix: str
) -> None:
    with _SealIgnoringFence(etcd_endpoints, prefix=etcd_prefix, lease_ttl=5) as owner:
        outcome, generation = _seal_after_lost_lease(owner, etcd_endpoints, "lost-2")
    assert (outcome, generation > 0) == ("returned True", True)


def test_a_publish_goes_in_once_the_fence_lease_is_lost_and_the_stale_seal_yields(
    etcd_endpoints: str, etcd_prefix: str, tmp_path: pathlib.Path
) -> None:
    claim = _claim(tmp_path)
    with (
        EtcdOwner(etcd_endpoints, prefix=etcd_prefix, lease_ttl=5) as holder,
        EtcdOwner(etcd_endpoints, prefix=etcd_prefix, lock_timeout=30) as writer,
        holder.inspect_fenced("held") as seen,
    ):
        revoke_lease(etcd_endpoints, seen._fence.lease)
        writer.publish("held", claim)  # the fence key went with the lease
        assert seen.seal_absence() is False  # the generation moved: nothing written
    assert visible_references(etcd_endpoints, etcd_prefix) == {
        "held": (claim.source_id, claim.content_sha256)
    }


def _claim(folder: pathlib.Path, text: bytes = b"tool output\n" * 50) -> ArtifactRetentionClaim:
    ext = ToolResultExternalizer(folder / "s", threshold_bytes=1, environ={})
    result = ext.externalize(text, "bench")
    assert result.artifact is not None
    return ArtifactRetentionClaim.from_memory_reference(result.artifact.for_memory())


def _new_leader(old: str) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            now = cluster("leader")
        except subprocess.CalledProcessError:
            now = ""
        if now and now != old:
            return now
        time.sleep(0.1)
    raise AssertionError("no new leader within 30 s")


def test_a_fence_survives_a_leader_change_and_its_seal_lands(
    etcd_endpoints: str, etcd_prefix: str
) -> None:
    old = cluster("leader")
    with EtcdOwner(etcd_endpoints, prefix=etcd_prefix, lease_ttl=5) as owner:
        try:
            with owner.inspect_fenced("through-election") as seen:
                cluster("kill-member", old)
                _new_leader(old)
                assert seen.seal_absence() is True
        finally:
            cluster("start-member", old)
        sealed = owner.generation("through-election")
    # Every member, the restarted old leader included, serves the same tombstone.
    for endpoint in etcd_endpoints.split(","):
        with (
            EtcdOwner(endpoint, prefix=etcd_prefix) as one,
            one.inspect_fenced("through-election") as after,
        ):
            assert (after.state, after.sealed, after.generation) == (
                ObservedState.ABSENT,
                True,
                sealed,
            )


def test_a_fence_survives_losing_the_member_its_owner_talks_to(
    etcd_endpoints: str, etcd_prefix: str
) -> None:
    first = etcd_endpoints.split(",")[0]
    victim = "0"  # .ci/etcd-cluster lists member 0 first
    with EtcdOwner(etcd_endpoints, prefix=etcd_prefix, lease_ttl=3) as owner:
        try:
            with owner.inspect_fenced("member-gone") as seen:
                cluster("kill-member", victim)
                time.sleep(4)  # past the TTL: only renewals through another member kept it
                assert seen.seal_absence() is True
        finally:
            cluster("start-member", victim)
    with EtcdOwner(first, prefix=etcd_prefix) as one, one.inspect_fenced("member-gone") as after:
        assert (after.state, after.sealed) == (ObservedState.ABSENT, True)


class _SerializableReads(EtcdOwner):
    """Broken on purpose: plain reads are served from the member's local state."""

    def _call(self, path: str, request: Any, *, reads: bool) -> dict[str, Any]:
        if path == "/v3/kv/range":
            request = {**request, "serializable": True}
        return super()._call(path, request, reads=reads)


def _read_without_quorum(owner_class: type[EtcdOwner], endpoints: str, prefix: str) -> str:
    """Publish, cut member 0 off from its quorum (kill 1 and 2), read through member 0 only."""
    with EtcdOwner(endpoints, prefix=prefix) as owner:
        owner.remove("cut-off")
    first = endpoints.split(",")[0]
    with owner_class(first, prefix=prefix, request_timeout=15) as alone:
        try:
            cluster("kill-member", "1")
            cluster("kill-member", "2")
            try:
                return f"answered {alone.generation('cut-off')}"
            except OwnerStoreError as exc:
                return f"raised: {exc}"
        finally:
            cluster("start-member", "1")
            cluster("start-member", "2")


def test_a_member_cut_off_from_its_quorum_answers_no_read(
    etcd_endpoints: str, etcd_prefix: str
) -> None:
    outcome = _read_without_quorum(EtcdOwner, etcd_endpoints, etcd_prefix)
    assert outcome.startswith("raised:"), outcome


def test_a_serializable_read_would_answer_from_a_cut_off_member(
    etcd_endpoints: str, etcd_prefix: str
) -> None:
    outcome = _read_without_quorum(_SerializableReads, etcd_endpoints, etcd_prefix)
    assert outcome.startswith("answered "), outcome


def holder(endpoints: str, prefix: str, txn: str) -> None:
    """Hold a fence over a never-seen id; seal when told (stdin); print what happened."""
    with (
        EtcdOwner(endpoints, prefix=prefix, lease_ttl=2) as owner,
        owner.inspect_fenced(txn) as seen,
    ):
        print("fenced", flush=True)
        sys.stdin.readline()  # the test stops this process here, then resumes it
        try:
            print(f"seal returned {seen.seal_absence()}", flush=True)
        except OwnerStoreError as exc:
            print(f"seal raised: {exc}", flush=True)


def test_a_holder_paused_past_its_lease_cannot_seal(etcd_endpoints: str, etcd_prefix: str) -> None:
    code = (
        "import sys; from tests.core.test_etcd_faults import holder; "
        "holder(sys.argv[1], sys.argv[2], sys.argv[3])"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code, etcd_endpoints, etcd_prefix, "paused"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        assert child.stdout.readline() == "fenced\n"
        child.send_signal(signal.SIGSTOP)  # a stopped VM, a long pause: no renewals
        with (
            EtcdOwner(etcd_endpoints, prefix=etcd_prefix, lock_timeout=30) as other,
            other.inspect_fenced("paused") as seen,  # waits until the lease expired
        ):
            assert (seen.state, seen.generation) == (ObservedState.ABSENT, 0)
    finally:
        child.send_signal(signal.SIGCONT)
    out, err = child.communicate("go\n", timeout=60)
    assert child.returncode == 0, err
    assert out.startswith("seal raised:") and "lease was lost" in out
    with EtcdOwner(etcd_endpoints, prefix=etcd_prefix) as owner:
        assert owner.generation("paused") == 0  # nothing landed


HOSTS = 4
LEASES = 40
KILLS = 2


def host(session: str, endpoints: str, prefix: str, index: int) -> None:
    """One host's workload (run in a child process); prints how many calls failed."""
    ext = ToolResultExternalizer(session, threshold_bytes=1, environ={})
    journal = ArtifactRetentionJournal(session)
    failed = 0
    with EtcdOwner(endpoints, prefix=prefix, lease_ttl=3, request_timeout=5) as owner:
        print("ready", flush=True)  # the test kills members only once every host works
        for i in range(LEASES):
            result = ext.externalize(f"host {index} output {i}\n".encode() * 40, "bench")
            assert result.artifact is not None
            claim = ArtifactRetentionClaim.from_memory_reference(result.artifact.for_memory())
            txn = f"h{index}-t{i}"
            try:
                journal.publish_reference(claim, owner_publisher(owner, txn, claim), txn)
                if i % 3 == 1:
                    journal.remove_reference(txn, owner_remover(owner, txn))
                if i % 7 == 6:
                    journal.reconcile_pending(owner)
            except OwnerStoreError:
                failed += 1  # maybe written: the lease stays PREPARED for the final reconcile
            time.sleep(0.02)  # spread the work over the kills
    print(json.dumps({"failed": failed}))


@pytest.mark.slow
def test_four_hosts_settle_every_lease_across_leader_kills(
    etcd_endpoints: str, etcd_prefix: str, tmp_path: pathlib.Path
) -> None:
    started = time.monotonic()
    code = (
        "import sys; from tests.core.test_etcd_faults import host; "
        "host(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))"
    )
    sessions = [tmp_path / f"host{n}" for n in range(HOSTS)]
    children = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(s), etcd_endpoints, etcd_prefix, str(n)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n, s in enumerate(sessions)
    ]
    for child in children:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
    leaders = []
    for _ in range(KILLS):
        time.sleep(0.3)
        old = cluster("leader")
        cluster("kill-member", old)
        leaders.append((old, _new_leader(old)))
        cluster("start-member", old)
    failed = 0
    for child in children:
        out, err = child.communicate(timeout=300)
        assert child.returncode == 0, err
        failed += json.loads(out.strip().splitlines()[-1])["failed"]
    concurrent = time.monotonic() - started

    journals = [ArtifactRetentionJournal(s) for s in sessions]
    with EtcdOwner(etcd_endpoints, prefix=etcd_prefix) as owner:
        reports = [r for j in journals for r in j.reconcile_pending(owner)]
        states = {t: p for j in journals for t, p in j.recover().states.items()}
        claims = {t: c for j in journals for t, c in j.recover().transactions.items()}
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
    visible = visible_references(etcd_endpoints, etcd_prefix)
    assert {t for t, p in states.items() if p is LeaseState.COMMITTED} == set(visible)

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

    figures = {
        "processes": HOSTS,
        "leases": len(states),
        "leader_changes": leaders,
        "calls_failed_during_kills": failed,
        "final_reconcile": dict(Counter(r.status.value for r in reports)),
        "settled": dict(Counter(p.value for p in states.values())),
        "visible_references": len(visible),
        "gc_deleted": deleted,
        "seconds_concurrent": round(concurrent, 2),
    }
    print("\netcd multi-host figures:", json.dumps(figures, sort_keys=True))
