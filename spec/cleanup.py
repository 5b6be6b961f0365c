"""Two-phase cleanup: plan classification and apply re-validation.

Rules
=====

Plan (read-only), for one entry of ``tool-results/`` or one claimed name,
the first matching row of :data:`PLAN_RULES` decides:

1. no file, a claim names it                  -> ``missing_referenced`` (reported: dangling)
2. not a regular file (directory, symlink, an
   entry that cannot be inspected...)          -> ``denied`` (never followed)
3. hard-linked (more than one name)            -> ``denied`` (may be someone else's)
4. a name that is not ``tool_result_NNN.txt``  -> ``denied`` (not ours)
5. not ours to judge (another owner, unreadable,
   changed while it was hashed)                -> ``retained_unknown``
6. still being written (its writer's mark)      -> ``retained_writing``
7. an active claim whose digest differs        -> ``retained_corrupt``
8. an active claim whose full digest matches   -> ``retained_referenced``
9. younger than the orphan TTL                 -> ``retained_recent``
10. the plan already holds ``max_deletions``    -> ``retained_limit``
11. otherwise                                 -> ``planned_delete``

:func:`plan` asks the rows oldest first (``mtime``, then ``mtime_exact``, then
the name), each with the number planned so far, so the oldest orphans count
toward ``max_deletions`` first; the implementation asks in the same order.

A claim is *active* when it is pending (PREPARED: no expiry, whatever its
``retain_until``), or when it counts references and ``retain_until`` is unset
or still ahead.

Apply, for one ``planned_delete`` entry, against the facts and claims *now*
(first matching row of :data:`APPLY_RULES`):

1. an active claim names it now, with another digest   -> ``retained_corrupt``
2. an active claim names it now                        -> ``retained_referenced``
3. the file is gone                                    -> ``already_missing``
4. the owner shows a visible reference naming it       -> ``retained_referenced``
5. the owner was asked and cannot tell                 -> ``retained_unknown``
6. it cannot be inspected or read now                  -> ``retained_unknown``
7. still being written (its writer's mark)             -> ``retained_writing``
8. type, name, hard links, owner, snapshot (size, mtime, device, inode)
   or digest changed                                   -> ``race_detected``
9. younger than the orphan TTL now                     -> ``retained_recent``
10. otherwise                                          -> ``deleted``

Rows 4 and 5 are the **second witness** (:class:`Witness`): a cleanup given
the owner asks it, inside a fence that holds back every publish naming the
artifact, whether a visible reference names it; a cleanup without an owner
has only the journal (``NOT_ASKED``).  The journal can lose a lease that the
owner still shows (a journal cut back or an older copy restored above the
anchor); only the owner can then tell (variant ``gc-without-owner-witness``).

A file is *being written* while its writer holds the mark it took, under the
session lock, when it created the name; the mark goes when the artifact is
complete and durable.  A slow command can leave its half-written file older
than the orphan TTL by its last write: age alone would delete it under the
writer (variant ``gc-ignores-writer``).

The implementation asks these rows at each step of its re-check, with what
it knows so far (a fact not read yet is taken as planned), and stops at the
first answer that keeps the file: so it never reads a file a claim keeps.
The bytes (digest, readability) are read last, after row 9: with a clock set
back, a file that is both "recent" and changed or unreadable is reported
``retained_recent`` rather than row 6's or row 8's status; every such answer
keeps the file.  Row 9 needs the policy; :func:`revalidate` without one (the
composed model, whose time is one "older than the TTL" flag) never takes it.

Theory of operation
===================

Cleanup fails closed: every doubt keeps the file.  Planning only reads;
applying deletes only what the plan called ``planned_delete`` *and* what still
looks exactly the same, with the current claims re-read under the lock that
``prepare`` takes.  Locations come from the trusted session directory only; a
claim is path-free, so no claim, plan or Memory record can point cleanup at a
path outside (S7).  Time enters as an argument (``now``), never as a clock.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import NamedTuple

import attrs

from .identity_enum import IdentityEnum

__all__ = [
    "EntryKind",
    "Witness",
    "PlanStatus",
    "ApplyStatus",
    "EntryFacts",
    "Claim",
    "Policy",
    "PLAN_RULES",
    "APPLY_RULES",
    "claim_is_active",
    "classify",
    "plan_rule",
    "plan",
    "revalidate",
    "apply_rule",
]


class EntryKind(IdentityEnum):
    """What ``lstat`` says an entry is."""

    REGULAR = "regular"
    DIRECTORY = "directory"
    SYMLINK = "symlink"
    OTHER = "other"


class Witness(IdentityEnum):
    """What the owner, asked inside its fence before a deletion, says of an artifact."""

    NOT_ASKED = "not asked"  # cleanup was given no owner: the journal is its only witness
    NONE = "no visible reference"
    SHOWN = "a visible reference names it"
    UNKNOWN = "cannot tell"


class PlanStatus(enum.StrEnum):
    """Plan statuses (docs/design.md section 7): the names plans and JSON carry."""

    RETAINED_REFERENCED = "retained_referenced"
    RETAINED_RECENT = "retained_recent"
    RETAINED_LIMIT = "retained_limit"
    RETAINED_UNKNOWN = "retained_unknown"
    RETAINED_WRITING = "retained_writing"
    DENIED = "denied"
    RETAINED_CORRUPT = "retained_corrupt"
    MISSING_REFERENCED = "missing_referenced"
    PLANNED_DELETE = "planned_delete"


class ApplyStatus(enum.StrEnum):
    """Apply outcomes for a ``planned_delete`` entry: the names reports and JSON carry."""

    DELETED = "deleted"
    RACE_DETECTED = "race_detected"
    ALREADY_MISSING = "already_missing"
    RETAINED_REFERENCED = "retained_referenced"
    RETAINED_CORRUPT = "retained_corrupt"
    RETAINED_UNKNOWN = "retained_unknown"
    RETAINED_RECENT = "retained_recent"
    RETAINED_WRITING = "retained_writing"


class EntryFacts(NamedTuple):
    """What a scan knows of one entry; the snapshot is (size, mtime, device, inode).

    A tuple, not attrs: the implementation builds up to three per file of every
    cleanup (plan, planned, current), and a tuple is built in half the time.
    """

    kind: EntryKind = EntryKind.REGULAR
    owned_name: bool = True
    # True when the file has more than one name (a hard link): its bytes may be
    # someone else's, so it is never ours to delete.
    linked: bool = False
    # False when the scan cannot vouch for the bytes: another owner, an
    # unreadable file, or one that changed while it was hashed.
    trusted: bool = True
    # False when the entry could not be inspected or read at all (an I/O error).
    readable: bool = True
    digest: int = 0
    size: int = 0
    mtime: float = 0
    device: int = 0
    inode: int = 0
    # The same instant as ``mtime`` at the implementation's full resolution (ns):
    # part of the snapshot a change is detected by, never read by a rule.
    mtime_exact: int = 0
    # True while the file's writer holds its mark (the artifact is not complete).
    writing: bool = False


@attrs.frozen
class Claim:
    """A path-free claim on one artifact name (aggregated from leases)."""

    digest: int
    pending: bool = False
    reference_count: int = 1
    retain_until: float | None = None


@attrs.frozen
class Policy:
    """The cleanup policy (docs/design.md section 7); times in seconds.

    The model uses whole seconds; the implementation passes what its policy
    holds (a float, never NaN: ``ArtifactCleanupPolicy`` refuses one).
    """

    orphan_ttl_seconds: float = 86400
    max_deletions: int = 100


def claim_is_active(claim: Claim, now: float) -> bool:
    """Pending claims never expire; others hold while counted and before ``retain_until``.

    post: implies(claim.pending, __return__)
    post: implies(claim.reference_count <= 0 and not claim.pending, not __return__)
    """
    if claim.pending:
        return True
    if claim.reference_count <= 0:
        return False
    # "not yet past", not "still ahead": a time that compares with nothing (NaN) keeps it
    return claim.retain_until is None or not now >= claim.retain_until


class _Case(NamedTuple):  # a tuple, not attrs: classify runs for every entry of every plan
    facts: EntryFacts | None
    active: tuple[Claim, ...]
    policy: Policy
    now: float
    planned_so_far: int


def _no_file(c: _Case) -> bool:
    return c.facts is None


def _not_regular(c: _Case) -> bool:
    return c.facts is not None and c.facts.kind is not EntryKind.REGULAR


def _linked(c: _Case) -> bool:
    return c.facts is not None and c.facts.linked


def _foreign_name(c: _Case) -> bool:
    return c.facts is not None and not c.facts.owned_name


def _untrusted(c: _Case) -> bool:
    return c.facts is not None and not c.facts.trusted


def _writing(c: _Case) -> bool:
    return c.facts is not None and c.facts.writing


def _claim_disagrees(c: _Case) -> bool:
    return (
        bool(c.active) and c.facts is not None and any(k.digest != c.facts.digest for k in c.active)
    )


def _claim_matches(c: _Case) -> bool:
    return (
        bool(c.active) and c.facts is not None and any(k.digest == c.facts.digest for k in c.active)
    )


def _recent(c: _Case) -> bool:
    # "not provably aged": an age that compares with nothing (NaN) keeps the file
    return c.facts is not None and not c.now - c.facts.mtime >= c.policy.orphan_ttl_seconds


def _over_limit(c: _Case) -> bool:
    return c.planned_so_far >= c.policy.max_deletions


def _always(c: _Case) -> bool:
    return True


#: Ordered (condition name, condition, status): the first condition that holds decides.
PLAN_RULES: tuple[tuple[str, Callable[[_Case], bool], PlanStatus], ...] = (
    ("no file, a claim names it", _no_file, PlanStatus.MISSING_REFERENCED),
    ("not a regular file", _not_regular, PlanStatus.DENIED),
    ("hard-linked (more than one name)", _linked, PlanStatus.DENIED),
    ("name is not tool_result_NNN.txt", _foreign_name, PlanStatus.DENIED),
    ("not ours to judge (owner, unreadable, changing)", _untrusted, PlanStatus.RETAINED_UNKNOWN),
    ("still being written (its writer's mark)", _writing, PlanStatus.RETAINED_WRITING),
    ("an active claim's digest differs", _claim_disagrees, PlanStatus.RETAINED_CORRUPT),
    ("an active claim's full digest matches", _claim_matches, PlanStatus.RETAINED_REFERENCED),
    ("younger than the orphan TTL", _recent, PlanStatus.RETAINED_RECENT),
    ("max_deletions already planned", _over_limit, PlanStatus.RETAINED_LIMIT),
    ("otherwise", _always, PlanStatus.PLANNED_DELETE),
)


def classify(
    facts: EntryFacts | None,
    claims: Sequence[Claim],
    policy: Policy,
    now: float,
    planned_so_far: int = 0,
) -> PlanStatus:
    """The plan status of one entry (``facts`` None: the claimed file is gone).

    pre: facts is not None or len(claims) > 0
    post: implies(__return__ is PlanStatus.PLANNED_DELETE, _none_active(claims, now))
    post: implies(__return__ is PlanStatus.PLANNED_DELETE, _ours(facts))
    post: implies(__return__ is PlanStatus.PLANNED_DELETE, _aged(facts, policy, now))
    post: implies(__return__ is PlanStatus.PLANNED_DELETE, planned_so_far < policy.max_deletions)
    """
    return PLAN_RULES[plan_rule(facts, claims, policy, now, planned_so_far)][2]


def plan_rule(
    facts: EntryFacts | None,
    claims: Sequence[Claim],
    policy: Policy,
    now: float,
    planned_so_far: int = 0,
) -> int:
    """The index in :data:`PLAN_RULES` of the row that decides one entry (see :func:`classify`).

    post: 0 <= __return__ < len(PLAN_RULES)
    """
    active = tuple(k for k in claims if claim_is_active(k, now)) if claims else ()
    case = _Case(facts, active, policy, now, planned_so_far)
    for index, (_name, condition, _status) in enumerate(PLAN_RULES):
        if condition(case):
            return index
    raise AssertionError("unreachable: the last rule always holds")  # pragma: no cover


def plan(
    entries: Sequence[tuple[str, EntryFacts | None, Sequence[Claim]]],
    policy: Policy,
    now: float,
) -> tuple[tuple[str, PlanStatus], ...]:
    """Classify every (name, facts, claims) entry, oldest first; the result is in name order.

    Each entry is asked with the number planned before it, so the limit keeps
    the youngest orphans (``retained_limit``).  An entry with neither a file
    nor a claim is not an entry and is skipped.

    post: len(__return__) <= len(entries)
    post: _planned(__return__) <= max(policy.max_deletions, 0)
    """
    result: list[tuple[str, PlanStatus]] = []
    planned = 0
    for name, facts, claims in sorted(entries, key=_age_order):
        if facts is None and not claims:
            continue
        status = classify(facts, claims, policy, now, planned)
        if status is PlanStatus.PLANNED_DELETE:
            planned += 1
        result.append((name, status))
    return tuple(sorted(result, key=lambda r: r[0]))


def _age_order(
    entry: tuple[str, EntryFacts | None, Sequence[Claim]],
) -> tuple[bool, float, int, str]:
    """Oldest first; an entry without a file (never planned) before every file."""
    name, facts, _ = entry
    if facts is None:
        return (False, 0, 0, name)
    return (True, facts.mtime, facts.mtime_exact, name)


class _Recheck(NamedTuple):
    planned: EntryFacts
    current: EntryFacts | None
    active: tuple[Claim, ...]
    now: float
    policy: Policy | None
    witness: Witness


def _claimed_otherwise(c: _Recheck) -> bool:
    return bool(c.active) and any(k.digest != c.planned.digest for k in c.active)


def _claimed_now(c: _Recheck) -> bool:
    return bool(c.active)


def _gone(c: _Recheck) -> bool:
    return c.current is None


def _owner_shows(c: _Recheck) -> bool:
    return c.witness is Witness.SHOWN


def _owner_cannot_tell(c: _Recheck) -> bool:
    return c.witness is Witness.UNKNOWN


def _writing_now(c: _Recheck) -> bool:
    return c.current is not None and c.current.writing


def _unreadable(c: _Recheck) -> bool:
    return c.current is not None and not c.current.readable


def _changed(c: _Recheck) -> bool:
    return c.current != c.planned or c.planned.kind is not EntryKind.REGULAR


def _recent_now(c: _Recheck) -> bool:
    return (
        c.policy is not None
        and c.current is not None
        and not c.now - c.current.mtime >= c.policy.orphan_ttl_seconds
    )


def _unchanged(c: _Recheck) -> bool:
    return True


#: Ordered (condition name, condition, outcome) for apply re-validation.
APPLY_RULES: tuple[tuple[str, Callable[[_Recheck], bool], ApplyStatus], ...] = (
    (
        "an active claim names it now, another digest",
        _claimed_otherwise,
        ApplyStatus.RETAINED_CORRUPT,
    ),
    ("an active claim names it now", _claimed_now, ApplyStatus.RETAINED_REFERENCED),
    ("the file is gone", _gone, ApplyStatus.ALREADY_MISSING),
    (
        "the owner shows a visible reference naming it",
        _owner_shows,
        ApplyStatus.RETAINED_REFERENCED,
    ),
    ("the owner was asked and cannot tell", _owner_cannot_tell, ApplyStatus.RETAINED_UNKNOWN),
    ("cannot be inspected or read now", _unreadable, ApplyStatus.RETAINED_UNKNOWN),
    ("still being written (its writer's mark)", _writing_now, ApplyStatus.RETAINED_WRITING),
    ("type, links, owner, snapshot or digest changed", _changed, ApplyStatus.RACE_DETECTED),
    ("younger than the orphan TTL now", _recent_now, ApplyStatus.RETAINED_RECENT),
    ("unchanged and unclaimed", _unchanged, ApplyStatus.DELETED),
)


def revalidate(  # noqa: PLR0913 - the facts, then the policy and the owner's word
    planned: EntryFacts,
    current: EntryFacts | None,
    current_claims: Sequence[Claim],
    now: float,
    policy: Policy | None = None,
    witness: Witness = Witness.NOT_ASKED,
) -> ApplyStatus:
    """The apply outcome for a planned entry, given what is true *now*.

    post: implies(__return__ is ApplyStatus.DELETED, current == planned)
    post: implies(__return__ is ApplyStatus.DELETED, _none_active(current_claims, now))
    post: implies(__return__ is ApplyStatus.DELETED, planned.kind is EntryKind.REGULAR)
    post: implies(current is None, __return__ is not ApplyStatus.DELETED)
    post: implies(__return__ is ApplyStatus.DELETED, witness in (Witness.NOT_ASKED, Witness.NONE))
    post: implies(__return__ is ApplyStatus.DELETED, _complete(current))
    """
    return APPLY_RULES[apply_rule(planned, current, current_claims, now, policy, witness)][2]


def apply_rule(  # noqa: PLR0913 - as revalidate
    planned: EntryFacts,
    current: EntryFacts | None,
    current_claims: Sequence[Claim],
    now: float,
    policy: Policy | None = None,
    witness: Witness = Witness.NOT_ASKED,
) -> int:
    """The index in :data:`APPLY_RULES` of the row that decides (see :func:`revalidate`).

    post: 0 <= __return__ < len(APPLY_RULES)
    """
    active = tuple(k for k in current_claims if claim_is_active(k, now)) if current_claims else ()
    case = _Recheck(planned, current, active, now, policy, witness)
    for index, (_name, condition, _status) in enumerate(APPLY_RULES):
        if condition(case):
            return index
    raise AssertionError("unreachable: the last rule always holds")  # pragma: no cover


def implies(a: bool, b: bool) -> bool:
    """Logical implication, for contracts."""
    return (not a) or b


# --- predicates the contracts above are written in (kept short so one fits a line) ---


def _none_active(claims: Sequence[Claim], now: float) -> bool:
    return not any(claim_is_active(k, now) for k in claims)


def _ours(facts: EntryFacts | None) -> bool:
    return (
        facts is not None
        and facts.kind is EntryKind.REGULAR
        and not facts.linked
        and facts.owned_name
        and facts.trusted
        and not facts.writing
    )


def _complete(facts: EntryFacts | None) -> bool:
    return facts is not None and not facts.writing


def _aged(facts: EntryFacts | None, policy: Policy, now: float) -> bool:
    return facts is not None and now - facts.mtime >= policy.orphan_ttl_seconds


def _planned(result: Sequence[tuple[str, PlanStatus]]) -> int:
    return sum(1 for _, s in result if s is PlanStatus.PLANNED_DELETE)
