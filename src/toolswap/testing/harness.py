"""The harness an adapter author writes: how the conformance kit reaches a store.

Rules
=====

1. One harness instance is one store.  The kit builds a new harness, with a
   new, empty work folder, for every check it runs (and for every repetition),
   so a check never sees another check's rows.  The store must start empty:
   the kit probes the transaction ids it is about to use and refuses a store
   that already knows one of them.
2. ``open_owner()`` opens a **new handle** on the **same** store, every call.
   Two calls must never return the same object (the kit refuses such a
   harness).  A handle is what an adapter user holds: a client object with its
   own connections.
3. Two harnesses built with the same ``workdir`` -- in this process or in
   another one -- open handles on the same store.  That is how the kit opens a
   handle in another process: it imports the harness by ``module:attr`` in a
   child process and builds it with the same folder.
4. Everything optional is a *capability* (:class:`Capability`).  A harness
   that cannot offer one says so in :attr:`OwnerHarness.unsupported`, with a
   reason; the matching checks are then skipped with that reason.  A harness
   that neither implements nor declares one gets the same skips with a reason
   that says what to implement.
5. :meth:`OwnerHarness.secrets` lists the strings the adapter must never
   reveal (paths, DSNs, passwords, host names).  The kit scans every
   observation field, generation, reconciliation report and error message it
   sees for them (owner promise O7).

A fault (:class:`StoreFault`) is armed on one handle and fires in that
handle's next operation, on a call to its store -- the network round trip or
the database statement *underneath* the adapter, never the adapter's own
method -- so that the adapter's own handling of a failing store is what is
tested.  ``FAIL`` and ``TIMEOUT`` fire on the operation's first store call,
``LOST_ACK`` on its last.
"""

from __future__ import annotations

import enum
import importlib
import os
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from ..errors import (
    HarnessError,  # noqa: F401 (re-exported)
)
from ..owner import ArtifactReferenceOwner

__all__ = [
    "Capability",
    "HarnessError",
    "OwnerHarness",
    "StoreFault",
    "harness_import_path",
    "load_harness",
    "resolve_harness",
]


class Capability(enum.StrEnum):
    """What a harness may offer beyond ``open_owner``."""

    RESTART = "restart"
    """``restart_store()`` restarts the store for real (a server restart, or every
    file closed and reopened); the kit closes every handle it opened first."""

    OTHER_PROCESS = "other-process"
    """A harness built with the same ``workdir`` in a child process opens the same store."""

    FAULTS = "faults"
    """``inject_fault(owner, fault)`` makes that handle's next store call fail."""

    def __str__(self) -> str:
        return self.value


class StoreFault(enum.StrEnum):
    """What happens to the next call a handle makes to its store."""

    FAIL = "fail"
    """The call fails before it reaches the store (connection refused or lost):
    nothing is applied."""

    TIMEOUT = "timeout"
    """The call times out and is cancelled by the store: nothing is applied,
    but the adapter cannot know that."""

    LOST_ACK = "lost_ack"
    """The call that completes the operation (its commit: the last round trip)
    is carried out and durable, then its answer is lost, so the adapter sees an
    error after the store did what was asked -- also when there was nothing to
    change.  Calls before it go through untouched."""

    def __str__(self) -> str:
        return self.value


