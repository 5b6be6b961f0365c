"""The owner protocol: the trusted Memory boundary (docs/design.md section 6).

An *owner* is the store (a Memory database, an object store, ...) where a thin
reference to an artifact becomes visible.  Adapters implement
:class:`ArtifactReferenceOwner`, whose fences yield an
:class:`OwnerObservation`.  The lease journal relies on the promises below and on nothing else; the
conformance kit checks each one.  The journal never trusts a single "not
found": it resolves a PREPARED lease only through a **fence**, an exclusive
view of one transaction id inside the owner itself.

Terms
-----
* A reference is keyed by its **transaction id**, the journal's id for the
  lease (stable: chosen before publication, reused by reconciliation).  Its
  **identity** is the pair (``source_id``, full ``content_sha256``) of the claim
  it was published with.
* **Durable** means it survives a crash or restart of the owner's process,
  host or store.
* The **generation** of an id is an ``int`` or ``str`` that the owner changes
  on every durable change of that id (publish, tombstone, removal) and never
  reuses for that id.  The journal only compares generations for equality.
* A **tombstone** is a durable record that an id must never hold a reference
  again.

Promises an adapter makes
-------------------------
O1 ``publish(transaction_id, claim)`` returns normally only once a reference
   with the claim's identity is durable and visible to every later fence.
   Publishing the identity an id already holds is a no-op that returns
   normally (no second reference, generation unchanged).  Another identity
   under an id that holds a reference raises :class:`OwnerConflictError` and
   changes nothing.  The return value is opaque to the journal.
O2 :class:`ArtifactPublicationRejected` from ``publish`` means *nothing was
   written for that id by this call and nothing of it is still in flight*.  It
   is the only such signal: every other exception (timeouts, lost
   connections, ``OSError``, ``RuntimeError``, ...) means "maybe written, maybe
   later", and the journal keeps the lease PREPARED.
O3 A tombstone is durable when the call that wrote it returns.  It refuses
   every later ``publish`` of that id, forever, with
   :class:`ArtifactPublicationRejected`, writing nothing -- including a write
   that was still in flight when the tombstone was made.
O4 ``remove(transaction_id)`` returns normally only once no reference is
   visible under the id and a tombstone for it is durable (so a late replay
   cannot resurrect it).  It is idempotent; a never-seen id gets a tombstone.
   An exception means "maybe removed".
O5 ``inspect_fenced(transaction_id)`` returns a context manager.  Entering
   may block.  For the whole block no ``publish``, ``remove`` or seal of that
   id by any other caller (thread, process or host) takes effect; they wait
   or fail, and act afterwards on the state the block left.  A fence may
   cover more ids than one.  The block yields an :class:`OwnerObservation` of
   the id's durable state at entry; the observation is valid only inside its
   block.  An exception on entry means the owner cannot tell (the journal
   reports ``pending_unknown``).  Inside the block the journal appends to its
   own journal and calls nothing on the owner but ``seal_absence``.
O6 ``seal_absence()`` is allowed only on an ABSENT, unsealed observation,
   inside its block (otherwise :class:`~toolswap.errors.UsageError`, nothing
   written).  It is a compare-and-set on the observed ``generation``: it
   returns ``True`` only once the tombstone is durable and the generation has
   advanced, and ``False`` when the id's generation is no longer the observed
   one, in which case it writes nothing.  An exception means "maybe sealed".
O7 Observations, return values, reports and error messages carry no artifact
   content, file path or credential.
O8 An observation's ``state`` is exactly one of :class:`ObservedState`:
   PUBLISHED (``source_id`` and ``content_sha256`` are the durable identity),
   ABSENT (no reference is visible, read from the authoritative store -- never
   from a cache or a lagging replica; both identity fields are ``None``;
   ``sealed`` is ``True`` exactly when a tombstone exists), or UNKNOWN (the
   owner cannot answer with that certainty).  In doubt, answer UNKNOWN, never
   ABSENT.  ``sealed`` is a real ``bool``.

One promise is optional: an owner that keeps it can be cleanup's **second
witness** (:class:`ArtifactReferenceCensus`; docs/design.md section 7).

O9 ``census_fenced(source_ids)`` returns a context manager.  Entering may
   block.  A reference *names* an artifact when its source id starts with
   that artifact's ``artifact:<session id>:<file name>:``, whatever its
   digest part (:func:`~toolswap.domain.artifact_prefix`).  For the whole
   block no ``publish`` by any other caller of a reference naming one of the
   given artifacts takes effect; they wait or fail, and act afterwards.  The
   block yields a mapping from *every* given source id to the sorted tuple of
   transaction ids whose reference naming that artifact is visible at entry,
   read from the authoritative store (never a cache or a lagging replica).
   An exception on entry, or a given id missing from the mapping, means the
   owner cannot tell: cleanup then keeps the file.  Inside the block the
   caller calls nothing on the owner.

The caller's side: the journal and cleanup never call an owner while they hold
the session lock; they take the owner's fence first and the session lock
inside it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

import attrs

from toolswap.spec.owner import ObservedState
from toolswap.spec.reconcile import ReconcileStatus

from .domain import ArtifactRetentionClaim
from .errors import (
    ArtifactPublicationRejected,
    OwnerConflictError,
    UsageError,
)

__all__ = [
    "ArtifactPublicationRejected",
    "ArtifactReferenceCensus",
    "ArtifactReferenceOwner",
    "Census",
    "Generation",
    "ObservedState",
    "OwnerConflictError",
    "OwnerObservation",
    "ReconcileStatus",
    "ReconciliationReport",
    "owner_publisher",
    "owner_remover",
    "require_sealable",
]

Generation = int | str
"""An owner's version of one transaction id: a row version, an object generation, ..."""


