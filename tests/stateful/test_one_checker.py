"""One invariant checker: the spec explorer, the crash explorer and the machine share it.

Each harness turns its own state into an Observable and calls the functions of
``toolswap.spec.invariants``.  The claim is checked by changing those functions
in one place, the ``SAFETY`` table, and watching all three harnesses report the
change: a harness with its own copy of an invariant would not.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from toolswap.faultinject.explorer import Target, run_state, scenario_named
from toolswap.spec import explorer, invariants
from toolswap.spec.observable import Observable
from toolswap.spec.system import Bounds, Model

from .test_protocol_machine import SimulatedDiskMachine

PLANTED = "a finding planted in the one SAFETY table"


def _planted_s3(o: Observable) -> Iterator[invariants.Finding]:
    """S3, made to fire on every observable with a lease or an artifact."""
    if o.leases or o.artifacts:
        yield invariants.Invariant.S3, PLANTED


@pytest.fixture
def planted(monkeypatch: pytest.MonkeyPatch) -> None:
    table = tuple(
        (invariant, _planted_s3 if invariant is invariants.Invariant.S3 else check)
        for invariant, check in invariants.SAFETY
    )
    monkeypatch.setattr(invariants, "SAFETY", table)


@pytest.mark.usefixtures("planted")
def test_the_spec_explorer_reports_what_the_table_says() -> None:
    report = explorer.explore(Model(Bounds(artifacts=1, transactions=1)))
    assert report.violation is not None
    assert report.violation.invariants == (invariants.Invariant.S3,)
    assert report.violation.reasons == (PLANTED,)


@pytest.mark.usefixtures("planted")
def test_the_crash_explorer_reports_what_the_table_says() -> None:
    violations, _, _ = run_state(scenario_named("publish_ok"), Target("end"), "drop")
    assert ("S3", PLANTED) in [(v.invariant, v.detail) for v in violations]


@pytest.mark.usefixtures("planted")
def test_the_stateful_machine_reports_what_the_table_says() -> None:
    @settings(max_examples=1, database=None, derandomize=True, deadline=None)
    @given(st.just(None))
    def run(_: None) -> None:
        machine = SimulatedDiskMachine()
        try:
            machine.externalize(b"x" * 5000, chunked=False)
            with pytest.raises(AssertionError, match=f"S3: {PLANTED}"):
                machine.s1_to_s7()
        finally:
            machine.teardown()

    run()


def test_without_the_plant_all_three_hold() -> None:
    assert explorer.explore(Model(Bounds(artifacts=1, transactions=1))).violation is None
    violations, _, _ = run_state(scenario_named("publish_ok"), Target("end"), "drop")
    assert violations == []
