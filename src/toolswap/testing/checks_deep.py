"""The deep harnesses as checks: the model-based owner machine and the two protocol explorers.

They take longer than a sentence check (seconds, not milliseconds) and are run
last.  Each builds its own stores from the harness, one per example or crash
state, under the check's work folder.
"""

from __future__ import annotations

import os

from .bench import Bench, expect
from .registry import CheckFailed, check

__all__: list[str] = []


@check(
    "MODEL.owner-machine",
    "every observation of several handles (publish, remove, fence, seal, reopen, restart, "
    "faults) agrees with the spec's owner model",
    slow=True,
)
def _owner_machine(bench: Bench) -> str:
    from .machine import run_owner_machine

    result = run_owner_machine(bench.harness_cls, os.path.join(bench.workdir, "machine"))
    if not result.passed:
        raise CheckFailed(bench.redact(f"{result.summary}\n{result.failure or ''}".strip()))
    return result.summary


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
    from .deep import run_protocol_machine

    result = run_protocol_machine(bench.harness_cls, os.path.join(bench.workdir, "protocol"))
    expect(result.passed, bench.redact("; ".join((result.summary, *result.details[:3]))))
    return str(result.summary)
