"""Mutation gaps in spec/variants.py: a variant's fault names and the bounds it is explored under.

The catalogue's rows are built at import time, which mutmut does not see
(docs/mutation.md, spec/); each test here builds or uses a variant at run time.
"""

from __future__ import annotations

import pytest
from toolswap.spec import variants
from toolswap.spec.system import Bounds, Mistake
from toolswap.spec.variants import Variant


def _variant(*faults: str) -> Variant:
    return Variant("release-before-remove", Mistake.RELEASE_BEFORE_REMOVE, "", faults)


def test_a_variant_accepts_a_boolean_fault_and_refuses_a_numeric_bound() -> None:
    assert _variant("lease_expiry").faults == ("lease_expiry",)
    with pytest.raises(ValueError, match="unknown fault 'max_generation'"):
        _variant("max_generation")


def test_a_variants_model_is_explored_under_the_bounds_it_is_given() -> None:
    variant = variants.get("release-before-remove")
    assert variant.model(Bounds(artifacts=1)).bounds.artifacts == 1
