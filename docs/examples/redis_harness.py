# file: redis_harness.py
"""The conformance harness of redis_owner: a redis-server of its own for each work folder.

The server keeps its append-only file in the work folder and listens on a Unix socket
only, in a folder named after the work folder, so a harness built on the same folder
in another process reaches the same server.  The first handle starts the server; the
kit destroys the harness, which stops it, whichever process started it.  A restart is
a crash: SIGKILL, then a start that replays the append-only file.
"""

import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
import time

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from redis_owner import RedisOwner

from toolswap.testing import OwnerHarness, StoreFault
from toolswap.testing.faults import FaultPlan

TORN = {b"kind": b"\xff torn"}  # a record no script writes
NO_RETRY = Retry(NoBackoff(), 0)  # a server that is not up yet answers at once


class FaultyRedisOwner(RedisOwner):
    """The adapter unchanged, with the kit's fault plan under its round trips."""

    def __init__(self, socket_path):
        super().__init__(socket_path)
        self.plan = FaultPlan()

    def _call(self, *command, reads=False, completes=False):
        step = self.plan.step(reads=reads, completes=completes)  # sleeps for a DELAY
        if step.fault is StoreFault.TIMEOUT and step.fails:
            raise redis.TimeoutError("injected timeout")
        if step.fails:
            raise redis.ConnectionError("injected failure")
        result = super()._call(*command, reads=reads, completes=completes)
        if step.lost_ack:
            raise redis.ConnectionError("injected lost_ack")
        return TORN if step.corrupt else result


class RedisHarness(OwnerHarness):
    appendfsync = "always"  # Redis's default, everysec, answers before the fsync
    store_timeout = 2.0  # RedisOwner's socket and lock time-out

    def __init__(self, workdir):
        super().__init__(workdir)
        name = hashlib.sha256(os.path.realpath(workdir).encode()).hexdigest()[:16]
        self.sockets = os.path.join(tempfile.gettempdir(), f"redis-owner-{name}")
        self.socket = os.path.join(self.sockets, "redis.sock")
        self.server = None  # the process, when this instance started it

    def _pid(self):
        """The pid of the server on this folder, whichever process started it (None: down)."""
        client = redis.Redis(unix_socket_path=self.socket, socket_timeout=1, retry=NO_RETRY)
        try:
            return client.info("server")["process_id"]
        except redis.RedisError:
            return None
        finally:
            client.close()

    def _start(self):
        os.makedirs(self.sockets, mode=0o700, exist_ok=True)
        # Redis fsyncs the files in its append-only folder, and that folder, but not the
        # work folder that holds it: make the folder's own name durable before the start.
        os.makedirs(os.path.join(self.workdir, "appendonlydir"), exist_ok=True)
        folder = os.open(self.workdir, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
        self.server = subprocess.Popen(
            ["redis-server", "--port", "0", "--unixsocket", self.socket, "--save", ""]
            + ["--dir", self.workdir, "--appendonly", "yes", "--appendfsync", self.appendfsync]
            + ["--logfile", os.path.join(self.sockets, "redis.log")],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while self._pid() is None:
            if self.server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("redis-server did not start: see redis.log")
            time.sleep(0.01)

    def _kill(self):  # a crash: SIGKILL, no last fsync
        pid = self._pid()
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
        if self.server is not None:
            self.server.wait()
            self.server = None
        while self._pid() is not None:  # until it stops answering
            time.sleep(0.01)

    def open_owner(self):
        if self._pid() is None:  # the first handle on a folder starts its server
            self._start()
        return FaultyRedisOwner(self.socket)

    def restart_store(self):
        self._kill()
        self._start()

    def restart_after_power_cut(self):
        self._kill()  # the cut killed it already: collect it, then start it again
        self._start()

    def fault_plan(self, owner):
        return owner.plan

    def advance_clock(self, seconds):
        pass  # no key has a time to live, and the adapter reads no clock

    def secrets(self):
        return (self.workdir, self.sockets)

    def destroy(self):
        self._kill()
        shutil.rmtree(self.sockets, ignore_errors=True)
