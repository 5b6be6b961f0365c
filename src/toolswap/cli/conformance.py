"""``toolswap conformance HARNESS``: put an owner adapter through every promise it makes.

HARNESS is ``module:attr`` naming an ``OwnerHarness`` subclass (see
``docs/owner-adapters.md``), or ``sqlite`` / ``memory`` for the built-in
owners, or a ``postgresql://`` URL for the PostgreSQL owner on that server.

Each check probes one sentence of the owner promises, the generation terms or
the reconciliation table, on fresh stores, and has a stable id.  It runs its
fixed examples, then examples drawn from the whole domain the protocol allows
(ids, identities, which store call fails), shrinking a failure to a small
case; ``--seed`` reproduces a run, ``--failures DIR`` keeps one replay file
per failure and ``--replay FILE`` runs one again.  The table shows every
check's verdict, time and promise; failures and skips say why.  Exit status:
0 when every chosen check ran and the adapter conforms (skips allowed), 1
when a check failed (or a declared known failure passed, or a check did not
run), 2 when the harness is unusable.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import Any

import attrs

from ..errors import UsageError
from ..testing.harness import resolve_harness
from ..testing.options import FULL, QUICK, RunOptions
from ..testing.registry import checks_named
from . import _progress
from ._common import describe

__all__ = ["register"]

_DEEP = ("MODEL", "DEEP")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "conformance",
        help="run an owner adapter's harness through the conformance kit",
        description=describe(__doc__.split("\n\n", 1)[1] if __doc__ else None),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "harness", nargs="?", metavar="HARNESS", help="module:attr, sqlite, memory or a URL"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report")
    parser.add_argument("--markdown", metavar="FILE", help="also write a Markdown report")
    parser.add_argument(
        "--repeat", type=int, default=1, metavar="N", help="run each check N times (default 1)"
    )
    parser.add_argument(
        "--check",
        action="append",
        metavar="ID",
        help="run only this check, group (O5) or prefix (O5.fence-*); repeatable",
    )
    parser.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="ID",
        help="leave out this check, group or prefix; repeatable",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a smoke test: skip the deep harnesses (MODEL.*, DEEP.*) and run only the "
        "plain fixed example of each check (nothing drawn)",
    )
    parser.add_argument(
        "--seed", type=int, metavar="N", help="seed of the drawn examples (default: a new one)"
    )
    parser.add_argument(
        "--examples",
        type=int,
        metavar="N",
        help=f"drawn examples per check at most (default {FULL.examples}; 0: fixed ones only)",
    )
    parser.add_argument(
        "--budget",
        type=float,
        metavar="S",
        help=f"seconds a check may spend on its examples (default {FULL.budget:g})",
    )
    parser.add_argument(
        "--check-timeout",
        type=float,
        metavar="S",
        help=f"fail a check (or the harness) still running after S s (default "
        f"{FULL.check_timeout:g})",
    )
    parser.add_argument(
        "--slow",
        action="store_true",
        help="let time pass for real where the harness has no clock (advance_clock)",
    )
    parser.add_argument(
        "--failures", metavar="DIR", help="write one replay file per failing check into DIR"
    )
    parser.add_argument("--replay", metavar="FILE", help="run the one case of a replay file")
    parser.add_argument("--list", action="store_true", help="list the check ids and exit")
    parser.add_argument(
        "--workdir", metavar="DIR", help="keep every store and scratch session under DIR"
    )
    parser.set_defaults(handler=_main)


def _options(args: argparse.Namespace) -> RunOptions:
    base = QUICK if args.quick else FULL
    changes: dict[str, Any] = {"slow": args.slow, "failures": args.failures}
    for name in ("seed", "examples", "budget", "check_timeout"):
        value = getattr(args, name)
        if value is not None:
            changes[name] = value
    if args.examples is not None and args.examples < 0:
        raise UsageError("--examples must be at least 0")
    if args.budget is not None and args.budget < 0:
        raise UsageError("--budget must be at least 0")
    if args.check_timeout is not None and args.check_timeout <= 0:
        raise UsageError("--check-timeout must be positive")
    return attrs.evolve(base, **changes)


def _main(args: argparse.Namespace) -> int:
    if args.list:
        for check in checks_named(args.check, args.exclude):
            print(f"{check.id:<45} {check.promise}")
        return 0
    if args.repeat < 1:
        raise UsageError("--repeat must be at least 1")
    from ..testing.replay import load_replay
    from ..testing.reports import render_json, render_junit, render_markdown, render_table
    from ..testing.runner import run_conformance

    replay = load_replay(args.replay) if args.replay else None
    spec = args.harness or (replay.harness if replay is not None else None)
    if not spec:
        raise UsageError("name a harness: module:attr, sqlite, memory or a postgresql:// URL")
    options = _options(args)
    # As `python -m` does: a harness module in the current folder is importable.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    chosen = [c.id for c in checks_named(args.check, args.exclude)]
    if args.quick:
        chosen = [c for c in chosen if not c.startswith(tuple(f"{g}." for g in _DEEP))]
    # Whatever the harness prints goes to stderr: stdout is the report (JSON or the table).
    with contextlib.redirect_stdout(sys.stderr):
        harness = resolve_harness(spec)
        with _progress.for_args(args) as line:
            report = run_conformance(
                harness,
                workroot=args.workdir,
                checks=None if replay is not None else chosen,
                repeat=args.repeat,
                options=options,
                replay=replay,
                progress=_progress.checks_callback(line),
            )
    for path, render in ((args.junit, render_junit), (args.markdown, render_markdown)):
        if path:
            _write(path, render(report))
    print(render_json(report) if args.json else render_table(report))
    code = 0 if report.passed else 1
    if any("did not finish within" in r.message for r in report.results):
        # A call is still stuck inside the adapter: do not let it hold the exit.
        from ..testing.runner import end_process

        sys.stdout.flush()
        sys.stderr.flush()
        end_process(code)
    return code


def _write(path: str, text: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as out:
            out.write(text)
    except OSError as exc:
        raise UsageError(f"cannot write {os.path.basename(path)!r}: {exc.strerror}") from exc
