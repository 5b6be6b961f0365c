"""The ``toolswap`` command line.

Each sub-command lives in its own module in this package and exposes
``register(subparsers)``, which adds a parser whose ``handler`` default is a
function ``(args) -> int``.  Commands are discovered by module name, so a new
command is a new file and nothing else.

Errors are reported as one line on stderr, never a traceback: a
:class:`~toolswap.errors.ToolswapError` exits with status 2, anything else is
an internal error (status 1).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from ..errors import ToolswapError

__all__ = ["main", "build_parser"]

EXIT_INTERNAL = 1
EXIT_ERROR = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toolswap",
        description="Keep large tool output on disk as audited artifacts; "
        "give the agent a bounded pointer.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
    except ToolswapError as exc:
        print(f"toolswap: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("toolswap: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_INTERNAL
    except Exception as exc:  # the CLI promises no traceback, ever
        print(f"toolswap: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_INTERNAL
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
