"""The kit catches bugs: each broken adapter is flagged by the check meant for it.

Claims
======

* Every adapter in :mod:`tests.conformance.broken` fails the check written
  for the sentence it breaks, and fails it through the check's own finding
  (not by crashing the check or timing it out).
* Both reference adapters pass every sentence check of O1-O8, GEN and ROW,
  on its fixed examples (drawn ones run in ``test_kit_cli.py`` and
  ``test_guide.py``); the in-memory one may skip only for the capabilities it
  declares missing.

To stay fast, each broken adapter runs only its intended check plus the rest
of that check's group that needs no second process and no competing thread
(those cost half a second each, and a failing check that leaves a thread
inside the adapter is not what this file tests).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from toolswap.owners.memory import InMemoryHarness
from toolswap.owners.sqlite import SQLiteHarness
from toolswap.testing import Capability, OwnerHarness, checks_named, run_conformance
from toolswap.testing.options import RunOptions

from .broken import (
    memory_fences,
    memory_generations,
    memory_publish,
    memory_tombstones,
    sqlite_durability,
    sqlite_faults,
    sqlite_fences,
    sqlite_rows,
    sqlite_seals,
)

# A broken adapter that deadlocks must fail its check quickly, not in three minutes.
CHECK_TIMEOUT = 30.0
# The fixed examples only (and a fixed seed): what this file claims does not rest on luck.
FIXED = RunOptions(examples=0, seed=0, check_timeout=CHECK_TIMEOUT)

CORPUS: list[tuple[type[OwnerHarness], str]] = [
    # SQLite base ------------------------------------------------------------------
    # only under another process's contention
    (sqlite_fences.ThreadLockFenceHarness, "O5.fence-holds-back-publish-process"),
    (sqlite_fences.ProcessRowCacheHarness, "O5.fence-reads-other-process-writes"),
    (sqlite_fences.ReadThenWritePublishHarness, "O3.seal-refuses-held-publish-process"),
    # only after another handle's write
    (sqlite_fences.HandleWriteBehindHarness, "O1.publish-visible-to-other-handle"),
    # the seal
    (sqlite_seals.SealBlindUpsertHarness, "O6.seal-is-compare-and-set"),
    (sqlite_seals.SealCasOnKindHarness, "O6.seal-cas-after-lost-fence"),  # only after a restart
    (sqlite_seals.SealRolledBackHarness, "O6.seal-fresh-absence"),
    (sqlite_seals.SealTombstonesPublishedHarness, "O6.seal-refuses-published"),
    (sqlite_seals.SealReturnsRowcountHarness, "ROW.absent-seals-then-aborts"),
    # only after a restart
    (sqlite_durability.ProcessSequenceHarness, "GEN.never-reused-across-restart"),
    (sqlite_durability.BufferedTombstoneHarness, "O4.remove-durable-across-restart"),
    # only with a store fault
    (sqlite_faults.RejectOnStoreErrorHarness, "O2.store-failure-is-not-rejection"),
    (sqlite_faults.FailedReadIsAbsentHarness, "O8.in-doubt-is-unknown"),
    (sqlite_faults.BusyPublishQueuedHarness, "O1.publish-returns-only-when-durable"),
    (sqlite_faults.BestEffortRemoveHarness, "O4.remove-returns-only-when-removed"),
    (sqlite_faults.PathInErrorsHarness, "O7.errors-reveal-nothing"),
    # only with a near-identical identity
    (sqlite_rows.DigestPrefixIdentityHarness, "O1.identity-is-the-full-digest"),
    # rows and fields
    (sqlite_rows.UpdateOnlyRemoveHarness, "O4.remove-never-seen-tombstones"),
    (sqlite_rows.SealedIsIntHarness, "O8.fields-have-their-types"),
    (sqlite_rows.StateIsColumnTextHarness, "O8.fields-have-their-types"),
    (sqlite_rows.TouchOnRejectHarness, "O2.rejected-writes-nothing"),
    (sqlite_rows.ObservationShowsDatabaseHarness, "O7.observations-reveal-nothing"),
    # In-memory base ---------------------------------------------------------------
    (memory_fences.PerHandleFenceLocksHarness, "O5.fence-holds-back-publish-thread"),
    (memory_fences.LockFreeRemoveHarness, "O5.fence-holds-back-remove-thread"),
    (memory_fences.SharedReadFenceHarness, "O5.fence-holds-back-seal-thread"),
    (memory_fences.HandleObservationCacheHarness, "O5.fence-reads-durable-state-at-entry"),
    (memory_fences.ReadThenWritePublishMemoryHarness, "O3.seal-refuses-held-publish-thread"),
    (memory_publish.ConflictIsRejectionHarness, "O1.other-identity-conflicts"),
    (memory_publish.RepublishRefreshesHarness, "O1.republish-same-identity-is-no-op"),
    (memory_publish.SeenAbsentSkipsCheckHarness, "O1.conflict-seen-across-handles"),
    (memory_publish.SourceIdOnlyIdentityHarness, "O1.identity-is-the-full-digest"),
    (memory_publish.SwapThenCheckHarness, "O1.conflict-changes-nothing"),
    (memory_tombstones.DeleteOnRemoveHarness, "O4.remove-leaves-tombstone"),
    (memory_tombstones.RemoveKeepsReferenceHarness, "O4.remove-hides-reference"),
    (memory_tombstones.RemoveNotIdempotentHarness, "O4.remove-is-idempotent"),
    (memory_tombstones.ResealRewritesHarness, "O6.seal-refuses-sealed"),
    (memory_tombstones.SealAfterBlockHarness, "O6.seal-only-inside-block"),
    (memory_tombstones.TombstoneKeepsIdentityHarness, "O8.tombstone-is-sealed-absence"),
    (memory_tombstones.SealedNoneWhenNeverSeenHarness, "O8.never-seen-is-absent-unsealed"),
    (memory_generations.HandleCounterGenerationHarness, "GEN.never-reused-across-handles"),
    (memory_generations.GenerationCountsRemovalsHarness, "GEN.changes-on-publish"),
    (memory_generations.ReadTimeGenerationHarness, "GEN.stable-while-unchanged"),
]

SENTENCE_GROUPS = ["O1", "O2", "O3", "O4", "O5", "O6", "O7", "O8", "GEN", "ROW"]


def _subset(intended: str) -> list[str]:
    """The intended check, plus its group's checks that need no process and wait for nothing."""
    group = intended.split(".", 1)[0]
    quiet = [
        c.id
        for c in checks_named([group])
        if Capability.OTHER_PROCESS not in c.needs and not c.waits
    ]
    return sorted({intended, *quiet})


