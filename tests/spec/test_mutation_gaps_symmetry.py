"""Mutation gaps in spec/symmetry.py: fields that a renaming must carry or the key must see.

The sampled reachable states of tests/spec/test_symmetry.py never hold a busy
reconciler with a generation, a Memory-path target in the GC plan or the
"touched outside" ghost, and never differ in a remover alone; each test here
builds one such small state by hand (docs/mutation.md, spec/).
"""

from __future__ import annotations

from toolswap.spec.actors import ReconcilerPc, RemoverPc
from toolswap.spec.symmetry import Symmetry, permute
from toolswap.spec.system import Bounds, Model, PlanTarget, Reconciler, TargetKind

MODEL = Model(Bounds(artifacts=1, transactions=2))  # t1 and t2 share the one artifact
BASE = MODEL.initial()
SWAP = (1, 0)


def test_renaming_moves_a_busy_reconciler_and_keeps_its_program_counter_and_generation() -> None:
    s = BASE._replace(reconcilers=(Reconciler(ReconcilerPc.SEALING, 0, 2),))
    assert permute(s, SWAP).reconcilers == (Reconciler(ReconcilerPc.SEALING, 1, 2),)


def test_renaming_renames_the_memory_path_targets_of_the_gc_plan() -> None:
    artifact = PlanTarget(TargetKind.ARTIFACT, 0)
    s = BASE._replace(gc_plan=(artifact, PlanTarget(TargetKind.MEMORY_PATH, 0)))
    assert permute(s, SWAP).gc_plan == (artifact, PlanTarget(TargetKind.MEMORY_PATH, 1))


def test_renaming_keeps_the_touched_outside_ghost() -> None:
    s = BASE._replace(outside_touched=True)
    assert permute(s, SWAP).outside_touched is True


def test_the_key_tells_apart_states_that_differ_in_one_remover() -> None:
    sym = Symmetry(MODEL)
    removed = BASE._replace(removers=(RemoverPc.REMOVED, RemoverPc.IDLE))
    assert sym.key(removed) == sym.key(permute(removed, SWAP))  # a renaming: one orbit
    assert sym.key(removed) != sym.key(BASE)  # not a renaming: two orbits
