"""The model-based owner machine: several handles of any adapter against the spec's owner model.

A Hypothesis ``RuleBasedStateMachine`` drives up to three handles (``h0`` ..
``h2``) of the adapter an :class:`~toolswap.testing.harness.OwnerHarness`
opens, over four transaction ids (``t0`` .. ``t3``) and three identities
(``A``, ``B`` and ``A-twin``: the same source id and 12-hex digest prefix as
``A`` but another full digest, hence another identity, O1).  Every answer of the
adapter is compared with ``toolswap.spec.owner`` (``spec/owner.py``).

Rules
=====

1. One Hypothesis example is one fresh store: a new harness over a new work
   folder under the caller's root; teardown closes every handle, calls
   ``destroy()`` and removes the folder.
2. Handles open lazily: a handle's first use (and its first use after
   ``close_handle`` or ``restart``) opens a new one with ``open_owner()``.  A
   handle that was used under a store fault is closed right after, because a
   fault may still be armed if the adapter never made the store call it waited
   for.
3. ``restart`` runs only when the harness offers RESTART, the ``under_fault``
   rule only when it offers FAULTS (implemented and not declared unsupported).
4. The machine runs one operation at a time: it tests the promises about
   results, durability, freshness across handles, identities and
   generations, not contention (the kit's checks do that with threads and
   processes).  A quiet store must answer definitely: an UNKNOWN observation
   with no fault armed fails the run.
5. Every failure is an :class:`OwnerMachineFailure` whose message names the
   step, what the adapter did, what the model expected and the promise.

Refinement mapping (adapter promises onto the spec model)
=========================================================

* An id's model is an ``OwnerRecord`` (ABSENT / PUBLISHED / TOMBSTONED, an
  abstract generation, the digest of its identity: A=1, B=2, A-twin=3).
* ``publish(id, claim)`` is the spec's PUBLISH.  REFUSED (a tombstone) means
  ``ArtifactPublicationRejected`` and nothing written (O3).  The spec's NOOP on a
  PUBLISHED id splits by identity: the same identity returns normally with the
  generation unchanged; another identity raises ``OwnerConflictError`` and
  changes nothing (O1).  APPLIED returns normally.
* ``remove(id)`` is the spec's REMOVE, which leaves a tombstone as O4
  promises (a never-seen id is tombstoned too).
* ``inspect_fenced(id)`` is the spec's ``observe``: the state, ``sealed``, and
  the identity fields (the claim of the record's digest when PUBLISHED, both
  ``None`` when ABSENT).
* ``seal_absence()`` is the spec's ``seal`` on the observed generation: SEALED
  means ``True``; STALE or ALREADY_SEALED mean ``False`` and nothing written (a
  second seal on one observation may also raise ``UsageError``, O6).  A seal on
  a PUBLISHED, sealed or UNKNOWN observation, or after its block ended, must
  raise ``UsageError`` and write nothing.
* Generations: per id, the machine keeps a bijection between the model's
  abstract generations and the concrete generations the adapter showed.  The
  same abstract generation must always show the same value (nothing durable
  changed, so the generation must not move) and different abstract generations
  different values (it changes on every durable change and is never reused,
  across restart too).
* Store faults: an operation under a fault is "maybe applied" unless its
  outcome says otherwise, and an adapter may retry internally, so the model
  keeps a **set** of possible records per id.  A normal return means applied;
  ``ArtifactPublicationRejected`` means tombstoned and nothing written (O2: it
  is consistent only with records that are tombstoned); ``OwnerConflictError``
  means another identity held the id; any other exception (and any exception
  from ``remove``, O4) keeps both the old and the applied record.  The next
  observation narrows the set.  Under a fault a fence may raise or answer
  UNKNOWN, but an ABSENT or PUBLISHED answer must match one of the possible
  records (O8: in doubt, UNKNOWN, never ABSENT).

Entry points: :func:`owner_machine` (a machine class bound to a harness; run it
as ``owner_machine(MyHarness, root).TestCase``) and :func:`run_owner_machine`
(bounded, silent, returns a :class:`MachineResult`).  This module imports
Hypothesis; nothing else in ``toolswap.testing`` imports it at import time.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import types
from collections.abc import Callable, Iterable, Mapping
from contextlib import ExitStack
from typing import Any, ClassVar, NoReturn, cast

import attrs
import hypothesis
from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule, run_state_machine_as_test

from ..domain import ArtifactRetentionClaim
from ..errors import UsageError
from ..owner import (
    ArtifactPublicationRejected,
    ArtifactReferenceOwner,
    Generation,
    ObservedState,
    OwnerConflictError,
    OwnerObservation,
)
from ..spec import owner as spec
from .bench import unsupported_reason
from .harness import LEGACY_FAULTS, Capability, OwnerHarness, StoreFault

# Typed differently across Hypothesis releases; called through Any on purpose.
_run_as_test: Any = run_state_machine_as_test

__all__ = [
    "MachineResult",
    "OwnerMachine",
    "OwnerMachineFailure",
    "owner_machine",
    "run_owner_machine",
]

HANDLES = ("h0", "h1", "h2")
TXNS = ("t0", "t1", "t2", "t3")
IDENTITIES = ("A", "B", "A-twin")
SEALS = ("no", "once", "twice", "after")
# Half the fences only look: every seal buries an id for good, and a run whose
# ids are all tombstoned early tests little else.
_SEAL = st.one_of(st.just("no"), st.sampled_from(SEALS[1:]))
FAULT_OPS = (
    *(f"publish {identity}" for identity in IDENTITIES),
    "remove",
    "fence",
    "fence+seal",
    "fence+seal twice",
)
FAULTS = tuple(fault.value for fault in LEGACY_FAULTS)

_PREFIX_A = "a1b2c3d4e5f6"
_PREFIX_B = "0badc0ffee42"
CLAIMS: Mapping[str, ArtifactRetentionClaim] = {
    "A": ArtifactRetentionClaim(
        source_id=f"artifact:kit:tool_result_001.txt:{_PREFIX_A}",
        content_sha256=_PREFIX_A + "1" * 52,
    ),
    "B": ArtifactRetentionClaim(
        source_id=f"artifact:kit:tool_result_002.txt:{_PREFIX_B}",
        content_sha256=_PREFIX_B + "2" * 52,
    ),
    # Same source id and digest prefix as A; only the full digest differs (O1).
    "A-twin": ArtifactRetentionClaim(
        source_id=f"artifact:kit:tool_result_001.txt:{_PREFIX_A}",
        content_sha256=_PREFIX_A + "3" * 52,
    ),
}
_DIGEST = {"A": 1, "B": 2, "A-twin": 3}
_NAME_OF_DIGEST = {digest: name for name, digest in _DIGEST.items()}
_NAME_OF_IDENTITY: dict[tuple[str | None, str | None], str] = {
    (claim.source_id, claim.content_sha256): name for name, claim in CLAIMS.items()
}

# What an operation did, as the model distinguishes it.
_OK, _REJECTED, _CONFLICT, _USAGE, _ERROR = "ok", "rejected", "conflict", "usage", "error"
_SAYS = {
    _OK: "returned normally",
    _REJECTED: "raised ArtifactPublicationRejected",
    _CONFLICT: "raised OwnerConflictError",
}
_EXPECTS = {
    _OK: "return normally",
    _REJECTED: "raise ArtifactPublicationRejected",
    _CONFLICT: "raise OwnerConflictError",
}
_WHY_PUBLISH = {
    _OK: "publishing onto an empty id, or the identity the id already holds, returns normally (O1)",
    _REJECTED: "a tombstone refuses every later publish and writes nothing (O3)",
    _CONFLICT: "another identity under a published id raises OwnerConflictError and "
    "changes nothing; A-twin shares A's source id and digest prefix but not its "
    "full digest, so it is another identity (O1)",
}


class OwnerMachineFailure(AssertionError):
    """The adapter broke an owner promise; the message names the step and the promise."""


@attrs.frozen(kw_only=True)
class MachineResult:
    """The outcome of :func:`run_owner_machine`.

    ``summary`` is one line; ``failure`` (``None`` when passed) holds the
    shrunk steps Hypothesis reproduced, then the error text.
    """

    passed: bool
    summary: str
    failure: str | None = None


@attrs.define
class _IdModel:
    """What the machine knows of one id: the possible records and the generation bijection."""

    records: frozenset[spec.OwnerRecord] = frozenset({spec.OwnerRecord()})
    concrete: dict[int, Generation] = attrs.field(factory=dict)
    abstract: dict[Generation, int] = attrs.field(factory=dict)

    def generation_fits(self, abstract: int, concrete: Generation) -> bool:
        return self.concrete.get(abstract, concrete) == concrete and (
            self.abstract.get(concrete, abstract) == abstract
        )

    def bind(self, abstract: int, concrete: Generation) -> None:
        self.concrete[abstract] = concrete
        self.abstract[concrete] = abstract


def _classify(exc: BaseException | None) -> str:
    if exc is None:
        return _OK
    if isinstance(exc, ArtifactPublicationRejected):
        return _REJECTED
    if isinstance(exc, OwnerConflictError):
        return _CONFLICT
    if isinstance(exc, UsageError):
        return _USAGE
    return _ERROR


def _did(outcome: str, exc: BaseException | None) -> str:
    if outcome in _SAYS:
        return _SAYS[outcome]
    return f"raised {type(exc).__name__}: {exc}"


def _expect_publish(record: spec.OwnerRecord, digest: int) -> tuple[str, spec.OwnerRecord]:
    after, result = spec.apply(record, spec.OwnerAction.PUBLISH, digest)
    if result is spec.OwnerResult.REFUSED:
        return _REJECTED, record
    if result is spec.OwnerResult.NOOP and record.digest != digest:
        return _CONFLICT, record
    return _OK, after


def _expect_remove(record: spec.OwnerRecord) -> tuple[str, spec.OwnerRecord]:
    removed, _ = spec.apply(record, spec.OwnerAction.REMOVE)  # O4's tombstone: rule 4
    return _OK, removed


class OwnerMachine(RuleBasedStateMachine):
    """The machine; bind it to a harness with :func:`owner_machine` before running it."""

    harness_cls: ClassVar[type[OwnerHarness] | None] = None
    workroot: ClassVar[str | None] = None

    def __init__(self) -> None:
        super().__init__()
        harness_cls, workroot = type(self).harness_cls, type(self).workroot
        if harness_cls is None or workroot is None:
            raise UsageError("bind the machine first: owner_machine(harness_cls, workroot)")
        os.makedirs(workroot, exist_ok=True)
        self._workdir = tempfile.mkdtemp(prefix="owner-machine-", dir=workroot)
        self._failed = False
        try:
            self._harness = harness_cls(self._workdir)
            self._secrets = tuple(s for s in self._harness.secrets() if s)
        except BaseException:
            shutil.rmtree(self._workdir, ignore_errors=True)
            raise
        self._can_restart = unsupported_reason(harness_cls, Capability.RESTART) is None
        self._can_fault = unsupported_reason(harness_cls, Capability.FAULTS) is None
        self._slow_restart = harness_cls.slow_restart
        self._restarted = False
        self._handles: dict[str, ArtifactReferenceOwner | None] = dict.fromkeys(HANDLES)
        self._ids = {txn: _IdModel() for txn in TXNS}
        # The last call that touched each id, and its handle, for failure messages.
        self._last: dict[str, str] = {}
        self._last_handle: dict[str, str] = {}

    # -- rules ------------------------------------------------------------------

    @rule(
        handle=st.sampled_from(HANDLES),
        txn=st.sampled_from(TXNS),
        identity=st.sampled_from(IDENTITIES),
    )
    def publish(self, handle: str, txn: str, identity: str) -> None:
        self._publish(handle, txn, identity, fault=None)

    @rule(handle=st.sampled_from(HANDLES), txn=st.sampled_from(TXNS))
    def remove(self, handle: str, txn: str) -> None:
        self._remove(handle, txn, fault=None)

    @rule(handle=st.sampled_from(HANDLES), txn=st.sampled_from(TXNS), seal=_SEAL)
    def fence(self, handle: str, txn: str, seal: str) -> None:
        """Fence and observe; ``seal``: no, once, twice (O6's compare-and-set), after the block."""
        self._fence(handle, txn, seal, fault=None)

    @rule(handle=st.sampled_from(HANDLES))
    def close_handle(self, handle: str) -> None:
        """Close the handle; its next use opens a new one."""
        owner = self._handles[handle]
        if owner is not None:
            self._handles[handle] = None
            self._close(handle, owner)

    # A store that restarts slowly (a database server) gets one restart per
    # example: enough to see what a restart keeps, at a bounded cost.
    @precondition(lambda self: self._can_restart and not (self._slow_restart and self._restarted))
    @rule()
    def restart(self) -> None:
        """Close every handle, then restart the store for real."""
        self._restarted = True
        for name, owner in list(self._handles.items()):
            if owner is not None:
                self._handles[name] = None
                self._close(name, owner)
        try:
            self._harness.restart_store()
        except Exception as exc:
            self._fail(f"restart_store() raised {type(exc).__name__}: {exc}", exc)

    @precondition(lambda self: self._can_fault)
    @rule(
        handle=st.sampled_from(HANDLES),
        fault=st.sampled_from(FAULTS),
        txn=st.sampled_from(TXNS),
        op=st.sampled_from(FAULT_OPS),
    )
    def under_fault(self, handle: str, fault: str, txn: str, op: str) -> None:
        """Arm ``fault`` on the handle, run ``op`` on ``txn`` through it, then close it."""
        self._arm(handle, fault)
        try:
            verb, _, detail = op.partition(" ")
            if verb == "publish":
                self._publish(handle, txn, detail, fault=fault)
            elif verb == "remove":
                self._remove(handle, txn, fault=fault)
            else:
                seal = {"": "no", "+seal": "once", "+seal twice": "twice"}[op[len("fence") :]]
                self._fence(handle, txn, seal, fault=fault)
        finally:
            self._retire(handle)

    def teardown(self) -> None:
        problems: list[str] = []
        for name, owner in self._handles.items():
            if owner is None:
                continue
            try:
                self._harness.close_owner(owner)
            except Exception as exc:
                problems.append(f"closing {name} raised {type(exc).__name__}: {exc}")
        self._handles = dict.fromkeys(HANDLES)
        try:
            self._harness.destroy()
        except Exception as exc:
            problems.append(f"destroy() raised {type(exc).__name__}: {exc}")
        finally:
            shutil.rmtree(self._workdir, ignore_errors=True)
        # After a failure, teardown stays quiet so the first failure is the one reported.
        if problems and not self._failed:
            self._fail("teardown: " + "; ".join(problems))

    # -- operations -----------------------------------------------------------

    def _publish(self, handle: str, txn: str, identity: str, fault: str | None) -> None:
        owner = self._handle(handle)
        call = f"{handle}.publish({txn!r}, {identity})" + _under(fault)
        exc: Exception | None = None
        try:
            returned = owner.publish(txn, CLAIMS[identity])
            self._scan(call, "its return value", repr(returned))
        except OwnerMachineFailure:
            raise
        except Exception as caught:
            exc = caught
        model = self._ids[txn]
        expected = {r: _expect_publish(r, _DIGEST[identity]) for r in model.records}
        self._last_handle[txn] = handle
        self._settle(call, txn, exc, expected, fault, _WHY_PUBLISH)

    def _remove(self, handle: str, txn: str, fault: str | None) -> None:
        owner = self._handle(handle)
        call = f"{handle}.remove({txn!r})" + _under(fault)
        exc: Exception | None = None
        try:
            owner.remove(txn)
        except Exception as caught:
            exc = caught
        expected = {r: _expect_remove(r) for r in self._ids[txn].records}
        why = {_OK: "remove is idempotent: it returns once a tombstone is durable (O4)"}
        self._last_handle[txn] = handle
        # For remove every exception means "maybe removed" (O4), whatever its type.
        self._settle(call, txn, exc, expected, fault, why, typed_errors=False)

    def _settle(
        self,
        call: str,
        txn: str,
        exc: Exception | None,
        expected: Mapping[spec.OwnerRecord, tuple[str, spec.OwnerRecord]],
        fault: str | None,
        why: Mapping[str, str],
        *,
        typed_errors: bool = True,
    ) -> None:
        """Narrow the id's possible records to those that explain what the call did."""
        model = self._ids[txn]
        if exc is not None:
            self._scan(call, "its error message", str(exc))
        outcome = _classify(exc)
        if not typed_errors and outcome in (_REJECTED, _CONFLICT):
            outcome = _ERROR
        self._last[txn] = f"{call}, which {_did(outcome, exc)}"
        if outcome in (_USAGE, _ERROR):
            if fault is None:
                self._fail(
                    f"{call} {_did(outcome, exc)} with no store fault armed; the model of "
                    f"{txn} ({self._describe(model.records)}) expects it to "
                    f"{_expected_text(expected, why)}",
                    exc,
                )
            # "Maybe written, maybe later" (O2): the old record or the applied one.
            applied = {after for kind, after in expected.values() if kind == _OK}
            model.records = frozenset(model.records | applied)
            return
        fits = frozenset(after for kind, after in expected.values() if kind == outcome)
        if fits:
            model.records = fits
            return
        if outcome == _REJECTED:
            promise = (
                "ArtifactPublicationRejected means nothing was written, and only a tombstone "
                "may refuse an id; a failing store means 'maybe written', never a rejection (O2)"
            )
        else:
            promise = _expected_text(expected, why)
        self._fail(
            f"{call} {_did(outcome, exc)}, but the model of {txn} "
            f"({self._describe(model.records)}) expects it to {_expected_text(expected, None)}: "
            f"{promise}",
            exc,
        )

    def _fence(self, handle: str, txn: str, seal: str, fault: str | None) -> None:
        owner = self._handle(handle)
        call = f"{handle}.inspect_fenced({txn!r})" + _under(fault)
        stack = ExitStack()
        try:
            observation = stack.enter_context(owner.inspect_fenced(txn))
        except Exception as exc:
            self._scan(call, "its error message", str(exc))
            if fault is None:
                self._fail(
                    f"{call} raised {type(exc).__name__} with no store fault armed: {exc}", exc
                )
            return  # "cannot tell" (O5): a fence writes nothing
        failure: OwnerMachineFailure | None = None
        try:
            with stack:
                try:
                    observed = self._observe(handle, call, txn, observation, fault)
                    if seal in ("once", "twice"):
                        self._last_handle[txn] = handle
                        self._seal(call, txn, observation, observed, fault, second=False)
                    if seal == "twice":
                        self._seal(call, txn, observation, observed, fault, second=True)
                except OwnerMachineFailure as caught:
                    failure = caught  # leave the fence cleanly, then report
        except Exception as exc:  # raised while leaving the fence
            if failure is None:
                self._scan(call, "its error message", str(exc))
                if fault is None:
                    self._fail(f"{call}: leaving the fence raised {type(exc).__name__}: {exc}", exc)
        if failure is not None:
            raise failure
        if seal == "after":
            self._seal_after_block(call, txn, observation)

    def _observe(
        self, handle: str, call: str, txn: str, obs: OwnerObservation, fault: str | None
    ) -> int | None:
        """Check the shape (O8), narrow the model; return the observed abstract generation."""
        self._check_shape(call, txn, obs)
        model = self._ids[txn]
        if obs.state is ObservedState.UNKNOWN:
            if fault is None:
                self._fail(
                    f"{call} answered UNKNOWN with no store fault armed; the model of {txn} is "
                    f"{self._describe(model.records)} (a quiet store must answer definitely)"
                )
            return None
        same_state = [r for r in model.records if self._shows(r, obs)]
        seen = _show_observation(obs)
        if not same_state:
            if fault:
                hint = "in doubt, a fence answers UNKNOWN, never ABSENT or PUBLISHED (O8)"
            else:
                hint = _mismatch_hint(model.records, obs)
                if self._last_handle.get(txn, handle) != handle:
                    hint += (
                        f"; that change came through {self._last_handle[txn]}, and every "
                        "handle's fence must read the authoritative store, never a cache"
                    )
            last = self._last.get(txn)
            after = f" after {last}," if last else " (nothing was ever called on it)"
            self._fail(
                f"{call} observed {seen}, but the model of {txn}{after} expects "
                f"{self._describe(model.records)}: {hint}"
            )
        fitting = [r for r in same_state if model.generation_fits(r.generation, obs.generation)]
        if not fitting:
            self._fail(self._generation_mismatch(call, txn, obs, same_state))
        model.records = frozenset(fitting)
        abstracts = {r.generation for r in fitting}
        if len(abstracts) == 1:
            abstract = int(next(iter(abstracts)))
            model.bind(abstract, obs.generation)
            return abstract
        return None

    def _seal(
        self,
        call: str,
        txn: str,
        obs: OwnerObservation,
        observed: int | None,
        fault: str | None,
        *,
        second: bool,
    ) -> None:
        what = ("a second seal_absence()" if second else "seal_absence()") + " inside " + call
        result: object = None
        exc: Exception | None = None
        try:
            result = obs.seal_absence()
        except Exception as caught:
            exc = caught
            self._scan(call, "its error message", str(exc))
        model = self._ids[txn]
        sealable = obs.state is ObservedState.ABSENT and not obs.sealed
        done = f"raised {type(exc).__name__}: {exc}" if exc is not None else f"returned {result!r}"
        self._last[txn] = f"{what.replace(' inside ', ' in ')}, which {done}"
        if not sealable:
            if isinstance(exc, UsageError):
                return
            self._fail(
                f"{what} on a {_show_observation(obs)} observation {done}; a seal is allowed "
                "only on an ABSENT, unsealed observation, otherwise UsageError with nothing "
                "written (O6)",
                exc,
            )
        assert observed is not None  # a definite, unsealed ABSENT always pins its generation
        if isinstance(exc, UsageError):
            if second:
                return  # the observation is spent: refusing it is allowed (O6)
            self._fail(
                f"{what} raised UsageError on an ABSENT, unsealed observation inside its own "
                f"block: {exc} (O6 allows this seal)",
                exc,
            )
        outcomes = {r: spec.seal(r, observed) for r in model.records}
        if exc is not None:
            if fault is None:
                self._fail(f"{what} {done} with no store fault armed (O6)", exc)
            model.records = frozenset(model.records | {after for after, _ in outcomes.values()})
            return
        if type(result) is not bool:
            self._fail(f"{what} returned {result!r}, not a bool (O6)")
        sealed_now = spec.SealResult.SEALED
        fits = frozenset(
            after for after, answer in outcomes.values() if (answer is sealed_now) == result
        )
        if fits:
            model.records = fits
            return
        if second:
            self._fail(
                f"{what} returned {result!r} on the same observation: the first seal already "
                "advanced the generation, so a compare-and-set must return False (or raise "
                "UsageError) and write nothing (O6)"
            )
        self._fail(
            f"{what} returned {result!r}, but the model of {txn} "
            f"({self._describe(model.records)}) expects "
            f"{not result!r}: inside its own fence nothing can move the generation, so the "
            "compare-and-set must succeed (O6)"
        )

    def _seal_after_block(self, call: str, txn: str, obs: OwnerObservation) -> None:
        try:
            result = obs.seal_absence()
        except UsageError:
            return
        except Exception as exc:
            self._fail(
                f"seal_absence() after the block of {call} ended raised "
                f"{type(exc).__name__}: {exc}; expected UsageError with nothing written (O6)",
                exc,
            )
        self._fail(
            f"seal_absence() after the block of {call} ended returned {result!r}; an "
            "observation is valid only inside its block, so expected UsageError with "
            "nothing written (O5, O6)"
        )

    # -- observations ---------------------------------------------------------

    def _check_shape(self, call: str, txn: str, obs: OwnerObservation) -> None:
        def bad(what: str) -> NoReturn:
            self._fail(f"{call} yielded an observation whose {what} (O8)")

        if obs.transaction_id != txn:
            bad(f"transaction_id is {obs.transaction_id!r}, not the inspected {txn!r}")
        if not isinstance(obs.state, ObservedState):
            bad(f"state {obs.state!r} is not a toolswap.owner.ObservedState member")
        if type(obs.sealed) is not bool:
            bad(f"sealed {obs.sealed!r} is not a real bool")
        generation = obs.generation
        if isinstance(generation, bool) or not isinstance(generation, int | str):
            bad(f"generation {generation!r} is not an int or str")
        if obs.state is ObservedState.ABSENT and (
            obs.source_id is not None or obs.content_sha256 is not None
        ):
            bad("state is ABSENT but the identity fields are not None")
        if obs.state is ObservedState.PUBLISHED and not (
            isinstance(obs.source_id, str) and isinstance(obs.content_sha256, str)
        ):
            bad("state is PUBLISHED but the identity fields are not strings")
        if obs.sealed and obs.state is not ObservedState.ABSENT:
            bad(f"state is {obs.state.value} but sealed is True (only an ABSENT id is sealed)")
        for field in (obs.transaction_id, obs.source_id, obs.content_sha256, str(generation)):
            self._scan(call, "its observation", str(field))

    def _shows(self, record: spec.OwnerRecord, obs: OwnerObservation) -> bool:
        """Does ``obs`` show ``record`` (all but the generation)?"""
        expected = spec.observe(record, record.digest)
        if expected.state.value != obs.state.value or expected.sealed != obs.sealed:
            return False
        if record.state is spec.OwnerState.PUBLISHED:
            claim = CLAIMS[_NAME_OF_DIGEST[record.digest]]
            return (obs.source_id, obs.content_sha256) == (claim.source_id, claim.content_sha256)
        return True

    def _generation_mismatch(
        self, call: str, txn: str, obs: OwnerObservation, candidates: Iterable[spec.OwnerRecord]
    ) -> str:
        model = self._ids[txn]
        seen = obs.generation
        record = min(candidates, key=lambda r: r.generation)
        state = self._describe([record])
        before = model.concrete.get(record.generation)
        if before is not None and before != seen:
            return (
                f"{call} observed {txn} as {state} with generation {seen!r}, but it showed "
                f"generation {before!r} for this same state and nothing durable changed since: "
                "a generation changes only on a durable change of the id"
            )
        return (
            f"{call} observed {txn} as {state} with generation {seen!r}, which it already showed "
            f"for an earlier, different state of {txn}: a generation changes on every durable "
            "change and is never reused"
        )

    def _describe(self, records: Iterable[spec.OwnerRecord]) -> str:
        texts = sorted({_show_record(r) for r in records})
        return texts[0] if len(texts) == 1 else "one of: " + "; ".join(texts)

    # -- handles, faults, failures --------------------------------------------

    def _handle(self, name: str) -> ArtifactReferenceOwner:
        owner = self._handles[name]
        if owner is not None:
            return owner
        try:
            owner = self._harness.open_owner()
        except Exception as exc:
            self._fail(f"open_owner() for {name} raised {type(exc).__name__}: {exc}", exc)
        for other, held in self._handles.items():
            if held is owner:
                self._fail(
                    f"open_owner() for {name} returned the handle already open as {other}; "
                    "every call must open a new handle"
                )
        self._handles[name] = owner
        return owner

    def _close(self, name: str, owner: ArtifactReferenceOwner) -> None:
        try:
            self._harness.close_owner(owner)
        except Exception as exc:
            self._fail(f"closing {name} raised {type(exc).__name__}: {exc}", exc)

    def _arm(self, name: str, fault: str) -> None:
        owner = self._handle(name)
        try:
            self._harness.inject_fault(owner, StoreFault(fault))
        except Exception as exc:
            self._fail(f"inject_fault({name}, {fault}) raised {type(exc).__name__}: {exc}", exc)

    def _retire(self, name: str) -> None:
        """Close a handle used under a fault: the fault may still be armed."""
        owner, self._handles[name] = self._handles[name], None
        if owner is None:
            return
        try:
            self._harness.close_owner(owner)
        except Exception:  # a handle that just met a store fault may fail to close
            return

    def _scan(self, call: str, where: str, text: str) -> None:
        for index, secret in enumerate(self._secrets):
            if secret in text:
                self._fail(
                    f"{call}: {where} reveals secret #{index} of the harness's secrets() "
                    "(no path, DSN or credential may appear, O7)"
                )

    def _fail(self, message: str, cause: BaseException | None = None) -> NoReturn:
        self._failed = True
        raise OwnerMachineFailure(message) from cause


def _under(fault: str | None) -> str:
    return f" under a {fault} fault" if fault else ""


def _expected_text(
    expected: Mapping[spec.OwnerRecord, tuple[str, spec.OwnerRecord]],
    why: Mapping[str, str] | None,
) -> str:
    kinds = sorted({kind for kind, _ in expected.values()})
    if why is None:
        return " or ".join(_EXPECTS[k] for k in kinds)
    return "; or ".join(f"{_EXPECTS[k]} ({why[k]})" if k in why else _EXPECTS[k] for k in kinds)


def _mismatch_hint(records: Iterable[spec.OwnerRecord], obs: OwnerObservation) -> str:
    """The promise an observation that no possible record explains most likely breaks."""
    states = {r.state for r in records}
    published = obs.state is ObservedState.PUBLISHED
    if spec.OwnerState.TOMBSTONED in states:
        if published:
            return "a tombstone refuses every later publish and writes nothing (O2, O3)"
        return (
            "once remove or a seal returns, a tombstone is durable and final, and the fence "
            "reports it as sealed=True (O3, O4, O8)"
        )
    if spec.OwnerState.PUBLISHED in states:
        if published:
            return (
                "the identity is (source id, full digest); publishing another identity "
                "changes nothing (O1)"
            )
        return (
            "a published reference is durable and visible to every later fence through any "
            "handle, and ABSENT is read from the authoritative store, never a cache (O1, O8)"
        )
    return (
        "nothing was written for this id: a rejection or a conflict writes nothing, and "
        "only remove or a seal makes a tombstone (O1, O2, O6)"
    )


def _show_record(record: spec.OwnerRecord) -> str:
    if record.state is spec.OwnerState.PUBLISHED:
        return f"PUBLISHED {_NAME_OF_DIGEST[record.digest]}"
    if record.state is spec.OwnerState.TOMBSTONED:
        return "TOMBSTONED (ABSENT, sealed=True)"
    if record.generation == 0:
        return "ABSENT, never written (sealed=False)"
    return "ABSENT (sealed=False)"


def _show_observation(obs: OwnerObservation) -> str:
    state = getattr(obs.state, "value", obs.state)
    if state == ObservedState.PUBLISHED.value:
        name = _NAME_OF_IDENTITY.get((obs.source_id, obs.content_sha256))
        identity = name if name else f"({obs.source_id!r}, {obs.content_sha256!r})"
        return f"PUBLISHED {identity} (generation {obs.generation!r})"
    return f"{state} (sealed={obs.sealed!r}, generation {obs.generation!r})"


def owner_machine(
    harness_cls: type[OwnerHarness], workroot: str | os.PathLike[str]
) -> type[OwnerMachine]:
    """The owner machine bound to ``harness_cls``; each example gets a new folder in ``workroot``.

    ``TestMyOwner = owner_machine(MyHarness, root).TestCase`` runs it under
    pytest or unittest with the active Hypothesis settings.
    """
    if not (isinstance(harness_cls, type) and issubclass(harness_cls, OwnerHarness)):
        raise UsageError(f"{harness_cls!r} is not a subclass of toolswap.testing.OwnerHarness")
    name = f"{harness_cls.__name__}Machine"
    namespace = {
        "harness_cls": harness_cls,
        "workroot": os.path.abspath(os.fspath(workroot)),
        "__module__": __name__,
        "__qualname__": name,
        "__doc__": f"The owner machine bound to {harness_cls.__qualname__}.",
    }
    bound = types.new_class(name, (OwnerMachine,), exec_body=lambda ns: ns.update(namespace))
    return cast("type[OwnerMachine]", bound)


def run_owner_machine(
    harness_cls: type[OwnerHarness],
    workroot: str | os.PathLike[str],
    *,
    max_examples: int = 30,
    step_count: int = 25,
    seed: int | None = None,
) -> MachineResult:
    """Run the machine with explicit, bounded settings; never prints.

    Derandomized when ``CI`` is set; ``seed`` fixes the run instead.  No
    example database, no deadline.  A failure is shrunk, and its steps are
    returned in :attr:`MachineResult.failure`.
    """
    machine: Callable[[], RuleBasedStateMachine] = owner_machine(harness_cls, workroot)
    if seed is not None:
        machine = hypothesis.seed(seed)(machine)
    config = settings(
        max_examples=max_examples,
        stateful_step_count=step_count,
        deadline=None,
        database=None,
        derandomize=seed is None and bool(os.environ.get("CI")),
        # No explain phase: it costs more than the search, and the steps say enough.
        phases=(Phase.explicit, Phase.generate, Phase.shrink),
        print_blob=False,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.normal,
    )
    who = harness_cls.__name__
    started = time.perf_counter()
    try:
        _run_as_test(machine, settings=config)
    except Exception as exc:
        steps = _notes(exc)
        count = sum(1 for s in steps if s.startswith("state.") and s != "state.teardown()")
        cause = _owner_failure(exc)
        error = f"{type(cause).__name__}: {cause}" if cause is not None else _error_text(exc)
        headline = error.splitlines()[0] if error else type(exc).__name__
        if len(headline) > 240:
            headline = headline[:237] + "..."
        flaky = cause is not None and cause is not exc
        note = (
            [
                "(Hypothesis could not make it fail again at once: timing-dependent; the steps "
                "are those of the last failing run)"
            ]
            if flaky
            else []
        )
        return MachineResult(
            passed=False,
            summary=(
                f"owner machine on {who}: FAILED, shrunk to {count} "
                f"step{'' if count == 1 else 's'}: {headline}"
            ),
            # The owner's failing step first, then the program that reproduces it.
            failure="\n".join([error, *steps, *note]),
        )
    elapsed = time.perf_counter() - started
    return MachineResult(
        passed=True,
        summary=(
            f"owner machine on {who}: passed {max_examples} examples of up to "
            f"{step_count} steps in {elapsed:.1f} s"
        ),
    )


def _owner_failure(exc: BaseException) -> BaseException | None:
    """The :class:`OwnerMachineFailure` behind ``exc`` (a flaky-test wrapper holds it)."""
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, OwnerMachineFailure):
            return current
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return None


def _notes(exc: BaseException) -> list[str]:
    """Hypothesis's notes (the steps), from ``exc`` or the failure inside a wrapper."""
    notes = [str(n) for n in getattr(exc, "__notes__", ())]
    inner = _owner_failure(exc)
    if inner is not None and inner is not exc:
        notes += [str(n) for n in getattr(inner, "__notes__", ()) if str(n) not in notes]
    return notes


def _error_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, BaseExceptionGroup):
        inner = [f"  {type(e).__name__}: {e}" for e in exc.exceptions]
        text = "\n".join([text, *inner])
    return text
