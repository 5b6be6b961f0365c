"""The spec explorer's adapter: a :class:`system.SystemState` as an :class:`Observable`.

Rules
=====

1. :class:`SpecObserver` maps a model state onto the observable state the
   invariants read (:mod:`observable`), and decides nothing itself.
2. Transaction ``t`` is ``t{t+1}``; its artifact is the model's
   ``artifact_of(t)``; artifact slot ``a`` is ``tool_result_{a+1:03d}.txt``.
3. What the model cannot see gets its safe default: it has no bytes, so every
   artifact it keeps is ``intact`` (content changes only by S6's rewrite,
   which ``rewritten`` reports); its owner never writes a tombstone over a
   reference (owner rule 6), so no publish is ``acknowledged`` and then
   buried.

Theory of operation
===================

The explorer asks for every one of its states, so the observer memoizes.  A
transaction's view depends only on its own journal entry, owner slot,
publisher and rejection flag, and an artifact's on its slot (and, for L1, the
journal's claims); each takes a few dozen values in a whole exploration.
"""

from __future__ import annotations

from .actors import FileStatus, PublisherPc
from .lease import LeaseState
from .observable import ArtifactView, LeaseView, Observable, Shown
from .owner import OwnerState
from .system import (
    FileSlot,
    JournalTxn,
    Model,
    OwnerSlot,
    SystemState,
    artifact_name,
    txn_name,
)

__all__ = ["SpecObserver", "OUTSIDE_TOUCHED"]

OUTSIDE_TOUCHED = "an operation read or deleted a path outside the session's tool-results/"
_SENDING = (PublisherPc.PREPARING, PublisherPc.SENT)
_SHOWN = {
    OwnerState.ABSENT: Shown.NOTHING,
    OwnerState.PUBLISHED: Shown.REFERENCE,
    OwnerState.TOMBSTONED: Shown.TOMBSTONE,
}


class SpecObserver:
    """Observe the states of one model (memoized per transaction and per artifact)."""

    def __init__(self, model: Model) -> None:
        self.model = model
        n = model.bounds.transactions
        self._txn_names = [txn_name(t) for t in range(n)]
        self._artifact_of = [artifact_name(model.artifact_of(t)) for t in range(n)]
        self._slot_names = [artifact_name(a) for a in range(model.bounds.artifacts)]
        self._leases: dict[tuple[object, ...], LeaseView] = {}
        self._artifacts: dict[tuple[object, ...], ArtifactView] = {}

    @staticmethod
    def key(s: SystemState) -> tuple[object, ...]:
        """The parts of ``s`` that :meth:`__call__` reads: equal keys, equal observations."""
        return (s.files, s.journal, s.owner, s.publishers, s.rejected, s.outside_touched)

    @staticmethod
    def goal_key(s: SystemState) -> tuple[object, ...]:
        """The parts of ``s`` that the facts L1's goal reads come from.

        Records, requests in flight, a conflict awaiting the operator, and which
        artifacts exist and are claimed: the journal, the owner and the files.
        """
        return (s.files, s.journal, s.owner)

    def __call__(self, s: SystemState, *, claims: bool = False) -> Observable:
        """The observable state of ``s``; ``claims``: also work out which artifacts are claimed.

        Only L1 reads ``claimed``; the safety invariants skip the journal walk it costs.
        """
        rejected = s.rejected or (False,) * len(s.journal)
        leases = tuple(
            self._lease(t, txn, o, pc, r)
            for t, (txn, o, pc, r) in enumerate(
                zip(s.journal, s.owner, s.publishers, rejected, strict=True)
            )
        )
        artifacts = {
            self._slot_names[a]: self._artifact(a, f, s if claims and f.exists else None)
            for a, f in enumerate(s.files)
        }
        outside = (OUTSIDE_TOUCHED,) if s.outside_touched else ()
        # the model's owner keeps O4: a removal leaves a tombstone (owner rule 4)
        return Observable(leases, artifacts, outside, removal_tombstones=True)

    def _lease(
        self, t: int, txn: JournalTxn, o: OwnerSlot, pc: PublisherPc, rejected: bool
    ) -> LeaseView:
        key = (t, txn, o, pc, rejected)
        view = self._leases.get(key)
        if view is None:
            view = self._leases[key] = self._make_lease(t, txn, o, pc, rejected)
        return view

    def _make_lease(
        self, t: int, txn: JournalTxn, o: OwnerSlot, pc: PublisherPc, rejected: bool
    ) -> LeaseView:
        shown = _SHOWN[o.record.state]
        other = ""
        if shown is Shown.REFERENCE and o.names >= 0:  # another writer's identity
            shown, other = Shown.OTHER, self._slot_names[o.names]
        return LeaseView(
            txn=self._txn_names[t],
            artifact=self._artifact_of[t],
            records=txn.records,
            retained=not txn.expired,
            shown=shown,
            other=other,
            reported=o.reported >= 0 and o.names == o.reported,
            may_land=o.inflight != 0 or pc in _SENDING,
            in_flight=o.inflight != 0 or o.pending_tombstone,
            rejected=rejected,
            # S2 speaks of when the publish landed: a lease the journal lost later
            # had its PREPARED record durable then (the ghost ``lost`` remembers it)
            unprepared_publish=(
                o.record.state is OwnerState.PUBLISHED
                and LeaseState.PREPARED not in txn.durable
                and not txn.lost
            ),
            awaits_operator=(
                txn.conflict >= 0
                and not txn.conflict_volatile
                and o.record.state is OwnerState.PUBLISHED
                and o.names == txn.conflict
            ),
        )

    def _artifact(self, a: int, f: FileSlot, s: SystemState | None) -> ArtifactView:
        claimed = s is not None and (
            bool(self.model.claims_for(s, a)) or self.model.witnessed(s, a)
        )
        key = (a, f, claimed)
        view = self._artifacts.get(key)
        if view is None:
            view = self._artifacts[key] = ArtifactView(
                name=self._slot_names[a],
                present=f.exists,
                deleted=f.status is FileStatus.DELETED,
                rewritten=f.content > 1,
                claimed=claimed,
                cut_short=f.cut_short,
            )
        return view
