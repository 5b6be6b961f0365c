"""One self-contained HTML page from a :class:`~toolswap.report.model.Report`.

Rules
=====

1. The page is one file that works offline: the stylesheet and the diagrams
   are inline, fonts are the system's, and no element fetches anything (no
   ``src``/``href`` to a network or another file; links are ``#anchors``).
2. Nothing needs JavaScript to be read.  The page ships no script at all.
3. Every variant has the anchor ``variant-NAME``, every invariant
   ``inv-S1`` ... ``inv-L1``, every diagram ``machine-*``; the sections are
   ``machines``, ``invariants``, ``variants``, ``crash-matrix``, ``mutants``
   and ``run``, so a lecture can link to one trace.
4. Every string from the model is escaped.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from html import escape

from toolswap.spec.invariants import Invariant

from . import svg
from .model import Fact, Report, StepView, Timeline, bounds_dict, default_bounds

_DEFAULT_BOUNDS = bounds_dict(default_bounds())

__all__ = ["render", "CSS"]

_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")


def _plain(text: str) -> str:
    """Docstring text without reST roles and literals, escaped for HTML."""
    return escape(_ROLE.sub(lambda m: m.group(1), text).replace("``", ""))


def _inv_link(invariant: str) -> str:
    """A chip for any spelling of an invariant, linked to its card (a refinement: its parent's)."""
    card = Invariant.of(invariant)
    return f'<a class="inv-chip" href="#inv-{escape(card)}">{escape(invariant)}</a>'


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def _bounds(bounds: dict[str, object]) -> str:
    return ",".join(
        f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in bounds.items()
    )


def _facts(facts: Iterable[Fact], extra: str = "") -> str:
    items = [
        f'<li class="fact f-{escape(f.component)}{" new" if f.new else ""}{extra}">'
        f"{escape(f.text)}</li>"
        for f in facts
    ]
    if not items:
        return '<span class="none">nothing</span>'
    return '<ul class="facts">' + "".join(items) + "</ul>"


def _correct_cell(step: StepView, last: bool, t: Timeline) -> str:
    c = step.correct
    if not c.enabled:
        return (
            '<td class="correct skipped"><span class="tag tag-skip">not enabled</span> '
            "the correct rule does not allow this step here; the replay skips it</td>"
        )
    body = (
        '<span class="tag tag-same">same step</span>'
        if c.action == step.action
        else f'<span class="tag tag-diff">instead</span> {escape(c.action)}'
    )
    if c.broken:
        body += "".join(
            f'<div class="still-broken">{_inv_link(name)} {escape(why)}</div>'
            for name, why in c.broken
        )
    elif last:
        body += '<div class="holds">S1-S7 hold</div>'
    return f'<td class="correct">{body}</td>'


def _row(step: StepView, last: bool, t: Timeline) -> str:
    classes = ["step", f"actor-{step.actor.replace(' ', '-')}"]
    if step.is_crash:
        classes.append("crash")
    if step.broken and last:
        classes.append("broken")
    action = escape(step.action)
    if step.is_crash:
        action = '<span class="crash-badge">CRASH</span> ' + escape(
            step.action.removeprefix("CRASH: ")
        )
    volatile = _facts(step.volatile)
    if step.is_crash:
        volatile = (
            '<div class="lost-title">lost in the crash</div>' + _facts(step.lost, " lost")
            if step.lost
            else '<span class="none">nothing was volatile</span>'
        )
    broken = ""
    if step.broken and last:
        broken = "".join(
            f'<div class="broken-box"><span class="broken-label">broken</span> '
            f'{_inv_link(name)}<div class="why">{escape(why)}</div></div>'
            for name, why in step.broken
        )
    return (
        f'<tr class="{" ".join(classes)}" id="{escape(t.anchor)}-step-{step.number}">'
        f'<td class="num">{step.number}</td>'
        f'<td class="actor"><span class="actor-tag">{escape(step.actor)}</span></td>'
        f'<td class="action">{action}{broken}</td>'
        f'<td class="durable">{_facts(step.durable)}</td>'
        f'<td class="volatile">{volatile}</td>'
        f"{_correct_cell(step, last, t)}</tr>"
    )


def _timeline(t: Timeline, index: int) -> str:
    if t.steps:
        crashes = t.crash_steps
        at_risk = [f.text for f in t.steps[-1].volatile if f.component != "actor"]
        if crashes:
            crash_note = f"the crash falls at step {', '.join(map(str, crashes))}"
        elif at_risk:
            crash_note = (
                "no crash is needed to break it; a crash right after the last step "
                f"would lose {', '.join(at_risk)}"
            )
        else:
            crash_note = "no crash is needed to break it"
        rows = "".join(_row(s, i == len(t.steps) - 1, t) for i, s in enumerate(t.steps))
        table = (
            '<table class="timeline"><thead><tr><th class="num">#</th><th>actor</th>'
            "<th>step, with the mistake</th>"
            '<th class="durable">durable<small>survives a crash</small></th>'
            '<th class="volatile">volatile<small>a crash loses it</small></th>'
            '<th class="correct">the same step under the correct rule</th></tr></thead>'
            f"<tbody>{rows}</tbody></table>"
        )
        if t.correct_broken:
            outcome = "under the correct rule, these steps still break " + ", ".join(
                _inv_link(n) for n, _ in t.correct_broken
            )
        else:
            skipped = t.skipped_under_correct
            outcome = "under the correct rule, S1-S7 hold after these steps" + (
                f" ({skipped} step{'s' if skipped != 1 else ''} not enabled)" if skipped else ""
            )
        count = f"{len(t.steps)} step{'s' if len(t.steps) != 1 else ''}"
        summary = f'<p class="trace-summary">{count}; {escape(crash_note)}; {outcome}.</p>'
    else:
        table = ""
        summary = (
            '<p class="not-caught">NOT CAUGHT: the explorer found no violation of '
            f"{_inv_link(t.expected)} under these bounds.</p>"
        )
    verdict = (
        f'<span class="verdict verdict-caught">breaks {_inv_link(t.expected)}</span>'
        if t.caught
        else '<span class="verdict verdict-missed">not caught</span>'
    )
    changed = {k: v for k, v in t.bounds.items() if _DEFAULT_BOUNDS.get(k) != v}
    figures = (
        f"{t.states:,} states, {t.transitions:,} transitions, depth {t.depth}, "
        f"{_seconds(t.elapsed)}; bounds: {escape(_bounds(changed) or 'the defaults')}"
    )
    command = f"toolswap explore --variant {t.name}" + (
        f" --bounds {_bounds(changed)}" if changed else ""
    )
    fix = (
        f'<div class="rule"><div class="rule-title">The rule that prevents it</div>'
        f"{escape(t.fix)}</div>"
        if t.fix
        else ""
    )
    return (
        f'<article class="variant" id="{escape(t.anchor)}">'
        f'<header class="variant-head"><span class="variant-num">{index}</span>'
        f"<h3>{escape(t.name)}</h3>{verdict}"
        f'<a class="permalink" href="#{escape(t.anchor)}">#</a></header>'
        f'<div class="story"><div class="mistake"><div class="rule-title">The mistake: '
        f"{escape(t.mistake)}</div>{escape(t.lesson)}</div>{fix}</div>"
        f"{table}{summary}"
        f'<p class="figures">{figures}<br><code>{escape(command)}</code></p></article>'
    )


def _heat(states: int, peak: int) -> str:
    if states == 0:
        return "background:#f6f7f9;color:#b0b6c0"
    share = math.log1p(states) / math.log1p(max(peak, 1))
    lightness = 96 - 50 * share
    ink = "#fff" if lightness < 62 else "#1c2430"
    return f"background:hsl(212,62%,{lightness:.0f}%);color:{ink}"


def _crash_section(report: Report) -> str:
    m = report.crash
    if m is None:
        return ""
    used = [
        i
        for i, _ in enumerate(m.columns)
        if any(r.cells[i].states or r.cells[i].violations for r in m.rows)
    ]
    head = "".join(f'<th class="rot"><span>{escape(m.columns[i])}</span></th>' for i in used)
    body = []
    for r in m.rows:
        if r.skipped is not None:
            body.append(
                f'<tr><th class="scen">{escape(r.scenario)}</th>'
                f'<td colspan="{len(used) + 2}" class="skipped">skipped: {escape(r.skipped)}</td>'
                "</tr>"
            )
            continue
        cells = []
        for i in used:
            cell = r.cells[i]
            if cell.violations:
                cells.append(
                    f'<td class="cell bad" title="{cell.violations} violations">'
                    f"{cell.states:,}<b>{cell.violations:,} viol.</b></td>"
                )
            else:
                cells.append(
                    f'<td class="cell" style="{_heat(cell.states, m.peak)}">'
                    f"{cell.states if cell.states else '&middot;'}</td>"
                )
        total_cls = "bad" if r.violations else "ok"
        body.append(
            f'<tr><th class="scen">{escape(r.scenario)}</th>{"".join(cells)}'
            f'<td class="total">{r.states:,}</td>'
            f'<td class="total {total_cls}">{r.violations:,}</td></tr>'
        )
    by_inv = ", ".join(f"{escape(k)}: {v:,}" for k, v in sorted(m.violations_by_invariant.items()))
    examples = ""
    if m.examples:
        items = "".join(
            f"<li><b>{escape(e['invariant'])}</b> {escape(e['scenario'])} at "
            f"{escape(e['target'])} [{escape(e['mode'])}]: {escape(e['detail'])}</li>"
            for e in m.examples
        )
        examples = f'<h3>First violations</h3><ul class="examples">{items}</ul>'
    return (
        '<section id="crash-matrix"><h2>Crash matrix: the implementation, crashed everywhere</h2>'
        "<p>Each scenario runs the real code on a simulated disk; the explorer crashes it "
        "at every named crash point and before every I/O operation, in every crash mode, "
        "restarts, recovers and checks S1-S7. A cell counts the crash states explored at "
        "that point (darker: more); a red cell holds violations.</p>"
        f'<p class="figures">{m.states:,} crash states, {m.violations:,} violations'
        f"{' (' + by_inv + ')' if by_inv else ''}; modes {escape('/'.join(m.modes))}, "
        f"{m.seeds} seed(s) per non-deterministic mode, {m.recovery_crashes} recovery "
        f"crash(es) per target; {m.seconds:.1f} s</p>"
        '<div class="scroll"><table class="heat"><thead><tr><th class="scen">scenario</th>'
        f'{head}<th class="rot"><span>crash states</span></th>'
        f'<th class="rot"><span>violations</span></th></tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>{examples}</section>"
    )


def _mutant_section(report: Report) -> str:
    m = report.mutants
    if m is None:
        return ""
    invs = m.invariants
    head = "".join(f'<th class="inv-col">{escape(i)}</th>' for i in invs)
    rows = []
    for r in m.rows:
        cells = []
        for i in invs:
            count = r.violations_by_invariant.get(i, 0)
            expected = Invariant.of(r.expected).covers(i)  # a refinement counts
            cls = "cell"
            if count and expected:
                cls += " kill"
            elif count:
                cls += " also"
            elif expected:
                cls += " miss"
            cells.append(
                f'<td class="{cls}">{count:,}</td>' if count else f'<td class="{cls}">&middot;</td>'
            )
        verdict = (
            '<span class="tag tag-killed">killed</span>'
            if r.killed
            else '<span class="tag tag-survived">SURVIVED</span>'
        )
        first = f'<div class="first">{escape(r.first)}</div>' if r.first else ""
        rows.append(
            f'<tr><th class="mutant"><code>{escape(r.name)}</code>'
            f'<div class="mistake-text">{escape(r.mistake)}</div>{first}</th>'
            f'<td class="expect">{_inv_link(r.expected)}</td><td>{verdict}</td>'
            f'{"".join(cells)}<td class="total">{r.crash_states:,}</td></tr>'
        )
    killed = sum(r.killed for r in m.rows)
    shown = (
        f"{len(m.rows)} of the {m.total_known} mutants"
        if len(m.rows) < m.total_known
        else f"all {m.total_known} mutants"
    )
    return (
        '<section id="mutants"><h2>Mutant kill matrix</h2>'
        "<p>Each mutant switches one classic mistake into the real code; the crash explorer "
        "must catch it with the invariant it breaks. Cells count violations per invariant: "
        '<span class="key kill">green</span>: the expected invariant caught it; '
        '<span class="key also">amber</span>: another invariant fired too (the mistake '
        "did more harm than the one it is known for); "
        '<span class="key miss">red</span>: the expected invariant never fired; '
        "a dot: no violation.</p>"
        f'<p class="figures">{killed}/{len(m.rows)} killed, {shown}; unmutated baseline: '
        f"{m.baseline_states:,} crash states, {m.baseline_violations:,} violations; "
        f"modes {escape('/'.join(m.modes))}, {m.seeds} seed(s)</p>"
        '<div class="scroll"><table class="kill"><thead><tr><th>mutant</th><th>must break</th>'
        f"<th>verdict</th>{head}<th>crash states</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div></section>"
    )


def _run_section(report: Report) -> str:
    o = report.options
    rows: list[tuple[str, str]] = [
        ("command", f"<code>{escape(report.command)}</code>"),
        ("date (UTC)", escape(report.info["date"])),
        ("toolswap", escape(report.info["toolswap"])),
        ("python", escape(report.info["python"])),
        ("platform", escape(report.info["platform"])),
        ("model bounds", f"<code>{escape(_bounds(_bounds_of(o.bounds)))}</code>"),
    ]
    if report.model is not None:
        r = report.model
        rows.append(
            (
                "correct model",
                f"{r.states:,} states, {r.transitions:,} transitions, depth {r.depth}, "
                f"{_seconds(r.elapsed)}; {escape(r.verdict.split(' (', 1)[0])}"
                + (f"; symmetry reduction by a group of {r.symmetry}" if r.symmetry > 1 else "")
                + ("" if r.complete else " (incomplete)"),
            )
        )
    if report.crash is not None:
        c = report.crash
        rows.append(
            (
                "crash explorer",
                f"{len(c.rows)} scenarios, modes {escape('/'.join(c.modes))}, {c.seeds} seed(s), "
                f"{c.recovery_crashes} recovery crash(es) per target: {c.states:,} crash states, "
                f"{c.seconds:.1f} s",
            )
        )
    if o.quick:
        rows.append(("scope", "QUICK run: small bounds, a few scenarios and mutants, drop only"))
    body = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    return (
        '<section id="run"><h2>Parameters of this run</h2>'
        "<p>Everything needed to cite these figures and reproduce them.</p>"
        f'<table class="params">{body}</table></section>'
    )


def _bounds_of(bounds: object) -> dict[str, object]:
    names = getattr(bounds, "__attrs_attrs__", ())
    return {f.name: getattr(bounds, f.name) for f in names}


def _hero(report: Report) -> str:
    cards: list[tuple[str, str]] = []
    if report.model is not None:
        r = report.model
        cards.append((f"{r.states:,}", "model states, 0 violations" if r.ok else "model states"))
        cards.append((f"{r.transitions:,}", "transitions"))
    caught = sum(t.caught for t in report.timelines)
    cards.append((f"{caught}/{len(report.timelines)}", "mistakes caught by the model"))
    if report.crash is not None:
        cards.append((f"{report.crash.states:,}", "crash states of the real code"))
    if report.mutants is not None:
        killed = sum(r.killed for r in report.mutants.rows)
        cards.append((f"{killed}/{len(report.mutants.rows)}", "mutants killed"))
    card_html = "".join(
        f'<div class="card"><div class="big">{escape(v)}</div><div>{escape(k)}</div></div>'
        for v, k in cards
    )
    quick = '<span class="quick">quick run</span>' if report.options.quick else ""
    return (
        f'<header class="hero"><h1>{escape(report.title)}{quick}</h1>'
        f'<p class="sub">toolswap {escape(report.info["toolswap"])} &middot; '
        f"{escape(report.info['python'])} &middot; {escape(report.info['date'])}</p>"
        f'<div class="cards">{card_html}</div></header>'
    )


def _toc(report: Report) -> str:
    links = ['<a href="#machines">State machines</a>', '<a href="#invariants">Invariants</a>']
    links.append('<a href="#variants">Mistakes</a>')
    if report.crash is not None:
        links.append('<a href="#crash-matrix">Crash matrix</a>')
    if report.mutants is not None:
        links.append('<a href="#mutants">Mutants</a>')
    links.append('<a href="#run">Parameters</a>')
    return '<nav class="toc">' + "".join(links) + "</nav>"


def _machines() -> str:
    figures = "".join(
        f'<figure id="{anchor}"><figcaption>{escape(caption)}</figcaption>'
        f'<div class="fig-body">{body}</div></figure>'
        for anchor, caption, body in svg.diagrams()
    )
    return (
        '<section id="machines"><h2>State machines</h2>'
        "<p>Drawn from the specification's transition tables; a double border marks a "
        "state with no way out.</p>"
        f'<div class="figures-grid">{figures}</div></section>'
    )


def _invariants(report: Report) -> str:
    items = "".join(
        f'<div class="inv" id="{escape(i.anchor)}">'
        f'<span class="inv-id">{escape(i.invariant)}</span>'
        f'<div><div class="inv-name">{escape(i.invariant.phrase)}</div>'
        f"<div>{_plain(i.text)}</div></div></div>"
        for i in report.invariants
    )
    return (
        f'<section id="invariants"><h2>Invariants</h2><div class="inv-grid">{items}</div></section>'
    )


def _variants(report: Report) -> str:
    index = "".join(
        f'<tr><td><a href="#{escape(t.anchor)}">{escape(t.name)}</a></td>'
        f"<td>{escape(t.mistake)}</td><td>{_inv_link(t.expected)}</td>"
        f'<td class="n">{len(t.steps)}</td>'
        f"<td>{'yes' if t.caught else '<b>NO</b>'}</td></tr>"
        for t in report.timelines
    )
    articles = "".join(_timeline(t, i) for i, t in enumerate(report.timelines, start=1))
    summary = ""
    if len(report.timelines) > 1:
        summary = (
            '<table class="index"><thead><tr><th>variant</th><th>mistake</th>'
            '<th>breaks</th><th class="n">steps</th><th>caught</th></tr></thead>'
            f"<tbody>{index}</tbody></table>"
        )
    return (
        '<section id="variants"><h2>Classic mistakes, one counterexample each</h2>'
        "<p>Each variant is the correct model with one rule switched off. The explorer "
        "searches breadth first, so the trace below is a shortest way to break an invariant. "
        "After each step: what is <b>durable</b> (a crash keeps it) and what is "
        "<b>volatile</b> (a crash loses it); highlighted facts are new at that step.</p>"
        f"{summary}{articles}</section>"
    )


def render(report: Report) -> str:
    """The whole page as one string."""
    sections = [
        _machines(),
        _invariants(report),
        _variants(report),
        _crash_section(report),
        _mutant_section(report),
        _run_section(report),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(report.title)}</title><style>{CSS}</style></head><body>"
        f"{_hero(report)}{_toc(report)}<main>{''.join(sections)}</main>"
        "<footer>Generated by <code>toolswap report</code>; one file, no network, "
        "no script.</footer></body></html>\n"
    )


