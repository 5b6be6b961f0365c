"""The writer of the power-loss checks: a process that changes the store, says so, and never closes.

The parent (:class:`PowerWriter`) starts ``python -m toolswap.testing._power_writer
MODULE:ATTR WORKDIR``.  The child builds the harness on the same work folder,
opens one handle, says ``ready``, then takes one JSON line of operations and
runs them in order, each announced by ``calling`` and answered by ``returned``
(its outcome), then says ``done``.  Operations:

* ``["publish", txn, claim]`` and ``["remove", txn]``: the owner calls;
* ``["settle", txn]``: what the journal's reconciliation does -- enter a fence,
  and seal an ABSENT, unsealed id; the value is the observation and the seal's
  answer (``None`` when there was nothing to seal).

Rules
=====

1. The child never closes its handle and never exits by itself while its parent
   lives: a close may flush what the adapter did not make durable, and the
   power cut that kills it is what the check is about.  When its stdin closes
   (the parent is gone) it leaves with ``os._exit``, running no clean-up.
2. Every ``returned`` line is written and flushed before the next call starts:
   a line the parent reads, even after the child died, is an acknowledgement.
3. Protocol lines go to a private copy of stdout; whatever the harness prints
   goes to stderr.
"""

from __future__ import annotations

import json
import os
import queue
import sys
from collections.abc import Callable, Sequence
from typing import IO, Any

from ..domain import ArtifactRetentionClaim
from ..errors import ChildError
from ..owner import ObservedState
from .child import ChildProcess, observation_to_dict
from .outcome import Outcome, call

__all__ = ["PowerWriter"]

_READY_SECONDS = 60.0


class PowerWriter(ChildProcess):
    """The parent's side: one writer process and the events it sent."""

    what = "writer process"

    def __init__(self, import_path: str, workdir: str) -> None:
        super().__init__(__name__, import_path, workdir)
        self.acked: list[Outcome] = []
        """The answers read so far, in the order of the operations (the caller keeps it)."""
        if self.next_event(_READY_SECONDS) is None:
            self.kill()
            raise ChildError("the writer process did not open a handle in time")

    def run(self, ops: Sequence[Sequence[Any]]) -> None:
        """Send the operations; they start at once, one after another."""
        self._write({"ops": [list(op) for op in ops]})

    def answers(self, count: int, timeout: float) -> list[Outcome]:
        """Wait for ``count`` more ``returned`` events (fewer on time-out); their outcomes."""
        found: list[Outcome] = []
        while len(found) < count:
            event = self.next_event(timeout)
            if event is None:
                break
            if event.get("event") == "returned":
                found.append(_outcome(event))
        return found

    def inside_next_call(self, timeout: float) -> bool:
        """Wait until the writer starts its next call (False: it has none left)."""
        while True:
            event = self.next_event(timeout)
            if event is None or event.get("event") == "done":
                return False
            if event.get("event") == "calling":
                return True
            if event.get("event") == "returned":
                self.acked.append(_outcome(event))

    def killed_answers(self) -> list[Outcome]:
        """After the writer died: every ``returned`` event it sent that was not read yet."""
        self._process.wait()
        found: list[Outcome] = []
        while True:
            try:
                event = self._events.get(timeout=10)
            except queue.Empty:
                break
            if event is None:
                self._events.put(None)
                break
            if event.get("event") == "returned":
                found.append(_outcome(event))
        return found

    def close(self) -> None:
        self.kill()
        self._close_streams()


def _outcome(event: dict[str, Any]) -> Outcome:
    data = event["outcome"]
    return Outcome.from_dict({**data, "value": data.get("value")})


# -- the child's side --------------------------------------------------------------


def _serve(out: IO[str], import_path: str, workdir: str) -> None:
    from .harness import load_harness

    def emit(event: str, **fields: Any) -> None:
        out.write(json.dumps({"event": event, **fields}) + "\n")
        out.flush()

    try:
        owner = load_harness(import_path)(workdir).open_owner()
    except Exception as exc:
        emit("failed", error=f"{type(exc).__name__}: {exc}")
        return
    emit("ready")
    line = sys.stdin.readline()
    if not line:
        return
    for index, op in enumerate(json.loads(line)["ops"]):
        emit("calling", index=index)
        outcome = call(_operation(owner, op))
        emit("returned", index=index, outcome={**outcome.to_dict(), "value": outcome.value})
    emit("done")
    sys.stdin.read()  # until the parent is gone (rule 1): a cut kills us first


def _operation(owner: Any, op: Sequence[Any]) -> Callable[[], Any]:
    kind, txn = op[0], str(op[1])
    if kind == "publish":
        claim = ArtifactRetentionClaim.from_dict(op[2])
        return lambda: owner.publish(txn, claim)
    if kind == "remove":
        return lambda: owner.remove(txn)
    if kind == "settle":
        return lambda: _settle(owner, txn)
    raise ValueError(f"unknown writer operation {kind!r}")


def _settle(owner: Any, txn: str) -> dict[str, Any]:
    """Enter a fence and seal an unsealed absence, as the journal's reconciliation does."""
    with owner.inspect_fenced(txn) as observation:
        seen = observation_to_dict(observation)
        sealed = None
        if observation.state == ObservedState.ABSENT and observation.sealed is False:
            sealed = observation.seal_absence()
    return {"observed": seen, "sealed": sealed if isinstance(sealed, bool | None) else "other"}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(
            "usage: python -m toolswap.testing._power_writer MODULE:ATTR WORKDIR", file=sys.stderr
        )
        return 2
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    sys.stdout = sys.stderr  # whatever the harness prints is not an answer
    try:
        _serve(out, argv[0], argv[1])
    finally:
        out.flush()
        os._exit(0)  # no clean-up: nothing the adapter left open is closed (rule 1)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
