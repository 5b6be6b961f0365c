"""Mutation gaps in spec/reconcile.py (issue 39, docs/mutation.md).

``ReconcileStatus.is_pending`` is a property (decorated, so mutmut never
mutates it) that no other code of the repository reads: our own operators
found that ``return None`` there survives every test.  It is part of the
spec's vocabulary for reports, so what it says is pinned here.
"""

from __future__ import annotations

import pytest
from toolswap.spec import reconcile
from toolswap.spec.reconcile import ReconcileStatus as St

PENDING = {St.PENDING_CONFLICT, St.PENDING_UNKNOWN, St.PENDING_STALE}


@pytest.mark.parametrize("status", list(St), ids=str)
def test_a_status_is_pending_exactly_when_the_lease_stays_prepared(status: St) -> None:
    assert status.is_pending is (status in PENDING)


@pytest.mark.parametrize(("a", "b"), [(False, False), (False, True), (True, False), (True, True)])
def test_implies_is_false_only_when_a_holds_and_b_does_not(a: bool, b: bool) -> None:
    # The contracts of classify_observation, decide and after_seal are written with it.
    assert reconcile.implies(a, b) is (not a or b)
