"""``toolswap run [--session DIR] [--tool NAME] [--summary TEXT] [--json] -- CMD ...``

Runs the command with stdout and stderr combined, streams the output through
the externalizer (never holding it whole), prints the context text and exits
with the command's own exit status (128 + N when killed by signal N).
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
from collections.abc import Iterator
from typing import IO, Any

from ..externalizer import ToolResultExternalizer
from ._common import add_json_argument, add_session_argument, describe, print_json, session_dir

_READ = 64 * 1024
EXIT_NOT_FOUND = 127
EXIT_NOT_EXECUTABLE = 126


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "run",
        help="run a command and externalize its output if it is large",
        description=describe(__doc__.split("\n\n", 1)[1] if __doc__ else None),
    )
    add_session_argument(parser)
    parser.add_argument("--tool", default="bash", help="tool name for thresholds (default bash)")
    parser.add_argument("--summary", default=None, help="one-line summary of the output")
    add_json_argument(parser)
    parser.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ...")
    parser.set_defaults(handler=run)


def _stream(pipe: IO[bytes]) -> Iterator[bytes]:
    while True:
        chunk = pipe.read1(_READ) if hasattr(pipe, "read1") else pipe.read(_READ)
        if not chunk:
            return
        yield chunk


def run(args: argparse.Namespace) -> int:
    command = list(args.cmd)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        from ..errors import UsageError

        raise UsageError("no command given: use toolswap run -- CMD ...")
    # Validate the session and thresholds before starting anything.
    externalizer = ToolResultExternalizer(session_dir(args))
    try:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except FileNotFoundError:
        print(f"toolswap: error: command not found: {command[0]}", file=sys.stderr)
        return EXIT_NOT_FOUND
    except PermissionError:
        print(f"toolswap: error: command not executable: {command[0]}", file=sys.stderr)
        return EXIT_NOT_EXECUTABLE
    assert process.stdout is not None
    try:
        result = externalizer.externalize(_stream(process.stdout), args.tool, summary=args.summary)
    except BaseException:
        process.kill()
        process.wait()
        raise
    finally:
        process.stdout.close()
    status = process.wait()
    code = status if status >= 0 else 128 - status
    if args.json:
        print_json(
            {
                "exit_code": code,
                "externalized": result.externalized,
                "context_text": result.context_text,
                "artifact": result.artifact.to_dict() if result.artifact else None,
                "toolswap_peak_rss_kib": _peak_rss_kib(),
            }
        )
    else:
        sys.stdout.write(result.context_text)
        if result.context_text and not result.context_text.endswith("\n"):
            sys.stdout.write("\n")
        sys.stdout.flush()
    return code


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
