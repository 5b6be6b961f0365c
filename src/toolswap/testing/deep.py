"""The deep harnesses on any adapter: the crash explorer and the implementation-vs-model machine.

Two entry points for the conformance kit, each taking an
:class:`~toolswap.testing.OwnerHarness` subclass and a work root:

* :func:`crash_explore_harness` -- the crash explorer
  (:mod:`toolswap.faultinject.explorer`) with a fresh store of the harness
  per crash state: every standard scenario is crashed, recovered and checked
  against S1-S7, the owner seen through its protocol only.
* :func:`run_protocol_machine` -- the implementation-vs-model machine
  (:mod:`toolswap.faultinject.crashing_machine`) with a fresh store per
  example: journal, artifacts, cleanup and this owner against the spec, with
  crashes of the disk and restarts of the store.

Rules
=====
1. **Bounded.**  The defaults are a subset chosen to finish, both together,
   in about 20 s on the SQLite harness on a 2-core machine; the keyword
   arguments scale up (see each function).
2. **Silent.**  Nothing is printed; Hypothesis's report of a failing run is
   collected into :attr:`DeepResult.details`.
3. **One folder per store.**  Every harness instance gets its own new folder
   under ``workroot``; ``destroy()`` is called on it and the folder is removed.
4. **Skips are reported.**  A scenario whose owner fault the harness cannot
   show (no FAULTS capability, or no mapping at all) is skipped and named in
   the summary, never counted as passed; the machine runs such an outcome as
   the nearest one the owner can show and names the faults it could not.
5. Hypothesis is imported only when :func:`run_protocol_machine` runs.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from .harness import OwnerHarness

__all__ = ["DeepResult", "crash_explore_harness", "run_protocol_machine"]

_SHOWN = 5  # violations kept in ``details``
#: Report lines left out of ``details``: the invariant calls Hypothesis lists after every
#: step of a failing trace, and its warning about slow shrinking (we bound shrinking).
_NOISE = re.compile(
    r"state\.(observables_match_model|s\d_\w+)\(\)$|WARNING: Hypothesis has spent|PLEASE REPORT"
)


@attrs.frozen
class DeepResult:
    """What one deep run found.

    ``summary`` is one line (states or examples explored, violations, skips);
    ``details`` holds the first violations, or the shortest failing trace.
    """

    passed: bool
    summary: str
    details: tuple[str, ...] = ()


def crash_explore_harness(
    harness_cls: type[OwnerHarness],
    workroot: str | os.PathLike[str],
    *,
    seeds: int = 1,
    scenarios: Sequence[str] | None = None,
    modes: Sequence[str] | None = None,
    every_io: bool | None = None,
    restart_every: int | None = None,
) -> DeepResult:
    """Crash the standard scenarios with this harness's owner; check S1-S7.

    ``seeds=1`` (the default, a few seconds) crashes in ``drop`` mode at every
    named crash point and at the end of each scenario, plus one crash of the
    recovery per target.  ``seeds=N>1`` crashes before every I/O operation
    too, in every crash mode, with ``N`` seeded choice streams for the torn
    and dir-subset modes (minutes).  ``modes`` and ``every_io`` override
    either choice; ``scenarios`` names a subset of the standard scenarios.
    Passing needs no violation and no progress finding (a recovery that
    fails on this owner hides what it would have checked).  ``restart_every``
    restarts the store for real in the crashes of every N-th crash state only
    (default: every state, or every 8th for a harness with ``slow_restart``).
    """
    from ..faultinject.disk import CRASH_MODES
    from ..faultinject.explorer import STANDARD_SCENARIOS, CrashExplorer
    from ..faultinject.owner_source import harness_sources

    chosen = list(STANDARD_SCENARIOS)
    if scenarios is not None:
        known = {s.name: s for s in STANDARD_SCENARIOS}
        missing = [n for n in scenarios if n not in known]
        if missing:
            raise ValueError(f"unknown scenarios {missing}; want some of {sorted(known)}")
        chosen = [known[n] for n in scenarios]
    wide = seeds > 1
    explorer = CrashExplorer(
        chosen,
        seeds=seeds,
        modes=tuple(modes) if modes is not None else (CRASH_MODES if wide else ("drop",)),
        target_kinds=("io", "point", "end")
        if (wide if every_io is None else every_io)
        else ("point", "end"),
        owner=harness_sources(
            harness_cls,
            os.fspath(workroot),
            "crash-state",
            restart_every=restart_every or (8 if harness_cls.slow_restart else 1),
        ),
    )
    result = explorer.explore()
    problems = [
        f"{v.invariant} in {v.scenario} at {v.target} [{v.mode}]: {v.detail}"
        for v in (*result.violations, *result.progress)
    ]
    total = result.violation_total
    findings = sum(result.progress_counts.values())
    skipped = sorted(result.skipped)
    summary = (
        f"crash explorer on {harness_cls.__name__}: {result.states:,} crash states over "
        f"{len(result.per_scenario)} scenarios ({'/'.join(explorer.modes)}, "
        f"targets {'/'.join(sorted(explorer.target_kinds))}), {total} violations"
        + (f" ({_counts(result.violation_counts)})" if total else "")
        + (f", {findings} progress findings" if findings else "")
        + f", {len(skipped)} scenarios skipped"
        + (f" ({', '.join(skipped)})" if skipped else "")
        + f", {result.seconds:.1f} s"
    )
    details = (
        *problems[:_SHOWN],
        *(f"skipped {name}: {result.skipped[name]}" for name in skipped),
    )
    return DeepResult(passed=total == 0 and findings == 0, summary=summary, details=details)


def run_protocol_machine(
    harness_cls: type[OwnerHarness],
    workroot: str | os.PathLike[str],
    *,
    max_examples: int = 75,
    step_count: int = 25,
    derandomize: bool = True,
    shrink_seconds: float = 10.0,
) -> DeepResult:
    """Run the implementation-vs-model machine with this harness's owner.

    Each example is a fresh store and up to ``step_count`` rules (publish,
    remove, reconcile, GC, crashes of the disk, restarts of the store, owner
    faults mapped onto the harness's store faults, ...); ``max_examples``
    scales the search.  A failure is shrunk for at most ``shrink_seconds``
    and its shortest trace returned in ``details``.  ``derandomize=False``
    draws a new search every run.
    """
    from hypothesis import HealthCheck, Phase, Verbosity, settings
    from hypothesis.reporting import with_reporter
    from hypothesis.stateful import run_state_machine_as_test

    _run_as_test: Any = run_state_machine_as_test  # typed differently across releases

    from ..faultinject.crashing_machine import CrashingMachine
    from ..faultinject.owner import OWNER_FAULTS
    from ..faultinject.owner_source import HarnessSource, harness_sources
    from ..faultinject.protocol_machine import machine_with_owner
    from .generate import shrinking_for

    root = os.fspath(workroot)
    make = harness_sources(
        harness_cls, root, "example", restart_every=4 if harness_cls.slow_restart else 1
    )
    examples = 0

    def counted() -> HarnessSource:
        nonlocal examples
        examples += 1
        return make()

    probe = harness_sources(harness_cls, root, "probe")()
    try:
        missing = [f for f in OWNER_FAULTS if probe.unsupported(f) is not None]
    finally:
        probe.close()
    machine = machine_with_owner(CrashingMachine, counted, f"{harness_cls.__name__}Machine")
    budget = settings(
        max_examples=max_examples,
        stateful_step_count=step_count,
        derandomize=derandomize,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
        print_blob=False,
        verbosity=Verbosity.normal,
    )
    report: list[str] = []
    started = time.perf_counter()
    failure: BaseException | None = None
    with with_reporter(lambda text: report.append(str(text))), shrinking_for(shrink_seconds):
        try:
            _run_as_test(machine, settings=budget)
        except Exception as exc:  # a failing example: the report says which
            failure = exc
    seconds = time.perf_counter() - started
    summary = (
        f"protocol machine on {harness_cls.__name__}: {examples} examples (search and "
        f"shrink) of up to "
        f"{step_count} steps, {0 if failure is None else 1} violations, "
        f"owner faults shown as the nearest outcome: {', '.join(missing) or 'none'}, "
        f"{seconds:.1f} s"
    )
    if failure is None:
        return DeepResult(passed=True, summary=summary)
    headline = f"{type(failure).__name__}: {failure}".strip().splitlines()[:1]
    texts = [*report, *(str(n) for n in getattr(failure, "__notes__", ()) if str(n) not in report)]
    lines = [*headline, *(line for text in texts for line in text.splitlines() if _kept(line))]
    return DeepResult(passed=False, summary=summary, details=tuple(lines))


def _kept(line: str) -> bool:
    return bool(line.strip()) and not _NOISE.match(line.strip())


def _counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))
