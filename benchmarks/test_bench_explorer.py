"""The explorers: reduced vs unreduced spec search, and the crash explorer's rate.

Spec explorer: each named bound is explored with symmetry reduction and, as
the baseline in the same run, without it (``symmetry=False``).  Read the
ratio of the two wall times, and ``extra_info`` for states, transitions and
states per second; both runs must reach the same verdict (asserted: a
reduction that changed a verdict would make the figure meaningless).

Crash explorer: crash states per second over a fixed set of scenarios, with
the simulated disk's path cache (the default) and, as the baseline, with the
cache emptied before every lookup (what path resolution cost before it).

Default bounds against the explorer before wave 2's speed work: the spec
folder of commit ``7dc0ff8`` (taken from git, so this pair needs a clone with
history) and this tree's, each explored in a fresh interpreter.  Both must
find no violation.  They found the same states and transitions until wave 3
changed the model (a removal of a never-seen id tombstones it, O4; the writer
and the second witness): this tree now explores more states (193,642 against
180,112), so the ratio of the two times understates the speed-up.

No timing is asserted; run with ``python -m pytest benchmarks/test_bench_explorer.py
--benchmark-only``.  The 3-transaction bound takes minutes unreduced: it runs
only with ``TOOLSWAP_BENCH_LARGE=1``.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest
from toolswap.faultinject import disk as disk_module
from toolswap.faultinject.explorer import STANDARD_SCENARIOS, CrashExplorer
from toolswap.spec import explorer
from toolswap.spec.system import Bounds, Model

LARGE = os.environ.get("TOOLSWAP_BENCH_LARGE") == "1"

BOUNDS = {
    "a1-t2": Bounds(artifacts=1, transactions=2),
    "a1-t3-nofaults": Bounds(
        artifacts=1, transactions=3, crashes=False, lost_acks=False, unknown=False
    ),
    **({"a1-t3": Bounds(artifacts=1, transactions=3)} if LARGE else {}),
}


def _explore(benchmark: Any, bounds: Bounds, symmetry: bool) -> None:
    report = benchmark.pedantic(
        lambda: explorer.explore(Model(bounds), symmetry=symmetry, clock=time.perf_counter),
        rounds=1,
        iterations=1,
    )
    assert report.ok and report.complete
    seconds = report.elapsed or 1e-9
    benchmark.extra_info.update(
        states=report.states,
        transitions=report.transitions,
        depth=report.depth,
        symmetry=report.symmetry,
        states_per_second=round(report.states / seconds),
    )


@pytest.mark.parametrize("name", list(BOUNDS))
@pytest.mark.benchmark(group="spec-explorer")
def test_spec_explorer_reduced(benchmark: Any, name: str) -> None:
    _explore(benchmark, BOUNDS[name], symmetry=True)


@pytest.mark.parametrize("name", list(BOUNDS))
@pytest.mark.benchmark(group="spec-explorer")
def test_spec_explorer_unreduced_baseline(benchmark: Any, name: str) -> None:
    _explore(benchmark, BOUNDS[name], symmetry=False)


SCENARIOS = STANDARD_SCENARIOS[:6]


def _crash(benchmark: Any) -> None:
    result = benchmark.pedantic(
        lambda: CrashExplorer(SCENARIOS, seeds=1).explore(), rounds=1, iterations=1
    )
    assert result.violation_total == 0
    benchmark.extra_info.update(
        crash_states=result.states,
        crash_states_per_second=round(result.states / max(result.seconds, 1e-9)),
    )


@pytest.mark.benchmark(group="crash-explorer")
def test_crash_explorer(benchmark: Any) -> None:
    _crash(benchmark)


@pytest.mark.benchmark(group="crash-explorer")
def test_crash_explorer_uncached_paths_baseline(
    benchmark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    split, parts = disk_module._split_path, disk_module._path_parts

    def split_uncached(path: str) -> tuple[str, str]:
        split.cache_clear()
        return split(path)

    def parts_uncached(path: str) -> tuple[str, ...]:
        parts.cache_clear()
        return parts(path)

    monkeypatch.setattr(disk_module, "_split_path", split_uncached)
    monkeypatch.setattr(disk_module, "_path_parts", parts_uncached)
    _crash(benchmark)


# -- default bounds: this tree against the explorer of commit 7dc0ff8 --------------------------

REPO = Path(__file__).resolve().parent.parent
BASELINE_COMMIT = "7dc0ff8"  # the explorer as issue 16 found it (about 18 s on this machine)
_EXPLORE = """
import sys, time
sys.path.insert(0, sys.argv[1])
from spec import explorer, system
started = time.process_time()
report = explorer.explore(system.Model(system.Bounds()))
print(report.states, report.transitions, report.ok, time.process_time() - started)
"""


@pytest.fixture(scope="module")
def baseline_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", BASELINE_COMMIT, "spec"],
            check=True,
            capture_output=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"commit {BASELINE_COMMIT} is not available here: {exc}")
    root = tmp_path_factory.mktemp("baseline")
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(root, filter="data")
    return root


_COUNTS: dict[str, tuple[int, int]] = {}  # which tree -> (states, transitions)


def _explore_in(benchmark: Any, root: Path, tree: str) -> None:
    def run() -> list[str]:
        out = subprocess.run(
            [sys.executable, "-c", _EXPLORE, str(root)], check=True, capture_output=True, text=True
        )
        return out.stdout.split()

    states, transitions, ok, seconds = benchmark.pedantic(run, rounds=1, iterations=1)
    assert ok == "True"
    benchmark.extra_info.update(
        states=int(states), transitions=int(transitions), cpu_seconds=round(float(seconds), 2)
    )
    _COUNTS[tree] = (int(states), int(transitions))
    benchmark.extra_info.update(counts_of_both=dict(_COUNTS))


@pytest.mark.benchmark(group="spec-explorer-default-bounds")
def test_spec_explorer_default_bounds(benchmark: Any, baseline_root: Path) -> None:
    _explore_in(benchmark, REPO, "this tree")


@pytest.mark.benchmark(group="spec-explorer-default-bounds")
def test_spec_explorer_default_bounds_7dc0ff8_baseline(benchmark: Any, baseline_root: Path) -> None:
    _explore_in(benchmark, baseline_root, BASELINE_COMMIT)
