"""The public API: the names docs/design.md section 7a promises, all typed and exported."""

from __future__ import annotations

import importlib
import pathlib

import pytest

import toolswap

DESIGN_NAMES = (
    "ToolResultExternalizer",
    "ArtifactRetentionJournal",
    "ArtifactRetentionClaim",
    "ArtifactCleanupPolicy",
    "ArtifactPublicationRejected",
)


@pytest.mark.parametrize("name", DESIGN_NAMES)
def test_design_names_import_from_the_package(name: str) -> None:
    assert name in toolswap.__all__
    assert getattr(toolswap, name) is not None


@pytest.mark.parametrize("name", toolswap.__all__)
def test_every_exported_name_exists(name: str) -> None:
    assert hasattr(toolswap, name), name


@pytest.mark.parametrize("module", ["toolswap", "toolswap.owners"])
def test_all_has_no_duplicates(module: str) -> None:
    names = importlib.import_module(module).__all__
    assert len(names) == len(set(names))


def test_the_reference_owners_import_from_toolswap_owners() -> None:
    from toolswap.owner import ArtifactReferenceOwner
    from toolswap.owners import InMemoryOwner, SQLiteOwner

    assert isinstance(InMemoryOwner(), ArtifactReferenceOwner)
    assert SQLiteOwner.__module__ == "toolswap.owners.sqlite"


def test_the_package_is_typed() -> None:
    assert (pathlib.Path(toolswap.__file__).parent / "py.typed").is_file()


#: The whole public API of ``import toolswap``, on purpose: adding or dropping a
#: name is a decision made here, in review, not a side effect of an import.
PUBLIC_API = frozenset(
    {
        # the objects of the design (docs/design.md section 7a)
        "ArtifactCleanupPolicy",
        "ArtifactMemoryReference",
        "ArtifactReference",
        "ArtifactReferenceCensus",
        "ArtifactReferenceOwner",
        "ArtifactRetentionClaim",
        "ArtifactRetentionJournal",
        "ArtifactSource",
        "CleanupPlan",
        "CleanupReport",
        "ExternalizationResult",
        "OwnerObservation",
        "ReconciliationReport",
        "Recovery",
        "SessionPaths",
        "SourceId",
        "ToolResultExternalizer",
        "Transaction",
        # one vocabulary
        "ObservedState",
        "LeaseNote",
        "LeaseState",
        "ReconcileStatus",
        # reading
        "ArtifactInfo",
        "DEFAULT_PAGE_BYTES",
        "DEFAULT_PAGE_LINES",
        "GrepMatch",
        "GrepResult",
        "Page",
        "render_grep",
        "render_listing",
        "render_page",
        # the file-system seam
        "FileFacts",
        "FileSystem",
        "OsFileSystem",
        "REAL_FS",
        # functions
        "apply_cleanup",
        "cleanup_session",
        "format_source_id",
        "owner_publisher",
        "owner_remover",
        "parse_source_id",
        "plan_cleanup",
        "session_journal",
        # errors, split by blame (toolswap.errors)
        "ToolswapError",
        "UsageError",
        "InvalidSourceId",
        "InvalidPattern",
        "InvalidSummary",
        "InvalidThreshold",
        "TransactionExistsError",
        "UnknownTransactionError",
        "IllegalTransitionError",
        "DanglingReferenceError",
        "ForeignClaimError",
        "HostilePlanError",
        "JournalRequiredError",
        "ClaimsRequiredError",
        "CommandStartError",
        "FailpointError",
        "CorruptStateError",
        "ArtifactIntegrityError",
        "ArtifactNotOwnedError",
        "JournalCorruptError",
        "OwnerConflictError",
        "CleanupRefused",
        "EnvironmentFailure",
        "ArtifactWriteError",
        "OwnerStoreError",
        "JournalWriteError",
        "ArtifactPublicationRejected",
    }
)

#: Errors of the conformance kit: exported by ``toolswap.testing``, not the core.
KIT_ERRORS = frozenset({"HarnessError", "ChildError"})


def test_the_public_api_is_exactly_the_agreed_names() -> None:
    exported = set(toolswap.__all__)
    assert not PUBLIC_API - exported, f"missing: {sorted(PUBLIC_API - exported)}"
    assert not exported - PUBLIC_API, f"extra: {sorted(exported - PUBLIC_API)}"


@pytest.mark.parametrize("name", sorted(PUBLIC_API))
def test_every_public_name_imports_from_the_package(name: str) -> None:
    namespace: dict[str, object] = {}
    exec(f"from toolswap import {name}", namespace)
    assert namespace[name] is getattr(toolswap, name)


def test_every_core_error_is_exported_and_every_kit_error_is_the_kits() -> None:
    import toolswap.errors
    import toolswap.testing

    errors = set(toolswap.errors.__all__)
    assert errors - KIT_ERRORS <= PUBLIC_API
    for name in KIT_ERRORS:
        assert name in errors
        assert getattr(toolswap.testing, name) is getattr(toolswap.errors, name)


def _toolswap_modules() -> list[str]:
    import pkgutil

    names = []
    for info in pkgutil.walk_packages(toolswap.__path__, "toolswap."):
        if info.name.startswith(("toolswap.spec", "toolswap.faultinject")):
            continue  # the spec names its own errors; fault injection raises none on purpose
        if info.name.endswith("__main__"):
            continue  # importing it runs the command line
        names.append(info.name)
    return names


@pytest.mark.parametrize("module", _toolswap_modules())
def test_every_error_class_is_defined_in_toolswap_errors(module: str) -> None:
    if module in {"toolswap.mcp_server", "toolswap.mcp_workers"}:
        pytest.importorskip("mcp")  # the extra brings the SDK and anyio
    imported = importlib.import_module(module)
    strays = [
        name
        for name, value in vars(imported).items()
        if isinstance(value, type)
        and issubclass(value, toolswap.ToolswapError)
        and value.__module__ != "toolswap.errors"
    ]
    assert strays == [], f"{module} defines {strays}: move them to toolswap/errors.py"
