"""Issue 18 items 7, 2 and 9 in the crash explorer: unknown entries, a corrupt journal, digests.

* item 7: entries of ``tool-results/`` that are not artifacts (a plain file, a
  directory, an artifact-like name with a bad suffix or too few digits) survive
  every crash, recovery and cleanup, bytes intact (S7);
* item 2: over a journal with a corrupt complete record, cleanup refuses (a
  CorruptStateError) in the run and in recovery, and deletes nothing (S1);
* item 9: a tampered artifact and a conflicting claim (digests that disagree
  with the file) keep their files, bytes intact: ``retained_corrupt`` (S1).

Each check is also shown to fire: a scenario that breaks the rule by hand is
caught.  The mutants that make the mistake in the real code are killed in
test_mutants.py (the kill matrix runs every mutant in ``MUTANTS``).
"""

from __future__ import annotations

import posixpath

import attrs
import pytest
from toolswap.faultinject.explorer import (
    FAR,
    RESULTS,
    STANDARD_SCENARIOS,
    TTL,
    UNKNOWN_ENTRIES,
    CrashExplorer,
    Target,
    World,
    run_state,
    scenario_named,
)
from toolswap.faultinject.mutants import mutant_named

from toolswap.cleanup import ArtifactCleanupPolicy

GC_SCENARIOS = ("gc", "gc_concurrent_prepare", "gc_hostile_entries", "gc_after_release")
NEW = ("gc_unknown_entries", "gc_corrupt_journal", "gc_digest_conflict")


def _end(scenario_name: str) -> tuple[list[str], World]:
    violations, _, world = run_state(scenario_named(scenario_name), Target("end"), "drop")
    return [f"{v.invariant}: {v.detail}" for v in violations], world


def _remove(world: World, path: str) -> None:
    """Unlink durably (a ``drop`` crash keeps only what the directory fsync made durable)."""
    world.disk.unlink(path)
    world.disk.fsync_dir(posixpath.dirname(path))


def _with_run(scenario_name: str, run: object) -> list[tuple[str, str]]:
    scenario = attrs.evolve(scenario_named(scenario_name), run=run)
    violations, _, _ = run_state(scenario, Target("end"), "drop")
    return [(v.invariant, v.detail) for v in violations]


def test_the_new_scenarios_are_standard_ones() -> None:
    assert set(NEW) <= {s.name for s in STANDARD_SCENARIOS}


@pytest.mark.parametrize("name", NEW)
def test_every_crash_state_of_the_new_scenarios_is_clean(name: str) -> None:
    result = CrashExplorer([scenario_named(name)], seeds=1).explore()
    assert result.states > 50
    assert result.violations == [], result.violations[:3]
    assert result.progress == [], result.progress[:3]


# -- item 7: unknown entries -------------------------------------------------------------------


def test_the_unknown_entries_cover_each_kind() -> None:
    names = dict(UNKNOWN_ENTRIES)
    assert "scratch.txt" in names  # a plain file
    assert any(data is None for data in names.values())  # a directory
    assert any(n.startswith("tool_result_") and not n.endswith(".txt") for n in names)
    assert "tool_result_42.txt" in names  # too few digits


@pytest.mark.parametrize("name", (*GC_SCENARIOS, "gc_unknown_entries"))
def test_every_gc_scenario_plants_the_unknown_entries(name: str) -> None:
    world = World()
    scenario_named(name).setup(world)
    planted = {posixpath.relpath(p, RESULTS) for p in world.foreign}
    assert planted >= {n for n, _ in UNKNOWN_ENTRIES}


@pytest.mark.parametrize("name", GC_SCENARIOS)
def test_unknown_entries_survive_a_gc_that_deletes(name: str) -> None:
    violations, world = _end(name)
    assert violations == []
    assert world.disk.io_log and any(op == "unlink" for op, _ in world.disk.io_log)
    for path, data in world.foreign.items():
        if data is not None:
            assert world.disk.read_file(path) == data


@pytest.mark.parametrize("name", [n for n, d in UNKNOWN_ENTRIES if d is not None])
def test_deleting_an_unknown_entry_is_s7(name: str) -> None:
    path = posixpath.join(RESULTS, name)
    found = _with_run("gc_unknown_entries", lambda world: _remove(world, path))
    assert ("S7", f"{name} is not ours, yet was deleted or changed") in found


def test_changing_an_unknown_entry_is_s7() -> None:
    path = posixpath.join(RESULTS, "scratch.txt")
    found = _with_run("gc_unknown_entries", lambda world: world.disk.put_file(path, b"x"))
    assert ("S7", "scratch.txt is not ours, yet was deleted or changed") in found


def test_removing_the_unknown_directory_is_s7() -> None:
    def run(world: World) -> None:
        _remove(world, posixpath.join(RESULTS, "drafts", "tool_result_001.txt"))
        world.disk.rename(posixpath.join(RESULTS, "drafts"), posixpath.join(RESULTS, "gone"))
        world.disk.fsync_dir(RESULTS)

    found = {detail for invariant, detail in _with_run("gc_unknown_entries", run)}
    assert "drafts is not ours, yet was deleted or changed" in found


def test_a_loose_name_rule_deletes_the_bad_suffix_entry_at_the_end_state() -> None:
    with mutant_named("unanchored_artifact_name").active():
        violations, _ = _end("gc_unknown_entries")
    assert "S7: tool_result_007.txt.bak is not ours, yet was deleted or changed" in violations


