"""An etcd owner: one Memory store on an etcd v3 cluster (3.4 or later).

The adapter speaks etcd's v3 JSON gateway (``/v3/...``) with the standard
library's ``http.client``: no driver to install, and every round trip passes
one place where the conformance kit's fault plan can sit.  ``docs/etcd.md``
says how to deploy it and what breaks it.

Keys (``P`` is the deployment's prefix, which holds no NUL byte, so the first
NUL of a key ends the prefix and deployments never overlap)::

    P \\0 meta              {"layout": 1}; written only by initialize_prefix()
    P \\0 r \\0 <id>        the record of one transaction id (JSON)
    P \\0 f \\0 <id>        the fence of one id: a key bound to a lease
    P \\0 a \\0 <sha256>    the census fence of one artifact: a key bound to a lease

Which promise (see :mod:`toolswap.owner`) rests on which etcd guarantee:

* **O1 (durable, visible).**  ``publish`` is one transaction: compare
  ``create_revision(record) == 0`` (and that no fence is held), then put.  etcd
  answers a write only after Raft committed it on a majority of members, each
  of which wrote it to its WAL with fsync (etcd's default; never run it with
  ``--unsafe-no-fsync``).  Every later read is linearizable (below), so the
  next fence on any member sees it.  A publish whose compare fails reads the
  record in the same transaction, at the same revision, and decides: same
  identity, a no-op; another, :class:`~toolswap.owner.OwnerConflictError`.
* **O2 (rejection means nothing written).**  The only rejection comes from an
  *answered* transaction whose compare failed because the record is a
  tombstone: etcd applies a transaction all or nothing, so nothing of it is
  pending.  Every other failure -- a refused or lost connection, a time-out,
  a gateway error, etcd's own "request timed out" (a proposal that may still
  commit) -- is :class:`~toolswap.errors.OwnerStoreError`: maybe written.  A
  write is never retried by the adapter; only a connection refused before
  anything was sent moves on to the next endpoint.
* **O3, O4 (tombstones).**  A tombstone is a value, never a deletion, so the
  record's ``create_revision`` stays non-zero and every later publish's
  compare fails, forever.  ``remove`` is one nested transaction: if no fence
  is held and the record is not already the tombstone, put the tombstone.
* **O5 (fence).**  ``inspect_fenced`` grants a lease, then creates the id's
  fence key bound to it (compare ``create_revision(fence) == 0``) and reads the
  record in the same transaction.  ``publish`` and ``remove`` compare that the
  fence key does not exist, so while it does they do not write: they wait
  (polling) and act afterwards on the state the block left.  A thread keeps
  the lease alive while the block is open; the block's end revokes it.  If
  the lease is lost (the holder stalled past the lease's TTL, or the handle
  was closed), etcd deletes the fence key.
* **O6 (seal).**  The seal is one transaction comparing both
  ``create_revision(fence) == <the revision that created this block's fence>``
  and ``mod_revision(record) == <observed generation>``: a lost lease means the
  seal fails and writes nothing (raised as "maybe sealed"), and a moved
  record means ``False``.  No write of a block lands without its fence.
* **Generation.**  The record's ``mod_revision``: the cluster's revision
  counter at its last write, which only grows and is never handed out twice
  (0 for a never-seen id).  Compaction does not matter: only current values
  are read, never history.
* **O7 (no secrets).**  Messages name the step and a reason from a fixed list
  (or etcd's own short ``etcdserver:`` text), never an endpoint.
* **O8 (authoritative reads).**  Every read is a range or transaction with
  ``serializable`` false: etcd serves it only after confirming with the
  current leader (ReadIndex), so a lagging or partitioned member answers with
  an error, never stale data.  An unreadable answer raises on entry.
* **O9 (census).**  ``census_fenced`` creates, under one lease and in one
  transaction, a census key per artifact (all or none) and reads every record
  at that revision; ``publish`` also compares that its artifact's census key
  does not exist.  The census never waits for an id's fence, nor a fence for
  a census, so the two never wait for each other in a circle.

Threads and processes: one object may be shared by threads; each thread uses
its own HTTP connections (kept alive), and a process never uses connections
inherited over ``fork()``.  :class:`EtcdHarness` puts it through the
conformance kit against the cluster named by ``TOOLSWAP_ETCD_ENDPOINTS``.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import http.client
import json
import math
import os
import re
import secrets
import select
import socket
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar

import attrs

from ..domain import ArtifactRetentionClaim, artifact_prefix
from ..errors import OwnerStoreError, UsageError
from ..journal_format import validate_transaction_id
from ..owner import (
    ArtifactPublicationRejected,
    ArtifactReferenceOwner,
    Census,
    ObservedState,
    OwnerConflictError,
    require_sealable,
)
from ..testing.faults import FaultPlan
from ..testing.harness import (
    Capability,
    HarnessError,
    OwnerHarness,
    RestartFromEnvironment,
    StoreFault,
)

__all__ = [
    "DEFAULT_PREFIX",
    "ENDPOINTS_ENV",
    "LAYOUT_VERSION",
    "RESTART_ENV",
    "EtcdHarness",
    "EtcdObservation",
    "EtcdOwner",
    "PrefixStatus",
    "initialize_prefix",
    "parse_endpoints",
]

DEFAULT_PREFIX = "toolswap"
LAYOUT_VERSION = 1
_PREFIX = re.compile(r"/?[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*/?")
_TOMBSTONE = b'{"kind":"tombstone"}'
# What a member answers while the cluster elects a leader: nothing was read.
_ELECTION = frozenset({"etcdserver: leader changed", "etcdserver: no leader"})
_MIN_TTL = 2  # etcd refuses a lease shorter than 1.5 election timeouts (1.5 s by default)


# -- errors without secrets -----------------------------------------------------


class _EtcdError(Exception):
    """An error answer of the gateway; ``reason`` is safe to show."""

    def __init__(self, reason: str, code: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code


class _Unreadable(Exception):
    """An answer the adapter cannot parse (torn, or not etcd's shape)."""


class _Unsent(OSError):
    """The request never left: every member refused it, or it timed out before sending."""


_SAFE_ETCD = re.compile(r"etcdserver: [a-z ,:]{1,80}")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, _EtcdError):
        return exc.reason
    if isinstance(exc, _Unreadable):
        return "the answer could not be read"
    if isinstance(exc, _Unsent):
        return _reason(exc.__cause__) if exc.__cause__ else "the request was not sent"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused; is the cluster running?"
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, ConnectionError | http.client.HTTPException):
        return "the connection was lost"
    if isinstance(exc, socket.gaierror):
        return "unknown host name"
    if isinstance(exc, OSError):
        return f"network error ({exc.strerror or type(exc).__name__})"
    return type(exc).__name__


