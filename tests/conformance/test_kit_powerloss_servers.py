"""The power-loss pairs on real servers: PostgreSQL and the guide's Redis example.

Claims
======

* ``PostgresOwner`` on a server of its own whose data directory is on the kit's
  mount (``PostgresClusterHarness``) passes every power-loss check; with
  ``synchronous_commit = off`` it fails every one of them.
* The guide's Redis example with ``appendfsync always`` passes every power-loss
  check; with Redis's default, ``everysec``, an acknowledged publish is lost.

Each needs a forgetful mount and its server's binaries: without them these tests
skip with the reason, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conformance import _powerloss_harnesses as variants
from tests.crash._fuse import require_mount
from toolswap.owners.postgres_cluster import PostgresClusterHarness, server_binaries
from toolswap.testing import OwnerHarness, run_conformance
from toolswap.testing.checks_powerloss import POWER_LOSS_CHECKS
from toolswap.testing.options import RunOptions

PLAIN = RunOptions(examples=0, seed=0, fixed=("plain",))


def _missing(reason: str) -> None:
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        pytest.fail(f"CI=true but {reason}: CI must run the power-loss pairs", pytrace=False)
    pytest.skip(reason)


def _require_postgres() -> None:
    require_mount()
    if server_binaries() is None:
        _missing("no PostgreSQL server binaries (apt-get install postgresql, or set PG_BINDIR)")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _missing("psycopg is not installed (pip install -e '.[test]')")


def _require_redis() -> Any:
    """The module holding the example's harness and its ``everysec`` variant."""
    require_mount()
    if shutil.which("redis-server") is None:
        _missing("no redis-server (apt-get install redis-server)")
    try:
        from tests.conformance import _powerloss_redis
    except ImportError:
        _missing("the redis client is not installed (pip install -e '.[test]')")
    return _powerloss_redis


def _outcomes(
    harness: type[OwnerHarness], tmp_path: Path, checks: tuple[str, ...] = POWER_LOSS_CHECKS
) -> dict[str, tuple[str, str]]:
    report = run_conformance(harness, workroot=tmp_path, checks=checks, options=PLAIN)
    return {r.check_id: (r.outcome, r.message) for r in report.results}


def _verdicts(outcomes: dict[str, tuple[str, str]]) -> dict[str, str]:
    return {check: outcome for check, (outcome, _) in outcomes.items()}


def test_postgres_with_its_data_on_the_mount_passes_every_power_loss_check(
    tmp_path: Path,
) -> None:
    _require_postgres()
    outcomes = _outcomes(PostgresClusterHarness, tmp_path)
    assert _verdicts(outcomes) == dict.fromkeys(POWER_LOSS_CHECKS, "pass"), outcomes


def test_postgres_with_synchronous_commit_off_fails_every_power_loss_check(
    tmp_path: Path,
) -> None:
    _require_postgres()
    outcomes = _outcomes(variants.AsyncCommitPostgresHarness, tmp_path)
    assert _verdicts(outcomes) == dict.fromkeys(POWER_LOSS_CHECKS, "fail"), outcomes
    assert all("after a power cut" in message for _, message in outcomes.values()), outcomes


def test_the_redis_example_with_appendfsync_always_passes_every_power_loss_check(
    tmp_path: Path,
) -> None:
    harness = _require_redis().RedisHarness
    assert harness.appendfsync == "always"
    outcomes = _outcomes(harness, tmp_path)
    assert _verdicts(outcomes) == dict.fromkeys(POWER_LOSS_CHECKS, "pass"), outcomes


def test_the_redis_example_with_appendfsync_everysec_loses_an_acknowledged_publish(
    tmp_path: Path,
) -> None:
    # Redis fsyncs once a second: a cut that follows the fsync closely keeps everything,
    # so the claim is that three tries do not all pass (each does nearly always fail).
    everysec = _require_redis().EverysecRedisHarness
    check = "O1.publish-survives-power-cut"
    found = []
    for attempt in range(3):
        outcome, message = _outcomes(everysec, tmp_path / str(attempt), (check,))[check]
        found.append(outcome)
        if outcome == "fail":
            assert "after a power cut" in message, message
            break
    assert "fail" in found, found
