"""Symmetry reduction: transactions that play the same part are interchangeable.

Rules
=====

1. The group: every permutation of transaction ids that maps each
   transaction onto one that references the same artifact
   (:meth:`system.Model.artifact_of`) and, when the model has the
   ``GC_TRUSTS_MEMORY_PATH`` mistake, fixes :attr:`system.Model.hostile_txn`
   (the one transaction whose Memory record is hostile).  Artifact names are
   *not* permuted: the externalizer always takes the first unused name, so the
   names are ordered and swapping two of them is not a symmetry of the model.
2. :meth:`Symmetry.key` maps a state to a key that two states share exactly
   when one is a permutation (rule 1) of the other.  The explorer keys its
   visited set with it, so it visits one state per orbit.
3. :meth:`Symmetry.canonical` is the orbit's representative as a state (used by
   the tests that check rule 2); the explorer never needs it: every state it
   stores is a concrete successor of a stored state, so the parent chain is a
   real trace of the unreduced model.
4. Every invariant and L1's goal treat the transactions of one artifact alike,
   and the initial state is fixed by the group, so a state violates an
   invariant exactly when every state of its orbit does, and the breadth-first
   depth of an orbit is the shortest depth of any of its states: the
   counterexample found is still a shortest one.

Theory of operation
===================

A transaction's part of the state is its journal records, owner slot,
publisher and remover program counters, its "rejected" ghost flag, whether the
reconciler is working on it and whether the GC plan names its Memory path.
Encoding that part as a tuple of small integers makes the parts orderable;
sorting the parts within each artifact's class is the canonical permutation.
Two transactions with equal parts can be swapped without changing the state,
so ties do not matter.  With a trivial group (each class has one transaction,
as under the default bounds) the key is the state itself.
"""

from __future__ import annotations

from collections.abc import Hashable

from .system import Mistake, Model, PlanTarget, Reconciler, SystemState, TargetKind

__all__ = ["Symmetry"]


class Symmetry:
    """The transaction symmetry of one model (see the module rules)."""

    def __init__(self, model: Model) -> None:
        n = model.bounds.transactions
        fixed = (
            {model.hostile_txn} if Mistake.GC_TRUSTS_MEMORY_PATH in model.mistakes else set[int]()
        )
        classes = []
        for residue in range(model.bounds.artifacts):
            members = tuple(t for t in range(n) if model.artifact_of(t) == residue)
            members = tuple(t for t in members if t not in fixed)
            if members:
                classes.append(members)
        self.classes: tuple[tuple[int, ...], ...] = tuple(classes)
        self.fixed: tuple[int, ...] = tuple(sorted(fixed))
        self.trivial: bool = all(len(c) <= 1 for c in self.classes)
        self.size: int = 1
        for c in self.classes:
            for k in range(2, len(c) + 1):
                self.size *= k
        self._codes: dict[object, int] = {}

    def _code(self, value: object) -> int:
        code = self._codes.get(value)
        if code is None:
            code = self._codes[value] = len(self._codes)
        return code

    def _parts(self, s: SystemState) -> list[tuple[int, ...]]:
        """Each transaction's part of ``s`` as a tuple of small integers."""
        code = self._code
        busy = [r.txn for r in s.reconcilers]
        memory = (
            {x.index for x in s.gc_plan if x.kind is TargetKind.MEMORY_PATH} if s.gc_plan else ()
        )
        return [
            (
                code(s.journal[t]),
                code(s.owner[t]),
                code(s.publishers[t]),
                code(s.removers[t]),
                int(s.rejected[t]),
                *(int(t == b) for b in busy),
                int(t in memory),
            )
            for t in range(len(s.journal))
        ]

    def key(self, s: SystemState) -> Hashable:
        """A key shared by exactly the states of ``s``'s orbit."""
        if self.trivial:
            return s
        parts = self._parts(s)
        plan = s.gc_plan
        shared = (
            s.files,
            tuple((r.pc, r.generation) for r in s.reconcilers),
            None
            if plan is None
            else tuple(x for x in plan if x.kind is not TargetKind.MEMORY_PATH),
            s.counter,
            s.outside_touched,
        )
        return (
            shared,
            tuple(tuple(sorted(parts[t] for t in c)) for c in self.classes),
            tuple(parts[t] for t in self.fixed),
        )

    def permutation(self, s: SystemState) -> tuple[int, ...]:
        """``perm``: transaction ``t`` of ``s`` is ``perm[t]`` in the representative."""
        parts = self._parts(s)
        perm = list(range(len(parts)))
        for c in self.classes:
            for target, source in zip(c, sorted(c, key=lambda t: parts[t]), strict=True):
                perm[source] = target
        return tuple(perm)

    def group(self) -> list[tuple[int, ...]]:
        """Every permutation of the group (small: at most 4! per class)."""
        from itertools import permutations, product

        n = sum(len(c) for c in self.classes) + len(self.fixed)
        result = []
        for choice in product(*(permutations(c) for c in self.classes)):
            perm = list(range(n))
            for c, image in zip(self.classes, choice, strict=True):
                for source, target in zip(c, image, strict=True):
                    perm[source] = target
            result.append(tuple(perm))
        return result

    def canonical(self, s: SystemState) -> SystemState:
        """The representative of ``s``'s orbit."""
        if self.trivial:
            return s
        return permute(s, self.permutation(s))


def permute(s: SystemState, perm: tuple[int, ...]) -> SystemState:
    """``s`` with transaction ``t`` renamed ``perm[t]`` (artifacts stay where they are)."""
    n = len(perm)
    inverse = [0] * n
    for source, target in enumerate(perm):
        inverse[target] = source

    def moved(values: tuple[object, ...]) -> tuple[object, ...]:
        return tuple(values[inverse[t]] for t in range(n))

    reconcilers = tuple(
        r if r.txn < 0 else Reconciler(r.pc, perm[r.txn], r.generation) for r in s.reconcilers
    )
    plan = s.gc_plan
    if plan is not None:
        others = [x for x in plan if x.kind is not TargetKind.MEMORY_PATH]
        memory = sorted(perm[x.index] for x in plan if x.kind is TargetKind.MEMORY_PATH)
        plan = tuple(others) + tuple(PlanTarget(TargetKind.MEMORY_PATH, t) for t in memory)
    return SystemState(
        s.files,
        moved(s.journal),  # type: ignore[arg-type]
        moved(s.owner),  # type: ignore[arg-type]
        moved(s.publishers),  # type: ignore[arg-type]
        moved(s.removers),  # type: ignore[arg-type]
        reconcilers,
        plan,
        s.counter,
        moved(s.rejected),  # type: ignore[arg-type]
        s.outside_touched,
    )
