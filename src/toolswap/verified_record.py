"""Verified once per artifact, not once per process: the session's record of verifications.

An agent reads a large artifact one page at a time, each page in a new
``toolswap read`` process, and each process used to hash the whole file
before its first page.  After a process has hashed an artifact (and indexed
its lines), it writes what it found to ``<session>/.verified-artifacts``,
keyed by the file's identity as the file system reports it: device, inode,
size, mtime_ns and ctime_ns.  A later process whose ``fstat`` shows the same
identity takes the digest and the line index from the record instead of
hashing; any other identity is hashed again (docs/design.md sections 5 and
11 say what this trusts).

Rules:

1. The record is a cache, never evidence.  A missing, unreadable, foreign
   (another owner, a second hard link, not a regular file), oversized or
   malformed record, or a malformed line of it, is ignored: the file is
   hashed.  The digest taken from the record is still compared with the one
   the read expects (the source id's prefix, the reference's or the
   journal's full digest), so a record can never make a wrong digest pass.
2. A file is recorded only once its ctime is :data:`SETTLED_NS` older than
   the moment its hashing began.  A change lands on a ctime at least one
   timestamp tick after the change, so a rewrite right after hashing, inside
   the tick of the file's last change, would otherwise keep the recorded
   identity with new bytes; two seconds cover the coarsest common file
   system clock.
3. Writes are best effort and never wait: the session lock is tried without
   blocking (another writer, cleanup or a journal append holds it: nothing is
   recorded this time), the new record goes to a temporary file that is then
   renamed over the old one, all through the file-system seam.  Nothing is
   fsynced: a record lost in a crash costs one hash.
4. Bounded: at most :data:`MAX_RECORD_BYTES`; the oldest entries make room,
   and entries of files that are gone are dropped when the record is written.
"""

from __future__ import annotations

import contextlib
import os
import threading

from .domain import is_artifact_filename
from .fs import FileSystem, read_fully
from .line_index import LineIndex
from .session import SessionPaths

__all__ = ["VerifiedRecord", "RECORD_NAME", "SETTLED_NS", "MAX_RECORD_BYTES"]

RECORD_NAME = ".verified-artifacts"
SETTLED_NS = 2_000_000_000
MAX_RECORD_BYTES = 8 * 1024 * 1024
_HEADER = b"toolswap verified-artifacts 1\n"
_HEX = frozenset(b"0123456789abcdef")

Identity = tuple[int, int, int, int, int]


def _encode(name: str, identity: Identity, sha256: str, index: LineIndex) -> bytes:
    offsets = ",".join(map(str, index.checkpoint_offsets))
    newlines = ",".join(map(str, index.checkpoint_newlines))
    fields = (
        name,
        *map(str, identity),
        sha256,
        str(index.newline_count),
        "1" if index.ends_with_newline else "0",
        offsets,
        newlines,
    )
    return (" ".join(fields) + "\n").encode("ascii")


def _number(text: bytes) -> int:
    if not text.isdigit() or len(text) > 20:
        raise ValueError("not a number")
    return int(text)


def _decode(line: bytes) -> tuple[Identity, str, LineIndex]:
    """One entry's identity, digest and index; ValueError unless every field is sound."""
    fields = line.split(b" ")
    if len(fields) != 11:
        raise ValueError("wrong field count")
    identity = (
        _number(fields[1]),
        _number(fields[2]),
        _number(fields[3]),
        _number(fields[4]),
        _number(fields[5]),
    )
    sha256 = fields[6]
    if len(sha256) != 64 or not set(sha256) <= _HEX:
        raise ValueError("not a digest")
    newline_count = _number(fields[7])
    if fields[8] not in (b"0", b"1"):
        raise ValueError("not a flag")
    offsets = tuple(_number(x) for x in fields[9].split(b","))
    counts = tuple(_number(x) for x in fields[10].split(b","))
    size = identity[2]
    ends = fields[8] == b"1"
    if (
        len(offsets) != len(counts)
        or offsets[0] != 0
        or counts[0] != 0
        or any(b <= a for a, b in zip(offsets, offsets[1:], strict=False))
        or any(b < a for a, b in zip(counts, counts[1:], strict=False))
        or offsets[-1] > size
        or counts[-1] > newline_count
        or newline_count > size
        or (ends and newline_count == 0)
    ):
        raise ValueError("not a line index of this size")
    index = LineIndex(
        size=size,
        newline_count=newline_count,
        ends_with_newline=ends,
        checkpoint_offsets=offsets,
        checkpoint_newlines=counts,
    )
    return identity, sha256.decode("ascii"), index


