"""Whether the forgetful FUSE mount works here: skip without it, fail under ``CI=true``.

The rule is the PostgreSQL tests' (``tests/_postgres.py``): a machine without
``/dev/fuse``, ``fusermount3``, libfuse 3 or the ``mfusepy`` binding skips the
tests that need a mount, with a reason that says what to install -- except under
``CI=true``, where CI must run them, so a missing piece is a failure.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from toolswap.faultinject.powerloss import mount_unavailable_reason

__all__ = ["fsync_dir", "require_mount", "server_processes", "wait_until", "write_file"]


def require_mount() -> None:
    reason = mount_unavailable_reason()
    if reason is None:
        return
    reason += " (apt-get install fuse3; pip install mfusepy)"
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        pytest.fail(f"CI=true but {reason}: CI must run the power-loss tests", pytrace=False)
    pytest.skip(reason)


def server_processes(mountpoint: str) -> list[int]:
    """Pids of forgetful FUSE servers for ``mountpoint`` (their command line names it)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                argv = handle.read().split(b"\0")
        except OSError:
            continue
        if b"toolswap.faultinject._forgetful_fuse" in argv and os.fsencode(mountpoint) in argv:
            found.append(int(entry))
    return found


def wait_until(condition: object, timeout: float = 20.0) -> bool:
    """Poll ``condition()`` until it is true or ``timeout`` seconds pass; its last value."""
    assert callable(condition)
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return bool(condition())
        time.sleep(0.05)
    return True


def fsync_dir(path: str | Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file(path: str | Path, data: bytes, *, fsync: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
