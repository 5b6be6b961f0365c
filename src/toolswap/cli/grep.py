"""``toolswap grep SOURCE_ID PATTERN [-F] [-i] [-C N] [--max-count N] [--offset N] [--json]``

Search inside a verified artifact, one line at a time, like ``grep -n``:
each matching line is printed as ``OFFSET:text`` (context lines as
``OFFSET-text``), where OFFSET is the 0-based line offset that ``toolswap
read --offset`` takes.  PATTERN is a Python regular expression on the decoded
text (``-F``: a fixed string; ``-i``: ignore case).  The output is bounded:
long lines are clipped around the match, and the search stops at
``--max-count`` matches or at ``--max-bytes`` of output, saying where to
resume (``--offset``).  The file is streamed, never loaded whole.  A
regular expression that runs longer than ``--time-limit`` seconds (default
10; ``(a|aa)+$`` backtracks without end) or cannot be compiled is refused
with one line (exit 2).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..externalizer import ToolResultExternalizer
from ..reading import render_grep
from ._common import add_json_argument, add_session_argument, describe, print_json, session_dir
from .read import integer


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "grep",
        help="search inside an artifact (verified, bounded output)",
        description=describe(__doc__),
    )
    parser.add_argument("source_id", metavar="SOURCE_ID")
    parser.add_argument("pattern", metavar="PATTERN")
    add_session_argument(parser)
    parser.add_argument(
        "-F", "--fixed-strings", dest="fixed", action="store_true", help="PATTERN is a string"
    )
    parser.add_argument("-i", "--ignore-case", action="store_true", help="ignore case")
    parser.add_argument(
        "-C", "--context", type=integer, default=0, help="lines of context around each match"
    )
    parser.add_argument(
        "-m", "--max-count", type=integer, default=100, help="matching lines at most (100)"
    )
    parser.add_argument(
        "--offset", type=integer, default=0, help="start at this 0-based line offset"
    )
    parser.add_argument(
        "--max-bytes",
        type=integer,
        default=None,
        help="output cap in bytes (default 24 KiB or TOOLSWAP_PAGE_BYTES)",
    )
    parser.add_argument(
        "--time-limit",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop a regular expression that searches longer (default 10)",
    )
    add_json_argument(parser)
    parser.set_defaults(handler=grep)


def grep(args: argparse.Namespace) -> int:
    externalizer = ToolResultExternalizer(session_dir(args))
    result = externalizer.grep_artifact(
        args.source_id,
        args.pattern,
        fixed=args.fixed,
        ignore_case=args.ignore_case,
        context=args.context,
        max_matches=args.max_count,
        max_bytes=args.max_bytes,
        offset=args.offset,
        time_limit=args.time_limit,
    )
    if args.json:
        print_json(result.to_json())
    else:
        sys.stdout.write(render_grep(result))
        sys.stdout.flush()
    # like grep: 0 when a line matched, 1 when none did
    return 0 if result.matches else 1
