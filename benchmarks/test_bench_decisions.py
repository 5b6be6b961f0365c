"""Deciding from the spec's tables: this tree against the code before (issue 17).

The journal's transition check, reconciliation and both cleanup phases now
look their decisions up in ``toolswap.spec`` instead of deciding in their own
code.  Each workload runs here and, as the baseline in the same run, on the
package of commit ``7310b8b`` (the last commit before that change, taken from
git, so this pair needs a clone with history), each in a fresh interpreter on
the same files.  The two trees take turns, round by round, so that a burst of
load on a shared machine hits both sides of a round alike: read ``ratio`` (the
median of the rounds' this-tree / baseline CPU-time ratios) in the extra info,
beside each side's median ``cpu_seconds``; no timing is asserted.  Set
``TOOLSWAP_BENCH_BASELINE`` to another commit to compare against it instead;
the test's id names it.

Workloads (CPU-bound on purpose, so the decision code is what is measured):

* ``recover``: open and verify a journal of 4,000 records, three times (the
  fold checks every record against the lease table);
* ``reconcile``: 5 x 1,000 reconciliations of PREPARED leases whose owner
  cannot tell (UNKNOWN: the table keeps them pending, nothing is appended);
* ``cleanup``: 10 x plan and dry-run apply over 400 small artifact files.

Run with ``python -m pytest benchmarks/test_bench_decisions.py --benchmark-only``.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from toolswap.domain import ArtifactRetentionClaim, artifact_filename, format_source_id
from toolswap.journal import ArtifactRetentionJournal

REPO = Path(__file__).resolve().parent.parent
BASELINE_COMMIT = os.environ.get("TOOLSWAP_BENCH_BASELINE", "7310b8b")
ROUNDS = 5
TRANSACTIONS = 2_000
FILES = 400

_RUN = """
import os, sys, time
sys.path.insert(0, sys.argv[1])
workload, session = sys.argv[2], sys.argv[3]
from toolswap.cleanup import ArtifactCleanupPolicy, apply_cleanup, plan_cleanup
from toolswap.journal import ArtifactRetentionJournal
from toolswap.owner import ObservedState
from toolswap.session import SessionPaths
started = time.process_time()  # the work only: every import is done
if workload == "recover":
    for _ in range(3):
        ArtifactRetentionJournal(session).recover(now=1.0)
elif workload == "reconcile":
    from contextlib import contextmanager

    class Unknown:
        transaction_id = ""
        state = ObservedState.UNKNOWN
        source_id = content_sha256 = None
        generation = 0
        sealed = False

    class Owner:
        def publish(self, txn, claim): raise AssertionError
        def remove(self, txn): raise AssertionError
        @contextmanager
        def inspect_fenced(self, txn):
            seen = Unknown()
            seen.transaction_id = txn
            yield seen

    journal = ArtifactRetentionJournal(session)
    for _ in range(5):
        reports = journal.reconcile_pending(Owner(), now=1.0)
        assert len(reports) == int(sys.argv[4])
        assert all(r.status.value == "pending_unknown" for r in reports)
else:
    paths = SessionPaths.at(session)
    policy = ArtifactCleanupPolicy(orphan_ttl_seconds=1, max_deletions=10_000, dry_run=True)
    for _ in range(10):
        plan = plan_cleanup(paths, [], policy=policy, now=4e9)
        report = apply_cleanup(paths, plan, claims=[], now=4e9)
        assert len(report.entries) == int(sys.argv[4])
print(time.process_time() - started)
"""


def _package(root: Path, source: Path) -> Path:
    """A ``toolswap`` package as installed: ``src/toolswap`` with ``spec`` as ``toolswap.spec``."""
    package = root / "toolswap"
    shutil.copytree(source / "src" / "toolswap", package)
    shutil.copytree(source / "spec", package / "spec")
    return root


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    try:
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", BASELINE_COMMIT, "src/toolswap", "spec"],
            check=True,
            capture_output=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"commit {BASELINE_COMMIT} is not available here: {exc}")
    extracted = tmp_path_factory.mktemp("baseline-src")
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(extracted, filter="data")
    return {
        BASELINE_COMMIT: _package(tmp_path_factory.mktemp("baseline"), extracted),
        "this tree": _package(tmp_path_factory.mktemp("this"), REPO),
    }


def _claim(session: Path, number: int, data: bytes) -> ArtifactRetentionClaim:
    results = session / "tool-results"
    results.mkdir(parents=True, exist_ok=True)
    name = artifact_filename(number)
    (results / name).write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    return ArtifactRetentionClaim(
        source_id=format_source_id(session.name, name, digest), content_sha256=digest
    )


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, int]]:
    recover = tmp_path_factory.mktemp("recover") / "s"
    claim = _claim(recover, 1, b"output\n")
    journal = ArtifactRetentionJournal(recover)
    for i in range(TRANSACTIONS):
        journal.prepare(claim, f"t{i}", now=1.0)
        journal.commit(f"t{i}", now=1.0)
    reconcile = tmp_path_factory.mktemp("reconcile") / "s"
    claim = _claim(reconcile, 1, b"output\n")
    journal = ArtifactRetentionJournal(reconcile)
    for i in range(TRANSACTIONS // 2):
        journal.prepare(claim, f"t{i}", now=1.0)
    cleanup = tmp_path_factory.mktemp("cleanup") / "s"
    for i in range(1, FILES + 1):
        _claim(cleanup, i, f"artifact {i}\n".encode())
        os.utime(cleanup / "tool-results" / artifact_filename(i), (1.0, 1.0))
    return {
        "recover": (recover, 0),
        "reconcile": (reconcile, TRANSACTIONS // 2),
        "cleanup": (cleanup, FILES),
    }


def _cpu_seconds(root: Path, workload: str, session: Path, expect: int) -> float:
    out = subprocess.run(
        [sys.executable, "-c", _RUN, str(root), workload, str(session), str(expect)],
        check=True,
        capture_output=True,
        text=True,
    )
    return float(out.stdout.split()[-1])


WORKLOADS = ["recover", "reconcile", "cleanup"]


@pytest.mark.parametrize("baseline", [BASELINE_COMMIT])
@pytest.mark.parametrize("workload", WORKLOADS)
@pytest.mark.benchmark(group="decisions")
def test_decisions_against_baseline(
    benchmark: Any, trees: dict[str, Path], sessions: Any, workload: str, baseline: str
) -> None:
    session, expect = sessions[workload]
    this: list[float] = []
    before: list[float] = []

    def run() -> None:  # one round: this tree, then the baseline, on the same files
        this.append(_cpu_seconds(trees["this tree"], workload, session, expect))
        before.append(_cpu_seconds(trees[baseline], workload, session, expect))

    benchmark.pedantic(run, rounds=ROUNDS, iterations=1)
    benchmark.extra_info.update(
        ratio=round(statistics.median(t / b for t, b in zip(this, before, strict=True)), 3),
        cpu_seconds=round(statistics.median(this), 4),
        baseline_cpu_seconds=round(statistics.median(before), 4),
    )
