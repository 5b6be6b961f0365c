"""SPEC.md's generated block matches the tables; editing a table without regenerating fails."""

from __future__ import annotations

import pathlib
from types import MappingProxyType

import pytest
import toolswap.spec
from toolswap.spec import actors, compaction, diagrams, lease, reconcile
from toolswap.spec.lease import LeaseAction, LeaseState

SPEC_MD = pathlib.Path(toolswap.spec.__file__).with_name("SPEC.md")


@pytest.fixture(scope="module")
def committed() -> str:
    return SPEC_MD.read_text(encoding="utf-8")


def test_the_committed_spec_md_matches_the_tables(committed: str) -> None:
    assert diagrams.is_current(committed), (
        f"SPEC.md's diagrams drifted from the tables; run `{diagrams.REGENERATE}`"
    )


def test_a_new_lease_row_makes_the_committed_diagrams_stale(
    committed: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    edited = dict(lease.LEASE_TRANSITIONS)
    edited[(LeaseState.ABORTED, LeaseAction.RELEASE)] = LeaseState.RELEASED
    monkeypatch.setattr(lease, "LEASE_TRANSITIONS", MappingProxyType(edited))
    assert not diagrams.is_current(committed)
    assert "ABORTED --> RELEASED: release" in diagrams.generate()


def test_a_removed_actor_row_makes_the_committed_diagrams_stale(
    committed: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = dict(actors.GC_MACHINE.table)
    del table[(actors.GcPc.PLANNED, actors.GcEvent.APPLY)]
    gc = actors.Machine(actors.GC_MACHINE.name, actors.GcPc.IDLE, MappingProxyType(table))
    machines = tuple(gc if m is actors.GC_MACHINE else m for m in actors.MACHINES)
    monkeypatch.setattr(actors, "MACHINES", machines)
    assert not diagrams.is_current(committed)


def test_a_changed_decision_makes_the_committed_tables_stale(
    committed: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = dict(reconcile.RECONCILE_TABLE)
    key = (LeaseState.PREPARED, reconcile.ObservationKind.UNKNOWN)
    rows[key] = reconcile.Decision(False, LeaseAction.ABORT, reconcile.ReconcileStatus.ABORTED)
    monkeypatch.setattr(reconcile, "RECONCILE_TABLE", MappingProxyType(rows))
    assert not diagrams.is_current(committed)


def test_splice_then_extract_gives_the_generated_block_back() -> None:
    stale = f"# title\n\n{diagrams.BEGIN}\nold picture\n{diagrams.END}\n\ntail\n"
    fresh = diagrams.splice(stale)
    assert diagrams.extract(fresh) == diagrams.generate()
    assert fresh.startswith("# title\n\n") and fresh.endswith("\n\ntail\n")
    assert diagrams.splice(fresh) == fresh  # regenerating twice changes nothing


@pytest.mark.parametrize(
    "document",
    [
        "no markers at all",
        f"{diagrams.END}\n{diagrams.BEGIN}",
        f"{diagrams.BEGIN}\n{diagrams.BEGIN}\n{diagrams.END}",
    ],
)
def test_a_document_without_one_ordered_marker_pair_is_refused(document: str) -> None:
    with pytest.raises(ValueError, match="marker"):
        diagrams.extract(document)


def test_every_machine_is_drawn_as_a_mermaid_state_diagram() -> None:
    text = diagrams.generate()
    # the lease, the owner, each actor and the compaction actor
    assert text.count("```mermaid\nstateDiagram-v2") == 3 + len(actors.MACHINES)
    for m in actors.MACHINES:
        for (s, e), t in m.table.items():
            assert f"{s.name} --> {t.name}: " in text and e.value in text


def test_the_compaction_steps_are_drawn_from_their_table() -> None:
    """Every (pc, step) of COMPACTION_TRANSITIONS is an arrow; each mistake is a row."""
    text = diagrams.generate()
    for (s, step), t in compaction.COMPACTION_TRANSITIONS.items():
        assert f"{s.name} --> {t.name}: " in text and step.value in text
    for mistake, check in compaction.MISTAKE_BREAKS.items():
        assert f"| {mistake.value} | {check.value} |" in text


def test_a_state_with_no_way_out_is_drawn_final() -> None:
    edges = [
        (LeaseState.NEW, LeaseState.PREPARED, "prepare"),
        (LeaseState.PREPARED, LeaseState.PREPARED, "noop"),
    ]
    assert diagrams.state_diagram(LeaseState.NEW, edges).splitlines() == [
        "stateDiagram-v2",
        "    [*] --> NEW",
        "    NEW --> PREPARED: prepare",
        "    PREPARED --> PREPARED: noop",
        "    PREPARED --> [*]",
    ]
