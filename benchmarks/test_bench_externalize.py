"""Externalization streams: toolswap vs the floor of writing + hashing the same bytes.

The baseline writes the chunks to a file and hashes them, with no pointer,
index or fsync; the ratio shows what the pointer, the line index and the
durability steps cost on top.
"""

from __future__ import annotations

import hashlib
import itertools
import pathlib

import pytest

from toolswap.externalizer import ToolResultExternalizer

CHUNK = b"".join(f"row {i} ".ljust(40, ".").encode() + b"\n" for i in range(1600))  # 64 KiB
CHUNKS = 320  # 20 MiB


@pytest.mark.benchmark(group="externalize")
def test_toolswap_externalize(benchmark, tmp_path: pathlib.Path) -> None:  # type: ignore[no-untyped-def]
    counter = itertools.count()

    def run() -> None:
        ext = ToolResultExternalizer(tmp_path / f"s{next(counter)}", environ={})
        assert ext.externalize(iter([CHUNK] * CHUNKS), "bash").artifact is not None

    benchmark(run)


@pytest.mark.benchmark(group="externalize")
def test_baseline_write_and_hash(benchmark, tmp_path: pathlib.Path) -> None:  # type: ignore[no-untyped-def]
    counter = itertools.count()

    def run() -> None:
        digest = hashlib.sha256()
        with open(tmp_path / f"f{next(counter)}", "wb") as out:
            for chunk in [CHUNK] * CHUNKS:
                out.write(chunk)
                digest.update(chunk)

    benchmark(run)
