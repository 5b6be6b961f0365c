"""grep inside a 50 MB artifact: toolswap's streaming search vs GNU ``grep -n``.

Both search the same file in the same run for a line that occurs once, in the
middle; compare the ``grep`` group's means as a ratio (target: within 3x of
GNU grep).  toolswap's verification is cached per file identity, so repeated
searches measure the scan; the first search of a fresh process also hashes the
file once.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from toolswap.externalizer import ToolResultExternalizer

LINES = 1_250_000  # about 50 MB


@pytest.fixture(scope="module")
def artifact(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    rows = (
        "ERROR: disk full" if i == LINES // 2 else f"row {i} ".ljust(40, ".") for i in range(LINES)
    )
    data = "".join(row + "\n" for row in rows).encode()
    ext = ToolResultExternalizer(tmp_path_factory.mktemp("g") / "sess", environ={})
    result = ext.externalize(data, "bash")
    assert result.artifact is not None
    return ext, result.artifact


@pytest.mark.benchmark(group="grep")
@pytest.mark.parametrize(
    "pattern,fixed", [("ERROR: disk", True), (r"ERROR: \w+ full", False)], ids=["fixed", "regex"]
)
def test_toolswap_grep(benchmark, artifact, pattern: str, fixed: bool) -> None:  # type: ignore[no-untyped-def]
    ext, ref = artifact
    result = benchmark(ext.grep_artifact, ref, pattern, fixed=fixed)
    assert [m.offset for m in result.matches] == [LINES // 2]


@pytest.mark.benchmark(group="grep")
@pytest.mark.skipif(shutil.which("grep") is None, reason="GNU grep is not installed")
def test_baseline_gnu_grep(benchmark, artifact) -> None:  # type: ignore[no-untyped-def]
    _, ref = artifact

    def gnu_grep() -> str:
        done = subprocess.run(
            ["grep", "-n", "ERROR: disk", ref.path], capture_output=True, text=True, check=True
        )
        return done.stdout

    assert benchmark(gnu_grep).startswith(f"{LINES // 2 + 1}:ERROR")
