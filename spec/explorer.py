"""A bounded breadth-first explorer of :class:`system.Model`.

Rules
=====

1. Start from :meth:`Model.initial`; visit every reachable state once
   (states are deduplicated by value).
2. Check every safety invariant of :mod:`invariants` in every visited state.
   Breadth-first order makes the first violating state one at the smallest
   depth, so its parent chain is a **shortest counterexample trace**.
3. With no safety violation, check **L1 progress**: every reachable state must
   reach :func:`invariants.l1_goal` by progress steps only
   (:data:`system.PROGRESS_STEPS`: no fault, no new work).  This is a backward
   search from the goal states over the recorded progress edges.
4. Report states, transitions, depth and, if the caller passed a clock, the
   elapsed seconds (the spec owns no clock).

Theory of operation
===================

The state space is finite: every counter in the model is bounded
(:class:`system.Bounds`), and a crash maps a state onto one with less volatile
state, so unbounded crashes add edges, not states.  Parent pointers are kept
as integers, so a trace costs nothing until it is asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

import attrs

from .errors import BadBounds
from .invariants import Invariant, checker
from .symmetry import Symmetry
from .system import PROGRESS_STEPS, Model, Step, SystemState

__all__ = [
    "Violation",
    "Report",
    "Progress",
    "explore",
    "format_report",
    "report_to_dict",
    "PROGRESS_EVERY",
]


@attrs.frozen
class Violation:
    """A violated invariant and the shortest trace that reaches it."""

    invariants: tuple[Invariant, ...]  # rendered by their full names
    reasons: tuple[str, ...]
    trace: tuple[Step, ...]


@attrs.frozen
class Report:
    """What one exploration found."""

    name: str
    states: int
    transitions: int
    depth: int
    elapsed: float | None
    complete: bool
    violation: Violation | None
    l1_checked: bool = False
    l1_stuck: int = 0
    l1_trace: tuple[Step, ...] = ()
    #: Size of the symmetry group the search was reduced by (1: unreduced);
    #: ``states`` counts one state per orbit.
    symmetry: int = 1
    #: Why an incomplete search stopped early: "max_states", "max_seconds", or "".
    stopped: str = ""

    @property
    def ok(self) -> bool:
        return self.violation is None and (not self.l1_checked or self.l1_stuck == 0)


@attrs.frozen
class Progress:
    """What the explorer has done so far, handed to a progress callback."""

    states: int
    transitions: int
    depth: int
    expanded: int
    elapsed: float | None


#: States expanded between two progress callbacks (and budget checks).
PROGRESS_EVERY = 2048


def _trace(index: int, parent: list[int], via: list[Step | None]) -> tuple[Step, ...]:
    steps: list[Step] = []
    while index > 0:
        step = via[index]
        assert step is not None
        steps.append(step)
        index = parent[index]
    return tuple(reversed(steps))


def explore(
    model: Model,
    *,
    name: str = "correct model",
    clock: Callable[[], float] | None = None,
    max_states: int | None = None,
    max_seconds: float | None = None,
    check_progress: bool = True,
    symmetry: bool = True,
    progress: Callable[[Progress], None] | None = None,
) -> Report:
    """Explore ``model`` breadth first; stop at the first safety violation.

    With ``symmetry`` (the default) one state per orbit of
    :class:`symmetry.Symmetry` is visited; the verdict and the length of the
    shortest trace are those of the unreduced model, and every trace is a real
    one.  ``max_states`` and ``max_seconds`` (which needs ``clock``) are a
    budget: when it runs out the report is incomplete, never a PASS.
    ``progress`` is called every :data:`PROGRESS_EVERY` expanded states.
    """
    if max_seconds is not None and clock is None:
        raise BadBounds("max_seconds needs a clock")
    started = clock() if clock is not None else None
    reduction = Symmetry(model)
    key = reduction.key if symmetry and not reduction.trivial else None
    initial = model.initial()
    index: dict[Hashable, int] = {initial if key is None else key(initial): 0}
    states: list[SystemState] = [initial]
    parent: list[int] = [-1]
    via: list[Step | None] = [None]
    depth: list[int] = [0]
    # progress edges (source, target), kept flat: one list per state cost more than the search
    edge_from: list[int] = []
    edge_to: list[int] = []
    transitions = 0
    violation: Violation | None = None
    complete = True
    stopped = ""
    cursor = 0
    successors = model.successors
    progress_kinds = PROGRESS_STEPS
    add = index.setdefault
    violations, l1_goal = checker(model)
    while cursor < len(states):
        s = states[cursor]
        found = violations(s)
        if found:
            violation = Violation(
                tuple(n for n, _ in found), tuple(r for _, r in found), _trace(cursor, parent, via)
            )
            complete = False
            break
        if cursor % PROGRESS_EVERY == 0 and cursor and (progress or max_seconds is not None):
            elapsed = clock() - started if clock is not None and started is not None else None
            if progress is not None:
                progress(Progress(len(states), transitions, depth[cursor], cursor, elapsed))
            if max_seconds is not None and elapsed is not None and elapsed >= max_seconds:
                complete = False
                stopped = "max_seconds"
                break
        here = depth[cursor] + 1
        for step, nxt in successors(s):
            transitions += 1
            k = nxt if key is None else key(nxt)
            j = add(k, len(states))  # one hash per successor: a lookup and an insert
            if j == len(states):
                if max_states is not None and j >= max_states:
                    del index[k]
                    complete = False
                    stopped = "max_states"
                    continue
                states.append(nxt)
                parent.append(cursor)
                via.append(step)
                depth.append(here)
            if check_progress and j != cursor and step.kind in progress_kinds:
                edge_from.append(cursor)
                edge_to.append(j)
        cursor += 1
    del index

    l1_stuck = 0
    l1_trace: tuple[Step, ...] = ()
    l1_checked = check_progress and violation is None and complete
    if l1_checked:
        l1_stuck, stuck_at = _progress_check(model, states, edge_from, edge_to, depth)
        if stuck_at >= 0:
            l1_trace = _trace(stuck_at, parent, via)
    elapsed = clock() - started if clock is not None and started is not None else None
    return Report(
        name=name,
        states=len(states),
        transitions=transitions,
        depth=max(depth[: cursor + 1] if violation or stopped else depth),
        elapsed=elapsed,
        complete=complete,
        violation=violation,
        l1_checked=l1_checked,
        l1_stuck=l1_stuck,
        l1_trace=l1_trace,
        symmetry=reduction.size if key is not None else 1,
        stopped=stopped,
    )


def _progress_check(
    model: Model,
    states: list[SystemState],
    edge_from: list[int],
    edge_to: list[int],
    depth: list[int],
) -> tuple[int, int]:
    """L1 by a backward search from the goal states: (stuck states, a shallowest stuck one)."""
    n = len(states)
    # reverse adjacency in compressed form: the edges sorted by target
    count = [0] * (n + 1)
    for j in edge_to:
        count[j + 1] += 1
    for i in range(n):
        count[i + 1] += count[i]
    start = count[:]
    sources = [0] * len(edge_to)
    for i, j in zip(edge_from, edge_to, strict=True):
        sources[start[j]] = i
        start[j] += 1
    _, l1_goal = checker(model)
    good = [l1_goal(s) for s in states]
    frontier = [i for i, g in enumerate(good) if g]
    while frontier:
        j = frontier.pop()
        for i in sources[count[j] : count[j + 1]]:
            if not good[i]:
                good[i] = True
                frontier.append(i)
    stuck = [i for i, g in enumerate(good) if not g]
    if not stuck:
        return 0, -1
    return len(stuck), min(stuck, key=lambda i: depth[i])


def format_report(report: Report) -> str:
    """The verdict and, for a violation, the counterexample trace in plain words."""
    lines = [f"model: {report.name}"]
    stats = (
        f"{report.states:,} {_plural(report.states, 'state')}, "
        f"{report.transitions:,} {_plural(report.transitions, 'transition')}, "
        f"depth {report.depth}"
        + (f", {report.elapsed:.2f} s" if report.elapsed is not None else "")
        + (
            f"; one state per orbit of {report.symmetry} transaction renamings"
            if report.symmetry > 1
            else ""
        )
    )
    if report.violation is None:
        if not report.complete:
            lines.append(f"verdict: INCOMPLETE, no violation found so far ({stats})")
            budget = report.stopped or "max_states"
            lines.append(
                f"exploration stopped at {budget}: the verdict covers a subset "
                "of the reachable states and L1 was not checked"
            )
            return "\n".join(lines)
        lines.append(f"verdict: 0 violations of S1-S7 ({stats})")
        if report.l1_checked:
            if report.l1_stuck:
                lines.append(
                    f"{Invariant.L1.full}: VIOLATED in {report.l1_stuck:,} "
                    f"{_plural(report.l1_stuck, 'state')}; shortest:"
                )
                lines.extend(_numbered(report.l1_trace))
            else:
                lines.append(
                    f"{Invariant.L1.full}: holds (every state can reach a quiescent, clean state)"
                )
        return "\n".join(lines)
    v = report.violation
    lines.append(f"verdict: VIOLATION of {', '.join(i.full for i in v.invariants)} ({stats})")
    lines.append(f"shortest counterexample ({len(v.trace)} {_plural(len(v.trace), 'step')}):")
    lines.extend(_numbered(v.trace))
    for invariant, reason in zip(v.invariants, v.reasons, strict=True):
        lines.append(f"=> {invariant.full} is broken: {reason}.")
    return "\n".join(lines)


def _plural(count: int, noun: str) -> str:
    return noun if count == 1 else noun + "s"


def _numbered(trace: tuple[Step, ...]) -> list[str]:
    return [f"  {i}. {step.describe()}" for i, step in enumerate(trace, start=1)]


def report_to_dict(report: Report) -> dict[str, object]:
    """A JSON-ready form of a report."""
    v = report.violation
    return {
        "model": report.name,
        "states": report.states,
        "transitions": report.transitions,
        "depth": report.depth,
        "elapsed_seconds": report.elapsed,
        "complete": report.complete,
        "violations": 0 if v is None else len(v.invariants),
        "violated": [] if v is None else [i.full for i in v.invariants],
        "reasons": [] if v is None else list(v.reasons),
        "trace": [] if v is None else [s.describe() for s in v.trace],
        "l1_checked": report.l1_checked,
        "l1_stuck": report.l1_stuck,
        "l1_trace": [s.describe() for s in report.l1_trace],
        "symmetry": report.symmetry,
        "stopped": report.stopped or None,
    }
