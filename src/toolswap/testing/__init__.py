"""The owner conformance kit: put any owner adapter through every promise it makes.

An adapter author writes a small :class:`OwnerHarness` (how to open a new
handle on the same store; optionally how to restart the store, inject a store
fault, which secrets must never show, and which capabilities it lacks and
why), then runs the kit:

* ``toolswap conformance mypkg.harness:Harness`` (a compliance table,
  ``--json``, ``--junit FILE``, ``--markdown FILE``, ``--repeat N``,
  ``--check ID``);
* ``pytest --toolswap-owner mypkg.harness:Harness``, or a test class that
  subclasses :class:`OwnerConformanceTests` (the pytest plugin);
* :func:`run_conformance` from Python.

Every check probes one sentence of the owner promises (O1-O8 in
:mod:`toolswap.owner`), of the generation terms or of the reconciliation
table, through the protocol only, and has a stable id (``--list`` shows them).
``docs/owner-adapters.md`` is the guide.

Hypothesis is imported only by the model-based machine, when it runs.
"""

from __future__ import annotations

from ..errors import ChildError
from .harness import Capability, HarnessError, OwnerHarness, StoreFault, load_harness
from .registry import Check, CheckFailed, CheckSkipped, checks_named
from .runner import CheckResult, ConformanceReport, run_conformance

__all__ = [
    "Capability",
    "Check",
    "CheckFailed",
    "CheckResult",
    "CheckSkipped",
    "ChildError",
    "ConformanceReport",
    "HarnessError",
    "OwnerHarness",
    "StoreFault",
    "checks_named",
    "load_harness",
    "run_conformance",
]
