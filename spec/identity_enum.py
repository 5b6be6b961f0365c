"""Enums whose members hash by identity: the explorer hashes millions of them.

``enum.Enum`` hashes a member by its name, in Python code, so every dict or
set look-up keyed by a member (a transition table, a visited state, a
``frozenset`` of step kinds) paid a Python call per member.  A member is a
singleton compared by identity, so hashing its identity is consistent with
``==`` and runs in C.  Iteration order of sets of members was never stable
across processes (string hashes are salted), so nothing may rely on it.

The vocabularies users see (``LeaseState``, ``LeaseNote``, ``ObservedState``,
``ReconcileStatus``, ``PlanStatus``, ``ApplyStatus``) are ``enum.StrEnum``
instead: the implementation, JSON and reports use them as they are, and a str
subclass hashes with ``str.__hash__``, also in C and cached on the object.
Only enums internal to the model stay here.
"""

from __future__ import annotations

import enum

__all__ = ["IdentityEnum"]


class IdentityEnum(enum.Enum):
    """An ``enum.Enum`` whose members hash by identity."""

    __hash__ = object.__hash__
