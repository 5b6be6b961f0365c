"""read_artifact, the page fault: only our regular files, digest verified, O(window)."""

from __future__ import annotations

import multiprocessing
import os
import pathlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolswap.errors import (
    ArtifactIntegrityError,
    ArtifactNotOwnedError,
    InvalidSourceId,
)
from toolswap.externalizer import ToolResultExternalizer
from toolswap.line_index import LineIndexBuilder

from ._artifacts import CountingFS, lines


def _artifact(tmp_path: pathlib.Path, data: bytes | None = None, **kw: object):  # type: ignore[no-untyped-def]
    ext = ToolResultExternalizer(tmp_path / "sess", environ={}, **kw)  # type: ignore[arg-type]
    result = ext.externalize(lines(5000) if data is None else data, "bash")
    assert result.artifact is not None
    return ext, result.artifact


def test_a_window_returns_exactly_those_lines(tmp_path: pathlib.Path) -> None:
    ext, ref = _artifact(tmp_path)
    expected = lines(5000).decode().splitlines(keepends=True)[1234:1240]
    assert ext.read_artifact(ref, 1234, 6) == "".join(expected)


def test_a_fresh_externalizer_reads_by_source_id_alone(tmp_path: pathlib.Path) -> None:
    _, ref = _artifact(tmp_path)
    fresh = ToolResultExternalizer(tmp_path / "sess", environ={})
    assert fresh.read_artifact(ref.source_id, 0, 1) == "line 0 ".ljust(40, ".") + "\n"


@pytest.mark.parametrize("offset,limit", [(-1, 10), (0, 0), (0, -3), (True, 1), (0, 1.5), ("0", 1)])
def test_a_bad_offset_or_limit_is_a_value_error(
    tmp_path: pathlib.Path, offset: object, limit: object
) -> None:
    ext, ref = _artifact(tmp_path)
    with pytest.raises(ValueError):
        ext.read_artifact(ref, offset, limit)  # type: ignore[arg-type]


def test_an_offset_past_the_end_is_a_value_error(tmp_path: pathlib.Path) -> None:
    ext, ref = _artifact(tmp_path)
    with pytest.raises(ValueError, match="past the end"):
        ext.read_artifact(ref, 5000, 1)


def test_a_tampered_artifact_fails_closed_even_after_a_cached_verification(
    tmp_path: pathlib.Path,
) -> None:
    ext, ref = _artifact(tmp_path)
    ext.read_artifact(ref, 0, 1)  # verified and cached
    path = pathlib.Path(ref.path)
    before = path.stat()
    data = bytearray(path.read_bytes())
    data[100] ^= 0x01
    path.write_bytes(bytes(data))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # same size, same mtime
    with pytest.raises(ArtifactIntegrityError):
        ext.read_artifact(ref, 0, 1)
    assert path.read_bytes() == bytes(data)  # fail closed: nothing repaired or removed


def test_a_symlink_in_place_of_an_artifact_is_never_followed(tmp_path: pathlib.Path) -> None:
    ext, ref = _artifact(tmp_path)
    outside = tmp_path / "outside.txt"
    outside.write_bytes(pathlib.Path(ref.path).read_bytes())
    os.unlink(ref.path)
    os.symlink(outside, ref.path)
    with pytest.raises(ArtifactNotOwnedError, match="symlink"):
        ext.read_artifact(ref, 0, 1)


def test_a_symlinked_tool_results_directory_is_refused(tmp_path: pathlib.Path) -> None:
    ext, ref = _artifact(tmp_path)
    real = tmp_path / "elsewhere"
    os.rename(ext.tool_results_dir, real)
    os.symlink(real, ext.tool_results_dir)
    with pytest.raises(ArtifactNotOwnedError):
        ext.read_artifact(ref, 0, 1)


def test_a_directory_in_place_of_an_artifact_is_refused(tmp_path: pathlib.Path) -> None:
    ext, ref = _artifact(tmp_path)
    os.unlink(ref.path)
    os.mkdir(ref.path)
    with pytest.raises(ArtifactNotOwnedError):
        ext.read_artifact(ref, 0, 1)


