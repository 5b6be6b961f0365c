"""Mutation gaps in spec/invariants.py: S1's less travelled branches and L1's operator case.

tests/spec/test_invariants.py builds its bad states on the first transaction
only and has no conflict in them; each test here is one verdict on a small
hand-built state that those cases never reach (docs/mutation.md, spec/).
"""

from __future__ import annotations

from toolswap.spec import invariants
from toolswap.spec.actors import FileStatus
from toolswap.spec.lease import LeaseState as L
from toolswap.spec.owner import OwnerRecord
from toolswap.spec.owner import OwnerState as O
from toolswap.spec.system import Bounds, FileSlot, JournalTxn, Model, OwnerSlot, SystemState

MODEL = Model()  # t1 -> tool_result_001.txt, t2 -> tool_result_002.txt
BASE = MODEL.initial()
PRESENT = FileSlot(FileStatus.PRESENT, 1, old=True)
DELETED = FileSlot(FileStatus.DELETED, 1, old=True)
COMMITTED = JournalTxn(durable=(L.PREPARED, L.COMMITTED), intent=1)
PUBLISHED = OwnerRecord(O.PUBLISHED, 1, 1)


def s1(model: Model, s: SystemState) -> str | None:
    return invariants.reason(invariants.s1_no_dangling_reference, model, s)


def _put(values: tuple[object, ...], i: int, value: object) -> tuple[object, ...]:
    return (*values[:i], value, *values[i + 1 :])


def second(
    s: SystemState,
    *,
    journal: JournalTxn | None = None,
    owner: OwnerSlot | None = None,
) -> SystemState:
    """``s`` with transaction t2's journal and owner slot set as given."""
    return s._replace(
        journal=_put(s.journal, 1, journal or s.journal[1]),
        owner=_put(s.owner, 1, owner or s.owner[1]),
    )


def test_s1_checks_every_transaction_not_only_the_first() -> None:
    # t1's artifact is on disk; t2's is deleted while t2's reference is visible
    s = second(
        BASE._replace(files=(PRESENT, DELETED)),
        journal=COMMITTED,
        owner=OwnerSlot(PUBLISHED),
    )
    assert s1(MODEL, s) == ("tool_result_002.txt is deleted while t2's reference to it is visible")


def test_s1_names_the_artifact_and_the_reference_that_may_become_visible() -> None:
    s = BASE._replace(
        files=(DELETED, BASE.files[1]),
        journal=(JournalTxn(durable=(L.PREPARED,), intent=1), BASE.journal[1]),
    )
    assert s1(MODEL, s) == (
        "tool_result_001.txt is deleted while t1's reference may still become visible"
    )


def test_s1_lets_cleanup_delete_after_a_committed_lease_expires() -> None:
    # the caller bounded the retention: past retain_until the shown reference no longer counts
    one = Model(Bounds(artifacts=1, transactions=1))
    s = one.initial()._replace(
        files=(DELETED,),
        journal=(COMMITTED._replace(expired=True),),
        owner=(OwnerSlot(PUBLISHED),),
    )
    assert s1(one, s) is None
    unexpired = s._replace(journal=(COMMITTED,))
    assert s1(one, unexpired) is not None


# t2's id published by another writer, naming tool_result_001.txt, and reported as
# pending_conflict; t1 never started, so only the report protects that artifact.
REPORTED = OwnerSlot(PUBLISHED, names=0, reported=0)


def test_s1_keeps_an_artifact_a_reported_conflict_names_while_the_owner_shows_it() -> None:
    s = second(BASE._replace(files=(DELETED, BASE.files[1])), owner=REPORTED)
    assert s1(MODEL, s) == (
        "tool_result_001.txt is deleted while t2's reference to it, "
        "reported as pending_conflict, is visible"
    )


def test_s1_lets_cleanup_delete_what_a_reported_conflict_named_once_it_is_removed() -> None:
    s = second(BASE._replace(files=(DELETED, BASE.files[1])), owner=REPORTED)
    removed = second(s, owner=OwnerSlot(OwnerRecord(O.ABSENT, 2, 1), reported=0))
    assert s1(MODEL, removed) is None
    present = second(BASE._replace(files=(PRESENT, BASE.files[1])), owner=REPORTED)
    assert s1(MODEL, present) is None


def _awaiting(*, volatile: bool) -> SystemState:
    """t2 PREPARED, with a CONFLICT record naming tool_result_001.txt that the owner shows."""
    txn = JournalTxn(
        durable=(L.PREPARED,), intent=1, conflict=0, conflict_digest=1, conflict_volatile=volatile
    )
    return second(BASE, journal=txn, owner=OwnerSlot(PUBLISHED, names=0))


def test_l1_leaves_a_durable_conflict_on_artifact_one_to_the_operator() -> None:
    # conflict slot 0 is a real slot (the first artifact), not "no conflict"
    assert invariants.l1_goal(MODEL, _awaiting(volatile=False))


def test_l1_does_not_wait_for_the_operator_on_a_conflict_not_yet_fsynced() -> None:
    assert not invariants.l1_goal(MODEL, _awaiting(volatile=True))
