"""``toolswap reconcile --owner SPEC``: resolve pending leases against an owner.

SPEC is ``sqlite:PATH`` or ``postgresql://...`` (:mod:`toolswap.owners.uri`);
the store must already exist (``toolswap owner init`` creates it).
"""

from __future__ import annotations

import argparse

from ..journal import ArtifactRetentionJournal
from ..owners.uri import SPEC_HELP, open_owner
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
        help=f"the owner store, which must already exist: {SPEC_HELP}",
    )
    add_session_argument(parser)
    add_json_argument(parser)
    parser.set_defaults(handler=_reconcile)


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
