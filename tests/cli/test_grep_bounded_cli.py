"""Every grep pattern ends, and every refused one is one line (issue 35).

A pattern that backtracks without end is stopped at the time limit; one the
regex compiler rejects by raising (a repeat count past its range, a thousand
nested groups) or one that would compile into millions of steps is refused
before any search.  Each is one ``toolswap: error:`` line and exit status 2,
never a hang, never an internal error.
"""

from __future__ import annotations

import pathlib
import time

import pytest

from toolswap.cli import main
from toolswap.externalizer import ToolResultExternalizer


@pytest.fixture
def session(tmp_path: pathlib.Path) -> tuple[str, str]:
    data = b"ok\n" + b"a" * 60 + b"b\n" + b"a" * 1_000_000 + b"\n" + b"ok\n" * 10
    ext = ToolResultExternalizer(tmp_path / "s", environ={}, threshold_bytes=1)
    ref = ext.externalize(data, "bash").artifact
    assert ref is not None
    return str(tmp_path / "s"), ref.source_id


def _grep(
    capsys: pytest.CaptureFixture[str], session: tuple[str, str], *argv: str
) -> tuple[int, str, float]:
    started = time.monotonic()
    code = main(["grep", session[1], *argv, "--session", session[0]])
    return code, capsys.readouterr().err, time.monotonic() - started


def test_a_pattern_that_backtracks_without_end_is_stopped_with_one_line(
    capsys: pytest.CaptureFixture[str], session: tuple[str, str]
) -> None:
    code, err, took = _grep(capsys, session, "(a|aa)+$", "--time-limit", "0.5")
    assert code == 2 and took < 10
    assert err.count("\n") == 1 and err.startswith("toolswap: error: the pattern '(a|aa)+$'")
    assert "took longer than 0.5 s" in err and "internal error" not in err


@pytest.mark.parametrize(
    "pattern, line", [("(a+)+$", b"a" * 40 + b"b"), (".*zzz", b"y" * 1_000_000)]
)
def test_the_patterns_of_the_issue_end_within_the_limit(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path, pattern: str, line: bytes
) -> None:
    ext = ToolResultExternalizer(tmp_path / "t", environ={}, threshold_bytes=1)
    ref = ext.externalize(b"ok\n" + line + b"\nok\n", "tool").artifact
    assert ref is not None
    code, err, took = _grep(
        capsys, (str(tmp_path / "t"), ref.source_id), pattern, "--time-limit", "2"
    )
    assert took < 10
    assert code in (1, 2)  # no match, or stopped at the limit: either way one clear ending
    assert "internal error" not in err and err.count("\n") <= 1


@pytest.mark.parametrize(
    "pattern, says",
    [
        ("a{4294967296}", "OverflowError"),
        ("(" * 1000 + "a" + ")" * 1000, "RecursionError"),
        ("(a{1000}){1000}", "too large"),
        ("x" * 5000, "the limit is 4096"),
        ("(", "invalid regular expression"),
    ],
    ids=["huge-repeat", "nested-groups", "unrolls-large", "too-long", "syntax"],
)
def test_a_pattern_that_cannot_be_compiled_is_one_usage_error(
    capsys: pytest.CaptureFixture[str], session: tuple[str, str], pattern: str, says: str
) -> None:
    code, err, took = _grep(capsys, session, pattern)
    assert code == 2 and took < 10
    assert err.count("\n") == 1 and err.startswith("toolswap: error: ") and says in err
