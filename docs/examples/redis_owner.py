# file: redis_owner.py
"""An owner in Redis: one hash per transaction id, and a lock key per id as the fence.

Each change is one Lua script, atomic on the server; its generation comes from one
counter (INCR), never reused while the counter is durable.  A lock is held by a
connection: its value is the connection's name, and a caller may take over a lock
whose holder is no longer connected (killed, closed, or the server restarted).  A
handle whose connection fails starts a new one under a new name, so it never holds
a lock it cannot vouch for.  Every script checks that its caller still holds the
lock, and the seal compares generations too, so a lost lock never writes.
Durability is the server's: with `appendfsync always`, Redis fsyncs a write before
it answers.
"""

import contextlib
import time
import uuid

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from toolswap.errors import OwnerStoreError, UsageError
from toolswap.owner import (
    ArtifactPublicationRejected,
    ObservedState,
    OwnerConflictError,
    require_sealable,
)


def guarded(body):
    """A Lua script that first checks that its caller still holds the id's lock."""
    return "if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 'lost' end\n" + body


PUBLISH = guarded("""
local kind = redis.call('HGET', KEYS[1], 'kind')
if kind == 'tombstone' then return 'rejected' end
if kind then
  local held = redis.call('HMGET', KEYS[1], 'source_id', 'sha')
  if held[1] == ARGV[2] and held[2] == ARGV[3] then return 'ok' end
  return 'conflict'
end
local generation = redis.call('INCR', KEYS[3])
redis.call('HSET', KEYS[1], 'kind', 'published', 'source_id', ARGV[2], 'sha', ARGV[3],
           'generation', generation)
return 'ok'
""")
REMOVE = guarded("""
if redis.call('HGET', KEYS[1], 'kind') == 'tombstone' then return 'ok' end
local generation = redis.call('INCR', KEYS[3])
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'kind', 'tombstone', 'generation', generation)
return 'ok'
""")
SEAL = guarded("""
if (redis.call('HGET', KEYS[1], 'generation') or '0') ~= ARGV[2] then return 'moved' end
redis.call('HSET', KEYS[1], 'kind', 'tombstone', 'generation', redis.call('INCR', KEYS[3]))
return 'ok'
""")
TAKE_OVER = """
if redis.call('GET', KEYS[1]) ~= ARGV[2] then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
return 1
"""
UNLOCK = "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end"


class RedisOwner:
    """One handle: one connection at a time, used by one thread at a time."""

    def __init__(self, socket_path, prefix="toolswap:", timeout=2.0):
        self.socket_path, self.prefix, self.timeout = socket_path, prefix.encode(), timeout
        self.client = None
        self._connect()

    def _connect(self):
        if self.client is not None:
            self.client.close()  # the server drops it, and the locks it held go stale
        self.name = f"toolswap-owner-{uuid.uuid4().hex}"
        self.client = redis.Redis(
            unix_socket_path=self.socket_path,
            socket_timeout=self.timeout,
            retry=Retry(NoBackoff(), 0),  # a retried write could be applied twice
            single_connection_client=True,
            client_name=self.name,
        )

    @contextlib.contextmanager
    def _errors(self, doing):
        try:
            yield
        except redis.RedisError as exc:  # its text names the socket: keep the type (O7)
            self._connect()
            raise OwnerStoreError(f"redis owner: {doing} failed ({type(exc).__name__})") from exc

    def _keys(self, transaction_id):
        txn = transaction_id.encode()
        return [self.prefix + b"ref:" + txn, self.prefix + b"lock:" + txn, self.prefix + b"gen"]

    # The store calls (a fault-injecting harness overrides this): one round trip each.
    def _call(self, *command, reads=False, completes=False):
        return self.client.execute_command(*command)

    def _script(self, script, keys, *args, completes=False):
        return self._call("EVAL", script, len(keys), *keys, *args, completes=completes)

    def _lock(self, lock):
        deadline = time.monotonic() + self.timeout
        while not self._call("SET", lock, self.name, "NX"):
            holder = self._call("GET", lock)
            alive = {c["name"] for c in self.client.client_list()}
            if holder is not None and holder.decode() not in alive:
                if self._script(TAKE_OVER, [lock], self.name, holder):
                    return  # its holder is gone: the lock is ours now
            elif time.monotonic() > deadline:
                raise OwnerStoreError("redis owner: the id stayed locked too long")
            else:
                time.sleep(0.005)

    @contextlib.contextmanager
    def _locked(self, transaction_id, doing):
        keys = self._keys(transaction_id)
        holder = self.name  # the lock's value, even once a failure replaced the connection
        try:
            with self._errors(doing):
                self._lock(keys[1])
            yield keys, holder
        finally:  # also when taking the lock failed: its answer may be what was lost
            with self._errors(doing):
                self._script(UNLOCK, keys[1:2], holder, completes=True)

    def _changed(self, answer, doing):
        if answer == b"lost":
            raise OwnerStoreError(f"redis owner: {doing} failed (the lock was lost)")
        return answer

    def publish(self, transaction_id, claim):
        locked = self._locked(transaction_id, "publishing")
        with locked as (keys, holder), self._errors("publishing"):
            args = (holder, claim.source_id, claim.content_sha256)
            answer = self._changed(self._script(PUBLISH, keys, *args), "publishing")
        if answer == b"rejected":
            raise ArtifactPublicationRejected(f"{transaction_id!r} is tombstoned")
        if answer == b"conflict":
            raise OwnerConflictError(f"{transaction_id!r} holds another reference")

    def remove(self, transaction_id):
        locked = self._locked(transaction_id, "removing")
        with locked as (keys, holder), self._errors("removing"):
            self._changed(self._script(REMOVE, keys, holder), "removing")

    @contextlib.contextmanager
    def inspect_fenced(self, transaction_id):
        with self._locked(transaction_id, "fencing") as (keys, holder):
            with self._errors("fencing"):
                record = read_record(self._call("HGETALL", keys[0], reads=True))
            seen = RedisObservation(transaction_id, *record)
            seen.owner, seen.keys, seen.holder = self, keys, holder
            try:
                yield seen
            finally:
                seen.holder = None  # the block is over: no more seals

    def close(self):
        self.client.close()  # a fence still open loses its lock, and its seal refuses


def read_record(raw):
    """(kind, source id, digest, generation) of a hash only the scripts above wrote."""
    try:
        fields = {key.decode(): value.decode() for key, value in raw.items()}
        kind, generation = fields.get("kind"), int(fields.get("generation", "0"))
    except (AttributeError, UnicodeDecodeError, ValueError) as exc:
        raise OwnerStoreError("redis owner: fencing failed (an unreadable record)") from exc
    if kind not in (None, "published", "tombstone") or (kind is None) != (generation == 0):
        raise OwnerStoreError("redis owner: fencing failed (an unreadable record)")
    return kind, fields.get("source_id"), fields.get("sha"), generation


class RedisObservation:
    def __init__(self, transaction_id, kind, source_id, sha, generation):
        self.transaction_id, self.source_id, self.content_sha256 = transaction_id, source_id, sha
        self.state = ObservedState.PUBLISHED if kind == "published" else ObservedState.ABSENT
        self.generation, self.sealed = generation, kind == "tombstone"

    def seal_absence(self):
        require_sealable(self)
        if self.holder is None:
            raise UsageError("seal_absence is allowed only inside its inspect_fenced block")
        owner = self.owner
        with owner._errors("sealing"):  # a compare-and-set, although the lock is held
            answer = owner._script(SEAL, self.keys, self.holder, self.generation)
        return owner._changed(answer, "sealing") == b"ok"