@contextmanager
def _store_errors(doing: str) -> Iterator[None]:
    """A failed round trip becomes :class:`OwnerStoreError`: maybe done, no endpoint shown."""
    try:
        yield
    except (_EtcdError, _Unreadable, OSError, http.client.HTTPException) as exc:
        raise OwnerStoreError(f"etcd owner: {doing} failed ({_reason(exc)})") from exc


def _seconds(value: float, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise UsageError(f"{name} must be a positive number of seconds")
    if not math.isfinite(value):
        raise UsageError(f"{name} must be finite")
    return float(value)


def _check_prefix(prefix: str) -> str:
    if not isinstance(prefix, str) or len(prefix) > 200 or not _PREFIX.fullmatch(prefix):
        raise UsageError(
            "an etcd owner prefix is 1-200 of [A-Za-z0-9_.-], in segments joined by '/'"
        )
    return prefix


# -- endpoints -----------------------------------------------------------------


@attrs.frozen
class _Endpoint:
    host: str = attrs.field(repr=False)
    port: int = attrs.field(repr=False)


def parse_endpoints(endpoints: str | Sequence[str]) -> tuple[_Endpoint, ...]:
    """``http://host:port`` or ``host:port`` items, comma-separated or a sequence.

    Only plain HTTP is spoken (no TLS yet): a cluster on loopback or a private
    network.  A malformed item is a :class:`~toolswap.errors.UsageError` that
    does not repeat it.
    """
    items = endpoints.split(",") if isinstance(endpoints, str) else list(endpoints)
    found: list[_Endpoint] = []
    for raw in items:
        item = raw.strip()
        if not item:
            continue
        if "://" not in item:
            item = f"http://{item}"
        parts = urllib.parse.urlsplit(item)
        if parts.scheme != "http":
            raise UsageError("an etcd endpoint is http://host:port (TLS is not supported yet)")
        try:
            port = parts.port
        except ValueError:
            port = None
        if not parts.hostname or port is None or parts.path not in ("", "/"):
            raise UsageError("an etcd endpoint is host:port or http://host:port")
        found.append(_Endpoint(parts.hostname, port))
    if not found:
        raise UsageError("name at least one etcd endpoint (host:port)")
    return tuple(dict.fromkeys(found))


# -- the gateway ---------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: object) -> bytes:
    if not isinstance(text, str):
        raise _Unreadable("not base64 text")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise _Unreadable("bad base64") from exc


def _int(value: object) -> int:
    """etcd's JSON writes int64 as strings and leaves zero out."""
    if value is None:
        return 0
    if isinstance(value, bool):
        raise _Unreadable("a bool where a number belongs")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]{1,20}", value):
        return int(value)
    raise _Unreadable("not a number")


def _dropped(conn: http.client.HTTPConnection) -> bool:
    """A kept-alive connection the member has closed (it restarted, or timed it out)."""
    sock = conn.sock
    if sock is None:
        return True
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)  # an idle HTTP connection has nothing to read but EOF


