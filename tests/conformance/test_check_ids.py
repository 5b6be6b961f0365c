"""Check ids are stable: a retired id can never be registered again (registry rule 1)."""

from __future__ import annotations

import pytest

from toolswap.testing import registry


def test_a_retired_check_id_cannot_be_registered_again() -> None:
    retired = next(iter(registry.RETIRED_IDS))
    with pytest.raises(ValueError, match="retired"):
        registry.check(retired, "any promise")


def test_no_registered_check_uses_a_retired_id() -> None:
    registered = {c.id for c in registry.checks_named(None)}
    assert registered, "the kit registered no checks"
    assert not registered & set(registry.RETIRED_IDS)
