# file: jsonl_owner.py
"""An owner over one append-only JSON-lines file, fenced by flock(2) on that file.

Each change appends a line; its line number is the id's new generation (the file only
grows: no generation is reused).  Each call and each fence holds the flock through its
own file object, so threads, handles and processes exclude each other.  A line counts
once fsync returns; a torn last line (its writer died) is ignored, then cut off.
"""

import contextlib
import fcntl
import json
import os

from toolswap.errors import OwnerStoreError, UsageError
from toolswap.owner import (
    ArtifactPublicationRejected,
    ObservedState,
    OwnerConflictError,
    require_sealable,
)

NEVER_SEEN = (None, None, None, 0)  # kind, source id, digest, generation


@contextlib.contextmanager
def store_errors(doing):
    try:
        yield
    except OSError as exc:  # str(exc) would name the file: keep the reason only (O7)
        raise OwnerStoreError(f"jsonl owner: {doing} failed ({exc.strerror})") from exc


class JsonlOwner:
    def __init__(self, folder):
        self.path = os.path.join(folder, "references.jsonl")
        self.held = set()  # the files holding the lock right now
        # Create the file now: a new file's name survives a power cut only once its
        # folder is fsynced, and every write below fsyncs the file alone.
        with store_errors("opening the store"):
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
            folder_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(folder_fd)
            finally:
                os.close(folder_fd)

    # The store calls (a fault-injecting harness overrides them): read, write, unlock.
    def _read(self, file):
        file.seek(0)
        return file.read()

    def _write(self, file, end, record):
        file.truncate(end)  # cut a torn tail first
        file.write(json.dumps(record).encode() + b"\n")
        file.flush()
        os.fsync(file.fileno())

    def _unlock(self, file):
        file.close()  # closing the file releases its flock

    def _load(self, file):
        data = self._read(file)
        end = data.rfind(b"\n") + 1
        lines = enumerate(map(json.loads, data[:end].splitlines()), start=1)
        return {r["txn"]: (r["kind"], r.get("source_id"), r.get("sha"), n) for n, r in lines}, end

    @contextlib.contextmanager
    def _locked(self, doing):
        with store_errors(doing):
            file = open(self.path, "a+b")  # noqa: SIM115 (closed below, or by close())
        self.held.add(file)
        try:
            with store_errors(doing):
                fcntl.flock(file, fcntl.LOCK_EX)
                rows, end = self._load(file)
            yield file, rows, end
        finally:
            self.held.discard(file)
            with store_errors(doing):
                self._unlock(file)

    def publish(self, transaction_id, claim):
        with self._locked("publishing") as (file, rows, end):
            kind, source_id, sha, _ = rows.get(transaction_id, NEVER_SEEN)
            if kind == "tombstone":
                raise ArtifactPublicationRejected(f"{transaction_id!r} is tombstoned")
            if kind == "published" and (source_id, sha) != (claim.source_id, claim.content_sha256):
                raise OwnerConflictError(f"{transaction_id!r} holds another reference")
            if kind is None:
                new = {"txn": transaction_id, "kind": "published", "sha": claim.content_sha256}
                with store_errors("publishing"):
                    self._write(file, end, {**new, "source_id": claim.source_id})

    def remove(self, transaction_id):
        with self._locked("removing") as (file, rows, end):
            if rows.get(transaction_id, NEVER_SEEN)[0] != "tombstone":
                with store_errors("removing"):
                    self._write(file, end, {"txn": transaction_id, "kind": "tombstone"})

    @contextlib.contextmanager
    def inspect_fenced(self, transaction_id):
        with self._locked("fencing") as (file, rows, _):
            kind, source_id, sha, generation = rows.get(transaction_id, NEVER_SEEN)
            seen = JsonlObservation(transaction_id, kind, source_id, sha, generation)
            seen.owner, seen.file = self, file
            try:
                yield seen
            finally:
                seen.file = None  # the block is over: no more seals

    def close(self):
        for file in list(self.held):
            file.close()  # a fence still open loses its lock, and its seal refuses


class JsonlObservation:
    def __init__(self, transaction_id, kind, source_id, sha, generation):
        self.transaction_id, self.source_id, self.content_sha256 = transaction_id, source_id, sha
        self.state = ObservedState.PUBLISHED if kind == "published" else ObservedState.ABSENT
        self.generation, self.sealed = generation, kind == "tombstone"

    def seal_absence(self):
        require_sealable(self)
        if self.file is None:
            raise UsageError("seal_absence is allowed only inside its inspect_fenced block")
        if self.file.closed:
            raise OwnerStoreError("jsonl owner: the fence was lost, nothing was sealed")
        with store_errors("sealing"):  # a compare-and-set, although the lock is held
            rows, end = self.owner._load(self.file)
            if rows.get(self.transaction_id, NEVER_SEEN)[3] != self.generation:
                return False
            self.owner._write(self.file, end, {"txn": self.transaction_id, "kind": "tombstone"})
        return True
