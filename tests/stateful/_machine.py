"""The shared rules of the stateful machines, from the package (where adopters run them too).

The implementation-vs-model machine lives in
:mod:`toolswap.faultinject.protocol_machine` (rules, model, invariants) and
:mod:`toolswap.faultinject.crashing_machine` (the simulated disk and its crash
rules).  The tests of this folder import it from here.
"""

from __future__ import annotations

from toolswap.faultinject.protocol_machine import (
    CONTENTS,
    MACHINE_EXAMPLES,
    OUTSIDE_BYTES,
    PUBLISH_OUTCOMES,
    RECONCILE_ANSWERS,
    REMOVE_OUTCOMES,
    THRESHOLD_BYTES,
    TTLS,
    TXNS,
    Crashed,
    LeaseAction,
    LeaseState,
    Model,
    OwnerRecord,
    OwnerState,
    ProtocolMachine,
    Touch,
    claim_identity,
    identity,
    lease_of,
    machine_with_owner,
    name_of,
)

__all__ = [
    "CONTENTS",
    "MACHINE_EXAMPLES",
    "OUTSIDE_BYTES",
    "PUBLISH_OUTCOMES",
    "RECONCILE_ANSWERS",
    "REMOVE_OUTCOMES",
    "THRESHOLD_BYTES",
    "TTLS",
    "TXNS",
    "Crashed",
    "LeaseAction",
    "LeaseState",
    "Model",
    "OwnerRecord",
    "OwnerState",
    "ProtocolMachine",
    "Touch",
    "claim_identity",
    "identity",
    "lease_of",
    "machine_with_owner",
    "name_of",
]
