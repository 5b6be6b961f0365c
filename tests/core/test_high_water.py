"""S6: the durable high-water mark never hands out a name twice."""

from __future__ import annotations

import os
import pathlib

import pytest

from toolswap.errors import CorruptStateError
from toolswap.externalizer import ToolResultExternalizer
from toolswap.fs import REAL_FS
from toolswap.high_water import HIGH_WATER_NAME, ArtifactHighWaterMark
from toolswap.session import SessionPaths

from ._artifacts import lines

BIG = lines(4000)


def _ext(tmp_path: pathlib.Path) -> ToolResultExternalizer:
    return ToolResultExternalizer(tmp_path / "sess", environ={})


def _name(ext: ToolResultExternalizer, data: bytes) -> str:
    result = ext.externalize(data, "bash")
    assert result.artifact is not None
    return os.path.basename(result.artifact.path)


def _mark(tmp_path: pathlib.Path) -> pathlib.Path:
    return tmp_path / "sess" / HIGH_WATER_NAME


def test_a_deleted_highest_name_is_not_reused_after_a_restart(tmp_path: pathlib.Path) -> None:
    ext = _ext(tmp_path)
    _name(ext, BIG)
    second = _name(ext, BIG + b"two\n")
    os.unlink(os.path.join(ext.tool_results_dir, second))  # what cleanup does to an orphan
    assert _name(_ext(tmp_path), BIG + b"three\n") == "tool_result_003.txt"


def test_the_mark_records_every_name_in_order(tmp_path: pathlib.Path) -> None:
    ext = _ext(tmp_path)
    for i in range(3):
        _name(ext, BIG + b"%d\n" % i)
    assert _mark(tmp_path).read_bytes() == b"1\n2\n3\n"


def test_a_torn_last_line_is_cut_before_the_next_append(tmp_path: pathlib.Path) -> None:
    ext = _ext(tmp_path)
    _name(ext, BIG)
    with _mark(tmp_path).open("ab") as mark:
        mark.write(b"2")  # a crash inside the append: never fsynced, name never created
    assert _name(_ext(tmp_path), BIG + b"again\n") == "tool_result_002.txt"
    assert _mark(tmp_path).read_bytes() == b"1\n2\n"


def test_only_the_tail_of_a_long_mark_is_read(tmp_path: pathlib.Path) -> None:
    sess = tmp_path / "sess"
    sess.mkdir()
    _mark(tmp_path).write_bytes(b"".join(b"%d\n" % n for n in range(1, 5001)))
    assert _name(_ext(tmp_path), BIG) == "tool_result_5001.txt"


def test_advance_goes_above_both_the_mark_and_the_directory(tmp_path: pathlib.Path) -> None:
    mark = ArtifactHighWaterMark(SessionPaths.at(tmp_path / "sess"), REAL_FS)
    (tmp_path / "sess").mkdir()
    assert mark.advance(0) == 1
    assert mark.advance(0) == 2
    assert mark.advance(10) == 11  # and the directory wins over an older mark


@pytest.mark.parametrize("content", [b"7\nseven\n", b"007\n", b"\n", b"-3\n", b"1\n\xff\n"])
def test_a_corrupt_mark_refuses_and_keeps_everything(
    tmp_path: pathlib.Path, content: bytes
) -> None:
    (tmp_path / "sess").mkdir()
    _mark(tmp_path).write_bytes(content)
    ext = _ext(tmp_path)
    with pytest.raises(CorruptStateError, match=HIGH_WATER_NAME):
        ext.externalize(BIG, "bash")
    assert _mark(tmp_path).read_bytes() == content
    assert not os.path.isdir(ext.tool_results_dir) or os.listdir(ext.tool_results_dir) == []


def test_a_mark_line_longer_than_the_tail_window_is_corrupt(tmp_path: pathlib.Path) -> None:
    (tmp_path / "sess").mkdir()
    _mark(tmp_path).write_bytes(b"1" * 200 + b"\n")
    with pytest.raises(CorruptStateError, match="too long"):
        _ext(tmp_path).externalize(BIG, "bash")


def test_a_symlinked_mark_is_refused(tmp_path: pathlib.Path) -> None:
    (tmp_path / "sess").mkdir()
    outside = tmp_path / "outside"
    outside.write_bytes(b"1\n")
    _mark(tmp_path).symlink_to(outside)
    with pytest.raises(CorruptStateError, match="regular file"):
        _ext(tmp_path).externalize(BIG, "bash")
    assert outside.read_bytes() == b"1\n"
