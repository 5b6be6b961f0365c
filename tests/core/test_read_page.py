"""read_page: byte-capped pages that resume exactly, verified like every read."""

from __future__ import annotations

import errno
import os
import pathlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolswap.errors import ArtifactIntegrityError, EnvironmentFailure, UsageError
from toolswap.externalizer import ToolResultExternalizer
from toolswap.fs import OsFileSystem
from toolswap.reading import (
    DEFAULT_PAGE_BYTES,
    MAX_PAGE_BYTES,
    MAX_TRAILER_BYTES,
    Page,
    render_page,
)

from ._artifacts import CountingFS, lines


def _ext(tmp: pathlib.Path, **kw: object) -> ToolResultExternalizer:
    return ToolResultExternalizer(tmp / "s", environ={}, threshold_bytes=1, **kw)  # type: ignore[arg-type]


def _put(ext: ToolResultExternalizer, data: bytes) -> str:
    result = (
        ext.externalize(data + b"!!", "tool") if len(data) < 2 else ext.externalize(data, "tool")
    )
    assert result.artifact is not None
    return result.artifact.source_id


def _page_all(ext: ToolResultExternalizer, sid: str, **kw: int) -> list[Page]:
    pages = [ext.read_page(sid, 0, **kw)]
    while pages[-1].next_offset is not None:
        last = pages[-1]
        assert last.next_offset is not None
        pages.append(ext.read_page(sid, last.next_offset, start_byte=last.next_byte, **kw))
        assert len(pages) < 100_000
    return pages


line = st.one_of(
    st.text(max_size=60).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.binary(max_size=60),
    st.integers(0, 3000).map(lambda n: "é€😀x"[n % 4].encode() * n),  # longer than a page
)
outputs = st.lists(line, min_size=1, max_size=60).map(lambda ls: b"\n".join(ls))


@settings(max_examples=60, deadline=None)
@given(outputs, st.integers(64, 700), st.integers(1, 50))
def test_paging_to_the_end_reassembles_the_file_and_never_passes_the_cap(
    tmp_path_factory: pytest.TempPathFactory, data: bytes, cap: int, limit: int
) -> None:
    data = data + b"!!"  # over the threshold of one byte
    ext = _ext(tmp_path_factory.mktemp("p"))
    sid = _put(ext, data)
    pages = _page_all(ext, sid, max_bytes=cap, limit=limit)
    for page in pages:
        assert len(page.text.encode("utf-8")) <= cap
        assert page.text == data[page.byte_start : page.byte_end].decode("utf-8", "replace")
        assert len(render_page(page).encode()) <= cap + MAX_TRAILER_BYTES + 1
    assert [p.byte_start for p in pages[1:]] == [p.byte_end for p in pages[:-1]]
    assert pages[0].byte_start == 0 and pages[-1].byte_end == len(data)
    assert "".join(p.text for p in pages) == data.decode("utf-8", "replace")


def test_a_page_of_short_lines_stops_at_the_limit(tmp_path: pathlib.Path) -> None:
    ext = _ext(tmp_path)
    sid = _put(ext, lines(5000))
    page = ext.read_page(sid, 1234, 6)
    assert page.text == "".join(lines(5000).decode().splitlines(keepends=True)[1234:1240])
    assert (page.first_line, page.last_line, page.next_offset, page.next_byte) == (
        1234,
        1239,
        1240,
        0,
    )
    assert not page.truncated and page.total_lines == 5000


def test_the_byte_cap_stops_a_page_on_a_line_boundary(tmp_path: pathlib.Path) -> None:
    ext = _ext(tmp_path)
    sid = _put(ext, lines(5000))  # 41-byte lines
    page = ext.read_page(sid, 0, 2000, max_bytes=1000)
    assert page.truncated and page.text.endswith("\n")
    assert page.last_line == 23 and page.next_offset == 24 and page.next_byte == 0
    assert len(page.text.encode()) == 24 * 41


def test_a_line_longer_than_the_cap_comes_in_pieces_with_its_position(
    tmp_path: pathlib.Path,
) -> None:
    ext = _ext(tmp_path)
    sid = _put(ext, b"ok\n" + b"x" * 1000 + b"\nend\n")
    first = ext.read_page(sid, 1, max_bytes=400)
    assert first.text == "x" * 400 and first.truncated
    assert (first.first_line, first.last_line, first.next_offset, first.next_byte) == (1, 1, 1, 400)
    second = ext.read_page(sid, 1, max_bytes=400, start_byte=400)
    assert second.text == "x" * 400 and second.next_byte == 800
    third = ext.read_page(sid, 1, max_bytes=400, start_byte=800)
    assert third.text == "x" * 200 + "\nend\n" and third.next_offset is None
    assert "--offset 1 --byte 400" in render_page(first)


def test_a_cut_never_splits_a_utf8_character(tmp_path: pathlib.Path) -> None:
    ext = _ext(tmp_path)
    sid = _put(ext, "€".encode() * 1000)  # 3-byte characters, 65 % 3 != 0
    page = ext.read_page(sid, 0, max_bytes=65)
    assert page.text == "€" * 21 and page.next_byte == 63


def test_a_cut_never_splits_a_four_byte_character_after_its_third_byte(
    tmp_path: pathlib.Path,
) -> None:
    # 3 bytes of a 4-byte character would decode to one 3-byte U+FFFD, which
    # still fits the cap: only the boundary rule keeps the character whole.
    ext = _ext(tmp_path)
    sid = _put(ext, "😀".encode() * 100)
    page = ext.read_page(sid, 0, max_bytes=67)
    assert page.text == "😀" * 16 and page.next_byte == 64


