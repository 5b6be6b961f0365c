"""The PostgreSQL harness on a private, throwaway server per store: the power-loss checks' one.

:class:`~toolswap.owners.postgres.PostgresHarness` runs against a server someone
else started, whose data directory the kit cannot reach.  This harness starts
a server of its own for each work folder, with its data directory in that
folder, so the kit can cut its power (``Capability.POWER_LOSS``).

Rules
=====

1. The cluster is made (``initdb``, which fsyncs what it wrote) and started on
   the first ``open_owner()``, in ``<workdir>/pgdata``; a harness built on the
   same folder in another process reaches the same server.
2. The server listens on a Unix socket only, in a new folder for every start
   (a killed server leaves its socket lock file behind), inside one private
   folder per work folder; local connections are trusted there.
3. As root the server runs as an unprivileged user: ``TOOLSWAP_PG_USER``, else
   ``toolswap-pg`` (what ``.ci/postgres-cluster`` creates), else ``postgres``.
   That user must be able to reach the work folder; when it cannot (a private
   temporary folder), the data directory lives in the private folder instead,
   which is enough for every check but the power-loss ones, whose folder the
   kit makes reachable.
4. A restart is a crash (SIGQUIT: no checkpoint, crash recovery at the start);
   after a power cut the server is already dead and is only started again.
   ``destroy()`` stops the folder's server, whichever process started it.
5. The binaries come from ``PG_BINDIR`` or the newest ``/usr/lib/postgresql/*/bin``.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from ..fs import REAL_FS
from ..testing.harness import Capability, HarnessError, OwnerHarness
from .postgres import PostgresHarness, PostgresOwner, dsn_secrets, initialize_schema

__all__ = ["PostgresClusterHarness", "server_binaries"]

_USER_ENV = "TOOLSWAP_PG_USER"
_START_SECONDS = 60.0
_STOP_SECONDS = 30.0
_DB_USER = "toolswap"
_SETTINGS = {
    "listen_addresses": "",
    "unix_socket_permissions": "0777",
    "shared_buffers": "16MB",
    "max_connections": "60",
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
}


def server_binaries() -> str | None:
    """The folder holding ``initdb`` and ``postgres``, or None."""
    wanted = os.environ.get("PG_BINDIR")
    found = [wanted] if wanted else []
    found += sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda p: [int(x) for x in p.split("/")[-2].split(".") if x.isdigit()],
        reverse=True,
    )
    for folder in found:
        if all(os.access(os.path.join(folder, b), os.X_OK) for b in ("initdb", "postgres")):
            return folder
    return None


def _server_user() -> pwd.struct_passwd | None:
    """The user the server runs as (rule 3); None when it is this process's own."""
    if os.geteuid() != 0:
        return None
    for name in (os.environ.get(_USER_ENV, "").strip(), "toolswap-pg", "postgres"):
        if not name:
            continue
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise HarnessError(
        f"harness PostgresClusterHarness: as root the server needs an unprivileged user; "
        f"set {_USER_ENV} or create the user toolswap-pg"
    )


class _Unsupported(Mapping[Capability, str]):
    """Nothing works without the server binaries; read at each look."""

    def _current(self) -> dict[Capability, str]:
        if server_binaries() is not None:
            return {}
        reason = "no PostgreSQL server binaries (set PG_BINDIR, or apt-get install postgresql)"
        return dict.fromkeys((Capability.RESTART, Capability.POWER_LOSS), reason)

    def __getitem__(self, key: Capability) -> str:
        return self._current()[key]

    def __iter__(self) -> Any:
        return iter(self._current())

    def __len__(self) -> int:
        return len(self._current())


