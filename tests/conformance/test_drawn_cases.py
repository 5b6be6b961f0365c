"""The kit draws its cases: broken adapters it used to pass are flagged, correct ones conform.

Claims
======

* Every adapter of the second corpus (ids and identities taken inexactly,
  time, faults in the middle of an operation, a harness whose fault hook is
  misplaced, handles shared by threads) is flagged by the check written for
  its class, through that check's own finding, from the check's fixed
  examples alone (so the claim does not depend on a seed).
* The kit as it was -- the same sentences, readable ids only, no drawn
  examples, the checks that existed then -- passes each of them: these are
  the misses of issue 32.
* An adapter that confuses ids only when they hold ``#`` or ``?`` passes the
  fixed examples and is caught by the drawn ones, which also print the
  shrunk case and how to replay it.
* A correct control of every store family the corpus uses conforms, among
  them an adapter whose constructor takes the store's lock (the kit opens its
  competitors before it enters a fence).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from toolswap.testing import Capability, OwnerHarness, run_conformance
from toolswap.testing.options import RunOptions
from toolswap.testing.registry import CHECKS

from .broken import clocked, controls, drawn_ids, every_call, shared_handles, slow_calls

CHECK_TIMEOUT = 60.0
FIXED_ONLY = RunOptions(examples=0, seed=0, check_timeout=CHECK_TIMEOUT)
AS_IT_WAS = RunOptions(examples=0, seed=0, fixed=("plain",), check_timeout=CHECK_TIMEOUT)
PLAIN = AS_IT_WAS  # the controls: what they show does not depend on odd ids
_OLD_MODULES = {
    f"toolswap.testing.checks_{name}"
    for name in ("deep", "fence", "publish", "rows", "shape", "tombstone")
}

CORPUS: list[tuple[type[OwnerHarness], str]] = [
    # ids and identities, side by side in one store
    (drawn_ids.CaseFoldingIdsHarness, "O1.publish-keyed-by-exact-id"),
    (drawn_ids.NfcIdsHarness, "O1.publish-keyed-by-exact-id"),
    (drawn_ids.TruncatingIdsHarness, "O1.publish-keyed-by-exact-id"),
    (drawn_ids.SanitisedIdsHarness, "O4.remove-keyed-by-exact-id"),
    (drawn_ids.LatinOneIdsHarness, "O1.publish-keyed-by-exact-id"),
    (drawn_ids.RejectsUnusualIdsHarness, "O1.publish-visible-to-next-fence"),
    (drawn_ids.DigestOnlyIdentityHarness, "O1.near-identity-conflicts"),
    (drawn_ids.CaseInsensitiveIdentityHarness, "O1.near-identity-conflicts"),
    (drawn_ids.FileNumberIdentityHarness, "O1.near-identity-conflicts"),
    (drawn_ids.LowercasedSourceIdHarness, "O8.shows-identity-exactly"),
    (drawn_ids.WholeClaimIdentityHarness, "O1.same-identity-other-fields-is-no-op"),
    # time
    (clocked.ExpiringTombstonesHarness, "O3.tombstone-refuses-after-time-passes"),
    (clocked.LeasedFenceHarness, "O5.fence-holds-past-time-outs-thread"),
    (clocked.TinyVersionGenerationHarness, "GEN.many-ids-back-to-back"),
    (slow_calls.SlowCallRejectsHarness, "O2.slow-store-is-not-rejection"),
    (slow_calls.SlowSealFalseHarness, "O6.false-seal-writes-nothing-when-slow"),
    # faults at every store call, and a fault hook in the wrong place
    (every_call.TornRowIsAbsentHarness, "O8.in-doubt-at-every-call"),
    (every_call.MidReadRejectsHarness, "O2.store-failure-is-not-rejection-at-every-call"),
    (every_call.RemoveSwallowsWriteErrorHarness, "O4.remove-durable-at-every-call"),
    (every_call.SealIgnoresCommitErrorHarness, "O6.seal-durable-at-every-call"),
    (every_call.FaultHookAroundMethodsHarness, "O8.in-doubt-at-every-call"),
    # one handle shared by threads
    (shared_handles.HandleReentrantFenceHarness, "O5.one-handle-shared-by-threads"),
    (shared_handles.SavepointInFenceHarness, "O5.one-handle-shared-by-threads"),
]
#: What the failure of each says, beyond the check's own words (the finding, not a crash).
SAYS = {
    every_call.FaultHookAroundMethodsHarness: "harness defect",
    drawn_ids.RejectsUnusualIdsHarness: "raised UsageError",
}
CONTROLS: list[type[OwnerHarness]] = [
    clocked.ClockedMemoryHarness,
    slow_calls.TimedSQLiteHarness,
    controls.LockingConstructorHarness,
]
SENTENCE_GROUPS = ["O1", "O2", "O3", "O4", "O5", "O6", "O7", "O8", "GEN", "ROW"]


def _ids(corpus: list[tuple[type[OwnerHarness], str]]) -> list[str]:
    return [f"{h.__name__.removesuffix('Harness')}->{c}" for h, c in corpus]


def _old_checks(group: str) -> list[str]:
    """The checks of ``group`` the kit had before it drew its cases (no other process)."""
    return [
        c.id
        for c in CHECKS
        if c.group == group
        and c.run.__module__ in _OLD_MODULES
        and Capability.OTHER_PROCESS not in c.needs
    ]


def test_the_second_corpus_has_every_class_of_issue_32() -> None:
    modules = {h.__module__.rsplit(".", 1)[1] for h, _ in CORPUS}
    assert modules == {"drawn_ids", "clocked", "slow_calls", "every_call", "shared_handles"}
    assert len(CORPUS) >= 15


@pytest.mark.parametrize(("harness", "intended"), CORPUS, ids=_ids(CORPUS))
def test_broken_adapter_is_flagged_by_its_check(
    harness: type[OwnerHarness], intended: str, tmp_path: Path
) -> None:
    report = run_conformance(harness, workroot=tmp_path, checks=[intended], options=FIXED_ONLY)
    result = report.result(intended)
    assert result.outcome == "fail", (harness.__name__, result.outcome, result.message)
    assert not result.message.startswith(("unexpected ", "did not finish", "the check stopped"))
    assert SAYS.get(harness, "") in result.message, result.message


@pytest.mark.parametrize(("harness", "intended"), CORPUS, ids=_ids(CORPUS))
def test_the_kit_as_it_was_passed_the_broken_adapter(
    harness: type[OwnerHarness], intended: str, tmp_path: Path
) -> None:
    old = _old_checks(intended.split(".", 1)[0])
    report = run_conformance(harness, workroot=tmp_path, checks=old, options=AS_IT_WAS)
    failed = [(r.check_id, r.message) for r in report.results if r.outcome == "fail"]
    assert failed == [], f"{harness.__name__} was already caught before the kit drew its cases"


def test_an_adapter_wrong_only_for_ids_with_a_hash_is_caught_by_drawn_ids(tmp_path: Path) -> None:
    check = "O1.publish-keyed-by-exact-id"
    harness = drawn_ids.UnquotedUrlIdsHarness
    fixed = run_conformance(
        harness, workroot=tmp_path / "fixed", checks=[check], options=FIXED_ONLY
    )
    assert fixed.result(check).outcome == "pass", fixed.result(check).message
    drawn = run_conformance(
        harness,
        workroot=tmp_path / "drawn",
        checks=[check],
        options=RunOptions(examples=60, budget=60.0, seed=5, check_timeout=CHECK_TIMEOUT),
    )
    result = drawn.result(check)
    assert result.outcome == "fail", result.message
    assert "shrunk case: " in result.message and f"--check {check} --seed 5" in result.message


@pytest.mark.parametrize("harness", CONTROLS, ids=lambda h: h.__name__)
def test_the_correct_control_of_each_family_conforms(
    harness: type[OwnerHarness], tmp_path: Path
) -> None:
    report = run_conformance(harness, workroot=tmp_path, checks=SENTENCE_GROUPS, options=PLAIN)
    declared = set(harness.unsupported.values())
    problems = [
        (r.check_id, r.outcome, r.message)
        for r in report.results
        if r.outcome != "pass" and not (r.outcome == "skip" and r.message in declared)
    ]
    assert problems == []
