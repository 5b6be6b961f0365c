"""Errors, split by blame.

* :class:`UsageError` -- the caller misused the API (bad argument, hostile id,
  illegal transition request).  Also a :class:`ValueError`.
* :class:`CorruptStateError` -- what is on disk or in the owner is not what the
  protocol allows (tampered artifact, corrupt journal, foreign file).  The data
  is kept; nothing is repaired silently.
* :class:`EnvironmentFailure` -- the environment failed (full disk, I/O error,
  permission).  The original :class:`OSError` is kept as ``__cause__``.

Every error names the invariant it protects where there is one.
"""

from __future__ import annotations

__all__ = [
    "ToolswapError",
    "UsageError",
    "InvalidSourceId",
    "InvalidThreshold",
    "InvalidSummary",
    "CorruptStateError",
    "ArtifactIntegrityError",
    "ArtifactNotOwnedError",
    "EnvironmentFailure",
    "ArtifactWriteError",
    "OwnerStoreError",
]


class ToolswapError(Exception):
    """Base of every error toolswap raises on purpose."""


class UsageError(ToolswapError, ValueError):
    """The caller asked for something the contract does not allow."""


class InvalidSourceId(UsageError):
    """A source id that is not ``artifact:<session>:<tool_result_NNN.txt>:<12 hex>``."""


class InvalidThreshold(UsageError):
    """An externalization threshold (argument or environment) is malformed."""


class InvalidSummary(UsageError):
    """A caller's summary is blank, too long or not text."""


class CorruptStateError(ToolswapError):
    """Durable state contradicts the protocol; toolswap refuses and keeps the data."""


class ArtifactIntegrityError(CorruptStateError):
    """An artifact's bytes no longer match its digest (fail closed)."""


class ArtifactNotOwnedError(CorruptStateError):
    """A path is not a regular file of this session's ``tool-results/`` (S7)."""


class EnvironmentFailure(ToolswapError):
    """The operating system refused an operation; ``__cause__`` holds the OSError."""


class ArtifactWriteError(EnvironmentFailure):
    """Writing an artifact failed; the never-referenced file was removed."""


class OwnerStoreError(EnvironmentFailure):
    """An owner's store failed (a database error, a lost connection).

    For a publish or a removal it means "maybe done" (owner promise O2): the
    lease is left as it was.  ``__cause__`` holds the store's own exception.
    """
