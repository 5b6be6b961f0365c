"""A scenario written outside the standard set runs through the crash explorer as is."""

from __future__ import annotations

from toolswap.faultinject.explorer import CrashExplorer, Scenario, World


def _two_leases_on_one_artifact(world: World) -> None:
    ref = world.externalize()
    world.publish(ref, "a")
    world.publish(ref, "b")


def _release_one_then_collect(world: World) -> None:
    world.remove("a")
    world.gc()


def _delete_behind_the_protocol(world: World) -> None:
    ref = world.externalize()
    world.prepare(ref, "t1")
    world.disk.unlink(ref.path)  # a careless tool deletes a leased artifact


def test_a_new_scenario_explores_with_no_violation() -> None:
    scenario = Scenario(
        name="two_leases_release_one",
        setup=_two_leases_on_one_artifact,
        run=_release_one_then_collect,
    )
    result = CrashExplorer([scenario], seeds=2).explore()
    assert result.states > 50
    assert result.violation_total == 0, result.violations[:3]
    assert result.per_scenario == {"two_leases_release_one": result.states}


def test_a_new_scenario_that_breaks_s1_is_reported() -> None:
    scenario = Scenario(name="delete_behind", setup=lambda w: None, run=_delete_behind_the_protocol)
    result = CrashExplorer([scenario], seeds=1, modes=["drop"]).explore()
    assert result.violation_counts["S1"] > 0
