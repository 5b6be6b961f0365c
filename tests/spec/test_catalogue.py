"""The catalogue of mistakes is the one place that says which invariant catches each one."""

from __future__ import annotations

import pytest
from toolswap.spec import catalogue, variants
from toolswap.spec.invariants import INVARIANT_NAMES


def test_every_variant_has_its_entry_with_the_same_invariant() -> None:
    for v in variants.VARIANTS.values():
        entry = catalogue.entry(v.name)
        assert entry is not None and entry.model, v.name
        assert entry.invariant == v.expected, v.name


def test_every_entry_shown_in_the_model_has_a_variant() -> None:
    model = {e.name for e in catalogue.CATALOGUE.values() if e.model}
    assert model == set(variants.VARIANTS)


def test_every_entry_names_an_invariant_by_its_one_spelling() -> None:
    assert {e.invariant for e in catalogue.CATALOGUE.values()} <= set(INVARIANT_NAMES)


def test_a_variant_that_disagrees_with_its_entry_is_refused() -> None:
    with pytest.raises(ValueError, match="the catalogue says 'S3 tombstone before abort'"):
        catalogue.check_agrees("abort-before-tombstone", "S1 no dangling reference", "model")


def test_a_mistake_missing_from_the_catalogue_is_refused() -> None:
    with pytest.raises(ValueError, match="not in the catalogue"):
        catalogue.check_agrees("forgot-to-catalogue", "S1", "code")


def test_a_mistake_listed_only_for_the_model_is_refused_as_a_mutant() -> None:
    with pytest.raises(ValueError, match="as shown in code"):
        catalogue.check_agrees("not-found-is-absent", "S3", "code")


def test_an_entry_shown_nowhere_is_refused() -> None:
    with pytest.raises(ValueError, match="shown nowhere"):
        catalogue.Entry("ghost", "S1 no dangling reference")


def test_the_short_handle_is_the_invariants_first_word() -> None:
    assert catalogue.CATALOGUE["gc-skips-name-denial"].short == "L1"
