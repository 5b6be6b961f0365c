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

6. A harness states what the adapter's docstring promises about threads
   (:attr:`OwnerHarness.shared_handles`) and the longest it waits for its store
   or a lock in one call (:attr:`OwnerHarness.store_timeout`); the kit then
   shares one handle between threads, and holds fences and delays store calls
   for longer than that timeout.
7. Opening a handle may wait for a fence another handle holds (a constructor
   that takes the store's lock): the kit opens every competing handle, and
   starts every competing process, before it enters the fence it holds.
8. A harness that offers power loss (:attr:`Capability.POWER_LOSS`) keeps its
   whole store under ``workdir``: its files, its database, or the data
   directory of a server it starts for that folder (a socket may live
   elsewhere).  For the power-loss checks the kit builds it with ``workdir``
   on a forgetful mount (:mod:`toolswap.faultinject.powerloss`), where only
   what was fsynced survives a power cut; after a cut it calls
   :meth:`OwnerHarness.restart_after_power_cut`.

A fault (:class:`StoreFault`) is armed on one handle and fires in that
handle's next operation, on a call to its store -- the network round trip or
the database statement *underneath* the adapter, never the adapter's own
method -- so that the adapter's own handling of a failing store is what is
tested.  Through :meth:`OwnerHarness.inject_fault` (``Capability.FAULTS``)
``FAIL`` and ``TIMEOUT`` fire on the operation's first store call,
``LOST_ACK`` on its last.  A harness that wires the kit's
:class:`~toolswap.testing.faults.FaultPlan` under its store calls
(:meth:`OwnerHarness.fault_plan`, ``Capability.FAULT_PLAN``) also lets the kit
target the n-th store call of an operation, delay a call (``DELAY``) and damage
what a read returns (``CORRUPT_READ``), and tells the kit when an armed fault
never fired.
"""

from __future__ import annotations

import enum
import importlib
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import (
    HarnessError,  # noqa: F401 (re-exported)
)
from ..owner import ArtifactReferenceOwner

if TYPE_CHECKING:
    from .faults import FaultPlan

__all__ = [
    "CAPABILITY_METHODS",
    "LEGACY_FAULTS",
    "Capability",
    "HarnessError",
    "OwnerHarness",
    "RestartFromEnvironment",
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

    FAULT_PLAN = "fault-plan"
    """``fault_plan(owner)`` returns the handle's :class:`~toolswap.testing.faults.FaultPlan`,
    which the harness consults on every store call: faults at any call, delays,
    damaged reads, and faults that never fired are reported."""

    CLOCK = "clock"
    """``advance_clock(seconds)`` moves the clock the adapter and its store read
    (leases, time-outs, expiry) forward, so "forever" can be checked without waiting."""

    SHARED_HANDLE = "shared-handle"
    """One handle may be used by several threads at once (``shared_handles = True``)."""

    POWER_LOSS = "power-loss"
    """The store keeps everything under ``workdir`` (harness rule 8), so the kit can cut
    its power: every process using the folder is killed, whatever was not fsynced is
    lost, and ``restart_after_power_cut()`` starts the store again."""

    def __str__(self) -> str:
        return self.value


#: How a harness offers each capability that is a method (rule 4).  A capability
#: that is a statement (OTHER_PROCESS, SHARED_HANDLE) is not listed here.
CAPABILITY_METHODS: dict[Capability, str] = {
    Capability.RESTART: "restart_store",
    Capability.FAULTS: "inject_fault",
    Capability.FAULT_PLAN: "fault_plan",
    Capability.CLOCK: "advance_clock",
    Capability.POWER_LOSS: "restart_after_power_cut",
}


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

    DELAY = "delay"
    """The call succeeds, after a delay longer than any time-out the harness
    declares (:attr:`OwnerHarness.store_timeout`): a slow store, never a
    failing one.  Only through a :class:`~toolswap.testing.faults.FaultPlan`."""

    CORRUPT_READ = "corrupt_read"
    """A read returns damaged data that the store's own format cannot parse (a
    torn record, a value of the wrong type), never a plausible other state.
    Only through a :class:`~toolswap.testing.faults.FaultPlan`."""

    def __str__(self) -> str:
        return self.value


#: The faults :meth:`OwnerHarness.inject_fault` is ever given (older harnesses know no others).
LEGACY_FAULTS = (StoreFault.FAIL, StoreFault.TIMEOUT, StoreFault.LOST_ACK)


class OwnerHarness:
    """Subclass this to put an owner adapter through the conformance kit.

    Required: :meth:`open_owner`.  Optional: :meth:`restart_store`,
    :meth:`inject_fault`, :meth:`fault_plan`, :meth:`advance_clock`,
    :meth:`restart_after_power_cut`, :meth:`secrets`, :meth:`destroy`,
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

    shared_handles: ClassVar[bool] = False
    """The adapter's docstring says one handle may be used by several threads at
    once: the kit then drives one handle from several threads through the O1
    and O5 checks (:attr:`Capability.SHARED_HANDLE`)."""

    store_timeout: ClassVar[float | None] = None
    """The longest, in seconds, the adapter waits in one call for its store or a
    lock before it gives up (``None``: it never gives up by itself).  The kit
    holds fences, and delays store calls, for longer than this."""

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

    def restart_after_power_cut(self) -> None:
        """Start the store again after the kit cut its power (:attr:`Capability.POWER_LOSS`).

        ``workdir`` is on a forgetful mount.  When this is called, every process
        that used the folder is dead (a server whose data directory is there
        included), the folder holds only what had been fsynced before the cut,
        and the kit has dropped its handles without closing them.  Start what
        must run for the next handle to work, as after a real power cut: a
        server on the same data directory (its own crash recovery then runs);
        for a store of plain files, usually nothing.
        """
        raise NotImplementedError

    def inject_fault(self, owner: ArtifactReferenceOwner, fault: StoreFault) -> None:
        """Arm ``fault`` on ``owner``'s next store call (:attr:`Capability.FAULTS`).

        A harness with a fault plan need not write this: the default arms the plan.
        """
        if type(self).fault_plan is not OwnerHarness.fault_plan:
            self.fault_plan(owner).arm(fault)
            return
        raise NotImplementedError

    def fault_plan(self, owner: ArtifactReferenceOwner) -> FaultPlan:
        """The :class:`~toolswap.testing.faults.FaultPlan` this handle's store calls
        consult (:attr:`Capability.FAULT_PLAN`); one plan per handle."""
        raise NotImplementedError

    def advance_clock(self, seconds: float) -> None:
        """Move the clock the adapter and its store read forward (:attr:`Capability.CLOCK`).

        Everything that expires, times out or is leased must see the time
        pass.  A store that reads no clock at all implements this as a no-op.
        """
        raise NotImplementedError

    def secrets(self) -> Sequence[str]:
        """Strings that must never appear in what the adapter shows (O7)."""
        return ()

    def destroy(self) -> None:
        """Drop the store once the kit is done with it (the default does nothing;
        the work folder is removed by the kit)."""


