"""The MCP tools' arguments and error lines: strict on the way in, bounded on the way out."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from .domain import clipped_repr
from .errors import UsageError

__all__ = [
    "clip_error",
    "strings",
    "hide_outside_paths",
    "only",
    "source_id",
    "optional_str",
    "integer",
    "boolean",
    "MAX_ERROR_BYTES",
]

#: The longest error line.
MAX_ERROR_BYTES = 2048
_ABS_PATH = re.compile(r"(?<![\w.~])/[^\s'\"`,;:()\[\]{}<>]*")
_SHOWN_NAME_CHARS = 40


def clip_error(line: str) -> str:
    data = line.encode("utf-8")
    if len(data) <= MAX_ERROR_BYTES:
        return line
    return data[: MAX_ERROR_BYTES - 3].decode("utf-8", "ignore") + "..."


def strings(value: object) -> list[str]:
    """Every string in a call's arguments (what the caller already knows)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for item in value.values() for s in strings(item)]
    if isinstance(value, list | tuple):
        return [s for item in value for s in strings(item)]
    return []


def hide_outside_paths(message: str, root: str, given: Iterable[str] = ()) -> str:
    inside = root.rstrip("/") + "/"
    known = list(given)

    def replace(match: re.Match[str]) -> str:
        path = match.group(0)
        if path == root or path.startswith(inside) or any(path in value for value in known):
            return path
        return "<outside the session>"

    return _ABS_PATH.sub(replace, message)


def _shown_name(name: str) -> str:
    return name if len(name) <= _SHOWN_NAME_CHARS else name[:_SHOWN_NAME_CHARS] + "..."


def only(args: Mapping[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(args) - allowed)
    if unknown:
        names = ", ".join(_shown_name(n) for n in unknown[:5])
        if len(unknown) > 5:
            names += f" and {len(unknown) - 5} more"
        raise UsageError(
            f"unknown argument{'s' if len(unknown) > 1 else ''} {names}; "
            f"allowed: {', '.join(sorted(allowed))}"
        )


def source_id(args: Mapping[str, Any]) -> str:
    value = args.get("source_id")
    if not isinstance(value, str) or not value:
        raise UsageError("source_id must be a string: artifact:<session>:<file>:<12 hex>")
    return value


def optional_str(args: Mapping[str, Any], name: str) -> str | None:
    value = args.get(name)
    if value is not None and not isinstance(value, str):
        raise UsageError(f"{name} must be a string, got {type(value).__name__}")
    return value


def integer(args: Mapping[str, Any], name: str, default: int, *, minimum: int) -> int:
    value = args.get(name, default)
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # JSON has one number type; 5.0 is 5
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise UsageError(f"{name} must be an integer >= {minimum}, got {clipped_repr(value)}")
    return value


def boolean(args: Mapping[str, Any], name: str) -> bool:
    value = args.get(name, False)
    if not isinstance(value, bool):
        raise UsageError(f"{name} must be true or false, got {clipped_repr(value)}")
    return value
