"""Helpers shared by the sub-commands."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any

from ..session import DEFAULT_SESSION_ENV

__all__ = [
    "add_session_argument",
    "add_json_argument",
    "describe",
    "session_dir",
    "print_json",
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
    json.dump(document, sys.stdout, indent=2, sort_keys=True, ensure_ascii=False)
    sys.stdout.write("\n")


_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")


def describe(doc: str | None) -> str | None:
    """A module docstring as ``--help`` text: reST roles and markup made plain."""
    if doc is None:
        return None
    text = _ROLE.sub(lambda m: m.group(1), doc)
    return text.replace("``", "").replace("**", "")
