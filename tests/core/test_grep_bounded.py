"""grep_artifact ends for every pattern: a time limit, typed refusals (issue 35)."""

from __future__ import annotations

import pathlib
import time

import pytest

from toolswap.errors import InvalidPattern, UsageError
from toolswap.externalizer import ToolResultExternalizer


def _put(tmp: pathlib.Path, data: bytes) -> tuple[ToolResultExternalizer, str]:
    ext = ToolResultExternalizer(tmp / "s", environ={}, threshold_bytes=1)
    result = ext.externalize(data, "tool")
    assert result.artifact is not None
    return ext, result.artifact.source_id


def test_a_catastrophic_pattern_is_stopped_at_the_limit_and_says_where(
    tmp_path: pathlib.Path,
) -> None:
    ext, sid = _put(tmp_path, b"ok\n" * 5 + b"a" * 60 + b"b\n")
    started = time.monotonic()
    with pytest.raises(InvalidPattern, match=r"longer than 0\.3 s \(searched up to line offset 0"):
        ext.grep_artifact(sid, "(a|aa)+$", time_limit=0.3)
    assert time.monotonic() - started < 5


def test_the_limit_is_for_the_whole_search_not_each_block(tmp_path: pathlib.Path) -> None:
    ext, sid = _put(tmp_path, (b"a" * 30 + b"b\n") * 20)  # each line is slow, none endless
    started = time.monotonic()
    with pytest.raises(InvalidPattern):
        ext.grep_artifact(sid, "(a|aa)+$", time_limit=0.3)
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("limit", [0, -1, float("nan"), float("inf"), True, "1"])
def test_a_bad_time_limit_is_a_usage_error(tmp_path: pathlib.Path, limit: object) -> None:
    ext, sid = _put(tmp_path, b"x\n")
    with pytest.raises(UsageError, match="time_limit"):
        ext.grep_artifact(sid, "x", time_limit=limit)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "pattern", ["a{4294967296}", "(" * 1000 + "a" + ")" * 1000, "(a{1000}){1000}", "a{99999}"]
)
def test_patterns_the_compiler_cannot_take_are_invalid_patterns(
    tmp_path: pathlib.Path, pattern: str
) -> None:
    ext, sid = _put(tmp_path, b"x\n")
    started = time.monotonic()
    with pytest.raises(InvalidPattern):
        ext.grep_artifact(sid, pattern)
    assert time.monotonic() - started < 2  # refused before compiling into millions of steps


def test_a_legitimate_counted_repeat_still_works(tmp_path: pathlib.Path) -> None:
    ext, sid = _put(tmp_path, b"2025-03-01 ok\nnope\n")
    found = ext.grep_artifact(sid, r"\d{4}-\d{2}-\d{2}")
    assert [m.offset for m in found.matches] == [0]