def test_replacement_characters_count_against_the_cap(tmp_path: pathlib.Path) -> None:
    ext = _ext(tmp_path)
    sid = _put(ext, b"\xff" * 1000)  # each invalid byte becomes a 3-byte U+FFFD
    page = ext.read_page(sid, 0, max_bytes=300)
    assert len(page.text.encode()) <= 300 and page.text == "\ufffd" * page.next_byte


def test_the_default_cap_applies_to_read_artifact_too(tmp_path: pathlib.Path) -> None:
    ext = _ext(tmp_path)
    sid = _put(ext, b"y" * 5 * 1024 * 1024)
    assert len(ext.read_artifact(sid, 0, 5).encode()) == DEFAULT_PAGE_BYTES
    assert len(ext.read_artifact(sid, 0, 5, max_bytes=100)) == 100


def test_the_environment_sets_the_page_cap(tmp_path: pathlib.Path) -> None:
    ext = ToolResultExternalizer(tmp_path / "s", environ={"TOOLSWAP_PAGE_BYTES": "128"})
    assert ext.page_bytes == 128


@pytest.mark.parametrize("raw", ["0", "-5", "abc", "1e9", str(MAX_PAGE_BYTES + 1), "12"])
def test_a_bad_page_cap_in_the_environment_is_a_usage_error(
    tmp_path: pathlib.Path, raw: str
) -> None:
    with pytest.raises(UsageError, match="TOOLSWAP_PAGE_BYTES"):
        ToolResultExternalizer(tmp_path / "s", environ={"TOOLSWAP_PAGE_BYTES": raw})


@pytest.mark.parametrize(
    "kw",
    [{"max_bytes": 0}, {"max_bytes": True}, {"start_byte": -1}, {"limit": 0}, {"offset": -1}],
)
def test_bad_page_arguments_are_usage_errors(tmp_path: pathlib.Path, kw: dict[str, int]) -> None:
    ext = _ext(tmp_path)
    sid = _put(ext, lines(10))
    with pytest.raises(UsageError):
        ext.read_page(sid, **kw)


def test_a_start_byte_past_the_end_of_its_line_is_a_usage_error(tmp_path: pathlib.Path) -> None:
    ext = _ext(tmp_path)
    sid = _put(ext, b"abc\ndef\n")
    assert ext.read_page(sid, 0, start_byte=3).text == "\ndef\n"
    with pytest.raises(UsageError, match="past the end of line 0"):
        ext.read_page(sid, 0, start_byte=4)


def test_a_page_costs_the_window_not_the_file(tmp_path: pathlib.Path) -> None:
    ext = _ext(tmp_path)
    sid = _put(ext, lines(400_000))  # about 16 MB
    counting = CountingFS()
    fresh = ToolResultExternalizer(tmp_path / "s", environ={}, fs=counting)
    fresh.verify_artifact(sid)  # the first verification hashes the file once
    counting.bytes_read = 0
    fresh.read_page(sid, 300_000, 2000)
    assert counting.bytes_read < 2 * 1024 * 1024


def test_a_tampered_artifact_fails_closed_on_a_page_read(tmp_path: pathlib.Path) -> None:
    ext = _ext(tmp_path)
    sid = _put(ext, lines(100))
    path = ext.paths.path_for_source(sid)
    data = bytearray(pathlib.Path(path).read_bytes())
    data[5] ^= 1
    pathlib.Path(path).write_bytes(bytes(data))
    with pytest.raises(ArtifactIntegrityError):
        ext.read_page(sid)


def test_a_wrong_id_says_the_id_does_not_match_the_file(tmp_path: pathlib.Path) -> None:
    ext = _ext(tmp_path)
    sid = _put(ext, lines(100))
    wrong = sid[:-12] + "000000000000"
    with pytest.raises(ArtifactIntegrityError, match="does not match the file") as caught:
        ext.read_page(wrong)
    assert "the id is wrong, or the file changed" in str(caught.value)
    assert "digest check" not in str(caught.value)


class _EioFS(OsFileSystem):
    """The real seam whose reads fail with EIO, as a dying disk would."""

    def pread(self, handle: int, size: int, offset: int) -> bytes:
        raise OSError(errno.EIO, "Input/output error")


def test_an_eio_while_hashing_is_an_environment_failure(tmp_path: pathlib.Path) -> None:
    ext = _ext(tmp_path)
    sid = _put(ext, lines(100))
    broken = ToolResultExternalizer(tmp_path / "s", environ={}, fs=_EioFS())
    for read in (broken.read_artifact, broken.read_page, broken.stat_artifact):
        with pytest.raises(EnvironmentFailure) as caught:
            read(sid)
        assert isinstance(caught.value.__cause__, OSError)


def test_an_empty_page_is_impossible_but_an_empty_artifact_reads_as_one(
    tmp_path: pathlib.Path,
) -> None:
    ext = _ext(tmp_path)
    result = ext.externalize(iter([b""]), "tool")  # below any threshold: nothing written
    assert result.artifact is None
    sid = _put(ext, b"ab")
    page = ext.read_page(sid)
    assert page.next_offset is None and page.last_line == 0 and page.text == "ab"
    assert os.path.getsize(ext.paths.path_for_source(sid)) == 2
