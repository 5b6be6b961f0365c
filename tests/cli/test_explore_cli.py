"""``toolswap explore`` as a user sees it: verdicts, traces, exit codes, SPEC.md regeneration."""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys

import pytest
import toolswap.spec
from toolswap.spec import diagrams, variants

from toolswap.cli import main
from toolswap.cli.explore import EXIT_INCOMPLETE, EXIT_NOT_CAUGHT, EXIT_OK, EXIT_VIOLATION

SMALL = "artifacts=1,transactions=1"


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["explore", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_correct_model_exits_0_with_the_state_count(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["--bounds", SMALL], capsys)
    assert (code, err) == (EXIT_OK, "")
    assert "verdict: 0 violations of S1-S7 (516 states, " in out
    assert " transitions, depth " in out and " s)" in out  # time is printed
    assert "L1 progress: holds" in out


@pytest.mark.parametrize("name", variants.names())
def test_a_variant_prints_its_trace_and_exits_1(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(["--variant", name], capsys)
    short = variants.get(name).expected.value  # the handle: "S2"
    assert code == EXIT_VIOLATION
    assert "shortest counterexample (" in out and "\n  1. " in out
    assert f"expected violation of {short} found." in out
    assert "why it matters: " in out


def test_a_variant_that_is_not_caught_exits_3(capsys: pytest.CaptureFixture[str]) -> None:
    # without crashes the counter never restarts, so the mistake cannot show
    bounds = "crashes=false,artifacts=1,transactions=1"
    code, out, _ = _run(["--variant", "counter-restart", "--bounds", bounds], capsys)
    assert code == EXIT_NOT_CAUGHT
    assert "NOT CAUGHT: expected a violation of S6" in out


def test_json_carries_the_verdict_and_the_trace(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["--variant", "publish-before-prepared", "--json"], capsys)
    doc = json.loads(out)
    assert code == EXIT_VIOLATION == doc["exit_status"]
    assert doc["expected"] == "S2 prepare before publish" and doc["expected_found"] is True
    assert doc["violated"] == ["S2 prepare before publish"]
    assert len(doc["trace"]) == 5 and doc["states"] > 0
    assert isinstance(doc["elapsed_seconds"], float)


def test_json_for_the_correct_model(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["--bounds", SMALL, "--json"], capsys)
    doc = json.loads(out)
    assert (code, doc["violations"], doc["states"], doc["l1_stuck"]) == (EXIT_OK, 0, 516, 0)
    assert (doc["bounds"]["artifacts"], doc["bounds"]["crashes"]) == (1, True)


def test_list_names_every_variant_and_its_invariant(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["--list"], capsys)
    assert code == EXIT_OK
    lines = out.splitlines()
    assert len(lines) == len(variants.VARIANTS)
    for line, v in zip(lines, variants.VARIANTS.values(), strict=True):
        assert line.split()[:2] == [v.name, v.expected.value]


def test_list_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["--list", "--json"], capsys)
    assert code == EXIT_OK
    assert [d["name"] for d in json.loads(out)] == list(variants.names())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--variant", "no-such-mistake"], "unknown variant 'no-such-mistake'"),
        (["--bounds", "artifacts=9"], "artifacts must be 1..4"),
        (["--bounds", "speed=fast"], "bad bound 'speed=fast'"),
        (["--bounds", "crashes=perhaps"], "true or false"),
    ],
)
def test_a_usage_error_is_one_stderr_line_and_exit_2(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(args, capsys)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith("toolswap: error: ") and message in err


def test_write_spec_diagrams_regenerates_a_stale_copy(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    committed = pathlib.Path(toolswap.spec.__file__).with_name("SPEC.md").read_text("utf-8")
    stale = diagrams.splice(committed, "an old hand-drawn picture\n")
    copy = tmp_path / "SPEC.md"
    copy.write_text(stale, encoding="utf-8")
    code, out, _ = _run(["--write-spec-diagrams", str(copy)], capsys)
    assert code == EXIT_OK and "regenerated" in out
    assert copy.read_text("utf-8") == committed
    code, out, _ = _run(["--write-spec-diagrams", str(copy)], capsys)
    assert code == EXIT_OK and "already match" in out


def test_write_spec_diagrams_refuses_a_file_without_markers(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = tmp_path / "notes.md"
    plain.write_text("# no markers\n", encoding="utf-8")
    code, _, err = _run(["--write-spec-diagrams", str(plain)], capsys)
    assert code == 2 and "marker" in err
    assert plain.read_text("utf-8") == "# no markers\n"


def test_help_documents_the_exit_codes() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "toolswap.cli", "explore", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0
    for line in ("0  no violation", "1  a violation was found", "2  usage error", "3  a variant"):
        assert line in result.stdout


def test_help_shows_no_raw_restructuredtext() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "toolswap.cli", "explore", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "``" not in done.stdout and ":mod:" not in done.stdout
    assert "--variant the" in done.stdout.replace("\n", " ")


def test_counts_are_written_one_way_with_thousands_separators(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = _run(["--bounds", "artifacts=1,transactions=2"], capsys)
    assert code == EXIT_OK
    verdict = next(line for line in out.splitlines() if line.startswith("verdict:"))
    assert re.search(r"\(\d{1,3}(,\d{3})+ states, \d{1,3}(,\d{3})+ transitions, depth", verdict)


def test_one_step_is_singular(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["--variant", "gc-follows-unknown-entries"], capsys)
    assert code == EXIT_VIOLATION
    assert "shortest counterexample (1 step):" in out


def test_a_budget_that_runs_out_is_incomplete_never_a_pass(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = _run(["--bounds", "artifacts=1,transactions=2", "--max-states", "500"], capsys)
    assert code == EXIT_INCOMPLETE and EXIT_INCOMPLETE not in (EXIT_OK, EXIT_VIOLATION)
    assert "verdict: INCOMPLETE" in out and "0 violations" not in out
    code, out, _ = _run(
        ["--bounds", "artifacts=1,transactions=2", "--max-states", "500", "--json"], capsys
    )
    doc = json.loads(out)
    assert (code, doc["complete"], doc["stopped"], doc["exit_status"]) == (
        EXIT_INCOMPLETE,
        False,
        "max_states",
        EXIT_INCOMPLETE,
    )


def test_a_variant_whose_budget_runs_out_is_incomplete(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["--variant", "gc-trusts-memory-path", "--max-states", "100"], capsys)
    assert code == EXIT_INCOMPLETE and "INCOMPLETE" in out and "NOT CAUGHT" not in out


@pytest.mark.parametrize("bad", ["0", "-1", "x", "1.5"])
def test_a_bad_budget_is_a_usage_error(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explore", "--max-states", bad]) == 2
    assert main(["explore", "--max-seconds", "-" + bad]) == 2


def test_symmetry_reduction_is_reported_and_can_be_switched_off(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bounds = ["--bounds", "artifacts=1,transactions=2", "--json"]
    _, reduced, _ = _run(bounds, capsys)
    _, full, _ = _run([*bounds, "--no-symmetry"], capsys)
    a, b = json.loads(reduced), json.loads(full)
    assert (a["symmetry"], b["symmetry"]) == (2, 1)
    assert a["states"] < b["states"] and a["violations"] == b["violations"] == 0


# -- the compaction model (spec/compaction.py) --------------------------------------


def test_the_compaction_model_exits_0_with_its_state_count(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--compaction` explores C1-C4 over the whole default model and says none broke."""
    code, out, err = _run(["--compaction"], capsys)
    assert (code, err) == (EXIT_OK, "")
    assert "compaction model: 62,789 states, 121,998 transitions" in out
    assert "no violation: C1-C4 hold in every reachable state" in out


@pytest.mark.parametrize(
    "name, broken, steps",
    [
        ("remove-before-checkpoint-durable", "C2", 5),
        ("snapshot-without-settled-check", "C1", 5),
        ("checkpoint-not-anchored", "C3", 8),
    ],
)
def test_a_compaction_mistake_prints_its_shortest_trace_and_exits_1(
    name: str, broken: str, steps: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each compaction mistake is caught by the invariant it breaks, with a numbered trace."""
    code, out, _ = _run(["--compaction-mistake", name], capsys)
    assert code == EXIT_VIOLATION
    assert f"shortest trace ({steps} steps):" in out and f"\n  {steps}. " in out
    assert f"expected violation of {broken} " in out and out.rstrip().endswith("found.")


def test_compaction_json_carries_the_trace(capsys: pytest.CaptureFixture[str]) -> None:
    """`--json` gives the checks broken, the reasons and the trace as sentences."""
    code, out, _ = _run(["--compaction-mistake", "checkpoint-not-anchored", "--json"], capsys)
    doc = json.loads(out)
    assert code == EXIT_VIOLATION == doc["exit_status"]
    assert doc["violation"]["checks"] == ["C3 anchor supported"]
    assert doc["violation"]["trace"][-1].startswith("attack: someone restores")


def test_compaction_refuses_the_protocol_options(capsys: pytest.CaptureFixture[str]) -> None:
    """The protocol's --variant/--bounds mean nothing to the compaction model: usage error."""
    code = main(["explore", "--compaction", "--variant", "publish-before-prepared"])
    captured = capsys.readouterr()
    assert code == 2 and "--compaction takes none of" in captured.err
