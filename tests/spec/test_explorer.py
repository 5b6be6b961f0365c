"""The explorer: the correct model passes, L1 can fail, bounds and the clock are honoured."""

from __future__ import annotations

import itertools

import pytest
from toolswap.spec import explorer
from toolswap.spec.system import PROGRESS_STEPS, Bounds, Model, StepKind

SMALL = Bounds(artifacts=1, transactions=2)  # two leases on one artifact: ~24k states


@pytest.fixture(scope="module")
def small() -> explorer.Report:
    return explorer.explore(Model(SMALL))


def test_the_correct_model_has_no_violation_under_small_bounds(small: explorer.Report) -> None:
    assert small.violation is None
    assert small.complete and small.l1_checked and small.l1_stuck == 0
    assert small.ok


@pytest.mark.slow
def test_the_correct_model_has_no_violation_under_the_default_bounds() -> None:
    report = explorer.explore(Model())
    assert (report.violation, report.l1_stuck, report.complete) == (None, 0, True)
    assert report.states > 100_000  # the default bounds really are explored, not a subset


def test_l1_fails_when_reconciliation_cannot_run(monkeypatch: pytest.MonkeyPatch) -> None:
    # a PREPARED lease left by a crash resolves only through the reconciler:
    # take its observation out of the fair steps and progress must break
    monkeypatch.setattr(explorer, "PROGRESS_STEPS", PROGRESS_STEPS - {StepKind.OBSERVE})
    report = explorer.explore(Model(Bounds(artifacts=1, transactions=1)))
    assert report.violation is None
    assert report.l1_stuck > 0 and not report.ok
    assert report.l1_trace
    assert "L1 progress: VIOLATED" in explorer.format_report(report)


def test_max_states_makes_the_verdict_partial_and_skips_l1() -> None:
    report = explorer.explore(Model(SMALL), max_states=50)
    assert report.states == 50
    assert not report.complete and not report.l1_checked
    assert "covers a subset" in explorer.format_report(report)


def test_the_clock_is_injected_and_only_read_twice() -> None:
    ticks = itertools.count(10.0, 2.5)
    report = explorer.explore(Model(Bounds(artifacts=1, transactions=1)), clock=lambda: next(ticks))
    assert report.elapsed == 2.5


def test_without_a_clock_there_is_no_time(small: explorer.Report) -> None:
    assert small.elapsed is None


def test_the_report_counts_states_transitions_and_depth(small: explorer.Report) -> None:
    text = explorer.format_report(small)
    counts = f"{small.states:,} states, {small.transitions:,} transitions"
    assert f"{counts}, depth {small.depth}" in text
    assert small.transitions >= small.states - 1 and small.depth > 0


def test_exploration_is_deterministic() -> None:
    model = Model(Bounds(artifacts=1, transactions=1))
    first, again = explorer.explore(model), explorer.explore(model)
    assert (again.states, again.transitions, again.depth) == (
        first.states,
        first.transitions,
        first.depth,
    )


def test_the_json_form_carries_the_verdict(small: explorer.Report) -> None:
    d = explorer.report_to_dict(small)
    assert d["states"] == small.states and d["violations"] == 0 and d["trace"] == []
    assert d["l1_checked"] is True and d["l1_stuck"] == 0
