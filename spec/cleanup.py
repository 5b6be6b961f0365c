"""Two-phase cleanup: plan classification and apply re-validation.

Rules
=====

Plan (read-only), for one entry of ``tool-results/`` or one claimed name,
the first matching row of :data:`PLAN_RULES` decides:

1. no file, a claim names it                  -> ``missing_referenced`` (reported: dangling)
2. not a regular file (directory, symlink...) -> ``denied`` (never followed)
3. a name that is not ``tool_result_NNN.txt``  -> ``denied`` (not ours)
4. not ours to judge (another owner, unreadable,
   changed while it was hashed)                -> ``retained_unknown``
5. an active claim whose digest differs        -> ``retained_corrupt``
6. an active claim whose full digest matches   -> ``retained_referenced``
7. younger than the orphan TTL                 -> ``retained_recent``
8. the plan already holds ``max_deletions``     -> ``retained_limit``
9. otherwise                                  -> ``planned_delete``

A claim is *active* when it is pending (PREPARED: no expiry, whatever its
``retain_until``), or when it counts references and ``retain_until`` is unset
or still ahead.

Apply, for one ``planned_delete`` entry, against the facts and claims *now*
(first matching row of :data:`APPLY_RULES`):

1. the file is gone                                    -> ``already_missing``
2. an active claim names it now                        -> ``retained_referenced``
3. type, name, snapshot (size, mtime, device, inode) or digest changed -> ``race_detected``
4. otherwise                                           -> ``deleted``

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

from collections.abc import Callable, Sequence

import attrs

from .identity_enum import IdentityEnum

__all__ = [
    "EntryKind",
    "PlanStatus",
    "ApplyStatus",
    "FileFacts",
    "Claim",
    "Policy",
    "PLAN_RULES",
    "APPLY_RULES",
    "claim_is_active",
    "classify",
    "plan",
    "revalidate",
]


class EntryKind(IdentityEnum):
    """What ``lstat`` says an entry is."""

    REGULAR = "regular"
    DIRECTORY = "directory"
    SYMLINK = "symlink"
    OTHER = "other"


class PlanStatus(IdentityEnum):
    """Plan statuses (docs/design.md section 7)."""

    RETAINED_REFERENCED = "retained_referenced"
    RETAINED_RECENT = "retained_recent"
    RETAINED_LIMIT = "retained_limit"
    RETAINED_UNKNOWN = "retained_unknown"
    DENIED = "denied"
    RETAINED_CORRUPT = "retained_corrupt"
    MISSING_REFERENCED = "missing_referenced"
    PLANNED_DELETE = "planned_delete"


class ApplyStatus(IdentityEnum):
    """Apply outcomes for a ``planned_delete`` entry."""

    DELETED = "deleted"
    RACE_DETECTED = "race_detected"
    ALREADY_MISSING = "already_missing"
    RETAINED_REFERENCED = "retained_referenced"


@attrs.frozen
class FileFacts:
    """What a scan knows of one entry; the snapshot is (size, mtime, device, inode)."""

    kind: EntryKind = EntryKind.REGULAR
    owned_name: bool = True
    # False when the scan cannot vouch for the bytes: another owner, an
    # unreadable file, or one that changed while it was hashed.
    trusted: bool = True
    digest: int = 0
    size: int = 0
    mtime: int = 0
    device: int = 0
    inode: int = 0


@attrs.frozen
class Claim:
    """A path-free claim on one artifact name (aggregated from leases)."""

    digest: int
    pending: bool = False
    reference_count: int = 1
    retain_until: int | None = None


@attrs.frozen
class Policy:
    """The cleanup policy (docs/design.md section 7), times in whole seconds."""

    orphan_ttl_seconds: int = 86400
    max_deletions: int = 100


def claim_is_active(claim: Claim, now: int) -> bool:
    """Pending claims never expire; others hold while counted and before ``retain_until``.

    post: implies(claim.pending, __return__)
    post: implies(claim.reference_count <= 0 and not claim.pending, not __return__)
    """
    if claim.pending:
        return True
    if claim.reference_count <= 0:
        return False
    return claim.retain_until is None or claim.retain_until > now


@attrs.frozen
class _Case:
    facts: FileFacts | None
    active: tuple[Claim, ...]
    policy: Policy
    now: int
    planned_so_far: int


def _no_file(c: _Case) -> bool:
    return c.facts is None


def _not_regular(c: _Case) -> bool:
    return c.facts is not None and c.facts.kind is not EntryKind.REGULAR


def _foreign_name(c: _Case) -> bool:
    return c.facts is not None and not c.facts.owned_name


def _untrusted(c: _Case) -> bool:
    return c.facts is not None and not c.facts.trusted


def _claim_disagrees(c: _Case) -> bool:
    return c.facts is not None and any(k.digest != c.facts.digest for k in c.active)


def _claim_matches(c: _Case) -> bool:
    return c.facts is not None and any(k.digest == c.facts.digest for k in c.active)


def _recent(c: _Case) -> bool:
    return c.facts is not None and c.now - c.facts.mtime < c.policy.orphan_ttl_seconds


def _over_limit(c: _Case) -> bool:
    return c.planned_so_far >= c.policy.max_deletions


def _always(c: _Case) -> bool:
    return True


#: Ordered (condition name, condition, status): the first condition that holds decides.
PLAN_RULES: tuple[tuple[str, Callable[[_Case], bool], PlanStatus], ...] = (
    ("no file, a claim names it", _no_file, PlanStatus.MISSING_REFERENCED),
    ("not a regular file", _not_regular, PlanStatus.DENIED),
    ("name is not tool_result_NNN.txt", _foreign_name, PlanStatus.DENIED),
    ("not ours to judge (owner, unreadable, changing)", _untrusted, PlanStatus.RETAINED_UNKNOWN),
    ("an active claim's digest differs", _claim_disagrees, PlanStatus.RETAINED_CORRUPT),
    ("an active claim's full digest matches", _claim_matches, PlanStatus.RETAINED_REFERENCED),
    ("younger than the orphan TTL", _recent, PlanStatus.RETAINED_RECENT),
    ("max_deletions already planned", _over_limit, PlanStatus.RETAINED_LIMIT),
    ("otherwise", _always, PlanStatus.PLANNED_DELETE),
)


def classify(
    facts: FileFacts | None,
    claims: Sequence[Claim],
    policy: Policy,
    now: int,
    planned_so_far: int = 0,
) -> PlanStatus:
    """The plan status of one entry (``facts`` None: the claimed file is gone).

    pre: facts is not None or len(claims) > 0
    post: implies(__return__ is PlanStatus.PLANNED_DELETE, _none_active(claims, now))
    post: implies(__return__ is PlanStatus.PLANNED_DELETE, _ours(facts))
    post: implies(__return__ is PlanStatus.PLANNED_DELETE, _aged(facts, policy, now))
    post: implies(__return__ is PlanStatus.PLANNED_DELETE, planned_so_far < policy.max_deletions)
    """
    active = tuple(k for k in claims if claim_is_active(k, now))
    case = _Case(facts, active, policy, now, planned_so_far)
    for _name, condition, status in PLAN_RULES:
        if condition(case):
            return status
    raise AssertionError("unreachable: the last rule always holds")  # pragma: no cover


def plan(
    entries: Sequence[tuple[str, FileFacts | None, Sequence[Claim]]],
    policy: Policy,
    now: int,
) -> tuple[tuple[str, PlanStatus], ...]:
    """Classify every (name, facts, claims) entry in name order; counts toward ``max_deletions``.

    An entry with neither a file nor a claim is not an entry and is skipped.

    post: len(__return__) <= len(entries)
    post: _planned(__return__) <= max(policy.max_deletions, 0)
    """
    result: list[tuple[str, PlanStatus]] = []
    planned = 0
    for name, facts, claims in sorted(entries, key=lambda e: e[0]):
        if facts is None and not claims:
            continue
        status = classify(facts, claims, policy, now, planned)
        if status is PlanStatus.PLANNED_DELETE:
            planned += 1
        result.append((name, status))
    return tuple(result)


@attrs.frozen
class _Recheck:
    planned: FileFacts
    current: FileFacts | None
    active: tuple[Claim, ...]


def _gone(c: _Recheck) -> bool:
    return c.current is None


def _claimed_now(c: _Recheck) -> bool:
    return bool(c.active)


def _changed(c: _Recheck) -> bool:
    return c.current != c.planned or c.planned.kind is not EntryKind.REGULAR


def _unchanged(c: _Recheck) -> bool:
    return True


#: Ordered (condition name, condition, outcome) for apply re-validation.
APPLY_RULES: tuple[tuple[str, Callable[[_Recheck], bool], ApplyStatus], ...] = (
    ("the file is gone", _gone, ApplyStatus.ALREADY_MISSING),
    ("an active claim names it now", _claimed_now, ApplyStatus.RETAINED_REFERENCED),
    ("type, snapshot or digest changed", _changed, ApplyStatus.RACE_DETECTED),
    ("unchanged and unclaimed", _unchanged, ApplyStatus.DELETED),
)


def revalidate(
    planned: FileFacts,
    current: FileFacts | None,
    current_claims: Sequence[Claim],
    now: int,
) -> ApplyStatus:
    """The apply outcome for a planned entry, given what is true *now*.

    post: implies(__return__ is ApplyStatus.DELETED, current == planned)
    post: implies(__return__ is ApplyStatus.DELETED, _none_active(current_claims, now))
    post: implies(__return__ is ApplyStatus.DELETED, planned.kind is EntryKind.REGULAR)
    post: implies(current is None, __return__ is ApplyStatus.ALREADY_MISSING)
    """
    active = tuple(k for k in current_claims if claim_is_active(k, now))
    case = _Recheck(planned, current, active)
    for _name, condition, status in APPLY_RULES:
        if condition(case):
            return status
    raise AssertionError("unreachable: the last rule always holds")  # pragma: no cover


def implies(a: bool, b: bool) -> bool:
    """Logical implication, for contracts."""
    return (not a) or b


# --- predicates the contracts above are written in (kept short so one fits a line) ---


def _none_active(claims: Sequence[Claim], now: int) -> bool:
    return not any(claim_is_active(k, now) for k in claims)


def _ours(facts: FileFacts | None) -> bool:
    return (
        facts is not None and facts.kind is EntryKind.REGULAR and facts.owned_name and facts.trusted
    )


def _aged(facts: FileFacts | None, policy: Policy, now: int) -> bool:
    return facts is not None and now - facts.mtime >= policy.orphan_ttl_seconds


def _planned(result: Sequence[tuple[str, PlanStatus]]) -> int:
    return sum(1 for _, s in result if s is PlanStatus.PLANNED_DELETE)
