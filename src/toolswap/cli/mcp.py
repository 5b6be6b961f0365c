"""``toolswap mcp [--session DIR] [--page-bytes N] [--threshold-kib N] [--timeout S] ...``

Serves toolswap to an agent over MCP on stdin and stdout (the official MCP
Python SDK: ``pip install 'toolswap[mcp]'``).  Tools: run_command,
read_artifact, grep_artifact, list_artifacts, stat_artifact; the artifacts
are also resources (toolswap://...).  No result is larger than the page cap
(default 24 KiB); see docs/mcp.md.

The session and the options are checked before the server starts: a bad one
is one line on stderr and exit 2.  The server stops when the client closes
its stdin, or on SIGTERM, SIGINT or SIGHUP; either way it first stops every
running command's process group.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import EnvironmentFailure, UsageError
from ..mcp_tools import (
    DEFAULT_MAX_COMMANDS,
    DEFAULT_MAX_TIMEOUT_SECONDS,
    DEFAULT_READ_TIMEOUT_SECONDS,
    DEFAULT_READ_WORKERS,
    DEFAULT_TIMEOUT_SECONDS,
)
from ..reading import DEFAULT_PAGE_BYTES
from ._common import add_session_argument, describe, session_dir
from .gc import parse_duration

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
        default=DEFAULT_TIMEOUT_SECONDS,
        metavar="S",
        help=f"default run_command timeout in seconds (default {DEFAULT_TIMEOUT_SECONDS:g})",
    )
    parser.add_argument(
        "--max-timeout",
        type=_positive(float),
        default=DEFAULT_MAX_TIMEOUT_SECONDS,
        metavar="S",
        help=f"largest timeout a call may ask for (default {DEFAULT_MAX_TIMEOUT_SECONDS:g})",
    )
    parser.add_argument(
        "--gc-ttl",
        default="1d",
        metavar="DURATION",
        help="the --ttl your `toolswap gc` runs use; the tool descriptions tell the agent how "
        "long an unleased artifact lives (default 1d)",
    )
    parser.add_argument(
        "--read-workers",
        type=_positive(int),
        default=DEFAULT_READ_WORKERS,
        metavar="N",
        help="read calls served at once, each in its own worker process "
        f"(default {DEFAULT_READ_WORKERS})",
    )
    parser.add_argument(
        "--read-timeout",
        type=_positive(float),
        default=DEFAULT_READ_TIMEOUT_SECONDS,
        metavar="S",
        help="stop a read call (and its worker) after S seconds "
        f"(default {DEFAULT_READ_TIMEOUT_SECONDS:g})",
    )
    parser.add_argument(
        "--max-commands",
        type=_positive(int),
        default=DEFAULT_MAX_COMMANDS,
        metavar="N",
        help=f"run_command calls run at once; more wait (default {DEFAULT_MAX_COMMANDS})",
    )
    parser.set_defaults(handler=serve)


def _gc_ttl(text: str) -> float:
    try:
        return parse_duration(text)
    except UsageError as exc:
        raise UsageError(str(exc).replace("--ttl", "--gc-ttl", 1)) from None


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
        gc_ttl_seconds=_gc_ttl(args.gc_ttl),
        read_workers=args.read_workers,
        read_timeout=args.read_timeout,
        max_commands=args.max_commands,
    )
    toolbox = Toolbox(settings)  # checks the options and the session before serving
    print(f"toolswap mcp: serving session {toolbox.root} on stdio", file=sys.stderr)
    anyio.run(serve_stdio, toolbox)
    return 0
