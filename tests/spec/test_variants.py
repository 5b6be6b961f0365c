"""Every classic mistake, switched on alone, is caught: its invariant breaks, with a short trace."""

from __future__ import annotations

import pytest
from toolswap.spec import explorer, variants
from toolswap.spec.errors import UnknownVariant
from toolswap.spec.invariants import violations
from toolswap.spec.system import Bounds, Mistake, Model, Step, SystemState

NAMES = variants.names()
MAX_TRACE = 15  # "short": a student reads it in one screen


@pytest.fixture(scope="module")
def reports() -> dict[str, explorer.Report]:
    return {n: explorer.explore(variants.get(n).model(), name=n) for n in NAMES}


def replay(model: Model, trace: tuple[Step, ...]) -> SystemState:
    """Follow ``trace`` step by step; every step must be one the model offers."""
    s = model.initial()
    for step in trace:
        s = next(nxt for label, nxt in model.successors(s) if label == step)
    return s


def within(model: Model, depth: int) -> set[SystemState]:
    """Every state reachable in at most ``depth`` steps (a separate, plain BFS)."""
    seen = {model.initial()}
    frontier = set(seen)
    for _ in range(depth):
        frontier = {n for s in frontier for _, n in model.successors(s)} - seen
        seen |= frontier
    return seen


def test_there_are_at_least_eight_variants_and_every_mistake_has_one() -> None:
    assert len(NAMES) >= 8
    assert sorted(v.mistake.name for v in variants.VARIANTS.values()) == sorted(
        m.name for m in Mistake
    )


@pytest.mark.parametrize("name", NAMES)
def test_the_variant_violates_its_expected_invariant(
    name: str, reports: dict[str, explorer.Report]
) -> None:
    v = reports[name].violation
    assert v is not None, f"{name}: the explorer found no violation"
    assert variants.get(name).expected in v.invariants


@pytest.mark.parametrize("name", NAMES)
def test_the_trace_is_short_and_really_reaches_the_violation(
    name: str, reports: dict[str, explorer.Report]
) -> None:
    variant = variants.get(name)
    v = reports[name].violation
    assert v is not None
    assert 1 <= len(v.trace) <= MAX_TRACE
    end = replay(variant.model(), v.trace)
    assert variant.expected in [n for n, _ in violations(variant.model(), end)]


@pytest.mark.parametrize("name", NAMES)
def test_no_shorter_trace_breaks_any_invariant(
    name: str, reports: dict[str, explorer.Report]
) -> None:
    v = reports[name].violation
    assert v is not None
    model = variants.get(name).model()
    assert not [s for s in within(model, len(v.trace) - 1) if violations(model, s)]


@pytest.mark.parametrize("name", NAMES)
def test_the_trace_is_printed_step_by_step_in_plain_words(
    name: str, reports: dict[str, explorer.Report]
) -> None:
    report = reports[name]
    assert report.violation is not None
    text = explorer.format_report(report)
    for i, step in enumerate(report.violation.trace, start=1):
        assert f"  {i}. {step.describe()}" in text
    assert f"=> {variants.get(name).expected.full} is broken: " in text
    assert "StepKind" not in text and "?" not in text  # no enum reprs, no unfilled slots


def test_the_correct_model_under_the_same_bounds_breaks_nothing_the_variants_break() -> None:
    # the small-bounds counterpart of the full run in test_explorer: the same
    # search that catches each mistake finds nothing once the rule is back
    report = explorer.explore(Model(Bounds(artifacts=1, transactions=1)))
    assert report.ok


def test_an_unknown_variant_name_raises_a_typed_error() -> None:
    with pytest.raises(UnknownVariant, match="no-such"):
        variants.get("no-such")


def test_a_variant_the_catalogue_does_not_list_is_refused() -> None:
    with pytest.raises(ValueError, match="not in the catalogue"):
        variants.Variant("x", Mistake.COUNTER_RESTART_OVERWRITES, "")
