"""The owner conformance kit: put any owner adapter through every promise it makes.

An adapter author writes a small :class:`OwnerHarness` (how to open a new
handle on the same store; optionally how to restart the store, where the
store calls consult a :class:`FaultPlan`, how to advance the store's clock,
whether a handle may be shared by threads, which secrets must never show, and
which capabilities it lacks and why), then runs the kit:

* ``toolswap conformance mypkg.harness:Harness`` (a compliance table,
  ``--json``, ``--junit FILE``, ``--markdown FILE``, ``--repeat N``,
  ``--check ID``, ``--exclude ID``, ``--seed N``, ``--examples N``,
  ``--budget S``, ``--check-timeout S``, ``--slow``, ``--failures DIR``,
  ``--replay FILE``);
* ``pytest --toolswap-owner mypkg.harness:Harness``, or a test class that
  subclasses :class:`OwnerConformanceTests` (the pytest plugin), which also
  collects committed replay files;
* :func:`run_conformance` from Python, with :class:`RunOptions`.

Every check probes one sentence of the owner promises (O1-O9 in
:mod:`toolswap.owner`), of the generation terms or of the reconciliation
table, through the protocol only, and has a stable id (``--list`` shows them).
Each runs fixed examples, then cases drawn from the whole domain the protocol
allows (:mod:`toolswap.testing.cases`, :mod:`toolswap.testing.generate`).
``docs/owner-adapters.md`` is the guide.

Hypothesis is an optional dependency: it is imported only where drawn
examples and the model-based machines run; without it the fixed examples run.
"""

from __future__ import annotations

from ..errors import ChildError
from .faults import FaultPlan
from .harness import Capability, HarnessError, OwnerHarness, StoreFault, load_harness
from .options import RunOptions
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
    "FaultPlan",
    "HarnessError",
    "OwnerHarness",
    "RunOptions",
    "StoreFault",
    "checks_named",
    "load_harness",
    "run_conformance",
]
