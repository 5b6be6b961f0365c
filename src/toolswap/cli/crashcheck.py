"""``toolswap crashcheck [--json]``: crash every standard scenario everywhere, check S1-S7.

It runs :class:`toolswap.faultinject.explorer.CrashExplorer` on a simulated
disk (nothing on the real disk is touched) and prints the number of crash
states explored, the violations (with what replays each) and how many crash
states each named crash point got.  Exit status 0 means no violation (and, with
``--misuse``, that every deliberate protocol misuse was caught); 1 otherwise.

``--mutants`` instead prints the kill matrix of the implementation mutants
(:mod:`toolswap.faultinject.mutants`): the mutants' scenarios are explored once
unmutated and once per mutant, switched into the real code.  Exit status 0
means the unmutated run has no violation and every mutant was caught by its
invariant.  ``--mutant NAME`` picks some of them; a mutant is named like the
spec variant of the same mistake (``toolswap explore --variant NAME``).

On a terminal, live progress (scenario, crash states, rate) is shown on stderr;
it stays off under ``--json`` and when stderr is not a terminal.
"""

from __future__ import annotations

import argparse
import importlib
import time
from typing import Any

from ..errors import UsageError
from . import _progress
from ._common import add_json_argument, describe, print_json

__all__ = ["register", "DEFAULT_SEEDS", "MUTANT_SEEDS"]

#: Seeded choice streams per target for each torn granularity and for dir_subset.
DEFAULT_SEEDS = 10  # about 30,000 crash states over the standard scenarios
#: The same for ``--mutants`` (every mutant is caught well within one seed).
MUTANT_SEEDS = 1


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "crashcheck",
        help="crash the protocol at every crash point and I/O operation; check S1-S7",
        description=describe(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--seeds",
        type=int,
        default=None,
        metavar="N",
        help="choice streams per target for torn and dir_subset crashes "
        f"(default {DEFAULT_SEEDS}; {MUTANT_SEEDS} with --mutants)",
    )
    parser.add_argument(
        "--scenario",
        action="append",
        default=None,
        metavar="NAME",
        help="run only this scenario (repeatable; default: all standard scenarios)",
    )
    parser.add_argument(
        "--mode",
        action="append",
        default=None,
        metavar="MODE",
        help="crash mode: drop, torn or dir_subset (repeatable; default: all)",
    )
    parser.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="INVARIANT",
        help="count violations of this invariant apart, e.g. S6.reuse (repeatable)",
    )
    parser.add_argument(
        "--misuse",
        action="store_true",
        help="also run the deliberate protocol misuses; each must be caught",
    )
    parser.add_argument(
        "--mutants",
        action="store_true",
        help="print the kill matrix of the implementation mutants instead; each must be killed",
    )
    parser.add_argument(
        "--mutant",
        action="append",
        default=None,
        metavar="NAME",
        help="with --mutants: only this mutant (repeatable; default: all)",
    )
    parser.add_argument(
        "--list", action="store_true", help="list the scenarios and mutants and exit"
    )
    add_json_argument(parser)
    parser.set_defaults(handler=_crashcheck)


