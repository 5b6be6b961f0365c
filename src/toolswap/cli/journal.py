"""``toolswap journal verify|show|compact``: check, list or compact a session's lease journal.

The session folder must exist: a mistyped folder is an error (exit 2), not
a session with no records.  A folder without a journal (and without an
anchor saying it had one) has 0 records.  ``compact`` moves the live leases
into a snapshot and archives the settled history (docs/design.md section 5,
"Compaction"); ``--delete-old`` unlinks the compacted file instead of keeping it.
"""

from __future__ import annotations

import argparse
import os
import sys

from ..errors import UsageError
from ..journal import ArtifactRetentionJournal, JournalCorruptError, Recovery
from ._common import add_json_argument, add_session_argument, existing_session_dir, print_json

__all__ = ["register"]

EXIT_CORRUPT = 2


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("journal", help="verify or show the lease journal")
    actions = parser.add_subparsers(dest="journal_action", metavar="ACTION", required=True)
    verify = actions.add_parser("verify", help="verify every record; exit 2 on corruption")
    show = actions.add_parser("show", help="list transactions, claims and pending leases")
    compact = actions.add_parser(
        "compact",
        help="move the live leases into a snapshot; archive the settled history",
    )
    compact.add_argument(
        "--delete-old",
        action="store_true",
        help="unlink the compacted file instead of keeping it in journal-archive/",
    )
    for sub, handler in ((verify, _verify), (show, _show), (compact, _compact)):
        add_session_argument(sub)
        add_json_argument(sub)
        sub.set_defaults(handler=handler)


def _recover(args: argparse.Namespace, *, settled: bool = False) -> Recovery:
    # A folder that does not exist is a typo, not a session with 0 records.
    journal = ArtifactRetentionJournal(existing_session_dir(args))
    recovery = journal.recover()
    if settled:  # verify also reads the settled index, which recovery never needs
        journal.verify_settled_index()
    return recovery


def _corrupt(args: argparse.Namespace, exc: JournalCorruptError) -> int:
    if not args.json:
        raise exc
    # the shape of every other error under --json (one stderr line, the same
    # keys), plus the bad line and its reason for a program to act on
    line = " ".join(str(exc).split())
    print(f"toolswap: error: {line}", file=sys.stderr)
    print_json(
        {
            "ok": False,
            "error": line,
            "kind": "state",
            "exit_status": EXIT_CORRUPT,
            "line": exc.line_number,
            "reason": exc.reason,
            "detail": exc.detail,
        }
    )
    return EXIT_CORRUPT


def _verify(args: argparse.Namespace) -> int:
    try:
        rec = _recover(args, settled=True)
    except JournalCorruptError as exc:
        return _corrupt(args, exc)
    if args.json:
        print_json(
            {
                "ok": True,
                "record_count": rec.record_count,
                "pending": len(rec.pending_transaction_ids),
                "torn_tail": None if rec.torn_tail is None else rec.torn_tail.to_dict(),
            }
        )
        return 0
    torn = "none" if rec.torn_tail is None else f"{rec.torn_tail.length} bytes (ignored)"
    print(
        f"ok: {rec.record_count} records, {len(rec.states)} transactions, "
        f"{len(rec.pending_transaction_ids)} pending, torn tail: {torn}"
    )
    return 0


def _show(args: argparse.Namespace) -> int:
    try:
        rec = _recover(args)
    except JournalCorruptError as exc:
        return _corrupt(args, exc)
    if args.json:
        document = rec.to_dict()
        document["ok"] = True
        document["transactions"] = {
            txn: {"phase": rec.states[txn].value, **claim.to_dict()}
            for txn, claim in rec.transactions.items()
        }
        print_json(document)
        return 0
    for txn, phase in rec.states.items():
        claim = rec.transactions[txn]
        until = "-" if claim.retain_until is None else repr(claim.retain_until)
        print(
            f"{phase.value:<9} {txn!r} {claim.source_id} refs={claim.reference_count} "
            f"retain_until={until}"
        )
    claimed = len(rec.to_dict()["claims"])  # the summary per content, as --json shows it
    print(
        f"{rec.record_count} records, {claimed} claimed digests, "
        f"{len(rec.pending_transaction_ids)} pending"
    )
    return 0


def _compact(args: argparse.Namespace) -> int:
    root = existing_session_dir(args)
    try:
        journal = ArtifactRetentionJournal(root)
        if not journal.exists():
            raise UsageError(f"no lease journal in {root}: nothing to compact")
        result = journal.compact(delete_old=args.delete_old)
    except JournalCorruptError as exc:
        return _corrupt(args, exc)
    where = (
        "deleted"
        if result.archived is None
        else "archived to " + os.path.relpath(result.archived, journal.paths.root)
    )
    if args.json:
        print_json(
            {
                "ok": True,
                "checkpoint": result.checkpoint,
                "records_before": result.records_before,
                "records_after": result.records_after,
                "total_records": result.total_records,
                "live_leases": result.live_leases,
                "archived": result.archived,
            }
        )
        return 0
    print(
        f"compacted: {result.records_before} records -> {result.records_after} in the live "
        f"file (checkpoint {result.checkpoint}, {result.total_records} records in the chain), "
        f"{result.live_leases} live leases kept, old file {where}"
    )
    return 0
