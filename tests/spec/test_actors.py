"""The actor machines: every row steps as listed, every other pair raises."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from toolswap.spec import actors
from toolswap.spec.actors import Machine
from toolswap.spec.errors import IllegalTransition

ALL = (
    *actors.MACHINES,
    actors.RELEASE_FIRST_REMOVER_MACHINE,
    actors.EARLY_ABORT_RECONCILER_MACHINE,
)


def _rows() -> list[tuple[Machine[Any, Any], Any, Any, Any]]:
    return [(m, s, e, t) for m in ALL for (s, e), t in m.table.items()]


def _illegal() -> list[tuple[Machine[Any, Any], Any, Any]]:
    out: list[tuple[Machine[Any, Any], Any, Any]] = []
    for m in ALL:
        state_type = list(type(m.initial).__members__.values())
        event_type = list(type(next(iter(m.table))[1]).__members__.values())
        out.extend(
            (m, s, e) for s, e in itertools.product(state_type, event_type) if (s, e) not in m.table
        )
    return out


@pytest.mark.parametrize(("machine", "state", "event", "target"), _rows(), ids=str)
def test_each_row_steps_to_its_target(
    machine: Machine[Any, Any], state: Any, event: Any, target: Any
) -> None:
    assert machine.step(state, event) is target


@pytest.mark.parametrize(("machine", "state", "event"), _illegal(), ids=str)
def test_a_pair_missing_from_the_table_raises(
    machine: Machine[Any, Any], state: Any, event: Any
) -> None:
    with pytest.raises(IllegalTransition) as caught:
        machine.step(state, event)
    assert caught.value.machine == machine.name


def test_the_correct_publisher_cannot_send_before_preparing() -> None:
    with pytest.raises(IllegalTransition):
        actors.PUBLISHER_MACHINE.step(actors.PublisherPc.IDLE, actors.PublisherEvent.SEND)


def test_the_correct_reconciler_cannot_abort_while_the_tombstone_is_in_flight() -> None:
    key = (actors.ReconcilerPc.SEALING, actors.ReconcilerEvent.APPEND_ABORTED)
    assert key not in actors.RECONCILER_MACHINE.table
    assert key in actors.EARLY_ABORT_RECONCILER_MACHINE.table


def test_the_correct_remover_cannot_release_before_removal() -> None:
    with pytest.raises(IllegalTransition):
        actors.REMOVER_MACHINE.step(actors.RemoverPc.IDLE, actors.RemoverEvent.RELEASE)


def test_a_crash_forgets_an_unsynced_file_but_never_a_deleted_one() -> None:
    f = actors.FILE_MACHINE
    assert f.step(actors.FileStatus.VOLATILE, actors.FileEvent.CRASH) is actors.FileStatus.NONE
    with pytest.raises(IllegalTransition):
        f.step(actors.FileStatus.DELETED, actors.FileEvent.WRITE)
