"""The whole conformance kit passes on the etcd owner, on a real three-member cluster.

Every check runs but the power-cut ones (the members' data directories are not
the kit's to cut): the other-process, restart and fault-plan checks included.
CI starts the cluster (``.ci/etcd-cluster start``); without it these tests skip
locally and fail under CI (``tests/_etcd.py``).  The checks restart the whole
cluster, so nothing else may use it meanwhile: pytest runs a file's tests one
after another.

Broken owners, each missing one compare, show that the fence, the census key
and the seal's compare-and-set are what the promises rest on: each passes a
plain check and fails the one that matters.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests._etcd import require_endpoints
from toolswap.owners.etcd import RESTART_ENV, EtcdHarness, EtcdOwner, _Txn
from toolswap.testing import checks_named, run_conformance
from toolswap.testing.checks_powerloss import POWER_LOSS_CHECKS
from toolswap.testing.options import RunOptions

pytestmark = pytest.mark.etcd

_POWER = (*POWER_LOSS_CHECKS, "DEEP.crash-explorer-power-cuts")


def test_every_check_passes_on_the_etcd_owner(tmp_path: Path) -> None:
    require_endpoints()
    if not os.environ.get(RESTART_ENV):
        pytest.skip(f"{RESTART_ENV} is unset: the restart checks would be skipped")
    options = RunOptions(examples=1, budget=0.5, seed=0, model_budget=0.0, check_timeout=600.0)
    report = run_conformance(EtcdHarness, workroot=tmp_path, options=options)
    assert [(r.check_id, r.message) for r in report.failed] == []
    skipped = {r.check_id: r.message for r in report.results if r.outcome == "skip"}
    assert all(check_id.startswith(_POWER) for check_id in skipped), skipped
    assert len(report.results) == len(checks_named(None))


class _BrokenOwner(EtcdOwner):
    """Broken on purpose: one step's transaction loses some of its compares."""

    step: ClassVar[str] = ""
    keep: ClassVar[Callable[[list[dict[str, object]]], list[dict[str, object]]]]

    def _txn(self, doing: str, compare: list[dict[str, object]], *rest: Any) -> _Txn:
        if doing == self.step:
            compare = type(self).keep(compare)
        return super()._txn(doing, compare, *rest)


def _broken_harness(step: str, keep: Callable[[list[Any]], list[Any]]) -> type[EtcdHarness]:
    owner = type("_Broken", (_BrokenOwner,), {"step": step, "keep": staticmethod(keep)})
    return type("_BrokenHarness", (EtcdHarness,), {"owner_class": owner})


# (what is broken, the step, the compares it keeps, a check it still passes, the check
# that must catch it).  publish compares [fence, census key, record] in that order.
_BROKEN = [
    (
        "publish ignores the id's fence",
        "publishing a reference",
        lambda c: c[1:],
        "O1.publish-visible-to-next-fence",
        "O5.fence-holds-back-publish-thread",
    ),
    (
        "publish ignores the census",
        "publishing a reference",
        lambda c: [c[0], c[2]],
        "O1.publish-visible-to-next-fence",
        "O9.census-holds-back-a-publish-naming-it",
    ),
    (
        "remove ignores the fence",
        "removing a reference",
        lambda c: [],
        "O4.remove-hides-reference",
        "O5.fence-holds-back-remove-thread",
    ),
    (
        "the seal compares nothing",
        "sealing an absence",
        lambda c: [],
        "O6.seal-fresh-absence",
        "O6.seal-is-compare-and-set",
    ),
]


@pytest.mark.parametrize(
    ("step", "keep", "passes", "fails"), [case[1:] for case in _BROKEN], ids=[c[0] for c in _BROKEN]
)
def test_the_kit_catches_an_owner_that_drops_a_compare(
    step: str, keep: Callable[[list[Any]], list[Any]], passes: str, fails: str, tmp_path: Path
) -> None:
    require_endpoints()
    options = RunOptions(examples=0, seed=0, model_budget=0.0, check_timeout=300.0)
    harness = _broken_harness(step, keep)
    report = run_conformance(harness, workroot=tmp_path, checks=[passes, fails], options=options)
    assert {r.check_id: r.outcome for r in report.results} == {passes: "pass", fails: "fail"}


def test_the_command_line_runs_the_harness_and_names_no_endpoint(tmp_path: Path) -> None:
    endpoints = require_endpoints()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolswap.cli",
            "conformance",
            "toolswap.owners.etcd:EtcdHarness",
            "--check",
            "O7",
            "--json",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    assert doc["harness"] == "toolswap.owners.etcd:EtcdHarness"
    assert {r["outcome"] for r in doc["results"]} == {"pass"}
    for endpoint in endpoints.split(","):
        assert endpoint.split("://")[-1] not in done.stdout + done.stderr
