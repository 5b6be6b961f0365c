"""The lease journal: toolswap vs the floor of the same durable appends and reads.

``prepare`` baseline: append one JSON line and fsync it, the least any durable
journal must do.  The ratio is what the session lock, the artifact check
(stat + digest of a small artifact), the hash chain and the torn-tail check
cost on top.

Recovery baseline: read the file, split on ``\\n``, ``json.loads`` and SHA-256
each line.  The ratio is what chain, sequence, intent and transition
validation cost on top of parsing.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import pathlib

import pytest

from toolswap import journal_anchor
from toolswap.domain import ArtifactRetentionClaim
from toolswap.externalizer import ToolResultExternalizer
from toolswap.journal import ArtifactRetentionJournal

RECORDS = 3000


def _claim(session: pathlib.Path) -> ArtifactRetentionClaim:
    ext = ToolResultExternalizer(session, threshold_bytes=1, environ={})
    result = ext.externalize(b"benchmark artifact\n" * 100, "bench")
    assert result.artifact is not None
    return ArtifactRetentionClaim.from_memory_reference(result.artifact.for_memory())


@pytest.mark.benchmark(group="journal-prepare")
def test_toolswap_prepare(benchmark, tmp_path: pathlib.Path) -> None:  # type: ignore[no-untyped-def]
    claim = _claim(tmp_path / "s")
    journal = ArtifactRetentionJournal(tmp_path / "s")
    ids = itertools.count()
    benchmark(lambda: journal.prepare(claim, f"t{next(ids)}", now=1.0))


@pytest.mark.benchmark(group="journal-prepare")
def test_baseline_append_and_fsync(benchmark, tmp_path: pathlib.Path) -> None:  # type: ignore[no-untyped-def]
    line = json.dumps({"phase": "PREPARED", "transaction_id": "t", "pad": "x" * 300}) + "\n"
    handle = os.open(tmp_path / "plain.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def run() -> None:
        os.write(handle, line.encode())
        os.fsync(handle)

    try:
        benchmark(run)
    finally:
        os.close(handle)


# -- the anchor raised on the append path (issue 31) ----------------------------------
#
# toolswap raises the journal anchor every RAISE_EVERY_RECORDS records (or
# RAISE_EVERY_SECONDS) on the append path.  The baseline is the same prepare
# with the anchor raised once per journal object only, as before: the ratio is
# what the periodic raise costs an append.


@pytest.mark.benchmark(group="journal-prepare-anchor")
def test_toolswap_prepare_with_the_periodic_anchor(benchmark, tmp_path: pathlib.Path) -> None:  # type: ignore[no-untyped-def]
    claim = _claim(tmp_path / "s")
    journal = ArtifactRetentionJournal(tmp_path / "s")
    ids = itertools.count()
    benchmark(lambda: journal.prepare(claim, f"t{next(ids)}", now=1.0))


@pytest.mark.benchmark(group="journal-prepare-anchor")
def test_baseline_prepare_raising_the_anchor_once(  # type: ignore[no-untyped-def]
    benchmark, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(journal_anchor, "RAISE_EVERY_RECORDS", 2**62)
    monkeypatch.setattr(journal_anchor, "RAISE_EVERY_SECONDS", float("inf"))
    claim = _claim(tmp_path / "s")
    journal = ArtifactRetentionJournal(tmp_path / "s")
    ids = itertools.count()
    benchmark(lambda: journal.prepare(claim, f"t{next(ids)}", now=1.0))


@pytest.fixture(scope="module")
def big_journal(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    session = tmp_path_factory.mktemp("big") / "s"
    claim = _claim(session)
    journal = ArtifactRetentionJournal(session)
    for i in range(RECORDS // 2):
        journal.prepare(claim, f"t{i}", now=1.0)
        journal.abort(f"t{i}", now=1.0)
    return session


@pytest.mark.benchmark(group="journal-recover")
def test_toolswap_recover(benchmark, big_journal: pathlib.Path) -> None:  # type: ignore[no-untyped-def]
    def run() -> None:
        recovery = ArtifactRetentionJournal(big_journal).recover(now=1.0)
        assert not recovery.pending_transaction_ids

    benchmark(run)


@pytest.mark.benchmark(group="journal-recover")
def test_baseline_parse_and_hash(benchmark, big_journal: pathlib.Path) -> None:  # type: ignore[no-untyped-def]
    path = big_journal / "retention-leases.jsonl"

    def run() -> None:
        data = path.read_bytes()
        for line in data.split(b"\n")[:-1]:
            json.loads(line)
            hashlib.sha256(line).hexdigest()

    benchmark(run)


LARGE = 10_000


@pytest.fixture(scope="module")
def large_journal(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[pathlib.Path, ArtifactRetentionClaim]:
    session = tmp_path_factory.mktemp("large") / "s"
    claim = _claim(session)
    journal = ArtifactRetentionJournal(session)
    for i in range(LARGE):
        journal.prepare(claim, f"old{i}", now=1.0)
    return session, claim


@pytest.mark.benchmark(group="journal-prepare-scaling")
def test_prepare_on_a_10k_record_journal(benchmark, large_journal) -> None:  # type: ignore[no-untyped-def]
    session, claim = large_journal
    journal = ArtifactRetentionJournal(session)  # full verification once, at open
    ids = itertools.count()
    benchmark(lambda: journal.prepare(claim, f"new{next(ids)}", now=1.0))


@pytest.mark.benchmark(group="journal-prepare-scaling")
def test_prepare_on_a_fresh_journal(benchmark, tmp_path: pathlib.Path) -> None:  # type: ignore[no-untyped-def]
    claim = _claim(tmp_path / "s")
    journal = ArtifactRetentionJournal(tmp_path / "s")
    ids = itertools.count()
    benchmark(lambda: journal.prepare(claim, f"t{next(ids)}", now=1.0))


# -- open + recover of a fresh object (issue 14 item 10) ------------------------------
#
# What a reader does: construct the journal and recover it.  The baseline is the
# old behaviour, kept callable through a private flag: the constructor and the
# first recover() each verify the whole file.

FRESH = 2000


class _VerifyTwice(ArtifactRetentionJournal):
    _verify_twice_on_open = True


@pytest.fixture(scope="module")
def fresh_journal(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    session = tmp_path_factory.mktemp("fresh") / "s"
    claim = _claim(session)
    journal = ArtifactRetentionJournal(session)
    for i in range(FRESH // 2):
        journal.prepare(claim, f"t{i}", now=1.0)
        journal.abort(f"t{i}", now=1.0)
    return session


@pytest.mark.benchmark(group="journal-open-and-recover")
def test_toolswap_open_and_recover(benchmark, fresh_journal: pathlib.Path) -> None:  # type: ignore[no-untyped-def]
    benchmark(lambda: ArtifactRetentionJournal(fresh_journal).recover(now=1.0))


@pytest.mark.benchmark(group="journal-open-and-recover")
def test_baseline_open_and_recover_verifying_twice(benchmark, fresh_journal: pathlib.Path) -> None:  # type: ignore[no-untyped-def]
    benchmark(lambda: _VerifyTwice(fresh_journal).recover(now=1.0))
