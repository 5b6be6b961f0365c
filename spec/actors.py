"""The actors' program counters and the artifact file: four small machines.

Rules
=====

* **Artifact file** (per name): ``NONE`` --write--> ``VOLATILE`` --fsync-->
  ``PRESENT`` --delete--> ``DELETED``.  A crash turns ``VOLATILE`` back into
  ``NONE`` (the bytes were never durable, and nobody had the pointer yet).
  A ``DELETED`` name is never written again.
* **Publisher** (per transaction): ``IDLE`` --prepare--> ``PREPARING``
  --send (only once PREPARED is durable)--> ``SENT``; the owner answers with an
  ack (``ACKED`` --commit--> ``DONE``) or an error (``DONE``, the lease stays
  PREPARED); an explicit rejection before any write ends in ``DONE`` after
  ABORTED.
* **Remover** (per transaction): ``IDLE`` --owner removed, ack seen-->
  ``REMOVED`` --release--> ``IDLE``; a lost removal ack leaves it ``IDLE`` and
  the lease COMMITTED (retry is safe: removing what is gone is a no-op).
* **Reconciler**: ``IDLE`` --observe absent--> ``OBSERVED`` --seal CAS-->
  ``SEALING`` --tombstone durable--> ``SEALED`` --append ABORTED--> ``IDLE``;
  a stale CAS goes back to ``IDLE`` (pending_stale); a visible reference with
  another identity --record conflict--> ``RECORDING`` --report (only once the
  conflict record is durable)--> ``IDLE`` (pending_conflict).  A seal that
  finds the tombstone already durable (a second reconciler sealed it first)
  goes straight to ``SEALED``: ABORTED is still appended through the journal's
  fold, so two reconcilers write one terminal event between them.
* **GC**: ``IDLE`` --plan--> ``PLANNED`` --apply--> ``IDLE``.

A crash resets every program counter to its initial state.

Theory of operation
===================

The program counters are the *volatile* part of each actor: where it is in its
protocol.  They are tables like the others, so the diagrams in SPEC.md are
drawn from them; the composed model in :mod:`system` consults them for every
step, and a step the table does not allow raises :class:`IllegalTransition`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Generic, TypeVar

import attrs

from .errors import IllegalTransition
from .identity_enum import IdentityEnum

__all__ = [
    "FileStatus",
    "FileEvent",
    "PublisherPc",
    "PublisherEvent",
    "RemoverPc",
    "RemoverEvent",
    "ReconcilerPc",
    "ReconcilerEvent",
    "GcPc",
    "GcEvent",
    "Machine",
    "FILE_MACHINE",
    "PUBLISHER_MACHINE",
    "REMOVER_MACHINE",
    "RECONCILER_MACHINE",
    "GC_MACHINE",
    "MACHINES",
    "RELEASE_FIRST_REMOVER_MACHINE",
    "EARLY_ABORT_RECONCILER_MACHINE",
    "CLIENT_CHECK_RECONCILER_MACHINE",
    "ERROR_ABORTS_PUBLISHER_MACHINE",
    "REPLAYING_PUBLISHER_MACHINE",
]

S = TypeVar("S", bound=enum.Enum)
E = TypeVar("E", bound=enum.Enum)


@attrs.frozen
class Machine(Generic[S, E]):
    """A named transition table with an initial state."""

    name: str
    initial: S
    table: Mapping[tuple[S, E], S]

    def step(self, state: S, event: E) -> S:
        """The next state; raises :class:`IllegalTransition` for a missing key."""
        try:
            return self.table[(state, event)]
        except KeyError:
            raise IllegalTransition(self.name, state, event) from None


class FileStatus(IdentityEnum):
    NONE = "none"
    VOLATILE = "volatile"
    PRESENT = "present"
    DELETED = "deleted"


class FileEvent(IdentityEnum):
    WRITE = "write"
    FSYNC = "fsync"
    DELETE = "delete"
    CRASH = "crash"


class PublisherPc(IdentityEnum):
    IDLE = "idle"
    PREPARING = "preparing"
    SENT = "sent"
    ACKED = "acked"
    DONE = "done"
    FAILED = "failed"  # only the uncertain-error-is-rejection mistake gets here


class PublisherEvent(IdentityEnum):
    PREPARE = "prepare"
    SEND = "send"
    REJECTED = "rejected"
    ACK = "ack"
    ERROR = "error"
    COMMIT = "commit"
    ABORT_ON_ERROR = "abort_on_error"  # mistake only
    REPLAY = "replay"  # mistake only


class RemoverPc(IdentityEnum):
    IDLE = "idle"
    REMOVED = "removed"
    RELEASED_FIRST = "released_first"  # only the release-before-remove mistake gets here


class RemoverEvent(IdentityEnum):
    REMOVE_ACK = "remove_ack"
    REMOVE_ERROR = "remove_error"
    RELEASE = "release"
    RELEASE_FIRST = "release_first"  # mistake only
    REMOVE_AFTER = "remove_after"  # mistake only


class ReconcilerPc(IdentityEnum):
    IDLE = "idle"
    OBSERVED = "observed"
    SEALING = "sealing"
    SEALED = "sealed"
    RECORDING = "recording"  # a conflict record appended, not yet reported
    CHECKED = "checked"  # only the client-side-generation mistake gets here


class ReconcilerEvent(IdentityEnum):
    RESOLVE = "resolve"  # committed / aborted (sealed) / pending_* inside the fence
    OBSERVE_ABSENT = "observe_absent"
    SEAL = "seal"
    STALE = "stale"
    TOMBSTONE_DURABLE = "tombstone_durable"
    APPEND_ABORTED = "append_aborted"
    RECORD_CONFLICT = "record_conflict"
    REPORT_CONFLICT = "report_conflict"
    FOUND_SEALED = "found_sealed"  # the seal answered already_sealed (another reconciler)
    CHECK_GENERATION = "check_generation"  # mistake only
    WRITE_TOMBSTONE = "write_tombstone"  # mistake only


class GcPc(IdentityEnum):
    IDLE = "idle"
    PLANNED = "planned"


class GcEvent(IdentityEnum):
    PLAN = "plan"
    APPLY = "apply"


_F, _FE = FileStatus, FileEvent
FILE_MACHINE: Machine[FileStatus, FileEvent] = Machine(
    "artifact file",
    _F.NONE,
    MappingProxyType(
        {
            (_F.NONE, _FE.WRITE): _F.VOLATILE,
            (_F.VOLATILE, _FE.FSYNC): _F.PRESENT,
            (_F.VOLATILE, _FE.CRASH): _F.NONE,
            (_F.VOLATILE, _FE.DELETE): _F.DELETED,
            (_F.PRESENT, _FE.DELETE): _F.DELETED,
        }
    ),
)

_P, _PE = PublisherPc, PublisherEvent
PUBLISHER_MACHINE: Machine[PublisherPc, PublisherEvent] = Machine(
    "publisher",
    _P.IDLE,
    MappingProxyType(
        {
            (_P.IDLE, _PE.PREPARE): _P.PREPARING,
            (_P.PREPARING, _PE.SEND): _P.SENT,
            (_P.PREPARING, _PE.REJECTED): _P.DONE,
            (_P.SENT, _PE.ACK): _P.ACKED,
            (_P.SENT, _PE.ERROR): _P.DONE,
            (_P.ACKED, _PE.COMMIT): _P.DONE,
        }
    ),
)

_M, _ME = RemoverPc, RemoverEvent
REMOVER_MACHINE: Machine[RemoverPc, RemoverEvent] = Machine(
    "remover",
    _M.IDLE,
    MappingProxyType(
        {
            (_M.IDLE, _ME.REMOVE_ACK): _M.REMOVED,
            (_M.IDLE, _ME.REMOVE_ERROR): _M.IDLE,
            (_M.REMOVED, _ME.RELEASE): _M.IDLE,
        }
    ),
)

_C, _CE = ReconcilerPc, ReconcilerEvent
RECONCILER_MACHINE: Machine[ReconcilerPc, ReconcilerEvent] = Machine(
    "reconciler",
    _C.IDLE,
    MappingProxyType(
        {
            (_C.IDLE, _CE.RESOLVE): _C.IDLE,
            (_C.IDLE, _CE.OBSERVE_ABSENT): _C.OBSERVED,
            (_C.OBSERVED, _CE.SEAL): _C.SEALING,
            (_C.OBSERVED, _CE.STALE): _C.IDLE,
            (_C.OBSERVED, _CE.FOUND_SEALED): _C.SEALED,
            (_C.SEALING, _CE.TOMBSTONE_DURABLE): _C.SEALED,
            (_C.SEALED, _CE.APPEND_ABORTED): _C.IDLE,
            (_C.IDLE, _CE.RECORD_CONFLICT): _C.RECORDING,
            (_C.RECORDING, _CE.REPORT_CONFLICT): _C.IDLE,
        }
    ),
)

_G, _GE = GcPc, GcEvent
GC_MACHINE: Machine[GcPc, GcEvent] = Machine(
    "gc",
    _G.IDLE,
    MappingProxyType({(_G.IDLE, _GE.PLAN): _G.PLANNED, (_G.PLANNED, _GE.APPLY): _G.IDLE}),
)

# --- the machines that only mistake variants use (see :mod:`variants`) ---

#: Remover that appends RELEASED before the owner removed the reference (breaks S4).
RELEASE_FIRST_REMOVER_MACHINE: Machine[RemoverPc, RemoverEvent] = Machine(
    "remover (mistake: release first)",
    _M.IDLE,
    MappingProxyType(
        {
            (_M.IDLE, _ME.RELEASE_FIRST): _M.RELEASED_FIRST,
            (_M.RELEASED_FIRST, _ME.REMOVE_AFTER): _M.IDLE,
        }
    ),
)

#: Reconciler that appends ABORTED while the tombstone is still being written (breaks S3).
EARLY_ABORT_RECONCILER_MACHINE: Machine[ReconcilerPc, ReconcilerEvent] = Machine(
    "reconciler (mistake: abort early)",
    _C.IDLE,
    MappingProxyType(
        {
            **RECONCILER_MACHINE.table,
            (_C.SEALING, _CE.APPEND_ABORTED): _C.IDLE,
        }
    ),
)

#: Reconciler that checks the owner's generation itself and then writes the tombstone
#: unconditionally: no compare-and-set in the owner, no fence around the decision (S3).
CLIENT_CHECK_RECONCILER_MACHINE: Machine[ReconcilerPc, ReconcilerEvent] = Machine(
    "reconciler (mistake: generation checked on the client)",
    _C.IDLE,
    MappingProxyType(
        {
            **{k: v for k, v in RECONCILER_MACHINE.table.items() if k != (_C.OBSERVED, _CE.SEAL)},
            (_C.OBSERVED, _CE.CHECK_GENERATION): _C.CHECKED,
            (_C.CHECKED, _CE.WRITE_TOMBSTONE): _C.SEALING,
        }
    ),
)

#: Publisher whose ``except`` clause appends ABORTED on any error, an uncertain one
#: included (a lost ack, a dropped request): breaks S3.
ERROR_ABORTS_PUBLISHER_MACHINE: Machine[PublisherPc, PublisherEvent] = Machine(
    "publisher (mistake: an error is a rejection)",
    _P.IDLE,
    MappingProxyType(
        {
            **{k: v for k, v in PUBLISHER_MACHINE.table.items() if k != (_P.SENT, _PE.ERROR)},
            (_P.SENT, _PE.ERROR): _P.FAILED,
            (_P.FAILED, _PE.ABORT_ON_ERROR): _P.DONE,
        }
    ),
)

#: Publisher that, restarted, sends a transaction id it already used without reading
#: the journal (the correct one only starts from a NEW transaction): breaks S1.
REPLAYING_PUBLISHER_MACHINE: Machine[PublisherPc, PublisherEvent] = Machine(
    "publisher (mistake: replay a transaction id)",
    _P.IDLE,
    MappingProxyType({**PUBLISHER_MACHINE.table, (_P.IDLE, _PE.REPLAY): _P.SENT}),
)

#: Every actor machine, in the order SPEC.md draws them.
MACHINES: tuple[Machine[Any, Any], ...] = (
    FILE_MACHINE,
    PUBLISHER_MACHINE,
    REMOVER_MACHINE,
    RECONCILER_MACHINE,
    GC_MACHINE,
)
