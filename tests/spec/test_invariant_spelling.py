"""Each invariant is spelt once: by its ``Invariant`` member (issue 17, item 2).

The handle ("S1"), the full name ("S1 no dangling reference") and a refinement
("S1.fail_closed") are all produced by the member, and read back by
``Invariant.of``; no code of the package writes one of them as a literal.
"""

from __future__ import annotations

import ast
import pathlib
import re

import pytest
from toolswap.spec.invariants import INVARIANT_NAMES, S1_FAIL_CLOSED, S3_BURIED, Invariant

ROOT = pathlib.Path(__file__).resolve().parents[2]
DESIGN = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")


def test_the_full_names_are_the_ones_the_design_gives() -> None:
    for invariant in Invariant:
        assert f"- **{invariant.full}" in DESIGN, invariant.full
    assert tuple(i.full for i in Invariant) == INVARIANT_NAMES


@pytest.mark.parametrize("invariant", list(Invariant))
def test_every_spelling_reads_back_as_its_member(invariant: Invariant) -> None:
    for spelling in (invariant.value, invariant.full, invariant.refined("clause")):
        assert Invariant.of(spelling) is invariant


@pytest.mark.parametrize(
    "spelling", ["S8", "s1", "S1 no dangling", "S2 no dangling reference", "", "X1.y"]
)
def test_a_misspelt_invariant_is_refused(spelling: str) -> None:
    with pytest.raises(ValueError):
        Invariant.of(spelling)


def test_a_refinement_counts_as_its_invariant_and_no_other() -> None:
    assert Invariant.S1.covers(S1_FAIL_CLOSED) and Invariant.S3.covers(S3_BURIED)
    assert Invariant.S1.covers("S1") and not Invariant.S1.covers("S1x")
    assert not Invariant.S1.covers(S3_BURIED)


_SPELLING = re.compile(r"(S[1-7]|L1)(\.\w+| [a-z][a-z -]*)?")


def _literals(path: pathlib.Path, base: pathlib.Path = ROOT) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        f"{path.relative_to(base)}:{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and _SPELLING.fullmatch(node.value)
    ]


def test_no_code_writes_an_invariant_as_a_literal() -> None:
    found = [
        hit
        for folder in ("src/toolswap", "spec", "faultinject")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path != ROOT / "spec" / "invariants.py"  # where the members are defined
        for hit in _literals(path)
    ]
    assert found == []


def test_the_literal_scan_finds_a_literal(tmp_path: pathlib.Path) -> None:
    # the scan itself can fail: a planted literal is found, a docstring is not
    planted = tmp_path / "planted.py"
    planted.write_text('"""S1 no dangling reference."""\nX = ("S6.reuse", "S1")\n')
    hits = _literals(planted, tmp_path)
    assert [h.split(": ", 1)[1] for h in hits] == ["'S6.reuse'", "'S1'"]
