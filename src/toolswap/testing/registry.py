"""The registry of conformance checks: one check per promise sentence, each with a stable id.

Rules
=====

1. A check id (``O6.seal-is-compare-and-set``) names one sentence of the owner
   promises (O1-O8 in :mod:`toolswap.owner`), of the generation terms
   (``GEN.*``), of the reconciliation table (``ROW.*``), or a deep harness
   (``MODEL.*``, ``DEEP.*``).  Once released, an id never changes meaning: a
   changed promise gets a new id and the old one is retired, never reused.
2. A check drives the adapter only through the owner protocol (and the lease
   journal for ``ROW.*``), never through an adapter's rows.
3. A check returns one line saying what held, or raises
   :class:`CheckFailed` saying what broke.  It needs the capabilities it
   declares and nothing else; without one it is skipped with the harness's
   reason (``CLOCK`` excepted in a ``slow`` run: time then passes for real).
4. Checks run promise by promise (O1 ... O8, GEN, ROW, then the deep
   harnesses), in registration order within a promise: simple sentences
   first, so the first failure in a report is usually the root cause.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import attrs

from .harness import Capability

if TYPE_CHECKING:
    from .bench import Bench

__all__ = ["Check", "CheckFailed", "CheckSkipped", "CHECKS", "check", "checks_named"]

_GROUP_ORDER = ("O1", "O2", "O3", "O4", "O5", "O6", "O7", "O8", "O9", "GEN", "ROW", "MODEL", "DEEP")
_ID = re.compile(r"^(O[1-9]|GEN|ROW|MODEL|DEEP)\.[a-z0-9]+(-[a-z0-9]+)*$")

#: Ids whose promise changed (rule 1): never registered again, so an old report
#: line can never be read as the new promise.
RETIRED_IDS: dict[str, str] = {
    "ROW.published-other-identity-is-conflict": (
        "said nothing is appended; a conflict is now journalled and protected "
        "(ROW.published-other-identity-is-recorded-conflict)"
    ),
}


class CheckFailed(AssertionError):
    """A promise was broken; the message says how (it never carries a secret)."""


class CheckSkipped(Exception):
    """The check cannot run against this harness; the message is the reason."""


@attrs.frozen(kw_only=True)
class Check:
    """One promise sentence and the function that probes it."""

    id: str
    promise: str
    run: Callable[[Bench], str] = attrs.field(eq=False, repr=False)
    needs: frozenset[Capability] = frozenset()
    slow: bool = False
    waits: bool = False
    """It holds a fence, starts a process or sleeps: no edge example, few drawn ones."""
    generated: bool = True
    """It draws its inputs from its bench (a sentence check); the deep harnesses draw
    their own and take only the seed."""

    @property
    def group(self) -> str:
        return self.id.split(".", 1)[0]


CHECKS: list[Check] = []
"""Every registered check, in run order (filled by the ``checks_*`` modules)."""


def check(
    check_id: str,
    promise: str,
    *,
    needs: Iterable[Capability] = (),
    slow: bool = False,
    waits: bool = False,
    generated: bool | None = None,
) -> Callable[[Callable[[Bench], str]], Callable[[Bench], str]]:
    """Register ``function`` as the check ``check_id`` for the sentence ``promise``."""
    if not _ID.match(check_id):
        raise ValueError(f"malformed check id {check_id!r}")
    if check_id in RETIRED_IDS:
        raise ValueError(f"check id {check_id!r} is retired: {RETIRED_IDS[check_id]}")
    if any(c.id == check_id for c in CHECKS):
        raise ValueError(f"duplicate check id {check_id!r}")

    required = frozenset(needs)

    def register(function: Callable[[Bench], str]) -> Callable[[Bench], str]:
        CHECKS.append(
            Check(
                id=check_id,
                promise=promise,
                run=function,
                needs=required,
                slow=slow,
                waits=waits or Capability.OTHER_PROCESS in required,
                generated=not slow if generated is None else generated,
            )
        )
        return function

    return register


def checks_named(ids: Iterable[str] | None, exclude: Iterable[str] = ()) -> list[Check]:
    """The registered checks with these ids (all when ``None``), in run order.

    An id may also be a group (``O5``) or a prefix ending in ``*``
    (``O5.fence-holds-back-*``); ``exclude`` takes the same forms and removes
    what it matches.  An id that matches nothing is a
    :class:`~toolswap.errors.UsageError` that names the nearest id.
    """
    from . import _all_checks  # noqa: F401  (registers every check module)

    ordered = sorted(CHECKS, key=lambda c: _GROUP_ORDER.index(c.group))
    chosen = {c.id for c in ordered} if ids is None else set().union(*map(_matching, ids))
    chosen -= set().union(set(), *map(_matching, exclude))
    return [c for c in ordered if c.id in chosen]


def _matching(wanted: str) -> set[str]:
    if wanted.endswith("*"):
        matched = {c.id for c in CHECKS if c.id.startswith(wanted[:-1])}
    else:
        matched = {c.id for c in CHECKS if c.id == wanted or c.group == wanted}
    if not matched:
        from ..errors import UsageError

        raise UsageError(f"no conformance check matches {wanted!r}{nearest_hint(wanted)}")
    return matched


def nearest_hint(wanted: str) -> str:
    """``; did you mean 'X'?`` for the registered id nearest to ``wanted`` (else see --list)."""
    import difflib

    from . import _all_checks  # noqa: F401

    names = [c.id for c in CHECKS] + sorted({c.group for c in CHECKS})
    close = difflib.get_close_matches(wanted, names, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else " (see --list)"
