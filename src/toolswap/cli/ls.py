"""``toolswap ls [--session DIR] [--json]``

The artifacts of a session: name, size, lines, age, lease state (the
strongest lease the journal holds on it, or ``-``) and source id.  Entries of
``tool-results/`` that are not regular artifact files of ours are skipped,
never opened.  Listing verifies each artifact (its id carries its digest).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..externalizer import ToolResultExternalizer
from ..reading import render_listing
from ._common import (
    add_json_argument,
    add_session_argument,
    describe,
    existing_session_dir,
    print_json,
)


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "ls", help="list the artifacts of a session", description=describe(__doc__)
    )
    add_session_argument(parser)
    add_json_argument(parser)
    parser.set_defaults(handler=ls)


def ls(args: argparse.Namespace) -> int:
    infos = ToolResultExternalizer(existing_session_dir(args)).list_artifacts()
    if args.json:
        print_json({"artifacts": [info.to_json() for info in infos]})
    else:
        sys.stdout.write(render_listing(infos))
        sys.stdout.flush()
    return 0
