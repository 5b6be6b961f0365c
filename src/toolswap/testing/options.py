"""How hard a conformance run tries: examples, time budgets, seed, real waits, replay files.

One :class:`RunOptions` is shared by every front end (the command, the pytest
plugin, :func:`~toolswap.testing.run_conformance`), so they give the same
verdicts for the same options.
"""

from __future__ import annotations

import os
import random

import attrs

__all__ = ["CHECK", "CHECK_TIMEOUT_SECONDS", "FULL", "QUICK", "RunOptions", "default_seed"]

CHECK_TIMEOUT_SECONDS = 120.0


def default_seed() -> int:
    """A fixed seed under CI (derandomized, like the project's ``ci`` profile), else a new one."""
    if os.environ.get("CI"):
        return 0
    return random.SystemRandom().randrange(2**32)


@attrs.frozen(kw_only=True)
class RunOptions:
    """Every knob of a run; the defaults are a full run (``--quick`` is :data:`QUICK`).

    * ``examples``: generated examples per sentence check, on top of its fixed
      examples (0: fixed examples only); the model machine runs ten times as many.
    * ``budget``: seconds one sentence check may spend, its fixed examples
      included, before it stops drawing new examples (a failure is still shrunk).
    * ``seed``: the seed of every generated example (``None``: :func:`default_seed`).
    * ``check_timeout``: seconds after which a check (or the harness's preflight)
      that has not finished fails with one line.
    * ``slow``: checks that need time to pass may wait for real when the harness
      has no clock to advance.
    * ``failures``: a folder for one replay file per failing check.
    * ``shrink_seconds``: how long a failing example may be shrunk.
    * ``model_budget``: seconds the model machine keeps starting new rounds.
    """

    examples: int = 25
    budget: float = 0.4
    seed: int | None = None
    check_timeout: float = CHECK_TIMEOUT_SECONDS
    slow: bool = False
    failures: str | None = None
    shrink_seconds: float = 20.0
    model_budget: float = 6.0
    fixed: tuple[str, ...] = ("plain", "edge")
    """The fixed examples run before the drawn ones (the kit's own tests narrow them)."""

    def __attrs_post_init__(self) -> None:
        if self.examples < 0:
            raise ValueError("examples must be at least 0")
        if self.budget < 0 or self.check_timeout <= 0:
            raise ValueError("the budget must be at least 0 and the check timeout positive")

    def seeded(self) -> RunOptions:
        """These options with the seed fixed (a run reports the seed it used)."""
        if self.seed is not None:
            return self
        return attrs.evolve(self, seed=default_seed())


FULL = RunOptions()
"""The command's defaults: every fixed example, then drawn ones for up to 0.4 s a check."""
QUICK = RunOptions(examples=0, budget=0.0, model_budget=0.0, fixed=("plain",))
"""``--quick``: a smoke test -- the plain fixed example of every sentence check, nothing drawn."""
CHECK = RunOptions(examples=5, budget=0.25, model_budget=2.0)
"""What ``toolswap check`` gives the conformance kit: every check, a few drawn examples."""
