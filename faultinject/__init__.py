"""Fault injection: a simulated disk and crashable owner behind the core seams.

* :class:`SimulatedDisk` -- the file-system seam in memory, with durable vs
  volatile state, crash modes ``drop``/``torn``/``dir_subset``, armed crash
  points and I/O operations, ENOSPC and EIO injection.
* :class:`CrashableOwner` -- the in-memory owner with lost acknowledgements,
  lost tombstones, UNKNOWN answers, writes in flight and owner restarts.
* :class:`OwnerSource` -- where the deep harnesses get their owner: the
  built-in :class:`CrashableSource` or a :class:`HarnessSource` built from an
  adapter's :class:`~toolswap.testing.OwnerHarness`; what the owner holds is
  learned only through its fences (:class:`ProtocolView`), what its calls
  said only at the call sites (:class:`WatchedOwner`).
* :class:`CrashExplorer` -- crashes every scenario at every crash point and
  I/O operation in every mode, recovers, and checks S1-S7 (``toolswap crashcheck``),
  with any owner source.
* :data:`MUTANTS` -- the classic mistakes switched into the real code, each
  with the invariant that must catch it; :func:`kill_matrix` runs them
  (``toolswap crashcheck --mutants``).

The implementation-vs-model machine (:mod:`.protocol_machine`, with its crash
rules in :mod:`.crashing_machine`) imports Hypothesis, so it is not imported
here: import those modules by name.
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
    CrashViolation,
    ExplorationResult,
    Scenario,
    Target,
    World,
    replay,
    run_state,
)
from .mutants import MUTANTS, KillMatrix, Mutant, MutantResult, kill_matrix
from .owner import OWNER_FAULTS, CrashableOwner
from .owner_source import (
    CrashableSource,
    HarnessSource,
    OwnerFaultUnsupported,
    OwnerSource,
    ProtocolView,
    WatchedOwner,
    harness_sources,
    inspect_all,
)

__all__ = [
    "CRASH_MODES",
    "TORN_GRANULARITIES",
    "Chooser",
    "CrashReport",
    "SimulatedCrash",
    "SimulatedDisk",
    "CrashableOwner",
    "OWNER_FAULTS",
    "CrashableSource",
    "HarnessSource",
    "OwnerFaultUnsupported",
    "OwnerSource",
    "ProtocolView",
    "WatchedOwner",
    "harness_sources",
    "inspect_all",
    "CrashExplorer",
    "ExplorationResult",
    "Scenario",
    "Target",
    "CrashViolation",
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
