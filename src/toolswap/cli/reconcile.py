"""``toolswap reconcile --owner sqlite:PATH``: resolve pending leases against an owner."""

from __future__ import annotations

import argparse

from ..errors import UsageError
from ..journal import ArtifactRetentionJournal
from ..owners.sqlite import SQLiteOwner
from ._common import add_json_argument, add_session_argument, print_json, session_dir

__all__ = ["register", "open_owner"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "reconcile", help="reconcile pending leases against the Memory owner"
    )
    parser.add_argument(
        "--owner",
        required=True,
        metavar="SPEC",
        help="the owner store: sqlite:PATH (the database must already exist)",
    )
    add_session_argument(parser)
    add_json_argument(parser)
    parser.set_defaults(handler=_reconcile)


def open_owner(spec: str) -> SQLiteOwner:
    """Open an owner from ``scheme:location``; a missing store is an error, never 'absent'."""
    scheme, sep, location = spec.partition(":")
    if not sep or not location:
        raise UsageError("--owner wants scheme:location, e.g. sqlite:memory.db")
    if scheme != "sqlite":
        raise UsageError(f"unknown owner scheme {scheme!r} (supported: sqlite)")
    return SQLiteOwner(location, create=False)


def _reconcile(args: argparse.Namespace) -> int:
    owner = open_owner(args.owner)
    try:
        journal = ArtifactRetentionJournal(session_dir(args))
        reports = journal.reconcile_pending(owner)
    finally:
        owner.close()
    if args.json:
        print_json({"reports": [report.to_dict() for report in reports]})
        return 0
    for report in reports:
        print(
            f"{report.status.value:<17} {report.transaction_id!r} "
            f"generation={report.generation} ({report.reason})"
        )
    print(f"{len(reports)} pending lease(s) examined")
    return 0
