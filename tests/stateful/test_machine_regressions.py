"""Fixed scenarios the machines once got wrong, and spec-vs-implementation agreements.

Each regression test replays one short, explicit sequence of the machine's
operations (no search), then checks every invariant, so a model or invariant
bug that was fixed cannot come back unnoticed.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from toolswap.faultinject.protocol_machine import (
    OwnerRecord,
    OwnerState,
    ProtocolMachine,
    claim_identity,
    name_of,
)
from toolswap.spec import cleanup as spec_cleanup

from toolswap.cleanup import ArtifactCleanupPolicy
from toolswap.domain import ArtifactRetentionClaim, format_source_id
from toolswap.externalizer import ToolResultExternalizer
from toolswap.journal import ArtifactRetentionJournal

from .test_protocol_machine import SimulatedDiskMachine

INVARIANTS = ("observables_match_model", "s1_to_s7")


def replay(
    script: Callable[[ProtocolMachine, Callable[[], None]], None],
    machine_class: type[ProtocolMachine] = SimulatedDiskMachine,
) -> None:
    """Run ``script(machine, check)`` once inside a Hypothesis test (``event`` needs one)."""

    @settings(max_examples=1, database=None, derandomize=True, deadline=None)
    @given(st.just(None))
    def run(_: None) -> None:
        machine = machine_class()

        def check() -> None:
            for name in INVARIANTS:
                getattr(machine, name)()

        try:
            script(machine, check)
        finally:
            machine.teardown()

    run()


def claim_for(machine: ProtocolMachine, index: int = 0) -> ArtifactRetentionClaim:
    ref = machine.model.refs[index]
    return ArtifactRetentionClaim.from_memory_reference(
        ref.for_memory(), reference_count=1, retain_until=None
    )


def test_s1_in_flight_write_refused_by_a_tombstone_does_not_protect() -> None:
    """The reviewer's false S1: a write in flight for a tombstoned id can never land.

    publish (in flight) -> reconcile seals the absence and aborts -> the lease no
    longer protects, so cleanup may delete the orphan.  The old invariant still
    counted the in-flight write as "may become visible" and reported S1; the
    tombstone refuses that write, and the late delivery is refused indeed.
    """

    def script(m: ProtocolMachine, check: Callable[[], None]) -> None:
        m.op_externalize(b"x" * 40, False)
        claim = claim_for(m)
        m.op_publish("t0", claim, "in_flight")
        check()
        m.op_reconcile("t0", "truthful")  # ABSENT, unsealed -> tombstone -> ABORTED
        assert m.view().tombstoned("t0") and m.source.in_flight
        m.advance_clock(100_000)
        m.op_gc_plan(0, 100, False)
        m.op_gc_apply()
        assert name_of(claim.source_id) not in m.artifact_files()  # deleted, legitimately
        check()  # S1 must hold: the in-flight write is refused by the tombstone
        m.deliver_in_flight()
        assert "t0" not in m.view().visible()
        check()

    replay(script)


def test_late_write_into_a_conflicting_row_is_refused_and_the_rest_still_land() -> None:
    """A late write for an id that holds another identity writes nothing (spec: NOOP).

    ``CrashableOwner.deliver_in_flight`` lets the owner's ``OwnerConflictError``
    escape (and drops the writes queued after it); the machine lands them one by
    one instead.  This replays the CI failure the seam comparison first hit.
    """

    def script(m: ProtocolMachine, check: Callable[[], None]) -> None:
        m.op_externalize(b"y" * 40, False)
        digest = hashlib.sha256(b"foreign").hexdigest()
        foreign = ArtifactRetentionClaim(
            source_id=format_source_id(m.session_id, "tool_result_900.txt", digest),
            content_sha256=digest,
        )
        m.source.handle.publish("t0", foreign)  # behind the journal's back
        m.store_changed()
        m.model.owner["t0"] = OwnerRecord(
            state=OwnerState.PUBLISHED, generation=1, digest=claim_identity(foreign)
        )
        m.op_publish("t0", claim_for(m), "in_flight")
        m.op_publish("t1", claim_for(m), "in_flight")
        check()
        m.deliver_in_flight()
        assert m.view().visible()["t0"][0] == foreign.source_id  # unchanged: refused
        assert "t1" in m.view().visible()  # landed although t0's write conflicted
        check()

    replay(script)


def test_plan_status_of_an_odd_named_regular_file_matches_the_spec(tmp_path: Any) -> None:
    session = tmp_path / "sess-1"
    session.mkdir(mode=0o700)
    ext = ToolResultExternalizer(str(session), environ={}, threshold_bytes=32)
    ext.externalize(b"z" * 40, "probe")  # creates tool-results/
    (session / "tool-results" / "notes.txt").write_bytes(b"someone else's notes\n")
    journal = ArtifactRetentionJournal(str(session))
    now = os.stat(session / "tool-results" / "notes.txt").st_mtime + 10
    plan = ext.plan_cleanup_from_journal(
        journal, policy=ArtifactCleanupPolicy(orphan_ttl_seconds=0, dry_run=True), now=now
    )
    got = {e.name: e.status for e in plan.entries}["notes.txt"]
    expected = spec_cleanup.classify(
        spec_cleanup.EntryFacts(kind=spec_cleanup.EntryKind.REGULAR, owned_name=False),
        (),
        spec_cleanup.Policy(orphan_ttl_seconds=0),
        int(now),
    )
    assert got == expected.value