def _crashcheck(args: argparse.Namespace) -> int:
    # imported by name: toolswap.faultinject lives in its own folder (see pyproject), which
    # static checkers of src/ cannot follow
    explorer = importlib.import_module("toolswap.faultinject.explorer")
    CRASH_MODES: tuple[str, ...] = importlib.import_module("toolswap.faultinject.disk").CRASH_MODES
    MISUSE_SCENARIOS = explorer.MISUSE_SCENARIOS
    STANDARD_SCENARIOS = explorer.STANDARD_SCENARIOS
    CrashExplorer = explorer.CrashExplorer

    mutants = importlib.import_module("toolswap.faultinject.mutants")
    by_name = {s.name: s for s in STANDARD_SCENARIOS}
    if args.list:
        return _list(args.json, STANDARD_SCENARIOS, MISUSE_SCENARIOS, mutants.MUTANTS)
    if args.seeds is None:
        args.seeds = MUTANT_SEEDS if args.mutants else DEFAULT_SEEDS
    if args.seeds < 1 or args.seeds > 1000:
        raise UsageError(f"--seeds must be between 1 and 1000, got {args.seeds}")
    names = args.scenario or [s.name for s in STANDARD_SCENARIOS]
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise UsageError(f"unknown scenario(s) {', '.join(unknown)}; see --list")
    modes = args.mode or list(CRASH_MODES)
    bad = [m for m in modes if m not in CRASH_MODES]
    if bad:
        raise UsageError(f"unknown crash mode(s) {', '.join(bad)}; want {', '.join(CRASH_MODES)}")
    if args.mutant and not args.mutants:
        raise UsageError("--mutant needs --mutants")
    if args.mutants:
        if args.scenario or args.misuse:
            raise UsageError("--mutants runs each mutant's own scenarios; drop --scenario/--misuse")
        return _mutants(args, mutants, modes)

    chosen = CrashExplorer(
        [by_name[n] for n in names], seeds=args.seeds, modes=modes, ignore=args.ignore
    )
    with _progress.for_args(args) as progress:
        result = chosen.explore(on_state=_progress.crash_callback(progress))
    document: dict[str, Any] = result.to_dict()
    document["seeds"] = args.seeds
    document["modes"] = modes
    failed = result.violation_total > 0
    if args.misuse:
        matrix = []
        for scenario, invariant in MISUSE_SCENARIOS:
            found = CrashExplorer([scenario], seeds=1, modes=modes, ignore=args.ignore).explore()
            caught = found.violation_counts[invariant] > 0
            failed = failed or not caught
            matrix.append(
                {
                    "misuse": scenario.name,
                    "expected": invariant,
                    "caught": caught,
                    "violations_by_invariant": dict(sorted(found.violation_counts.items())),
                    "crash_states": found.states,
                }
            )
        document["misuse"] = matrix
    if args.json:
        print_json(document)
        return 1 if failed else 0
    _print_human(result, document)
    return 1 if failed else 0


def _mutants(args: argparse.Namespace, mutants: Any, modes: list[str]) -> int:
    # a mutant is typed by its label (hyphenated, as the spec variants) or its identifier
    known = {m.label: m for m in mutants.MUTANTS} | {m.name: m for m in mutants.MUTANTS}
    chosen = args.mutant or [m.label for m in mutants.MUTANTS]
    unknown = [n for n in chosen if n not in known]
    if unknown:
        raise UsageError(f"unknown mutant(s) {', '.join(unknown)}; see --list")
    picked = list({id(known[n]): known[n] for n in chosen}.values())  # once each, in order

    started = time.perf_counter()
    with _progress.for_args(args) as line:
        done: list[str] = []

        def progress(result: Any) -> None:
            done.append(result.mutant.label)
            line.update(
                f"mutants: {len(done)}/{len(picked)} run, last {result.mutant.label} "
                f"{'killed' if result.killed else 'SURVIVED'}, {line.elapsed():.0f} s"
            )

        def on_state(scenario: str, count: int, total: int) -> None:
            line.update(
                f"mutants: {len(done)}/{len(picked)} run; exploring {scenario}: "
                f"{count:,} crash states, {line.elapsed():.0f} s"
            )

        matrix = mutants.kill_matrix(
            picked,
            seeds=args.seeds,
            modes=modes,
            ignore=args.ignore,
            progress=progress,
            on_state=on_state,
        )
    document: dict[str, Any] = matrix.to_dict()
    document["seeds"] = args.seeds
    document["modes"] = modes
    document["seconds"] = round(time.perf_counter() - started, 2)
    if args.json:
        print_json(document)
    else:
        _print_matrix(document)
    return 0 if matrix.ok else 1


