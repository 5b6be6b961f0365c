"""The main job at the machine's speed (issue 34): each case beside its floor, in turns.

Every case runs its toolswap side and its floor one after the other, round by
round, so that a burst of load on a shared machine hits both sides alike; read
``ratio`` in the extra info (the median of the rounds' toolswap / floor
ratios), beside each side's median time.  No time is asserted.

* ``externalize``: 20 MiB of log lines, clean and with 5 % failure lines, fed
  in 1 MiB chunks, against the floor: the same bytes written, SHA-256'd and
  fsynced by plain Python in 1 MiB chunks (targets 1.3x and 1.6x).
* ``start-up``: ``toolswap --version`` against ``python -c pass`` (4x), and
  ``toolswap read`` of the last page of a verified 50 MB artifact, a fresh
  process each time, against ``python -c pass`` (5x) and ``tail -n 2000``.
* ``grep``: a fixed string and a regex in a 50 MB artifact, in process and
  from the command line, against GNU ``grep -n -F`` / ``grep -n`` (fixed: 2x
  in process, 5x from the command line).  Beside them, the floor of any
  Python command: a bare interpreter that maps the file and calls
  ``bytes.find`` (no toolswap, no checks) against the same GNU grep, which
  says how much of the command line's ratio no Python program can avoid.
* ``ls``: listing a session whose journal holds 10,000 records against the
  same session with a 10-record journal, after the first call (1.3x).

Processes run with bytecode caching on (``PYTHONDONTWRITEBYTECODE`` dropped,
the cache in a scratch ``PYTHONPYCACHEPREFIX``): an installed package has its
bytecode, and compiling every module from source on each start would be most
of what a fresh process measures.  Both sides of a pair get the same
environment.

Run with ``python -m pytest benchmarks/test_bench_main_job.py --benchmark-only``.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest

from toolswap.domain import ArtifactRetentionClaim
from toolswap.externalizer import ToolResultExternalizer
from toolswap.journal import ArtifactRetentionJournal
from toolswap.verified_record import RECORD_NAME, SETTLED_NS

MIB = 1024 * 1024
ROUNDS = 11
TOOLSWAP = shutil.which("toolswap") or ""


def _paired(
    benchmark: Any, ours: Callable[[], object], floor: Callable[[], object], rounds: int = ROUNDS
) -> None:
    """One round: toolswap's side, then the floor's; the ratio is the median of the rounds'."""
    mine: list[float] = []
    base: list[float] = []

    def one_round() -> None:
        for side, times in ((ours, mine), (floor, base)):
            started = time.perf_counter()
            side()
            times.append(time.perf_counter() - started)

    benchmark.pedantic(one_round, rounds=rounds, iterations=1, warmup_rounds=1)
    benchmark.extra_info.update(
        ratio=round(statistics.median(m / b for m, b in zip(mine, base, strict=True)), 3),
        toolswap_ms=round(statistics.median(mine) * 1000, 2),
        floor_ms=round(statistics.median(base) * 1000, 2),
    )


_ENV = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}


@pytest.fixture(scope="module", autouse=True)
def _bytecode_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    _ENV["PYTHONPYCACHEPREFIX"] = str(tmp_path_factory.mktemp("pycache"))


def _run(*argv: str) -> None:
    subprocess.run(argv, stdout=subprocess.DEVNULL, check=True, env=_ENV)


# -- externalize ----------------------------------------------------------------------


def _log_chunks(failure_every: int | None) -> list[bytes]:
    rows = []
    size = i = 0
    while size < 20 * MIB:
        if failure_every and i % failure_every == 7:
            row = f"2025-03-01T12:00:{i % 60:02d}Z ERROR [worker-{i % 9}] request {i} failed\n"
        else:
            row = (
                f"2025-03-01T12:00:{i % 60:02d}.{i % 1000:03d}Z INFO [worker-{i % 9}] "
                f"request {i} served path=/api/v1/items/{i % 977} status=200 in {i % 97}ms\n"
            )
        rows.append(row)
        size += len(row)
        i += 1
    data = "".join(rows).encode()[: 20 * MIB]
    return [data[at : at + MIB] for at in range(0, len(data), MIB)]