class VerifiedRecord:
    """The record of one session, as one process sees it (see the module rules)."""

    def __init__(self, paths: SessionPaths, fs: FileSystem) -> None:
        self._paths = paths
        self._fs = fs
        self._lock = threading.Lock()
        self._seen: Identity | None = None  # the record file's identity when last read
        self._lines: dict[str, bytes] = {}  # name -> its entry, parsed only when asked for

    @property
    def path(self) -> str:
        return os.path.join(self._paths.root, RECORD_NAME)

    def lookup(self, name: str, identity: Identity) -> tuple[str, LineIndex] | None:
        """The recorded digest and index of ``name`` if recorded at exactly ``identity``."""
        with self._lock:
            self._load()
            line = self._lines.get(name)
        if line is None:
            return None
        try:
            recorded, sha256, index = _decode(line)
        except ValueError:
            return None
        return (sha256, index) if recorded == identity else None

    def remember(
        self, name: str, identity: Identity, sha256: str, index: LineIndex, *, hashed_at_ns: int
    ) -> None:
        """Record a verification begun at ``hashed_at_ns`` (rule 2), if the lock is free."""
        if hashed_at_ns - identity[4] < SETTLED_NS or not is_artifact_filename(name):
            return
        entry = _encode(name, identity, sha256, index)
        with self._lock, contextlib.suppress(OSError):
            self._write_locked(name, entry)

    def _load(self) -> None:
        """Read the record again if its file changed; anything odd reads as empty."""
        fs = self._fs
        try:
            facts = fs.lstat(self.path)
        except OSError:
            self._seen, self._lines = None, {}
            return
        if facts.identity == self._seen:
            return
        self._seen = facts.identity
        self._lines = self._read(facts.identity) or {}

    def _read(self, expected: Identity) -> dict[str, bytes] | None:
        fs = self._fs
        try:
            handle = fs.open_read(self.path)
        except OSError:
            return None
        try:
            facts = fs.fstat(handle)
            if (
                facts.identity != expected
                or facts.uid != fs.current_uid()
                or facts.nlink != 1
                or facts.size > MAX_RECORD_BYTES
            ):
                return None
            data = read_fully(fs, handle, facts.size, chunk=facts.size or 1)
        except OSError:
            return None
        finally:
            fs.close(handle)
        if not data.startswith(_HEADER) or not data.endswith(b"\n"):
            return None
        lines: dict[str, bytes] = {}
        for line in data[len(_HEADER) : -1].split(b"\n"):
            name, _, _ = line.partition(b" ")
            with contextlib.suppress(UnicodeDecodeError):
                lines[name.decode("ascii")] = line
        return lines

    def _write_locked(self, name: str, entry: bytes) -> None:
        fs = self._fs
        lock = fs.open_lock(self._paths.lock)
        try:
            if not fs.try_flock(lock):
                return  # someone holds the session lock: record another time
            try:
                self._seen = None
                self._load()
                kept = {n: line for n, line in self._lines.items() if n != name and self._exists(n)}
                body = [line + b"\n" for line in kept.values()] + [entry]
                while body and len(_HEADER) + sum(map(len, body)) > MAX_RECORD_BYTES:
                    body.pop(0)  # the oldest entries make room for the newest
                if body and body[-1] is entry:
                    self._replace(_HEADER + b"".join(body))
                self._seen = None  # read back as written, next time
            finally:
                fs.funlock(lock)
        finally:
            fs.close(lock)

    def _exists(self, name: str) -> bool:
        if not is_artifact_filename(name):
            return False
        try:
            self._fs.lstat(self._paths.artifact_path(name))
        except FileNotFoundError:
            return False
        except OSError:
            return True  # cannot tell: keep it, lookups still compare identities
        return True

    def _replace(self, data: bytes) -> None:
        fs = self._fs
        temporary = self.path + ".tmp"
        with contextlib.suppress(FileNotFoundError):
            fs.unlink(temporary)  # left by a writer that died (we hold the lock)
        handle = fs.create_exclusive(temporary, 0o600)
        try:
            fs.write(handle, data)
        except BaseException:
            fs.close(handle)
            with contextlib.suppress(OSError):
                fs.unlink(temporary)
            raise
        fs.close(handle)
        fs.rename(temporary, self.path)
