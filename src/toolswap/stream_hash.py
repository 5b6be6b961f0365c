"""The SHA-256 of an artifact being written, computed beside the write.

Externalizing is write + hash + newline count + notable-line scan, one pass.
``hashlib`` lets go of the GIL while it hashes a large buffer, so on a
second core the digest costs the writer almost nothing: past
:data:`INLINE_BYTES` (below it a thread costs more than it saves), chunks go
to one helper thread in order, in batches of at least :data:`BATCH_BYTES`,
with at most :data:`DEPTH` batches waiting (bounded memory).  The digest is
the same as hashing inline; only where the work runs changes.
"""

from __future__ import annotations

import hashlib
import queue
import threading

__all__ = ["StreamSha256", "INLINE_BYTES", "BATCH_BYTES", "DEPTH"]

INLINE_BYTES = 1024 * 1024
BATCH_BYTES = 256 * 1024
DEPTH = 8


class StreamSha256:
    """``update`` in stream order, then ``hexdigest`` once (or ``close`` to give up)."""

    def __init__(self, *, inline_bytes: int = INLINE_BYTES) -> None:
        self._digest = hashlib.sha256()
        self._inline_left = inline_bytes
        self._batch = bytearray()
        self._queue: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._slots = threading.BoundedSemaphore(DEPTH)
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None

    def update(self, chunk: bytes) -> None:
        if self._thread is None:
            if self._inline_left > 0:
                self._digest.update(chunk)
                self._inline_left -= len(chunk)
                return
            self._thread = threading.Thread(target=self._work, name="toolswap-sha256", daemon=True)
            self._thread.start()
        if len(chunk) >= BATCH_BYTES and not self._batch:
            self._submit(chunk)
            return
        self._batch += chunk
        if len(self._batch) >= BATCH_BYTES:
            self._submit(bytes(self._batch))
            self._batch.clear()

    def hexdigest(self) -> str:
        if self._thread is not None:
            if self._batch:
                self._submit(bytes(self._batch))
                self._batch.clear()
            self._stop()
            if self._failure is not None:
                raise self._failure
        return self._digest.hexdigest()

    def close(self) -> None:
        """Stop the helper without a digest (the write failed); safe to call twice."""
        self._batch.clear()
        self._stop()

    def _submit(self, data: bytes) -> None:
        self._slots.acquire()
        self._queue.put(data)

    def _stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join()

    def _work(self) -> None:
        while True:
            data = self._queue.get()
            if data is None:
                return
            try:
                if self._failure is None:
                    self._digest.update(data)
            except BaseException as exc:  # pragma: no cover - hashlib does not fail on bytes
                self._failure = exc
            finally:
                self._slots.release()
