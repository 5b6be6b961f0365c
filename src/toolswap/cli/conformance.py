"""``toolswap conformance HARNESS``: put an owner adapter through every promise it makes.

HARNESS is ``module:attr`` naming an ``OwnerHarness`` subclass (see
``docs/owner-adapters.md``), or ``sqlite`` / ``memory`` for the built-in
owners, or a ``postgresql://`` URL for the PostgreSQL owner on that server.

Each check probes one sentence of the owner promises, the generation terms or
the reconciliation table, on a fresh store, and has a stable id.  The table
shows every check's verdict, time and promise; failures and skips say why.
Exit status: 0 when the adapter conforms (skips allowed), 1 when a check
failed (or a declared known failure passed), 2 when the harness is unusable.
"""

from __future__ import annotations

import argparse
import os
import sys

from ..errors import UsageError
from ..testing.harness import resolve_harness
from ..testing.registry import checks_named
from . import _progress
from ._common import describe

__all__ = ["register"]


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
        "--quick", action="store_true", help="skip the deep harnesses (MODEL.*, DEEP.*)"
    )
    parser.add_argument("--list", action="store_true", help="list the check ids and exit")
    parser.add_argument(
        "--workdir", metavar="DIR", help="keep every store and scratch session under DIR"
    )
    parser.set_defaults(handler=_main)


def _main(args: argparse.Namespace) -> int:
    if args.list:
        for check in checks_named(args.check):
            print(f"{check.id:<45} {check.promise}")
        return 0
    if not args.harness:
        raise UsageError("name a harness: module:attr, sqlite, memory or a postgresql:// URL")
    if args.repeat < 1:
        raise UsageError("--repeat must be at least 1")
    from ..testing.reports import render_json, render_junit, render_markdown, render_table
    from ..testing.runner import run_conformance

    # As `python -m` does: a harness module in the current folder is importable.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    harness = resolve_harness(args.harness)
    chosen = [c.id for c in checks_named(args.check)]
    if args.quick:
        chosen = [c for c in chosen if not c.startswith(("MODEL.", "DEEP."))]
    with _progress.for_args(args) as line:
        report = run_conformance(
            harness,
            workroot=args.workdir,
            checks=chosen,
            repeat=args.repeat,
            progress=_progress.checks_callback(line),
        )
    for path, render in ((args.junit, render_junit), (args.markdown, render_markdown)):
        if path:
            _write(path, render(report))
    print(render_json(report) if args.json else render_table(report))
    return 0 if report.passed else 1


def _write(path: str, text: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as out:
            out.write(text)
    except OSError as exc:
        raise UsageError(f"cannot write {os.path.basename(path)!r}: {exc.strerror}") from exc
