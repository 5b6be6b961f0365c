"""Cleanup: one plan status per case, one apply outcome per case (docs/design.md section 7)."""

from __future__ import annotations

import pytest
from toolswap.spec import cleanup
from toolswap.spec.cleanup import (
    ApplyStatus,
    Claim,
    EntryFacts,
    EntryKind,
    PlanStatus,
    Policy,
    Witness,
)

NOW = 1000
POLICY = Policy(orphan_ttl_seconds=100, max_deletions=2)
OLD = EntryFacts(digest=7, size=3, mtime=NOW - 100, device=1, inode=2)
YOUNG = OLD._replace(mtime=NOW - 99)

# (facts, claims, planned so far) -> status, one row per status of docs/design.md section 7.
PLAN_CASES = [
    ("claimed file gone", None, [Claim(digest=7)], 0, PlanStatus.MISSING_REFERENCED),
    ("directory", OLD._replace(kind=EntryKind.DIRECTORY), [], 0, PlanStatus.DENIED),
    ("symlink", OLD._replace(kind=EntryKind.SYMLINK), [], 0, PlanStatus.DENIED),
    ("odd name", OLD._replace(owned_name=False), [], 0, PlanStatus.DENIED),
    (
        "another owner",
        OLD._replace(trusted=False),
        [Claim(digest=7)],
        0,
        PlanStatus.RETAINED_UNKNOWN,
    ),
    ("being written", OLD._replace(writing=True), [], 0, PlanStatus.RETAINED_WRITING),
    ("claim disagrees", OLD, [Claim(digest=8)], 0, PlanStatus.RETAINED_CORRUPT),
    ("claim matches", OLD, [Claim(digest=7)], 0, PlanStatus.RETAINED_REFERENCED),
    (
        "pending claim",
        OLD,
        [Claim(digest=7, pending=True, retain_until=1)],
        0,
        PlanStatus.RETAINED_REFERENCED,
    ),
    ("younger than the TTL", YOUNG, [], 0, PlanStatus.RETAINED_RECENT),
    ("over max_deletions", OLD, [], 2, PlanStatus.RETAINED_LIMIT),
    ("expired claim", OLD, [Claim(digest=7, retain_until=NOW)], 0, PlanStatus.PLANNED_DELETE),
    ("released claim", OLD, [Claim(digest=7, reference_count=0)], 0, PlanStatus.PLANNED_DELETE),
    ("unclaimed and old", OLD, [], 1, PlanStatus.PLANNED_DELETE),
]


@pytest.mark.parametrize(
    ("facts", "claims", "planned", "status"),
    [c[1:] for c in PLAN_CASES],
    ids=[c[0] for c in PLAN_CASES],
)
def test_plan_classifies_each_case(
    facts: EntryFacts | None, claims: list[Claim], planned: int, status: PlanStatus
) -> None:
    assert cleanup.classify(facts, claims, POLICY, NOW, planned) is status


def test_every_plan_status_has_a_case() -> None:
    assert {c[-1] for c in PLAN_CASES} == set(PlanStatus)


def test_a_corrupt_claim_wins_over_a_matching_one() -> None:
    # two leases on one name that disagree: keep and report, never pick one
    claims = [Claim(digest=7), Claim(digest=8)]
    assert cleanup.classify(OLD, claims, POLICY, NOW) is PlanStatus.RETAINED_CORRUPT


def test_a_pending_claim_never_expires() -> None:
    claim = Claim(digest=7, pending=True, reference_count=0, retain_until=0)
    assert cleanup.claim_is_active(claim, now=10**9)


@pytest.mark.parametrize(
    ("claim", "active"),
    [
        (Claim(digest=1), True),
        (Claim(digest=1, retain_until=NOW + 1), True),
        (Claim(digest=1, retain_until=NOW), False),
        (Claim(digest=1, reference_count=0), False),
    ],
)
def test_a_committed_claim_holds_while_counted_and_before_retain_until(
    claim: Claim, active: bool
) -> None:
    assert cleanup.claim_is_active(claim, NOW) is active


def test_plan_counts_the_oldest_orphans_toward_max_deletions_first() -> None:
    ages = {"tool_result_001.txt": 3, "tool_result_002.txt": 1, "tool_result_003.txt": 2}
    entries = [(n, OLD._replace(mtime=NOW - 200 - a), ()) for n, a in ages.items()]
    result = cleanup.plan(entries, POLICY, NOW)
    assert result == (
        ("tool_result_001.txt", PlanStatus.PLANNED_DELETE),
        ("tool_result_002.txt", PlanStatus.RETAINED_LIMIT),
        ("tool_result_003.txt", PlanStatus.PLANNED_DELETE),
    )


def test_plan_breaks_an_equal_mtime_by_the_exact_one_then_the_name() -> None:
    entries = [
        ("tool_result_001.txt", OLD._replace(mtime_exact=9), ()),
        ("tool_result_002.txt", OLD._replace(mtime_exact=5), ()),
        ("tool_result_003.txt", OLD._replace(mtime_exact=5), ()),
    ]
    result = cleanup.plan(entries, POLICY, NOW)
    assert dict(result)["tool_result_001.txt"] is PlanStatus.RETAINED_LIMIT


def test_plan_stops_planning_at_max_deletions_in_name_order_among_equal_ages() -> None:
    entries = [(f"tool_result_{i:03d}.txt", OLD, ()) for i in (3, 1, 2)]
    result = cleanup.plan(entries, POLICY, NOW)
    assert result == (
        ("tool_result_001.txt", PlanStatus.PLANNED_DELETE),
        ("tool_result_002.txt", PlanStatus.PLANNED_DELETE),
        ("tool_result_003.txt", PlanStatus.RETAINED_LIMIT),
    )


