"""The whole conformance kit passes on the PostgreSQL owner, on a real server.

Every check runs, the other-process, restart and fault checks included (CI
starts the server and gives the restart command; without a server these tests
skip locally and fail under CI, see ``tests/_postgres.py``).  The server is
restarted by the checks, so nothing else may use it meanwhile: pytest runs a
file's tests one after another.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests._postgres import require_dsn
from toolswap.owners.postgres import RESTART_ENV, PostgresHarness
from toolswap.testing import checks_named, run_conformance
from toolswap.testing.checks_powerloss import POWER_LOSS_CHECKS
from toolswap.testing.options import RunOptions

pytestmark = pytest.mark.postgres

# What the PostgreSQL harness does not offer: a fault plan under the driver (its faults
# are armed through inject_fault, on the first or the completing statement), and the
# optional census until the owner has one.
_OPTIONAL = (
    "O1.publish-durable-at-every-call",
    "O2.store-failure-is-not-rejection-at-every-call",
    "O4.remove-durable-at-every-call",
    "O6.seal-durable-at-every-call",
    "O8.in-doubt-at-every-call",
    "O2.slow-store-is-not-rejection",
    "O6.false-seal-writes-nothing-when-slow",
    "O9.",
    # The server's data directory is not the kit's to cut the power of; the power-loss
    # checks run on PostgresClusterHarness (test_kit_powerloss_servers.py).
    *POWER_LOSS_CHECKS,
    "DEEP.crash-explorer-power-cuts",
)


def test_every_check_passes_on_the_postgres_owner(tmp_path: Path) -> None:
    require_dsn()
    if not os.environ.get(RESTART_ENV):
        pytest.skip(f"{RESTART_ENV} is unset: the restart checks would be skipped")
    # A few drawn examples per check (each is a fresh schema) and one round of the machine.
    # The deep checks crash every scenario against the server (about 30 s alone, several
    # times that on a loaded machine): a generous timeout, so load is never a verdict.
    options = RunOptions(examples=1, budget=0.5, seed=0, model_budget=0.0, check_timeout=600.0)
    report = run_conformance(PostgresHarness, workroot=tmp_path, options=options)
    assert [(r.check_id, r.message) for r in report.failed] == []
    skipped = {r.check_id: r.message for r in report.results if r.outcome == "skip"}
    assert all(check_id.startswith(_OPTIONAL) for check_id in skipped), skipped
    assert len(report.results) == len(checks_named(None))


def test_the_command_line_takes_a_postgres_url_and_names_no_secret(tmp_path: Path) -> None:
    dsn = require_dsn()
    done = subprocess.run(
        [sys.executable, "-m", "toolswap.cli", "conformance", dsn, "--check", "O7", "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    assert doc["harness"] == "toolswap.owners.postgres:PostgresHarness"
    assert {r["outcome"] for r in doc["results"]} == {"pass"}
    password = dsn.split("://", 1)[1].split("@", 1)[0].partition(":")[2]
    assert password and password not in done.stdout + done.stderr
