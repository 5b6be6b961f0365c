"""``toolswap check``: one verdict table over the spec, crash and owner checks."""

from __future__ import annotations

import pytest

from toolswap.cli import check, main

# The end-to-end run of `toolswap check` is the README's main job:
# tests/cli/test_readme.py runs it as written and reads its verdict table.


def _fast(passed: bool) -> list[check.CheckRow]:
    return [
        check.CheckRow(check="spec model (S1-S7, L1)", passed=True, evidence="ok", seconds=0.1),
        check.CheckRow(
            check="owner conformance (SQLite)", passed=passed, evidence="why", seconds=0.1
        ),
    ]


def test_one_failed_check_fails_the_verdict(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(
        check, "run_checks", lambda seeds, progress=None, owners=(), live=None: _fast(False)
    )
    assert main(["check"]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "FAILED" in out.splitlines()[-1]


def test_the_table_has_one_row_per_check(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(
        check, "run_checks", lambda seeds, progress=None, owners=(), live=None: _fast(True)
    )
    assert main(["check"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:2] == ["check", "verdict"]
    assert [line.split("  ")[0] for line in lines[1:3]] == [
        "spec model (S1-S7, L1)",
        "owner conformance (SQLite)",
    ]
    assert lines[-1] == "verdict: every check passed"


def test_a_bad_seed_count_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--seeds", "0"]) == 2
    assert "--seeds" in capsys.readouterr().err


def test_an_unusable_extra_owner_is_refused_before_anything_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["check", "--owner", "no_such_module_xyz:Harness"]) == 2
    err = capsys.readouterr().err
    assert "cannot import module 'no_such_module_xyz'" in err
    assert len(err.strip().splitlines()) == 1
