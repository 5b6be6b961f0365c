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
4. Transaction ids are deterministic (``kit-<check>-<name>``), so a failure
   reproduces with the same ids.
5. Waits are bounded: a contender is given :data:`HOLD_SECONDS` to show that
   a fence holds it back, and :data:`JOIN_SECONDS` to finish afterwards.  A
   slow machine can make a check wait longer, never pass wrongly: a fence
   that does not hold is seen whenever the contender is quick enough, and
   ``--repeat`` runs the check again.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import attrs

from ..domain import ArtifactRetentionClaim
from ..externalizer import ToolResultExternalizer
from ..journal import ArtifactRetentionJournal
from ..owner import ArtifactReferenceOwner, ObservedState, OwnerObservation
from .child import ChildOwner, observation_to_dict
from .harness import Capability, HarnessError, OwnerHarness, StoreFault, harness_import_path
from .outcome import Outcome, call
from .registry import CheckFailed, CheckSkipped

__all__ = ["Bench", "Background", "Snapshot", "HOLD_SECONDS", "JOIN_SECONDS", "expect"]

HOLD_SECONDS = 0.3
JOIN_SECONDS = 30.0
_CONTENT_MARK = "toolswap conformance artifact"


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


class Bench:
    """One check's store, handles and claims (see the module rules)."""

    def __init__(self, harness_cls: type[OwnerHarness], workdir: str, check_id: str) -> None:
        self.harness_cls = harness_cls
        self.check_id = check_id
        self.workdir = workdir
        os.makedirs(os.path.join(workdir, "store"), exist_ok=True)
        self.store_dir = os.path.join(workdir, "store")
        try:
            self.harness = harness_cls(self.store_dir)
        except Exception as exc:
            raise HarnessError(
                f"harness {harness_cls.__qualname__}: building it failed "
                f"({type(exc).__name__}: {exc})"
            ) from exc
        self._opened: list[ArtifactReferenceOwner] = []
        self._live: list[ArtifactReferenceOwner] = []
        self._children: list[ChildOwner] = []
        self._background: list[Background] = []
        self._scratch: _Scratch | None = None
        self._secrets: tuple[str, ...] | None = None
        self.notes: list[str] = []

    # -- capabilities -------------------------------------------------------------

    def unsupported_reason(self, capability: Capability) -> str | None:
        """Why the harness lacks ``capability``, or ``None`` if it offers it."""
        declared = self.harness_cls.unsupported.get(capability)
        if declared:
            return declared
        if capability is Capability.OTHER_PROCESS:
            path = harness_import_path(self.harness_cls)
            if path.startswith("__main__:") or "<locals>" in path:
                return (
                    f"a child process cannot import the harness ({path}); define it at the "
                    "top level of an importable module, or set its `import_path`"
                )
        method = {
            Capability.RESTART: "restart_store",
            Capability.FAULTS: "inject_fault",
        }.get(capability)
        if method is not None and getattr(self.harness_cls, method) is getattr(
            OwnerHarness, method
        ):
            return (
                f"the harness does not implement {method}() (implement it, or declare "
                f"Capability.{capability.name} in `unsupported` with a reason)"
            )
        return None

    def require(self, capability: Capability) -> None:
        reason = self.unsupported_reason(capability)
        if reason is not None:
            raise CheckSkipped(reason)

    # -- handles ------------------------------------------------------------------

    def open(self) -> ArtifactReferenceOwner:
        """A new handle from the harness (refused if it is one returned before)."""
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
        self._live.append(owner)
        return owner

    def close(self, owner: ArtifactReferenceOwner) -> None:
        if any(owner is live for live in self._live):
            self._live = [live for live in self._live if live is not owner]
            self.harness.close_owner(owner)

    def close_all(self) -> None:
        for owner in list(self._live):
            self.close(owner)

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
        self.require(Capability.FAULTS)
        self.harness.inject_fault(owner, fault)

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
        return f"kit-{self.check_id.lower()}-{name}"

    @property
    def scratch(self) -> _Scratch:
        """A scratch session with two real artifacts and a lease journal (made once)."""
        if self._scratch is None:
            session = os.path.join(self.workdir, "session")
            ext = ToolResultExternalizer(
                session, threshold_bytes=1, bash_threshold_chars=1, environ={}
            )
            refs = []
            for text in ("first", "second"):
                result = ext.externalize(f"{_CONTENT_MARK}: {text}\n".encode(), "conformance")
                assert result.artifact is not None  # the threshold is one byte
                refs.append(result.artifact)
            self._scratch = _Scratch(
                session=session,
                journal=ArtifactRetentionJournal(session),
                first=ArtifactRetentionClaim.from_memory_reference(refs[0].for_memory()),
                second=ArtifactRetentionClaim.from_memory_reference(refs[1].for_memory()),
                paths=tuple(ref.path for ref in refs),
            )
        return self._scratch

    @property
    def first(self) -> ArtifactRetentionClaim:
        return self.scratch.first

    @property
    def second(self) -> ArtifactRetentionClaim:
        return self.scratch.second

    @property
    def twin(self) -> ArtifactRetentionClaim:
        """Same source id and digest prefix as :attr:`first`, another full digest (O1)."""
        first = self.first
        tail = hashlib.sha256(first.content_sha256.encode()).hexdigest()
        digest = first.content_sha256[:12] + tail[12:]
        if digest == first.content_sha256:  # pragma: no cover - would need a fixed point
            digest = first.content_sha256[:12] + tail[12:][::-1]
        return ArtifactRetentionClaim(source_id=first.source_id, content_sha256=digest)

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
        if self._secrets is None:
            given: Sequence[str] = self.harness.secrets()
            scratch = self.scratch
            self._secrets = tuple(
                s
                for s in (*given, *scratch.paths, scratch.session, _CONTENT_MARK)
                if isinstance(s, str) and len(s) >= 4
            )
        return self._secrets

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
        scratch = self.scratch
        if secret in scratch.paths:
            return "an artifact path"
        if secret == scratch.session:
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
        stuck = [b for b in self._background if not b.wait(JOIN_SECONDS)]
        if stuck:
            raise CheckFailed(
                f"{len(stuck)} competing call(s) never returned from the adapter; "
                "their handles were left open"
            )
        try:
            self.close_all()
        finally:
            self.harness.destroy()
