"""toolswap: the context window is RAM, disk is swap.

Large tool output becomes an immutable, audited artifact; the agent gets a
bounded pointer and pages the rest back in on demand.  See DESIGN/README.
"""

from __future__ import annotations

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
    ArtifactWriteError,
    CorruptStateError,
    EnvironmentFailure,
    InvalidSourceId,
    InvalidSummary,
    InvalidThreshold,
    ToolswapError,
    UsageError,
)
from .externalizer import ExternalizationResult, ToolResultExternalizer
from .fs import REAL_FS, FileFacts, FileSystem, OsFileSystem

__all__ = [
    "ArtifactIntegrityError",
    "ArtifactMemoryReference",
    "ArtifactNotOwnedError",
    "ArtifactReference",
    "ArtifactRetentionClaim",
    "ArtifactSource",
    "ArtifactWriteError",
    "CorruptStateError",
    "EnvironmentFailure",
    "ExternalizationResult",
    "FileFacts",
    "FileSystem",
    "InvalidSourceId",
    "InvalidSummary",
    "InvalidThreshold",
    "OsFileSystem",
    "REAL_FS",
    "SourceId",
    "ToolResultExternalizer",
    "ToolswapError",
    "UsageError",
    "format_source_id",
    "parse_source_id",
]
