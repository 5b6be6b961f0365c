"""The etcd cluster the tests run against, if there is one.

Rules (those of ``tests/_postgres.py``):

* ``TOOLSWAP_ETCD_ENDPOINTS`` names the cluster (``.ci/etcd-cluster start``
  prints it, with ``TOOLSWAP_ETCD_DIR`` and ``TOOLSWAP_ETCD_RESTART``).
  Without it the etcd tests skip, with a reason that says how to get a
  cluster -- except under ``CI=true``, where a missing cluster is a failure.
* Tests that kill members need ``TOOLSWAP_ETCD_DIR`` (the script's folder) and
  run one at a time (pytest runs a file's tests in order).
* Every test gets its own key prefix (:func:`etcd_prefix`), deleted afterwards.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from toolswap.owners.etcd import ENDPOINTS_ENV, initialize_prefix, parse_endpoints

__all__ = [
    "CLUSTER",
    "cluster",
    "delete_prefix",
    "fresh_prefix",
    "require_endpoints",
    "revoke_lease",
    "visible_references",
]

CLUSTER = pathlib.Path(__file__).resolve().parents[1] / ".ci" / "etcd-cluster"
DIR_ENV = "TOOLSWAP_ETCD_DIR"


def _missing(reason: str) -> None:
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        pytest.fail(f"CI=true but {reason}: CI must run the etcd tests", pytrace=False)
    pytest.skip(reason)


def require_endpoints() -> str:
    """The cluster's endpoints, or skip (fail under CI) with the reason."""
    endpoints = os.environ.get(ENDPOINTS_ENV, "").strip()
    if not endpoints:
        _missing(
            f"no etcd cluster: {ENDPOINTS_ENV} is unset "
            '(start one with: eval "$(.ci/etcd-cluster start)")'
        )
    return endpoints


def cluster(*args: str) -> str:
    """Run ``.ci/etcd-cluster ARGS`` on the test cluster's folder; its stdout."""
    folder = os.environ.get(DIR_ENV, "").strip()
    if not folder:
        _missing(f"{DIR_ENV} is unset: the cluster's members cannot be killed")
    command, *rest = args
    done = subprocess.run(
        [str(CLUSTER), command, folder, *rest],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout.strip()


def delete_prefix(endpoints: str, prefix: str) -> None:
    """Delete every key under the prefix (the tests' clean-up; an owner never deletes)."""
    import base64
    import http.client
    import json

    endpoint = parse_endpoints(endpoints)[0]
    start = prefix.encode()
    end = start[:-1] + bytes([start[-1] + 1])
    conn = http.client.HTTPConnection(endpoint.host, endpoint.port, timeout=30)
    try:
        body = {
            "key": base64.b64encode(start).decode(),
            "range_end": base64.b64encode(end).decode(),
        }
        conn.request("POST", "/v3/kv/deleterange", json.dumps(body))
        response = conn.getresponse()
        response.read()
        assert response.status == 200
    finally:
        conn.close()


def _post(endpoints: str, path: str, body: dict[str, object]) -> dict[str, object]:
    import http.client
    import json

    endpoint = parse_endpoints(endpoints)[0]
    conn = http.client.HTTPConnection(endpoint.host, endpoint.port, timeout=30)
    try:
        conn.request("POST", path, json.dumps(body))
        response = conn.getresponse()
        answer = json.loads(response.read())
        assert response.status == 200, answer
    finally:
        conn.close()
    assert isinstance(answer, dict)
    return answer


def visible_references(endpoints: str, prefix: str) -> dict[str, tuple[str, str]]:
    """Transaction id -> (source id, digest) of every published record under the prefix,
    read straight from etcd (linearizable), not through the owner."""
    import base64
    import json

    start = prefix.encode() + b"\0r\0"
    answer = _post(
        endpoints,
        "/v3/kv/range",
        {
            "key": base64.b64encode(start).decode(),
            "range_end": base64.b64encode(start[:-1] + b"\1").decode(),
        },
    )
    found: dict[str, tuple[str, str]] = {}
    for kv in answer.get("kvs") or []:  # type: ignore[union-attr]
        record = json.loads(base64.b64decode(kv["value"]))
        if record["kind"] == "published":
            txn = base64.b64decode(kv["key"])[len(start) :].decode()
            found[txn] = (record["source_id"], record["content_sha256"])
    return found


def revoke_lease(endpoints: str, lease: int) -> None:
    """End a lease as its expiry would: etcd deletes every key bound to it."""
    _post(endpoints, "/v3/lease/revoke", {"ID": lease})


@contextmanager
def fresh_prefix(endpoints: str) -> Iterator[str]:
    """A fresh, initialized prefix of the test cluster, deleted afterwards."""
    prefix = f"toolswap-test/{uuid.uuid4().hex[:16]}"
    initialize_prefix(endpoints, prefix=prefix)
    try:
        yield prefix
    finally:
        delete_prefix(endpoints, prefix)
