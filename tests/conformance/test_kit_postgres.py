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

pytestmark = pytest.mark.postgres


def test_every_check_passes_on_the_postgres_owner(tmp_path: Path) -> None:
    require_dsn()
    if not os.environ.get(RESTART_ENV):
        pytest.skip(f"{RESTART_ENV} is unset: the restart checks would be skipped")
    report = run_conformance(PostgresHarness, workroot=tmp_path)
    assert [(r.check_id, r.message) for r in report.failed] == []
    assert report.counts()["skip"] == 0, [r.check_id for r in report.results if r.outcome == "skip"]
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
