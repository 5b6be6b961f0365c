"""The crash explorer with the owner's power cut at its crash states (a DEEP check).

The crash explorer crashes toolswap's own I/O on a simulated disk, and a crash of
the owner closes its handles and restarts its store.  Here every store lives on
one forgetful mount, and the owner's crash is a power cut of that mount, so
what the owner had not fsynced is gone when the journal recovers and
reconciles against it.

Rules
=====

1. A cut costs about a second (a remount, a restart of the store), so the
   explorer runs a seeded sample: a few scenarios, one crash point (or the end)
   of each, crashed in ``drop`` mode, no crash of the recovery.
2. Each crash state's store gets its own durable folder on the mount.  A cut
   also drops the unsynced work of stores already closed; nothing reads them
   again.
3. The owner's crash cuts first and drops the kit's handle after it (closing it
   then reaches no disk), calls ``restart_after_power_cut()``, and opens a new
   handle.
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Sequence
from typing import Any

import attrs

from ..faultinject.disk import Chooser
from ..faultinject.explorer import STANDARD_SCENARIOS, CrashExplorer, Scenario, Target
from ..faultinject.owner_source import HarnessSource
from ..faultinject.powerloss import ForgetfulMount
from .harness import OwnerHarness

__all__ = ["PowerCutExploration", "explore_with_power_cuts"]


@attrs.frozen(kw_only=True)
class PowerCutExploration:
    """What the sampled exploration found: problems (violations and progress findings)."""

    states: int
    scenarios: tuple[str, ...]
    problems: tuple[str, ...]
    skipped: tuple[str, ...]


class _PowerCutSource(HarnessSource):
    """A harness source on the mount whose crash is a power cut (rule 3)."""

    def __init__(self, harness_cls: type[OwnerHarness], workdir: str, mount: ForgetfulMount):
        self._mount = mount
        super().__init__(harness_cls, workdir)

    def crash(self, choices: Chooser | int = 0) -> None:
        self._armed.clear()
        self._dirty = False
        dead = self._handle
        self._mount.power_cut("drop", 0)
        with contextlib.suppress(Exception):
            self.harness.close_owner(dead)
        self.harness.restart_after_power_cut()
        self._handle = self.harness.open_owner()


class _OneTargetEach(CrashExplorer):
    """The crash explorer on one seeded target of each scenario (rule 1)."""

    def __init__(self, scenarios: Sequence[Scenario], draw: random.Random, **options: Any):
        super().__init__(scenarios, **options)
        self._draw = draw

    def targets(self, scenario: Scenario) -> list[Target]:
        found = super().targets(scenario)
        return [self._draw.choice(found)] if found else []


def explore_with_power_cuts(
    harness_cls: type[OwnerHarness],
    mount: ForgetfulMount,
    durable_folder: Any,
    *,
    seed: int,
    scenarios: int,
) -> PowerCutExploration:
    """Explore ``scenarios`` seeded scenarios, one crash state each, cutting the owner's power."""
    draw = random.Random(f"power cuts {seed}")
    chosen = draw.sample(list(STANDARD_SCENARIOS), scenarios)
    made = iter(range(1 << 30))

    def source() -> HarnessSource:
        workdir = os.path.join(mount.path, "crash", f"store-{next(made):06d}")
        durable_folder(workdir, mount.path)
        return _PowerCutSource(harness_cls, workdir, mount)

    explorer = _OneTargetEach(
        chosen,
        draw,
        modes=("drop",),
        recovery_crashes=0,
        owner=source,
        target_kinds=("point", "end"),
    )
    result = explorer.explore()
    return PowerCutExploration(
        states=result.states,
        scenarios=tuple(s.name for s in chosen),
        problems=tuple(
            f"{v.invariant} in {v.scenario} at {v.target}: {v.detail}"
            for v in (*result.violations, *result.progress)
        ),
        skipped=tuple(sorted(result.skipped)),
    )
