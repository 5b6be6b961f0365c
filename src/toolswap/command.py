"""Run one command and externalize its output: the one place that does it.

``toolswap run`` and the MCP server's ``run_command`` both come here.

Rules
=====

1. **Check first, run second.**  :func:`check_session` proves the session is
   usable (its folder can be made, ``tool-results/`` and the lock file, where
   they exist, are ours, the thresholds and the summary are valid) *before*
   the command starts: a command must never run, with its side effects, only
   for its output to be dropped because the session was unusable.
2. **Streamed, never whole.**  stdout and stderr are one pipe; its bytes go
   chunk by chunk into :meth:`ToolResultExternalizer.externalize`, which keeps
   at most one threshold's worth in memory.
3. **One process group.**  The command starts in a session of its own, so a
   stop reaches everything it spawned: ``SIGTERM`` (or the signal that stopped
   us) to the group, ``SIGKILL`` after :data:`KILL_GRACE_SECONDS`, then the
   pipe is drained for at most :data:`DRAIN_GRACE_SECONDS` more (a process
   that left the group may hold it open forever).
4. **A stop keeps what was captured.**  A timeout, a signal or a cancellation
   stops the command, and what it printed so far is externalized like any
   output; its summary starts with ``INCOMPLETE (...)`` so that nobody takes
   a cut-off log for the whole story.
5. **Waking up is event-driven.**  :class:`Stop` is a self-pipe: a signal
   handler or another thread writes one byte, and the ``select`` that waits
   for output wakes at once (no polling).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence

import attrs

from .errors import (
    ArtifactNotOwnedError,
    CommandStartError,  # noqa: F401 (re-exported)
    EnvironmentFailure,
    UsageError,
)
from .externalizer import MAX_SUMMARY_CHARS, ExternalizationResult, ToolResultExternalizer
from .fs import REAL_FS, FileSystem

__all__ = [
    "CommandResult",
    "CommandStartError",
    "Stop",
    "check_session",
    "run_command",
    "KILL_GRACE_SECONDS",
    "DRAIN_GRACE_SECONDS",
    "EXIT_NOT_FOUND",
    "EXIT_NOT_EXECUTABLE",
]

KILL_GRACE_SECONDS = 2.0
DRAIN_GRACE_SECONDS = 1.0
EXIT_NOT_FOUND = 127
EXIT_NOT_EXECUTABLE = 126
_READ = 64 * 1024


class Stop:
    """A request to stop a running command, safe to make from a signal handler or a thread.

    The first :meth:`request` names the reason (``"SIGINT"``, ``"cancelled"``);
    a later one only counts, so a second Ctrl-C can skip the grace period.
    """

    def __init__(self) -> None:
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._read_fd, False)
        os.set_blocking(self._write_fd, False)
        self.reason: str | None = None
        self.requests = 0
        self._closed = False

    def request(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
        self.requests += 1
        if self._closed:
            return
        with contextlib.suppress(OSError):  # a full pipe: already awake
            os.write(self._write_fd, b"x")

    @property
    def requested(self) -> bool:
        return self.reason is not None

    def fileno(self) -> int:
        return self._read_fd

    def close(self) -> None:
        """Close the pipe; only its last user may call this (a thread that may still
        request a stop must keep the object alive instead: it closes when collected)."""
        if self._closed:
            return
        self._closed = True
        for fd in (self._read_fd, self._write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)

    def __del__(self) -> None:
        self.close()

    def __enter__(self) -> Stop:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@attrs.frozen(kw_only=True)
class CommandResult:
    """What one run left: the command's status and the externalized output.

    ``exit_status`` is the command's own status, ``128 + N`` when a signal
    ``N`` ended it (ours on a stop, or anyone's).
    """

    exit_status: int
    timed_out: bool
    interrupted_by: str | None
    output: ExternalizationResult

    @property
    def interrupted(self) -> bool:
        return self.interrupted_by is not None

    @property
    def complete(self) -> bool:
        return not (self.timed_out or self.interrupted)

    @property
    def source_id(self) -> str | None:
        artifact = self.output.artifact
        return artifact.source.source_id if artifact is not None else None


def check_session(
    externalizer: ToolResultExternalizer,
    *,
    tool: str = "bash",
    summary: str | None = None,
    fs: FileSystem = REAL_FS,
) -> None:
    """Raise unless ``externalizer`` can take this command's output (rule 1).

    Makes the session folder (as any externalization would) and opens the
    lock file the way the externalizer does, without locking it: a lock held
    by a running cleanup is no reason to refuse, only to wait later.  Nothing
    in ``tool-results/`` is created.
    """
    # An empty output is validated like any other and never written: this
    # checks the tool name and the summary with the externalizer's own rules.
    externalizer.externalize(b"", tool, summary=summary)
    paths = externalizer.paths
    try:
        fs.makedirs(paths.root)
    except OSError as exc:
        raise EnvironmentFailure(
            f"session folder {paths.root} cannot be created: {exc.strerror or exc}"
        ) from exc
    try:
        facts = fs.lstat(paths.tool_results)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise EnvironmentFailure(f"cannot inspect tool-results/: {exc.strerror or exc}") from exc
    else:
        if facts.is_symlink or not facts.is_dir:
            raise ArtifactNotOwnedError("tool-results/ is not a real directory (S7)")
    try:
        handle = fs.open_lock(paths.lock)
    except OSError as exc:
        raise EnvironmentFailure(
            f"session folder {paths.root} is not usable: cannot open its lock file: "
            f"{exc.strerror or exc}"
        ) from exc
    fs.close(handle)


def run_command(
    externalizer: ToolResultExternalizer,
    command: Sequence[str] | str,
    *,
    cwd: str | None = None,
    timeout: float | None = None,
    tool: str = "bash",
    summary: str | None = None,
    stop: Stop | None = None,
    stdin_devnull: bool = False,
) -> CommandResult:
    """Run ``command`` (an argv list, or a string for ``/bin/sh -c``); see the module rules.

    Call :func:`check_session` first; this function assumes it passed.
    """
    argv = _argv(command)
    externalizer.externalize(b"", tool, summary=summary)  # tool and summary: refuse before starting
    if timeout is not None and not (isinstance(timeout, int | float) and 0 < timeout < 1e9):
        raise UsageError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if cwd is not None and not os.path.isdir(cwd):
        raise CommandStartError("the working folder does not exist or is not a folder", 2)
    own_stop = stop is None
    stopper = Stop() if stop is None else stop
    try:
        process = _start(argv, cwd, stdin_devnull)
        reader = _Reader(process, stopper, timeout)
        try:
            output = externalizer.externalize(reader.chunks(), tool, summary=summary)
        except BaseException:
            reader.kill_now()
            raise
        finally:
            reader.close()
        status = process.wait()
    finally:
        if own_stop:
            stopper.close()
    code = status if status >= 0 else 128 - status
    # A request that came after the output ended stopped nothing: the output is whole.
    interrupted_by = stopper.reason if reader.stopped and not reader.timed_out else None
    output = _mark(output, _incomplete_reason(reader.timed_out, interrupted_by, timeout))
    return CommandResult(
        exit_status=code,
        timed_out=reader.timed_out,
        interrupted_by=interrupted_by,
        output=output,
    )


def _argv(command: Sequence[str] | str) -> list[str]:
    if isinstance(command, str):
        if not command.strip():
            raise UsageError("the command is empty")
        return ["/bin/sh", "-c", command]
    argv = list(command)
    if not argv or not all(isinstance(a, str) for a in argv) or not argv[0]:
        raise UsageError("the command must be a non-empty list of strings")
    if any("\0" in a for a in argv):
        raise UsageError("the command must not contain NUL characters")
    return argv


def _start(argv: list[str], cwd: str | None, stdin_devnull: bool) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(
            argv,
            cwd=cwd,
            stdin=subprocess.DEVNULL if stdin_devnull else None,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # rule 3: one group to stop, and Ctrl-C is ours to forward
        )
    except FileNotFoundError:
        raise CommandStartError(f"command not found: {argv[0]}", EXIT_NOT_FOUND) from None
    except PermissionError:
        raise CommandStartError(f"command not executable: {argv[0]}", EXIT_NOT_EXECUTABLE) from None
    except OSError as exc:
        raise CommandStartError(
            f"cannot start {argv[0]}: {exc.strerror or exc}", EXIT_NOT_EXECUTABLE
        ) from exc


class _Reader:
    """The pipe as chunks, with the deadline and the stop request folded in (rules 3, 5)."""

    def __init__(self, process: subprocess.Popen[bytes], stop: Stop, timeout: float | None) -> None:
        assert process.stdout is not None
        self._process = process
        self._pipe = process.stdout
        self._stop = stop
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self.timed_out = False
        self.stopped = False
        self._kill_at: float | None = None
        self._give_up_at: float | None = None
        self._killed = False
        self._lock = threading.Lock()

    def chunks(self) -> Iterator[bytes]:
        fd = self._pipe.fileno()
        while True:
            now = time.monotonic()
            self._escalate(now)
            if self._give_up_at is not None and now >= self._give_up_at:
                return
            waits = [
                t - now for t in (self._deadline, self._kill_at, self._give_up_at) if t is not None
            ]
            wait = max(0.0, min(waits)) if waits else None
            watch = [fd] if self.stopped else [fd, self._stop.fileno()]
            ready, _, _ = select.select(watch, [], [], wait)
            if fd in ready:
                data = os.read(fd, _READ)
                if not data:
                    return
                yield data

    def _escalate(self, now: float) -> None:
        if not self.stopped:
            if self._stop.requested:
                self._begin_stop(now, _signal_for(self._stop.reason))
            elif self._deadline is not None and now >= self._deadline:
                self.timed_out = True
                self._begin_stop(now, signal.SIGTERM)
        elif self._kill_at is not None and (now >= self._kill_at or self._stop.requests > 1):
            self._signal(signal.SIGKILL)
            self._kill_at = None
            self._give_up_at = now + DRAIN_GRACE_SECONDS

    def _begin_stop(self, now: float, signum: int) -> None:
        self.stopped = True
        self._signal(signum)
        self._kill_at = now + KILL_GRACE_SECONDS

    def _signal(self, signum: int) -> None:
        # The group id is the child's pid (its own session); the child is not
        # reaped before we finish, so the id cannot have been reused.
        with self._lock, contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._process.pid, signum)

    def kill_now(self) -> None:
        self._signal(signal.SIGKILL)
        self._killed = True

    def close(self) -> None:
        self._pipe.close()
        if self._give_up_at is not None:
            # We stopped reading before EOF: make sure nothing of ours lingers.
            self._signal(signal.SIGKILL)


def _signal_for(reason: str | None) -> int:
    if reason in ("SIGINT", "SIGTERM", "SIGHUP"):
        return int(getattr(signal, reason))
    return int(signal.SIGTERM)


def _incomplete_reason(timed_out: bool, interrupted_by: str | None, timeout: float | None) -> str:
    if timed_out:
        return f"timed out after {timeout:g} s"
    if interrupted_by is not None:
        return f"interrupted by {interrupted_by}"
    return ""


def _mark(output: ExternalizationResult, incomplete: str) -> ExternalizationResult:
    """Mark a stopped command's artifact INCOMPLETE (rule 4).

    The externalizer takes its summary before the first byte, when nobody yet
    knows whether the command will finish; so the mark replaces the summary
    afterwards, in the reference and in the pointer's ``summary:`` header line
    (the only place the pointer shows it).  Small output has no summary: the
    caller reports the stop beside it.
    """
    artifact = output.artifact
    if artifact is None or not incomplete:
        return output
    text = f"INCOMPLETE ({incomplete}): {artifact.summary}"
    if len(text) > MAX_SUMMARY_CHARS:
        text = text[: MAX_SUMMARY_CHARS - 3] + "..."
    old_line = f"\nsummary: {artifact.summary}\n"
    context = output.context_text.replace(old_line, f"\nsummary: {text}\n", 1)
    return ExternalizationResult(
        context_text=context, artifact=attrs.evolve(artifact, summary=text)
    )
