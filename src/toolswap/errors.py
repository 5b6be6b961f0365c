"""Errors, split by blame.

* :class:`UsageError` -- the caller misused the API (bad argument, hostile id,
  illegal transition request).  Also a :class:`ValueError`.
* :class:`CorruptStateError` -- what is on disk or in the owner is not what the
  protocol allows (tampered artifact, corrupt journal, foreign file).  The data
  is kept; nothing is repaired silently.
* :class:`EnvironmentFailure` -- the environment failed (full disk, I/O error,
  permission).  The original :class:`OSError` is kept as ``__cause__``.

Every error names the invariant it protects where there is one.  Every
:class:`ToolswapError` class is defined here, once (a test walks the
package); the modules that raise them import them from here (and keep
re-exporting their old names).
:class:`ArtifactPublicationRejected` is not a failure but an adapter's
promise (O2); :class:`ChildError` is the conformance kit's broken child.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ToolswapError",
    "UsageError",
    "InvalidSourceId",
    "InvalidThreshold",
    "InvalidSummary",
    "InvalidPattern",
    "CorruptStateError",
    "ArtifactIntegrityError",
    "ArtifactNotOwnedError",
    "EnvironmentFailure",
    "ArtifactWriteError",
    "OwnerStoreError",
    "TransactionExistsError",
    "UnknownTransactionError",
    "IllegalTransitionError",
    "DanglingReferenceError",
    "HostilePlanError",
    "ForeignClaimError",
    "JournalRequiredError",
    "ClaimsRequiredError",
    "CommandStartError",
    "FailpointError",
    "HarnessError",
    "JournalCorruptError",
    "OwnerConflictError",
    "CleanupRefused",
    "JournalWriteError",
    "ArtifactPublicationRejected",
    "ChildError",
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


class TransactionExistsError(UsageError):
    """The transaction id is already in the journal; it is never replayed.

    Reconcile it against the owner (``reconcile_reference``) instead.
    """


class UnknownTransactionError(UsageError, KeyError):
    """No PREPARED record names this transaction id."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class IllegalTransitionError(UsageError):
    """The requested phase change is not in the spec's ``lease.LEASE_TRANSITIONS``."""


class DanglingReferenceError(UsageError):
    """``prepare`` refused: the artifact does not exist (never publish a dangling reference)."""


class HostilePlanError(UsageError):
    """A plan that cleanup did not make for this session: odd names, another session or root."""


class ForeignClaimError(UsageError):
    """A claim names another session: the caller is confused about what it cleans (S1, S7)."""


class JournalRequiredError(UsageError):
    """The session has a lease journal; only the journal-aware cleanup may run (S1)."""


class ClaimsRequiredError(UsageError):
    """Cleanup was told neither the claims nor a journal, and the session has none (S1).

    A forgotten argument is never read as "nothing is referenced": pass
    ``claims=()`` to say so.
    """


class CommandStartError(UsageError):
    """The command could not be started (not found, not executable, bad folder)."""

    def __init__(self, message: str, exit_status: int) -> None:
        super().__init__(message)
        self.exit_status = exit_status


class InvalidPattern(UsageError):
    """A search pattern is refused: it does not compile, is too large, or ran out of time.

    A regex that backtracks without end (``(a+)+$``) is stopped at the time
    limit and reported here, with where the search had got to.
    """


class FailpointError(UsageError):
    """``TOOLSWAP_FAILPOINT`` or ``TOOLSWAP_FAILPOINT_MODE`` is malformed or unknown."""


class HarnessError(UsageError):
    """The harness itself is unusable: it cannot be imported, has the wrong type,
    shares one handle, or its store does not start empty.  No check ran."""


class CorruptStateError(ToolswapError):
    """Durable state contradicts the protocol; toolswap refuses and keeps the data."""


class ArtifactIntegrityError(CorruptStateError):
    """An artifact's bytes no longer match its digest (fail closed)."""


class ArtifactNotOwnedError(CorruptStateError):
    """A path is not a regular file of this session's ``tool-results/`` (S7)."""


class JournalCorruptError(CorruptStateError):
    """A complete journal line breaks the format or the protocol.

    ``line_number`` is 1-based; ``reason`` is one word of
    :data:`toolswap.journal_format.CORRUPTION_REASONS`; ``detail`` is a short
    explanation.  The message never contains the journal's bytes or path.
    """

    def __init__(self, line_number: int, reason: str, detail: str = "") -> None:
        self.line_number = line_number
        self.reason = reason
        self.detail = detail
        text = f"corrupt lease journal at line {line_number}: {reason}"
        if detail:
            text += f" ({detail})"
        super().__init__(text)

    def __reduce__(self) -> tuple[Any, ...]:  # picklable across processes
        return (type(self), (self.line_number, self.reason, self.detail))


class OwnerConflictError(CorruptStateError):
    """The owner already holds another identity under this transaction id (O1).

    Nothing was changed.  The journal keeps the lease PREPARED; reconciliation
    records the identity the owner shows (a CONFLICT record, so the artifact it
    names stays protected while the lease does) and reports
    ``pending_conflict`` until a person resolves it.
    """


class CleanupRefused(CorruptStateError):
    """Durable state leaves doubt (corrupt journal, odd ``tool-results``): nothing is deleted."""

    @classmethod
    def corrupt_journal(cls, cause: BaseException) -> CleanupRefused:
        """The one refusal for a journal that does not verify (raise it ``from cause``)."""
        return cls(f"the lease journal is corrupt; cleanup refuses: {cause}")


class EnvironmentFailure(ToolswapError):
    """The operating system refused an operation; ``__cause__`` holds the OSError."""


class ArtifactWriteError(EnvironmentFailure):
    """Writing an artifact failed; the never-referenced file was removed."""


class OwnerStoreError(EnvironmentFailure):
    """An owner's store failed (a database error, a lost connection).

    For a publish or a removal it means "maybe done" (owner promise O2): the
    lease is left as it was.  ``__cause__`` holds the store's own exception.
    """


class JournalWriteError(EnvironmentFailure):
    """Appending to or truncating the journal failed; ``__cause__`` holds the OSError."""


# -- neither: a promise, or a broken helper process ----------------------------


class ArtifactPublicationRejected(ToolswapError):
    """The owner promises this publish wrote nothing and nothing of it is in flight (O2).

    Raise it only from checks made before any write was attempted, or when a
    tombstone refuses the id (O3).  Never translate a timeout, a lost
    connection or an error message into it: an uncertain write must stay
    uncertain.  ``publish_reference`` turns it, and only it, into ABORTED.
    """


class ChildError(ToolswapError):
    """The child process could not start, answered nonsense, or died."""