def test_without_the_name_denial_cleanup_fails_on_a_stray_file_and_deletes_nothing() -> None:
    # SessionPaths.artifact_path refuses the name, so the plan fails (L1), fail closed
    with mutant_named("gc_skips_name_denial").active():
        violations, world = _end("gc_unknown_entries")
    assert any(v.startswith("L1: recovery failed: InvalidSourceId") for v in violations)
    assert not any(v.startswith("S7") for v in violations)
    assert not any(op == "unlink" for op, _ in world.disk.io_log or [])


# -- item 2: a corrupt journal ----------------------------------------------------------------


def test_the_corrupt_journal_scenario_really_has_a_corrupt_journal() -> None:
    world = World()
    scenario_named("gc_corrupt_journal").setup(world)
    with pytest.raises(Exception, match="hash") as caught:
        world.new_journal().recover()
    assert type(caught.value).__name__ == "JournalCorruptError"


def test_over_a_corrupt_journal_gc_refuses_and_every_file_stays() -> None:
    violations, world = _end("gc_corrupt_journal")
    assert violations == []
    assert not any(op == "unlink" for op, _ in world.disk.io_log or [])
    for name, data in world.expected.items():
        assert world.disk.read_file(posixpath.join(RESULTS, name)) == data


def test_a_gc_that_does_not_refuse_is_caught() -> None:
    # journal_corrupt on an intact journal: GC runs instead of refusing
    scenario = attrs.evolve(scenario_named("gc_corrupt_journal"), setup=scenario_named("gc").setup)
    violations, _, _ = run_state(scenario, Target("end"), "drop")
    details = {(v.invariant, v.detail) for v in violations}
    assert ("S1.fail_closed", "GC ran over a corrupt journal, no refusal") in details
    assert ("S1.fail_closed", "GC ran over a corrupt journal in recovery, no refusal") in details


def test_deleting_an_artifact_over_a_corrupt_journal_is_caught() -> None:
    path = posixpath.join(RESULTS, "tool_result_001.txt")  # the orphan: no lease names it
    found = _with_run("gc_corrupt_journal", lambda world: _remove(world, path))
    assert ("S1.fail_closed", f"{path} unlinked over a corrupt journal") in found


def test_treating_the_corrupt_journal_as_empty_is_caught_at_the_end_state() -> None:
    with mutant_named("gc_ignores_corrupt_journal").active():
        violations, _ = _end("gc_corrupt_journal")
    assert "S1.fail_closed: GC ran over a corrupt journal, no refusal" in violations
    assert (
        "S1: unlinking: tool_result_002.txt is deleted while t1's COMMITTED lease still protects it"
        in violations
    )


# -- item 9: tampered artifact, conflicting claim -----------------------------------------------


def test_both_mismatched_files_are_retained_corrupt() -> None:
    world = World()
    scenario_named("gc_digest_conflict").setup(world)
    policy = ArtifactCleanupPolicy(orphan_ttl_seconds=TTL, max_deletions=100, dry_run=True)
    plan = world.ext.plan_cleanup_from_journal(world.journal, policy=policy, now=FAR)
    assert plan.entry("tool_result_001.txt").status == "retained_corrupt"  # tampered
    assert plan.entry("tool_result_002.txt").status == "retained_corrupt"  # conflicting claim


def test_after_gc_the_tampered_file_keeps_its_tampered_bytes() -> None:
    violations, world = _end("gc_digest_conflict")
    assert violations == []
    for name, data in world.tampered.items():
        assert world.disk.read_file(posixpath.join(RESULTS, name)) == data
    assert world.disk.exists(posixpath.join(RESULTS, "tool_result_002.txt"))


def test_deleting_the_tampered_file_is_s1() -> None:
    path = posixpath.join(RESULTS, "tool_result_001.txt")
    found = _with_run("gc_digest_conflict", lambda world: _remove(world, path))
    assert (
        "S1",
        "unlinking: tool_result_001.txt is deleted while t1's COMMITTED lease still protects it",
    ) in found


def test_changing_the_tampered_file_again_is_s1() -> None:
    path = posixpath.join(RESULTS, "tool_result_001.txt")
    found = _with_run("gc_digest_conflict", lambda world: world.disk.put_file(path, b"again"))
    assert ("S1", "tool_result_001.txt changed while t1's reference to it is visible") in found


def test_deleting_the_file_of_the_conflicting_claim_is_s1() -> None:
    path = posixpath.join(RESULTS, "tool_result_002.txt")
    found = {detail for _, detail in _with_run("gc_digest_conflict", lambda w: _remove(w, path))}
    reported = "reported as pending_conflict, is visible"
    assert f"tool_result_002.txt is deleted while t2's reference to it, {reported}" in found


def test_a_gc_that_ignores_digest_conflicts_is_caught_at_the_end_state() -> None:
    with mutant_named("gc_ignores_digest_conflict").active():
        violations, _ = _end("gc_digest_conflict")
    assert (
        "S1: unlinking: tool_result_001.txt is deleted while t1's COMMITTED lease still protects it"
        in violations
    )
    assert any(
        v.startswith(
            "S1: unlinking: tool_result_002.txt is deleted while t2's reference to it, reported"
        )
        for v in violations
    )