class RestartFromEnvironment(Mapping[Capability, str]):
    """An ``unsupported`` mapping for a harness of a server the kit does not start.

    ``always`` is unsupported whatever happens; RESTART is unsupported (saying
    to set ``restart_env``) while that variable is unset or blank.  It is read
    at each look, not once, so a child process sees what its parent set.
    """

    def __init__(
        self, always: Mapping[Capability, str], restart_env: str, restarts_what: str
    ) -> None:
        self._always = dict(always)
        self._restart_env = restart_env
        self._restarts_what = restarts_what

    def _current(self) -> dict[Capability, str]:
        found = dict(self._always)
        if not os.environ.get(self._restart_env, "").strip():
            found[Capability.RESTART] = (
                f"set {self._restart_env} to a shell command that {self._restarts_what}"
            )
        return found

    def __getitem__(self, key: Capability) -> str:
        return self._current()[key]

    def __iter__(self) -> Iterator[Capability]:
        return iter(self._current())

    def __len__(self) -> int:
        return len(self._current())

    def __repr__(self) -> str:
        return repr(self._current())


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
    except (SystemExit, GeneratorExit) as exc:  # a module must not end the run (exit 0)
        raise HarnessError(
            f"harness {spec!r}: importing module {module_name!r} tried to exit the process "
            f"({type(exc).__name__}({_exit_code(exc)})); a harness module must not exit"
        ) from None
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


def _exit_code(exc: BaseException) -> str:
    code = getattr(exc, "code", None)
    return repr(code) if isinstance(code, int | None) else "..."


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
