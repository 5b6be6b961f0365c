"""The ``toolswap`` command line.

Each sub-command lives in its own module in this package and exposes
``register(subparsers)``, which adds a parser whose ``handler`` default is a
function ``(args) -> int``.  Commands are discovered by module name, so a new
command is a new file and nothing else.  Only the module of the command that
runs is imported (all of them for ``--help`` or a command line that names
none): an agent calls ``toolswap read`` once per page, and start-up is most
of its cost (docs/design.md section 11).

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
import contextlib
import importlib
import os
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from ..errors import CorruptStateError, EnvironmentFailure, ToolswapError, UsageError

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
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        # No toolswap option starts with "-<digit>", so such a token is a value.
        self._negative_number_matcher = re.compile(r"^-\.?[0-9]")

    def error(self, message: str) -> NoReturn:
        raise _UsageExit(self.prog, message)


def version() -> str:
    """The package's version (the one ``pyproject.toml`` takes, so the metadata's too).

    Read from ``toolswap._version`` rather than the installed metadata:
    ``importlib.metadata`` alone costs more than the rest of ``--version``.
    """
    from .._version import __version__

    return __version__


class _VersionAction(argparse.Action):
    """``--version``: the version is looked up only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(
            option_strings,
            dest,
            nargs=0,
            default=argparse.SUPPRESS,
            help="show program's version number and exit",
        )

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        sys.stdout.write(f"toolswap {version()}\n")
        sys.stdout.flush()
        parser.exit()


def command_names() -> list[str]:
    """Every sub-command, by module name (no module is imported).

    A listing of this package's folder: ``pkgutil.iter_modules`` would import
    ``inspect``, which costs more than the rest of ``--version``.
    """
    names: set[str] = set()
    for folder in __path__:
        with contextlib.suppress(OSError):
            names.update(
                entry[:-3]
                for entry in os.listdir(folder)
                if entry.endswith(".py") and not entry.startswith("_")
            )
    return sorted(names)


class _Formatter(argparse.HelpFormatter):
    """argparse's help layout, with the terminal width found without ``shutil``.

    ``HelpFormatter`` imports ``shutil`` (and with it the compression modules)
    each time a parser is built; this is the same rule as
    ``shutil.get_terminal_size``: ``COLUMNS``, else the terminal, else 80.
    """

    def __init__(self, prog: str, **kwargs: Any) -> None:
        if kwargs.get("width") is None:
            kwargs["width"] = _terminal_columns() - 2
        super().__init__(prog, **kwargs)


def _terminal_columns() -> int:
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else 80


def _commands_for(arguments: Sequence[str] | None) -> list[str]:
    """The commands whose parsers ``arguments`` can need: the one it names, else all.

    Top-level options come before the command; the first other token is the
    command.  ``--version`` before any command needs none (it exits at once).
    """
    names = command_names()
    if arguments is None:
        return names
    for token in arguments:
        if token in ("-h", "--help") or token == "--":
            return names
        if token == "--version":
            return []
        if not token.startswith("-"):
            return [token] if token in names else names
    return names


def build_parser(arguments: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; with ``arguments``, only the sub-commands they can need are registered."""
    parser = _Parser(
        prog="toolswap",
        description="Keep large tool output on disk as audited artifacts; "
        "give the agent a bounded pointer.",
    )
    parser.add_argument("--version", action=_VersionAction)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in _commands_for(arguments):
        module = importlib.import_module(f"{__name__}.{name}")
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
        import json

        document = {"ok": False, "error": line, "kind": _kind(exc), "exit_status": code}
        print(json.dumps(document, sort_keys=True, ensure_ascii=False))
    return code


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    # Before parsing succeeds there is no namespace; a usage error honours
    # --json if it is anywhere before "--" (after it, it is the tool's).
    head = arguments[: arguments.index("--")] if "--" in arguments else arguments
    as_json = "--json" in head
    parser = build_parser(arguments)
    try:
        args = parser.parse_args(arguments)
    except _UsageExit as exc:
        return _fail(f"{exc.message} (see {exc.prog} --help)", exc, as_json)
    except SystemExit as exc:  # --help, --version
        return exc.code if isinstance(exc.code, int) else 0
    as_json = bool(getattr(args, "json", False))
    try:
        from ..fs import check_failpoint_environment

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
