"""Checks of the reconciliation table: a PREPARED lease, the owner arranged, one reconcile.

Each row runs the real lease journal of a scratch session against the
adapter, so what is checked is what the journal will do with the adapter's
answers (see the table in ``docs/design.md`` and :class:`toolswap.owner.ReconcileStatus`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from toolswap.spec.lease import LeaseState

from ..owner import ArtifactReferenceOwner, OwnerObservation, ReconcileStatus
from .bench import Bench, expect
from .harness import Capability, StoreFault
from .registry import check

__all__: list[str] = []

_S = ReconcileStatus


def _row(
    bench: Bench,
    arrange: Callable[[Bench, ArtifactReferenceOwner, str], None],
    want: ReconcileStatus,
    owner: ArtifactReferenceOwner | None = None,
) -> str:
    txn = bench.txn("t")
    writer = bench.open()
    bench.journal.prepare(bench.first, txn)
    arrange(bench, writer, txn)
    report = bench.journal.reconcile_reference(txn, owner or bench.open())
    bench.scan(repr(report), "a reconciliation report")
    expect(report.status is want, f"reconcile gave {report.status}, want {want}")
    return txn


def _phase(bench: Bench, txn: str) -> LeaseState:
    return bench.journal.recover().states[txn]


@check(
    "ROW.published-same-identity-commits",
    "PUBLISHED with the claim's source id and full digest: COMMITTED inside the fence",
)
def _commits(bench: Bench) -> str:
    txn = _row(bench, lambda b, o, t: _ok(b.publish(o, t, b.first), "publish"), _S.COMMITTED)
    expect(_phase(bench, txn) is LeaseState.COMMITTED, "the lease is not COMMITTED")
    return "committed"


@check(
    "ROW.published-other-identity-is-recorded-conflict",
    "PUBLISHED with another identity: a CONFLICT record names what the owner shows, "
    "pending_conflict",
)
def _conflict(bench: Bench) -> str:
    txn = _row(
        bench, lambda b, o, t: _ok(b.publish(o, t, b.second), "publish"), _S.PENDING_CONFLICT
    )
    recovery = bench.journal.recover()
    expect(recovery.states[txn] is LeaseState.PREPARED, "the conflicting lease left PREPARED")
    shown = {c.source_id for c in recovery.protecting_claims()}
    expect(
        bench.second.source_id in shown,
        "the identity the owner shows was not journalled as protected (S1)",
    )
    return "pending_conflict, the lease stays PREPARED and the shown artifact is protected"


@check(
    "ROW.published-twin-digest-is-conflict",
    "PUBLISHED with the same source id and digest prefix but another full digest: pending_conflict",
)
def _twin(bench: Bench) -> str:
    txn = _row(bench, lambda b, o, t: _ok(b.publish(o, t, b.twin), "publish"), _S.PENDING_CONFLICT)
    expect(_phase(bench, txn) is LeaseState.PREPARED, "the lease left PREPARED")
    return "a twin digest is a conflict, not a commit"


@check(
    "ROW.absent-seals-then-aborts",
    "ABSENT, not sealed: the owner seals by compare-and-set, then ABORTED is appended",
)
def _aborts(bench: Bench) -> str:
    txn = _row(bench, lambda b, o, t: None, _S.ABORTED)
    expect(_phase(bench, txn) is LeaseState.ABORTED, "the lease is not ABORTED")
    seen = bench.observe(bench.open(), txn)
    expect(seen.is_tombstone, f"after the abort the owner shows {seen.describe()} (S3)")
    late = bench.publish(bench.open(), txn, bench.first)
    expect(not late.ok, "a late publish of the aborted lease's id was accepted")
    return "sealed, then aborted; a late publish is refused"


@check("ROW.sealed-absence-aborts", "ABSENT and already sealed: ABORTED, no second seal")
def _sealed(bench: Bench) -> str:
    txn = _row(bench, lambda b, o, t: _ok(b.remove(o, t), "remove"), _S.ABORTED)
    expect(_phase(bench, txn) is LeaseState.ABORTED, "the lease is not ABORTED")
    return "aborted"


@check(
    "ROW.unknown-stays-pending",
    "an owner that cannot tell (UNKNOWN, or a failed fence): nothing appended, pending_unknown",
    needs=[Capability.FAULTS],
)
def _unknown(bench: Bench) -> str:
    reader = bench.open()
    bench.fault(reader, StoreFault.FAIL)
    txn = _row(
        bench,
        lambda b, o, t: _ok(b.publish(o, t, b.first), "publish"),
        _S.PENDING_UNKNOWN,
        owner=reader,
    )
    expect(_phase(bench, txn) is LeaseState.PREPARED, "the lease left PREPARED")
    return "a failing store leaves the lease PREPARED (pending_unknown)"


class _MovingOwner:
    """Delegates to a handle; just before the seal, restarts the store and publishes."""

    def __init__(self, bench: Bench, inner: ArtifactReferenceOwner) -> None:
        self._bench, self._inner = bench, inner

    def publish(self, transaction_id: str, claim: Any) -> object:
        return self._inner.publish(transaction_id, claim)

    def remove(self, transaction_id: str) -> None:
        self._inner.remove(transaction_id)

    @contextmanager
    def inspect_fenced(self, transaction_id: str) -> Iterator[OwnerObservation]:
        fence = self._inner.inspect_fenced(transaction_id)
        observation = fence.__enter__()
        try:
            yield _MovingObservation(self._bench, observation)
        finally:
            with contextlib.suppress(Exception):  # the fence's connection is gone
                fence.__exit__(None, None, None)


class _MovingObservation:
    def __init__(self, bench: Bench, inner: OwnerObservation) -> None:
        self._bench, self._inner = bench, inner
        self.transaction_id = inner.transaction_id
        self.state = inner.state
        self.source_id = inner.source_id
        self.content_sha256 = inner.content_sha256
        self.generation = inner.generation
        self.sealed = inner.sealed

    def seal_absence(self) -> bool:
        writer = self._bench.restart()
        _ok(self._bench.publish(writer, self.transaction_id, self._bench.first), "publish")
        return self._inner.seal_absence()


@check(
    "ROW.generation-moved-is-not-aborted",
    "the generation moved before the seal (the fence was lost): nothing appended, "
    "pending_stale (or pending_unknown if the seal failed)",
    needs=[Capability.RESTART],
)
def _moved(bench: Bench) -> str:
    txn = bench.txn("t")
    bench.journal.prepare(bench.first, txn)
    report = bench.journal.reconcile_reference(txn, _MovingOwner(bench, bench.open()))
    bench.scan(repr(report), "a reconciliation report")
    expect(
        report.status in (_S.PENDING_STALE, _S.PENDING_UNKNOWN),
        f"reconcile gave {report.status} although the id was published before the seal",
    )
    expect(_phase(bench, txn) is LeaseState.PREPARED, "the lease left PREPARED")
    seen = bench.observe(bench.open(), txn)
    expect(seen.is_published(bench.first), f"the published reference is now {seen.describe()}")
    return f"{report.status}: the reference published before the seal stayed visible"


@check(
    "ROW.terminal-is-already",
    "an already terminal lease: nothing appended, already_committed / already_aborted / "
    "already_released",
)
def _terminal(bench: Bench) -> str:
    owner, journal = bench.open(), bench.journal
    names = {s: bench.txn(s.value) for s in (_S.COMMITTED, _S.ABORTED)}
    for name in names.values():
        journal.prepare(bench.first, name)
    _ok(bench.publish(owner, names[_S.COMMITTED], bench.first), "publish")
    for name in names.values():
        journal.reconcile_reference(name, owner)
    again = {s: journal.reconcile_reference(n, owner).status for s, n in names.items()}
    expect(again[_S.COMMITTED] is _S.ALREADY_COMMITTED, f"got {again[_S.COMMITTED]}")
    expect(again[_S.ABORTED] is _S.ALREADY_ABORTED, f"got {again[_S.ABORTED]}")
    journal.remove_reference(names[_S.COMMITTED], lambda: owner.remove(names[_S.COMMITTED]))
    released = journal.reconcile_reference(names[_S.COMMITTED], owner).status
    expect(released is _S.ALREADY_RELEASED, f"got {released}")
    return "already_committed, already_aborted, already_released"


def _ok(outcome: Any, what: str) -> None:
    expect(outcome.ok, f"{what} {outcome.describe()}")
