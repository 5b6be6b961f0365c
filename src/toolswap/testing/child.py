"""A handle on the store in another process: the kit's second caller across a process boundary.

The parent starts ``python -m toolswap.testing.child MODULE:ATTR WORKDIR``.  The
child builds the harness with the same work folder (so it reaches the same
store, harness rule 3), opens one handle, says ``ready``, then obeys one JSON
command per line on stdin and answers with JSON events on its own channel:

* ``publish`` / ``remove`` / ``observe``: ``calling`` just before the call
  into the adapter, ``returned`` with the outcome after it;
* ``fence``: ``calling``, then ``entered`` with the observation (the block
  stays open), then ``seal`` answers ``sealed`` and ``exit`` answers
  ``exited``; a failure to enter answers ``returned``;
* ``quit``: close the handle and exit.

The child writes protocol lines to a private copy of stdout and sends
everything else (a harness that prints) to stderr, so nothing the adapter
prints can be taken for an answer.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import IO, Any

from ..domain import ArtifactRetentionClaim
from ..errors import (
    ChildError,  # noqa: F401 (re-exported)
)
from ..owner import OwnerObservation
from .outcome import Outcome, OutcomeKind, call

__all__ = ["ChildError", "ChildOwner", "ChildProcess", "observation_to_dict"]

_START_SECONDS = 60.0


def observation_to_dict(observation: OwnerObservation) -> dict[str, Any]:
    """The fields of an observation as JSON-safe values (plus its repr, for O7 scans)."""

    def plain(value: Any) -> Any:
        if value is None or isinstance(value, bool | int | str):
            return value
        return repr(value)

    state = observation.state
    return {
        "transaction_id": plain(observation.transaction_id),
        "state": str(state.value) if hasattr(state, "value") else repr(state),
        "state_type": type(state).__name__,
        "source_id": plain(observation.source_id),
        "content_sha256": plain(observation.content_sha256),
        "generation": plain(observation.generation),
        "generation_type": type(observation.generation).__name__,
        "sealed": plain(observation.sealed),
        "repr": f"{observation!r} {observation}",
    }


class ChildProcess:
    """The parent's side of a kit process that answers in JSON lines, one event per line.

    Shared by the second caller (:class:`ChildOwner`) and the power-loss writer
    (:mod:`toolswap.testing._power_writer`): both read events on a thread so a
    wait can time out, and keep the last lines of stderr to say why one died.
    """

    what = "child process"
    """How errors name the process."""

    def __init__(self, module: str, import_path: str, workdir: str) -> None:
        env = dict(os.environ)
        # The harness may live in a test module that only the parent's sys.path reaches.
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        self._process = subprocess.Popen(
            [sys.executable, "-m", module, import_path, workdir],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        self._events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    @property
    def pid(self) -> int:
        return self._process.pid

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            try:
                self._events.put(json.loads(line))
            except ValueError:
                continue
        self._events.put(None)

    def _drain_stderr(self) -> None:
        assert self._process.stderr is not None
        for line in self._process.stderr:
            if len(self._stderr) < 200:
                self._stderr.append(line)

    def _write(self, message: dict[str, Any]) -> None:
        assert self._process.stdin is not None
        try:
            self._process.stdin.write(json.dumps(message) + "\n")
            self._process.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise ChildError(f"the {self.what} is gone") from exc

    def next_event(self, timeout: float) -> dict[str, Any] | None:
        """The next event, or ``None`` if none arrives within ``timeout``.

        A dead process or a ``failed`` event is a :class:`ChildError`.
        """
        try:
            got = self._events.get(timeout=timeout)
        except queue.Empty:
            return None
        if got is None:
            self._events.put(None)  # every later read sees the death too
            tail = "".join(self._stderr[-3:]).strip().splitlines()
            last = tail[-1] if tail else "no output"
            raise ChildError(f"the {self.what} died (last stderr line: {last[:200]})")
        if got.get("event") == "failed":
            raise ChildError(f"the {self.what} failed: {got.get('error', '?')}")
        return got

    def kill(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
        self._process.wait()

    def _close_streams(self) -> None:
        for stream in (self._process.stdin, self._process.stdout, self._process.stderr):
            if stream is not None:
                stream.close()


class ChildOwner(ChildProcess):
    """One child process holding one handle on the store."""

    def __init__(self, import_path: str, workdir: str) -> None:
        super().__init__("toolswap.testing.child", import_path, workdir)
        ready = self.expect("ready", _START_SECONDS)
        if ready is None:
            self.kill()
            raise ChildError("the child process did not open a handle in time")

    def send(self, op: str, **fields: Any) -> None:
        self._write({"op": op, **fields})

    def expect(self, event: str, timeout: float) -> dict[str, Any] | None:
        """The next event, which must be ``event``; ``None`` on timeout."""
        got = self.next_event(timeout)
        if got is not None and got.get("event") != event:
            raise ChildError(f"the child answered {got.get('event')!r}, expected {event!r}")
        return got

    def outcome(self, event: dict[str, Any]) -> Outcome:
        return Outcome.from_dict(event["outcome"])

    def close(self) -> None:
        if self._process.poll() is None:
            try:
                self.send("quit")
                self._process.wait(timeout=10)
            except (ChildError, subprocess.TimeoutExpired):
                pass
        self.kill()
        self._close_streams()


# -- the child's side --------------------------------------------------------------


def _serve(out: IO[str], import_path: str, workdir: str) -> int:
    from .harness import load_harness

    def emit(event: str, **fields: Any) -> None:
        out.write(json.dumps({"event": event, **fields}) + "\n")
        out.flush()

    try:
        harness = load_harness(import_path)(workdir)
        owner = harness.open_owner()
    except Exception as exc:
        emit("failed", error=f"{type(exc).__name__}: {exc}")
        return 1
    emit("ready")
    session = _Session(owner, emit)
    for line in sys.stdin:
        command = json.loads(line)
        if command["op"] == "quit":
            break
        session.obey(command)
    harness.close_owner(owner)
    return 0


class _Session:
    """The child's handle and the fence it may be holding open."""

    def __init__(self, owner: Any, emit: Callable[..., None]) -> None:
        self.owner = owner
        self.emit = emit
        self.fence: AbstractContextManager[OwnerObservation] | None = None
        self.observation: OwnerObservation | None = None

    def obey(self, command: dict[str, Any]) -> None:
        op, txn, emit = command["op"], str(command.get("txn")), self.emit
        if op in {"publish", "remove", "observe", "fence"}:
            emit("calling")
        if op == "publish":
            claim = ArtifactRetentionClaim.from_dict(command["claim"])
            emit("returned", outcome=call(lambda: self.owner.publish(txn, claim)).to_dict())
        elif op == "remove":
            emit("returned", outcome=call(lambda: self.owner.remove(txn)).to_dict())
        elif op == "observe":
            result = call(lambda: self._observe(txn))
            emit("returned", outcome={**result.to_dict(), "value": result.value})
        elif op == "fence":
            fence = self.owner.inspect_fenced(txn)
            entered = call(fence.__enter__)
            if entered.kind is not OutcomeKind.OK:
                emit("returned", outcome=entered.to_dict())
                return
            self.fence, self.observation = fence, entered.value
            emit("entered", observation=observation_to_dict(entered.value))
        elif op == "seal" and self.observation is not None:
            sealed = call(self.observation.seal_absence)
            emit("sealed", outcome={**sealed.to_dict(), "value": sealed.value})
        elif op == "exit" and self.fence is not None:
            fence, self.fence, self.observation = self.fence, None, None
            emit("exited", outcome=call(lambda: fence.__exit__(None, None, None)).to_dict())
        else:
            emit("failed", error=f"unexpected command {op!r}")

    def _observe(self, txn: str) -> dict[str, Any]:
        with self.owner.inspect_fenced(txn) as seen:
            return observation_to_dict(seen)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m toolswap.testing.child MODULE:ATTR WORKDIR", file=sys.stderr)
        return 2
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    sys.stdout = sys.stderr  # whatever the harness prints is not an answer
    return _serve(out, argv[0], argv[1])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
