"""``toolswap check [--json] [--seeds N]``: the whole safety case in one verdict table.

Three independent checks, each with its own evidence:

1. **spec model** -- the bounded breadth-first explorer over the composed
   state machine of :mod:`toolswap.spec` (S1-S7 in every reachable state, L1
   progress);
2. **crash explorer** -- the real implementation on a simulated disk, crashed
   at every crash point and I/O operation in every crash mode, recovered and
   checked against S1-S7 (:mod:`toolswap.faultinject`);
3. **owner checks** -- the embedded SQLite owner run through the owner
   promises and the reconciliation rows (:mod:`toolswap.owner_checks`), in a
   throwaway folder.

Nothing outside a temporary folder is written.  Exit status 0 means every
check passed; 1 means at least one failed (the table says which and why).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import attrs

from ..errors import UsageError
from ..owner_checks import run_owner_checks
from ..owners.sqlite import SQLiteOwner
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
        help="run the spec explorer, the crash explorer and the SQLite owner checks",
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
    add_json_argument(parser)
    parser.set_defaults(handler=_main)


def _spec_model() -> CheckRow:
    from ..spec.explorer import explore
    from ..spec.system import Model

    started = time.perf_counter()
    report = explore(Model(), clock=time.perf_counter)
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


def _crash_explorer(seeds: int) -> CheckRow:
    from ..faultinject.explorer import CrashExplorer

    started = time.perf_counter()
    result = CrashExplorer(seeds=seeds).explore()
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


def _owner_checks() -> CheckRow:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="toolswap-check-") as scratch:
        database = os.path.join(scratch, "owner.db")
        results = run_owner_checks(lambda: SQLiteOwner(database), os.path.join(scratch, "work"))
    failed = [r for r in results if not r.passed]
    evidence = f"{len(results) - len(failed)}/{len(results)} owner promises and rows held"
    if failed:
        evidence += "; failed: " + "; ".join(f"{r.promise} {r.name}: {r.detail}" for r in failed)
    return CheckRow(
        check="owner checks (SQLite)",
        passed=not failed,
        evidence=evidence,
        seconds=time.perf_counter() - started,
    )


def run_checks(
    seeds: int = CHECK_SEEDS, progress: Callable[[str], None] | None = None
) -> list[CheckRow]:
    """Run the three checks in order; ``progress`` hears each one's name as it starts."""
    steps: list[tuple[str, Callable[[], CheckRow]]] = [
        ("spec model", _spec_model),
        ("crash explorer", lambda: _crash_explorer(seeds)),
        ("owner checks", _owner_checks),
    ]
    rows = []
    for name, step in steps:
        if progress is not None:
            progress(name)
        rows.append(step())
    return rows


def _main(args: argparse.Namespace) -> int:
    if args.seeds < 1:
        raise UsageError("--seeds must be at least 1")
    rows = run_checks(
        args.seeds, progress=lambda name: print(f"running {name} ...", file=sys.stderr)
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