CSS = """
:root{--ink:#1c2430;--muted:#5b6675;--line:#d9dee5;--bg:#fbfbfc;--accent:#1f5fa8;
--bad:#c0262d;--bad-bg:#fdeceb;--ok:#1d7a46;--ok-bg:#e7f5ec;--warn:#9a6200;--warn-bg:#fff4de;
--crash:#6b1fa8;--crash-bg:#f3ebfb}
*{box-sizing:border-box}
html{font-size:16px}
body{margin:0;background:var(--bg);color:var(--ink);line-height:1.45;
font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue","DejaVu Sans",
Arial,sans-serif}
code{font-family:ui-monospace,"SFMono-Regular","DejaVu Sans Mono",Menlo,Consolas,monospace;
font-size:.88em;background:#eef1f5;padding:.05em .35em;border-radius:4px}
.hero{background:#16263d;color:#fff;padding:2rem 3rem 1.6rem}
.hero h1{margin:0;font-size:2rem;font-weight:650;letter-spacing:-.01em}
.hero .sub{margin:.3rem 0 1.2rem;color:#b8c6da}
.quick{font-size:.8rem;background:#f0b429;color:#16263d;border-radius:999px;padding:.15rem .6rem;
margin-left:.8rem;vertical-align:middle;font-weight:700}
.cards{display:flex;gap:1rem;flex-wrap:wrap}
.card{background:#223a5c;border-radius:10px;padding:.7rem 1.1rem;min-width:10rem;color:#cfdbea;
font-size:.9rem}
.card .big{font-size:1.6rem;font-weight:700;color:#fff;font-variant-numeric:tabular-nums}
.toc{position:sticky;top:0;z-index:5;background:#fff;border-bottom:1px solid var(--line);
padding:.6rem 3rem;display:flex;gap:1.6rem;font-weight:600}
.toc a{color:var(--accent);text-decoration:none}
main{padding:0 3rem 2rem;max-width:1500px}
section{margin-top:2.4rem}
h2{font-size:1.55rem;margin:0 0 .6rem;padding-bottom:.3rem;border-bottom:2px solid var(--ink)}
h3{font-size:1.25rem;margin:0}
p{max-width:62rem}
.figures{color:var(--muted);font-size:.9rem}
.figures-grid{display:flex;flex-wrap:wrap;gap:1.2rem;align-items:flex-start}
figure{flex:0 1 auto;max-width:100%}
figure{margin:0;background:#fff;border:1px solid var(--line);border-radius:10px;padding:1rem}
figcaption{font-weight:650;margin-bottom:.6rem}
.fig-body{display:flex;flex-wrap:wrap;gap:1.5rem;align-items:flex-start}
svg.diagram{max-width:100%;height:auto;font-size:13px}
.sm-node rect{fill:#eef4fb;stroke:#1f5fa8;stroke-width:1.6}
.sm-node.sm-final rect{fill:#fff}
.sm-node rect.sm-inner{fill:#eef4fb;stroke-width:1.2}
.sm-state{font-weight:700;font-size:13px;fill:#16263d;letter-spacing:.02em}
.sm-edge{fill:none;stroke:#56657a;stroke-width:1.5}
.sm-arrowhead{fill:#56657a}
.sm-start{fill:#16263d}
.sm-label{fill:#3a4657;font-size:12.5px}
.sm-label-bg{paint-order:stroke;stroke:#fff;stroke-width:5px;stroke-linejoin:round}
.sm-ladder-title{font-weight:700;fill:#16263d;font-size:13px}
.sm-cond{fill:#fff;stroke:#9aa6b5;stroke-width:1.2}
.sm-cond-text{fill:#1c2430;font-size:12.5px}
.sm-yes,.sm-no{fill:#5b6675;font-size:11px;font-style:italic}
.sm-out{stroke-width:1.2}
.sm-out-keep{fill:#e7f5ec;stroke:#1d7a46}
.sm-out-delete{fill:#fdeceb;stroke:#c0262d}
.sm-out-deny{fill:#fff4de;stroke:#9a6200}
.sm-out-text{font-size:12px;font-weight:600;fill:#1c2430}
.inv-grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:.7rem}
.inv{display:flex;gap:.8rem;background:#fff;border:1px solid var(--line);border-radius:10px;
padding:.7rem .9rem;scroll-margin-top:4rem}
.inv:target{outline:3px solid var(--accent)}
.inv-id{font-weight:800;font-size:1.2rem;color:var(--accent);min-width:2.2rem}
.inv-name{font-weight:650}
.inv-chip{display:inline-block;background:var(--bad-bg);color:var(--bad);font-weight:650;
border-radius:6px;padding:0 .4rem;text-decoration:none;border:1px solid #f3b9b6;font-size:.92em}
table{border-collapse:collapse}
table.index{margin:.8rem 0 1.5rem;background:#fff;border:1px solid var(--line)}
table.index td,table.index th{padding:.3rem .8rem;border-bottom:1px solid var(--line);
text-align:left}
table.index a{color:var(--accent);font-weight:600}
table.index a.inv-chip{color:var(--bad)}
.n{text-align:right}
.variant{background:#fff;border:1px solid var(--line);border-radius:12px;padding:1.2rem 1.4rem;
margin:1.4rem 0;scroll-margin-top:3.5rem;box-shadow:0 1px 2px rgba(0,0,0,.04)}
.variant:target{outline:3px solid var(--accent)}
.variant-head{display:flex;align-items:center;gap:.8rem;margin-bottom:.8rem}
.variant-num{background:#16263d;color:#fff;border-radius:999px;width:1.9rem;height:1.9rem;
display:inline-flex;align-items:center;justify-content:center;font-weight:700;font-size:.9rem}
.variant-head h3{font-family:ui-monospace,"DejaVu Sans Mono",Menlo,monospace;font-size:1.2rem}
.permalink{margin-left:auto;color:#9aa6b5;text-decoration:none;font-weight:700}
.verdict{font-size:.9rem}
.verdict-missed{color:#fff;background:var(--bad);border-radius:6px;padding:.1rem .5rem}
.story{display:grid;grid-template-columns:1fr 1fr;gap:1rem;margin-bottom:1rem}
.mistake,.rule{border-radius:8px;padding:.7rem .9rem;font-size:.95rem}
.mistake{background:var(--bad-bg);border-left:5px solid var(--bad)}
.rule{background:var(--ok-bg);border-left:5px solid var(--ok)}
.rule-title{font-weight:700;margin-bottom:.2rem}
table.timeline{width:100%;font-size:.9rem;table-layout:fixed}
table.timeline th{text-align:left;font-size:.78rem;text-transform:uppercase;letter-spacing:.04em;
color:var(--muted);padding:.4rem .5rem;border-bottom:2px solid var(--ink);vertical-align:bottom}
table.timeline th small{display:block;text-transform:none;letter-spacing:0;font-weight:400}
table.timeline th.num{width:2.2rem}
table.timeline th:nth-child(2){width:7.2rem}
table.timeline th:nth-child(3){width:28%}
table.timeline th.correct{width:20%}
table.timeline td{padding:.45rem .5rem;border-bottom:1px solid var(--line);vertical-align:top}
td.num{font-weight:700;color:var(--muted);font-variant-numeric:tabular-nums}
.actor-tag{display:inline-block;font-size:.78rem;font-weight:700;border-radius:5px;
padding:.05rem .4rem;
background:#eef1f5;color:#3a4657}
.actor-publisher .actor-tag{background:#e3eefb;color:#1f5fa8}
.actor-owner .actor-tag{background:#e7f5ec;color:#1d7a46}
.actor-reconciler .actor-tag,.actor-reconciler-2 .actor-tag{background:#fff4de;color:#9a6200}
.actor-GC .actor-tag{background:#fbe9f1;color:#a3245f}
.actor-remover .actor-tag{background:#eaf6f6;color:#1b6f70}
.actor-crash .actor-tag,.actor-fault .actor-tag,.actor-session .actor-tag,.actor-network .actor-tag
{background:var(--crash-bg);color:var(--crash)}
ul.facts{list-style:none;margin:0;padding:0;display:flex;flex-direction:column;align-items:flex-start;gap:.2rem}
li.fact{border:1px solid var(--line);border-left:4px solid #9aa6b5;border-radius:5px;
padding:0 .4rem;font-size:.82rem;background:#fff;overflow-wrap:anywhere}
li.f-file{border-left-color:#56657a}
li.f-journal{border-left-color:#1f5fa8}
li.f-owner{border-left-color:#1d7a46}
li.f-network{border-left-color:#9a6200}
li.f-actor{border-left-color:#b0b6c0;color:var(--muted)}
li.f-ghost{border-left-color:var(--bad)}
li.fact.new{background:#fff6c9;border-color:#e3c55a;font-weight:650}
li.fact.lost{text-decoration:line-through;color:var(--crash);background:var(--crash-bg);font-weight:400}
.lost-title{font-size:.75rem;font-weight:700;color:var(--crash);text-transform:uppercase}
.none{color:#b0b6c0;font-size:.82rem}
td.volatile{background:#fcfbf6}
tr.crash td{background:var(--crash-bg);border-top:2px solid var(--crash);
border-bottom:2px solid var(--crash)}
.crash-badge{display:inline-block;background:var(--crash);color:#fff;font-weight:800;font-size:.78rem;
border-radius:5px;padding:.05rem .45rem;letter-spacing:.06em}
tr.broken td{background:var(--bad-bg);border-top:2px solid var(--bad);
border-bottom:2px solid var(--bad)}
tr.broken td.correct{background:var(--ok-bg)}
tr.broken td.correct.skipped{background:var(--warn-bg)}
.broken-box{margin-top:.45rem;border:2px solid var(--bad);background:#fff;border-radius:8px;
padding:.35rem .55rem}
.broken-label{background:var(--bad);color:#fff;font-weight:800;font-size:.72rem;text-transform:uppercase;
border-radius:4px;padding:.05rem .35rem;margin-right:.3rem;letter-spacing:.05em}
.why{margin-top:.2rem;font-weight:600;color:var(--bad)}
.tag{display:inline-block;font-size:.74rem;font-weight:700;border-radius:5px;padding:.02rem .4rem;
text-transform:uppercase;letter-spacing:.04em}
.tag-same{background:#eef1f5;color:var(--muted)}
.tag-diff{background:var(--ok-bg);color:var(--ok)}
.tag-skip{background:var(--warn-bg);color:var(--warn);border:1px solid #ecc878}
.tag-killed{background:var(--ok-bg);color:var(--ok)}
.tag-survived{background:var(--bad);color:#fff}
td.correct{font-size:.85rem;color:var(--muted)}
td.correct.skipped{background:var(--warn-bg);color:var(--warn)}
.holds{margin-top:.3rem;color:var(--ok);font-weight:700}
.still-broken{margin-top:.3rem}
.trace-summary{font-size:.92rem;margin:.6rem 0 .2rem}
.not-caught{color:var(--bad);font-weight:700}
.scroll{overflow-x:auto}
table.heat{font-size:.8rem;background:#fff;border:1px solid var(--line)}
table.heat th.rot{height:13rem;vertical-align:bottom;padding:0 .1rem .4rem;white-space:nowrap}
table.heat th.rot span{writing-mode:vertical-rl;transform:rotate(180deg);font-weight:600;
color:var(--muted);font-size:.78rem}
table.heat th.scen{text-align:left;padding:.2rem .6rem;white-space:nowrap;font-weight:600;
font-family:ui-monospace,"DejaVu Sans Mono",Menlo,monospace;font-size:.78rem}
table.heat td.cell{min-width:2.4rem;text-align:center;padding:.25rem .2rem;border:1px solid #fff;
font-variant-numeric:tabular-nums}
table.heat td.cell.bad{background:var(--bad);color:#fff;font-weight:700}
table.heat td.cell.bad b{display:block;font-size:.7rem}
td.total{text-align:right;padding:.2rem .6rem;font-variant-numeric:tabular-nums;font-weight:600}
td.total.ok{color:var(--ok)}
td.total.bad{color:#fff;background:var(--bad)}
table.kill{background:#fff;border:1px solid var(--line);font-size:.88rem}
table.kill th,table.kill td{padding:.4rem .6rem;border-bottom:1px solid var(--line);text-align:left;
vertical-align:top}
table.kill th.mutant{max-width:30rem;font-weight:400}
.mistake-text{color:var(--muted);font-size:.85rem}
.first{font-size:.78rem;color:var(--muted);margin-top:.2rem}
table.kill td.cell{text-align:center;font-variant-numeric:tabular-nums;color:#b0b6c0}
table.kill td.cell.kill{background:var(--ok-bg);color:var(--ok);font-weight:700}
table.kill td.cell.also{background:var(--warn-bg);color:var(--warn)}
table.kill td.cell.miss{background:var(--bad-bg);color:var(--bad);font-weight:700}
table.params{background:#fff;border:1px solid var(--line)}
table.params th{text-align:left;padding:.35rem 1rem;color:var(--muted);font-weight:600;
vertical-align:top;white-space:nowrap}
table.params td{padding:.35rem 1rem;overflow-wrap:anywhere}
.key{padding:0 .3rem;border-radius:4px;font-weight:600}
.key.kill{background:var(--ok-bg);color:var(--ok)}
.key.also{background:var(--warn-bg);color:var(--warn)}
.key.miss{background:var(--bad-bg);color:var(--bad)}
ul.examples{font-size:.85rem}
footer{padding:1.5rem 3rem;color:var(--muted);font-size:.85rem;border-top:1px solid var(--line)}
@media print{.toc{position:static}.variant{break-inside:avoid}}
"""