def _print_matrix(document: dict[str, Any]) -> None:
    base = document["baseline"]
    print(
        f"crashcheck --mutants: {document['killed']}/{document['total']} mutants killed "
        f"in {document['seconds']:.1f} s (modes {'/'.join(document['modes'])}; "
        f"{_progress.plural(document['seeds'], 'seed')})"
    )
    base_shown = ", ".join(f"{k}: {v:,}" for k, v in base["violations_by_invariant"].items())
    print(
        f"unmutated: {_progress.plural(base['crash_states'], 'crash state')} over "
        f"{_progress.plural(len(base['scenarios']), 'scenario')}, "
        f"{_progress.plural(base['violation_count'], 'violation')} ({base_shown or 'none'})"
    )
    for v in base["violations"][:10]:
        print(f"  {v['invariant']:<9} {v['scenario']} at {v['target']} [{v['mode']}] {v['detail']}")
    print(f"{'mutant':<24} {'expects':<7} {'killed':<7} {'states':>6}  violations by invariant")
    for row in document["mutants"]:
        by = ", ".join(f"{k}: {v:,}" for k, v in row["violations_by_invariant"].items())
        killed = "yes" if row["killed"] else "NO"
        print(
            f"{row['mutant']:<24} {row['expected']:<7} {killed:<7} "
            f"{row['crash_states']:>6,}  {by or 'none'}"
        )
        first = row["first_violation"]
        if first is not None:
            print(
                f"  first: {first['invariant']} in {first['scenario']} at {first['target']} "
                f"[{first['mode']}]: {first['detail']}"
            )


def _print_human(result: Any, document: dict[str, Any]) -> None:
    print(
        f"crashcheck: {_progress.plural(result.states, 'crash state')} explored in "
        f"{result.seconds:.1f} s ({_progress.plural(len(result.per_scenario), 'scenario')}; "
        f"modes {'/'.join(document['modes'])}; {_progress.plural(document['seeds'], 'seed')}; "
        f"{result.recovery_crash_states:,} also crashed in recovery)"
    )
    by_invariant = document["violations_by_invariant"]
    shown = ", ".join(f"{k}: {v:,}" for k, v in by_invariant.items()) or "none"
    print(f"violations: {result.violation_total:,} ({shown})")
    if document["ignored_by_invariant"]:
        ignored = ", ".join(f"{k}: {v:,}" for k, v in document["ignored_by_invariant"].items())
        print(f"ignored: {ignored}")
    for v in result.violations[:20]:
        print(f"  {v.invariant:<9} {v.scenario} at {v.target} [{v.mode}] {v.detail}")
        print(f"            replay seed: {v.seed!r}")
    print(f"progress findings (L1, not violations): {document['progress_count']:,}")
    print("crash states per scenario:")
    for scenario, count in result.per_scenario.items():
        print(f"  {scenario:<34} {count:>7,}")
    print("crash point coverage (crash states per point):")
    for point, count in document["crash_point_coverage"].items():
        print(f"  {point:<34} {count:>7,}")
    uncovered = document["uncovered_crash_points"]
    print(f"uncovered crash points: {', '.join(uncovered) if uncovered else 'none'}")
    for row in document.get("misuse", []):
        verdict = "caught" if row["caught"] else "MISSED"
        print(f"misuse {row['misuse']:<34} expects {row['expected']:<4} {verdict}")


def _list(as_json: bool, standard: Any, misuse: Any, mutants: Any) -> int:
    rows: list[dict[str, Any]] = [{"name": s.name, "kind": "scenario"} for s in standard]
    rows += [{"name": s.name, "kind": "misuse", "caught_by": inv} for s, inv in misuse]
    rows += [
        {
            "name": m.label,
            "kind": "mutant",
            "caught_by": m.invariant,
            "identifier": m.name,
            "shown_in": _shown_in(m.label),
        }
        for m in mutants
    ]
    if as_json:
        print_json(rows)
        return 0
    for row in rows:
        if row["kind"] == "scenario":
            print(row["name"])
        elif row["kind"] == "mutant" and "model" in row["shown_in"]:
            print(
                f"{row['name']} (mutant, caught by {row['caught_by']}; "
                f"in the model too: toolswap explore --variant {row['name']})"
            )
        else:
            print(f"{row['name']} ({row['kind']}, caught by {row['caught_by']})")
    return 0


def _shown_in(name: str) -> list[str]:
    """Where the catalogue of mistakes says ``name`` is shown: model, code, stateful."""
    import importlib

    found = importlib.import_module("toolswap.spec.catalogue").entry(name)
    if found is None:  # a mutant defined outside the shipped list (a test's own)
        return ["code"]
    return [w for w in ("model", "code", "stateful") if getattr(found, w)]
