"""``toolswap gc plan|apply``: two-phase, fail-closed cleanup of one session.

``plan`` scans ``tool-results/`` and prints one decision per entry; nothing
is deleted.  ``apply`` plans again and then applies; without ``--yes`` it is
a dry run that re-validates and reports what *would* be deleted.

Which claims protect is the library's choice (``session_journal``): when the
session has a lease journal (``retention-leases.jsonl``), the journal-aware
cleanup runs and the journal's leases protect (a corrupt journal refuses,
exit 2).  A session that once had a journal remembers it (``.journal-anchor``):
if the journal is then missing or shorter than once verified, cleanup refuses
too.  A session that never had a journal has no leases, so the raw form runs
with **no claims** (the command says so: ``claims=()``): every regular
artifact older than the TTL is an orphan.  Harnesses that track references
elsewhere must use the Python API (``plan_cleanup(paths, claims, ...)``)
instead.

``apply --owner SPEC`` gives cleanup a second witness: inside the owner's
fence it asks whether a visible reference names each planned artifact, and
keeps the file if one does or if the owner cannot tell (a lease the journal
lost no longer costs its artifact).  A file still being written is kept
(``retained_writing``) whatever its age.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import time
from typing import Any, TextIO

from ..cleanup import (
    ArtifactCleanupPolicy,
    CleanupPlan,
    CleanupReport,
    ScanProgress,
    apply_cleanup,
    plan_cleanup,
    session_journal,
)
from ..errors import UsageError
from ..owners.uri import SPEC_HELP, open_owner
from ..session import SessionPaths
from ._common import (
    add_json_argument,
    add_session_argument,
    describe,
    existing_session_dir,
    positive_seconds,
    print_json,
)

__all__ = ["register", "parse_duration"]

_DURATION_RE = re.compile(r"([0-9]+(?:\.[0-9]+)?)([smhdw]?)")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> float:
    """Seconds from ``90``, ``30s``, ``10m``, ``2h``, ``1d`` or ``1w``; else a UsageError."""
    cleaned = text.strip().lower()
    if cleaned.startswith("-"):
        raise UsageError(
            f"invalid --ttl {text!r}: a duration cannot be negative (0s keeps nothing)"
        )
    match = _DURATION_RE.fullmatch(cleaned)
    if match is None:
        raise UsageError(f"invalid --ttl {text!r}: want a number with an optional s/m/h/d/w suffix")
    seconds = float(match.group(1)) * _UNITS[match.group(2)]
    if not math.isfinite(seconds):
        raise UsageError(f"invalid --ttl {text!r}: too large")
    return int(seconds) if seconds.is_integer() else seconds


def register(subparsers: Any) -> None:
    gc = subparsers.add_parser(
        "gc",
        help="plan or apply a fail-closed cleanup of old, unreferenced artifacts",
        description=describe(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = gc.add_subparsers(dest="gc_command", metavar="ACTION", required=True)
    plan = commands.add_parser("plan", help="show what cleanup would do (read-only)")
    apply = commands.add_parser("apply", help="delete planned orphans (a dry run without --yes)")
    for parser in (plan, apply):
        add_session_argument(parser)
        parser.add_argument(
            "--ttl",
            default="1d",
            metavar="DURATION",
            help="keep unreferenced artifacts younger than this (30s, 10m, 2h, 1d; default 1d)",
        )
        parser.add_argument(
            "--max-deletions",
            type=int,
            default=100,
            metavar="N",
            help="plan at most N deletions (default 100)",
        )
        parser.add_argument(
            "--progress",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="progress bar on stderr (default: only when stderr is a terminal)",
        )
        add_json_argument(parser)
    apply.add_argument("--yes", action="store_true", help="really delete (otherwise a dry run)")
    apply.add_argument(
        "--owner",
        metavar="SPEC",
        default=None,
        help="ask this owner, inside its fence, whether a visible reference names each "
        f"planned artifact before deleting it (the second witness): {SPEC_HELP}",
    )
    apply.add_argument(
        "--busy-timeout",
        type=positive_seconds("--busy-timeout"),
        default=None,
        metavar="SECONDS",
        help="with --owner: wait at most this long for an owner store someone else holds "
        "locked; an owner that cannot answer in time keeps every file",
    )
    plan.set_defaults(handler=_run, gc_apply=False)
    apply.set_defaults(handler=_run, gc_apply=True)


def _run(args: argparse.Namespace) -> int:
    ttl = parse_duration(args.ttl)  # the caller's mistakes first, then the session's
    paths = SessionPaths.at(existing_session_dir(args))
    really = bool(args.gc_apply and getattr(args, "yes", False))
    policy = ArtifactCleanupPolicy(
        orphan_ttl_seconds=ttl,
        max_deletions=args.max_deletions,
        dry_run=not really,
    )
    show = args.progress if args.progress is not None else sys.stderr.isatty()
    bar = _ProgressBar(sys.stderr) if show else None
    journal = session_journal(paths)  # the library's choice: the session's leases, if any
    # No journal: said out loud, never assumed (apply refuses if one appears meanwhile).
    claims = () if journal is None else None
    spec = getattr(args, "owner", None)
    busy = getattr(args, "busy_timeout", None)
    if busy is not None and spec is None:
        raise UsageError("--busy-timeout is for --owner: without an owner nothing waits for one")
    owner = open_owner(spec, busy_timeout=busy) if spec is not None else None
    try:
        try:
            plan = plan_cleanup(paths, claims, journal=journal, policy=policy, progress=bar)
        finally:
            if bar is not None:
                bar.finish()
        report: CleanupReport | None = None
        if args.gc_apply:
            report = apply_cleanup(paths, plan, claims=claims, journal=journal, owner=owner)
    finally:
        if owner is not None:
            owner.close()
    if args.json:
        document: dict[str, Any] = {"plan": plan.to_dict()}
        if report is not None:
            document["report"] = report.to_dict()
        print_json(document)
    else:
        _print_plan(plan, journal is not None, sys.stdout)
        if report is not None:
            _print_report(report, sys.stdout)
    return 0


# -- rendering ------------------------------------------------------------------------


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # pragma: no cover


def _age(seconds: float) -> str:
    if seconds < 0:
        return "future"
    for unit, span in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= span:
            return f"{seconds / span:.0f}{unit}"
    return f"{seconds:.0f}s"


def _table(rows: list[list[str]], out: TextIO) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        out.write("  ".join([*cells, row[-1]]).rstrip() + "\n")


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{status} {n}" for status, n in counts.items()) or "nothing"


def _print_plan(plan: CleanupPlan, journal_aware: bool, out: TextIO) -> None:
    claims = "the lease journal" if journal_aware else "none (no lease journal)"
    out.write(
        f"session {plan.session_id}: ttl {plan.policy.orphan_ttl_seconds:g}s, "
        f"max deletions {plan.policy.max_deletions}, claims: {claims}\n"
    )
    if plan.entries:
        rows = [["NAME", "STATUS", "SIZE", "AGE", "REFS", "REASON"]]
        for entry in plan.entries:
            snap = entry.snapshot
            age = "-" if snap is None else _age(plan.planned_at - snap.mtime_ns / 1e9)
            rows.append(
                [
                    entry.name,
                    entry.status,
                    _size(None if snap is None else snap.size),
                    age,
                    str(entry.reference_count),
                    entry.reason,
                ]
            )
        _table(rows, out)
    out.write(f"plan: {_counts(plan.counts)}\n")


def _print_report(report: CleanupReport, out: TextIO) -> None:
    if report.entries:
        rows = [["NAME", "OUTCOME", "REASON"]]
        rows += [[e.name, e.status, e.reason] for e in report.entries]
        _table(rows, out)
    suffix = " (dry run: nothing deleted; pass --yes to delete)" if report.dry_run else ""
    out.write(f"apply: {_counts(report.counts)}{suffix}\n")


class _ProgressBar:
    """A one-line progress bar on a stream, redrawn at most ten times a second."""

    WIDTH = 24

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.last = 0.0
        self.drawn = False

    def __call__(self, progress: ScanProgress) -> None:
        now = time.monotonic()
        final = progress.files_done == progress.files_total
        if not final and now - self.last < 0.1:
            return
        self.last = now
        total = max(progress.bytes_total, 1)
        filled = int(self.WIDTH * progress.bytes_done / total)
        self.stream.write(
            f"\rscanning [{'#' * filled}{'.' * (self.WIDTH - filled)}] "
            f"{progress.files_done}/{progress.files_total} files, "
            f"{_size(progress.bytes_done)} of {_size(progress.bytes_total)}"
        )
        self.stream.flush()
        self.drawn = True

    def finish(self) -> None:
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()