def test_corpus_spans_both_bases_and_every_hard_to_see_kind() -> None:
    bases = {SQLiteHarness: 0, InMemoryHarness: 0}
    for harness, _ in CORPUS:
        for base in bases:
            if issubclass(harness, base):
                bases[base] += 1
    assert all(count >= 5 for count in bases.values()), bases
    intended = {check for _, check in CORPUS}
    known = {c.id for c in checks_named(None)}
    assert intended <= known, intended - known


@pytest.mark.parametrize(
    ("harness", "intended"),
    CORPUS,
    ids=[f"{h.__name__.removesuffix('Harness')}->{c}" for h, c in CORPUS],
)
def test_broken_adapter_is_flagged_by_its_intended_check(
    harness: type[OwnerHarness], intended: str, tmp_path: Path
) -> None:
    report = run_conformance(harness, workroot=tmp_path, checks=_subset(intended), options=FIXED)
    result = report.result(intended)
    assert result.outcome == "fail", (
        f"{harness.__name__} was meant to be flagged by {intended}, got {result.outcome}: "
        f"{result.message}"
    )
    assert not result.message.startswith(("unexpected ", "did not finish")), result.message


@pytest.mark.parametrize("harness", [SQLiteHarness, InMemoryHarness])
def test_reference_adapters_pass_every_sentence_check(
    harness: type[OwnerHarness], tmp_path: Path
) -> None:
    report = run_conformance(harness, workroot=tmp_path, checks=SENTENCE_GROUPS, options=FIXED)
    declared = set(harness.unsupported.values())
    for result in report.results:
        if result.outcome == "skip":
            assert result.message in declared, (result.check_id, result.message)
        else:
            assert result.outcome == "pass", (result.check_id, result.outcome, result.message)
    if harness is SQLiteHarness:
        assert report.counts()["skip"] == 0
