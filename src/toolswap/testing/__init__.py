"""The owner conformance kit (filled in below)."""

from __future__ import annotations

from .harness import Capability, HarnessError, OwnerHarness, StoreFault, load_harness

__all__ = ["Capability", "HarnessError", "OwnerHarness", "StoreFault", "load_harness"]
