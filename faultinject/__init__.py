"""Fault injection: a simulated disk and crashable owner behind the core seams.

* :class:`SimulatedDisk` -- the file-system seam in memory, with durable vs
  volatile state, crash modes ``drop``/``torn``/``dir_subset``, armed crash
  points and I/O operations, ENOSPC and EIO injection.
* :class:`CrashableOwner` -- the in-memory owner with lost acknowledgements,
  lost tombstones, UNKNOWN answers, writes in flight and owner restarts.
* :class:`CrashExplorer` -- crashes every scenario at every crash point and
  I/O operation in every mode, recovers, and checks S1-S7 (``toolswap crashcheck``).
* :data:`MUTANTS` -- the classic mistakes switched into the real code, each
  with the invariant that must catch it; :func:`kill_matrix` runs them
  (``toolswap crashcheck --mutants``).
"""

from .disk import (
    CRASH_MODES,
    TORN_GRANULARITIES,
    Chooser,
    CrashReport,
    SimulatedCrash,
    SimulatedDisk,
)
from .explorer import (
    MISUSE_SCENARIOS,
    STANDARD_SCENARIOS,
    CrashExplorer,
    ExplorationResult,
    Scenario,
    Target,
    Violation,
    World,
    replay,
    run_state,
)
from .mutants import MUTANTS, KillMatrix, Mutant, MutantResult, kill_matrix
from .owner import OWNER_FAULTS, CrashableOwner

__all__ = [
    "CRASH_MODES",
    "TORN_GRANULARITIES",
    "Chooser",
    "CrashReport",
    "SimulatedCrash",
    "SimulatedDisk",
    "CrashableOwner",
    "OWNER_FAULTS",
    "CrashExplorer",
    "ExplorationResult",
    "Scenario",
    "Target",
    "Violation",
    "World",
    "STANDARD_SCENARIOS",
    "MISUSE_SCENARIOS",
    "replay",
    "run_state",
    "MUTANTS",
    "Mutant",
    "MutantResult",
    "KillMatrix",
    "kill_matrix",
]
