"""``toolswap read SOURCE_ID [--offset N] [--byte B] [--limit N] [--max-bytes N] [--json]``

The page fault: prints up to ``--limit`` lines from line offset ``--offset``
(0-based; the first line is offset 0) of a verified artifact of the session,
capped at ``--max-bytes`` (default 24 KiB, or ``TOOLSWAP_PAGE_BYTES``).  A
line longer than the cap comes back in pieces: the trailer line names the
exact next read (``--offset N --byte B`` resumes inside a line).  ``--raw``
prints the page's text alone; ``--json`` adds ``total_lines``, ``first_line``,
``last_line``, ``next_offset``, ``next_byte`` and ``truncated``.  The path
comes from the source id, never from anything else.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..externalizer import ToolResultExternalizer
from ..reading import DEFAULT_PAGE_LINES, render_page
from ._common import add_json_argument, add_session_argument, describe, print_json, session_dir


def integer(text: str) -> int:
    """An argparse ``type``: an integer (range checks belong to the API's one message)."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "read",
        help="read a byte-capped page of an artifact (verified)",
        description=describe(__doc__),
    )
    parser.add_argument("source_id", metavar="SOURCE_ID")
    add_session_argument(parser)
    parser.add_argument(
        "--offset", type=integer, default=0, help="first line, a 0-based offset (default 0)"
    )
    parser.add_argument(
        "--byte",
        type=integer,
        default=0,
        help="start this many bytes into the first line (resume a cut line)",
    )
    parser.add_argument(
        "--limit",
        type=integer,
        default=DEFAULT_PAGE_LINES,
        help=f"lines at most (default {DEFAULT_PAGE_LINES})",
    )
    parser.add_argument(
        "--max-bytes",
        type=integer,
        default=None,
        help="page cap in bytes (default 24 KiB or TOOLSWAP_PAGE_BYTES)",
    )
    parser.add_argument("--raw", action="store_true", help="print the text alone, no trailer")
    add_json_argument(parser)
    parser.set_defaults(handler=read)


def read(args: argparse.Namespace) -> int:
    externalizer = ToolResultExternalizer(session_dir(args))
    page = externalizer.read_page(
        args.source_id,
        args.offset,
        args.limit,
        max_bytes=args.max_bytes,
        start_byte=args.byte,
    )
    if args.json:
        print_json({**page.to_json(), "offset": args.offset, "limit": args.limit})
    else:
        sys.stdout.write(page.text if args.raw else render_page(page))
        sys.stdout.flush()
    return 0