class PostgresClusterHarness(PostgresHarness):
    """:class:`PostgresOwner` on a server of its own, its data in the work folder (rules)."""

    unsupported: ClassVar[Mapping[Capability, str]] = _Unsupported()
    slow_restart: ClassVar[bool] = True
    server_settings: ClassVar[Mapping[str, str]] = {}
    """More ``-c`` settings for the server (a test may turn durability off with them)."""

    def __init__(self, workdir: str) -> None:
        OwnerHarness.__init__(self, workdir)
        digest = hashlib.sha256(os.path.realpath(self.workdir).encode()).hexdigest()
        self.schema = f"toolswap_kit_{digest[:20]}"
        self.private = os.path.join(tempfile.gettempdir(), f"toolswap-pgcluster-{digest[:16]}")
        self.dsn = ""  # set once the server answers (a new socket folder every start)
        self._faults = {}
        self._server: subprocess.Popen[bytes] | None = None
        self._ready = False

    # -- where things are ----------------------------------------------------------------

    @property
    def data(self) -> str:
        inside = os.path.join(self.workdir, "pgdata")
        user = _server_user()
        if user is None or _reachable(self.workdir, user):
            return inside
        return os.path.join(self.private, "pgdata")

    # -- the server ----------------------------------------------------------------------

    def _binaries(self) -> str:
        folder = server_binaries()
        if folder is None:
            reason = _Unsupported()[Capability.RESTART]
            raise HarnessError(f"harness PostgresClusterHarness: {reason}")
        return folder

    def _as_server(self) -> dict[str, Any]:
        user = _server_user()
        if user is None:
            return {}
        return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}

    def _owned(self, path: str) -> None:
        user = _server_user()
        if user is not None:
            os.chown(path, user.pw_uid, user.pw_gid)

    def _initdb(self) -> None:
        data = self.data
        os.makedirs(self.private, mode=0o711, exist_ok=True)
        os.mkdir(data, 0o700)
        self._owned(data)
        REAL_FS.fsync_dir(os.path.dirname(data))  # the data directory's name, durably
        done = subprocess.run(
            [os.path.join(self._binaries(), "initdb"), "-D", data, "-U", _DB_USER]
            + ["--auth=trust", "--no-locale", "-E", "UTF8"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=300,
            check=False,
            cwd="/",
            **self._as_server(),
        )
        if done.returncode != 0:
            tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["?"]
            raise HarnessError(f"harness PostgresClusterHarness: initdb failed ({tail[0][:200]})")

    def _start(self) -> None:
        os.makedirs(self.private, mode=0o711, exist_ok=True)
        if not os.path.exists(os.path.join(self.data, "PG_VERSION")):
            self._initdb()
        socket = tempfile.mkdtemp(prefix="sock-", dir=self.private)
        os.chmod(socket, 0o755)
        self._owned(socket)
        settings = {**_SETTINGS, "unix_socket_directories": socket, **self.server_settings}
        command = [os.path.join(self._binaries(), "postgres"), "-D", self.data]
        for name, value in settings.items():
            command += ["-c", f"{name}={value}"]
        log = open(os.path.join(self.private, "server.log"), "ab")  # noqa: SIM115
        try:
            self._server = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                cwd="/",
                **self._as_server(),
            )
        finally:
            log.close()
        with open(os.path.join(self.private, "socket"), "w", encoding="utf-8") as pointer:
            pointer.write(socket)
        self.dsn = _dsn(socket)
        deadline = time.monotonic() + _START_SECONDS
        while not _answers(self.dsn):
            if self._server.poll() is not None or time.monotonic() > deadline:
                raise HarnessError(
                    "harness PostgresClusterHarness: the server did not start (see server.log "
                    "in its private folder)"
                )
            time.sleep(0.02)

    def _stop(self, sig: int = signal.SIGQUIT) -> None:
        """Stop the server of this work folder, also one another process's harness started."""
        server, self._server = self._server, None
        if server is None:
            pid = _postmaster(self.data)
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
                _wait_gone(pid)
            return
        if server.poll() is None:
            server.send_signal(sig)
            try:
                server.wait(timeout=_STOP_SECONDS)
            except subprocess.TimeoutExpired:
                server.kill()
        server.wait()

    def _ensure(self) -> None:
        if self._ready:
            return
        if self._server is None:  # another process's harness may have started it
            socket = _socket(self.private)
            if socket is not None and _answers(_dsn(socket)):
                self.dsn = _dsn(socket)
            else:
                self._start()
        initialize_schema(self.dsn, schema=self.schema)
        self._ready = True

    # -- the harness ---------------------------------------------------------------------

    def _initialize(self) -> None:
        """Nothing at construction: the server starts with the first handle (rule 1)."""

    def open_owner(self) -> PostgresOwner:
        self._ensure()
        return super().open_owner()

    def restart_store(self) -> None:
        self._stop()
        self._start()

    def restart_after_power_cut(self) -> None:
        self._stop(signal.SIGKILL)  # killed by the cut already: collect it
        self._start()

    def secrets(self) -> Sequence[str]:
        return (self.private, self.workdir, *(dsn_secrets(self.dsn) if self.dsn else ()))

    def destroy(self) -> None:
        try:
            self._stop()
        finally:
            shutil.rmtree(self.private, ignore_errors=True)


def _reachable(folder: str, user: pwd.struct_passwd) -> bool:
    """Whether ``user`` may pass through every folder above ``folder`` (and into it)."""
    at = os.path.abspath(folder)
    while True:
        try:
            info = os.stat(at)
        except OSError:
            return False
        if info.st_uid == user.pw_uid:
            allowed = bool(info.st_mode & 0o100)
        elif info.st_gid == user.pw_gid:
            allowed = bool(info.st_mode & 0o010)
        else:
            allowed = bool(info.st_mode & 0o001)
        if not allowed:
            return False
        parent = os.path.dirname(at)
        if parent == at:
            return True
        at = parent


def _answers(dsn: str) -> bool:
    import psycopg

    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=2) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error:
        return False
    return True


def _postmaster(data: str) -> int | None:
    """The pid in ``postmaster.pid`` if that process still runs in ``data`` (else None)."""
    try:
        with open(os.path.join(data, "postmaster.pid"), encoding="utf-8") as lock:
            pid = int(lock.readline().strip())
        alive = os.readlink(f"/proc/{pid}/cwd") == os.path.realpath(data)
    except (OSError, ValueError):
        return None
    return pid if alive else None


def _wait_gone(pid: int) -> None:
    deadline = time.monotonic() + _STOP_SECONDS
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.02)
    if os.path.exists(f"/proc/{pid}"):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _socket(private: str) -> str | None:
    """The socket folder of the server last started for this work folder."""
    try:
        with open(os.path.join(private, "socket"), encoding="utf-8") as pointer:
            return pointer.read().strip() or None
    except FileNotFoundError:
        return None


def _dsn(socket: str) -> str:
    return f"host={socket} user={_DB_USER} dbname=postgres"
