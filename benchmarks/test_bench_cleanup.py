"""Cleanup planning: toolswap vs the floor of hashing the same files.

The baseline opens and SHA-256s every artifact; the plan does that and also
takes an lstat snapshot, checks ownership and classifies each file.  The
ratio is the cost of the fail-closed scan on top of reading the bytes.
"""

from __future__ import annotations

import hashlib
import os
import pathlib

import pytest

from toolswap.cleanup import ArtifactCleanupPolicy, plan_cleanup
from toolswap.session import SessionPaths

FILES = 200
SIZE = 256 * 1024


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> SessionPaths:
    root = tmp_path_factory.mktemp("gc") / "s"
    results = root / "tool-results"
    results.mkdir(parents=True)
    block = os.urandom(SIZE)
    for i in range(1, FILES + 1):
        path = results / f"tool_result_{i:03d}.txt"
        path.write_bytes(block[i:] + block[:i])
        path.chmod(0o600)
    return SessionPaths.at(root)


@pytest.mark.benchmark(group="gc-plan")
def test_toolswap_plan(benchmark, session: SessionPaths) -> None:  # type: ignore[no-untyped-def]
    policy = ArtifactCleanupPolicy(orphan_ttl_seconds=1, max_deletions=FILES, dry_run=True)

    def run() -> None:
        plan = plan_cleanup(session, [], policy=policy, now=4e9)
        assert len(plan.entries) == FILES

    benchmark(run)


@pytest.mark.benchmark(group="gc-plan")
def test_baseline_hash_every_file(benchmark, session: SessionPaths) -> None:  # type: ignore[no-untyped-def]
    folder = pathlib.Path(session.tool_results)

    def run() -> None:
        for path in sorted(folder.iterdir()):
            digest = hashlib.sha256()
            with path.open("rb") as handle:
                while block := handle.read(1 << 20):
                    digest.update(block)
            digest.hexdigest()

    benchmark(run)
