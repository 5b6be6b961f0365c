"""toolswap: the context window is RAM, disk is swap.

Large tool output becomes an immutable, audited artifact; the agent gets a
bounded pointer and pages the rest back in on demand.  See docs/design.md and the README.

The public names resolve on first use (a module ``__getattr__``): a command
that prints a version or reads a page must not pay for importing cleanup, the
journal or the owners (docs/design.md section 11).  ``from toolswap import X``
and ``toolswap.X`` work as before; type checkers read the imports below.
"""

from __future__ import annotations

from importlib import import_module as _import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .cleanup import (
        ArtifactCleanupPolicy,
        CleanupPlan,
        CleanupReport,
        apply_cleanup,
        cleanup_session,
        plan_cleanup,
        session_journal,
    )
    from .domain import (
        ArtifactMemoryReference,
        ArtifactReference,
        ArtifactRetentionClaim,
        ArtifactSource,
        SourceId,
        format_source_id,
        parse_source_id,
    )
    from .errors import (
        ArtifactIntegrityError,
        ArtifactNotOwnedError,
        ArtifactPublicationRejected,
        ArtifactWriteError,
        ClaimsRequiredError,
        CleanupRefused,
        CommandStartError,
        CorruptStateError,
        DanglingReferenceError,
        EnvironmentFailure,
        FailpointError,
        ForeignClaimError,
        HostilePlanError,
        IllegalTransitionError,
        InvalidPattern,
        InvalidSourceId,
        InvalidSummary,
        InvalidThreshold,
        JournalCorruptError,
        JournalRequiredError,
        JournalWriteError,
        OwnerConflictError,
        OwnerStoreError,
        ToolswapError,
        TransactionExistsError,
        UnknownTransactionError,
        UsageError,
    )
    from .externalizer import (
        ExternalizationResult,
        ToolResultExternalizer,
    )
    from .fs import (
        REAL_FS,
        FileFacts,
        FileSystem,
        OsFileSystem,
    )
    from .journal import (
        ArtifactRetentionJournal,
        Recovery,
        Transaction,
    )
    from .owner import (
        ArtifactReferenceCensus,
        ArtifactReferenceOwner,
        ObservedState,
        OwnerObservation,
        ReconcileStatus,
        ReconciliationReport,
        owner_publisher,
        owner_remover,
    )
    from .reading import (
        DEFAULT_PAGE_BYTES,
        DEFAULT_PAGE_LINES,
        ArtifactInfo,
        GrepMatch,
        GrepResult,
        Page,
        render_grep,
        render_listing,
        render_page,
    )
    from .session import (
        SessionPaths,
    )
    from .spec.lease import (
        LeaseNote,
        LeaseState,
    )