@runtime_checkable
class OwnerObservation(Protocol):
    """What an owner durably holds for one transaction id, seen inside its fence (O5, O8).

    * ``transaction_id``: the id that was inspected (another id is UNKNOWN).
    * ``state``: PUBLISHED, ABSENT (authoritative) or UNKNOWN.
    * ``source_id`` / ``content_sha256``: the durable identity when PUBLISHED,
      else ``None``.
    * ``generation``: the id's generation at entry to the fence.
    * ``sealed``: ``True`` exactly when ABSENT because of a tombstone.

    Valid only inside the ``inspect_fenced`` block that yielded it.
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
        """Tombstone the id by compare-and-set on :attr:`generation` (O6).

        ``True``: the tombstone is durable and the generation advanced.
        ``False``: the generation had moved; nothing was written.  Allowed only
        on an ABSENT, unsealed observation inside its fence.
        """
        ...


@runtime_checkable
class ArtifactReferenceOwner(Protocol):
    """An owner adapter; the module docstring states its promises O1-O8.

    Three operations, all keyed by the journal's transaction id.  An adapter
    says in its own docstring whether one object may be shared by threads.
    """

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> object:
        """Return only once the reference is durable and visible (O1).

        Same identity again: a no-op.  Another identity: :class:`OwnerConflictError`,
        nothing changed.  A tombstoned id: :class:`ArtifactPublicationRejected`
        (O3).  Any other exception: maybe written (O2).
        """
        ...

    def remove(self, transaction_id: str) -> None:
        """Return only once the reference is durably gone and a tombstone is durable (O4).

        Idempotent.  An exception: maybe removed.
        """
        ...

    def inspect_fenced(self, transaction_id: str) -> AbstractContextManager[OwnerObservation]:
        """A fence over the id: no change of it by anyone takes effect while it is held (O5).

        Yields the observation of the id's durable state at entry.  An exception
        on entry means "cannot tell".
        """
        ...


Census = Mapping[str, tuple[str, ...]]
"""Source id -> the transaction ids whose visible reference names that artifact (O9)."""


@runtime_checkable
class ArtifactReferenceCensus(Protocol):
    """The optional promise O9: a fenced census of the references naming some artifacts."""

    def census_fenced(self, source_ids: Sequence[str]) -> AbstractContextManager[Census]:
        """Hold back every publish naming these artifacts; yield who references each (O9).

        An exception on entry means "cannot tell".
        """
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
    """Adapters call this at the top of ``seal_absence``: O6's precondition on the state.

    Raises :class:`~toolswap.errors.UsageError` unless the observation is
    ABSENT and unsealed.  (Being inside the fence is the adapter's to check.)
    """
    if observation.state is not ObservedState.ABSENT:
        raise UsageError(f"cannot seal a {observation.state.value} observation")
    if observation.sealed:
        raise UsageError("the absence is already sealed")


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
