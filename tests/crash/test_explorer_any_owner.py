"""The crash explorer takes any owner: a harness's store, seen through the protocol only.

The reference harnesses keep S1-S7 in every crash state the bounded subset
explores; scenarios whose owner fault a harness cannot show are reported as
skipped; and broken adapters whose bug lives only in the store's durable
state are caught, so the protocol view (fences) sees what the internal rows
used to show.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from toolswap.faultinject.explorer import STANDARD_SCENARIOS, CrashExplorer
from toolswap.faultinject.owner_source import harness_sources

from toolswap.owners.memory import InMemoryHarness
from toolswap.owners.sqlite import SQLiteHarness
from toolswap.testing.deep import DeepResult, crash_explore_harness

from ..stateful._broken_owners import (
    CountingSQLiteHarness,
    RejectAfterWriteHarness,
    RemoveDeletesHarness,
    SealForgetsHarness,
)

NO_MAPPING = {"publish_in_flight", "reconcile_stale"}  # no store fault can produce these


@pytest.fixture(scope="module")
def sqlite_run(tmp_path_factory: pytest.TempPathFactory) -> DeepResult:
    return crash_explore_harness(SQLiteHarness, tmp_path_factory.mktemp("crash-sqlite"))


def test_sqlite_owner_keeps_every_invariant_in_every_crash_state(sqlite_run: DeepResult) -> None:
    assert sqlite_run.passed, sqlite_run.details
    assert " 0 violations" in sqlite_run.summary


def test_sqlite_skips_only_the_faults_no_store_can_show(sqlite_run: DeepResult) -> None:
    skipped = {d.split(":")[0].removeprefix("skipped ") for d in sqlite_run.details}
    assert skipped == NO_MAPPING
    assert "2 scenarios skipped" in sqlite_run.summary


def test_in_memory_owner_passes_and_reports_what_it_could_not_run(tmp_path: Path) -> None:
    result = crash_explore_harness(InMemoryHarness, tmp_path)
    assert result.passed, result.details
    skipped = {d.split(":")[0].removeprefix("skipped ") for d in result.details}
    needs_store_faults = {
        "publish_uncertain_before_write",
        "publish_uncertain_after_write",
        "publish_then_unknown",
        "reconcile_lost_tombstone",
        "reconcile_unknown",
        "remove_failed",
        "remove_lost_ack",
    }
    assert skipped == NO_MAPPING | needs_store_faults
    assert "9 scenarios skipped" in result.summary


def test_every_store_gets_its_own_folder_and_is_destroyed(tmp_path: Path) -> None:
    CountingSQLiteHarness.destroyed = 0
    result = crash_explore_harness(CountingSQLiteHarness, tmp_path, scenarios=["remove"])
    states = int(result.summary.split(": ")[1].split(" crash states")[0])
    # one store per crash state, plus the uncrashed run that counts the targets
    assert CountingSQLiteHarness.destroyed == states + 1
    assert os.listdir(tmp_path) == []


def test_the_io_targets_and_other_modes_scale_up(tmp_path: Path) -> None:
    narrow = crash_explore_harness(SQLiteHarness, tmp_path, scenarios=["publish_ok"])
    wide = crash_explore_harness(
        SQLiteHarness, tmp_path, scenarios=["publish_ok"], every_io=True, modes=["drop", "torn"]
    )
    assert narrow.passed and wide.passed, (narrow.details, wide.details)
    count = lambda r: int(r.summary.split(": ")[1].split(" crash")[0].replace(",", ""))  # noqa: E731
    assert count(wide) > 5 * count(narrow)


@pytest.mark.parametrize(
    ("harness", "scenario", "expected"),
    [
        (RemoveDeletesHarness, "remove", "S4 in remove"),
        (SealForgetsHarness, "reconcile_absent", "S3 in reconcile_absent"),
        (RejectAfterWriteHarness, "publish_ok", "S3 in publish_ok"),
    ],
    ids=["remove-deletes-the-row", "seal-writes-no-tombstone", "rejects-after-writing"],
)
def test_a_bug_only_the_store_shows_is_caught_through_the_protocol(
    tmp_path: Path, harness: type[SQLiteHarness], scenario: str, expected: str
) -> None:
    result = crash_explore_harness(harness, tmp_path, scenarios=[scenario])
    assert not result.passed
    assert any(d.startswith(expected) for d in result.details), result.details


def test_the_same_scenarios_pass_on_the_correct_owner(tmp_path: Path) -> None:
    result = crash_explore_harness(
        SQLiteHarness, tmp_path, scenarios=["remove", "reconcile_absent", "publish_ok"]
    )
    assert result.passed, result.details


def test_an_unmappable_fault_is_skipped_not_passed(tmp_path: Path) -> None:
    scenario = next(s for s in STANDARD_SCENARIOS if s.name == "reconcile_stale")
    explorer = CrashExplorer(
        [scenario], seeds=1, modes=["drop"], owner=harness_sources(SQLiteHarness, str(tmp_path))
    )
    result = explorer.explore()
    assert result.states == 0 and "reconcile_stale" in result.skipped
    assert result.to_dict()["skipped_scenarios"] == {
        "reconcile_stale": result.skipped[scenario.name]
    }
