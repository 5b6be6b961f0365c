"""Helpers for the journal, owner and reconciliation tests.

Artifacts are written with plain file writes (no externalizer), so these tests
depend only on the journal, the domain objects and the session layout.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import attrs

from toolswap.domain import ArtifactRetentionClaim, artifact_filename, format_source_id
from toolswap.journal import ArtifactRetentionJournal
from toolswap.owner import ObservedState


def make_artifact(
    session_dir: pathlib.Path,
    content: bytes = b"some tool output\n",
    number: int = 1,
    *,
    retain_until: float | None = None,
    reference_count: int = 1,
) -> ArtifactRetentionClaim:
    """Write ``tool-results/tool_result_NNN.txt`` and return a claim on it."""
    results = session_dir / "tool-results"
    results.mkdir(parents=True, exist_ok=True)
    name = artifact_filename(number)
    (results / name).write_bytes(content)
    digest = hashlib.sha256(content).hexdigest()
    return ArtifactRetentionClaim(
        source_id=format_source_id(session_dir.name, name, digest),
        content_sha256=digest,
        reference_count=reference_count,
        retain_until=retain_until,
    )


class Clock:
    """A settable clock for injected time."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


def journal_with_records(session_dir: pathlib.Path, count: int) -> ArtifactRetentionJournal:
    """A journal of exactly ``count`` records (prepares and commits, one claim)."""
    claim = make_artifact(session_dir)
    journal = ArtifactRetentionJournal(session_dir, clock=Clock())
    written = 0
    index = 0
    while written < count:
        txn = f"t{index}"
        journal.prepare(claim, txn)
        written += 1
        if written < count:
            journal.commit(txn)
            written += 1
        index += 1
    return journal


def prepare_many(session_dir: str, worker: int, count: int, ready: Any, go: Any) -> None:
    """Child-process body (spawned, so top-level): ``count`` prepares by one worker.

    Two threads share the work, alternating between a journal object of their own
    and one shared by the process's threads; all start when ``go`` is set.
    """
    path = pathlib.Path(session_dir)
    content = b"shared artifact\n"
    digest = hashlib.sha256(content).hexdigest()
    claim = ArtifactRetentionClaim(
        source_id=format_source_id(path.name, artifact_filename(1), digest),
        content_sha256=digest,
    )
    shared = ArtifactRetentionJournal(path)
    errors: list[BaseException] = []

    def work(indexes: range) -> None:
        own = ArtifactRetentionJournal(path)
        go.wait(60)
        try:
            for i in indexes:
                (shared if i % 2 else own).prepare(claim, f"w{worker}-{i}")
        except BaseException as exc:  # reported through the exit code
            errors.append(exc)

    half = count // 2
    threads = [
        threading.Thread(target=work, args=(range(0, half),)),
        threading.Thread(target=work, args=(range(half, count),)),
    ]
    for thread in threads:
        thread.start()
    ready.set()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def sqlite_publish_many(db_path: str, worker: int, count: int, source_id: str, digest: str) -> None:
    """Child-process body: publish ``count`` references into one SQLite owner."""
    from toolswap.owners.sqlite import SQLiteOwner

    claim = ArtifactRetentionClaim(source_id=source_id, content_sha256=digest)
    with SQLiteOwner(db_path) as owner:
        for i in range(count):
            owner.publish(f"p{worker}-{i}", claim)


def sqlite_publish_one(
    db_path: str, transaction_id: str, source_id: str, digest: str, started: Any, result: Any
) -> None:
    """Child-process body: one publish into a SQLite owner; reports how it ended."""
    from toolswap.owner import ArtifactPublicationRejected
    from toolswap.owners.sqlite import SQLiteOwner

    claim = ArtifactRetentionClaim(source_id=source_id, content_sha256=digest)
    with SQLiteOwner(db_path) as owner:
        started.set()
        try:
            owner.publish(transaction_id, claim)
        except ArtifactPublicationRejected:
            result.put("rejected")
        else:
            result.put("published")


def reconcile_once(session_dir: str, db_path: str, transaction_id: str, go: Any) -> str:
    """Child-process body: one reconciliation against a SQLite owner; returns the status."""
    from toolswap.owners.sqlite import SQLiteOwner

    journal = ArtifactRetentionJournal(session_dir)
    with SQLiteOwner(db_path) as owner:
        go.wait(60)
        return journal.reconcile_reference(transaction_id, owner).status.value


# -- owner wrappers that misbehave in one named way ---------------------------------


