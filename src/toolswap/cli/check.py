"""``toolswap check [--json] [--seeds N]``: the whole safety case in one verdict table.

Three independent checks, each with its own evidence:

1. **spec model** -- the bounded breadth-first explorer over the composed
   state machine of :mod:`toolswap.spec` (S1-S7 in every reachable state, L1
   progress);
2. **crash explorer** -- the real implementation on a simulated disk, crashed
   at every crash point and I/O operation in every crash mode, recovered and
   checked against S1-S7 (:mod:`toolswap.faultinject`);
3. **owner conformance** -- the conformance kit (:mod:`toolswap.testing`) on
   the built-in owners: every owner promise, the generation terms and the
   reconciliation rows, with another thread and another process contending,
   across reopen and restart, with store faults, and the model-based owner
   machine; ``--owner`` adds an owner of yours (``module:attr`` harness or a
   ``postgresql://`` URL).

Nothing outside a temporary folder is written.  Exit status 0 means every
check passed; 1 means at least one failed (the table says which and why).
On a terminal, live progress (the current check, states, rate) is shown on
stderr; it stays off under ``--json`` and when stderr is not a terminal.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from ..errors import UsageError
from ..testing.harness import OwnerHarness, resolve_harness
from ..testing.registry import checks_named
from . import _progress
from ._common import add_json_argument, describe, print_json

__all__ = ["register", "CheckRow", "run_checks"]

CHECK_SEEDS = 6


@attrs.frozen(kw_only=True)
class CheckRow:
    """One line of the verdict table."""

    check: str
    passed: bool
    evidence: str
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "passed": self.passed,
            "evidence": self.evidence,
            "seconds": round(self.seconds, 2),
        }


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "check",
        help="run the spec explorer, the crash explorer and the conformance kit on the "
        "built-in owners (SQLite and in-memory)",
        description=describe(__doc__.split("\n\n", 1)[1] if __doc__ else None),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--seeds",
        type=int,
        default=CHECK_SEEDS,
        metavar="N",
        help=f"crash explorer choice streams per target (default {CHECK_SEEDS})",
    )
    parser.add_argument(
        "--owner",
        action="append",
        metavar="HARNESS",
        help="also run the conformance kit on this owner (module:attr or a postgresql:// URL)",
    )
    add_json_argument(parser)
    parser.set_defaults(handler=_main)


def _spec_model(live: _progress.Progress) -> CheckRow:
    from ..spec.explorer import explore
    from ..spec.system import Model

    started = time.perf_counter()
    report = explore(
        Model(),
        clock=time.perf_counter,
        progress=_progress.explorer_callback(live, "check: spec model"),
    )
    evidence = (
        f"{report.states:,} states, {report.transitions:,} transitions, depth {report.depth}; "
        + ("0 violations" if report.violation is None else f"violation: {report.violation}")
        + ("" if not report.l1_checked else f"; L1 stuck states: {report.l1_stuck}")
    )
    return CheckRow(
        check="spec model (S1-S7, L1)",
        passed=report.ok and report.complete,
        evidence=evidence,
        seconds=time.perf_counter() - started,
    )


def _crash_explorer(seeds: int, live: _progress.Progress) -> CheckRow:
    from ..faultinject.explorer import CrashExplorer

    started = time.perf_counter()
    result = CrashExplorer(seeds=seeds).explore(
        on_state=_progress.crash_callback(live, "check: crash explorer")
    )
    covered = len(result.known_points) - len(result.uncovered)
    evidence = (
        f"{result.states:,} crash states, {result.violation_total} violations, "
        f"{covered}/{len(result.known_points)} crash points covered"
    )
    if result.violations:
        first = result.violations[0]
        evidence += f"; first: {first.invariant} {first.detail}"
    return CheckRow(
        check="crash explorer (S1-S7)",
        passed=result.violation_total == 0 and not result.uncovered,
        evidence=evidence,
        seconds=time.perf_counter() - started,
    )


def _conformance(label: str, harness: type[OwnerHarness], live: _progress.Progress) -> CheckRow:
    from ..testing.options import CHECK
    from ..testing.runner import run_conformance

    started = time.perf_counter()
    # The crash explorer row above already crashes the built-in owner everywhere.
    checks = [c.id for c in checks_named(None) if c.id != "DEEP.crash-explorer"]
    report = run_conformance(
        harness,
        checks=checks,
        options=CHECK,
        progress=_progress.checks_callback(live, f"check: owner conformance ({label})"),
    )
    counts = report.counts()
    evidence = f"{counts['pass']} checks passed, {counts['skip']} skipped, seed {report.seed}"
    if report.failed:
        evidence += "; failed: " + "; ".join(
            f"{r.check_id}: {r.message.splitlines()[0] if r.message else ''}" for r in report.failed
        )
    return CheckRow(
        check=f"owner conformance ({label})",
        passed=report.passed,
        evidence=evidence,
        seconds=time.perf_counter() - started,
    )


def run_checks(
    seeds: int = CHECK_SEEDS,
    progress: Callable[[str], None] | None = None,
    owners: Sequence[str] = (),
    live: _progress.Progress | None = None,
) -> list[CheckRow]:
    """Run the checks in order; ``progress`` hears each one's name as it starts.

    ``owners`` are extra harness specs for the conformance kit (see
    :func:`toolswap.testing.harness.resolve_harness`); ``live`` is the progress
    line the checks draw their states and rates on (none by default).
    """
    line = live if live is not None else _progress.Progress(False)
    extra = [(spec, resolve_harness(spec)) for spec in owners]  # refuse a bad one first
    steps: list[tuple[str, Callable[[], CheckRow]]] = [
        ("spec model", lambda: _spec_model(line)),
        ("crash explorer", lambda: _crash_explorer(seeds, line)),
    ]
    for label, spec in (("SQLite", "sqlite"), ("in-memory", "memory")):
        steps.append((f"owner conformance ({label})", _step(label, resolve_harness(spec), line)))
    for spec, harness in extra:
        label = "PostgreSQL" if spec.startswith("postgres") else spec
        steps.append((f"owner conformance ({label})", _step(label, harness, line)))
    rows = []
    for name, step in steps:
        if progress is not None:
            progress(name)
        rows.append(step())
    return rows


def _step(
    label: str, harness: type[OwnerHarness], live: _progress.Progress
) -> Callable[[], CheckRow]:
    return lambda: _conformance(label, harness, live)


def _main(args: argparse.Namespace) -> int:
    if args.seeds < 1:
        raise UsageError("--seeds must be at least 1")
    with _progress.for_args(args) as line:
        rows = run_checks(
            args.seeds,
            progress=lambda name: line.update(f"check: {name} ..."),
            owners=args.owner or (),
            live=line,
        )
    verdict = all(row.passed for row in rows)
    if args.json:
        print_json({"passed": verdict, "checks": [row.to_dict() for row in rows]})
    else:
        width = max(len(row.check) for row in rows)
        print(f"{'check':<{width}}  verdict  {'time':>7}  evidence")
        for row in rows:
            mark = "PASS" if row.passed else "FAIL"
            print(f"{row.check:<{width}}  {mark:<7}  {row.seconds:6.1f}s  {row.evidence}")
        print("verdict: " + ("every check passed" if verdict else "FAILED (see above)"))
    return 0 if verdict else 1
