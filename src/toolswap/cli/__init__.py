"""The ``toolswap`` command line.

Each sub-command lives in its own module in this package and exposes
``register(subparsers)``, which adds a parser whose ``handler`` default is a
function ``(args) -> int``.  Commands are discovered by module name, so a new
command is a new file and nothing else.

Rules (they hold for every sub-command, because they are enforced here):

* Every error is **one line** on stderr, ``toolswap: error: ...``, never a
  traceback.  A usage error (argparse included: the parser class
  :class:`_Parser` turns argparse's usage-plus-message into one line), a
  :class:`~toolswap.errors.ToolswapError` and an ``OSError`` (the environment)
  exit with status 2.  Only a defect of toolswap itself is an "internal
  error" (status 1).
* With ``--json`` anywhere on the command line, an error is *also* printed
  on stdout as one JSON document ``{"ok": false, "error": ..., "kind": ...}``
  (``kind``: usage, state or environment), with the same exit status.
* A value that starts with ``-`` and a digit (``--ttl -1s``) is a value, not
  an option, so the command can say what is wrong with it.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import pkgutil
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

from ..errors import CorruptStateError, EnvironmentFailure, ToolswapError, UsageError
from ..fs import check_failpoint_environment

__all__ = ["main", "build_parser", "version"]

EXIT_INTERNAL = 1
EXIT_ERROR = 2


class _UsageExit(Exception):
    """argparse refused the command line; carries the one-line message."""

    def __init__(self, prog: str, message: str) -> None:
        super().__init__(message)
        self.prog = prog
        self.message = message


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (raised, printed by :func:`main`).

    Sub-parsers inherit the class (argparse creates them with ``type(parent)``),
    so every sub-command, present or future, gets the same behaviour.
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        # No toolswap option starts with "-<digit>", so such a token is a value.
        self._negative_number_matcher = re.compile(r"^-\.?[0-9]")

    def error(self, message: str) -> NoReturn:
        raise _UsageExit(self.prog, message)


def version() -> str:
    """The installed distribution's version (package metadata)."""
    try:
        return importlib.metadata.version("toolswap")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - not installed
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="toolswap",
        description="Keep large tool output on disk as audited artifacts; "
        "give the agent a bounded pointer.",
    )
    parser.add_argument("--version", action="version", version=f"toolswap {version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(subparsers)
    return parser


def _kind(exc: BaseException) -> str:
    if isinstance(exc, UsageError | _UsageExit):
        return "usage"
    if isinstance(exc, CorruptStateError):
        return "state"
    if isinstance(exc, EnvironmentFailure | OSError):
        return "environment"
    return "error"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _os_message(exc: OSError) -> str:
    what = exc.strerror or type(exc).__name__
    where = f": {exc.filename}" if exc.filename is not None else ""
    return f"{what}{where}"


def _fail(message: str, exc: BaseException, as_json: bool, code: int = EXIT_ERROR) -> int:
    line = _one_line(message)
    label = "internal error" if code == EXIT_INTERNAL else "error"
    print(f"toolswap: {label}: {line}", file=sys.stderr)
    if as_json:
        document = {"ok": False, "error": line, "kind": _kind(exc), "exit_status": code}
        print(json.dumps(document, sort_keys=True, ensure_ascii=False))
    return code


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    # Before parsing succeeds there is no namespace; a usage error honours
    # --json if it is anywhere before "--" (after it, it is the tool's).
    head = arguments[: arguments.index("--")] if "--" in arguments else arguments
    as_json = "--json" in head
    parser = build_parser()
    try:
        args = parser.parse_args(arguments)
    except _UsageExit as exc:
        return _fail(f"{exc.message} (see {exc.prog} --help)", exc, as_json)
    except SystemExit as exc:  # --help, --version
        return exc.code if isinstance(exc.code, int) else 0
    as_json = bool(getattr(args, "json", False))
    try:
        check_failpoint_environment()
        code: int = args.handler(args)
    except _UsageExit as exc:  # a handler that re-parses (e.g. a nested command line)
        return _fail(exc.message, exc, as_json)
    except ToolswapError as exc:
        return _fail(str(exc), exc, as_json)
    except KeyboardInterrupt:
        print("toolswap: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_INTERNAL
    except OSError as exc:  # the environment refused something no module named
        return _fail(_os_message(exc), exc, as_json)
    except Exception as exc:  # the CLI promises no traceback, ever
        return _fail(f"{type(exc).__name__}: {exc}", exc, as_json, EXIT_INTERNAL)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