class _Gateway:
    """Round trips to the cluster's JSON gateway, on per-thread kept-alive connections.

    A member that refuses the connection is skipped for the next; once a
    request may have been sent, a failure is raised (the caller cannot know
    whether it was applied).  Each round trip consults the fault plan first.
    """

    def __init__(
        self, endpoints: tuple[_Endpoint, ...], timeout: float, plan: FaultPlan | None
    ) -> None:
        self._endpoints = endpoints
        self._timeout = timeout
        self.plan = plan
        self._local = threading.local()
        self._preferred = 0
        self._guard = threading.Lock()
        self._all: list[http.client.HTTPConnection] = []

    def _connections(self) -> dict[int, http.client.HTTPConnection]:
        pid = os.getpid()
        if getattr(self._local, "pid", None) != pid:
            self._local.pid = pid
            self._local.conns = {}  # never a connection inherited over fork()
        conns: dict[int, http.client.HTTPConnection] = self._local.conns
        return conns

    def close(self) -> None:
        with self._guard:
            conns, self._all = self._all, []
        for conn in conns:
            with contextlib.suppress(Exception):
                conn.close()

    def _connected(self, index: int) -> http.client.HTTPConnection:
        conns = self._connections()
        conn = conns.get(index)
        if conn is not None and not _dropped(conn):
            return conn
        if conn is not None:
            conn.close()
        endpoint = self._endpoints[index]
        conn = http.client.HTTPConnection(endpoint.host, endpoint.port, timeout=self._timeout)
        try:
            conn.connect()
        except BaseException:
            conn.close()
            raise
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conns[index] = conn
        with self._guard:
            self._all.append(conn)
        return conn

    def _send(self, path: str, body: bytes) -> bytes:
        count = len(self._endpoints)
        start = self._preferred
        refused: OSError | None = None
        for step in range(count):
            index = (start + step) % count
            try:
                conn = self._connected(index)
            except (TimeoutError, ConnectionRefusedError, ConnectionResetError) as exc:
                refused = exc  # nothing was sent: the next member may answer
                continue
            self._preferred = index
            try:
                conn.request("POST", path, body, {"Content-Type": "application/json"})
                response = conn.getresponse()
                data = response.read()
            except BaseException:
                conn.close()
                self._connections().pop(index, None)
                raise
            if response.status != 200:
                raise _gateway_error(response.status, data)
            return data
        assert refused is not None
        raise _Unsent("no member took the request") from refused

    def call(
        self, path: str, request: Mapping[str, object], *, reads: bool, completes: bool
    ) -> dict[str, Any]:
        """One round trip; the answer's JSON object."""
        body = json.dumps(request, separators=(",", ":")).encode()
        step = self.plan.step(reads=reads, completes=completes) if self.plan else None
        if step is not None and step.fault is StoreFault.TIMEOUT:
            raise _Unsent("injected") from TimeoutError("injected: timed out before sending")
        if step is not None and step.fails:
            raise _Unsent("injected") from ConnectionRefusedError("injected: refused")
        data = self._send(path, body)
        if step is not None and step.lost_ack:
            raise ConnectionResetError("injected: the answer was lost")
        if step is not None and step.corrupt:
            data = b'{"header":\x00torn' + data[:7]
        try:
            answer = json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise _Unreadable("not JSON") from exc
        if not isinstance(answer, dict):
            raise _Unreadable("not an object")
        return answer


def _gateway_error(status: int, data: bytes) -> _EtcdError:
    message = ""
    code: int | None = None
    with contextlib.suppress(ValueError, UnicodeDecodeError):
        doc = json.loads(data)
        if isinstance(doc, dict):
            message = str(doc.get("message") or doc.get("error") or "")
            raw = doc.get("code")
            code = raw if isinstance(raw, int) and not isinstance(raw, bool) else None
    shown = _SAFE_ETCD.fullmatch(message)
    if shown:
        return _EtcdError(shown.group(0), code)
    suffix = f", gRPC code {code}" if code is not None else ""
    return _EtcdError(f"the member answered HTTP {status}{suffix}", code)


# -- requests ---------------------------------------------------------------------


def _created(key: bytes, revision: int) -> dict[str, object]:
    return {"key": _b64(key), "target": "CREATE", "result": "EQUAL", "create_revision": revision}


def _modified(key: bytes, revision: int) -> dict[str, object]:
    return {"key": _b64(key), "target": "MOD", "result": "EQUAL", "mod_revision": revision}


def _put(key: bytes, value: bytes, lease: int = 0) -> dict[str, object]:
    put: dict[str, object] = {"key": _b64(key), "value": _b64(value)}
    if lease:
        put["lease"] = lease
    return {"request_put": put}


def _range(key: bytes, range_end: bytes | None = None) -> dict[str, object]:
    request: dict[str, object] = {"key": _b64(key)}
    if range_end is not None:
        request["range_end"] = _b64(range_end)
    return {"request_range": request}


@attrs.frozen
class _Kv:
    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int


def _kvs(response: object) -> list[_Kv]:
    """The key-values of one ``response_range`` of a transaction."""
    if not isinstance(response, dict) or not isinstance(response.get("response_range"), dict):
        raise _Unreadable("not a range response")
    raw = response["response_range"].get("kvs") or []
    if not isinstance(raw, list):
        raise _Unreadable("kvs is not a list")
    found: list[_Kv] = []
    for item in raw:
        if not isinstance(item, dict):
            raise _Unreadable("a kv is not an object")
        found.append(
            _Kv(
                key=_unb64(item.get("key", "")),
                value=_unb64(item.get("value", "")),
                create_revision=_int(item.get("create_revision")),
                mod_revision=_int(item.get("mod_revision")),
                version=_int(item.get("version")),
                lease=_int(item.get("lease")),
            )
        )
    return found


