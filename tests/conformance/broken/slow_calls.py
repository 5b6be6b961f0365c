"""Adapters that give up on a slow store call: a correct one, and two that say the wrong thing.

The family runs each publish and each seal in a worker thread and waits for
it at most :data:`CALL_TIMEOUT` seconds, as an adapter with a request time-out
does; the harness declares that time-out (``store_timeout``), so the kit
delays a store call for longer.  The worker goes on after the caller gave up,
as a request already on the wire does.  The correct adapter reports a time-out
as "maybe written" (an ``OwnerStoreError``); each broken one turns it into an
answer that promises nothing was written.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from toolswap.domain import ArtifactRetentionClaim
from toolswap.errors import OwnerStoreError
from toolswap.owner import ArtifactPublicationRejected
from toolswap.owners.sqlite import SQLiteHarness, SQLiteObservation, SQLiteOwner

__all__ = ["SlowCallRejectsHarness", "SlowSealFalseHarness", "TimedSQLiteHarness"]

CALL_TIMEOUT = 1.0
T = TypeVar("T")


class _TimedOut(Exception):
    pass


def _within(seconds: float, work: Callable[[], T], workers: list[threading.Thread]) -> T:
    """``work()`` in a worker thread; :class:`_TimedOut` if it takes longer than ``seconds``.

    The worker is kept in ``workers``: closing a connection under it would crash SQLite.
    """
    done, box = threading.Event(), {}

    def run() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:  # handed to the caller, if it still waits
            box["error"] = exc
        finally:
            done.set()

    worker = threading.Thread(target=run, daemon=True)
    workers.append(worker)
    worker.start()
    if not done.wait(seconds):
        raise _TimedOut
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


class TimedSQLiteOwner(SQLiteOwner):
    """The reference SQLite owner behind a request time-out (correct: a time-out is "maybe")."""

    @property
    def workers(self) -> list[threading.Thread]:
        if not hasattr(self, "_workers"):
            self._workers: list[threading.Thread] = []
        return self._workers

    def close(self) -> None:
        for worker in self.workers:  # a request on the wire finishes before its connection goes
            worker.join(60)
        super().close()

    def on_publish_timeout(self) -> Exception:
        return OwnerStoreError("the publish timed out; it may still be written")

    def on_seal_timeout(self) -> bool:
        raise OwnerStoreError("the seal timed out; it may still be written")

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        try:
            _within(
                CALL_TIMEOUT,
                lambda: SQLiteOwner.publish(self, transaction_id, claim),
                self.workers,
            )
        except _TimedOut:
            raise self.on_publish_timeout() from None

    def inspect_fenced(self, transaction_id: str) -> Any:
        owner = self

        class _TimedFence:
            def __enter__(self) -> _TimedObservation:
                self._inner = SQLiteOwner.inspect_fenced(owner, transaction_id)
                return _TimedObservation(owner, self._inner.__enter__())

            def __exit__(self, *exc: Any) -> Any:
                return self._inner.__exit__(*exc)

        return _TimedFence()


class _TimedObservation:
    def __init__(self, owner: TimedSQLiteOwner, inner: SQLiteObservation) -> None:
        self._owner, self._inner = owner, inner
        self.transaction_id, self.state = inner.transaction_id, inner.state
        self.source_id, self.content_sha256 = inner.source_id, inner.content_sha256
        self.generation, self.sealed = inner.generation, inner.sealed

    def seal_absence(self) -> bool:
        try:
            return _within(CALL_TIMEOUT, self._inner.seal_absence, self._owner.workers)
        except _TimedOut:
            return self._owner.on_seal_timeout()


class TimedSQLiteHarness(SQLiteHarness):
    owner_class = TimedSQLiteOwner
    store_timeout = CALL_TIMEOUT


class SlowCallRejectsOwner(TimedSQLiteOwner):
    """Breaks O2 "nothing was written for that id by this call and nothing of it is still
    in flight".

    On a time-out the author raises ArtifactPublicationRejected ("the store
    did not confirm, so it is not there").  The request is still on its way
    and lands a moment later: the journal has aborted the lease of a
    reference that now exists.
    """

    def on_publish_timeout(self) -> Exception:
        return ArtifactPublicationRejected("the store did not confirm the publish in time")


class SlowCallRejectsHarness(TimedSQLiteHarness):
    owner_class = SlowCallRejectsOwner


class SlowSealFalseOwner(TimedSQLiteOwner):
    """Breaks O6 "``False`` when the id's generation is no longer the observed one, in which
    case it writes nothing".

    A seal that times out returns False ("not sealed"), but its statement is
    still running and writes the tombstone after the fence ended.
    """

    def on_seal_timeout(self) -> bool:
        return False


class SlowSealFalseHarness(TimedSQLiteHarness):
    owner_class = SlowSealFalseOwner
