"""One handle shared by threads: every view of it makes its calls from a thread of its own.

When a harness says one handle may be used by several threads at once
(``shared_handles = True``), the kit runs its O1 and O5 checks with one handle
only: every "handle" a check opens is a :class:`ThreadedView` of that one
object, whose calls all run in the view's own worker thread.  A fence entered
through one view and a publish through another then come from two threads of
one handle, which is what the adapter's docstring allowed.

A worker is a daemon thread: a call stuck inside the adapter never keeps the
process alive, and the check's own time limit reports it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any

from ..domain import ArtifactRetentionClaim
from ..owner import ArtifactReferenceOwner, OwnerObservation

__all__ = ["ThreadedView"]

_STOP = object()


class _Worker:
    """One daemon thread that runs the calls it is given, one after another."""

    def __init__(self, name: str) -> None:
        self._calls: queue.Queue[Any] = queue.Queue()
        threading.Thread(target=self._serve, name=name, daemon=True).start()

    def _serve(self) -> None:
        while True:
            item = self._calls.get()
            if item is _STOP:
                return
            function, done, box = item
            try:
                box.append((True, function()))
            except BaseException as exc:  # handed back to the caller's thread
                box.append((False, exc))
            done.set()

    def run(self, function: Callable[[], Any]) -> Any:
        done, box = threading.Event(), []  # type: ignore[var-annotated]
        self._calls.put((function, done, box))
        done.wait()
        ok, value = box[0]
        if not ok:
            raise value
        return value

    def stop(self) -> None:
        self._calls.put(_STOP)


class ThreadedView:
    """A view of one shared handle whose calls run in a thread of their own."""

    def __init__(self, owner: ArtifactReferenceOwner, name: str) -> None:
        self.shared = owner
        self._worker = _Worker(f"shared handle, {name}")

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> object:
        return self._worker.run(lambda: self.shared.publish(transaction_id, claim))

    def remove(self, transaction_id: str) -> None:
        self._worker.run(lambda: self.shared.remove(transaction_id))

    def inspect_fenced(self, transaction_id: str) -> AbstractContextManager[OwnerObservation]:
        return _ThreadedFence(self._worker, self.shared, transaction_id)

    def stop(self) -> None:
        self._worker.stop()


class _ThreadedFence:
    def __init__(self, worker: _Worker, owner: ArtifactReferenceOwner, txn: str) -> None:
        self._worker, self._owner, self._txn = worker, owner, txn
        self._inner: AbstractContextManager[OwnerObservation] | None = None

    def __enter__(self) -> OwnerObservation:
        self._inner = self._worker.run(lambda: self._owner.inspect_fenced(self._txn))
        inner = self._inner
        observation = self._worker.run(inner.__enter__)
        return _ThreadedObservation(self._worker, observation)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        inner = self._inner
        assert inner is not None
        suppressed: bool | None = self._worker.run(lambda: inner.__exit__(kind, exc, tb))
        return suppressed


class _ThreadedObservation:
    """The adapter's observation; its seal runs in the fence's thread."""

    def __init__(self, worker: _Worker, inner: OwnerObservation) -> None:
        self._worker, self._inner = worker, inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def seal_absence(self) -> Any:  # as the adapter returned it: the checks judge its type
        return self._worker.run(self._inner.seal_absence)

    def __repr__(self) -> str:
        return repr(self._inner)

    def __str__(self) -> str:
        return str(self._inner)
