"""``toolswap crashcheck``: JSON shape, exit codes, and usage errors."""

from __future__ import annotations

import contextlib
import json
import re

import pytest
from toolswap.faultinject import mutants
from toolswap.faultinject.explorer import MISUSE_SCENARIOS

from toolswap.cli import main


def test_crashcheck_json_reports_states_violations_and_coverage(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(
        ["crashcheck", "--scenario", "publish_ok", "--seeds", "1", "--ignore", "S6.reuse", "--json"]
    )
    document = json.loads(capsys.readouterr().out)
    assert code == 0
    assert document["crash_states"] > 100
    assert document["violation_count"] == 0
    assert document["crash_point_coverage"]["publish.after_prepared"] > 0


def test_crashcheck_exit_code_follows_the_violations(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["crashcheck", "--scenario", "externalize", "--seeds", "1", "--json"])
    document = json.loads(capsys.readouterr().out)
    assert code == (1 if document["violation_count"] else 0)


def test_crashcheck_misuse_matrix_catches_every_misuse(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "crashcheck",
            "--scenario",
            "externalize",
            "--seeds",
            "1",
            "--mode",
            "drop",
            "--ignore",
            "S6.reuse",
            "--misuse",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert out.count(" caught") == len(MISUSE_SCENARIOS) and "MISSED" not in out


def test_crashcheck_mutants_json_reports_the_kill_matrix(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["crashcheck", "--mutants", "--mutant", "counter-restart", "--mode", "drop"]
    code = main([*argv, "--ignore", "S6.reuse", "--json"])
    document = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [row["mutant"] for row in document["mutants"]] == ["counter-restart"]
    assert document["mutants"][0]["identifier"] == "counter_overwrites"
    assert document["mutants"][0]["killed"] and document["baseline"]["violation_count"] == 0


def test_a_mutant_is_named_like_the_spec_variant_of_its_mistake() -> None:
    from toolswap.spec import compaction, variants

    labels = {m.label for m in mutants.MUTANTS}
    assert all("_" not in label for label in labels)
    # the mistakes both layers show go by one name
    assert {"publish-before-prepared", "counter-restart", "gc-skips-revalidation"} <= labels
    # mistakes of the implementation that the abstract spec has no variant for
    implementation_only = {
        "splitlines-journal",
        "gc-ignores-corrupt-journal",
        "gc-skips-name-denial",
        "unanchored-artifact-name",
        "prepare-skips-checks",
        "raw-cleanup-bypasses-journal",
        # the spec's client-side-generation reconciler has neither fence nor CAS: one variant
        "reconcile-without-fence",
    }
    # the compaction model (spec/compaction.py) names its own mistakes
    modelled = set(variants.names()) | set(compaction.mistake_names())
    assert labels & modelled == labels - implementation_only
    assert {"remove-before-checkpoint-durable", "snapshot-without-settled-check"} <= labels


def test_the_old_underscore_mutant_names_are_still_accepted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["crashcheck", "--mutants", "--mutant", "counter_overwrites", "--mode", "drop"]
    assert main([*argv, "--mutant", "counter-restart", "--ignore", "S6.reuse", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [row["mutant"] for row in document["mutants"]] == ["counter-restart"]  # once
    assert mutants.mutant_named("counter_overwrites") is mutants.mutant_named("counter-restart")


def test_crashcheck_mutants_fails_when_a_mutant_survives(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    harmless = mutants.Mutant(  # a catalogued mistake (S2) whose install changes nothing
        name="harmless",
        label="publish-before-prepared",
        mistake="none",
        target="nothing",
        scenarios=("externalize",),
        install=contextlib.nullcontext,
    )
    monkeypatch.setattr(mutants, "MUTANTS", (harmless,))
    code = main(["crashcheck", "--mutants", "--mode", "drop", "--ignore", "S6.reuse"])
    out = capsys.readouterr().out
    assert code == 1 and "0/1 mutants killed" in out
    assert re.search(r"^publish-before-prepared +S2 +NO ", out, re.M), out  # its row says so


@pytest.mark.parametrize(
    "argv",
    [
        ["--scenario", "nope"],
        ["--seeds", "0"],
        ["--mode", "melt"],
        ["--mutant", "counter_overwrites"],
        ["--mutants", "--mutant", "nope"],
        ["--mutants", "--scenario", "gc"],
    ],
)
def test_crashcheck_bad_input_is_a_usage_error(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["crashcheck", *argv]) == 2
    assert "error" in capsys.readouterr().err


def test_crashcheck_lists_scenarios(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crashcheck", "--list"]) == 0
    assert "gc_concurrent_prepare" in capsys.readouterr().out


def test_crashcheck_lists_the_mutants(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crashcheck", "--list"]) == 0
    out = capsys.readouterr().out
    assert "splitlines-journal (mutant, caught by S6)" in out
    assert "counter-restart (mutant, caught by S6; in the model too" in out


def test_crashcheck_list_json_is_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crashcheck", "--list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    kinds = {row["kind"] for row in rows}
    assert kinds == {"scenario", "misuse", "mutant"}
    mutant = next(r for r in rows if r["name"] == "counter-restart")
    assert (mutant["caught_by"], mutant["identifier"]) == ("S6", "counter_overwrites")


def test_crashcheck_help_has_a_description(capsys: pytest.CaptureFixture[str]) -> None:
    with contextlib.suppress(SystemExit):  # argparse's own exit, where main does not map it
        main(["crashcheck", "--help"])
    out = capsys.readouterr().out
    assert "crash every standard scenario everywhere" in out
    assert "``" not in out and ":mod:" not in out


def test_one_seed_is_singular(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["crashcheck", "--scenario", "externalize", "--seeds", "1", "--mode", "drop"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "; 1 seed;" in out and "1 seeds" not in out
    assert "crash states per scenario:" in out
