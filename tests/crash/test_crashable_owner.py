"""The crashable owner's faults do exactly what they claim (one claim each)."""

from __future__ import annotations

import pytest
from toolswap.faultinject.owner import CrashableOwner

from toolswap.domain import ArtifactRetentionClaim
from toolswap.owner import ArtifactPublicationRejected, ObservedState

DIGEST = "ab" * 32
CLAIM = ArtifactRetentionClaim(
    source_id=f"artifact:s1:tool_result_001.txt:{DIGEST[:12]}", content_sha256=DIGEST
)


def test_lost_ack_writes_durably_then_raises() -> None:
    owner = CrashableOwner()
    owner.arm("lost_ack")
    with pytest.raises(ConnectionError):
        owner.publish("t1", CLAIM)
    assert owner.visible() == {"t1": (CLAIM.source_id, DIGEST)}


def test_fail_before_write_writes_nothing() -> None:
    owner = CrashableOwner()
    owner.arm("fail_before_write")
    with pytest.raises(ConnectionError):
        owner.publish("t1", CLAIM)
    assert owner.visible() == {}


def test_reject_is_the_explicit_no() -> None:
    owner = CrashableOwner()
    owner.arm("reject")
    with pytest.raises(ArtifactPublicationRejected):
        owner.publish("t1", CLAIM)
    assert owner.visible() == {} and "t1" in owner.rejected


def test_in_flight_write_lands_late_unless_tombstoned() -> None:
    owner = CrashableOwner()
    owner.arm("in_flight", times=2)
    for txn in ("t1", "t2"):
        with pytest.raises(TimeoutError):
            owner.publish(txn, CLAIM)
    assert owner.visible() == {}
    with owner.inspect_fenced("t2") as observation:
        assert observation.seal_absence()
    owner.deliver_in_flight()
    assert set(owner.visible()) == {"t1"}  # the tombstone refused t2's late write
    assert ("refused_late", "t2") in owner.history


def test_owner_crash_decides_in_flight_writes_by_choice() -> None:
    landed = []
    for choice in (0, 1):
        owner = CrashableOwner()
        owner.arm("in_flight")
        with pytest.raises(TimeoutError):
            owner.publish("t1", CLAIM)
        owner.crash([choice])
        landed.append(bool(owner.visible()))
    assert landed == [False, True]


def test_lost_tombstone_raises_and_leaves_no_tombstone() -> None:
    owner = CrashableOwner()
    owner.arm("lost_tombstone")
    with owner.inspect_fenced("t1") as observation, pytest.raises(ConnectionError):
        observation.seal_absence()
    assert not owner.tombstoned("t1")
    with owner.inspect_fenced("t1") as observation:
        assert observation.seal_absence()
    assert owner.tombstoned("t1")


def test_unknown_answer_cannot_be_sealed() -> None:
    owner = CrashableOwner()
    owner.publish("t1", CLAIM)
    owner.arm("unknown")
    with owner.inspect_fenced("t1") as observation:
        assert observation.state is ObservedState.UNKNOWN
        with pytest.raises(ValueError):
            observation.seal_absence()


def test_remove_faults() -> None:
    owner = CrashableOwner()
    owner.publish("t1", CLAIM)
    owner.arm("remove_error")
    with pytest.raises(ConnectionError):
        owner.remove("t1")
    assert "t1" in owner.visible()
    owner.arm("remove_lost_ack")
    with pytest.raises(ConnectionError):
        owner.remove("t1")
    assert owner.tombstoned("t1")


def test_before_publish_hook_sees_every_new_publication() -> None:
    seen: list[str] = []
    owner = CrashableOwner(before_publish=lambda txn, claim: seen.append(txn))
    owner.publish("t1", CLAIM)
    owner.publish("t1", CLAIM)  # idempotent replay: not a new publication
    assert seen == ["t1"]


def test_unknown_fault_names_are_refused() -> None:
    with pytest.raises(ValueError):
        CrashableOwner().arm("nonsense")  # type: ignore[arg-type]


def test_stale_seal_returns_false_and_writes_nothing() -> None:
    owner = CrashableOwner()
    owner.arm("stale_seal")
    with owner.inspect_fenced("t1") as observation:
        assert observation.seal_absence() is False
    assert not owner.tombstoned("t1")


OTHER_DIGEST = "cd" * 32
OTHER = ArtifactRetentionClaim(
    source_id=f"artifact:s1:tool_result_002.txt:{OTHER_DIGEST[:12]}", content_sha256=OTHER_DIGEST
)


def test_a_late_write_that_conflicts_is_refused_and_the_rest_still_land() -> None:
    owner = CrashableOwner()
    owner.arm("in_flight", times=2)
    for txn in ("t1", "t2"):
        with pytest.raises(TimeoutError):
            owner.publish(txn, CLAIM)
    owner.inner.publish("t1", OTHER)  # t1 now holds another identity
    owner.deliver_in_flight()
    assert owner.visible()["t1"][1] == OTHER_DIGEST  # the late write changed nothing
    assert "t2" in owner.visible()  # and the write queued after it still landed
    assert ("conflict_late", "t1") in owner.history
