"""docs/where-things-live.md names files and tables that exist (the map cannot drift)."""

from __future__ import annotations

import importlib
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
MAP = (ROOT / "docs" / "where-things-live.md").read_text(encoding="utf-8")
PATHS = sorted(set(re.findall(r"`((?:spec|src|faultinject|tests|docs)/[\w/.-]+)`", MAP)))
TABLES = sorted(set(re.findall(r"`([A-Z][A-Z_]{4,})`", MAP)))
SPEC_MODULES = ("lease", "owner", "reconcile", "cleanup", "invariants", "system", "variants")


@pytest.mark.parametrize("path", PATHS)
def test_every_path_the_map_names_exists(path: str) -> None:
    assert (ROOT / path.rstrip("/")).exists(), path


@pytest.mark.parametrize("name", TABLES)
def test_every_table_the_map_names_is_defined_in_the_spec(name: str) -> None:
    owners = [
        m for m in SPEC_MODULES if hasattr(importlib.import_module(f"toolswap.spec.{m}"), name)
    ]
    assert owners, f"{name} is not a table of toolswap.spec"


def test_the_map_names_every_spec_table_the_implementation_reads() -> None:
    decisions = (ROOT / "src" / "toolswap" / "decisions.py").read_text(encoding="utf-8")
    read = set(re.findall(r"_(?:lease|reconcile|cleanup)\.([A-Z][A-Z_]{4,})", decisions))
    assert read and read <= set(TABLES), sorted(read - set(TABLES))
