"""Recovery after compaction (issue 38 item 4): a long session recovers like a short one.

``compacted``: a session whose journal held 200,000 settled leases (ABORTED,
and every tenth COMMITTED then RELEASED: 420,000 records) and 100 live ones
(PREPARED and COMMITTED, spread through the history), compacted.  ``floor``:
a session that only ever held the same 100 live leases, never compacted.
Each round recovers both in a fresh :class:`ArtifactRetentionJournal` (no
in-process state), one after the other, so a burst of load hits both sides
alike; ``ratio`` in the extra info is the median of the rounds' compacted /
floor ratios (target: at most 2).  No time is asserted.

Setup: the 420,100 records are written straight to the file with the
journal's own record builder (:func:`~toolswap.journal_format.build_record`,
the bytes an append would write, without an fsync per record), then opened
(one full verification) and compacted once per module: some 15-30 s on a
developer machine, reported as ``setup_s``.

Run with ``python -m pytest benchmarks/test_bench_journal_compaction.py --benchmark-only``.
"""

from __future__ import annotations

import hashlib
import pathlib
import statistics
import time
from typing import Any

import pytest
from toolswap.spec.lease import LeaseState

from toolswap.domain import ArtifactRetentionClaim, artifact_filename, format_source_id
from toolswap.journal import ArtifactRetentionJournal
from toolswap.journal_format import GENESIS_SHA256, build_record, encode_record

SETTLED = 200_000
LIVE = 100
ROUNDS = 21


def _claim(session: pathlib.Path, number: int) -> ArtifactRetentionClaim:
    content = b"tool output %d\n" % number
    name = artifact_filename(number)
    results = session / "tool-results"
    results.mkdir(parents=True, exist_ok=True)
    (results / name).write_bytes(content)
    digest = hashlib.sha256(content).hexdigest()
    return ArtifactRetentionClaim(
        source_id=format_source_id(session.name, name, digest),
        content_sha256=digest,
        reference_count=1,
        retain_until=None,
    )


class _Writer:
    """Records in the journal's own format, chained, written in large pieces."""

    def __init__(self, session: pathlib.Path) -> None:
        self.session = session
        self.sequence = 0
        self.head = GENESIS_SHA256
        self.pending: list[bytes] = []
        self.handle = (session / "retention-leases.jsonl").open("ab")

    def append(self, txn: str, phase: LeaseState, claim: ArtifactRetentionClaim) -> None:
        record = build_record(
            sequence=self.sequence + 1,
            previous_sha256=self.head,
            session_id=self.session.name,
            transaction_id=txn,
            phase=phase,
            time=1.0,
            claim=claim,
        )
        self.sequence, self.head = record.sequence, record.event_sha256
        self.pending.append(encode_record(record))
        if len(self.pending) >= 10_000:
            self.flush()

    def flush(self) -> None:
        self.handle.write(b"".join(self.pending))
        self.pending.clear()

    def close(self) -> None:
        self.flush()
        self.handle.close()


def _write_session(session: pathlib.Path, settled: int) -> None:
    session.mkdir(parents=True)
    live_claims = [_claim(session, 1 + i) for i in range(LIVE)]
    settled_claim = _claim(session, LIVE + 1)
    writer = _Writer(session)
    every = max(1, settled // LIVE)
    live = 0
    for i in range(settled):
        if i % every == 0 and live < LIVE:
            _live_lease(writer, live, live_claims[live])
            live += 1
        txn = f"settled-{i}"
        writer.append(txn, LeaseState.PREPARED, settled_claim)
        if i % 10 == 0:
            writer.append(txn, LeaseState.COMMITTED, settled_claim)
            writer.append(txn, LeaseState.RELEASED, settled_claim)
        else:
            writer.append(txn, LeaseState.ABORTED, settled_claim)
    while live < LIVE:
        _live_lease(writer, live, live_claims[live])
        live += 1
    writer.close()


def _live_lease(writer: _Writer, index: int, claim: ArtifactRetentionClaim) -> None:
    txn = f"live-{index}"
    writer.append(txn, LeaseState.PREPARED, claim)
    if index % 2:
        writer.append(txn, LeaseState.COMMITTED, claim)


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> tuple[pathlib.Path, pathlib.Path, float]:
    started = time.perf_counter()
    compacted = tmp_path_factory.mktemp("compacted") / "s"
    _write_session(compacted, SETTLED)
    journal = ArtifactRetentionJournal(compacted)
    before = journal.recover()
    assert before.record_count == 2 * SETTLED + SETTLED // 10 + LIVE + LIVE // 2
    journal.compact()
    floor = tmp_path_factory.mktemp("floor") / "s"
    _write_session(floor, 0)
    return compacted, floor, time.perf_counter() - started


def _live(session: pathlib.Path) -> dict[str, LeaseState]:
    recovery = ArtifactRetentionJournal(session).recover(now=1.0)
    return {
        t: p for t, p in recovery.states.items() if p in (LeaseState.PREPARED, LeaseState.COMMITTED)
    }


@pytest.mark.benchmark(group="journal-compaction")
def test_recover_after_compaction_against_the_live_leases_alone(
    benchmark: Any, sessions: tuple[pathlib.Path, pathlib.Path, float]
) -> None:
    compacted, floor, setup = sessions
    assert _live(compacted) == _live(floor)  # both sides recover the same 100 live leases
    mine: list[float] = []
    base: list[float] = []

    def one_round() -> None:
        for session, times in ((compacted, mine), (floor, base)):
            started = time.perf_counter()
            ArtifactRetentionJournal(session).recover(now=1.0)
            times.append(time.perf_counter() - started)

    benchmark.pedantic(one_round, rounds=ROUNDS, iterations=1, warmup_rounds=1)
    benchmark.extra_info.update(
        ratio=round(statistics.median(m / b for m, b in zip(mine, base, strict=True)), 3),
        compacted_ms=round(statistics.median(mine) * 1000, 3),
        floor_ms=round(statistics.median(base) * 1000, 3),
        settled=SETTLED,
        live=LIVE,
        setup_s=round(setup, 1),
    )
