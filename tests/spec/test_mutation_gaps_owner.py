"""Mutation gaps in spec/owner.py: what an illegal transition reports.

tests/spec/test_owner.py checks that sealing a PUBLISHED id raises; the
implementation maps the error onto its own hierarchy by the refused pair and
the machine's name, so those are part of the spec's answer too
(docs/mutation.md, ``owner.x_apply_5/10``).
"""

from __future__ import annotations

import pytest
from toolswap.spec import owner
from toolswap.spec.errors import IllegalTransition
from toolswap.spec.owner import OwnerAction, OwnerRecord, OwnerState


def test_sealing_a_published_id_names_the_owner_machine_and_the_refused_pair() -> None:
    with pytest.raises(IllegalTransition) as raised:
        owner.apply(OwnerRecord(OwnerState.PUBLISHED, 1, 5), OwnerAction.SEAL)
    error = raised.value
    assert (error.machine, error.state, error.action) == (
        "owner",
        OwnerState.PUBLISHED,
        OwnerAction.SEAL,
    )
    assert str(error) == "owner: no transition from PUBLISHED on SEAL"


@pytest.mark.parametrize(("a", "b"), [(False, False), (False, True), (True, False), (True, True)])
def test_implies_is_false_only_when_a_holds_and_b_does_not(a: bool, b: bool) -> None:
    # The contracts of apply and seal are written with it (issue 39: only CrossHair read it).
    assert owner.implies(a, b) is (not a or b)
