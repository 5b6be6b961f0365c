"""Every mutant of the real code has its catalogue entry, and takes its invariant from it."""

from __future__ import annotations

import attrs
import pytest
from toolswap.faultinject.mutants import MUTANTS
from toolswap.spec import catalogue
from toolswap.spec.invariants import Invariant


def test_every_mutant_has_its_entry_and_reads_its_invariant() -> None:
    for m in MUTANTS:
        entry = catalogue.entry(m.label)
        assert entry is not None and entry.code, m.label
        assert m.invariant is entry.invariant, m.label


def test_every_entry_shown_in_code_has_a_mutant() -> None:
    code = {e.name for e in catalogue.CATALOGUE.values() if e.code}
    assert code == {m.label for m in MUTANTS}


def test_a_mutant_follows_its_entry_when_the_entry_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The mutant states no invariant of its own: change the entry, and it follows.
    mutant = MUTANTS[0]
    rows = dict(catalogue.CATALOGUE)
    other = Invariant.S5 if mutant.invariant is not Invariant.S5 else Invariant.S4
    rows[mutant.label] = attrs.evolve(rows[mutant.label], invariant=other)
    monkeypatch.setattr(catalogue, "CATALOGUE", rows)
    assert mutant.invariant is other
