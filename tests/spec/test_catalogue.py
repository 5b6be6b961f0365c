"""The catalogue of mistakes is the one place that says which invariant catches each one."""

from __future__ import annotations

import attrs
import pytest
from toolswap.spec import catalogue, variants
from toolswap.spec.invariants import Invariant


def test_every_variant_has_its_entry_and_reads_its_invariant() -> None:
    for v in variants.VARIANTS.values():
        entry = catalogue.entry(v.name)
        assert entry is not None and entry.model, v.name
        assert v.expected is entry.invariant, v.name


def test_every_entry_shown_in_the_model_has_a_variant() -> None:
    model = {e.name for e in catalogue.CATALOGUE.values() if e.model}
    assert model == set(variants.VARIANTS)


def test_every_entry_names_an_invariant_member() -> None:
    assert all(isinstance(e.invariant, Invariant) for e in catalogue.CATALOGUE.values())


def test_a_variant_follows_its_entry_when_the_entry_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The variant states no invariant of its own: change the entry, and it follows.
    name = "abort-before-tombstone"
    rows = dict(catalogue.CATALOGUE)
    rows[name] = attrs.evolve(rows[name], invariant=Invariant.S5)
    monkeypatch.setattr(catalogue, "CATALOGUE", rows)
    assert variants.get(name).expected is Invariant.S5


def test_a_mistake_missing_from_the_catalogue_is_refused() -> None:
    with pytest.raises(ValueError, match="not in the catalogue"):
        catalogue.invariant_of("forgot-to-catalogue", "code")


def test_a_mistake_listed_only_for_the_model_is_refused_as_a_mutant() -> None:
    with pytest.raises(ValueError, match="as shown in code"):
        catalogue.invariant_of("not-found-is-absent", "code")


def test_an_entry_shown_nowhere_is_refused() -> None:
    with pytest.raises(ValueError, match="shown nowhere"):
        catalogue.Entry("ghost", Invariant.S1)


def test_an_entry_naming_an_invariant_by_a_string_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown invariant"):
        catalogue.Entry("ghost", "S1 no dangling reference", model=True)  # type: ignore[arg-type]