def _one(response: object) -> _Kv | None:
    kvs = _kvs(response)
    if len(kvs) > 1:
        raise _Unreadable("one key read as several")
    return kvs[0] if kvs else None


@attrs.frozen
class _Txn:
    succeeded: bool
    revision: int
    responses: list[object]


@attrs.frozen
class _Record:
    """What the record of one id holds."""

    tombstone: bool
    source_id: str | None
    content_sha256: str | None
    generation: int


def _record(kv: _Kv | None) -> _Record | None:
    if kv is None:
        return None
    try:
        doc = json.loads(kv.value)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _Unreadable("a record is not JSON") from exc
    if not isinstance(doc, dict) or kv.mod_revision < 1:
        raise _Unreadable("a record is not an object")
    kind = doc.get("kind")
    if kind == "tombstone":
        return _Record(True, None, None, kv.mod_revision)
    source_id, digest = doc.get("source_id"), doc.get("content_sha256")
    if kind != "published" or not isinstance(source_id, str) or not isinstance(digest, str):
        raise _Unreadable("a record of an unknown kind")
    return _Record(False, source_id, digest, kv.mod_revision)


# -- the layout ----------------------------------------------------------------


@attrs.frozen(kw_only=True)
class PrefixStatus:
    """What :func:`initialize_prefix` found and left: layout versions (0 = none)."""

    prefix: str
    previous_version: int
    version: int

    @property
    def created(self) -> bool:
        return self.previous_version < self.version


def initialize_prefix(
    endpoints: str | Sequence[str], *, prefix: str = DEFAULT_PREFIX, request_timeout: float = 10.0
) -> PrefixStatus:
    """Mark the prefix as an owner store (``toolswap owner init``); idempotent and safe
    to run concurrently (the marker is created by a compare-and-set)."""
    with EtcdOwner(endpoints, prefix=prefix, create=True, request_timeout=request_timeout) as owner:
        status = owner.prefix_status
    assert status is not None
    return status


# -- the owner -------------------------------------------------------------------


class _Fence:
    """One fenced block: its lease, the revision that created its key, whether it is open."""

    __slots__ = ("lease", "open", "revision", "stop")

    def __init__(self, lease: int) -> None:
        self.lease = lease
        self.revision = 0
        self.open = True
        self.stop = threading.Event()


@attrs.frozen(kw_only=True)
class EtcdObservation:
    """An observation of :class:`EtcdOwner`, valid inside its fence only."""

    transaction_id: str
    state: ObservedState
    source_id: str | None
    content_sha256: str | None
    generation: int
    sealed: bool
    _owner: EtcdOwner = attrs.field(repr=False, eq=False, alias="owner")
    _fence: _Fence = attrs.field(repr=False, eq=False, alias="fence")

    def seal_absence(self) -> bool:
        require_sealable(self)
        if not self._fence.open:
            raise UsageError("seal_absence is allowed only inside its inspect_fenced block")
        return self._owner._seal(self.transaction_id, self.generation, self._fence)


