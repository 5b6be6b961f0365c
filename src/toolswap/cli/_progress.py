"""Live progress of a long command: one line on stderr, rewritten in place.

Rules
=====

1. On a terminal (and without ``--json``) progress is one line, redrawn at
   most every :data:`INTERVAL` seconds (the first update is drawn at once)
   and erased by :meth:`Progress.close`, so the command's real output starts
   on a clean line.
2. When stderr is not a terminal (a pipe, a log file, CI), a long command
   still says it is alive: a plain line (no escape codes, no ``\r``) at most
   every :data:`HEARTBEAT` seconds, the first once that long has passed, so a
   command that ends sooner prints nothing.  Stdout is never touched, so a
   JSON document stays clean.
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
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, TextIO

__all__ = [
    "Progress",
    "INTERVAL",
    "HEARTBEAT",
    "for_args",
    "enabled_for",
    "explorer_callback",
    "crash_callback",
    "checks_callback",
    "plural",
]

#: Seconds between two redraws.
INTERVAL = 0.2
#: Seconds between two lines when stderr is not a terminal.
HEARTBEAT = 10.0

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
        *,
        heartbeat: bool = False,
    ) -> None:
        self.enabled = enabled
        self.heartbeat = heartbeat and not enabled
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self.started = clock()
        self._drawn_at: float | None = None
        self._width = 0
        self._latest = ""
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        if self.heartbeat:
            # a step may take longer than a heartbeat (one slow check): a thread
            # repeats the latest line, so silence never lasts longer than that
            self._ticker = threading.Thread(target=self._beat, daemon=True)
            self._ticker.start()

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT):
            text = self._latest or "working"
            self.stream.write(f"{text} ({self.elapsed():.0f} s so far)\n")
            self.stream.flush()

    def update(self, text: str) -> None:
        """Show ``text`` (throttled to one redraw per :data:`INTERVAL`, rule 1 and 2)."""
        if self.heartbeat:
            self._latest = text
            return
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
        self._stop.set()
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
    """The progress line of a sub-command, by its ``--json`` flag and stderr (rules 1, 2)."""
    live = enabled_for(bool(getattr(args, "json", False)))
    return Progress(live, heartbeat=not live and _heartbeat_wanted())


def _heartbeat_wanted(stream: TextIO | None = None) -> bool:
    """Rule 2: stderr is not a terminal, and progress is not switched off."""
    stream = stream if stream is not None else sys.stderr
    if os.environ.get("TOOLSWAP_PROGRESS", "").strip() == "0":
        return False
    try:
        return not stream.isatty()
    except (AttributeError, ValueError):
        return True


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
