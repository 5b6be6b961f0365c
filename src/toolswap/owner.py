"""The owner protocol: the trusted Memory boundary (DESIGN section 6).

An *owner* is the store (a Memory database, an object store, ...) where a thin
reference to an artifact becomes visible.  The lease journal never trusts a
single "not found": it reconciles a PREPARED lease only through a **fence**,
an exclusive view of one transaction id in the owner itself.

Promises an adapter makes (the conformance kit checks each one):

O1 ``publish(transaction_id, claim)`` returns normally only once the reference
   is durable and visible.  Publishing the same id with the same identity
   again is a no-op (never a second reference).  A different identity under
   an existing id raises :class:`OwnerConflictError` and writes nothing.
O2 :class:`ArtifactPublicationRejected` means *definitely not written, and no
   write is still in flight*.  It is the only such signal: every other
   exception (timeouts, lost connections, ...) means "maybe written".
O3 A tombstone (written by :meth:`OwnerObservation.seal_absence` or by
   ``remove``) is durable when the call returns and refuses every later
   ``publish`` of that id forever, with :class:`ArtifactPublicationRejected`.
O4 ``remove(transaction_id)`` returns only once the reference is durably gone;
   it leaves a tombstone (so a late replay cannot resurrect it) and is idempotent.
O5 ``inspect_fenced(transaction_id)`` is a context manager.  For its whole
   duration no ``publish``/``remove``/seal of that id by anyone else takes
   effect.  It yields an :class:`OwnerObservation` of the *durable* state.
O6 ``seal_absence()`` is a compare-and-set on the observed ``generation``: it
   returns ``True`` when it wrote the tombstone (and advanced the generation),
   ``False`` when the generation had moved (nothing written).  It may be called
   only on an ABSENT, unsealed observation, inside its fence.
O7 Observations, reports and errors carry no content, path or credential.

The caller's side: never call an owner while holding the session lock (the
journal takes the owner's fence first and the session lock inside it).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

import attrs

from .domain import ArtifactRetentionClaim
from .errors import CorruptStateError, ToolswapError, UsageError

__all__ = [
    "ArtifactPublicationRejected",
    "ArtifactReferenceOwner",
    "Generation",
    "ObservedState",
    "OwnerConflictError",
    "OwnerObservation",
    "ReconcileStatus",
    "ReconciliationReport",
    "owner_publisher",
    "owner_remover",
]

Generation = int | str
"""An owner's version of one transaction id: a row version, an object generation, ..."""


class ArtifactPublicationRejected(ToolswapError):
    """The owner promises the reference was not written and never will be (O2).

    Raise it only from checks made before any write was attempted, or when a
    tombstone refuses the id.  Never translate a timeout or an error message
    into it: an uncertain write must stay uncertain.
    """


class OwnerConflictError(CorruptStateError):
    """The owner already holds a different reference under this transaction id."""


class ObservedState(enum.StrEnum):
    PUBLISHED = "PUBLISHED"
    ABSENT = "ABSENT"
    UNKNOWN = "UNKNOWN"

    def __str__(self) -> str:
        return self.value


@runtime_checkable
class OwnerObservation(Protocol):
    """What an owner durably holds for one transaction id, seen inside its fence.

    ``source_id``/``content_sha256`` are set only when PUBLISHED.  ``sealed`` is
    true when the absence is a tombstone.  ``generation`` advances on every
    change of the id (publish, tombstone, removal).
    """

    @property
    def transaction_id(self) -> str: ...

    @property
    def state(self) -> ObservedState: ...

    @property
    def source_id(self) -> str | None: ...

    @property
    def content_sha256(self) -> str | None: ...

    @property
    def generation(self) -> Generation: ...

    @property
    def sealed(self) -> bool: ...

    def seal_absence(self) -> bool:
        """Write a tombstone by CAS on :attr:`generation` (O6); False if it moved."""
        ...


@runtime_checkable
class ArtifactReferenceOwner(Protocol):
    """An owner adapter; see the module docstring for promises O1-O7."""

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> object:
        """Make the reference durable and visible (O1); refuse a tombstoned id (O3)."""
        ...

    def remove(self, transaction_id: str) -> None:
        """Durably remove the reference and leave a tombstone (O4)."""
        ...

    def inspect_fenced(
        self, transaction_id: str
    ) -> AbstractContextManager[OwnerObservation]:
        """Exclude changes of this id while the block runs; yield the observation (O5)."""
        ...


def owner_publisher(
    owner: ArtifactReferenceOwner, transaction_id: str, claim: ArtifactRetentionClaim
) -> Callable[[], object]:
    """A publisher for :meth:`ArtifactRetentionJournal.publish_reference`.

    ``journal.publish_reference(claim, owner_publisher(owner, "t1", claim),
    transaction_id="t1")`` publishes under the same stable id the journal uses,
    so reconciliation can later find it.
    """

    def publish() -> object:
        return owner.publish(transaction_id, claim)

    return publish


def owner_remover(owner: ArtifactReferenceOwner, transaction_id: str) -> Callable[[], None]:
    """A remover for :meth:`ArtifactRetentionJournal.remove_reference`."""

    def remove() -> None:
        owner.remove(transaction_id)

    return remove


def require_sealable(observation: OwnerObservation) -> None:
    """Adapters call this at the top of ``seal_absence`` (O6's precondition)."""
    if observation.state is not ObservedState.ABSENT:
        raise UsageError(f"cannot seal a {observation.state.value} observation")
    if observation.sealed:
        raise UsageError("the absence is already sealed")


class ReconcileStatus(enum.StrEnum):
    """The result of reconciling one lease (one row of the DESIGN section 6 table)."""

    COMMITTED = "committed"
    ABORTED = "aborted"
    PENDING_CONFLICT = "pending_conflict"
    PENDING_UNKNOWN = "pending_unknown"
    PENDING_STALE = "pending_stale"
    ALREADY_COMMITTED = "already_committed"
    ALREADY_ABORTED = "already_aborted"
    ALREADY_RELEASED = "already_released"

    def __str__(self) -> str:
        return self.value

    @property
    def is_pending(self) -> bool:
        return self.value.startswith("pending_")


@attrs.frozen(kw_only=True)
class ReconciliationReport:
    """Transaction id, status, reason and generation: never a path, content or credential."""

    transaction_id: str
    status: ReconcileStatus
    reason: str
    generation: Generation | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "transaction_id": self.transaction_id,
            "status": self.status.value,
            "reason": self.reason,
            "generation": self.generation,
        }
