"""Mutation gaps in spec/cleanup.py: the predicates its contracts are written in.

``classify`` and ``revalidate`` state their guarantees as contracts
(``post: implies(... PLANNED_DELETE, _none_active(claims, now))``, ``_ours``)
that the CrossHair check proves; no other test calls these predicates, so a
wrong one would make that proof vacuous without any test noticing
(docs/mutation.md, ``_none_active``, ``_ours``).
"""

from __future__ import annotations

import pytest
from toolswap.spec import cleanup
from toolswap.spec.cleanup import Claim, EntryFacts, EntryKind

NOW = 1000
OURS = EntryFacts(digest=7, mtime=NOW - 200)


def test_none_active_is_false_as_soon_as_one_claim_is_active() -> None:
    expired = Claim(digest=7, retain_until=NOW)
    assert cleanup._none_active([], NOW)
    assert cleanup._none_active([expired], NOW)
    assert not cleanup._none_active([expired, Claim(digest=7, retain_until=NOW + 1)], NOW)


@pytest.mark.parametrize(
    ("facts", "ours"),
    [
        (OURS, True),
        (None, False),
        (OURS._replace(kind=EntryKind.SYMLINK), False),
        (OURS._replace(kind=EntryKind.DIRECTORY), False),
        (OURS._replace(owned_name=False), False),
        (OURS._replace(trusted=False), False),
    ],
    ids=["regular", "gone", "symlink", "directory", "foreign name", "untrusted"],
)
def test_ours_is_a_trusted_regular_file_with_our_name(facts: EntryFacts | None, ours: bool) -> None:
    assert cleanup._ours(facts) is ours


def test_aged_starts_exactly_at_the_orphan_ttl() -> None:
    policy = cleanup.Policy(orphan_ttl_seconds=200)
    assert cleanup._aged(OURS, policy, NOW)
    assert not cleanup._aged(OURS, policy, NOW - 1)
    assert not cleanup._aged(None, policy, NOW)


def test_planned_counts_only_planned_deletes() -> None:
    result = (
        ("a", cleanup.PlanStatus.PLANNED_DELETE),
        ("b", cleanup.PlanStatus.RETAINED_LIMIT),
        ("c", cleanup.PlanStatus.PLANNED_DELETE),
    )
    assert cleanup._planned(result) == 2


def test_complete_is_a_file_whose_writer_let_go() -> None:
    assert cleanup._complete(OURS)
    assert not cleanup._complete(OURS._replace(writing=True))
    assert not cleanup._complete(None)


@pytest.mark.parametrize(("a", "b"), [(False, False), (False, True), (True, False), (True, True)])
def test_implies_is_false_only_when_a_holds_and_b_does_not(a: bool, b: bool) -> None:
    assert cleanup.implies(a, b) is (not a or b)


def test_a_hard_linked_orphan_is_denied_not_planned() -> None:
    """An old orphan with a second name may hold someone else's bytes: DENIED, never deleted."""
    policy = cleanup.Policy(orphan_ttl_seconds=100)
    assert cleanup.classify(OURS, [], policy, NOW) is cleanup.PlanStatus.PLANNED_DELETE
    linked = OURS._replace(linked=True)
    assert cleanup.classify(linked, [], policy, NOW) is cleanup.PlanStatus.DENIED


def test_an_entry_with_neither_file_nor_claim_is_skipped_not_the_end_of_the_plan() -> None:
    """Such an entry sorts first (no file); the files after it are still classified."""
    policy = cleanup.Policy(orphan_ttl_seconds=100)
    entries = [
        ("tool_result_002.txt", OURS, ()),
        ("tool_result_001.txt", None, ()),
        ("tool_result_003.txt", None, (Claim(digest=7, retain_until=NOW + 1),)),
    ]
    assert cleanup.plan(entries, policy, NOW) == (
        ("tool_result_002.txt", cleanup.PlanStatus.PLANNED_DELETE),
        ("tool_result_003.txt", cleanup.PlanStatus.MISSING_REFERENCED),
    )
