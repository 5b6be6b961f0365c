"""The classic mistakes as named variants of the model.

Rules
=====

1. A variant is the correct :class:`system.Model` with exactly one
   :class:`system.Mistake` switched on, and the one invariant the mistake is
   expected to break first.
2. Run through :func:`explorer.explore` under the default bounds, every
   variant must reach a violation of its expected invariant; breadth-first
   order makes the printed trace a shortest one.  A variant whose mistake
   only shows under a fault the default bounds leave off names that fault in
   ``faults``: :meth:`Variant.bounds` switches it on over any bounds given, and
   the correct model under those same bounds has no violation.
3. Every variant has its entry in :mod:`catalogue`, which says the invariant
   it is expected to break (``Variant.expected`` reads it; a variant the
   catalogue does not list as shown in the model is refused when it is made).
4. Names are the stable handles of the CLI (``toolswap explore --variant``),
   the tests and SPEC.md; an unknown name raises :class:`UnknownVariant`.

Theory of operation
===================

A rule of the protocol is only worth its cost if dropping it is observable.
Each variant drops one rule and lets the explorer find the cheapest way to
hurt: the trace is the argument for the rule.  A variant whose expected
violation is no longer found means either the rule is no longer needed or
(far more likely) the model lost the behaviour that made it needed, so the
tests treat it as a failure of the spec itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import attrs

from . import catalogue
from .errors import UnknownVariant
from .invariants import Invariant
from .system import Bounds, Mistake, Model

__all__ = ["Variant", "VARIANTS", "FAULT_NEEDS", "get", "names"]


#: A fault -> the least bounds it can happen under (a foreign publish names another artifact).
FAULT_NEEDS: Mapping[str, Mapping[str, int]] = MappingProxyType(
    {"foreign_publish": MappingProxyType({"artifacts": 2})}
)


@attrs.frozen
class Variant:
    """One mistake, the invariant it breaks, and a sentence a student can learn from."""

    name: str
    mistake: Mistake
    lesson: str
    faults: tuple[str, ...] = ()  # Bounds flags this variant needs switched on

    def __attrs_post_init__(self) -> None:
        catalogue.invariant_of(self.name, "model")  # refused unless the catalogue lists it
        flags = {f.name for f in attrs.fields(Bounds) if f.type in (bool, "bool")}
        for fault in self.faults:
            if fault not in flags:
                raise ValueError(f"variant {self.name}: unknown fault {fault!r}")

    @property
    def expected(self) -> Invariant:
        """The invariant this mistake breaks first: its catalogue entry's."""
        return catalogue.invariant_of(self.name, "model")

    def bounds(self, bounds: Bounds | None = None) -> Bounds:
        """``bounds`` (default: the default bounds) with this variant's faults switched on,
        and raised to what each fault needs (:data:`FAULT_NEEDS`)."""
        base = bounds if bounds is not None else Bounds()
        if not self.faults:
            return base
        changes: dict[str, int | bool] = dict.fromkeys(self.faults, True)
        for fault in self.faults:
            for key, least in FAULT_NEEDS.get(fault, {}).items():
                changes[key] = max(least, getattr(base, key))
        return attrs.evolve(base, **changes)  # type: ignore[arg-type]

    def model(self, bounds: Bounds | None = None) -> Model:
        """The correct model with this one mistake switched on (and its faults)."""
        return Model(bounds=self.bounds(bounds), mistakes=frozenset({self.mistake}))