def test_a_missing_artifact_is_a_typed_error(tmp_path: pathlib.Path) -> None:
    ext, ref = _artifact(tmp_path)
    os.unlink(ref.path)
    with pytest.raises(ArtifactNotOwnedError, match="does not exist"):
        ext.read_artifact(ref, 0, 1)


def test_another_sessions_source_id_is_refused(tmp_path: pathlib.Path) -> None:
    ext, ref = _artifact(tmp_path)
    foreign = ref.source_id.replace("artifact:sess:", "artifact:other:")
    with pytest.raises(InvalidSourceId):
        ext.read_artifact(foreign, 0, 1)


def test_the_stored_path_of_a_reference_is_never_trusted(tmp_path: pathlib.Path) -> None:
    import attrs

    ext, ref = _artifact(tmp_path)
    decoy = tmp_path / "decoy.txt"
    decoy.write_text("decoy\n")
    forged = attrs.evolve(ref, path=str(decoy))
    assert ext.read_artifact(forged, 0, 1).startswith("line 0")


def test_non_utf8_bytes_read_back_with_replacement(tmp_path: pathlib.Path) -> None:
    ext, ref = _artifact(tmp_path, b"\xff\xfe\n" + lines(5000))
    assert ext.read_artifact(ref, 0, 1) == "\ufffd\ufffd\n"


def test_a_cached_window_read_costs_the_window_not_the_file(tmp_path: pathlib.Path) -> None:
    fs = CountingFS()
    data = lines(200_000)  # 8 MB
    ext, ref = _artifact(tmp_path, data, fs=fs)
    fs.bytes_read = 0
    page = ext.read_artifact(ref, 150_000, 2000)
    assert page.startswith("line 150000 ")
    assert fs.bytes_read < 2 * 1024 * 1024 < len(data)


def test_a_cold_read_hashes_once_then_windows_are_cheap(tmp_path: pathlib.Path) -> None:
    fs = CountingFS()
    data = lines(200_000)
    _, ref = _artifact(tmp_path, data)
    fresh = ToolResultExternalizer(tmp_path / "sess", environ={}, fs=fs)
    fresh.read_artifact(ref, 0, 10)
    assert fs.bytes_read >= len(data)  # the first read verifies the whole file
    fs.bytes_read = 0
    fresh.read_artifact(ref, 100_000, 10)
    assert fs.bytes_read < 2 * 1024 * 1024


@given(
    st.lists(st.binary(max_size=30).map(lambda b: b.replace(b"\n", b"")), max_size=300),
    st.booleans(),
    st.integers(1, 64),
    st.integers(0, 320),
    st.integers(1, 50),
)
def test_line_index_reads_match_a_plain_split(
    parts: list[bytes], trailing: bool, stride: int, offset: int, limit: int
) -> None:
    data = b"\n".join(parts) + (b"\n" if trailing else b"")
    builder = LineIndexBuilder(stride=stride)
    for i in range(0, len(data), 7):
        builder.feed(data[i : i + 7])
    index = builder.finish()
    pieces = data.split(b"\n")
    rebuilt = [p + b"\n" for p in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])
    assert index.line_count == len(rebuilt)
    got = index.read_lines(offset, limit, lambda n, at: data[at : at + n])
    assert got == b"".join(rebuilt[offset : offset + limit])


def _externalize_in_child(session: str, tag: int, out: multiprocessing.Queue[str]) -> None:
    ext = ToolResultExternalizer(session, environ={})
    result = ext.externalize(lines(3000) + f"writer {tag}\n".encode(), "bash")
    assert result.artifact is not None
    out.put(result.artifact.source_id)


def test_eight_processes_externalizing_at_once_get_distinct_files(tmp_path: pathlib.Path) -> None:
    session = str(tmp_path / "sess")
    ctx = multiprocessing.get_context("spawn")
    queue: multiprocessing.Queue[str] = ctx.Queue()
    procs = [ctx.Process(target=_externalize_in_child, args=(session, i, queue)) for i in range(8)]
    for p in procs:
        p.start()
    ids = [queue.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    names = sorted(os.listdir(os.path.join(session, "tool-results")))
    assert len(set(ids)) == 8 and len(names) == 8
    reader = ToolResultExternalizer(session, environ={})
    tags = {reader.read_artifact(sid, 3000, 1) for sid in ids}
    assert tags == {f"writer {i}\n" for i in range(8)}
