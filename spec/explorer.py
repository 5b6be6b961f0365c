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

from collections.abc import Callable

import attrs

from .invariants import l1_goal, violations
from .system import PROGRESS_STEPS, Model, Step, SystemState

__all__ = ["Violation", "Report", "explore", "format_report", "report_to_dict"]


@attrs.frozen
class Violation:
    """A violated invariant and the shortest trace that reaches it."""

    invariants: tuple[str, ...]
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

    @property
    def ok(self) -> bool:
        return self.violation is None and (not self.l1_checked or self.l1_stuck == 0)


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
    check_progress: bool = True,
) -> Report:
    """Explore ``model`` breadth first; stop at the first safety violation."""
    started = clock() if clock is not None else None
    initial = model.initial()
    index: dict[SystemState, int] = {initial: 0}
    states: list[SystemState] = [initial]
    parent: list[int] = [-1]
    via: list[Step | None] = [None]
    depth: list[int] = [0]
    progress_in: list[list[int]] = [[]]
    transitions = 0
    violation: Violation | None = None
    complete = True
    cursor = 0
    while cursor < len(states):
        s = states[cursor]
        found = violations(model, s)
        if found:
            violation = Violation(
                tuple(n for n, _ in found), tuple(r for _, r in found), _trace(cursor, parent, via)
            )
            complete = False
            break
        for step, nxt in model.successors(s):
            transitions += 1
            j = index.get(nxt)
            if j is None:
                if max_states is not None and len(states) >= max_states:
                    complete = False
                    continue
                j = len(states)
                index[nxt] = j
                states.append(nxt)
                parent.append(cursor)
                via.append(step)
                depth.append(depth[cursor] + 1)
                progress_in.append([])
            if check_progress and step.kind in PROGRESS_STEPS and j != cursor:
                progress_in[j].append(cursor)
        cursor += 1

    l1_stuck = 0
    l1_trace: tuple[Step, ...] = ()
    l1_checked = check_progress and violation is None and complete
    if l1_checked:
        good = [l1_goal(model, s) for s in states]
        frontier = [i for i, g in enumerate(good) if g]
        while frontier:
            j = frontier.pop()
            for i in progress_in[j]:
                if not good[i]:
                    good[i] = True
                    frontier.append(i)
        stuck = [i for i, g in enumerate(good) if not g]
        l1_stuck = len(stuck)
        if stuck:
            l1_trace = _trace(min(stuck, key=lambda i: depth[i]), parent, via)
    elapsed = clock() - started if clock is not None and started is not None else None
    return Report(
        name=name,
        states=len(states),
        transitions=transitions,
        depth=max(depth[: cursor + 1] if violation else depth),
        elapsed=elapsed,
        complete=complete,
        violation=violation,
        l1_checked=l1_checked,
        l1_stuck=l1_stuck,
        l1_trace=l1_trace,
    )


def format_report(report: Report) -> str:
    """The verdict and, for a violation, the counterexample trace in plain words."""
    lines = [f"model: {report.name}"]
    stats = f"{report.states} states, {report.transitions} transitions, depth {report.depth}" + (
        f", {report.elapsed:.2f} s" if report.elapsed is not None else ""
    )
    if report.violation is None:
        lines.append(f"verdict: 0 violations of S1-S7 ({stats})")
        if report.l1_checked:
            if report.l1_stuck:
                lines.append(f"L1 progress: VIOLATED in {report.l1_stuck} states; shortest:")
                lines.extend(_numbered(report.l1_trace))
            else:
                lines.append("L1 progress: holds (every state can reach a quiescent, clean state)")
        elif not report.complete:
            lines.append("exploration stopped at max_states: the verdict covers a subset")
        return "\n".join(lines)
    v = report.violation
    lines.append(f"verdict: VIOLATION of {', '.join(v.invariants)} ({stats})")
    noun = "step" if len(v.trace) == 1 else "steps"
    lines.append(f"shortest counterexample ({len(v.trace)} {noun}):")
    lines.extend(_numbered(v.trace))
    for name, reason in zip(v.invariants, v.reasons, strict=True):
        lines.append(f"=> {name} is broken: {reason}.")
    return "\n".join(lines)


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
        "violated": [] if v is None else list(v.invariants),
        "reasons": [] if v is None else list(v.reasons),
        "trace": [] if v is None else [s.describe() for s in v.trace],
        "l1_checked": report.l1_checked,
        "l1_stuck": report.l1_stuck,
        "l1_trace": [s.describe() for s in report.l1_trace],
    }
