"""How one call to an adapter ended, in the terms the owner promises use.

A check never lets an adapter's exception escape: every call goes through
:func:`call`, which sorts the result into the five kinds the promises speak
of.  The message of an error is kept only to be scanned for secrets (O7); it
is never shown without redaction.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

import attrs

from ..errors import UsageError
from ..owner import ArtifactPublicationRejected, OwnerConflictError

__all__ = ["Outcome", "OutcomeKind", "call", "classify"]


class OutcomeKind(enum.StrEnum):
    OK = "ok"
    REJECTED = "rejected"  # ArtifactPublicationRejected: "nothing written" (O2)
    CONFLICT = "conflict"  # OwnerConflictError (O1)
    USAGE = "usage"  # UsageError (O6 misuse)
    ERROR = "error"  # anything else: "maybe done"

    def __str__(self) -> str:
        return self.value


@attrs.frozen(kw_only=True)
class Outcome:
    kind: OutcomeKind
    value: Any = None
    error_type: str | None = None
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.kind is OutcomeKind.OK

    def describe(self) -> str:
        """``returned normally`` or ``raised <Type>`` (never the message)."""
        if self.ok:
            return "returned normally"
        return f"raised {self.error_type}"

    def describe_seal(self) -> str:
        """What a ``seal_absence`` answered: ``returned False``, ``raised UsageError``, ..."""
        if self.ok:
            return (
                f"returned {self.value!r}"
                if isinstance(self.value, bool)
                else (f"returned a {type(self.value).__name__}, not a bool")
            )
        return self.describe()

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "error_type": self.error_type, "message": self.message}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Outcome:
        return cls(
            kind=OutcomeKind(data["kind"]),
            value=data.get("value"),
            error_type=data.get("error_type"),
            message=data.get("message", ""),
        )


def classify(exc: BaseException) -> OutcomeKind:
    if isinstance(exc, ArtifactPublicationRejected):
        return OutcomeKind.REJECTED
    if isinstance(exc, OwnerConflictError):
        return OutcomeKind.CONFLICT
    if isinstance(exc, UsageError):
        return OutcomeKind.USAGE
    return OutcomeKind.ERROR


def call(function: Callable[[], Any]) -> Outcome:
    """Run ``function``; its return value or exception becomes an :class:`Outcome`."""
    try:
        value = function()
    except Exception as exc:
        return Outcome(
            kind=classify(exc),
            error_type=type(exc).__name__,
            message=f"{exc}\n{exc!r}",
        )
    return Outcome(kind=OutcomeKind.OK, value=value)
