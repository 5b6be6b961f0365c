"""The kit's fault plan: which store call of a handle fails, waits, or returns damage.

A harness that offers :attr:`~toolswap.testing.Capability.FAULT_PLAN` keeps one
:class:`FaultPlan` per handle (:meth:`OwnerHarness.fault_plan`) and asks it, on
every call its adapter makes to the store -- the statement, the round trip, the
file read -- what to do::

    step = plan.step(reads=is_a_read, completes=is_the_commit)
    if step.fails:
        raise <the store's own error for step.fault>  # nothing was applied
    result = <make the call>
    if step.lost_ack:
        raise <the store's own error>  # applied and durable, the answer is lost
    if step.corrupt:
        result = <result damaged so that the store's format cannot parse it>
    return result

``step`` sleeps for a ``DELAY`` itself.

Rules
=====

1. The kit arms faults; the harness only consults the plan.  ``arm(fault,
   call=k)`` fires on the k-th store call (0-based) the handle makes after the
   arming, whatever that call is.  Without ``call``, ``FAIL``, ``TIMEOUT`` and
   ``DELAY`` fire on the next call, ``LOST_ACK`` on the next call that
   completes an operation (``completes=True``: its commit, its last round
   trip) and ``CORRUPT_READ`` on the next read.
2. A ``CORRUPT_READ`` aimed at a call that is not a read does not fire.  A
   fault that has not fired stays armed and is listed by :meth:`FaultPlan.unfired`:
   the kit reports it, because either the harness consults the plan somewhere
   the adapter's store calls do not pass, or the adapter answered without
   asking its store.
3. :attr:`FaultPlan.calls` counts every step and :attr:`FaultPlan.log` keeps
   what each call was, so the kit can count an operation's calls on one handle
   and then aim a fault at each of them on another.
4. A plan is safe to consult from several threads.
"""

from __future__ import annotations

import threading
import time

import attrs

from .harness import StoreFault

__all__ = ["ArmedFault", "FaultPlan", "StoreCall", "Step"]

_BEFORE = (StoreFault.FAIL, StoreFault.TIMEOUT)


@attrs.frozen
class StoreCall:
    """What the harness said about one store call."""

    reads: bool
    completes: bool


@attrs.frozen
class ArmedFault:
    """A fault waiting to fire: on call number ``call`` after arming, or on the next
    fitting call when ``call`` is ``None``."""

    fault: StoreFault
    call: int | None = None
    seconds: float = 0.0
    armed_at: int = 0

    def describe(self) -> str:
        where = "the next fitting call" if self.call is None else f"store call #{self.call}"
        return f"{self.fault} on {where}"


@attrs.frozen
class Step:
    """What the harness does with one store call (see the module's example)."""

    fault: StoreFault | None = None

    @property
    def fails(self) -> bool:
        """Raise the store's error instead of making the call (FAIL, TIMEOUT)."""
        return self.fault in _BEFORE

    @property
    def lost_ack(self) -> bool:
        """Make the call, then raise the store's error (the answer is lost)."""
        return self.fault is StoreFault.LOST_ACK

    @property
    def corrupt(self) -> bool:
        """Make the call, then return its data damaged beyond parsing."""
        return self.fault is StoreFault.CORRUPT_READ


class FaultPlan:
    """One handle's armed faults, counted over its store calls (see the module rules)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._armed: list[ArmedFault] = []
        self.log: list[StoreCall] = []
        self.fired: list[tuple[StoreFault, int]] = []

    @property
    def calls(self) -> int:
        """How many store calls the handle made so far."""
        with self._lock:
            return len(self.log)

    # -- the kit's side -----------------------------------------------------------

    def arm(self, fault: StoreFault, *, call: int | None = None, seconds: float = 0.0) -> None:
        """Fire ``fault`` on the ``call``-th store call from now (rule 1)."""
        if fault is StoreFault.DELAY and seconds <= 0:
            raise ValueError("a DELAY needs the seconds to wait")
        with self._lock:
            self._armed.append(
                ArmedFault(fault=fault, call=call, seconds=seconds, armed_at=len(self.log))
            )

    def unfired(self) -> list[ArmedFault]:
        with self._lock:
            return list(self._armed)

    def disarm(self) -> None:
        with self._lock:
            self._armed.clear()

    # -- the harness's side ---------------------------------------------------------

    def step(self, *, reads: bool = False, completes: bool = False) -> Step:
        """Record one store call and say what to do with it (sleeping for a DELAY)."""
        with self._lock:
            index = len(self.log)
            self.log.append(StoreCall(reads=reads, completes=completes))
            chosen = next((a for a in self._armed if _fires(a, index, reads, completes)), None)
            if chosen is not None:
                self._armed.remove(chosen)
                self.fired.append((chosen.fault, index))
        if chosen is None:
            return Step()
        if chosen.fault is StoreFault.DELAY:
            time.sleep(chosen.seconds)
            return Step()
        return Step(fault=chosen.fault)


def _fires(armed: ArmedFault, index: int, reads: bool, completes: bool) -> bool:
    if armed.fault is StoreFault.CORRUPT_READ and not reads:
        return False
    if armed.call is not None:
        return index - armed.armed_at == armed.call
    if armed.fault is StoreFault.LOST_ACK:
        return completes
    return True
