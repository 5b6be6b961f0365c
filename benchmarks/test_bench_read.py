"""Page reads are O(window): a cached 2,000-line read vs the whole-file baseline.

Also in the ``read`` group: a byte-capped page (``read_page``, 24 KiB) and a
piece from the middle of one 5 MB line (resumed with ``start_byte``), which
must cost about the same as a short-line page, not the line.

The baseline is what the teaching code did for every page: hash, decode and
split the whole artifact.  Compare the ``read`` group's means as a ratio.
"""

from __future__ import annotations

import hashlib
import pathlib

import pytest

from toolswap.externalizer import ToolResultExternalizer

LINES = 1_250_000  # about 50 MB


@pytest.fixture(scope="module")
def artifact(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    data = "".join(f"row {i} ".ljust(40, ".") + "\n" for i in range(LINES)).encode()
    ext = ToolResultExternalizer(tmp_path_factory.mktemp("b") / "sess", environ={})
    result = ext.externalize(data, "bash")
    assert result.artifact is not None
    return ext, result.artifact


@pytest.mark.benchmark(group="read")
def test_toolswap_window_read(benchmark, artifact) -> None:  # type: ignore[no-untyped-def]
    ext, ref = artifact
    page = benchmark(ext.read_artifact, ref, 900_000, 2000)
    assert page.startswith("row 900000 ")


@pytest.mark.benchmark(group="read")
def test_baseline_whole_file_read(benchmark, artifact) -> None:  # type: ignore[no-untyped-def]
    _, ref = artifact

    def whole_file() -> str:
        data = pathlib.Path(ref.path).read_bytes()
        assert hashlib.sha256(data).hexdigest() == ref.content_sha256
        return "".join(data.decode("utf-8", "replace").splitlines(keepends=True)[900_000:902_000])

    page = benchmark(whole_file)
    assert page.startswith("row 900000 ")


@pytest.mark.benchmark(group="read")
def test_toolswap_byte_capped_page(benchmark, artifact) -> None:  # type: ignore[no-untyped-def]
    ext, ref = artifact
    page = benchmark(ext.read_page, ref, 900_000)
    assert page.first_line == 900_000 and len(page.text.encode()) <= 24 * 1024


@pytest.fixture(scope="module")
def long_line(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    ext = ToolResultExternalizer(tmp_path_factory.mktemp("l") / "sess", environ={})
    result = ext.externalize(b"start\n" + b"y" * 5_000_000 + b"\nend\n", "bash")
    assert result.artifact is not None
    return ext, result.artifact


@pytest.mark.benchmark(group="read")
def test_toolswap_piece_of_a_long_line(benchmark, long_line) -> None:  # type: ignore[no-untyped-def]
    ext, ref = long_line
    page = benchmark(ext.read_page, ref, 1, start_byte=2_500_000)
    assert page.next_byte == 2_500_000 + 24 * 1024
