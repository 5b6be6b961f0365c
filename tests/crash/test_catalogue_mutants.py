"""Every mutant of the real code has its catalogue entry, with the same invariant."""

from __future__ import annotations

from toolswap.faultinject.mutants import MUTANTS
from toolswap.spec import catalogue


def test_every_mutant_has_its_entry_with_the_same_invariant() -> None:
    for m in MUTANTS:
        entry = catalogue.entry(m.label)
        assert entry is not None and entry.code, m.label
        assert entry.short == m.invariant, m.label


def test_every_entry_shown_in_code_has_a_mutant() -> None:
    code = {e.name for e in catalogue.CATALOGUE.values() if e.code}
    assert code == {m.label for m in MUTANTS}
