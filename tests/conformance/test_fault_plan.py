"""The fault plan fires each fault on the store call it was aimed at, and remembers the rest;
the bench reports a fault that never fired, and an operation the plan never saw."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from toolswap.owners.sqlite import SQLiteHarness
from toolswap.testing import CheckFailed, StoreFault
from toolswap.testing.bench import Bench
from toolswap.testing.faults import FaultPlan


def _steps(plan: FaultPlan, calls: list[tuple[bool, bool]]) -> list[StoreFault | None]:
    return [plan.step(reads=r, completes=c).fault for r, c in calls]


def test_a_fault_aimed_at_call_k_fires_on_the_kth_call_after_arming_and_only_there() -> None:
    plan = FaultPlan()
    plan.step()  # a call before arming does not count
    plan.arm(StoreFault.FAIL, call=2)
    assert _steps(plan, [(False, False)] * 4) == [None, None, StoreFault.FAIL, None]
    assert plan.unfired() == []


def test_without_a_call_lost_ack_waits_for_the_call_that_completes_the_operation() -> None:
    plan = FaultPlan()
    plan.arm(StoreFault.LOST_ACK)
    fired = _steps(plan, [(True, False), (False, False), (False, True)])
    assert fired == [None, None, StoreFault.LOST_ACK]


def test_a_corrupt_read_aimed_at_a_write_never_fires_and_is_reported() -> None:
    plan = FaultPlan()
    plan.arm(StoreFault.CORRUPT_READ, call=0)
    assert _steps(plan, [(False, False), (True, False)]) == [None, None]
    assert [a.fault for a in plan.unfired()] == [StoreFault.CORRUPT_READ]


def test_a_delay_waits_inside_the_step_and_then_lets_the_call_through() -> None:
    plan = FaultPlan()
    plan.arm(StoreFault.DELAY, call=0, seconds=0.2)
    started = time.perf_counter()
    step = plan.step()
    assert time.perf_counter() - started >= 0.2
    assert not (step.fails or step.lost_ack or step.corrupt)


def test_a_delay_without_seconds_is_refused() -> None:
    with pytest.raises(ValueError, match="seconds"):
        FaultPlan().arm(StoreFault.DELAY)


def test_the_log_says_which_calls_were_reads() -> None:
    plan = FaultPlan()
    _steps(plan, [(False, False), (True, False), (False, True)])
    assert [c.reads for c in plan.log] == [False, True, False]
    assert plan.calls == 3


def test_the_bench_reports_a_fault_armed_but_never_fired(tmp_path: Path) -> None:
    bench = Bench(SQLiteHarness, str(tmp_path), "O8.in-doubt-at-every-call")
    try:
        owner = bench.open()
        plan = bench.arm(owner, StoreFault.FAIL, call=50)  # far past the calls it makes
        bench.remove(owner, bench.txn("t"))
        with pytest.raises(CheckFailed, match=r"fail on store call #50 was armed for a remove"):
            bench.fired(plan, "a remove")
    finally:
        bench.finish()


def test_an_operation_no_plan_sees_is_reported_as_a_harness_defect(tmp_path: Path) -> None:
    class Elsewhere(SQLiteHarness):
        def fault_plan(self, owner: object) -> FaultPlan:
            return FaultPlan()  # not the plan the handle's store calls consult

    bench = Bench(Elsewhere, str(tmp_path), "O8.in-doubt-at-every-call")
    try:
        with pytest.raises(CheckFailed, match="made no store call that the harness's fault plan"):
            bench.store_calls(lambda o: o.remove(bench.txn("t")))
    finally:
        bench.finish()
