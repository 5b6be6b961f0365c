"""The protocol machine: the real implementation on the simulated disk vs the spec model.

The machine itself ships in the package
(:mod:`toolswap.faultinject.crashing_machine`, rules in
:mod:`toolswap.faultinject.protocol_machine`); this runs it with the built-in
crashable owner.  ``tests/stateful/test_machine_any_owner.py`` runs it with the
reference harnesses' owners.
"""

from __future__ import annotations

from hypothesis import settings
from toolswap.faultinject.crashing_machine import (
    CRASH_POINTS,
    T0,
    CrashingMachine,
    SimulatedDiskMachine,
)
from toolswap.faultinject.protocol_machine import MACHINE_EXAMPLES

__all__ = ["CRASH_POINTS", "T0", "CrashingMachine", "SimulatedDiskMachine"]

TestProtocolMachine = CrashingMachine.TestCase
# At least MACHINE_EXAMPLES examples (the ci profile's 60 leave the crash rules thin;
# the whole of tests/stateful still runs in well under a minute); deep keeps its 2000.
TestProtocolMachine.settings = settings(
    TestProtocolMachine.settings, max_examples=max(MACHINE_EXAMPLES, settings.default.max_examples)
)
