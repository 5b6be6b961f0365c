"""ToolResultExternalizer: thresholds, exclusive artifacts, bounded pointers, failures."""

from __future__ import annotations

import hashlib
import os
import pathlib
import re
import stat

import pytest

from toolswap.errors import ArtifactWriteError, InvalidSummary, InvalidThreshold, UsageError
from toolswap.externalizer import ToolResultExternalizer
from toolswap.high_water import HIGH_WATER_NAME

from ._artifacts import FullDiskFS, HidingFS, lines

NOTABLE_RE = re.compile(r"\n(\d+): ERROR: the distinctive failure\n")


def _ext(tmp_path: pathlib.Path, **kw: object) -> ToolResultExternalizer:
    return ToolResultExternalizer(tmp_path / "sess", environ={}, **kw)  # type: ignore[arg-type]


def _names(ext: ToolResultExternalizer) -> list[str]:
    path = pathlib.Path(ext.tool_results_dir)
    return sorted(p.name for p in path.iterdir()) if path.exists() else []


def test_bash_output_at_the_threshold_stays_in_the_context(tmp_path: pathlib.Path) -> None:
    ext = _ext(tmp_path)
    text = "é" * 30_000  # 30,000 characters, 60,000 bytes: characters count for bash
    result = ext.externalize(text, "bash")
    assert (result.artifact, result.context_text) == (None, text)
    assert _names(ext) == []


def test_bash_output_one_character_over_is_externalized(tmp_path: pathlib.Path) -> None:
    result = _ext(tmp_path).externalize("x" * 30_001, "bash")
    assert result.artifact is not None and result.artifact.size_bytes == 30_001


def test_other_tools_count_bytes_against_50_kib(tmp_path: pathlib.Path) -> None:
    ext = _ext(tmp_path)
    assert ext.externalize(b"y" * 51_200, "grep").artifact is None
    assert ext.externalize(b"y" * 51_201, "grep").artifact is not None


def test_environment_overrides_the_thresholds(tmp_path: pathlib.Path) -> None:
    env = {"BASH_MAX_OUTPUT_LENGTH": "10", "TOOL_RESULT_THRESHOLD_KB": "1"}
    ext = ToolResultExternalizer(tmp_path / "s", environ=env)
    assert (ext.bash_threshold_chars, ext.threshold_bytes) == (10, 1024)


def test_the_constructor_wins_over_the_environment(tmp_path: pathlib.Path) -> None:
    env = {"BASH_MAX_OUTPUT_LENGTH": "10"}
    ext = ToolResultExternalizer(tmp_path / "s", environ=env, bash_threshold_chars=99)
    assert ext.bash_threshold_chars == 99


@pytest.mark.parametrize(
    "env",
    [
        {"BASH_MAX_OUTPUT_LENGTH": "lots"},
        {"BASH_MAX_OUTPUT_LENGTH": "0"},
        {"BASH_MAX_OUTPUT_LENGTH": "-5"},
        {"BASH_MAX_OUTPUT_LENGTH": "1.5"},
        {"TOOL_RESULT_THRESHOLD_KB": "nan"},
        {"TOOL_RESULT_THRESHOLD_KB": ""},
        {"TOOL_RESULT_THRESHOLD_KB": "inf"},
        {"TOOL_RESULT_THRESHOLD_KB": "1e308"},  # was an OverflowError (issue 14 item 5)
        {"TOOL_RESULT_THRESHOLD_KB": "1e300"},
        {"BASH_MAX_OUTPUT_LENGTH": "9" * 400},
    ],
)
def test_a_malformed_environment_threshold_is_a_clear_error(
    tmp_path: pathlib.Path, env: dict[str, str]
) -> None:
    with pytest.raises(InvalidThreshold, match=next(iter(env))):
        ToolResultExternalizer(tmp_path / "s", environ=env)


def test_a_malformed_constructor_threshold_is_a_clear_error(tmp_path: pathlib.Path) -> None:
    with pytest.raises(InvalidThreshold):
        _ext(tmp_path, threshold_bytes=0)


def test_artifact_is_private_and_holds_the_exact_bytes(tmp_path: pathlib.Path) -> None:
    data = lines(3000) + b"\xff\xfe not utf-8 \x80\n"
    result = _ext(tmp_path).externalize(data, "bash")
    assert result.artifact is not None
    path = pathlib.Path(result.artifact.path)
    assert path.read_bytes() == data
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert result.artifact.content_sha256 == hashlib.sha256(data).hexdigest()


def test_non_utf8_output_is_shown_with_replacement_characters(tmp_path: pathlib.Path) -> None:
    data = b"\xff" * 100 + lines(3000)
    result = _ext(tmp_path).externalize(data, "bash")
    assert "\ufffd" in result.context_text


def test_str_iterator_and_bytes_give_the_same_artifact(tmp_path: pathlib.Path) -> None:
    data = lines(4000)
    digests = set()
    for i, output in enumerate([data.decode(), data, iter([data[:1000], data[1000:]])]):
        ext = ToolResultExternalizer(tmp_path / f"s{i}", environ={})
        result = ext.externalize(output, "bash")
        assert result.artifact is not None
        digests.add(result.artifact.content_sha256)
    assert digests == {hashlib.sha256(data).hexdigest()}


def test_numbering_continues_after_a_restart(tmp_path: pathlib.Path) -> None:
    big = lines(4000)
    ext = _ext(tmp_path)
    ext.externalize(big, "bash")
    ext.externalize(big, "bash")
    restarted = _ext(tmp_path)
    result = restarted.externalize(big + b"third\n", "bash")
    assert result.artifact is not None
    assert os.path.basename(result.artifact.path) == "tool_result_003.txt"


