"""``toolswap stat SOURCE_ID [--session DIR] [--json]``

One verified artifact: size, lines (offsets 0 to lines - 1), modification
time and lease state.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..externalizer import ToolResultExternalizer
from ._common import add_json_argument, add_session_argument, describe, print_json, session_dir


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "stat", help="describe one artifact (verified)", description=describe(__doc__)
    )
    parser.add_argument("source_id", metavar="SOURCE_ID")
    add_session_argument(parser)
    add_json_argument(parser)
    parser.set_defaults(handler=stat)


def stat(args: argparse.Namespace) -> int:
    info = ToolResultExternalizer(session_dir(args)).stat_artifact(args.source_id)
    if args.json:
        print_json(info.to_json())
        return 0
    document = info.to_json()
    width = max(len(key) for key in document)
    for key, value in document.items():
        shown = "-" if value is None else f"{value:,}" if isinstance(value, int) else value
        sys.stdout.write(f"{key.ljust(width)}  {shown}\n")
    sys.stdout.flush()
    return 0
