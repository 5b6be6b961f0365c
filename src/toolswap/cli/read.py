"""``toolswap read SOURCE_ID [--session DIR] [--offset N] [--limit N] [--json]``

The page fault: prints lines ``[offset, offset + limit)`` (0-based) of a
verified artifact of the session.  The path comes from the source id, never
from anything else.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..externalizer import ToolResultExternalizer
from ._common import add_json_argument, add_session_argument, describe, print_json, session_dir


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "read", help="read lines of an artifact (verified)", description=describe(__doc__)
    )
    parser.add_argument("source_id", metavar="SOURCE_ID")
    add_session_argument(parser)
    parser.add_argument("--offset", type=_int, default=0, help="first line, 0-based (default 0)")
    parser.add_argument("--limit", type=_int, default=2000, help="lines to read (default 2000)")
    add_json_argument(parser)
    parser.set_defaults(handler=read)


def read(args: argparse.Namespace) -> int:
    externalizer = ToolResultExternalizer(session_dir(args))
    text = externalizer.read_artifact(args.source_id, offset=args.offset, limit=args.limit)
    if args.json:
        print_json(
            {
                "source_id": args.source_id,
                "offset": args.offset,
                "limit": args.limit,
                "text": text,
            }
        )
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    return 0