def test_plan_skips_a_name_with_neither_file_nor_claim() -> None:
    assert cleanup.plan([("tool_result_001.txt", None, ())], POLICY, NOW) == ()


def test_apply_deletes_an_unchanged_unclaimed_file() -> None:
    assert cleanup.revalidate(OLD, OLD, [], NOW) is ApplyStatus.DELETED


def test_apply_reports_a_vanished_file_as_already_missing() -> None:
    assert cleanup.revalidate(OLD, None, [], NOW) is ApplyStatus.ALREADY_MISSING


def test_apply_reports_a_claim_before_a_vanished_file() -> None:
    # the claim is the news: someone references a file that is gone (a dangling pointer)
    claim = Claim(digest=OLD.digest)
    assert cleanup.revalidate(OLD, None, [claim], NOW) is ApplyStatus.RETAINED_REFERENCED


def test_apply_keeps_a_file_claimed_since_the_plan_with_another_digest_as_corrupt() -> None:
    assert cleanup.revalidate(OLD, OLD, [Claim(digest=OLD.digest + 1)], NOW) is (
        ApplyStatus.RETAINED_CORRUPT
    )


def test_apply_keeps_a_file_it_cannot_read_now() -> None:
    current = OLD._replace(readable=False)
    assert cleanup.revalidate(OLD, current, [], NOW) is ApplyStatus.RETAINED_UNKNOWN


def test_apply_keeps_a_file_younger_than_the_ttl_now() -> None:
    assert cleanup.revalidate(OLD, OLD, [], OLD.mtime, POLICY) is ApplyStatus.RETAINED_RECENT


def test_apply_without_a_policy_never_calls_a_file_recent() -> None:
    assert cleanup.revalidate(OLD, OLD, [], OLD.mtime) is ApplyStatus.DELETED


def test_apply_keeps_a_file_claimed_since_the_plan() -> None:
    assert cleanup.revalidate(OLD, OLD, [Claim(digest=7, pending=True)], NOW) is (
        ApplyStatus.RETAINED_REFERENCED
    )


@pytest.mark.parametrize(
    "change",
    [
        {"digest": 8},
        {"size": 4},
        {"mtime": NOW},
        {"device": 9},
        {"inode": 9},
        {"kind": EntryKind.SYMLINK},
        {"owned_name": False},
        {"linked": True},
        {"trusted": False},
    ],
    ids=lambda c: next(iter(c)),
)
def test_apply_calls_any_change_since_the_plan_a_race(change: dict[str, object]) -> None:
    current = OLD._replace(**change)
    assert cleanup.revalidate(OLD, current, [], NOW) is ApplyStatus.RACE_DETECTED


def test_apply_refuses_a_planned_entry_that_was_not_a_regular_file() -> None:
    odd = OLD._replace(kind=EntryKind.OTHER)
    assert cleanup.revalidate(odd, odd, [], NOW) is ApplyStatus.RACE_DETECTED


def test_every_apply_status_has_a_case() -> None:
    assert {r[2] for r in cleanup.APPLY_RULES} == set(ApplyStatus)


def test_plan_keeps_a_file_being_written_however_old_its_last_write() -> None:
    # S1.writing: age alone would delete a half-written artifact under its writer
    writing = OLD._replace(mtime=0, writing=True)
    assert cleanup.classify(writing, [], POLICY, NOW) is PlanStatus.RETAINED_WRITING


def test_apply_keeps_a_file_whose_writer_marked_it_since_the_plan() -> None:
    assert cleanup.revalidate(OLD, OLD._replace(writing=True), [], NOW) is (
        ApplyStatus.RETAINED_WRITING
    )


def test_apply_keeps_a_file_the_owner_shows_a_visible_reference_to() -> None:
    # the second witness: the journal has no claim, the owner still shows a reference
    assert cleanup.revalidate(OLD, OLD, [], NOW, witness=Witness.SHOWN) is (
        ApplyStatus.RETAINED_REFERENCED
    )


def test_apply_keeps_a_file_when_the_owner_cannot_tell() -> None:
    assert cleanup.revalidate(OLD, OLD, [], NOW, witness=Witness.UNKNOWN) is (
        ApplyStatus.RETAINED_UNKNOWN
    )


@pytest.mark.parametrize("witness", [Witness.NOT_ASKED, Witness.NONE])
def test_apply_deletes_when_no_witness_shows_a_reference(witness: Witness) -> None:
    assert cleanup.revalidate(OLD, OLD, [], NOW, witness=witness) is ApplyStatus.DELETED


def test_apply_reports_a_vanished_file_before_the_owners_word() -> None:
    assert cleanup.revalidate(OLD, None, [], NOW, witness=Witness.SHOWN) is (
        ApplyStatus.ALREADY_MISSING
    )


@pytest.mark.parametrize("now", [float("nan"), float("inf")])
def test_a_time_that_compares_with_nothing_keeps_the_file(now: float) -> None:
    # times are floats on the implementation's side: no age is proven, nothing is planned
    nan_file = OLD._replace(mtime=float("nan")) if now == float("inf") else OLD
    assert cleanup.classify(nan_file, [], POLICY, now) is PlanStatus.RETAINED_RECENT


def test_a_claim_stays_active_when_now_is_not_a_number() -> None:
    assert cleanup.claim_is_active(Claim(digest=1, retain_until=NOW), float("nan"))
