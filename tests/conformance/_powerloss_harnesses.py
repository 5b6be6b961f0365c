"""Harnesses for the power-loss pairs: each durable store beside the same store with durability off.

They live in an importable module because the kit's writer process builds the
harness by ``module:attr``.  Importing this module puts ``docs/examples`` on
``sys.path`` (the guide's example adapters live there), in the child too.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, ClassVar

_EXAMPLES = str(Path(__file__).resolve().parents[2] / "docs" / "examples")
if _EXAMPLES not in sys.path:
    sys.path.insert(0, _EXAMPLES)

from jsonl_harness import FaultyJsonlOwner, JsonlHarness  # type: ignore[import-not-found]  # noqa: E402

from toolswap.owners.postgres import PostgresOwner  # noqa: E402
from toolswap.owners.postgres_cluster import PostgresClusterHarness  # noqa: E402
from toolswap.owners.sqlite import SQLiteHarness, SQLiteOwner  # noqa: E402
from toolswap.testing.faults import FaultPlan  # noqa: E402

__all__ = [
    "AsyncCommitPostgresHarness",
    "JsonlHarness",
    "FsyncOnCloseJsonlHarness",
    "LateReplayJsonlHarness",
    "UnsyncedJsonlHarness",
    "UnsyncedSQLiteHarness",
]


# -- the guide's JSONL example without its fsyncs -------------------------------------------


class _UnsyncedJsonlOwner(FaultyJsonlOwner):  # type: ignore[misc]
    """The example with every fsync deleted: the file and its folder are never synced."""

    def __init__(self, folder: str) -> None:  # nor does it sync the folder of a new file
        self.path = os.path.join(folder, "references.jsonl")
        self.held: set[Any] = set()
        self.plan = FaultPlan()

    def _write(self, file: Any, end: int, record: dict[str, Any]) -> None:
        file.truncate(end)
        file.write(json.dumps(record).encode() + b"\n")
        file.flush()  # into the page cache, and no further


class UnsyncedJsonlHarness(JsonlHarness):  # type: ignore[misc]
    def open_owner(self) -> Any:
        return _UnsyncedJsonlOwner(self.workdir)


class _FsyncOnCloseJsonlOwner(_UnsyncedJsonlOwner):
    """Syncs nothing while it works, everything when the handle is closed."""

    def close(self) -> None:
        super().close()
        if not os.path.exists(self.path):
            return  # nothing written yet
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        folder = os.open(os.path.dirname(self.path), os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)


class FsyncOnCloseJsonlHarness(JsonlHarness):  # type: ignore[misc]
    """Durable only for a caller that closes its handle: a power cut gives none the chance."""

    def open_owner(self) -> Any:
        return _FsyncOnCloseJsonlOwner(self.workdir)


# -- an answer before recovery: ABSENT, then PUBLISHED ---------------------------------------

_INTENTS = "intents.jsonl"
_REPLAY_NEXT = "replay-next.jsonl"


def _append_durably(path: str, line: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)
    folder = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


class _IntentLogOwner(FaultyJsonlOwner):  # type: ignore[misc]
    """Logs a publish's intent durably first, then (a while later) publishes as the example."""

    window: ClassVar[float] = 0.3

    def publish(self, transaction_id: str, claim: Any) -> None:
        intent = {"txn": transaction_id, "source_id": claim.source_id, "sha": claim.content_sha256}
        folder = os.path.dirname(self.path)
        _append_durably(os.path.join(folder, _INTENTS), json.dumps(intent).encode() + b"\n")
        time.sleep(self.window)  # where a power cut lands
        super().publish(transaction_id, claim)


class LateReplayJsonlHarness(JsonlHarness):  # type: ignore[misc]
    """The store answers fences before its recovery is done: the intent log is replayed one
    restart late, over whatever tombstone was written meanwhile (the bug)."""

    def open_owner(self) -> Any:
        return _IntentLogOwner(self.workdir)

    def restart_after_power_cut(self) -> None:
        folder = self.workdir
        late = os.path.join(folder, _REPLAY_NEXT)
        if os.path.exists(late):
            with open(late, "rb") as saved:
                for line in saved.read().splitlines():
                    record = {**json.loads(line), "kind": "published"}
                    path = os.path.join(folder, "references.jsonl")
                    _append_durably(path, json.dumps(record).encode() + b"\n")
            os.unlink(late)
        intents = os.path.join(folder, _INTENTS)
        if os.path.exists(intents):
            os.rename(intents, late)
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# -- SQLite and PostgreSQL with durability off ------------------------------------------


class _UnsyncedSQLiteOwner(SQLiteOwner):
    def _connection(self) -> Any:
        conn = super()._connection()
        conn.execute("PRAGMA synchronous=OFF")
        return conn


class UnsyncedSQLiteHarness(SQLiteHarness):
    """``SQLiteOwner`` with ``PRAGMA synchronous=OFF``: SQLite never fsyncs."""

    owner_class = _UnsyncedSQLiteOwner


class _AsyncCommitOwner(PostgresOwner):
    def _connect(self, doing: str) -> Any:
        conn = super()._connect(doing)
        conn.execute("SET synchronous_commit = off")
        return conn


class AsyncCommitPostgresHarness(PostgresClusterHarness):
    """``PostgresOwner`` with ``synchronous_commit = off``: COMMIT returns before the WAL
    flush, which the WAL writer does only every ten seconds here."""

    owner_class = _AsyncCommitOwner
    server_settings: ClassVar[dict[str, str]] = {"wal_writer_delay": "10s"}
