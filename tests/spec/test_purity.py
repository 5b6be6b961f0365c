"""``spec/`` is pure: an AST scan of every module's imports and calls.

No ``os``, no files, no clock, no randomness: the explorer's clock is an
argument, and writing SPEC.md is the CLI's job.
"""

from __future__ import annotations

import ast
import pathlib

import pytest
import toolswap.spec

SPEC_DIR = pathlib.Path(toolswap.spec.__file__).parent
MODULES = sorted(SPEC_DIR.glob("*.py"))

ALLOWED = frozenset(
    {
        "__future__",
        "attrs",
        "enum",
        "collections.abc",
        "typing",
        "types",
        "dataclasses",
        "functools",
        "itertools",
    }
)
FORBIDDEN_CALLS = frozenset(
    {"open", "print", "input", "exec", "eval", "compile", "__import__", "breakpoint"}
)


def impure_imports(source: str) -> list[str]:
    """Absolute imports outside :data:`ALLOWED` (relative imports stay inside spec/)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend(a.name for a in node.names if a.name not in ALLOWED)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module not in ALLOWED:
            found.append(str(node.module))
    return found


def impure_calls(source: str) -> list[str]:
    return [
        node.func.id
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in FORBIDDEN_CALLS
    ]


def test_the_scan_sees_every_spec_module() -> None:
    names = {p.stem for p in MODULES}
    assert {"lease", "owner", "reconcile", "cleanup", "system", "explorer", "variants"} <= names


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_a_spec_module_imports_only_pure_modules(path: pathlib.Path) -> None:
    assert impure_imports(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_a_spec_module_calls_no_io_builtin(path: pathlib.Path) -> None:
    assert impure_calls(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(
    "source",
    [
        "import os",
        "import time",
        "import random as r",
        "from os import path",
        "from datetime import datetime",
        "import os.path",
        "import pathlib",
    ],
)
def test_the_scan_flags_an_impure_import(source: str) -> None:
    assert impure_imports(source)


@pytest.mark.parametrize("source", ["open('x')", "print(1)", "eval('1')"])
def test_the_scan_flags_an_io_call(source: str) -> None:
    assert impure_calls(source)


def test_the_scan_lets_relative_and_allowed_imports_through() -> None:
    assert impure_imports("from . import lease\nfrom .errors import X\nimport enum") == []
