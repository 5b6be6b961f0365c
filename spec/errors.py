"""Errors raised by the specification.

The spec depends on nothing in ``toolswap`` (the dependency runs spec <- core),
so it names its own errors.  The implementation maps them onto its
blame-split hierarchy.
"""

from __future__ import annotations

__all__ = ["SpecError", "IllegalTransition", "UnknownVariant", "BadBounds", "StaleMoves"]


class SpecError(Exception):
    """Base of every error the specification raises on purpose."""


class IllegalTransition(SpecError, ValueError):
    """A (state, action) pair that is not a key of the machine's table.

    ``machine`` names the table, ``state`` and ``action`` are the refused pair.
    """

    def __init__(self, machine: str, state: object, action: object) -> None:
        self.machine = machine
        self.state = state
        self.action = action
        super().__init__(f"{machine}: no transition from {_name(state)} on {_name(action)}")


class UnknownVariant(SpecError, ValueError):
    """A mistake variant name that :mod:`variants` does not define."""


class BadBounds(SpecError, ValueError):
    """Exploration bounds that are not allowed (unknown key, bad value)."""


class StaleMoves(SpecError, AssertionError):
    """A memoized actor's moves do not match the state they are replayed on.

    Raised only under ``Model.check_moves``: the key of that actor's local
    view misses a part of the state the actor reads or writes.
    """


def _name(value: object) -> str:
    name = getattr(value, "name", None)
    return name if isinstance(name, str) else repr(value)