@pytest.mark.benchmark(group="main-job-externalize")
@pytest.mark.parametrize("failure_every", [None, 20], ids=["clean", "5pct-failures"])
def test_externalize_against_write_hash_fsync(
    benchmark: Any, tmp_path: pathlib.Path, failure_every: int | None
) -> None:
    chunks = _log_chunks(failure_every)
    ext = ToolResultExternalizer(tmp_path / "sess", environ={})
    counter = iter(range(10**6))

    def ours() -> None:
        assert ext.externalize(iter(chunks), "bash").artifact is not None

    def floor() -> None:
        digest = hashlib.sha256()
        handle = os.open(tmp_path / f"floor{next(counter)}", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        try:
            for chunk in chunks:
                os.write(handle, chunk)
                digest.update(chunk)
            os.fsync(handle)
        finally:
            os.close(handle)
        digest.hexdigest()

    _paired(benchmark, ours, floor, rounds=9)


# -- a verified 50 MB artifact --------------------------------------------------------

LINES = 1_250_000  # about 50 MB


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A 50 MB artifact with one error line in the middle, verified and recorded."""
    if not TOOLSWAP:
        pytest.skip("the toolswap command is not installed")
    session = tmp_path_factory.mktemp("big") / "sess"
    rows = (
        "ERROR: disk full" if i == LINES // 2 else f"row {i} ".ljust(40, ".") for i in range(LINES)
    )
    data = "".join(row + "\n" for row in rows).encode()
    ref = ToolResultExternalizer(session, environ={}).externalize(data, "bash").artifact
    assert ref is not None
    time.sleep(SETTLED_NS / 1e9 + 0.2)  # the record takes a file once its last change settled
    _run(TOOLSWAP, "read", ref.source_id, "--session", str(session))
    assert (session / RECORD_NAME).is_file()  # verified once: later processes do not hash
    return {"session": str(session), "id": ref.source_id, "path": ref.path}


@pytest.mark.benchmark(group="main-job-start-up")
def test_version_against_python_pass(benchmark: Any) -> None:
    if not TOOLSWAP:
        pytest.skip("the toolswap command is not installed")
    _paired(
        benchmark, lambda: _run(TOOLSWAP, "--version"), lambda: _run(sys.executable, "-c", "pass")
    )


def _last_page(big: dict[str, str]) -> Callable[[], None]:
    offset = str(LINES - 2000)
    return lambda: _run(
        TOOLSWAP, "read", big["id"], "--session", big["session"], "--offset", offset
    )


@pytest.mark.benchmark(group="main-job-start-up")
def test_read_last_page_against_python_pass(benchmark: Any, big: dict[str, str]) -> None:
    _paired(benchmark, _last_page(big), lambda: _run(sys.executable, "-c", "pass"))


@pytest.mark.benchmark(group="main-job-start-up")
def test_read_last_page_against_tail(benchmark: Any, big: dict[str, str]) -> None:
    _paired(benchmark, _last_page(big), lambda: _run("tail", "-n", "2000", big["path"]))


# -- grep -----------------------------------------------------------------------------


GREPS = [("ERROR: disk", True, "-F"), (r"ERROR: \w+ full", False, "-E")]


@pytest.mark.benchmark(group="main-job-grep")
@pytest.mark.parametrize("pattern, fixed, flag", GREPS, ids=["fixed", "regex"])
def test_grep_in_process_against_gnu_grep(
    benchmark: Any, big: dict[str, str], pattern: str, fixed: bool, flag: str
) -> None:
    ext = ToolResultExternalizer(big["session"], environ={})
    gnu = ["grep", "-n", flag, pattern.replace(r"\w+", "[[:alnum:]_]+"), big["path"]]

    def ours() -> None:
        assert [m.offset for m in ext.grep_artifact(big["id"], pattern, fixed=fixed).matches] == [
            LINES // 2
        ]

    _paired(benchmark, ours, lambda: _run(*gnu))


@pytest.mark.benchmark(group="main-job-grep")
@pytest.mark.parametrize("pattern, fixed, flag", GREPS, ids=["fixed", "regex"])
def test_grep_command_against_gnu_grep(
    benchmark: Any, big: dict[str, str], pattern: str, fixed: bool, flag: str
) -> None:
    mine = [TOOLSWAP, "grep", big["id"], pattern, "--session", big["session"]]
    mine += ["-F"] if fixed else []
    gnu = ["grep", "-n", flag, pattern.replace(r"\w+", "[[:alnum:]_]+"), big["path"]]
    _paired(benchmark, lambda: _run(*mine), lambda: _run(*gnu))


#: A grep with nothing but the interpreter: map the file, find the string, print offsets.
_BARE_GREP = """
import mmap, os, sys
fd = os.open(sys.argv[2], os.O_RDONLY)
mm = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
needle = sys.argv[1].encode()
i = mm.find(needle)
while i >= 0:
    sys.stdout.write(f"{i}\\n")
    i = mm.find(needle, i + 1)
"""


@pytest.mark.benchmark(group="main-job-grep")
def test_bare_python_grep_against_gnu_grep(benchmark: Any, big: dict[str, str]) -> None:
    """The floor under any Python grep command: start-up plus one ``bytes.find`` pass."""
    bare = [sys.executable, "-c", _BARE_GREP, "ERROR: disk", big["path"]]
    _paired(
        benchmark, lambda: _run(*bare), lambda: _run("grep", "-n", "-F", "ERROR: disk", big["path"])
    )


# -- ls -------------------------------------------------------------------------------


def _listed_session(root: pathlib.Path, records: int) -> ToolResultExternalizer:
    ext = ToolResultExternalizer(root, environ={}, threshold_bytes=1)
    refs = [ext.externalize(b"artifact %d\n" % i, "tool").artifact for i in range(5)]
    journal = ArtifactRetentionJournal(root)
    for i in range(records // 2):
        ref = refs[i % len(refs)]
        assert ref is not None
        claim = ArtifactRetentionClaim(source_id=ref.source_id, content_sha256=ref.content_sha256)
        journal.prepare(claim, f"t{i}")
        journal.commit(f"t{i}")
    return ToolResultExternalizer(root, environ={})


@pytest.mark.benchmark(group="main-job-ls")
def test_ls_of_a_long_journal_against_a_short_one(
    benchmark: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    long = _listed_session(tmp_path_factory.mktemp("long") / "sess", 10_000)
    short = _listed_session(tmp_path_factory.mktemp("short") / "sess", 10)
    assert len(long.list_artifacts()) == len(short.list_artifacts()) == 5  # the first call
    _paired(benchmark, long.list_artifacts, short.list_artifacts, rounds=31)
