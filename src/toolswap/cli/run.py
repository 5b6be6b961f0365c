"""``toolswap run [--session DIR] [--tool NAME] [--summary TEXT] [--timeout S] [--json] -- CMD ...``

Runs the command with stdout and stderr combined, streams the output through
the externalizer (never holding it whole), prints the context text and exits
with the command's own exit status (128 + N when killed by signal N).

The session is checked before the command starts: an unusable session is one
line and exit 2, and the command never runs.  Ctrl-C (SIGINT) or SIGTERM stops
the command, keeps what it printed (an artifact marked INCOMPLETE when it is
large), prints that and exits 130 or 143.  ``--timeout`` does the same after
the given seconds and exits 124.

The run ends when the command itself exits: output that a background child
still writes to the pipe is read for half a second more, not waited for, and
then whatever is left of the command's process group is killed.  A daemon
that leaves the group on purpose (``setsid``) is not touched.
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

from ..command import CommandResult, CommandStartError, Stop, check_session, run_command
from ..errors import UsageError
from ..externalizer import ToolResultExternalizer
from ._common import add_json_argument, add_session_argument, describe, print_json, session_dir

EXIT_TIMED_OUT = 124
_SIGNAL_EXIT = {"SIGINT": 130, "SIGTERM": 143}


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < 1e9:
        raise argparse.ArgumentTypeError(f"want a positive number of seconds, got {text!r}")
    return value


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "run",
        help="run a command and externalize its output if it is large",
        description=describe(__doc__.split("\n\n", 1)[1] if __doc__ else None),
    )
    add_session_argument(parser)
    parser.add_argument("--tool", default="bash", help="tool name for thresholds (default bash)")
    parser.add_argument("--summary", default=None, help="one-line summary of the output")
    parser.add_argument(
        "--timeout",
        type=_seconds,
        default=None,
        metavar="S",
        help="stop the command after S seconds (keeps its output, exit 124)",
    )
    add_json_argument(parser)
    parser.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ...")
    parser.set_defaults(handler=run)


@contextlib.contextmanager
def _signals_stop(stop: Stop) -> Iterator[None]:
    """While the command runs, SIGINT and SIGTERM ask it to stop instead of killing us."""

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.request(signal.Signals(signum).name)

    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers; elsewhere a signal is the caller's
        return
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def run(args: argparse.Namespace) -> int:
    command = list(args.cmd)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError("no command given: use toolswap run -- CMD ...")
    # Everything that can refuse is checked before the command starts (issue 14.6).
    externalizer = ToolResultExternalizer(session_dir(args))
    check_session(externalizer, tool=args.tool, summary=args.summary)
    with Stop() as stop:
        try:
            with _signals_stop(stop):
                result = run_command(
                    externalizer,
                    command,
                    tool=args.tool,
                    summary=args.summary,
                    timeout=args.timeout,
                    stop=stop,
                )
        except CommandStartError as exc:
            print(f"toolswap: error: {exc}", file=sys.stderr)
            return exc.exit_status
        _report(args, result)
        if stop.reason in _SIGNAL_EXIT:
            return _SIGNAL_EXIT[stop.reason]
    if result.timed_out:
        return EXIT_TIMED_OUT
    return result.exit_status


def _report(args: argparse.Namespace, result: CommandResult) -> None:
    output = result.output
    if args.json:
        print_json(
            {
                "exit_code": result.exit_status,
                "complete": result.complete,
                "timed_out": result.timed_out,
                "interrupted_by": result.interrupted_by,
                "externalized": output.externalized,
                "context_text": output.context_text,
                "artifact": output.artifact.to_dict() if output.artifact else None,
                "toolswap_peak_rss_kib": _peak_rss_kib(),
            }
        )
    else:
        sys.stdout.write(output.context_text)
        if output.context_text and not output.context_text.endswith("\n"):
            sys.stdout.write("\n")
        sys.stdout.flush()
    if not result.complete:
        why = "timed out" if result.timed_out else f"interrupted by {result.interrupted_by}"
        kept = f"kept as {result.source_id}" if result.source_id else "printed above"
        print(f"toolswap: {why}: the output is incomplete ({kept})", file=sys.stderr)


def _peak_rss_kib() -> int:
    """This process image's own peak resident set size, in KiB.

    On Linux ``ru_maxrss`` survives ``exec``: a toolswap started by a large
    parent (a test runner, a harness) would report the parent's size at fork.
    ``VmHWM`` belongs to the current image alone.
    """
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
