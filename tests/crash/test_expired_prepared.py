"""Issue 18 explorer item 1 in the crash explorer: a PREPARED lease past its retain_until.

A PREPARED lease protects its artifact whatever its retain_until until it is
reconciled (S1); only a COMMITTED lease's expiry counts, by the caller's
choice.  The mutant ``prepared_lease_expires`` (cleanup honours the expiry of a
PREPARED lease) is killed in test_mutants.py with every other mutant; here the
scenario itself is checked.
"""

from __future__ import annotations

from toolswap.faultinject.explorer import (
    FAR,
    STANDARD_SCENARIOS,
    CrashExplorer,
    Target,
    run_state,
    scenario_named,
)
from toolswap.faultinject.mutants import mutant_named

NAME = "gc_expired_prepared"


def test_the_scenario_is_a_standard_one() -> None:
    assert NAME in {s.name for s in STANDARD_SCENARIOS}


def test_the_claim_is_past_its_retain_until_when_gc_runs() -> None:
    _, _, world = run_state(scenario_named(NAME), Target("end"), "drop")
    until = world.claims["t1"].retain_until
    assert until is not None and until < FAR


def test_every_crash_state_keeps_s1_to_s7() -> None:
    result = CrashExplorer([scenario_named(NAME)], seeds=1).explore()
    assert result.states > 20
    assert result.violations == [], result.violations[:3]


def test_honouring_the_expiry_of_a_prepared_lease_is_s1() -> None:
    with mutant_named("prepared_lease_expires").active():
        result = CrashExplorer([scenario_named(NAME)], seeds=1).explore()
    assert {v.invariant for v in result.violations} == {"S1"}
