"""Issue 14 item 4 in the crash explorer: a reported conflict's artifact survives GC (S1).

The owner shows t1 -> tool_result_001.txt (an old orphan) while the journal
intended tool_result_002.txt; reconciliation then GC run, crashed at every
crash point (the CONFLICT append's own included), and every crash state keeps
S1-S7.  The same scenario with the CONFLICT record switched off is caught.
"""

from __future__ import annotations

import pytest
from toolswap.faultinject.explorer import STANDARD_SCENARIOS, CrashExplorer, scenario_named

from toolswap.journal import ArtifactRetentionJournal

NAME = "reconcile_conflict_then_gc"


def test_the_scenario_is_a_standard_one() -> None:
    assert NAME in {s.name for s in STANDARD_SCENARIOS}


def test_every_crash_state_keeps_s1_to_s7() -> None:
    result = CrashExplorer([scenario_named(NAME)], seeds=1).explore()
    assert result.states > 20
    assert result.violations == [], result.violations[:3]


def test_without_the_conflict_record_s1_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        ArtifactRetentionJournal, "_record_conflict", lambda self, txn, observation, now: True
    )
    result = CrashExplorer([scenario_named(NAME)], seeds=1, modes=["drop"]).explore()
    assert result.violation_counts["S1"] > 0