_M = Mistake
_ROWS: tuple[Variant, ...] = (
    Variant(
        "publish-before-prepared",
        _M.PUBLISH_BEFORE_PREPARED_DURABLE,
        "The publisher sent the reference while PREPARED sat in the page cache. "
        "A crash now would leave a visible reference with no lease protecting its "
        "artifact. Fix: fsync PREPARED, then call the publisher.",
    ),
    Variant(
        "release-before-remove",
        _M.RELEASE_BEFORE_REMOVE,
        "RELEASED was written while the owner still showed the reference, so the "
        "artifact looks unclaimed to the GC. Fix: the owner removes first, then "
        "RELEASED is appended; a failed removal leaves the lease COMMITTED.",
    ),
    Variant(
        "abort-before-tombstone",
        _M.ABORT_BEFORE_TOMBSTONE_DURABLE,
        "ABORTED was appended while the owner's tombstone was still being written. "
        "If the tombstone is lost, a late publish can still land for a lease "
        "that no longer protects anything. Fix: tombstone durable first, then ABORTED.",
    ),
    Variant(
        "not-found-is-absent",
        _M.NOT_FOUND_IS_ABSENT,
        "One 'not found' was taken as proof of absence and the lease aborted with "
        "no seal. A request in flight or a lagging replica can still publish. "
        "Fix: seal the absence by CAS on the observed generation, then abort.",
    ),
    Variant(
        "gc-skips-revalidation",
        _M.GC_SKIPS_REVALIDATION,
        "The GC deleted what its plan said, without re-reading the claims. A lease "
        "prepared after the plan was ignored. Fix: re-validate every planned entry "
        "against the current claims under the journal lock.",
    ),
    Variant(
        "gc-trusts-memory-path",
        _M.GC_TRUSTS_MEMORY_PATH,
        "The GC deleted the artifact_path a Memory record carried, and a record can "
        "say '../../anything'. Fix: locations come only from the trusted session "
        "folder; claims are path-free.",
    ),
    Variant(
        "counter-restart",
        _M.COUNTER_RESTART_OVERWRITES,
        "After a restart the name counter began again at 001 and overwrote an "
        "existing artifact, so an old pointer now shows other content. Fix: "
        "exclusive create, never reuse a name.",
    ),
    Variant(
        "gc-follows-unknown-entries",
        _M.GC_FOLLOWS_UNKNOWN_ENTRIES,
        "The GC went on past an entry it did not create (a symlink) and followed "
        "it out of tool-results/. Fix: anything not ours is denied or "
        "retained_unknown, never followed.",
    ),
    Variant(
        "gc-ignores-digest-conflict",
        _M.GC_IGNORES_DIGEST_CONFLICT,
        "A claim and the file disagreed on the digest, and the GC treated the file "
        "as unclaimed. Fix: a disagreement is retained_corrupt: keep the file and "
        "report it.",
    ),
    Variant(
        "delete-folder-at-session-end",
        _M.DELETE_FOLDER_AT_SESSION_END,
        "The whole tool-results/ folder was deleted when the session ended, while a "
        "lease still protected an artifact. Fix: only the two-phase GC deletes, "
        "one checked file at a time.",
    ),
    Variant(
        "blind-terminal-append",
        _M.BLIND_TERMINAL_APPEND,
        "The journal appended COMMITTED without folding the current phase, so a "
        "publisher and a reconciler both wrote one. Fix: fold first; a terminal "
        "phase re-applied is idempotent and appends nothing.",
    ),
    Variant(
        "conflict-unprotected",
        _M.CONFLICT_LEAVES_OBSERVED_UNPROTECTED,
        "The owner showed, under a transaction's id, a reference to another artifact, and the "
        "reconciler reported pending_conflict without writing that down. The lease "
        "protects only what it intended, so the GC deleted the artifact the owner "
        "shows. Fix: journal the observed identity (durable before the report); the "
        "lease protects it too until it stops protecting.",
        faults=("foreign_publish",),
    ),
    Variant(
        "prepared-lease-expires",
        _M.PREPARED_LEASE_EXPIRES,
        "The GC treated a PREPARED lease like a COMMITTED one and let it lapse at its "
        "retain_until. Nobody knows yet whether the owner has the reference, so a "
        "publish that lands later names a deleted artifact. Fix: a PREPARED lease "
        "protects with no expiry, whatever its retain_until and the orphan TTL, until "
        "reconciliation settles it; only a COMMITTED lease's retain_until ends its claim.",
        faults=("lease_expiry",),
    ),
    Variant(
        "uncertain-error-aborts",
        _M.UNCERTAIN_ERROR_IS_REJECTION,
        "The publish call failed with a timeout or a lost connection, and the "
        "publisher's except clause appended ABORTED as if the owner had said no. The "
        "owner may have applied it (a lost ack), and then the lease no longer protects "
        "a visible reference. Fix: only an explicit rejection before any write aborts "
        "at once; an uncertain error leaves the lease PREPARED for reconciliation "
        "(seal the absence, then abort).",
    ),
    Variant(
        "replay-transaction-id",
        _M.REPLAYED_TRANSACTION_ID,
        "After a restart the publisher was called again for a transaction id it had "
        "already used, and sent it without reading the journal. The lease was "
        "settled (here: ABORTED on the owner's rejection, with no tombstone), so "
        "nothing protects the artifact the replayed reference names. Fix: publish "
        "only from a fresh PREPARED record; an id already in the journal is never "
        "sent again (prepare refuses it), and its state is the journal's.",
    ),
    Variant(
        "client-side-generation",
        _M.CLIENT_SIDE_GENERATION,
        "The reconciler saw the id absent, read the owner's generation again itself, "
        "found it unchanged and then wrote the tombstone with a plain write. The "
        "publish still in flight landed between that read and the write, so the "
        "tombstone came after a reference (here it sits beside it, still visible; an "
        "owner whose tombstone overwrites buries it instead) and ABORTED ends a lease "
        "whose publish the owner took. Fix: the owner seals by compare-and-set on the "
        "observed generation (a publish in between makes the seal stale), inside a "
        "fence that holds the id's publishes back; a second read on the client is "
        "neither.",
    ),
    Variant(
        "two-reconcilers",
        _M.ALREADY_SEALED_APPENDS_BLINDLY,
        "A reconciler saw a PREPARED lease absent inside the fence and went to seal it. "
        "Meanwhile the lease was settled: here the publish landed, the lease was "
        "committed and the reference removed, and the removal left its tombstone (a "
        "second reconciler sealing first does the same). The seal answered "
        "already_sealed, and the reconciler took that answer as licence to append "
        "ABORTED at once, without folding the lease under the lock: a second terminal "
        "event. Fix: every append goes through the journal's fold, so the reconciler "
        "finds the lease COMMITTED or already ABORTED and appends nothing.",
    ),
    Variant(
        "gc-ignores-writer",
        _M.GC_IGNORES_WRITER,
        "A command printed part of its output, then went quiet for longer than the "
        "orphan TTL. Its artifact was still being written, but its last write was old, "
        "so the GC judged it by age alone and deleted it; the pointer the externalizer "
        "then returned names a deleted artifact. Fix: the writer takes a mark on the "
        "new file under the session lock (an exclusive flock) and keeps it until the "
        "artifact is complete and durable; the GC keeps every marked file "
        "(retained_writing), and the artifact's age starts when it is complete.",
        faults=("slow_writes",),
    ),
    Variant(
        "gc-without-owner-witness",
        _M.GC_WITHOUT_OWNER_WITNESS,
        "The journal lost a settled lease (cut back above its anchor, or an older copy "
        "restored), while the owner still showed the reference. The GC asked only the "
        "journal, found no claim and deleted the artifact the visible reference names. "
        "Fix: a cleanup given the owner asks it, inside a fence that holds back every "
        "publish naming the artifact, whether a visible reference names it, and keeps "
        "the file when one does or when the owner cannot tell.",
        faults=("lost_lease", "gc_owner"),
    ),
)

#: name -> variant, in the order SPEC.md lists them.
VARIANTS: Mapping[str, Variant] = MappingProxyType({v.name: v for v in _ROWS})


def names() -> tuple[str, ...]:
    """Every variant name, in order.

    post: len(__return__) == len(VARIANTS)
    """
    return tuple(VARIANTS)


def get(name: str) -> Variant:
    """The variant called ``name``; raises :class:`UnknownVariant` otherwise."""
    try:
        return VARIANTS[name]
    except KeyError:
        known = ", ".join(VARIANTS)
        raise UnknownVariant(f"unknown variant {name!r} (known: {known})") from None
