"""The bench: what one check has in hand -- a fresh store, its handles, claims, a journal.

Rules
=====

1. A bench belongs to one run of one check.  It builds the harness with a new,
   empty work folder, opens handles only through :meth:`Bench.open`, and closes
   every handle, child process and background call when the check ends.
2. :meth:`Bench.open` refuses a harness whose ``open_owner`` returns an object
   it returned before (harness rule 2) or something that is not an owner.
3. Every observation, generation, outcome message and report that passes
   through the bench is scanned for the harness's secrets, the scratch
   session's paths and the artifacts' content (O7); a hit fails the running
   check, naming where it was seen but never the secret.
4. Transaction ids and identities come from the bench's drawer
   (:mod:`toolswap.testing.cases`): ``kit-<check>-<name>`` in the plain fixed
   example, ids at the edges of the domain in the edge example, anything the
   journal allows in a generated one.  The drawer records every value, so a
   failure reproduces with the same ids.  A check never needs real artifacts
   except through :attr:`Bench.journal`, which makes the scratch session hold
   exactly the drawn identities.
5. Waits are bounded: a contender is given :data:`HOLD_SECONDS` to show that
   a fence holds it back, and :data:`JOIN_SECONDS` to finish afterwards.  A
   slow machine can make a check wait longer, never pass wrongly: a fence
   that does not hold is seen whenever the contender is quick enough, and
   ``--repeat`` runs the check again.  Checks about time hold fences and delay
   store calls for longer than the harness's ``store_timeout``, and let time
   pass with the harness's clock (or, with ``slow``, for real).
6. A shared bench (``shared=True``) opens one handle only; every
   :meth:`Bench.open` returns a :class:`~toolswap.testing.shared.ThreadedView`
   of it, so the check drives one handle from several threads.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import attrs

from ..domain import ArtifactRetentionClaim
from ..externalizer import ToolResultExternalizer
from ..journal import ArtifactRetentionJournal
from ..journal_format import MAX_TRANSACTION_ID_LEN
from ..owner import ArtifactReferenceOwner, ObservedState, OwnerObservation
from .cases import CONTENT_MARK, Drawer, FixedDrawer, Identities, identity_variants
from .child import ChildOwner, observation_to_dict
from .faults import FaultPlan
from .harness import (
    CAPABILITY_METHODS,
    LEGACY_FAULTS,
    Capability,
    HarnessError,
    OwnerHarness,
    StoreFault,
    harness_import_path,
)
from .options import RunOptions
from .outcome import Outcome, call
from .registry import CheckFailed, CheckSkipped
from .shared import ThreadedView

__all__ = [
    "Bench",
    "Background",
    "Snapshot",
    "HOLD_SECONDS",
    "JOIN_SECONDS",
    "SLOW_WAIT_SECONDS",
    "expect",
]

HOLD_SECONDS = 0.3
JOIN_SECONDS = 30.0
SLOW_WAIT_SECONDS = 5.0
"""The longest real wait for time to pass, when the harness has no clock (``slow``)."""
FOREVER_SECONDS = 400 * 24 * 3600.0
"""How far the clock is advanced to stand for "forever" (more than a year)."""
_MARGIN_SECONDS = 0.5
_CONTENT_MARK = CONTENT_MARK


def expect(condition: bool, failure: str) -> None:
    """Fail the running check with ``failure`` unless ``condition`` holds."""
    if not condition:
        raise CheckFailed(failure)


@attrs.frozen(kw_only=True)
class Snapshot:
    """The fields of one observation, copied while its fence was held."""

    transaction_id: Any
    state: Any
    source_id: Any
    content_sha256: Any
    generation: Any
    sealed: Any

    @classmethod
    def of(cls, observation: OwnerObservation) -> Snapshot:
        return cls(
            transaction_id=observation.transaction_id,
            state=observation.state,
            source_id=observation.source_id,
            content_sha256=observation.content_sha256,
            generation=observation.generation,
            sealed=observation.sealed,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Snapshot:
        """A snapshot sent by a child process (state as its value string)."""
        return cls(
            transaction_id=data["transaction_id"],
            state=_state(data["state"]),
            source_id=data["source_id"],
            content_sha256=data["content_sha256"],
            generation=data["generation"],
            sealed=data["sealed"],
        )

    @property
    def identity(self) -> tuple[Any, Any]:
        return (self.source_id, self.content_sha256)

    def is_published(self, claim: ArtifactRetentionClaim) -> bool:
        return self.state == ObservedState.PUBLISHED and self.identity == (
            claim.source_id,
            claim.content_sha256,
        )

    @property
    def is_tombstone(self) -> bool:
        return self.state == ObservedState.ABSENT and self.sealed is True

    @property
    def is_fresh_absence(self) -> bool:
        return self.state == ObservedState.ABSENT and self.sealed is False

    def describe(self) -> str:
        """A short, secret-free account: state, sealed, whether there is an identity."""
        state = getattr(self.state, "value", self.state)
        if state == "PUBLISHED":
            return "PUBLISHED"
        if state == "ABSENT":
            return "ABSENT (sealed)" if self.sealed is True else "ABSENT (not sealed)"
        return str(state) if isinstance(state, str) else type(self.state).__name__


def _state(value: str) -> Any:
    try:
        return ObservedState(value)
    except ValueError:
        return value


class Background:
    """One call running in a thread (a competing caller in this process)."""

    def __init__(self, function: Callable[[], Any]) -> None:
        self._function = function
        self.outcome: Outcome | None = None
        self.started = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        self.started.set()
        self.outcome = call(self._function)

    def wait(self, timeout: float) -> bool:
        """True once the call has finished (within ``timeout``)."""
        self._thread.join(timeout)
        return not self._thread.is_alive()


@attrs.define
class _Scratch:
    session: str
    journal: ArtifactRetentionJournal
    first: ArtifactRetentionClaim
    second: ArtifactRetentionClaim
    paths: tuple[str, ...]


def build_harness(harness_cls: type[OwnerHarness], folder: str) -> OwnerHarness:
    """The harness on ``folder``; a constructor that raises is one HarnessError line.

    The exception's text is shown only when it cannot carry a secret (no path,
    URL, credential or host): the kit does not know the harness's secrets
    before the harness exists.
    """
    try:
        return harness_cls(folder)
    except HarnessError:
        raise
    except (Exception, SystemExit) as exc:
        raise HarnessError(
            f"harness {harness_cls.__qualname__}: building it failed ({describe_error(exc)})"
        ) from exc


def describe_error(exc: BaseException) -> str:
    """``Type: text``, or only the type when the text may carry a secret (and say so)."""
    if isinstance(exc, SystemExit):
        return f"it tried to exit the process: SystemExit({exc.code!r})"
    text = " ".join(str(exc).split())
    if text and _harmless(text):
        return f"{type(exc).__name__}: {text}"
    if not text:
        return type(exc).__name__
    return (
        f"{type(exc).__name__}; its message is not shown because it may carry a secret "
        "(a path, a URL or a credential): build the harness yourself to read it"
    )


def _harmless(text: str) -> bool:
    return len(text) <= 160 and not any(mark in text for mark in ("/", "\\", "@", "=", "://"))


class Bench:
    """One check's store, handles and claims (see the module rules)."""

    def __init__(
        self,
        harness_cls: type[OwnerHarness],
        workdir: str,
        check_id: str,
        *,
        drawer: Drawer | None = None,
        options: RunOptions | None = None,
        shared: bool = False,
    ) -> None:
        self.harness_cls = harness_cls
        self.check_id = check_id
        self.workdir = workdir
        self.drawer = drawer if drawer is not None else FixedDrawer(check_id)
        self.options = options if options is not None else RunOptions()
        self.shared = shared
        os.makedirs(os.path.join(workdir, "store"), exist_ok=True)
        self.store_dir = os.path.join(workdir, "store")
        self.harness = build_harness(harness_cls, self.store_dir)
        self._opened: list[ArtifactReferenceOwner] = []
        self._live: list[ArtifactReferenceOwner] = []
        self._shared_handle: ArtifactReferenceOwner | None = None
        self._children: list[ChildOwner] = []
        self._background: list[Background] = []
        self._scratch: _Scratch | None = None
        self._identities: Identities | None = None
        self._txns: dict[str, str] = {}
        self._harness_secrets: tuple[str, ...] | None = None
        self.notes: list[str] = []
        # Drawn now, in the check's own thread: a contender thread must never draw.
        self.identities  # noqa: B018

    # -- capabilities -------------------------------------------------------------

    def unsupported_reason(self, capability: Capability) -> str | None:
        """Why the harness lacks ``capability``, or ``None`` if it offers it."""
        return unsupported_reason(self.harness_cls, capability)

    def require(self, capability: Capability) -> None:
        reason = self.unsupported_reason(capability)
        if reason is not None:
            raise CheckSkipped(reason)

    def offers(self, capability: Capability) -> bool:
        return self.unsupported_reason(capability) is None

    # -- handles ------------------------------------------------------------------

    def open(self) -> ArtifactReferenceOwner:
        """A new handle from the harness (refused if it is one returned before).

        On a shared bench: a new thread's view of the one shared handle.
        """
        if self.shared:
            if self._shared_handle is None:
                self._shared_handle = self._open_new()
            view = ThreadedView(self._shared_handle, f"view {len(self._live)}")
            self._live.append(view)
            return view
        owner = self._open_new()
        self._live.append(owner)
        return owner

    def _open_new(self) -> ArtifactReferenceOwner:
        owner = self.harness.open_owner()
        if any(owner is seen for seen in self._opened):
            raise HarnessError(
                f"harness {self.harness_cls.__qualname__}: open_owner() returned the same "
                "object twice; it must open a new handle on the same store every call"
            )
        for method in ("publish", "remove", "inspect_fenced"):
            if not callable(getattr(owner, method, None)):
                raise HarnessError(
                    f"harness {self.harness_cls.__qualname__}: open_owner() returned a "
                    f"{type(owner).__name__}, which has no {method}() (not an owner)"
                )
        self._opened.append(owner)
        return owner

    def close(self, owner: ArtifactReferenceOwner) -> None:
        if any(owner is live for live in self._live):
            self._live = [live for live in self._live if live is not owner]
            if isinstance(owner, ThreadedView):
                owner.stop()  # the shared handle stays open until close_all
            else:
                self.harness.close_owner(owner)

    def close_all(self) -> None:
        for owner in list(self._live):
            self.close(owner)
        shared, self._shared_handle = self._shared_handle, None
        if shared is not None:
            self.harness.close_owner(shared)

    def reopen(self) -> ArtifactReferenceOwner:
        """Close every handle and open a new one (durability across a new client)."""
        self.close_all()
        return self.open()

    def restart(self) -> ArtifactReferenceOwner:
        """Close every handle, restart the store for real, open a new handle."""
        self.require(Capability.RESTART)
        self.close_all()
        self.harness.restart_store()
        return self.open()

    def fault(self, owner: ArtifactReferenceOwner, fault: StoreFault) -> None:
        """Arm ``fault`` the way :meth:`OwnerHarness.inject_fault` does (first or last call)."""
        if fault not in LEGACY_FAULTS:
            raise ValueError(f"{fault} is armed through a fault plan (Bench.arm)")
        self.require(Capability.FAULTS)
        self.harness.inject_fault(_underlying(owner), fault)

    # -- the fault plan (Capability.FAULT_PLAN) ---------------------------------------

    def plan(self, owner: ArtifactReferenceOwner) -> FaultPlan:
        self.require(Capability.FAULT_PLAN)
        plan = self.harness.fault_plan(_underlying(owner))
        if not isinstance(plan, FaultPlan):
            raise HarnessError(
                f"harness {self.harness_cls.__qualname__}: fault_plan() returned a "
                f"{type(plan).__name__}, not a toolswap.testing.faults.FaultPlan"
            )
        return plan

    def arm(
        self,
        owner: ArtifactReferenceOwner,
        fault: StoreFault,
        *,
        call: int | None = None,
        seconds: float = 0.0,
    ) -> FaultPlan:
        """Arm ``fault`` on the handle's ``call``-th store call from now (see FaultPlan)."""
        plan = self.plan(owner)
        plan.arm(fault, call=call, seconds=seconds)
        return plan

    def fired(self, plan: FaultPlan, what: str) -> None:
        """Fail (a harness defect) if a fault armed for ``what`` never fired."""
        unfired = plan.unfired()
        plan.disarm()
        if unfired:
            raise CheckFailed(
                f"{unfired[0].describe()} was armed for {what} but never fired "
                f"(the handle made {plan.calls} store calls in all): either the harness "
                "consults its fault plan where the adapter's store calls do not pass (a "
                "harness defect), or the adapter answered without asking its store"
            )

    def store_calls(self, operation: Callable[[ArtifactReferenceOwner], object]) -> list[bool]:
        """Run ``operation`` on a new handle; which of its store calls were reads, in order."""
        owner = self.open()
        plan = self.plan(owner)
        before = plan.calls
        operation(owner)
        log = plan.log[before:]
        self.close(owner)
        if not log:
            raise CheckFailed(
                "an operation made no store call that the harness's fault plan saw: either the "
                "harness consults its plan somewhere the adapter's store calls do not pass (a "
                "harness defect: put the hook under the adapter, at its store calls), or the "
                "adapter answered without asking its store"
            )
        return [c.reads for c in log]

    # -- time -------------------------------------------------------------------------------

    @property
    def store_timeout(self) -> float | None:
        value = self.harness_cls.store_timeout
        return float(value) if value is not None else None

    def outlasting(self, floor: float = 1.0) -> float:
        """Seconds that outlast every time-out the harness declares (at least ``floor``)."""
        return max(self.store_timeout or 0.0, floor) + _MARGIN_SECONDS

    def require_time(self) -> None:
        """Skip now (before any set-up) unless time can pass: a clock, or a slow run."""
        reason = self.unsupported_reason(Capability.CLOCK)
        if reason is not None and not self.options.slow:
            declared = self.harness_cls.unsupported.get(Capability.CLOCK)
            raise CheckSkipped(
                f"{declared} (run with --slow to let time pass for real)"
                if declared
                else f"time must pass for this check: implement advance_clock() "
                f"(Capability.CLOCK), or run with --slow to wait for real ({reason})"
            )

    def pass_time(self, seconds: float = FOREVER_SECONDS) -> str:
        """Let ``seconds`` pass for the adapter: its clock, or (``slow``) a real wait.

        Skips the check when the harness has no clock and the run is not slow.
        Returns how the time passed, for the check's message.
        """
        self.require_time()
        if self.offers(Capability.CLOCK):
            self.harness.advance_clock(seconds)
            return f"the harness's clock advanced by {_duration(seconds)}"
        wait = min(seconds, max(SLOW_WAIT_SECONDS, self.outlasting()))
        time.sleep(wait)
        return f"{wait:.1f} s passed for real (no clock: --slow)"

    def child(self) -> ChildOwner:
        """A handle on the same store in another process."""
        self.require(Capability.OTHER_PROCESS)
        child = ChildOwner(harness_import_path(self.harness_cls), self.store_dir)
        self._children.append(child)
        return child

    def in_thread(self, function: Callable[[], Any]) -> Background:
        background = Background(function)
        self._background.append(background)
        return background

    # -- ids and claims -----------------------------------------------------------

    def txn(self, name: str) -> str:
        """The transaction id the check calls ``name`` (drawn once, then the same)."""
        if name not in self._txns:
            self._txns[name] = self.drawer.txn(name, tuple(self._txns.values()))
        return self._txns[name]

    def txns(self, name: str, count: int) -> list[str]:
        """``count`` distinct ids: ``name``'s drawn id and ids built from it.

        One draw, not ``count``: Hypothesis bounds what one example may draw, and a
        check that needs a hundred ids needs their number, not their variety.
        """
        base = self.txn(name)
        stem = base[: MAX_TRANSACTION_ID_LEN - 8]
        taken = set(self._txns.values())
        made = [base]
        for index in range(1, count):
            txn = f"{stem}~{index}"
            while txn in taken:
                txn += "~"
            self._txns[f"{name}~{index}"] = txn
            taken.add(txn)
            made.append(txn)
        return made

    def family(self, txn: str) -> tuple[str, ...]:
        """Ids a normalising adapter would confuse with ``txn``, none used by this check."""
        taken = set(self._txns.values())
        return tuple(t for t in self.drawer.family(txn) if t not in taken)

    def integer(self, label: str, low: int, high: int, fixed: int) -> int:
        return self.drawer.integer(label, low, high, fixed)

    @property
    def identities(self) -> Identities:
        if self._identities is None:
            self._identities = self.drawer.identities()
        return self._identities

    @property
    def first(self) -> ArtifactRetentionClaim:
        return self.identities.claim(0)

    @property
    def second(self) -> ArtifactRetentionClaim:
        return self.identities.claim(1)

    @property
    def twin(self) -> ArtifactRetentionClaim:
        """Same source id and digest prefix as :attr:`first`, another full digest (O1)."""
        return identity_variants(self.first)["other-digest-same-prefix"]

    def alike(self, claim: ArtifactRetentionClaim) -> dict[str, ArtifactRetentionClaim]:
        """Claims one field away from ``claim`` (see :func:`.cases.identity_variants`)."""
        return identity_variants(claim)

    @property
    def scratch(self) -> _Scratch:
        """A scratch session holding :attr:`first` and :attr:`second` for real, with a journal."""
        if self._scratch is None:
            drawn = self.identities
            session = os.path.join(self.workdir, "session")
            ext = ToolResultExternalizer(
                session,
                session_id=drawn.session,
                threshold_bytes=1,
                bash_threshold_chars=1,
                environ={},
            )
            refs = []
            for index in (0, 1):
                result = ext.externalize(drawn.content(index), "conformance")
                assert result.artifact is not None  # the threshold is one byte
                refs.append(result.artifact)
            claims = [ArtifactRetentionClaim.from_memory_reference(r.for_memory()) for r in refs]
            if claims != [self.first, self.second]:  # pragma: no cover - the kit's own bug
                raise RuntimeError("the scratch session does not hold the drawn identities")
            self._scratch = _Scratch(
                session=session,
                journal=ArtifactRetentionJournal(session, session_id=drawn.session),
                first=claims[0],
                second=claims[1],
                paths=tuple(ref.path for ref in refs),
            )
        return self._scratch

    @property
    def journal(self) -> ArtifactRetentionJournal:
        return self.scratch.journal

    # -- calls ----------------------------------------------------------------------

    def publish(
        self, owner: ArtifactReferenceOwner, txn: str, claim: ArtifactRetentionClaim
    ) -> Outcome:
        return self.scanned(call(lambda: owner.publish(txn, claim)), "a publish error")

    def remove(self, owner: ArtifactReferenceOwner, txn: str) -> Outcome:
        return self.scanned(call(lambda: owner.remove(txn)), "a remove error")

    def observe(self, owner: ArtifactReferenceOwner, txn: str, *, scan: bool = True) -> Snapshot:
        """Enter a fence, copy the observation, leave.  Entering must succeed.

        The copy is scanned for secrets after the fence ended (``scan=False``:
        not at all), so a leak is reported as a leak, not as a failed fence.
        """

        def look() -> tuple[Snapshot, dict[str, Any]]:
            with owner.inspect_fenced(txn) as observation:
                return Snapshot.of(observation), observation_to_dict(observation)

        outcome = self.scanned(call(look), "a fence error") if scan else call(look)
        if not outcome.ok:
            raise CheckFailed(
                f"a fence over {txn!r} {outcome.describe()} with nothing wrong with the store"
            )
        snapshot: Snapshot = outcome.value[0]
        shown: dict[str, Any] = outcome.value[1]
        if scan:
            self.scan(shown["repr"], "an observation")
            for name in ("source_id", "content_sha256", "generation"):
                self.scan(str(shown[name]), f"an observation's {name}")
        return snapshot

    def published(self, name: str = "t") -> tuple[ArtifactReferenceOwner, str]:
        """Set-up: a new handle and the id ``name`` holding :attr:`first`, published by it."""
        owner, txn = self.open(), self.txn(name)
        outcome = self.publish(owner, txn, self.first)
        expect(outcome.ok, f"setting up: publish of a never-seen id {outcome.describe()}")
        return owner, txn

    def tombstone(self, owner: ArtifactReferenceOwner, txn: str) -> Snapshot:
        """Set-up: remove a never-seen id, which must leave a tombstone; its observation.

        A failure here names O4's check, not the sentence under test.
        """
        expect(self.remove(owner, txn).ok, "setting up: remove of a never-seen id failed")
        seen = self.observe(owner, txn)
        expect(
            seen.is_tombstone,
            f"setting up: remove of a never-seen id left {seen.describe()}, not a tombstone "
            "(see O4.remove-never-seen-tombstones)",
        )
        return seen

    @contextmanager
    def fenced(self, owner: ArtifactReferenceOwner, txn: str) -> Iterator[OwnerObservation]:
        """``inspect_fenced`` with the observation scanned on entry."""
        with owner.inspect_fenced(txn) as observation:
            self.snapshot(observation)
            yield observation

    def snapshot(self, observation: OwnerObservation) -> Snapshot:
        self.scan(observation_to_dict(observation)["repr"], "an observation")
        for name in ("source_id", "content_sha256", "generation"):
            self.scan(str(getattr(observation, name)), f"an observation's {name}")
        return Snapshot.of(observation)

    def seal(self, observation: OwnerObservation) -> Outcome:
        return self.scanned(call(observation.seal_absence), "a seal error")

    def child_snapshot(self, event: dict[str, Any]) -> Snapshot:
        data = event["observation"]
        self.scan(data["repr"], "an observation in the child process")
        return Snapshot.from_dict(data)

    # -- O7 -----------------------------------------------------------------------------

    @property
    def secrets(self) -> tuple[str, ...]:
        if self._harness_secrets is None:
            given: Sequence[str] = self.harness.secrets()
            self._harness_secrets = tuple(given)
        scratch = self._scratch
        local = (*scratch.paths, scratch.session) if scratch is not None else ()
        return tuple(
            s
            for s in (*self._harness_secrets, *local, _CONTENT_MARK)
            if isinstance(s, str) and len(s) >= 4
        )

    def scan(self, text: str, where: str) -> None:
        """Fail the check (O7) if ``text`` shows a secret, a path or content."""
        for secret in self.secrets:
            if secret in text:
                raise CheckFailed(f"O7: {where} reveals {self._label(secret)}")

    def scanned(self, outcome: Outcome, where: str) -> Outcome:
        if outcome.message:
            self.scan(outcome.message, where)
        return outcome

    def _label(self, secret: str) -> str:
        scratch = self._scratch
        if scratch is not None and secret in scratch.paths:
            return "an artifact path"
        if scratch is not None and secret == scratch.session:
            return "the session folder"
        if secret == _CONTENT_MARK:
            return "artifact content"
        return "one of the harness's secrets()"

    def redact(self, text: str) -> str:
        for secret in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(secret, "<secret>")
        return text

    # -- the end ------------------------------------------------------------------------

    def finish(self) -> None:
        """Close every child, wait for every competing call, close every handle, drop the store.

        A competing call still inside the adapter after :data:`JOIN_SECONDS`
        keeps its handles: closing a connection under a thread that uses it
        can crash the whole process (SQLite does), which is worse than a leak.
        """
        for child in self._children:
            child.close()
        self._children.clear()
        stuck = [b for b in self._background if not b.wait(self._join_seconds())]
        if stuck:
            raise CheckFailed(
                f"{len(stuck)} competing call(s) never returned from the adapter; "
                "their handles were left open"
            )
        try:
            self.close_all()
        finally:
            self.harness.destroy()

    def _join_seconds(self) -> float:
        return JOIN_SECONDS + (self.store_timeout or 0.0)


