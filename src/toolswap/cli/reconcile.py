"""``toolswap reconcile --owner SPEC``: resolve pending leases against an owner.

Each PREPARED lease of the session is looked up in the owner under its
transaction id: published with the same identity -> COMMITTED; absent (and
sealed by a tombstone) -> ABORTED; anything else stays PENDING, with the
reason.  Nothing pending is ever guessed away.

SPEC is ``sqlite:PATH`` or ``postgresql://...`` (:mod:`toolswap.owners.uri`);
the store must already exist (``toolswap owner init`` creates it).

Waiting: ``--busy-timeout SECONDS`` bounds how long one lease waits for a
store another process holds locked (SQLite busy timeout, PostgreSQL lock
timeout; default 30 s for SQLite).  ``--deadline SECONDS`` bounds the whole
run: it is checked before each lease (and caps the busy timeout), so the run
stops cleanly, leaves the rest PENDING, says how many were left and exits
with status 3.
"""

from __future__ import annotations

import argparse
import sys
import time

from ..journal import ArtifactRetentionJournal
from ..owners.uri import SPEC_HELP, open_owner
from ._common import (
    add_json_argument,
    add_session_argument,
    describe,
    existing_session_dir,
    positive_seconds,
    print_json,
)

__all__ = ["register", "open_owner", "EXIT_DEADLINE"]

#: Exit status when ``--deadline`` stopped the run with leases left unexamined.
EXIT_DEADLINE = 3

_clock = time.monotonic  # a seam for the tests: deadlines without waiting


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "reconcile",
        help="reconcile pending leases against the Memory owner",
        description=describe(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--owner",
        required=True,
        metavar="SPEC",
        help=f"the owner store, which must already exist: {SPEC_HELP}",
    )
    parser.add_argument(
        "--busy-timeout",
        type=positive_seconds("--busy-timeout"),
        default=None,
        metavar="SECONDS",
        help="wait at most this long for a store locked by someone else, per lease "
        "(default: 30 for SQLite, the owner's lock timeout for PostgreSQL)",
    )
    parser.add_argument(
        "--deadline",
        type=positive_seconds("--deadline"),
        default=None,
        metavar="SECONDS",
        help="stop starting new leases after this long; the rest stay pending (exit 3)",
    )
    add_session_argument(parser)
    add_json_argument(parser)
    parser.set_defaults(handler=_reconcile)


def _reconcile(args: argparse.Namespace) -> int:
    started = _clock()
    busy: float | None = args.busy_timeout
    if args.deadline is not None:
        busy = args.deadline if busy is None else min(busy, args.deadline)
    owner = open_owner(args.owner, busy_timeout=busy)
    reports = []
    try:
        journal = ArtifactRetentionJournal(existing_session_dir(args))
        pending = list(journal.recover().pending_transaction_ids)
        for examined, txn in enumerate(pending):
            if args.deadline is not None and _clock() - started >= args.deadline:
                left = len(pending) - examined
                break
            reports.append(journal.reconcile_reference(txn, owner))
        else:
            left = 0
    finally:
        owner.close()
    if args.json:
        print_json({"reports": [report.to_dict() for report in reports], "left_pending": left})
    else:
        for report in reports:
            print(
                f"{report.status.value:<17} {report.transaction_id!r} "
                f"generation={report.generation} ({report.reason})"
            )
        print(f"{len(reports)} pending lease(s) examined")
    if left:
        print(
            f"toolswap: error: deadline of {args.deadline:g}s reached; "
            f"{left} lease(s) left pending, not examined",
            file=sys.stderr,
        )
        return EXIT_DEADLINE
    return 0
