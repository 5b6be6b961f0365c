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
3. **One process group, ended with the call.**  The command starts in a
   session of its own, so a stop reaches everything it spawned: ``SIGTERM``
   (or the signal that stopped us) to the group, ``SIGKILL`` after
   :data:`KILL_GRACE_SECONDS`, then the pipe is drained for at most
   :data:`DRAIN_GRACE_SECONDS` more.  The call ends when the command itself
   (the group's leader) has exited: a background child that keeps the pipe
   open is read for at most :data:`EXIT_DRAIN_SECONDS` more, never waited
   for.  Whatever is left of the group then gets ``SIGKILL``.  The leader is
   reaped only after that, so its pid (the group's id) cannot be reused by
   another process before the last signal.  A daemon that leaves the group on
   purpose (``setsid``, a double fork into a new session) is out of reach: it
   is not stopped, and if it holds the pipe, it gets ``SIGPIPE`` on its next
   write once the drain is over.  The timeout still holds after the command
   closes its output: a command that keeps running with its pipe closed is
   stopped like any other.
4. **A stop keeps what was captured.**  A timeout, a signal or a cancellation
   stops the command, and what it printed so far is externalized like any
   output; its summary starts with ``INCOMPLETE (...)`` so that nobody takes
   a cut-off log for the whole story.
5. **Waking up is event-driven.**  :class:`Stop` is a self-pipe: a signal
   handler or another thread writes one byte, and the ``select`` that waits
   for output wakes at once (no polling).  The leader's exit wakes it too,
   through a pidfd (polled every :data:`_EXIT_POLL_SECONDS` only where the
   system has none).
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
    "OutputMeter",
    "KILL_GRACE_SECONDS",
    "DRAIN_GRACE_SECONDS",
    "EXIT_DRAIN_SECONDS",
    "EXIT_NOT_FOUND",
    "EXIT_NOT_EXECUTABLE",
]

KILL_GRACE_SECONDS = 2.0
DRAIN_GRACE_SECONDS = 1.0
EXIT_DRAIN_SECONDS = 0.5
#: How often the leader's exit is polled where there is no pidfd to wait on.
_EXIT_POLL_SECONDS = 0.05
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


class OutputMeter:
    """Bytes and lines a running command has printed so far.

    The reading thread adds to it; another thread (a progress reporter) reads
    the two counters whenever it likes: each is one int, so a reader sees a
    value that was true at some moment, which is all progress needs.
    """

    def __init__(self) -> None:
        self.bytes = 0
        self.lines = 0

    def add(self, data: bytes) -> None:
        self.bytes += len(data)
        self.lines += data.count(b"\n")


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
    meter: OutputMeter | None = None,
) -> CommandResult:
    """Run ``command`` (an argv list, or a string for ``/bin/sh -c``); see the module rules.

    Call :func:`check_session` first; this function assumes it passed.
    ``meter``, when given, counts the output as it arrives (for progress).
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
        reader = _Reader(process, stopper, timeout, meter)
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
        if "\0" in command:  # exec would refuse it with a bare ValueError
            raise UsageError("the command must not contain NUL characters")
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
    except ValueError as exc:  # what exec refuses before trying (an embedded NUL)
        raise UsageError(f"the command cannot be started: {exc}") from exc


class _Reader:
    """The pipe as chunks, with the deadline, the stop request and the leader's exit folded in.

    Rules 3 and 5: the loop ends when the pipe is at EOF *and* the leader has
    exited, when the leader has exited and the drain after it is over, or when
    a stop has run its course (SIGKILL sent and the drain grace spent).  The
    leader's exit is seen without reaping it (a pidfd, or ``waitid`` with
    ``WNOWAIT``), so the group id stays ours until :meth:`close` has signalled.
    """

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        stop: Stop,
        timeout: float | None,
        meter: OutputMeter | None,
    ) -> None:
        assert process.stdout is not None
        self._process = process
        self._pipe = process.stdout
        self._stop = stop
        self._meter = meter
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self.timed_out = False
        self.stopped = False
        self._kill_at: float | None = None
        self._give_up_at: float | None = None
        self._eof = False
        self._exited = False
        self._pidfd = _open_pidfd(process.pid)
        self._lock = threading.Lock()

    def chunks(self) -> Iterator[bytes]:
        fd = self._pipe.fileno()
        while not (self._eof and self._exited):
            now = time.monotonic()
            self._escalate(now)
            if self._give_up_at is not None and now >= self._give_up_at:
                return
            if not self._exited and self._pidfd is None and _has_exited(self._process.pid):
                self._leader_exited(now)
                continue
            watch = [] if self._eof else [fd]
            if not (self.stopped or self._exited):
                watch.append(self._stop.fileno())
            if not self._exited and self._pidfd is not None:
                watch.append(self._pidfd)
            ready, _, _ = select.select(watch, [], [], self._wait(now))
            if self._pidfd is not None and self._pidfd in ready:
                self._leader_exited(time.monotonic())
            if fd in ready:
                data = os.read(fd, _READ)
                if not data:
                    self._eof = True
                    continue
                if self._meter is not None:
                    self._meter.add(data)
                yield data

    def _wait(self, now: float) -> float | None:
        """Seconds until the next thing this loop must do on its own."""
        moments = [self._kill_at, self._give_up_at]
        if not self.stopped:
            moments.append(self._deadline)
        waits = [t - now for t in moments if t is not None]
        if not self._exited and self._pidfd is None:
            waits.append(_EXIT_POLL_SECONDS)
        return max(0.0, min(waits)) if waits else None

    def _leader_exited(self, now: float) -> None:
        # The command is over: what is left of its group is not waited for.
        self._exited = True
        self._kill_at = None
        drained = now + EXIT_DRAIN_SECONDS
        self._give_up_at = drained if self._give_up_at is None else min(self._give_up_at, drained)

    def _escalate(self, now: float) -> None:
        if self._exited:
            return  # nothing left to stop: a late request stopped nothing
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
        # The group id is the leader's pid (its own session); the leader is not
        # reaped before close() has signalled, so the id cannot have been reused.
        with self._lock, contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._process.pid, signum)

    def kill_now(self) -> None:
        self._signal(signal.SIGKILL)

    def close(self) -> None:
        """End the call: close the pipe and kill whatever is left of the group (rule 3)."""
        self._pipe.close()
        self._signal(signal.SIGKILL)
        if self._pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(self._pidfd)
            self._pidfd = None


def _open_pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when ``pid`` exits, where the system has one."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        return int(opener(pid))
    except OSError:
        return None


def _has_exited(pid: int) -> bool:
    """Whether child ``pid`` has exited, leaving it unreaped (``WNOWAIT``)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


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
