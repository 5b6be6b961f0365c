"""``toolswap mcp [--session DIR] [--page-bytes N] [--threshold-kib N] [--timeout S] ...``

Serves toolswap to an agent over MCP on stdin and stdout (the official MCP
Python SDK: ``pip install 'toolswap[mcp]'``).  Tools: run_command,
read_artifact, grep_artifact, list_artifacts, stat_artifact.  No result is
larger than the page cap (default 24 KiB); see docs/mcp.md.

The session and the options are checked before the server starts: a bad one
is one line on stderr and exit 2.  The server stops when the client closes
its stdin.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import EnvironmentFailure
from ..reading import DEFAULT_PAGE_BYTES
from ._common import add_session_argument, describe, session_dir

# The SDK is an optional extra, and every command module is imported when the
# CLI starts: it is imported only when this command runs.
INSTALL_HINT = "the MCP server needs the MCP SDK: pip install 'toolswap[mcp]'"


def _positive(kind: type[int] | type[float]) -> Any:
    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not 0 < value < 1e12:
            raise argparse.ArgumentTypeError(f"want a positive number, got {text!r}")
        return value

    return parse


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "mcp",
        help="serve run/read/grep/list to an agent over MCP (stdio)",
        description=describe(__doc__.split("\n\n", 1)[1] if __doc__ else None),
    )
    add_session_argument(parser)
    parser.add_argument(
        "--page-bytes",
        type=_positive(int),
        default=DEFAULT_PAGE_BYTES,
        metavar="N",
        help=f"cap on every tool result, in bytes (default {DEFAULT_PAGE_BYTES})",
    )
    parser.add_argument(
        "--threshold-kib",
        type=_positive(float),
        default=None,
        metavar="N",
        help="run_command output above N KiB becomes an artifact (default: "
        "$TOOL_RESULT_THRESHOLD_KB or 50, never above the page cap)",
    )
    parser.add_argument(
        "--timeout",
        type=_positive(float),
        default=300.0,
        metavar="S",
        help="default run_command timeout in seconds (default 300)",
    )
    parser.add_argument(
        "--max-timeout",
        type=_positive(float),
        default=3600.0,
        metavar="S",
        help="largest timeout a call may ask for (default 3600)",
    )
    parser.set_defaults(handler=serve)


def serve(args: argparse.Namespace) -> int:
    try:
        import anyio

        from ..mcp_server import ServerSettings, Toolbox, serve_stdio
    except ImportError as exc:
        raise EnvironmentFailure(INSTALL_HINT) from exc
    settings = ServerSettings(
        session_dir=session_dir(args),
        page_bytes=args.page_bytes,
        threshold_bytes=None if args.threshold_kib is None else int(args.threshold_kib * 1024),
        timeout=args.timeout,
        max_timeout=args.max_timeout,
    )
    toolbox = Toolbox(settings)  # checks the options and the session before serving
    print(f"toolswap mcp: serving session {toolbox.root} on stdio", file=sys.stderr)
    anyio.run(serve_stdio, toolbox)
    return 0
