"""SVG pictures of the spec's tables: the lease and owner machines, the cleanup rules.

Rules
=====

1. Every picture is drawn from the table it shows, read when called
   (:data:`lease.LEASE_TRANSITIONS`, :data:`owner.OWNER_TRANSITIONS`,
   :data:`cleanup.PLAN_RULES`, :data:`cleanup.APPLY_RULES`), as
   :mod:`toolswap.spec.diagrams` does for SPEC.md's Mermaid.
2. The output is plain inline SVG: no script, no external font or image; the
   page's CSS styles it through class names (``sm-*``), so one stylesheet
   makes every diagram match the page.
3. Layout is deterministic and simple: states in columns by their distance
   from the initial state; an edge to a later column is a line, an edge back
   or within a column an arc, a self-loop a loop with its labels stacked.
   Edges with the same ends share one arrow and join their labels.
4. Text is escaped; the viewBox is the bounding box of what was drawn.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from html import escape

import attrs

from toolswap.spec import cleanup, lease, owner

__all__ = ["state_machine", "decision_ladder", "lease_svg", "owner_svg", "cleanup_svg", "diagrams"]

_CHAR = 7.4  # average width of one character of 13 px sans-serif text
_NODE_H = 40
_COL_GAP = 200
_ROW_GAP = 140


@attrs.define
class _Canvas:
    parts: list[str] = attrs.field(factory=list)
    box: list[float] = attrs.field(factory=lambda: [1e9, 1e9, -1e9, -1e9])

    def see(self, x: float, y: float) -> None:
        b = self.box
        b[0], b[1], b[2], b[3] = min(b[0], x), min(b[1], y), max(b[2], x), max(b[3], y)

    def text(self, x: float, y: float, words: str, cls: str, anchor: str = "middle") -> None:
        width = len(words) * _CHAR
        left = {"middle": x - width / 2, "start": x, "end": x - width}[anchor]
        self.see(left, y - 12)
        self.see(left + width, y + 4)
        self.parts.append(
            f'<text x="{x:.0f}" y="{y:.0f}" text-anchor="{anchor}" class="{cls}">'
            f"{escape(words)}</text>"
        )

    def svg(self, ident: str, title: str) -> str:
        x0, y0, x1, y1 = self.box
        pad = 12
        w, h = x1 - x0 + 2 * pad, y1 - y0 + 2 * pad
        marker = (
            f'<defs><marker id="{ident}-arrow" viewBox="0 0 10 10" refX="9" refY="5" '
            'markerWidth="8" markerHeight="8" orient="auto-start-reverse">'
            '<path d="M0,0 L10,5 L0,10 z" class="sm-arrowhead"/></marker></defs>'
        )
        body = "".join(self.parts).replace("{ARROW}", f"url(#{ident}-arrow)")
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" class="diagram" id="{ident}" role="img" '
            f'viewBox="{x0 - pad:.0f} {y0 - pad:.0f} {w:.0f} {h:.0f}" '
            f'width="{w:.0f}" height="{h:.0f}" aria-labelledby="{ident}-title">'
            f'<title id="{ident}-title">{escape(title)}</title>{marker}{body}</svg>'
        )


def _layers(initial: str, edges: Sequence[tuple[str, str, str]]) -> dict[str, int]:
    layer = {initial: 0}
    frontier = [initial]
    while frontier:
        nxt = []
        for state in frontier:
            for src, dst, _ in edges:
                if src == state and dst not in layer:
                    layer[dst] = layer[state] + 1
                    nxt.append(dst)
        frontier = nxt
    for src, dst, _ in edges:  # unreachable states still get drawn, in a last column
        for state in (src, dst):
            layer.setdefault(state, max(layer.values()) + 1)
    return layer


def state_machine(
    ident: str,
    title: str,
    initial: enum.Enum,
    edges: Iterable[tuple[enum.Enum, enum.Enum, str]],
    final_class: dict[str, str] | None = None,
) -> str:
    """An SVG state diagram of (source, target, label) edges; see the module rules."""
    merged: dict[tuple[str, str], list[str]] = {}
    for source, target, label in edges:
        merged.setdefault((source.name, target.name), []).append(label)
    flat = [(s, d, ", ".join(labels)) for (s, d), labels in merged.items()]
    layer = _layers(initial.name, flat)
    columns: dict[int, list[str]] = {}
    for state in layer:
        columns.setdefault(layer[state], []).append(state)
    tallest = max(len(c) for c in columns.values())
    width = {s: max(90.0, len(s) * 8.6 + 30) for s in layer}
    pos: dict[str, tuple[float, float]] = {}
    # columns far enough apart for the longest label between two of them
    widest = max(
        (len(line) * _CHAR for s, d, lab in flat if s != d for line in lab.split(", ")), default=0
    )
    gap = max(_COL_GAP, widest + max(width.values()) + 50)
    for col, states in columns.items():
        top = (tallest - len(states)) * _ROW_GAP / 2
        for i, state in enumerate(states):
            pos[state] = (col * gap, top + i * _ROW_GAP)
    leaves = {s for s in layer if not any(a == s and b != s for a, b, _ in flat)}
    c = _Canvas()
    # the initial marker
    x, y = pos[initial.name]
    left = x - width[initial.name] / 2
    c.see(left - 46, y - 8)
    c.parts.append(f'<circle cx="{left - 40:.0f}" cy="{y:.0f}" r="7" class="sm-start"/>')
    c.parts.append(
        f'<path d="M{left - 32:.0f},{y:.0f} L{left - 2:.0f},{y:.0f}" class="sm-edge" '
        'marker-end="{ARROW}"/>'
    )
    below = {states[-1] for states in columns.values() if len(states) > 1}
    for src, dst, label in flat:
        (x1, y1), (x2, y2) = pos[src], pos[dst]
        lines = label.split(", ")
        if src == dst:
            sign = 1 if src in below else -1  # the loop goes where there is room
            edge = y1 + sign * _NODE_H / 2
            far = edge + sign * 44
            c.parts.append(
                f'<path d="M{x1 - 18:.0f},{edge:.0f} C{x1 - 34:.0f},{far:.0f} '
                f'{x1 + 34:.0f},{far:.0f} {x1 + 18:.0f},{edge:.0f}" class="sm-edge sm-self" '
                'marker-end="{ARROW}"/>'
            )
            for i, line in enumerate(lines if sign > 0 else list(reversed(lines))):
                y = far + 14 + i * 16 if sign > 0 else far - 6 - i * 16
                c.text(x1, y, line, "sm-label")
            continue
        reverse = (dst, src) in merged
        if layer[dst] > layer[src]:
            sx, sy = x1 + width[src] / 2, y1 - (8 if reverse else 0)
            ex, ey = x2 - width[dst] / 2, y2 - (8 if reverse else 0)
            bow = -36 if reverse else 0
        elif reverse:
            sx, sy = x1 - width[src] / 2, y1 + 8
            ex, ey = x2 + width[dst] / 2, y2 + 8
            bow = 36
        else:
            sx, sy = x1 - width[src] / 2 + 10, y1 + _NODE_H / 2
            ex, ey = x2 + width[dst] / 2 - 10, y2 + _NODE_H / 2
            bow = 70
        mx, my = (sx + ex) / 2, (sy + ey) / 2 + bow
        c.parts.append(
            f'<path d="M{sx:.0f},{sy:.0f} Q{mx:.0f},{my:.0f} {ex:.0f},{ey:.0f}" class="sm-edge" '
            'marker-end="{ARROW}"/>'
        )
        c.see(mx, (sy + 2 * my + ey) / 4)
        cx, cy = (sx + 2 * mx + ex) / 4, (sy + 2 * my + ey) / 4  # the curve's midpoint
        anchor = "middle"
        if bow == 0 and ey < sy:  # a line going up: above it, left of its middle
            first, anchor, cx = cy - 8 - 16 * (len(lines) - 1), "end", cx - 6
        elif bow < 0:  # above the curve
            first = cy - 8 - 16 * (len(lines) - 1)
        elif bow > 0:  # below the arc
            first = cy + 18
        elif ey > sy:  # a line going down: below it, left of its middle, where it is not
            first, anchor, cx = cy + 16, "end", cx - 6
        else:  # a level line
            first = cy - 8 - 16 * (len(lines) - 1)
        for i, line in enumerate(lines):
            c.text(cx, first + i * 16, line, "sm-label sm-label-bg", anchor=anchor)
    for state, (x, y) in pos.items():
        w = width[state]
        cls = "sm-node"
        if state in leaves:
            cls += " sm-final"
        if final_class and state in final_class:
            cls += " " + final_class[state]
        c.see(x - w / 2, y - _NODE_H / 2)
        c.see(x + w / 2, y + _NODE_H / 2)
        c.parts.append(
            f'<g class="{cls}"><rect x="{x - w / 2:.0f}" y="{y - _NODE_H / 2:.0f}" '
            f'width="{w:.0f}" height="{_NODE_H}" rx="9"/>'
        )
        if state in leaves:
            c.parts.append(
                f'<rect x="{x - w / 2 + 4:.0f}" y="{y - _NODE_H / 2 + 4:.0f}" '
                f'width="{w - 8:.0f}" height="{_NODE_H - 8}" rx="6" class="sm-inner"/>'
            )
        c.parts.append(
            f'<text x="{x:.0f}" y="{y + 5:.0f}" text-anchor="middle" class="sm-state">'
            f"{escape(state)}</text></g>"
        )
    return c.svg(ident, title)


def decision_ladder(
    ident: str,
    title: str,
    rules: Sequence[tuple[str, enum.Enum]],
    outcome_class: dict[str, str],
) -> str:
    """Ordered rules, first match wins: each condition answers "yes" to its status, "no" down."""
    c = _Canvas()
    cond_w = max(len(name) for name, _ in rules) * _CHAR + 36
    out_x = cond_w + 70
    row = 58
    c.text(cond_w / 2, -14, title, "sm-ladder-title")
    for i, (name, status) in enumerate(rules):
        y = i * row
        c.see(0, y)
        c.parts.append(
            f'<rect x="0" y="{y:.0f}" width="{cond_w:.0f}" height="34" rx="6" class="sm-cond"/>'
        )
        c.text(14, y + 22, f"{i + 1}. {name}", "sm-cond-text", anchor="start")
        c.parts.append(
            f'<path d="M{cond_w:.0f},{y + 17:.0f} L{out_x - 2:.0f},{y + 17:.0f}" '
            'class="sm-edge" marker-end="{ARROW}"/>'
        )
        c.text(cond_w + 34, y + 12, "yes", "sm-yes")
        value = str(status.value)
        w = len(value) * _CHAR + 26
        cls = outcome_class.get(value, "sm-out-keep")
        c.parts.append(
            f'<rect x="{out_x:.0f}" y="{y + 3:.0f}" width="{w:.0f}" height="28" rx="14" '
            f'class="sm-out {cls}"/>'
        )
        c.text(out_x + w / 2, y + 22, value, "sm-out-text")
        c.see(out_x + w, y + 34)
        if i + 1 < len(rules):
            c.parts.append(
                f'<path d="M{28:.0f},{y + 34:.0f} L{28:.0f},{y + row - 2:.0f}" class="sm-edge" '
                'marker-end="{ARROW}"/>'
            )
            c.text(36, y + 50, "no", "sm-no", anchor="start")
    return c.svg(ident, title)


def lease_svg() -> str:
    edges = [
        (s, t, a.value + (" (idempotent)" if s is t else ""))
        for (s, a), t in lease.LEASE_TRANSITIONS.items()
    ]
    return state_machine(
        "diagram-lease",
        "Lease transaction per transaction id (lease.LEASE_TRANSITIONS)",
        lease.LeaseState.NEW,
        edges,
    )


def owner_svg() -> str:
    edges = [(s, t, f"{a.value} ({r.value})") for (s, a), (t, r) in owner.OWNER_TRANSITIONS.items()]
    return state_machine(
        "diagram-owner",
        "Owner record per transaction id (owner.OWNER_TRANSITIONS)",
        owner.OwnerState.ABSENT,
        edges,
    )


_OUTCOMES = {
    "planned_delete": "sm-out-delete",
    "deleted": "sm-out-delete",
    "denied": "sm-out-deny",
    "race_detected": "sm-out-deny",
    "retained_corrupt": "sm-out-deny",
    "missing_referenced": "sm-out-deny",
}


def cleanup_svg() -> tuple[str, str]:
    """The plan rules and the apply re-validation rules, as two ladders."""
    plan = [(name, status) for name, _, status in cleanup.PLAN_RULES]
    apply = [(name, status) for name, _, status in cleanup.APPLY_RULES]
    return (
        decision_ladder(
            "diagram-cleanup-plan",
            "Plan: classify each entry (cleanup.PLAN_RULES)",
            plan,
            _OUTCOMES,
        ),
        decision_ladder(
            "diagram-cleanup-apply",
            "Apply: re-validate each planned_delete (cleanup.APPLY_RULES)",
            apply,
            _OUTCOMES,
        ),
    )


def diagrams() -> tuple[tuple[str, str, str], ...]:
    """(anchor, heading, svg) for every diagram of the report, drawn now."""
    plan, apply = cleanup_svg()
    return (
        ("machine-lease", "Lease transaction", lease_svg()),
        ("machine-owner", "Owner record", owner_svg()),
        ("machine-cleanup", "Cleanup: plan, then re-validate", plan + apply),
    )
