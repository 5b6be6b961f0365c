"""Every mutant of the real code has its catalogue entry, and takes its invariant from it."""

from __future__ import annotations

from toolswap.faultinject.mutants import MUTANTS
from toolswap.spec import catalogue


def test_every_mutant_has_its_entry_and_reads_its_invariant() -> None:
    for m in MUTANTS:
        entry = catalogue.entry(m.label)
        assert entry is not None and entry.code, m.label
        assert m.invariant is entry.invariant, m.label


def test_every_entry_shown_in_code_has_a_mutant() -> None:
    code = {e.name for e in catalogue.CATALOGUE.values() if e.code}
    assert code == {m.label for m in MUTANTS}