class EtcdOwner:
    """A durable owner under one key prefix of an etcd cluster; safe across threads,
    processes and hosts (the module docstring maps each promise to etcd)."""

    def __init__(
        self,
        endpoints: str | Sequence[str],
        *,
        prefix: str = DEFAULT_PREFIX,
        create: bool = False,
        request_timeout: float = 10.0,
        lock_timeout: float = 20.0,
        lease_ttl: int = 10,
        fault_plan: FaultPlan | None = None,
    ) -> None:
        """Reach the cluster and check the prefix's marker.

        ``create=True`` writes the marker first (what :func:`initialize_prefix`
        does); otherwise a prefix without one is a :class:`~toolswap.errors.UsageError`,
        never an empty store.  ``lock_timeout`` bounds how long a call waits
        behind another caller's fence; ``lease_ttl`` (seconds) is how long a
        fence outlives a holder that stopped renewing it.  ``fault_plan`` is a
        seam for tests: every round trip consults it.
        """
        self._prefix = _check_prefix(prefix)
        if isinstance(lease_ttl, bool) or not isinstance(lease_ttl, int) or lease_ttl < _MIN_TTL:
            raise UsageError(f"lease_ttl must be a whole number of seconds, at least {_MIN_TTL}")
        self._ttl = lease_ttl
        self._lock_timeout = _seconds(lock_timeout, "lock_timeout")
        self._gateway = _Gateway(
            parse_endpoints(endpoints), _seconds(request_timeout, "request_timeout"), fault_plan
        )
        self._fences: set[_Fence] = set()
        self._guard = threading.Lock()
        self._closed = False
        self.prefix_status: PrefixStatus | None = None
        base = self._prefix.encode()
        self._meta = base + b"\0meta"
        self._records = base + b"\0r\0"
        try:
            version = self._open(create)
        except BaseException:
            self.close()
            raise
        if version != LAYOUT_VERSION:
            self.close()
            if version == 0:
                raise UsageError(
                    "the etcd owner prefix is not initialized "
                    "(run `toolswap owner init` with the same owner spec)"
                )
            raise UsageError(
                f"the etcd owner prefix is at layout version {version}, this toolswap "
                f"needs {LAYOUT_VERSION} (upgrade toolswap)"
            )

    def _open(self, create: bool) -> int:
        doing = "opening the owner prefix"
        marker = json.dumps({"layout": LAYOUT_VERSION}).encode()
        with _store_errors(doing):
            if create:
                answer = self._txn(
                    doing,
                    [_created(self._meta, 0)],
                    [_put(self._meta, marker)],
                    [_range(self._meta)],
                )
                found = None if answer.succeeded else _one(answer.responses[0])
            else:
                found = _one(
                    {
                        "response_range": self._call(
                            "/v3/kv/range", {"key": _b64(self._meta)}, reads=True
                        )
                    }
                )
        version = 0 if found is None else _layout(found.value)
        if create:
            self.prefix_status = PrefixStatus(
                prefix=self._prefix, previous_version=version, version=version or LAYOUT_VERSION
            )
            return version or LAYOUT_VERSION
        return version

    def __repr__(self) -> str:  # never an endpoint
        return f"EtcdOwner(prefix={self._prefix!r})"

    @property
    def prefix(self) -> str:
        return self._prefix

    def close(self) -> None:
        """Give up every fence still open (their leases are revoked) and close connections."""
        with self._guard:
            self._closed = True
            fences, self._fences = list(self._fences), set()
        for fence in fences:
            fence.stop.set()
            self._revoke(fence.lease, consult=False)
        self._gateway.close()

    def __enter__(self) -> EtcdOwner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- round trips ----------------------------------------------------------------

    def _call(self, path: str, request: Mapping[str, object], *, reads: bool) -> dict[str, Any]:
        """One round trip; a plain read refused during an election is asked again.

        Only reads: they change nothing, so asking twice is harmless.  A write
        refused the same way may still be applied, so it is never repeated.
        """
        if self._closed:
            raise UsageError("the etcd owner is closed")
        for pause in (0.1, 0.3, 1.0):
            try:
                return self._gateway.call(path, request, reads=reads, completes=not reads)
            except _EtcdError as exc:
                if not reads or exc.reason not in _ELECTION:
                    raise
            time.sleep(pause)
        return self._gateway.call(path, request, reads=reads, completes=not reads)

    def _txn(
        self,
        doing: str,
        compare: list[dict[str, object]],
        success: list[dict[str, object]],
        failure: list[dict[str, object]],
    ) -> _Txn:
        del doing  # the caller's _store_errors names the step; tests pick a call by it
        if self._closed:
            raise UsageError("the etcd owner is closed")
        reads = any("request_range" in op for op in success + failure)
        answer = self._gateway.call(
            "/v3/kv/txn",
            {"compare": compare, "success": success, "failure": failure},
            reads=reads,
            completes=True,
        )
        header = answer.get("header")
        responses = answer.get("responses") or []
        if not isinstance(header, dict) or not isinstance(responses, list):
            raise _Unreadable("not a transaction answer")
        succeeded = answer.get("succeeded", False)
        if not isinstance(succeeded, bool):
            raise _Unreadable("succeeded is not a bool")
        expected = len(success) if succeeded else len(failure)
        if len(responses) != expected:
            raise _Unreadable("a transaction answered the wrong number of operations")
        return _Txn(succeeded, _int(header.get("revision")), responses)

    def _wait(self, doing: str, attempt: Callable[[], _Txn | None]) -> _Txn:
        """Repeat ``attempt`` while a fence holds it back (it returns ``None``)."""
        deadline = time.monotonic() + self._lock_timeout
        pause = 0.002
        while True:
            with _store_errors(doing):
                done = attempt()
            if done is not None:
                return done
            if time.monotonic() > deadline:
                raise OwnerStoreError(f"etcd owner: {doing} failed (timed out behind a fence)")
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    def _grant(self, doing: str) -> int:
        lease = secrets.randbits(62) + 1  # chosen here, so a lost answer can still be revoked
        try:
            with _store_errors(f"{doing}: granting a lease"):
                answer = self._call("/v3/lease/grant", {"ID": lease, "TTL": self._ttl}, reads=False)
                if _int(answer.get("ID")) != lease or _int(answer.get("TTL")) < 1:
                    raise _Unreadable("not a lease")
        except BaseException:
            self._revoke(lease, consult=False)
            raise
        return lease

    def _revoke(self, lease: int, *, consult: bool = True) -> None:
        """Best effort: a lease that cannot be revoked expires after its TTL anyway."""
        for _ in range(2):
            try:
                if consult and not self._closed:
                    self._gateway.call(
                        "/v3/lease/revoke", {"ID": lease}, reads=False, completes=True
                    )
                else:
                    gateway = _Gateway(self._gateway._endpoints, 5.0, None)
                    try:
                        gateway.call("/v3/lease/revoke", {"ID": lease}, reads=False, completes=True)
                    finally:
                        gateway.close()
                return
            except _EtcdError as exc:
                if exc.code == 5:  # NotFound: already revoked or expired
                    return
            except Exception:
                continue

    def _keep_alive(self, fence: _Fence) -> None:
        """Renew the fence's lease until the block ends, or until etcd says it is gone
        (then so is the fence key, and the block's seal will fail its compare)."""
        gateway = _Gateway(self._gateway._endpoints, max(1.0, self._ttl / 3), None)
        try:
            while not fence.stop.wait(self._ttl / 3):
                try:
                    answer = gateway.call(
                        "/v3/lease/keepalive", {"ID": fence.lease}, reads=False, completes=False
                    )
                except Exception:
                    continue  # the next renewal may reach a member; the lease is not gone yet
                result = answer.get("result")
                if not isinstance(result, dict) or _int(result.get("TTL")) <= 0:
                    return
        finally:
            gateway.close()

    # -- keys ------------------------------------------------------------------

    def _record_key(self, txn: str) -> bytes:
        return self._records + txn.encode("utf-8", "surrogatepass")

    def _fence_key(self, txn: str) -> bytes:
        return self._prefix.encode() + b"\0f\0" + txn.encode("utf-8", "surrogatepass")

    def _artifact_key(self, prefix: str) -> bytes:
        digest = hashlib.sha256(prefix.encode("utf-8", "surrogatepass")).hexdigest()
        return self._prefix.encode() + b"\0a\0" + digest.encode()

    # -- the owner protocol ----------------------------------------------------------

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        txn = validate_transaction_id(transaction_id)
        record, fence = self._record_key(txn), self._fence_key(txn)
        census = self._artifact_key(artifact_prefix(claim.source_id))
        value = json.dumps(
            {
                "kind": "published",
                "source_id": claim.source_id,
                "content_sha256": claim.content_sha256,
                "reference_count": claim.reference_count,
            },
            separators=(",", ":"),
        ).encode()
        doing = "publishing a reference"

        def attempt() -> _Txn | None:
            answer = self._txn(
                doing,
                [_created(fence, 0), _created(census, 0), _created(record, 0)],
                [_put(record, value)],
                [_range(record), _range(fence), _range(census)],
            )
            if not answer.succeeded and (_one(answer.responses[1]) or _one(answer.responses[2])):
                return None  # a fence or a census holds the id back
            return answer

        try:
            answer = self._wait(doing, attempt)
        except OwnerStoreError as exc:
            if exc.__cause__ is not None and not isinstance(exc.__cause__, _Unsent):
                self._refuse_if_settled(txn, record, claim)
            raise
        if answer.succeeded:
            return
        with _store_errors(doing):
            held = _one(answer.responses[0])
        if held is None:  # the compare failed, so the record existed at that revision
            raise OwnerStoreError(f"etcd owner: {doing} failed (the answer could not be read)")
        self._decide(txn, held, claim)

    def _decide(self, txn: str, held: _Kv, claim: ArtifactRetentionClaim) -> None:
        """An existing record settles a publish that wrote nothing: no-op, rejection or conflict."""
        with _store_errors("publishing a reference"):
            found = _record(held)
        assert found is not None
        if found.tombstone:
            raise ArtifactPublicationRejected(f"transaction {txn!r} is tombstoned")
        if (found.source_id, found.content_sha256) != (claim.source_id, claim.content_sha256):
            raise OwnerConflictError(f"transaction {txn!r} holds another reference")

    def _refuse_if_settled(self, txn: str, record: bytes, claim: ArtifactRetentionClaim) -> None:
        """After a publish whose answer was lost: raise a certain answer if the record has one.

        Our transaction writes only a key that was never created, so a record
        that holds another identity, or a tombstone written as the key's first
        version, means it wrote nothing and never will (its compare fails
        whenever it is applied): a conflict or a rejection, as if answered.
        Anything else -- our own identity (perhaps ours), no record yet (ours
        may still land), a tombstone over a reference (perhaps ours), a failed
        read -- returns, and the caller raises "maybe written".
        """
        try:
            with _store_errors("publishing a reference: reading back"):
                answer = self._call("/v3/kv/range", {"key": _b64(record)}, reads=True)
                held = _one({"response_range": answer})
                found = _record(held)
        except OwnerStoreError:
            return
        if held is None or found is None or (found.tombstone and held.version != 1):
            return
        if (found.source_id, found.content_sha256) != (claim.source_id, claim.content_sha256):
            self._decide(txn, held, claim)

    def remove(self, transaction_id: str) -> None:
        txn = validate_transaction_id(transaction_id)
        record, fence = self._record_key(txn), self._fence_key(txn)
        doing = "removing a reference"
        already = {
            "key": _b64(record),
            "target": "VALUE",
            "result": "EQUAL",
            "value": _b64(_TOMBSTONE),
        }
        # Inner transaction: a record that is already the tombstone is left alone (its
        # generation stays); a missing key fails a VALUE compare, so it gets one too.
        tombstone: dict[str, object] = {
            "request_txn": {
                "compare": [already],
                "success": [],
                "failure": [_put(record, _TOMBSTONE)],
            }
        }

        def attempt() -> _Txn | None:
            answer = self._txn(doing, [_created(fence, 0)], [tombstone], [_range(fence)])
            return answer if answer.succeeded else None

        answer = self._wait(doing, attempt)
        inner = answer.responses[0]
        if not isinstance(inner, dict) or not isinstance(inner.get("response_txn"), dict):
            raise OwnerStoreError(f"etcd owner: {doing} failed (the answer could not be read)")

    @contextmanager
    def inspect_fenced(self, transaction_id: str) -> Iterator[EtcdObservation]:
        """The fence is the id's lease-bound fence key, created with the read in one
        transaction; the block's end revokes the lease, which deletes the key."""
        txn = validate_transaction_id(transaction_id)
        record, key = self._record_key(txn), self._fence_key(txn)
        with self._fenced("taking the fence", [key], [_range(record)]) as (fence, answer):
            with _store_errors("inspecting a reference"):
                held = _record(_one(answer.responses[-1]))
            if held is None or held.tombstone:
                state, source_id, digest = ObservedState.ABSENT, None, None
            else:
                state, source_id, digest = (
                    ObservedState.PUBLISHED,
                    held.source_id,
                    held.content_sha256,
                )
            yield EtcdObservation(
                transaction_id=txn,
                state=state,
                source_id=source_id,
                content_sha256=digest,
                generation=0 if held is None else held.generation,
                sealed=held is not None and held.tombstone,
                owner=self,
                fence=fence,
            )

    @contextmanager
    def census_fenced(self, source_ids: Sequence[str]) -> Iterator[Census]:
        """O9: one census key per artifact under one lease, created with the read."""
        prefixes = {source_id: artifact_prefix(source_id) for source_id in source_ids}
        keys = sorted({self._artifact_key(p) for p in prefixes.values()})
        scan = _range(self._records, self._records[:-1] + b"\x01")
        with self._fenced("taking the census fence", keys, [scan]) as (_, answer):
            found: dict[str, list[str]] = {source_id: [] for source_id in prefixes}
            with _store_errors("counting references"):
                for kv in _kvs(answer.responses[-1]):
                    held = _record(kv)
                    if not kv.key.startswith(self._records):
                        raise _Unreadable("a key outside the records")
                    if held is None or held.tombstone or held.source_id is None:
                        continue
                    txn = kv.key[len(self._records) :].decode("utf-8", "surrogatepass")
                    for source_id, prefix in prefixes.items():
                        if held.source_id.startswith(prefix):
                            found[source_id].append(txn)
            yield {source_id: tuple(sorted(txns)) for source_id, txns in found.items()}

    @contextmanager
    def _fenced(
        self, doing: str, keys: list[bytes], reads: list[dict[str, object]]
    ) -> Iterator[tuple[_Fence, _Txn]]:
        """Create every key under a new lease and read ``reads`` in one transaction."""
        lease = self._grant(doing)
        fence = _Fence(lease)
        # Renewed from now on: waiting behind another fence may outlast the TTL.
        keeper = threading.Thread(target=self._keep_alive, args=(fence,), daemon=True)
        with self._guard:
            self._fences.add(fence)
        keeper.start()

        def attempt() -> _Txn | None:
            answer = self._txn(
                doing,
                [_created(key, 0) for key in keys],
                [*(_put(key, b"", lease) for key in keys), *reads],
                [],
            )
            return answer if answer.succeeded else None

        try:
            answer = self._wait(doing, attempt)
            fence.revision = answer.revision
            yield fence, answer
        finally:
            fence.open = False
            fence.stop.set()
            with self._guard:
                self._fences.discard(fence)
            self._revoke(lease)  # also when entering failed: a lost answer may have made keys

    def _seal(self, txn: str, generation: int, fence: _Fence) -> bool:
        """O6: compare this block's fence key and the observed generation, then tombstone."""
        record, key = self._record_key(txn), self._fence_key(txn)
        doing = "sealing an absence"
        with _store_errors(doing):
            answer = self._txn(
                doing,
                [_created(key, fence.revision), _modified(record, generation)],
                [_put(record, _TOMBSTONE)],
                [_range(record)],
            )
            if answer.succeeded:
                return True
            held = _one(answer.responses[0])
        if (0 if held is None else held.mod_revision) != generation:
            return False
        raise OwnerStoreError(
            f"etcd owner: {doing} failed (the fence's lease was lost; nothing was sealed)"
        )

    def generation(self, transaction_id: str) -> int:
        """The current generation of an id (0 if never seen); for tests and audits."""
        txn = validate_transaction_id(transaction_id)
        with _store_errors("reading a generation"):
            answer = self._call("/v3/kv/range", {"key": _b64(self._record_key(txn))}, reads=True)
            held = _one({"response_range": answer})
        return 0 if held is None else held.mod_revision


