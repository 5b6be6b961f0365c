"""``toolswap crashcheck``: JSON shape, exit codes, and usage errors."""

from __future__ import annotations

import contextlib
import json

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
    argv = ["crashcheck", "--mutants", "--mutant", "counter_overwrites", "--mode", "drop"]
    code = main([*argv, "--ignore", "S6.reuse", "--json"])
    document = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [row["mutant"] for row in document["mutants"]] == ["counter_overwrites"]
    assert document["mutants"][0]["killed"] and document["baseline"]["violation_count"] == 0


def test_crashcheck_mutants_fails_when_a_mutant_survives(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    harmless = mutants.Mutant(
        name="harmless",
        mistake="none",
        invariant="S2",
        target="nothing",
        scenarios=("externalize",),
        install=contextlib.nullcontext,
    )
    monkeypatch.setattr(mutants, "MUTANTS", (harmless,))
    code = main(["crashcheck", "--mutants", "--mode", "drop", "--ignore", "S6.reuse"])
    out = capsys.readouterr().out
    assert code == 1 and "harmless" in out and "0/1 mutants killed" in out


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
    assert "splitlines_journal (mutant, caught by S6)" in capsys.readouterr().out
