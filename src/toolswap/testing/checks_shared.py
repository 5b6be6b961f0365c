"""One handle shared by threads: the O1 and O5 checks again, with one handle for everybody.

When the harness says the adapter's handles may be shared by threads
(``shared_handles = True``, ``Capability.SHARED_HANDLE``), each check of the
group runs once more on its own fresh store, with every handle it opens being
a thread's view of one shared handle (:mod:`toolswap.testing.shared`): the
fence is entered by one thread of the handle, the competing publish made by
another thread of the same handle.  Checks that need another process or a
fault plan, or a capability the harness lacks, are left out of the replay
(their own rows cover them).
"""

from __future__ import annotations

import os

from .bench import Bench
from .harness import Capability
from .registry import CHECKS, Check, CheckFailed, CheckSkipped, check

__all__: list[str] = []

_SHARED = "one-handle-shared-by-threads"
# The fence checks whose competitor is a thread, wherever their promise is filed.
_ALSO = ("O3.seal-refuses-held-publish-thread",)
# A long hold proves nothing more about sharing than the short ones do; its own row runs it.
_ALSO_LEFT_OUT = ("O5.fence-holds-past-time-outs-thread",)
# Another process has its own handle; a fault aimed at any store call may leave the
# shared handle inside a transaction, which only closing the handle would end.
_LEFT_OUT = frozenset({Capability.OTHER_PROCESS, Capability.SHARED_HANDLE, Capability.FAULT_PLAN})


def _replayed(group: str) -> list[Check]:
    return [
        c
        for c in CHECKS
        if (c.group == group or c.id in (_ALSO if group == "O5" else ()))
        and not c.id.endswith(_SHARED)
        and c.id not in _ALSO_LEFT_OUT
        and not c.needs & _LEFT_OUT
    ]


def _through_one_handle(bench: Bench, group: str) -> str:
    ran, skipped = [], []
    for inner in _replayed(group):
        if any(bench.unsupported_reason(n) is not None for n in inner.needs):
            skipped.append(inner.id)
            continue
        shared = Bench(
            bench.harness_cls,
            os.path.join(bench.workdir, inner.id),
            inner.id,
            drawer=bench.drawer,
            options=bench.options,
            shared=True,
        )
        try:
            inner.run(shared)
        except CheckSkipped:
            skipped.append(inner.id)
            continue
        except CheckFailed as failure:
            raise CheckFailed(f"{inner.id}, with one handle shared by threads: {failure}") from None
        finally:
            shared.finish()
        ran.append(inner.id)
    left = f" ({len(skipped)} left out: a capability is missing)" if skipped else ""
    return f"{len(ran)} {group} checks held with one handle shared by threads{left}"


@check(
    f"O1.{_SHARED}",
    "every O1 sentence holds when one handle is used by several threads (for an adapter "
    "whose handles may be shared)",
    needs=[Capability.SHARED_HANDLE],
    waits=True,
)
def _o1_shared(bench: Bench) -> str:
    return _through_one_handle(bench, "O1")


@check(
    f"O5.{_SHARED}",
    "every O5 sentence holds when the fence and its competitor are two threads of one handle "
    "(for an adapter whose handles may be shared)",
    needs=[Capability.SHARED_HANDLE],
    waits=True,
)
def _o5_shared(bench: Bench) -> str:
    return _through_one_handle(bench, "O5")
