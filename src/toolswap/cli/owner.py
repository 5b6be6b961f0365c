"""``toolswap owner init SPEC``: create the owner store a spec names.

SPEC is ``sqlite:PATH`` or ``postgresql://...[?schema=NAME]`` (see
:mod:`toolswap.owners.uri`).  Initializing is idempotent and versioned: a
second run changes nothing, an older PostgreSQL schema is upgraded, a newer
one is refused.  Errors are one line that never repeats the spec's location
(a URL may hold a password).
"""

from __future__ import annotations

import argparse

from ..owners.uri import SPEC_HELP, init_owner
from ._common import add_json_argument, describe, print_json

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "owner",
        help="manage the Memory owner store",
        description=describe(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="owner_command", metavar="ACTION", required=True)
    init = actions.add_parser(
        "init",
        help="create (or upgrade) the owner store; idempotent",
        description=describe(__doc__),
    )
    init.add_argument("spec", metavar="SPEC", help=SPEC_HELP)
    add_json_argument(init)
    init.set_defaults(handler=_init)


def _init(args: argparse.Namespace) -> int:
    line = init_owner(args.spec)
    if args.json:
        print_json({"result": line})
    else:
        print(line)
    return 0