def test_a_name_taken_meanwhile_is_skipped_not_overwritten(tmp_path: pathlib.Path) -> None:
    big = lines(4000)
    _ext(tmp_path).externalize(big, "bash")
    first = pathlib.Path(tmp_path / "sess" / "tool-results" / "tool_result_001.txt")
    before = first.read_bytes()
    (tmp_path / "sess" / HIGH_WATER_NAME).unlink()  # as if written by a tool that bypassed it
    result = _ext(tmp_path, fs=HidingFS()).externalize(big + b"other\n", "bash")
    assert result.artifact is not None
    assert os.path.basename(result.artifact.path) == "tool_result_002.txt"
    assert first.read_bytes() == before


def test_a_full_disk_removes_the_file_and_raises_a_typed_error(tmp_path: pathlib.Path) -> None:
    ext = _ext(tmp_path, fs=FullDiskFS(capacity=40_000))
    with pytest.raises(ArtifactWriteError) as caught:
        ext.externalize(lines(4000), "bash")
    assert isinstance(caught.value.__cause__, OSError)
    assert _names(ext) == []


def test_a_failed_fsync_removes_the_file(tmp_path: pathlib.Path) -> None:
    fs = FullDiskFS(capacity=10**9, fail="fsync")
    ext = _ext(tmp_path, fs=fs)
    with pytest.raises(ArtifactWriteError):
        ext.externalize(lines(4000), "bash")
    assert fs.written > 0  # the artifact itself was written, then its fsync failed
    assert _names(ext) == []


def test_a_failed_high_water_fsync_creates_no_artifact(tmp_path: pathlib.Path) -> None:
    ext = _ext(tmp_path, fs=FullDiskFS(capacity=10**9, fail="any_fsync"))
    with pytest.raises(ArtifactWriteError) as caught:
        ext.externalize(lines(4000), "bash")
    assert isinstance(caught.value.__cause__, OSError)
    assert _names(ext) == []


def test_a_stream_that_breaks_midway_leaves_no_file(tmp_path: pathlib.Path) -> None:
    def broken() -> object:
        yield lines(4000)
        raise RuntimeError("producer died")

    ext = _ext(tmp_path)
    with pytest.raises(RuntimeError, match="producer died"):
        ext.externalize(broken(), "bash")  # type: ignore[arg-type]
    assert _names(ext) == []


@pytest.mark.parametrize("summary", ["", "   ", "x" * 241, "two\nlines", "tab\there"])
def test_a_bad_summary_is_refused_before_anything_is_written(
    tmp_path: pathlib.Path, summary: str
) -> None:
    ext = _ext(tmp_path)
    with pytest.raises(InvalidSummary):
        ext.externalize(lines(4000), "bash", summary=summary)
    assert _names(ext) == []


def test_a_caller_summary_is_used_verbatim(tmp_path: pathlib.Path) -> None:
    result = _ext(tmp_path).externalize(lines(4000), "bash", summary="build log of job 7")
    assert result.artifact is not None and result.artifact.summary == "build log of job 7"


def test_the_derived_summary_is_the_first_line_and_the_size(tmp_path: pathlib.Path) -> None:
    data = b"\n\n  first words  \n" + lines(4000)
    result = _ext(tmp_path).externalize(data, "bash")
    assert result.artifact is not None
    assert result.artifact.summary == f"first words ({len(data):,} bytes, 4,003 lines)"


@pytest.mark.parametrize("tool", ["", "two words", "a/../b\n", 7])
def test_a_bad_tool_name_is_refused(tmp_path: pathlib.Path, tool: object) -> None:
    with pytest.raises(UsageError):
        _ext(tmp_path).externalize("x", tool)  # type: ignore[arg-type]


def test_a_huge_output_gives_a_small_pointer_that_names_the_middle_failure(
    tmp_path: pathlib.Path,
) -> None:
    """Issue check: 50 MB with one distinctive line in the middle."""
    count = 1_250_000  # 41 bytes per line: about 51 MB
    data = lines(count, marker_at=count // 2)
    assert len(data) > 50 * 1000 * 1000
    ext = _ext(tmp_path)
    result = ext.externalize(iter(data[i : i + 65536] for i in range(0, len(data), 65536)), "bash")
    assert result.artifact is not None
    assert len(result.context_text.encode()) < 32 * 1024
    assert result.artifact.content_sha256 == hashlib.sha256(data).hexdigest()
    match = NOTABLE_RE.search(result.context_text)  # a notable line, at its offset
    assert match is not None and int(match[1]) == count // 2
    page = ext.read_artifact(result.artifact, int(match[1]), 1)
    assert page == "ERROR: the distinctive failure\n"


# -- should_externalize: the decision without the write ----------------------------------


@pytest.mark.parametrize("tool", ["bash", "web_fetch"])
@pytest.mark.parametrize("delta", [-1, 0, 1])
def test_should_externalize_agrees_with_externalize_and_writes_nothing(
    tmp_path: pathlib.Path, tool: str, delta: int
) -> None:
    ext = ToolResultExternalizer(
        tmp_path / "s", environ={}, bash_threshold_chars=100, threshold_bytes=100
    )
    output = "é" * (100 + delta)  # two bytes a character: bash counts characters
    decided = ext.should_externalize(output, tool)
    assert not (tmp_path / "s" / "tool-results").exists()
    assert decided == ext.externalize(output, tool).externalized
    assert decided == (tool == "bash" and delta > 0 or tool != "bash" and 2 * len(output) > 100)


def test_should_externalize_refuses_a_stream_it_would_consume(tmp_path: pathlib.Path) -> None:
    ext = ToolResultExternalizer(tmp_path / "s", environ={})
    with pytest.raises(UsageError, match="would consume it"):
        ext.should_externalize(iter([b"x"]), "bash")  # type: ignore[arg-type]
