"""The implementation-vs-model machine takes any owner: a harness's store, through the protocol.

It ships in the package (``toolswap.faultinject.protocol_machine``); the kit
runs it with :func:`toolswap.testing.deep.run_protocol_machine`.  The
reference harnesses agree with the spec; broken adapters whose bug shows only
in the store's durable state are caught, by the fence-based view.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolswap.owners.memory import InMemoryHarness
from toolswap.owners.sqlite import SQLiteHarness
from toolswap.testing.deep import run_protocol_machine

from ._broken_owners import (
    CountingSQLiteHarness,
    RejectAfterWriteHarness,
    RemoveDeletesHarness,
    SealForgetsHarness,
)


@pytest.mark.parametrize("harness", [SQLiteHarness, InMemoryHarness], ids=["sqlite", "memory"])
def test_a_reference_owner_agrees_with_the_model(tmp_path: Path, harness: type) -> None:
    result = run_protocol_machine(harness, tmp_path)
    assert result.passed, "\n".join(result.details)
    assert " 0 violations" in result.summary and result.details == ()


def test_the_faults_a_store_cannot_show_are_named(tmp_path: Path) -> None:
    sqlite = run_protocol_machine(SQLiteHarness, tmp_path, max_examples=5)
    memory = run_protocol_machine(InMemoryHarness, tmp_path, max_examples=5)
    assert "nearest outcome: in_flight, stale_seal," in sqlite.summary
    assert "remove_lost_ack" in memory.summary and "reject," not in memory.summary


def test_every_example_gets_its_own_store_and_it_is_destroyed(tmp_path: Path) -> None:
    CountingSQLiteHarness.destroyed = 0
    result = run_protocol_machine(CountingSQLiteHarness, tmp_path, max_examples=10)
    examples = int(result.summary.split(": ")[1].split(" examples")[0])
    assert result.passed and CountingSQLiteHarness.destroyed == examples + 1  # + the probe
    assert os.listdir(tmp_path) == []


def test_a_seal_that_writes_no_tombstone_is_caught_by_the_view(tmp_path: Path) -> None:
    """The journal's answers all look right; only a fence on the id shows no tombstone."""
    result = run_protocol_machine(SealForgetsHarness, tmp_path, shrink_seconds=3)
    assert not result.passed
    assert result.details[0].startswith("AssertionError: owner row of t"), result.details[0]
    assert "real absent, model tombstone" in result.details[0]
    # the shrunk trace comes with it (its header differs between Hypothesis versions)
    assert any(line.startswith("state.") for line in result.details), result.details


def test_a_remove_that_deletes_the_row_is_caught(tmp_path: Path) -> None:
    result = run_protocol_machine(RemoveDeletesHarness, tmp_path, shrink_seconds=3)
    assert not result.passed
    # the missing tombstone: seen by a fence, or by a publish that it should have refused
    assert (
        "real absent, model tombstone" in result.details[0]
        or "expected ArtifactPublicationRejected, got success" in result.details[0]
    ), result.details[0]


def test_a_remove_that_deletes_the_row_is_seen_by_the_view_alone(tmp_path: Path) -> None:
    """With no rejection to trip over, the fence-based comparison still sees the lost tombstone."""
    from toolswap.faultinject.crashing_machine import CrashingMachine
    from toolswap.faultinject.owner_source import harness_sources
    from toolswap.faultinject.protocol_machine import machine_with_owner

    from .test_machine_regressions import claim_for, replay

    machine = machine_with_owner(
        CrashingMachine, harness_sources(RemoveDeletesHarness, str(tmp_path))
    )

    def script(m: object, check: object) -> None:
        assert isinstance(m, CrashingMachine)
        m.op_externalize(b"x" * 40, False)
        m.op_publish("t0", claim_for(m), "ok")
        m.op_remove("t0", "ok")
        with pytest.raises(AssertionError, match="owner row of t0: real absent, model tombstone"):
            m.observables_match_model()

    replay(script, machine)


def test_a_publish_that_rejects_after_writing_is_caught(tmp_path: Path) -> None:
    result = run_protocol_machine(RejectAfterWriteHarness, tmp_path, shrink_seconds=3)
    assert not result.passed
    assert "ArtifactPublicationRejected" in result.details[0] or "S3" in result.details[0]
