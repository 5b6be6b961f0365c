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