def _layout(value: bytes) -> int:
    try:
        doc = json.loads(value)
    except (ValueError, UnicodeDecodeError):
        doc = None
    layout = doc.get("layout") if isinstance(doc, dict) else None
    if isinstance(layout, bool) or not isinstance(layout, int) or layout < 1:
        raise UsageError("the etcd owner prefix holds a marker this toolswap cannot read")
    return layout


# -- the conformance-kit harness -------------------------------------------------

ENDPOINTS_ENV = "TOOLSWAP_ETCD_ENDPOINTS"
RESTART_ENV = "TOOLSWAP_ETCD_RESTART"

_NO_POWER_LOSS = (
    "the cluster named by TOOLSWAP_ETCD_ENDPOINTS keeps its data directories where the "
    "kit cannot cut their power; its members are crash-restarted instead (restart)"
)


class EtcdHarness(OwnerHarness):
    """The conformance-kit harness of :class:`EtcdOwner` on a real cluster.

    The cluster is the one ``TOOLSWAP_ETCD_ENDPOINTS`` names.  Each harness
    gets its own prefix, named from a hash of its work folder (so a child
    process with the same folder reaches the same store), initialized on
    construction and deleted by :meth:`destroy`.  A restart runs the shell
    command in ``TOOLSWAP_ETCD_RESTART`` (``.ci/etcd-cluster restart DIR``:
    every member killed, then started); without it RESTART is unsupported.
    Every round trip of a handle consults its fault plan: ``fail`` and
    ``timeout`` never send the request, ``lost_ack`` sends it and loses the
    answer, ``corrupt_read`` tears the answer, ``delay`` makes it late.
    Fences use 5 s leases, so a fence whose holder was killed is gone 5 s later.
    """

    unsupported: ClassVar[Mapping[Capability, str]] = RestartFromEnvironment(
        {Capability.POWER_LOSS: _NO_POWER_LOSS},
        RESTART_ENV,
        "crash-restarts the cluster (e.g. `.ci/etcd-cluster restart DIR`)",
    )
    slow_restart: ClassVar[bool] = True  # a cluster restart takes about a second
    shared_handles: ClassVar[bool] = True  # the adapter's docstring: one object, many threads
    owner_class: ClassVar[type[EtcdOwner]] = EtcdOwner
    """The adapter class to open (a subclass of :class:`EtcdOwner` may be put here)."""

    lease_ttl: ClassVar[int] = 5

    def __init__(self, workdir: str) -> None:
        super().__init__(workdir)
        endpoints = os.environ.get(ENDPOINTS_ENV, "").strip()
        if not endpoints:
            raise HarnessError(
                f"set {ENDPOINTS_ENV} to the cluster's endpoints (e.g. what "
                "`.ci/etcd-cluster start` prints) to run the etcd harness"
            )
        self.endpoints = endpoints
        digest = hashlib.sha256(os.path.realpath(self.workdir).encode()).hexdigest()
        self.prefix = f"toolswap-kit/{digest[:20]}"
        self._plans: dict[int, FaultPlan] = {}
        self._waiting_out_restarts(lambda: initialize_prefix(self.endpoints, prefix=self.prefix))

    def _waiting_out_restarts(self, step: Callable[[], object]) -> None:
        """Run ``step``; while the cluster cannot answer (someone restarts it), retry."""
        deadline = time.monotonic() + 30.0
        while True:
            try:
                step()
                return
            except OwnerStoreError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.2)

    def open_owner(self) -> EtcdOwner:
        plan = FaultPlan()
        owner = self.owner_class(
            self.endpoints,
            prefix=self.prefix,
            request_timeout=30.0,
            lock_timeout=60.0,
            lease_ttl=self.lease_ttl,
            fault_plan=plan,
        )
        self._plans[id(owner)] = plan
        return owner

    def close_owner(self, owner: ArtifactReferenceOwner) -> None:
        self._plans.pop(id(owner), None)
        super().close_owner(owner)

    def fault_plan(self, owner: ArtifactReferenceOwner) -> FaultPlan:
        return self._plans[id(owner)]

    def inject_fault(self, owner: ArtifactReferenceOwner, fault: StoreFault) -> None:
        self._plans[id(owner)].arm(fault)

    def restart_store(self) -> None:
        command = os.environ.get(RESTART_ENV, "").strip()
        if not command:
            raise HarnessError(f"{RESTART_ENV} is not set: cannot restart the cluster")
        done = subprocess.run(
            command,
            shell=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=180,
            check=False,
        )
        if done.returncode != 0:
            raise HarnessError(f"the restart command failed (exit status {done.returncode})")

    def advance_clock(self, seconds: float) -> None:
        """Nothing to do: no record carries a lease, and the adapter reads no clock.

        The only leased keys are fences, renewed by their holders while the block
        is open; a fence that lapses is lost, which fails the block's writes.
        """

    def secrets(self) -> Sequence[str]:
        found = [self.endpoints]
        for endpoint in parse_endpoints(self.endpoints):
            found.append(f"{endpoint.host}:{endpoint.port}")
        return tuple(dict.fromkeys(found))

    def destroy(self) -> None:
        start = self.prefix.encode()
        end = start[:-1] + bytes([start[-1] + 1])

        def drop() -> None:
            gateway = _Gateway(parse_endpoints(self.endpoints), 30.0, None)
            try:
                with _store_errors("deleting the prefix"):
                    gateway.call(
                        "/v3/kv/deleterange",
                        {"key": _b64(start), "range_end": _b64(end)},
                        reads=False,
                        completes=True,
                    )
            finally:
                gateway.close()

        self._waiting_out_restarts(drop)
