"""Each clause of S1-S7 and L1's goal, judged on a hand-built Observable.

The invariants read only an Observable (spec/observable.py), so each clause
can be shown on the smallest one that breaks it, next to the nearest one that
does not.  Clauses no model state reaches (a tampered artifact, a reused name,
changed journal evidence, an owner that keeps contract O4) are covered here
and nowhere else in tests/spec.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from toolswap.spec import invariants
from toolswap.spec.lease import LeaseState as L
from toolswap.spec.observable import ArtifactView, LeaseView, Observable, Shown

A = "tool_result_001.txt"
B = "tool_result_002.txt"
HERE = ArtifactView(A, present=True)
GONE = ArtifactView(A, present=False, deleted=True)
Check = Callable[[Observable], Iterator[invariants.Finding]]


def seen(
    *leases: LeaseView, files: tuple[ArtifactView, ...] = (GONE,), **rest: object
) -> Observable:
    return Observable(tuple(leases), {f.name: f for f in files}, **rest)  # type: ignore[arg-type]


def lease(*records: L, **facts: object) -> LeaseView:
    return LeaseView("t1", A, records, **facts)  # type: ignore[arg-type]


COMMITTED = (L.PREPARED, L.COMMITTED)

# (clause, check, handle, an observable that breaks it, the nearest one that does not)
CASES: list[tuple[str, Check, str, Observable, Observable]] = [
    (
        "S1 a visible reference",
        invariants.s1_no_dangling_reference,
        "S1",
        seen(lease(*COMMITTED, L.RELEASED, shown=Shown.REFERENCE)),
        seen(lease(*COMMITTED, L.RELEASED, shown=Shown.TOMBSTONE)),
    ),
    (
        "S1 a publish that may land",
        invariants.s1_no_dangling_reference,
        "S1",
        seen(lease(L.PREPARED, L.ABORTED, may_land=True)),
        seen(lease(L.PREPARED, L.ABORTED, may_land=True, shown=Shown.TOMBSTONE)),
    ),
    (
        "S1 a PREPARED lease behind a tombstone",
        invariants.s1_no_dangling_reference,
        "S1",
        seen(lease(L.PREPARED, shown=Shown.TOMBSTONE)),
        seen(lease(L.PREPARED, L.ABORTED, shown=Shown.TOMBSTONE)),
    ),
    (
        "S1 a COMMITTED lease until its retain_until",
        invariants.s1_no_dangling_reference,
        "S1",
        seen(lease(*COMMITTED, shown=Shown.REFERENCE)),
        seen(lease(*COMMITTED, shown=Shown.REFERENCE, retained=False)),
    ),
    (
        "S1 changed bytes",
        invariants.s1_no_dangling_reference,
        "S1",
        seen(lease(L.PREPARED, intact=False), files=(HERE,)),
        seen(lease(L.PREPARED, L.ABORTED, intact=False, shown=Shown.TOMBSTONE), files=(HERE,)),
    ),
    (
        "S1 a reported conflict the owner shows",
        invariants.s1_no_dangling_reference,
        "S1",
        seen(LeaseView("t2", B, shown=Shown.OTHER, other=A, reported=True)),
        seen(LeaseView("t2", B, shown=Shown.OTHER, other=A, reported=False)),
    ),
    (
        "S2",
        invariants.s2_prepare_before_publish,
        "S2",
        seen(lease(L.PREPARED, unprepared_publish=True)),
        seen(lease(L.PREPARED)),
    ),
    (
        "S3 no tombstone",
        invariants.s3_tombstone_before_abort,
        "S3",
        seen(lease(L.PREPARED, L.ABORTED)),
        seen(lease(L.PREPARED, L.ABORTED, rejected=True)),
    ),
    (
        "S3 a tombstone over an acknowledged publish",
        invariants.s3_tombstone_before_abort,
        "S3.buried",
        seen(lease(L.PREPARED, L.ABORTED, shown=Shown.TOMBSTONE, acknowledged=True)),
        seen(lease(*COMMITTED, shown=Shown.REFERENCE, acknowledged=True)),
    ),
    (
        "S4 still shown",
        invariants.s4_remove_before_release,
        "S4",
        seen(lease(*COMMITTED, L.RELEASED, shown=Shown.OTHER)),
        seen(lease(*COMMITTED, L.RELEASED)),
    ),
    (
        "S4 no tombstone, with an owner that keeps O4",
        invariants.s4_remove_before_release,
        "S4",
        seen(lease(*COMMITTED, L.RELEASED), removal_tombstones=True),
        seen(lease(*COMMITTED, L.RELEASED, shown=Shown.TOMBSTONE), removal_tombstones=True),
    ),
    (
        "S5 two resolutions",
        invariants.s5_one_terminal_event,
        "S5",
        seen(lease(*COMMITTED, L.ABORTED, shown=Shown.TOMBSTONE)),
        seen(lease(*COMMITTED)),
    ),
    (
        "S5 two releases",
        invariants.s5_one_terminal_event,
        "S5",
        seen(lease(*COMMITTED, L.RELEASED, L.RELEASED)),
        seen(lease(*COMMITTED, L.RELEASED)),
    ),
    (
        "S6 a rewritten name",
        invariants.s6_append_only_evidence,
        "S6",
        seen(files=(HERE._replace(rewritten=True),)),
        seen(files=(HERE,)),
    ),
    (
        "S6 a reused name",
        invariants.s6_append_only_evidence,
        "S6.reuse",
        seen(files=(HERE._replace(reused=True),)),
        seen(files=(HERE,)),
    ),
    (
        "S6 changed journal evidence",
        invariants.s6_append_only_evidence,
        "S6",
        seen(evidence_changed="verified journal records changed"),
        seen(),
    ),
    (
        "S7",
        invariants.s7_nothing_outside,
        "S7",
        seen(outside=("unlink touched /etc/passwd",)),
        seen(),
    ),
]


@pytest.mark.parametrize(
    ("check", "handle", "bad", "good"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_the_clause_fires_on_the_bad_observable_only(
    check: Check, handle: str, bad: Observable, good: Observable
) -> None:
    assert list(check(good)) == []
    found = list(check(bad))
    assert [h for h, _ in found] == [handle] and found[0][1]


@pytest.mark.parametrize(("check", "bad"), [(c[1], c[3]) for c in CASES], ids=[c[0] for c in CASES])
def test_findings_and_violations_report_the_clause(check: Check, bad: Observable) -> None:
    name = next(n for n, c in invariants.SAFETY if c is check)
    assert name.split(" ", 1)[0] in [h.split(".")[0] for h, _ in invariants.findings(bad)]
    assert name in [n for n, _ in invariants.violations_of(bad)]


def test_s4_asks_for_a_tombstone_only_of_an_owner_that_keeps_o4() -> None:
    released = seen(lease(*COMMITTED, L.RELEASED))
    assert list(invariants.s4_remove_before_release(released)) == []
    assert list(invariants.s4_remove_before_release(released._replace(removal_tombstones=True)))


def test_s1_speaks_of_the_artifact_and_the_transaction() -> None:
    [(_, why)] = invariants.s1_no_dangling_reference(seen(lease(L.PREPARED)))
    assert why == f"{A} is deleted while t1's reference may still become visible"


def test_a_name_never_written_is_not_deleted() -> None:
    never = ArtifactView(A, present=False)
    assert list(invariants.s1_no_dangling_reference(seen(lease(L.PREPARED), files=(never,)))) == []


@pytest.mark.parametrize(
    ("observable", "unfinished"),
    [
        (seen(files=()), 0),
        (seen(lease(L.PREPARED), files=()), 1),  # pending
        (seen(lease(L.PREPARED, awaits_operator=True), files=()), 0),  # the operator's
        (seen(lease(L.PREPARED, L.ABORTED, shown=Shown.TOMBSTONE, in_flight=True), files=()), 1),
        (seen(files=(HERE,)), 1),  # an unclaimed survivor
        (seen(files=(HERE._replace(claimed=True),)), 0),
        (seen(files=(GONE,)), 0),
    ],
)
def test_l1_goal_is_quiescent_and_clean(observable: Observable, unfinished: int) -> None:
    assert len(list(invariants.l1_unfinished(observable))) == unfinished
    assert invariants.l1_reached(observable) is (unfinished == 0)
