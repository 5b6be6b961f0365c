"""Live progress of a long command: one line on stderr, rewritten in place.

Rules
=====

1. Progress is shown only when stderr is a terminal and the command was not
   asked for ``--json``; otherwise every call is a no-op, so a pipe, a log file
   or a JSON consumer never sees it.
2. It is one line, redrawn at most every :data:`INTERVAL` seconds (the first
   update is drawn at once) and erased by :meth:`Progress.close`, so the
   command's real output starts on a clean line.
3. Producers never write to the terminal: the spec explorer, the crash
   explorer and the conformance runner take a callback, and the callbacks
   below turn what they report into text.

Theory of operation
===================

The rate is computed here, from this module's clock, so the pure spec code
needs no clock of its own.  ``TOOLSWAP_PROGRESS=0`` switches progress off even
on a terminal (for screen recordings and terminals that mishandle ``\\r``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, TextIO

__all__ = [
    "Progress",
    "INTERVAL",
    "for_args",
    "enabled_for",
    "explorer_callback",
    "crash_callback",
    "checks_callback",
    "plural",
]

#: Seconds between two redraws.
INTERVAL = 0.2

_ERASE = "\r\x1b[K"


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``"1 seed"``, ``"2 seeds"``: the count (with thousands separators) and its noun."""
    return f"{count:,} {noun if count == 1 else (many or noun + 's')}"


class Progress:
    """A one-line status on a terminal; silent when not enabled."""

    def __init__(
        self,
        enabled: bool,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self.started = clock()
        self._drawn_at: float | None = None
        self._width = 0

    def update(self, text: str) -> None:
        """Show ``text`` (throttled to one redraw per :data:`INTERVAL`)."""
        if not self.enabled:
            return
        now = self.clock()
        if self._drawn_at is not None and now - self._drawn_at < INTERVAL:
            return
        self._drawn_at = now
        columns = _columns(self.stream)
        line = text if len(text) < columns else text[: max(columns - 2, 1)] + "…"
        self.stream.write(_ERASE + line)
        self.stream.flush()
        self._width = len(line)

    def elapsed(self) -> float:
        return self.clock() - self.started

    def close(self) -> None:
        """Erase the line, so what the command prints next starts clean."""
        if self.enabled and self._drawn_at is not None:
            self.stream.write(_ERASE)
            self.stream.flush()
            self._drawn_at = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def _columns(stream: TextIO) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).columns or 80
    except (OSError, ValueError, AttributeError):
        return 80


def enabled_for(as_json: bool, stream: TextIO | None = None) -> bool:
    """Rule 1: a terminal, no ``--json``, and not switched off by the environment."""
    stream = stream if stream is not None else sys.stderr
    if as_json or os.environ.get("TOOLSWAP_PROGRESS", "").strip() == "0":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def for_args(args: argparse.Namespace) -> Progress:
    """The progress line of a sub-command, by its ``--json`` flag and stderr."""
    return Progress(enabled_for(bool(getattr(args, "json", False))))


def explorer_callback(progress: Progress, label: str = "exploring") -> Callable[[Any], None]:
    """A callback for :func:`toolswap.spec.explorer.explore` (its ``Progress`` records)."""

    def show(p: Any) -> None:
        seconds = progress.elapsed()
        rate = p.expanded / seconds if seconds > 0 else 0.0
        progress.update(
            f"{label}: {p.states:,} states, depth {p.depth}, "
            f"{p.transitions:,} transitions, {rate:,.0f} states/s, {seconds:.0f} s"
        )

    return show


def crash_callback(
    progress: Progress, label: str = "crashcheck"
) -> Callable[[str, int, int], None]:
    """An ``on_state`` callback for :meth:`toolswap.faultinject.explorer.CrashExplorer.explore`."""

    def show(scenario: str, count: int, total: int) -> None:
        seconds = progress.elapsed()
        rate = total / seconds if seconds > 0 else 0.0
        progress.update(
            f"{label}: {scenario}: {count:,} crash states; {total:,} in all, "
            f"{rate:,.0f}/s, {seconds:.0f} s"
        )

    return show


def checks_callback(
    progress: Progress, label: str = "conformance"
) -> Callable[[str, int, int], None]:
    """A ``progress`` callback for :func:`toolswap.testing.runner.run_conformance`."""

    def show(check_id: str, index: int, total: int) -> None:
        progress.update(f"{label}: [{index + 1}/{total}] {check_id}, {progress.elapsed():.0f} s")

    return show