class UnknownOwner:
    """An owner whose every inspection answers UNKNOWN (a lagging replica, a timeout)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> object:
        return self.inner.publish(transaction_id, claim)

    def remove(self, transaction_id: str) -> None:
        self.inner.remove(transaction_id)

    @contextmanager
    def inspect_fenced(self, transaction_id: str) -> Iterator[Any]:
        with self.inner.inspect_fenced(transaction_id) as observation:
            yield attrs.evolve(
                observation, state=ObservedState.UNKNOWN, source_id=None, content_sha256=None
            )


class LostAckOwner(UnknownOwner):
    """The write is durable, but the acknowledgement is lost: the caller sees an error."""

    def __init__(self, inner: Any, error: Callable[[], BaseException] = TimeoutError) -> None:
        super().__init__(inner)
        self.error = error

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> object:
        self.inner.publish(transaction_id, claim)
        raise self.error()

    @contextmanager
    def inspect_fenced(self, transaction_id: str) -> Iterator[Any]:
        with self.inner.inspect_fenced(transaction_id) as observation:
            yield observation


class StaleOwner(LostAckOwner):
    """Observations carry a generation that has moved on by the time of the seal."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> object:
        return self.inner.publish(transaction_id, claim)

    @contextmanager
    def inspect_fenced(self, transaction_id: str) -> Iterator[Any]:
        with self.inner.inspect_fenced(transaction_id) as observation:
            yield attrs.evolve(observation, generation=observation.generation + 7)


class BrokenInspectOwner(LostAckOwner):
    """An owner whose inspection raises (connection lost)."""

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> object:
        return self.inner.publish(transaction_id, claim)

    @contextmanager
    def inspect_fenced(self, transaction_id: str) -> Iterator[Any]:
        raise ConnectionError("owner unreachable")
        yield  # pragma: no cover


class CountingSealOwner(LostAckOwner):
    """Counts ``seal_absence`` calls (the 'no second seal' row)."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.seals = 0

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> object:
        return self.inner.publish(transaction_id, claim)

    @contextmanager
    def inspect_fenced(self, transaction_id: str) -> Iterator[Any]:
        with self.inner.inspect_fenced(transaction_id) as observation:
            outer = self

            class Counting:
                def __getattr__(self, name: str) -> Any:
                    return getattr(observation, name)

                def seal_absence(self) -> bool:
                    outer.seals += 1
                    return bool(observation.seal_absence())

            yield Counting()


def file_bytes(path: str | os.PathLike[str]) -> bytes:
    return pathlib.Path(path).read_bytes()


class OneFileFS:
    """The real seam, except that one path (the journal) lives in memory.

    The exhaustive flip/truncation tests run recovery tens of thousands of times;
    keeping the journal's bytes in memory makes that fast while every journal
    read, append, truncate and fsync still goes through the seam.
    """

    HANDLE = -1000

    def __init__(self, path: str | os.PathLike[str], data: bytes = b"") -> None:
        from toolswap.fs import OsFileSystem

        self._real = OsFileSystem()
        self.path = os.path.abspath(os.fspath(path))
        self.data = bytearray(data)
        self.exists = True
        self.syncs = 0
        self.ops: list[str] = []  # "write", "ftruncate", "fsync" on the journal, in order

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def _facts(self) -> Any:
        from toolswap.fs import FileFacts

        return FileFacts(
            size=len(self.data),
            mtime_ns=0,
            ctime_ns=0,
            device=1,
            inode=1,
            uid=os.geteuid(),
            mode=0o100600,
        )

    def lstat(self, path: str) -> Any:
        if path == self.path:
            if not self.exists:
                raise FileNotFoundError(path)
            return self._facts()
        return self._real.lstat(path)

    def open_read(self, path: str) -> int:
        if path == self.path:
            if not self.exists:
                raise FileNotFoundError(path)
            return self.HANDLE
        return self._real.open_read(path)

    def open_append(self, path: str, mode: int = 0o600) -> int:
        if path == self.path:
            self.exists = True
            return self.HANDLE
        return self._real.open_append(path, mode)

    def pread(self, handle: int, size: int, offset: int) -> bytes:
        if handle == self.HANDLE:
            return bytes(self.data[offset : offset + size])
        return self._real.pread(handle, size, offset)

    def write(self, handle: int, data: bytes) -> None:
        if handle == self.HANDLE:
            self.ops.append("write")
            self.data += data
        else:
            self._real.write(handle, data)

    def ftruncate(self, handle: int, size: int) -> None:
        if handle == self.HANDLE:
            self.ops.append("ftruncate")
            del self.data[size:]
        else:
            self._real.ftruncate(handle, size)

    def fsync(self, handle: int) -> None:
        if handle == self.HANDLE:
            self.ops.append("fsync")
            self.syncs += 1
        else:
            self._real.fsync(handle)

    def fsync_dir(self, path: str) -> None:
        return None

    def fstat(self, handle: int) -> Any:
        return self._facts() if handle == self.HANDLE else self._real.fstat(handle)

    def close(self, handle: int) -> None:
        if handle != self.HANDLE:
            self._real.close(handle)