#: Public name -> the module that defines it (relative to this package).
_EXPORTS: dict[str, str] = {
    "ArtifactCleanupPolicy": ".cleanup",
    "CleanupPlan": ".cleanup",
    "CleanupReport": ".cleanup",
    "apply_cleanup": ".cleanup",
    "cleanup_session": ".cleanup",
    "plan_cleanup": ".cleanup",
    "session_journal": ".cleanup",
    "ArtifactMemoryReference": ".domain",
    "ArtifactReference": ".domain",
    "ArtifactRetentionClaim": ".domain",
    "ArtifactSource": ".domain",
    "SourceId": ".domain",
    "format_source_id": ".domain",
    "parse_source_id": ".domain",
    "ArtifactIntegrityError": ".errors",
    "ArtifactNotOwnedError": ".errors",
    "ArtifactPublicationRejected": ".errors",
    "ArtifactWriteError": ".errors",
    "ClaimsRequiredError": ".errors",
    "CleanupRefused": ".errors",
    "CommandStartError": ".errors",
    "CorruptStateError": ".errors",
    "DanglingReferenceError": ".errors",
    "EnvironmentFailure": ".errors",
    "FailpointError": ".errors",
    "ForeignClaimError": ".errors",
    "HostilePlanError": ".errors",
    "IllegalTransitionError": ".errors",
    "InvalidPattern": ".errors",
    "InvalidSourceId": ".errors",
    "InvalidSummary": ".errors",
    "InvalidThreshold": ".errors",
    "JournalCorruptError": ".errors",
    "JournalRequiredError": ".errors",
    "JournalWriteError": ".errors",
    "OwnerConflictError": ".errors",
    "OwnerStoreError": ".errors",
    "ToolswapError": ".errors",
    "TransactionExistsError": ".errors",
    "UnknownTransactionError": ".errors",
    "UsageError": ".errors",
    "ExternalizationResult": ".externalizer",
    "ToolResultExternalizer": ".externalizer",
    "FileFacts": ".fs",
    "FileSystem": ".fs",
    "OsFileSystem": ".fs",
    "REAL_FS": ".fs",
    "ArtifactRetentionJournal": ".journal",
    "Recovery": ".journal",
    "Transaction": ".journal",
    "ArtifactReferenceCensus": ".owner",
    "ArtifactReferenceOwner": ".owner",
    "ObservedState": ".owner",
    "OwnerObservation": ".owner",
    "ReconcileStatus": ".owner",
    "ReconciliationReport": ".owner",
    "owner_publisher": ".owner",
    "owner_remover": ".owner",
    "ArtifactInfo": ".reading",
    "DEFAULT_PAGE_BYTES": ".reading",
    "DEFAULT_PAGE_LINES": ".reading",
    "GrepMatch": ".reading",
    "GrepResult": ".reading",
    "Page": ".reading",
    "render_grep": ".reading",
    "render_listing": ".reading",
    "render_page": ".reading",
    "SessionPaths": ".session",
    "LeaseNote": ".spec.lease",
    "LeaseState": ".spec.lease",
}


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_import_module(module, __name__), name)
    globals()[name] = value  # later look-ups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "DEFAULT_PAGE_BYTES",
    "DEFAULT_PAGE_LINES",
    "ArtifactInfo",
    "GrepMatch",
    "GrepResult",
    "Page",
    "render_grep",
    "render_listing",
    "render_page",
    "ArtifactCleanupPolicy",
    "ArtifactIntegrityError",
    "ArtifactMemoryReference",
    "ArtifactNotOwnedError",
    "ArtifactPublicationRejected",
    "ArtifactReference",
    "ArtifactReferenceCensus",
    "ArtifactReferenceOwner",
    "ArtifactRetentionClaim",
    "ArtifactRetentionJournal",
    "ArtifactSource",
    "ArtifactWriteError",
    "ClaimsRequiredError",
    "CleanupPlan",
    "CleanupRefused",
    "CleanupReport",
    "CorruptStateError",
    "DanglingReferenceError",
    "EnvironmentFailure",
    "ExternalizationResult",
    "FileFacts",
    "FileSystem",
    "ForeignClaimError",
    "HostilePlanError",
    "IllegalTransitionError",
    "InvalidPattern",
    "InvalidSourceId",
    "InvalidSummary",
    "InvalidThreshold",
    "JournalCorruptError",
    "JournalRequiredError",
    "JournalWriteError",
    "ObservedState",
    "OsFileSystem",
    "OwnerConflictError",
    "OwnerObservation",
    "OwnerStoreError",
    "CommandStartError",
    "FailpointError",
    "SessionPaths",
    "LeaseNote",
    "LeaseState",
    "REAL_FS",
    "ReconcileStatus",
    "ReconciliationReport",
    "Recovery",
    "SourceId",
    "ToolResultExternalizer",
    "ToolswapError",
    "Transaction",
    "TransactionExistsError",
    "UnknownTransactionError",
    "UsageError",
    "apply_cleanup",
    "cleanup_session",
    "format_source_id",
    "owner_publisher",
    "owner_remover",
    "parse_source_id",
    "plan_cleanup",
    "session_journal",
]
