"""``toolswap explore [--variant NAME] [--bounds k=v,...] [--json] [--list]``

Explore the executable specification (``toolswap.spec``) breadth first and
print the verdict: states, transitions, depth, time.  With ``--variant`` the
model has one classic mistake switched on, and the shortest counterexample is
printed step by step.

Exit status:
  0  no violation: S1-S7 hold in every reachable state and L1 progress holds
  1  a violation was found (for a variant: its expected one, as it should be)
  2  usage error: unknown variant, bad bounds, unreadable SPEC.md
  3  a variant did NOT produce its expected violation (the spec lost the
     behaviour the mistake needs; e.g. --bounds switched that fault off)
  4  incomplete: --max-states or --max-seconds ran out before the search
     ended and no violation was found so far (never a PASS)

States are explored one per orbit of the transaction renamings that leave
the model unchanged (symmetry reduction); the verdict and the shortest trace
are those of the full model.  ``--no-symmetry`` explores every state.
On a terminal, live progress (states, depth, rate) is shown on stderr.

``--compaction`` explores the journal-compaction model instead (its own
invariants C1-C4, spec/SPEC.md); ``--compaction-mistake NAME`` switches one
of its mistakes on (exit 1 when its expected violation is found, 3 when not).

``--write-spec-diagrams PATH`` regenerates the diagrams and tables between the
BEGIN/END markers of SPEC.md from the transition tables, and explores nothing.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from typing import Any

from ..errors import UsageError
from . import _progress
from ._common import add_json_argument, describe, positive_seconds, print_json

__all__ = [
    "register",
    "explore",
    "write_spec_diagrams",
    "EXIT_OK",
    "EXIT_VIOLATION",
    "EXIT_NOT_CAUGHT",
    "EXIT_INCOMPLETE",
]


def _spec(module: str) -> Any:
    # by name: toolswap.spec lives in its own folder (see pyproject's package-dir),
    # which static checkers of src/ cannot follow
    return importlib.import_module(f"toolswap.spec.{module}")


diagrams = _spec("diagrams")
explorer = _spec("explorer")
variants = _spec("variants")
catalogue = _spec("catalogue")
compaction = _spec("compaction")
SpecError: type[Exception] = _spec("errors").SpecError
Bounds = _spec("system").Bounds
Model = _spec("system").Model

EXIT_OK = 0
EXIT_VIOLATION = 1
EXIT_NOT_CAUGHT = 3
EXIT_INCOMPLETE = 4


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "explore",
        help="explore the executable specification (and its mistake variants)",
        description=describe(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--variant", metavar="NAME", default=None, help="switch one mistake on (see --list)"
    )
    parser.add_argument(
        "--bounds",
        metavar="K=V,...",
        default="",
        help="override bounds, e.g. artifacts=1,transactions=3,crashes=false "
        "(keys: " + ", ".join(f.name for f in Bounds.__attrs_attrs__) + ")",
    )
    parser.add_argument("--list", action="store_true", help="list the variants and exit")
    parser.add_argument(
        "--max-states",
        metavar="N",
        type=_positive_int("--max-states"),
        default=None,
        help="stop after N states with an INCOMPLETE verdict (exit 4)",
    )
    parser.add_argument(
        "--max-seconds",
        metavar="S",
        type=positive_seconds("--max-seconds"),
        default=None,
        help="stop after S seconds with an INCOMPLETE verdict (exit 4)",
    )
    parser.add_argument(
        "--no-symmetry",
        action="store_true",
        help="explore every state, not one per orbit of transaction renamings",
    )
    parser.add_argument(
        "--write-spec-diagrams",
        metavar="PATH",
        default=None,
        help="regenerate the generated block of SPEC.md at PATH and exit",
    )
    parser.add_argument(
        "--html",
        metavar="FILE",
        default=None,
        help="with --variant: also write its trace as one offline HTML page (as toolswap report)",
    )
    parser.add_argument(
        "--compaction",
        action="store_true",
        help="explore the journal-compaction model (C1-C4) instead of the protocol",
    )
    parser.add_argument(
        "--compaction-mistake",
        metavar="NAME",
        default=None,
        choices=sorted(_mistake_names()),
        help="with --compaction: switch one mistake on ("
        + ", ".join(sorted(_mistake_names()))
        + ")",
    )
    add_json_argument(parser)
    parser.set_defaults(handler=explore)


def _mistake_names() -> dict[str, Any]:
    names: dict[str, Any] = compaction.mistake_names()
    return names


def explore(args: argparse.Namespace) -> int:
    if args.write_spec_diagrams is not None:
        return write_spec_diagrams(args.write_spec_diagrams)
    if args.compaction or args.compaction_mistake is not None:
        return explore_compaction(args)
    if args.list:
        return _list(args.json)
    try:
        bounds = Bounds.parse(args.bounds)
        variant = variants.get(args.variant) if args.variant is not None else None
    except SpecError as exc:
        raise UsageError(str(exc)) from exc
    if variant is None and args.html is not None:
        raise UsageError("--html needs --variant NAME (toolswap report draws every variant)")
    if args.html is not None:
        from .report import check_out_path  # the page writer, loaded only when asked

        check_out_path(args.html)  # before the exploring, not after it
    model = Model(bounds=bounds) if variant is None else variant.model(bounds)
    with _progress.for_args(args) as progress:
        report = explorer.explore(
            model,
            name="correct model" if variant is None else variant.name,
            clock=time.perf_counter,
            max_states=args.max_states,
            max_seconds=args.max_seconds,
            symmetry=not args.no_symmetry,
            progress=_progress.explorer_callback(progress),
        )
    if variant is None:
        if report.violation is None and not report.complete:
            code = EXIT_INCOMPLETE
        else:
            code = EXIT_OK if report.ok else EXIT_VIOLATION
        _print(args.json, report, None, code, bounds)
        return code
    if args.html is not None:
        from .report import write_variant_html  # the page renderer, loaded only when asked

        write_variant_html(args.html, variant, bounds, report)
    v = report.violation
    caught = v is not None and variant.expected in v.invariants
    if v is None and not report.complete:
        code = EXIT_INCOMPLETE
    else:
        code = EXIT_VIOLATION if caught else EXIT_NOT_CAUGHT
    _print(args.json, report, variant, code, bounds)
    if args.html is not None:
        # said on stderr: stdout may be a JSON document
        sys.stderr.write(f"wrote {args.html}: the trace of {variant.name} as one offline page\n")
    return code


def _print(as_json: bool, report: Any, variant: Any, code: int, bounds: Any) -> None:
    if as_json:
        document = explorer.report_to_dict(report)
        document["exit_status"] = code
        document["bounds"] = {f.name: getattr(bounds, f.name) for f in bounds.__attrs_attrs__}
        if variant is not None:
            document["variant"] = variant.name
            document["mistake"] = variant.mistake.value
            document["expected"] = variant.expected.full
            document["expected_found"] = code == EXIT_VIOLATION
            document["lesson"] = variant.lesson
        print_json(document)
        return
    out = sys.stdout
    if variant is not None:
        out.write(f"variant: {variant.name}\nmistake: {variant.mistake.value}\n")
        out.write(f"expected: a violation of {variant.expected.full}\n")
    out.write(explorer.format_report(report) + "\n")
    if variant is None:
        return
    short = variant.expected  # its text is the handle, "S2"
    if code == EXIT_INCOMPLETE:
        out.write(f"INCOMPLETE: the budget ran out before a violation of {short} was found\n")
    elif code == EXIT_VIOLATION:
        out.write(f"expected violation of {short} found.\n")
        out.write(f"why it matters: {variant.lesson}\n")
    else:
        found = [i.full for i in report.violation.invariants] if report.violation else ["nothing"]
        out.write(
            f"NOT CAUGHT: expected a violation of {short}, found {', '.join(found)} "
            "(exit 3: the model no longer exhibits this mistake under these bounds)\n"
        )


def explore_compaction(args: argparse.Namespace) -> int:
    """The compaction model with its default bounds, or with one mistake switched on."""
    if args.variant is not None or args.bounds or args.html is not None:
        raise UsageError("--compaction takes none of --variant, --bounds, --html")
    mistake = _mistake_names()[args.compaction_mistake] if args.compaction_mistake else None
    mistakes = frozenset({mistake}) if mistake is not None else frozenset()
    started = time.perf_counter()
    report = compaction.explore(compaction.Model(mistakes=mistakes))
    seconds = time.perf_counter() - started
    v = report.violation
    expected = compaction.MISTAKE_BREAKS[mistake] if mistake is not None else None
    if expected is None:
        code = EXIT_OK if v is None else EXIT_VIOLATION
    else:
        code = EXIT_VIOLATION if v is not None and expected in v.checks else EXIT_NOT_CAUGHT
    wanted = expected.value if expected is not None else ""
    if args.json:
        print_json(
            {
                "model": "compaction",
                "mistake": mistake.value if mistake is not None else None,
                "expected": wanted or None,
                "states": report.states,
                "transitions": report.transitions,
                "depth": report.depth,
                "seconds": round(seconds, 3),
                "violation": None
                if v is None
                else {
                    "checks": [c.value for c in v.checks],
                    "reasons": list(v.reasons),
                    "trace": [s.describe() for s in v.trace],
                },
                "exit_status": code,
            }
        )
        return code
    out = sys.stdout
    if mistake is not None:
        out.write(f"compaction mistake: {mistake.value}\nexpected: a violation of {wanted}\n")
    out.write(
        f"compaction model: {report.states:,} states, {report.transitions:,} transitions, "
        f"depth {report.depth}, {seconds:.1f} s\n"
    )
    if v is None:
        out.write("no violation: C1-C4 hold in every reachable state\n")
        if mistake is not None:
            out.write(f"NOT CAUGHT: expected a violation of {wanted} (exit 3)\n")
        return code
    out.write(f"violation: {', '.join(c.value for c in v.checks)}\n")
    for reason in v.reasons:
        out.write(f"  because {reason}\n")
    out.write(f"shortest trace ({len(v.trace)} steps):\n")
    for i, label in enumerate(v.trace, 1):
        out.write(f"  {i}. {label.describe()}\n")
    if mistake is not None:
        verdict = "found" if code == EXIT_VIOLATION else "NOT found (exit 3)"
        out.write(f"expected violation of {wanted} {verdict}.\n")
    return code


def _list(as_json: bool) -> int:
    """The variants, each with the catalogue's word on where else the mistake is shown."""
    rows = list(variants.VARIANTS.values())
    shown = {v.name: _shown_in(v.name) for v in rows}
    if as_json:
        print_json(
            [
                {
                    "name": v.name,
                    "mistake": v.mistake.value,
                    "expected": v.expected.full,
                    "shown_in": shown[v.name],
                }
                for v in rows
            ]
        )
        return EXIT_OK
    width = max(len(v.name) for v in rows)
    where = max(len(",".join(w)) for w in shown.values())
    for v in rows:
        sys.stdout.write(
            f"{v.name:<{width}}  {v.expected:<3}  "
            f"{','.join(shown[v.name]):<{where}}  {v.mistake.value}\n"
        )
    return EXIT_OK


def _shown_in(name: str) -> list[str]:
    """Where the catalogue says a mistake is shown: model, code (a mutant), stateful."""
    found = catalogue.entry(name)
    if found is None:  # pragma: no cover - variants.py refuses a variant the catalogue lacks
        return ["model"]
    return [w for w in ("model", "code", "stateful") if getattr(found, w)]


def write_spec_diagrams(path: str) -> int:
    """Rewrite the generated block of the SPEC.md at ``path``; unchanged files are not touched."""
    try:
        with open(path, encoding="utf-8") as handle:
            document = handle.read()
        updated = diagrams.splice(document)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot regenerate {path}: {exc}") from exc
    if updated == document:
        sys.stdout.write(f"{path}: diagrams already match the tables\n")
        return EXIT_OK
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(updated)
    sys.stdout.write(f"{path}: diagrams regenerated from the tables\n")
    return EXIT_OK


def _positive_int(option: str) -> Any:
    def parse(text: str) -> int:
        if not (text.isascii() and text.isdigit()) or int(text) < 1:
            raise argparse.ArgumentTypeError(f"{option} wants a whole number above 0, got {text!r}")
        return int(text)

    return parse
