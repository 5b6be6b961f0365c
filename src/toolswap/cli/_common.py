"""Helpers shared by the sub-commands."""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from collections.abc import Callable
from typing import Any

from ..errors import EnvironmentFailure, UsageError
from ..fs import REAL_FS
from ..session import DEFAULT_SESSION_ENV

__all__ = [
    "add_session_argument",
    "add_json_argument",
    "describe",
    "session_dir",
    "print_json",
    "existing_session_dir",
    "positive_seconds",
]

DEFAULT_SESSION_DIR = os.path.join(".toolswap", "default")


def add_session_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--session",
        metavar="DIR",
        default=None,
        help=f"session folder (default: ${DEFAULT_SESSION_ENV} or {DEFAULT_SESSION_DIR})",
    )


def add_json_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON document")


def session_dir(args: argparse.Namespace) -> str:
    chosen: str | None = getattr(args, "session", None)
    return chosen or os.environ.get(DEFAULT_SESSION_ENV) or DEFAULT_SESSION_DIR


def print_json(document: Any) -> None:
    import json  # here: most commands print text, and start-up is most of a page read

    json.dump(document, sys.stdout, indent=2, sort_keys=True, ensure_ascii=False)
    sys.stdout.write("\n")


_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")


def describe(doc: str | None) -> str | None:
    """A module docstring as ``--help`` text: reST roles and markup made plain."""
    if doc is None:
        return None
    text = _ROLE.sub(lambda m: m.group(1), doc)
    return text.replace("``", "").replace("**", "")


def existing_session_dir(args: argparse.Namespace) -> str:
    """The session folder of ``args``, which must already exist as a directory.

    For commands that only read or clean a session: a typo must not read as
    an empty session ("ok: 0 records"), and a file is not a session.
    """
    chosen = session_dir(args)
    try:
        REAL_FS.lstat(chosen)
    except FileNotFoundError:
        raise UsageError(f"no session folder at {chosen} (it does not exist)") from None
    except NotADirectoryError:
        raise UsageError(f"no session folder at {chosen} (a parent is not a folder)") from None
    except OSError as exc:
        raise EnvironmentFailure(
            f"cannot inspect the session folder {chosen}: {exc.strerror or exc}"
        ) from exc
    if not os.path.isdir(chosen):  # a link to a folder is a folder, as before
        raise UsageError(f"{chosen} is not a session folder (not a directory)")
    return chosen


def positive_seconds(option: str) -> Callable[[str], float]:
    """An argparse ``type``: a finite number of seconds above zero, for ``option``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{option} wants a number of seconds, got {text!r}"
            ) from None
        if not math.isfinite(value) or value <= 0:
            raise argparse.ArgumentTypeError(
                f"{option} wants a number of seconds above 0, got {text!r}"
            )
        return value

    return parse
