"""The etcd owner vs the floor of one durable put on the same connection.

Baseline: a bare ``/v3/kv/put`` of a value of the record's shape, through the
owner's own gateway client (same kept-alive connection, same JSON encoding),
with the durability every etcd write has (a quorum of members fsynced it).
The ratios are what the compares, the fence and the lease cost on top:

* publish: one transaction comparing the fence, the census key and the record;
* remove: one nested transaction (fence compare, then tombstone unless there);
* fence + seal: grant a lease, create the fence key and read the record in one
  transaction, seal by compare-and-set, revoke the lease (four round trips).

Run with the cluster ``TOOLSWAP_ETCD_ENDPOINTS`` names (``.ci/etcd-cluster
start``); skipped with that reason otherwise.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import pathlib
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from toolswap.domain import ArtifactRetentionClaim
from toolswap.externalizer import ToolResultExternalizer

ENDPOINTS_ENV = "TOOLSWAP_ETCD_ENDPOINTS"


@pytest.fixture(scope="module")
def etcd() -> Iterator[Any]:
    endpoints = os.environ.get(ENDPOINTS_ENV, "").strip()
    if not endpoints:
        pytest.skip(f"no etcd cluster: set {ENDPOINTS_ENV} (see .ci/etcd-cluster)")
    from tests._etcd import delete_prefix
    from toolswap.owners.etcd import EtcdOwner, initialize_prefix

    prefix = f"toolswap-bench/{uuid.uuid4().hex[:12]}"
    initialize_prefix(endpoints, prefix=prefix)
    owner = EtcdOwner(endpoints, prefix=prefix)
    try:
        yield owner
    finally:
        owner.close()
        delete_prefix(endpoints, prefix)


@pytest.fixture(scope="module")
def claim(tmp_path_factory: pytest.TempPathFactory) -> ArtifactRetentionClaim:
    session: pathlib.Path = tmp_path_factory.mktemp("etcd") / "s"
    ext = ToolResultExternalizer(session, threshold_bytes=1, environ={})
    result = ext.externalize(b"benchmark artifact\n" * 100, "bench")
    assert result.artifact is not None
    return ArtifactRetentionClaim.from_memory_reference(result.artifact.for_memory())


def _bare_put(owner: Any, claim: ArtifactRetentionClaim) -> Callable[[], None]:
    ids = itertools.count()
    record = {
        "kind": "published",
        "source_id": claim.source_id,
        "content_sha256": claim.content_sha256,
        "reference_count": 1,
    }
    value = base64.b64encode(json.dumps(record, separators=(",", ":")).encode()).decode()
    base = f"{owner.prefix}\0raw\0".encode()

    def run() -> None:
        key = base64.b64encode(base + str(next(ids)).encode()).decode()
        owner._gateway.call("/v3/kv/put", {"key": key, "value": value}, reads=False, completes=True)

    return run


@pytest.mark.benchmark(group="etcd-publish")
def test_etcd_publish(benchmark, etcd, claim) -> None:  # type: ignore[no-untyped-def]
    ids = itertools.count()
    benchmark(lambda: etcd.publish(f"p{next(ids)}", claim))


@pytest.mark.benchmark(group="etcd-publish")
def test_baseline_bare_put_for_publish(benchmark, etcd, claim) -> None:  # type: ignore[no-untyped-def]
    benchmark(_bare_put(etcd, claim))


@pytest.mark.benchmark(group="etcd-remove")
def test_etcd_remove(benchmark, etcd, claim) -> None:  # type: ignore[no-untyped-def]
    ids = itertools.count()

    def setup() -> tuple[tuple[str], dict[str, Any]]:
        txn = f"r{next(ids)}"
        etcd.publish(txn, claim)
        return (txn,), {}

    benchmark.pedantic(etcd.remove, setup=setup, rounds=300, warmup_rounds=10)


@pytest.mark.benchmark(group="etcd-remove")
def test_baseline_bare_put_for_remove(benchmark, etcd, claim) -> None:  # type: ignore[no-untyped-def]
    benchmark.pedantic(_bare_put(etcd, claim), rounds=300, warmup_rounds=10)


@pytest.mark.benchmark(group="etcd-fence")
def test_etcd_fence_and_seal(benchmark, etcd, claim) -> None:  # type: ignore[no-untyped-def]
    ids = itertools.count()

    def run() -> None:
        with etcd.inspect_fenced(f"f{next(ids)}") as seen:
            assert seen.seal_absence() is True

    benchmark(run)


@pytest.mark.benchmark(group="etcd-fence")
def test_baseline_bare_put_for_fence(benchmark, etcd, claim) -> None:  # type: ignore[no-untyped-def]
    benchmark(_bare_put(etcd, claim))