class OwnerHarness:
    """Subclass this to put an owner adapter through the conformance kit.

    Required: :meth:`open_owner`.  Optional: :meth:`restart_store`,
    :meth:`inject_fault`, :meth:`secrets`, :meth:`destroy`,
    :meth:`close_owner`, and the class attributes below.
    """

    unsupported: ClassVar[Mapping[Capability, str]] = {}
    """Capabilities this harness cannot offer, each with the reason shown in the skip."""

    known_failures: ClassVar[Mapping[str, str]] = {}
    """Check id -> reason: promises the adapter is known to break (strict xfail:
    the run fails if such a check starts passing)."""

    slow_restart: ClassVar[bool] = False
    """``restart_store`` takes long (a database server restart): the deep
    harnesses then restart the store in a sample of their crash states and
    examples, and close and reopen the handles in the rest."""

    import_path: ClassVar[str | None] = None
    """``module:attr`` to build this harness in a child process; defaults to
    the class's own module and qualified name."""

    def __init__(self, workdir: str | os.PathLike[str]) -> None:
        self.workdir = os.fspath(workdir)

    def open_owner(self) -> ArtifactReferenceOwner:
        """A new handle on this harness's store (never one returned before)."""
        raise NotImplementedError

    def close_owner(self, owner: ArtifactReferenceOwner) -> None:
        """Close a handle; the default calls its ``close()`` if it has one."""
        close = getattr(owner, "close", None)
        if callable(close):
            close()

    def restart_store(self) -> None:
        """Restart the store for real (:attr:`Capability.RESTART`).

        Called after the kit closed every handle it opened.  Whatever was durable
        must survive; everything else (caches, locks, open transactions) must not.
        """
        raise NotImplementedError

    def inject_fault(self, owner: ArtifactReferenceOwner, fault: StoreFault) -> None:
        """Arm ``fault`` on ``owner``'s next store call (:attr:`Capability.FAULTS`)."""
        raise NotImplementedError

    def secrets(self) -> Sequence[str]:
        """Strings that must never appear in what the adapter shows (O7)."""
        return ()

    def destroy(self) -> None:
        """Drop the store once the kit is done with it (the default does nothing;
        the work folder is removed by the kit)."""


def harness_import_path(harness: type[OwnerHarness]) -> str:
    """The ``module:attr`` a child process imports to build ``harness``."""
    if harness.import_path:
        return harness.import_path
    return f"{harness.__module__}:{harness.__qualname__}"


def load_harness(spec: str) -> type[OwnerHarness]:
    """Import ``module:attr`` and check that it is an :class:`OwnerHarness` subclass.

    Every failure is one :class:`HarnessError` line that names the spec and
    what is wrong with it.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise HarnessError(f"harness {spec!r}: expected module:attr, e.g. mypkg.harness:Harness")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        hint = ""
        if isinstance(exc, ModuleNotFoundError) and exc.name == module_name.split(".")[0]:
            hint = "; is its folder on PYTHONPATH?"
        raise HarnessError(
            f"harness {spec!r}: cannot import module {module_name!r} "
            f"({type(exc).__name__}: {exc}){hint}"
        ) from exc
    target: Any = module
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise HarnessError(
                f"harness {spec!r}: {module_name!r} has no attribute {attr!r}"
            ) from None
    if not (isinstance(target, type) and issubclass(target, OwnerHarness)):
        what = "a class" if isinstance(target, type) else f"a {type(target).__name__}"
        raise HarnessError(
            f"harness {spec!r}: {attr!r} is {what}, but not a subclass of "
            "toolswap.testing.OwnerHarness"
        )
    return target


_BUILT_IN = {
    "sqlite": "toolswap.owners.sqlite:SQLiteHarness",
    "memory": "toolswap.owners.memory:InMemoryHarness",
}
POSTGRES_DSN_ENV = "TOOLSWAP_POSTGRES_DSN"


def resolve_harness(spec: str) -> type[OwnerHarness]:
    """A harness from what a user types: ``module:attr``, ``sqlite``, ``memory``,
    or a ``postgresql://`` URL (the PostgreSQL harness on that server).

    A URL is handed to the harness, and to the child processes the kit starts,
    through the ``TOOLSWAP_POSTGRES_DSN`` environment variable.
    """
    if spec in _BUILT_IN:
        return load_harness(_BUILT_IN[spec])
    if spec.startswith(("postgresql://", "postgres://")):
        os.environ[POSTGRES_DSN_ENV] = spec
        return load_harness("toolswap.owners.postgres:PostgresHarness")
    return load_harness(spec)
