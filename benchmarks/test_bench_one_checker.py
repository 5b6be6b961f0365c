"""One invariant checker: the explorers before and after it (issue 17, item 3).

S1-S7 and L1's goal are now functions over an observable state, which the
spec explorer builds for every state it visits (memoized on the parts of the
state the invariants read) and the crash explorer for every crash state.  Each
workload runs here and, as the baseline in the same run, on the package of
commit ``dbc0999`` (the last commit before the change, taken from git, so this
pair needs a clone with history), each in a fresh interpreter.  Set
``TOOLSWAP_BENCH_BASELINE`` to another commit to compare against it instead
(issue 17's string-enum vocabulary was measured against ``80d3016``); the
baseline test's id names the commit it ran.  Both runs must
reach the same verdict (asserted: a change that altered a verdict would make the
figure meaningless).  They reached the same counts too until wave 3 changed the
model (O4's tombstone for a never-seen id, the writer, the second witness): the
``spec`` workload now visits more states on this tree (``extra_info`` has both
counts), so its ratio understates the speed-up.  Read the ratio of the two
``cpu_seconds`` (median of the rounds); no timing is asserted.

Workloads:

* ``spec``: the spec explorer over the default bounds (193,642 states);
* ``crash``: the crash explorer over the first six standard scenarios.

Run with ``python -m pytest benchmarks/test_bench_one_checker.py --benchmark-only``.
"""

from __future__ import annotations

import ast
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

REPO = Path(__file__).resolve().parent.parent
BASELINE_COMMIT = os.environ.get("TOOLSWAP_BENCH_BASELINE", "dbc0999")
ROUNDS = 3

_RUN = """
import sys, time
sys.path.insert(0, sys.argv[1])
workload = sys.argv[2]
if workload == "spec":
    from toolswap.spec import explorer, system
    model = system.Model(system.Bounds())
    started = time.process_time()
    report = explorer.explore(model)
    counts = (report.states, report.transitions, report.violation is None, report.l1_stuck)
else:
    from toolswap.faultinject.explorer import STANDARD_SCENARIOS, CrashExplorer
    started = time.process_time()
    result = CrashExplorer(STANDARD_SCENARIOS[:6]).explore()
    counts = (result.states, result.violation_total)
print(repr(counts), time.process_time() - started)
"""


def _package(root: Path, source: Path) -> Path:
    """A ``toolswap`` package as installed, with ``spec`` and ``faultinject`` inside."""
    package = root / "toolswap"
    shutil.copytree(source / "src" / "toolswap", package)
    shutil.copytree(source / "spec", package / "spec")
    shutil.copytree(source / "faultinject", package / "faultinject")
    return root


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    try:
        archive = subprocess.run(
            [
                "git",
                "-C",
                str(REPO),
                "archive",
                BASELINE_COMMIT,
                "src/toolswap",
                "spec",
                "faultinject",
            ],
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


COUNTS: dict[tuple[str, str], str] = {}


def _measure(benchmark: Any, root: Path, label: str, workload: str) -> None:
    seconds: list[float] = []

    def run() -> None:
        out = subprocess.run(
            [sys.executable, "-c", _RUN, str(root), workload],
            check=True,
            capture_output=True,
            text=True,
        )
        counts, cpu = out.stdout.strip().rsplit(" ", 1)
        COUNTS[(label, workload)] = counts
        seconds.append(float(cpu))

    benchmark.pedantic(run, rounds=ROUNDS, iterations=1)
    benchmark.extra_info.update(cpu_seconds=round(statistics.median(seconds), 3))
    benchmark.extra_info.update(counts=COUNTS[(label, workload)])
    other = COUNTS.get((BASELINE_COMMIT if label == "this tree" else "this tree", workload))
    if other is not None:
        benchmark.extra_info.update(counts_of_the_other_tree=other)
        assert _verdict(other, workload) == _verdict(COUNTS[(label, workload)], workload), (
            f"the two trees reached different verdicts: {other} against {COUNTS[(label, workload)]}"
        )


def _verdict(counts: str, workload: str) -> tuple[object, ...]:
    """The part of a run's counts that is its verdict (the rest is how much it visited)."""
    found = ast.literal_eval(counts)
    return tuple(found[2:]) if workload == "spec" else tuple(found[1:])


@pytest.mark.parametrize("workload", ["spec", "crash"])
@pytest.mark.benchmark(group="one-checker")
def test_explorer_this_tree(benchmark: Any, trees: dict[str, Path], workload: str) -> None:
    _measure(benchmark, trees["this tree"], "this tree", workload)


@pytest.mark.parametrize("baseline", [BASELINE_COMMIT])
@pytest.mark.parametrize("workload", ["spec", "crash"])
@pytest.mark.benchmark(group="one-checker")
def test_explorer_baseline(
    benchmark: Any, trees: dict[str, Path], workload: str, baseline: str
) -> None:
    _measure(benchmark, trees[baseline], baseline, workload)
