"""Symmetry reduction is sound: it merges only renamings, and it changes no verdict.

Claims: the canonical form is idempotent and shared by every renaming of a
state; two reachable states share a key only when one is a renaming of the
other; the reduced and the unreduced explorer agree on every verdict and on
the length of every shortest trace; a trace found under reduction is a real
trace of the unreduced model.  A deliberately broken key (one that forgets a
transaction's publisher) is caught by the merge check.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from toolswap.spec import explorer, variants
from toolswap.spec.symmetry import Symmetry, permute
from toolswap.spec.system import Bounds, Mistake, Model, SystemState

BOUNDS = Bounds(artifacts=1, transactions=2)
THREE = Bounds(artifacts=1, transactions=3, crashes=False, lost_acks=False, unknown=False)
# A foreign publish names *another* artifact, so it needs two; t1 and t3 share one.
FOREIGN = Bounds(
    artifacts=2,
    transactions=3,
    crashes=False,
    lost_acks=False,
    unknown=False,
    tamper=False,
    foreign_publish=True,
)


def _bounds_for(name: str | None) -> Bounds:
    """BOUNDS, or FOREIGN for a variant whose mistake needs a fault that needs two artifacts."""
    if name is not None and variants.get(name).faults:
        return FOREIGN
    return BOUNDS


def _reachable(model: Model, limit: int) -> list[SystemState]:
    seen = {model.initial()}
    order = [model.initial()]
    for s in order:
        for _, nxt in model.successors(s):
            if nxt not in seen and len(order) < limit:
                seen.add(nxt)
                order.append(nxt)
    return order


@pytest.fixture(scope="module")
def sample() -> tuple[Model, list[SystemState]]:
    model = Model(THREE)
    return model, _reachable(model, 3000)


@pytest.fixture(scope="module")
def foreign_sample() -> tuple[Model, list[SystemState]]:
    """States with foreign references, CONFLICT records and reported conflicts in them."""
    model = Model(FOREIGN)
    states = _reachable(model, 20000)
    assert any(j.conflict >= 0 for s in states for j in s.journal)
    assert any(o.reported >= 0 for s in states for o in s.owner)
    return model, states


def _merges_only_renamings(
    model: Model, states: list[SystemState], key: Callable[[SystemState], Hashable]
) -> None:
    """Every pair of states with one key is related by a permutation of the group."""
    sym = Symmetry(model)
    group = sym.group()
    first: dict[Hashable, SystemState] = {}
    for s in states:
        k = key(s)
        seen = first.setdefault(k, s)
        assert any(permute(seen, p) == s for p in group), f"merged non-symmetric states: {k}"


def test_the_group_permutes_only_transactions_of_one_artifact() -> None:
    assert Symmetry(Model(Bounds())).trivial  # default bounds: t1 -> a1, t2 -> a2
    assert Symmetry(Model(Bounds(artifacts=1, transactions=3))).size == 6
    assert Symmetry(Model(Bounds(artifacts=2, transactions=4))).size == 4
    hostile = Model(BOUNDS, frozenset({Mistake.GC_TRUSTS_MEMORY_PATH}))
    assert Symmetry(hostile).trivial  # the hostile transaction is fixed


def test_canonical_form_is_idempotent_and_shared_by_every_renaming(
    sample: tuple[Model, list[SystemState]],
) -> None:
    model, states = sample
    sym = Symmetry(model)
    for s in states[::7]:
        c = sym.canonical(s)
        assert sym.canonical(c) == c
        assert sym.key(c) == sym.key(s)
        for p in sym.group():
            renamed = permute(s, p)
            assert sym.key(renamed) == sym.key(s)
            assert sym.canonical(renamed) == c


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_a_random_renaming_keeps_the_key(
    data: st.DataObject, sample: tuple[Model, list[SystemState]]
) -> None:
    model, states = sample
    s = data.draw(st.sampled_from(states))
    p = tuple(data.draw(st.permutations(range(3))))
    sym = Symmetry(model)  # one instance: keys are comparable within one search
    assert sym.key(permute(s, p)) == sym.key(s)
    assert model.initial() == permute(model.initial(), p)  # the start is fixed by the group


def test_states_share_a_key_only_when_one_renames_the_other(
    sample: tuple[Model, list[SystemState]],
) -> None:
    model, states = sample
    _merges_only_renamings(model, states, Symmetry(model).key)


def test_conflict_fields_move_with_their_transaction(
    foreign_sample: tuple[Model, list[SystemState]],
) -> None:
    model, states = foreign_sample
    sym = Symmetry(model)
    assert sym.size == 2
    interesting = [s for s in states if any(j.conflict >= 0 for j in s.journal)]
    for s in interesting[::5]:
        c = sym.canonical(s)
        assert sym.canonical(c) == c
        for p in sym.group():
            assert sym.key(permute(s, p)) == sym.key(s)
    _merges_only_renamings(model, interesting, sym.key)


def test_a_key_that_forgets_the_publishers_is_caught(
    sample: tuple[Model, list[SystemState]],
) -> None:
    model, states = sample
    sym = Symmetry(model)

    def broken(s: SystemState) -> Hashable:
        blind = SystemState(
            s.files,
            s.journal,
            s.owner,
            (s.publishers[0],) * len(s.publishers),
            s.removers,
            s.reconcilers,
            s.gc_plan,
            s.counter,
            s.rejected,
            s.outside_touched,
        )
        return sym.key(blind)

    with pytest.raises(AssertionError, match="merged non-symmetric states"):
        _merges_only_renamings(model, states, broken)


def _summary(report: explorer.Report) -> tuple[object, ...]:
    v = report.violation
    if v is None:
        return ("pass", report.ok, report.l1_stuck > 0)
    return ("violation", v.invariants, len(v.trace))


@pytest.mark.parametrize("name", [None, *variants.names()])
def test_reduced_and_unreduced_agree_on_verdict_and_trace_length(name: str | None) -> None:
    model = Model(BOUNDS) if name is None else variants.get(name).model(_bounds_for(name))
    reduced = explorer.explore(model, symmetry=True)
    full = explorer.explore(model, symmetry=False)
    assert _summary(reduced) == _summary(full)
    assert reduced.states <= full.states


@pytest.mark.parametrize("name", variants.names())
def test_a_reduced_trace_replays_in_the_unreduced_model(name: str) -> None:
    model = variants.get(name).model(_bounds_for(name))
    report = explorer.explore(model)
    assert report.violation is not None
    state = model.initial()
    for step in report.violation.trace:
        nexts = [nxt for taken, nxt in model.successors(state) if taken == step]
        assert nexts, f"step {step.describe()!r} is not enabled"
        state = nexts[0]
    from toolswap.spec.invariants import violations

    assert {n for n, _ in violations(model, state)} == set(report.violation.invariants)


def test_every_variant_is_still_caught_under_three_transactions() -> None:
    bounds = Bounds(artifacts=1, transactions=3)
    for name in ("publish-before-prepared", "abort-before-tombstone", "blind-terminal-append"):
        variant = variants.get(name)
        report = explorer.explore(variant.model(bounds))
        assert report.violation is not None and variant.expected in report.violation.invariants