def unsupported_reason(harness_cls: type[OwnerHarness], capability: Capability) -> str | None:
    """Why ``harness_cls`` lacks ``capability``, or ``None`` if it offers it (harness rule 4)."""
    declared = harness_cls.unsupported.get(capability)
    if declared:
        return declared
    if capability is Capability.OTHER_PROCESS:
        path = harness_import_path(harness_cls)
        if path.startswith("__main__:") or "<locals>" in path:
            return (
                f"a child process cannot import the harness ({path}); define it at the "
                "top level of an importable module, or set its `import_path`"
            )
    if capability is Capability.SHARED_HANDLE and not harness_cls.shared_handles:
        return (
            "the harness does not say one handle may be shared by threads (set "
            "`shared_handles = True` when the adapter's docstring allows it)"
        )
    method = CAPABILITY_METHODS.get(capability)
    if capability is Capability.FAULTS and _overrides(harness_cls, "fault_plan"):
        method = None  # the default inject_fault arms the plan
    if method is not None and not _overrides(harness_cls, method):
        return (
            f"the harness does not implement {method}() (implement it, or declare "
            f"Capability.{capability.name} in `unsupported` with a reason)"
        )
    return None


def _underlying(owner: ArtifactReferenceOwner) -> ArtifactReferenceOwner:
    """The harness's own handle behind a shared view (faults are armed on it)."""
    return owner.shared if isinstance(owner, ThreadedView) else owner


def _overrides(harness_cls: type[OwnerHarness], method: str) -> bool:
    return getattr(harness_cls, method) is not getattr(OwnerHarness, method)


def _duration(seconds: float) -> str:
    if seconds >= 86400:
        return f"{seconds / 86400:.0f} days"
    return f"{seconds:.1f} s"
