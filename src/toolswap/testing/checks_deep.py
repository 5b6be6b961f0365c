"""The deep harnesses as checks: the model-based owner machine and the two protocol explorers.

They take longer than a sentence check (seconds, not milliseconds) and are run
last.  Each builds its own stores from the harness, one per example or crash
state, under the check's work folder.
"""

from __future__ import annotations

import os
import time

from .bench import Bench, expect
from .registry import CheckFailed, CheckSkipped, check

__all__: list[str] = []

_ROUND_EXAMPLES = 30
_NO_HYPOTHESIS = "needs Hypothesis, which is not installed: pip install 'toolswap[testing]'"


@check(
    "MODEL.owner-machine",
    "every observation of several handles (publish, remove, fence, seal, reopen, restart, "
    "faults) agrees with the spec's owner model",
    slow=True,
)
def _owner_machine(bench: Bench) -> str:
    """Rounds of 30 examples, each with its own seed, until the model budget is spent.

    A failing round reports its seed: ``--seed`` with it reruns that round first.
    """
    try:
        from .machine import run_owner_machine
    except ImportError:
        raise CheckSkipped(_NO_HYPOTHESIS) from None
    options = bench.options
    assert options.seed is not None
    started = time.perf_counter()
    examples, rounds = 0, 0
    while True:
        seed = (options.seed + rounds) % 2**32
        result = run_owner_machine(
            bench.harness_cls,
            os.path.join(bench.workdir, "machine"),
            max_examples=_ROUND_EXAMPLES,
            seed=seed,
        )
        rounds += 1
        if not result.passed:
            text = f"{result.summary} (round {rounds}, seed {seed})\n{result.failure or ''}"
            raise CheckFailed(bench.redact(text.strip()))
        examples += _ROUND_EXAMPLES
        if time.perf_counter() - started >= options.model_budget:
            break
    return (
        f"owner machine on {bench.harness_cls.__name__}: passed {examples} examples "
        f"({rounds} seeded rounds) in {time.perf_counter() - started:.1f} s"
    )


@check(
    "DEEP.crash-explorer",
    "the crash explorer's scenarios, crashed at every crash point with this owner, keep S1-S7",
    slow=True,
)
def _crash_explorer(bench: Bench) -> str:
    from .deep import crash_explore_harness

    result = crash_explore_harness(bench.harness_cls, os.path.join(bench.workdir, "crash"))
    expect(result.passed, bench.redact("; ".join((result.summary, *result.details[:3]))))
    return str(result.summary)


@check(
    "DEEP.protocol-machine",
    "the implementation-vs-model machine (journal, artifacts, cleanup) with this owner agrees "
    "with the spec",
    slow=True,
)
def _protocol_machine(bench: Bench) -> str:
    try:
        import hypothesis  # noqa: F401
    except ImportError:
        raise CheckSkipped(_NO_HYPOTHESIS) from None
    from .deep import run_protocol_machine

    result = run_protocol_machine(bench.harness_cls, os.path.join(bench.workdir, "protocol"))
    expect(result.passed, bench.redact("; ".join((result.summary, *result.details[:3]))))
    return str(result.summary)
