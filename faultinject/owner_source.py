"""Owners under test for the deep harnesses: where the owner comes from, and how it is seen.

The crash explorer and the implementation-vs-model machine take any owner
through an :class:`OwnerSource`: the built-in :class:`CrashableSource` (a
:class:`~toolswap.faultinject.owner.CrashableOwner`) or a
:class:`HarnessSource` built from an adapter author's
:class:`~toolswap.testing.OwnerHarness`.

Rules
=====
1. **What the owner holds is learned only through the protocol.**  A
   :class:`ProtocolView` is built by entering ``inspect_fenced`` on every
   transaction id the caller knows and reading the observation; no owner's
   rows, caches or files are read.  An id the owner cannot answer for
   (an exception on entry, or UNKNOWN) is listed in
   :attr:`ProtocolView.unanswered`, never guessed.
2. **What a call said is recorded at the call site.**  The journal and the
   scenarios reach the owner through a :class:`WatchedOwner`, which records
   the ids whose ``publish`` raised
   :class:`~toolswap.owner.ArtifactPublicationRejected` (O2's trustworthy
   "no"), the publishes that ended in doubt, every id it was asked about,
   and S2: a publish that may have written although the journal's durable
   bytes did not yet hold that id's PREPARED record.
3. **A crash of the owner means what it means for that store.**  For a
   harness: every handle is closed, ``restart_store()`` runs if the harness
   offers RESTART, and a new handle is opened; whatever was durable must
   still be there.  For the built-in owner: its writes in flight land or are
   lost and its fences are released (its own fault mechanics).
4. **Owner faults are named as the built-in owner names them**
   (:data:`~toolswap.faultinject.owner.OWNER_FAULTS`).  A harness source maps
   each onto what any adapter can be made to do: a store fault armed on the
   handle right before the call it is meant for (FAULTS), or, for
   ``reject``, a tombstone written through the protocol just before the
   publish (the only honest cause of a rejection, O3).  A fault without such
   a mapping raises :class:`OwnerFaultUnsupported` with the reason; the
   caller skips (and reports) what needed it.  After a harness fault the
   handle is replaced on :meth:`OwnerSource.heal`, since an armed store fault
   may not have fired.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import attrs

from toolswap.domain import ArtifactRetentionClaim
from toolswap.owner import (
    ArtifactPublicationRejected,
    ArtifactReferenceOwner,
    Census,
    ObservedState,
    OwnerConflictError,
    OwnerObservation,
)
from toolswap.testing.harness import Capability, OwnerHarness, StoreFault

from .disk import Chooser
from .owner import OWNER_FAULTS, CrashableOwner, OwnerFault

__all__ = [
    "CrashableSource",
    "HarnessSource",
    "OwnerFaultUnsupported",
    "OwnerSource",
    "ProtocolView",
    "Seen",
    "WatchedOwner",
    "harness_sources",
    "inspect_all",
]


class OwnerFaultUnsupported(Exception):
    """This owner cannot be made to show the fault; ``reason`` says why."""

    def __init__(self, fault: str, reason: str) -> None:
        super().__init__(f"owner fault {fault!r} unavailable: {reason}")
        self.fault = fault
        self.reason = reason


# -- the protocol view -------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Seen:
    """One id as a fence showed it (rule 1)."""

    state: ObservedState
    source_id: str | None = None
    content_sha256: str | None = None
    generation: object = None
    sealed: bool = False

    @property
    def kind(self) -> str:
        """``published``, ``tombstone``, ``absent`` (never seen or no tombstone) or ``unknown``."""
        if self.state is ObservedState.PUBLISHED:
            return "published"
        if self.state is ObservedState.ABSENT:
            return "tombstone" if self.sealed else "absent"
        return "unknown"


@attrs.frozen
class ProtocolView:
    """What the owner showed for each id asked about, one fence per id."""

    seen: dict[str, Seen]

    def visible(self) -> dict[str, tuple[str, str]]:
        """Published references: transaction id -> (source id, digest)."""
        return {
            txn: (s.source_id, s.content_sha256)
            for txn, s in self.seen.items()
            if s.kind == "published" and s.source_id is not None and s.content_sha256 is not None
        }

    def tombstoned(self, transaction_id: str) -> bool:
        seen = self.seen.get(transaction_id)
        return seen is not None and seen.kind == "tombstone"

    @property
    def unanswered(self) -> tuple[str, ...]:
        return tuple(sorted(t for t, s in self.seen.items() if s.kind == "unknown"))


def inspect_all(owner: ArtifactReferenceOwner, transaction_ids: Iterable[str]) -> ProtocolView:
    """Enter a fence on each id and keep what the observation says (rule 1)."""
    seen: dict[str, Seen] = {}
    for txn in sorted(set(transaction_ids)):
        try:
            with owner.inspect_fenced(txn) as observation:
                state = observation.state
                if state not in (ObservedState.PUBLISHED, ObservedState.ABSENT):
                    state = ObservedState.UNKNOWN
                seen[txn] = Seen(
                    state=state,
                    source_id=observation.source_id,
                    content_sha256=observation.content_sha256,
                    generation=observation.generation,
                    sealed=observation.sealed is True,
                )
        except Exception:  # the owner cannot tell: O5 says so, and so does the view
            seen[txn] = Seen(state=ObservedState.UNKNOWN)
    return ProtocolView(seen)


# -- sources -------------------------------------------------------------------------------


class OwnerSource:
    """One store and the handle the deep harnesses use on it (see the module rules)."""

    name = "owner"
    #: The exception class a failed-but-maybe-written call is expected to raise.
    uncertain_error: type[BaseException] = Exception
    #: ``reject`` writes a tombstone first (the model must apply REMOVE before the publish).
    reject_by_tombstone = False

    @property
    def handle(self) -> ArtifactReferenceOwner:  # pragma: no cover - abstract
        raise NotImplementedError

    def unsupported(self, fault: str) -> str | None:
        """Why ``fault`` cannot be shown by this owner, or ``None`` if it can."""
        return None

    def arm(self, fault: OwnerFault, times: int = 1) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def before_call(self, operation: str) -> str | None:
        """The watched handle is about to call ``operation``: fire what was armed for it.

        Returns ``"tombstone"`` when the publish must be preceded by a tombstone.
        """
        return None

    def heal(self) -> None:
        """No fault is armed any more (the owner answers truthfully from now on)."""

    def crash(self, choices: Chooser | int = 0) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def in_flight(self) -> tuple[tuple[str, ArtifactRetentionClaim], ...]:
        """Writes still in flight (only the built-in owner has them)."""
        return ()

    def deliver_in_flight(self) -> None:
        """Land every write still in flight."""

    def close(self) -> None:
        """Done with this store: close the handles and drop it."""


class CrashableSource(OwnerSource):
    """The built-in :class:`CrashableOwner` (its own faults and crash mechanics)."""

    name = "crashable"
    uncertain_error = ConnectionError

    def __init__(self, owner: CrashableOwner | None = None) -> None:
        self.owner = CrashableOwner() if owner is None else owner

    @property
    def handle(self) -> CrashableOwner:
        return self.owner

    def arm(self, fault: OwnerFault, times: int = 1) -> None:
        self.owner.arm(fault, times)

    def heal(self) -> None:
        self.owner.heal()

    def crash(self, choices: Chooser | int = 0) -> None:
        self.owner.crash(choices)

    @property
    def in_flight(self) -> tuple[tuple[str, ArtifactRetentionClaim], ...]:
        return self.owner.in_flight

    def deliver_in_flight(self) -> None:
        self.owner.deliver_in_flight()

    def take_in_flight(self) -> list[tuple[str, ArtifactRetentionClaim]]:
        """Take every in-flight write off the owner's queue (the caller lands them)."""
        pending = list(self.owner.in_flight)
        self.owner._in_flight.clear()
        return pending

    def land_late(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        """One late write reaches the owner now (a tombstone refuses it silently)."""
        self.owner._write(transaction_id, claim, late=True)


#: The built-in fault name -> (the call it is meant for, what a harness does for it).
_HARNESS_FAULTS: dict[str, tuple[str, StoreFault | None]] = {
    "reject": ("publish", None),  # a tombstone first: the adapter must refuse (O3)
    "fail_before_write": ("publish", StoreFault.FAIL),
    "lost_ack": ("publish", StoreFault.LOST_ACK),
    "lost_tombstone": ("seal", StoreFault.FAIL),
    "unknown": ("inspect", StoreFault.FAIL),  # the owner cannot tell: entering fails
    "inspect_error": ("inspect", StoreFault.FAIL),
    "remove_error": ("remove", StoreFault.FAIL),
    "remove_lost_ack": ("remove", StoreFault.LOST_ACK),
}
_NO_MAPPING = {
    "in_flight": "a write that lands after its call failed exists only in the built-in "
    "owner's in-flight queue; no store fault makes an adapter do that",
    "stale_seal": "a stale seal needs the id to change inside its own fence, which O5 "
    "forbids; only the built-in owner can fake it",
}
#: At most this many store faults are armed for one ``arm(..., times)`` (every call of a
#: reconciliation of the few ids a scenario uses fails; the handle is replaced on heal).
_MAX_STORE_FAULTS = 64


def _offers(harness_cls: type[OwnerHarness], capability: Capability, method: str) -> bool:
    if capability in harness_cls.unsupported:
        return False
    return getattr(harness_cls, method) is not getattr(OwnerHarness, method)


class HarnessSource(OwnerSource):
    """A fresh store from an :class:`OwnerHarness` (one harness instance, one work folder).

    ``close()`` closes every handle, calls ``destroy()`` and removes the work folder.
    """

    name = "harness"
    reject_by_tombstone = True

    def __init__(self, harness_cls: type[OwnerHarness], workdir: str) -> None:
        os.makedirs(workdir, exist_ok=True)
        self.workdir = workdir
        self.harness = harness_cls(workdir)
        self.restarts = _offers(harness_cls, Capability.RESTART, "restart_store")
        self.faults = _offers(harness_cls, Capability.FAULTS, "inject_fault")
        self.name = harness_cls.__name__
        self._armed: dict[str, list[StoreFault | None]] = {}
        self._dirty = False
        self._closed = False
        try:
            self._handle = self.harness.open_owner()
        except BaseException:
            self._drop()
            raise

    @property
    def handle(self) -> ArtifactReferenceOwner:
        return self._handle

    def unsupported(self, fault: str) -> str | None:
        if fault in _NO_MAPPING:
            return _NO_MAPPING[fault]
        if fault not in _HARNESS_FAULTS:
            return f"unknown owner fault {fault!r}; want one of {OWNER_FAULTS}"
        _, store_fault = _HARNESS_FAULTS[fault]
        if store_fault is not None and not self.faults:
            reason = type(self.harness).unsupported.get(Capability.FAULTS)
            return f"the harness offers no store faults ({reason or 'inject_fault not written'})"
        return None

    def arm(self, fault: OwnerFault, times: int = 1) -> None:
        reason = self.unsupported(fault)
        if reason is not None:
            raise OwnerFaultUnsupported(fault, reason)
        operation, store_fault = _HARNESS_FAULTS[fault]
        queue = self._armed.setdefault(operation, [])
        queue.extend([store_fault] * min(times, _MAX_STORE_FAULTS))

    def before_call(self, operation: str) -> str | None:
        queue = self._armed.get(operation)
        if not queue:
            return None
        fault = queue.pop(0)
        if fault is None:
            return "tombstone"
        self._dirty = True
        self.harness.inject_fault(self._handle, fault)
        return None

    def heal(self) -> None:
        self._armed.clear()
        if self._dirty:  # an armed store fault may not have fired: use a clean handle
            self._dirty = False
            self.harness.close_owner(self._handle)
            self._handle = self.harness.open_owner()

    def crash(self, choices: Chooser | int = 0) -> None:
        self._armed.clear()
        self._dirty = False
        self.harness.close_owner(self._handle)
        if self.restarts:
            self.harness.restart_store()
        self._handle = self.harness.open_owner()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.harness.close_owner(self._handle)
        finally:
            self._drop()

    def _drop(self) -> None:
        try:
            self.harness.destroy()
        finally:
            shutil.rmtree(self.workdir, ignore_errors=True)


def harness_sources(
    harness_cls: type[OwnerHarness],
    workroot: str,
    prefix: str = "store",
    *,
    restart_every: int = 1,
) -> Callable[[], HarnessSource]:
    """A factory of fresh harness sources, each in its own new folder under ``workroot``.

    ``restart_every=N`` gives a real store restart to the crashes of every
    N-th source only (the first included); the others close and reopen their
    handles.  A server restart takes a second, and the sentence checks test
    durability across restart directly, so a sample is enough here.
    """
    counter = iter(range(1 << 62))

    def make() -> HarnessSource:
        index = next(counter)
        source = HarnessSource(harness_cls, os.path.join(workroot, f"{prefix}-{index + 1:06d}"))
        source.restarts = source.restarts and index % restart_every == 0
        return source

    return make


# -- the watched handle ------------------------------------------------------------------


class _WatchedObservation:
    """An observation whose ``seal_absence`` first fires what was armed for the seal."""

    def __init__(self, inner: OwnerObservation, watched: WatchedOwner) -> None:
        self._inner = inner
        self._watched = watched
        self.transaction_id = inner.transaction_id
        self.state = inner.state
        self.source_id = inner.source_id
        self.content_sha256 = inner.content_sha256
        self.generation = inner.generation
        self.sealed = inner.sealed

    def seal_absence(self) -> bool:
        self._watched.source.before_call("seal")
        self._watched.changes += 1
        return self._inner.seal_absence()


class WatchedOwner:
    """The handle the journal and scenarios use: the source's handle, watched (rule 2).

    ``prepared_durable(txn)`` (optional) says whether the journal's durable
    bytes hold ``txn``'s PREPARED record; a publish that may have written
    without it is appended to :attr:`s2_violations`.
    """

    def __init__(
        self,
        source: OwnerSource,
        prepared_durable: Callable[[str], bool] | None = None,
    ) -> None:
        self.source = source
        self.prepared_durable = prepared_durable
        self.rejected: set[str] = set()
        self.uncertain: dict[str, ArtifactRetentionClaim] = {}
        self.touched: set[str] = set()
        self.s2_violations: list[str] = []
        self.changes = 0  # calls that may have changed the store (for caching a view)
        self._raised: list[BaseException] = []  # the owner's "maybe written" errors

    def maybe_written(self, exc: BaseException) -> bool:
        """``exc`` is an error a publish or remove of this owner raised (not a rejection)."""
        return any(exc is seen for seen in self._raised)

    # -- faults, as the built-in owner names them ---------------------------------------

    def arm(self, fault: OwnerFault, times: int = 1) -> None:
        self.source.arm(fault, times)

    def heal(self) -> None:
        self.source.heal()

    # -- the owner protocol --------------------------------------------------------------

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> object:
        self.touched.add(transaction_id)
        durable = self.prepared_durable is None or self.prepared_durable(transaction_id)
        handle = self.source.handle
        self.changes += 1
        try:
            if self.source.before_call("publish") == "tombstone":
                handle.remove(transaction_id)
            value = handle.publish(transaction_id, claim)
        except ArtifactPublicationRejected:
            self.rejected.add(transaction_id)
            raise
        except OwnerConflictError:
            raise  # nothing was written (O1)
        except Exception as exc:
            self.uncertain[transaction_id] = claim
            self._raised.append(exc)
            if not durable:
                self.s2_violations.append(transaction_id)
            raise
        if not durable:
            self.s2_violations.append(transaction_id)
        return value

    def remove(self, transaction_id: str) -> None:
        self.touched.add(transaction_id)
        self.changes += 1
        handle = self.source.handle
        self.source.before_call("remove")
        try:
            handle.remove(transaction_id)
        except Exception as exc:
            self._raised.append(exc)
            raise

    @contextmanager
    def inspect_fenced(self, transaction_id: str) -> Iterator[OwnerObservation]:
        self.touched.add(transaction_id)
        handle = self.source.handle
        self.source.before_call("inspect")
        with handle.inspect_fenced(transaction_id) as observation:
            yield _WatchedObservation(observation, self)

    @contextmanager
    def census_fenced(self, source_ids: Sequence[str]) -> Iterator[Census]:
        """The handle's census (O9); a handle without one cannot tell (cleanup keeps all)."""
        census_fenced = getattr(self.source.handle, "census_fenced", None)
        if not callable(census_fenced):
            raise OwnerFaultUnsupported("census", "the owner offers no census (O9 is optional)")
        self.source.before_call("census")
        with census_fenced(source_ids) as census:
            yield census

    # -- what the owner holds, through the protocol ------------------------------------

    def view(self, transaction_ids: Iterable[str] = ()) -> ProtocolView:
        """Inspect every id asked about or touched so far (rule 1), on a healed handle."""
        return inspect_all(self.source.handle, {*transaction_ids, *self.touched})


def describe(view: ProtocolView) -> dict[str, Any]:
    """A short, printable form of a view (for notes and failure messages)."""
    return {t: s.kind for t, s in sorted(view.seen.items())}
