"""``toolswap report`` and ``explore --html``: one well-formed, self-contained page.

The page is built once with ``--quick`` (seconds); the claims about what a
timeline shows are checked on the model the page is drawn from.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import attrs
import pytest
from toolswap.faultinject.mutants import mutant_named
from toolswap.spec import explorer, lease, variants
from toolswap.spec.system import Bounds, JournalTxn, Model, Step, StepKind

from toolswap.cli import main
from toolswap.errors import CorruptStateError
from toolswap.report import html, model, svg

_VOID = {"meta", "br", "link", "img", "input", "hr", "col", "source", "wbr", "area", "base"}
# attributes that make a browser fetch something
_FETCHING = {"src", "href", "xlink:href", "srcset", "action", "data", "poster", "background"}


class _Checker(HTMLParser):
    """Tags balanced, ids unique, every attribute and id recorded."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.ids: list[str] = []
        self.attrs: list[tuple[str, str, str]] = []
        self.tags: list[str] = []

    def _record(self, tag: str, attributes: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attributes:
            self.attrs.append((tag, name, value or ""))
            if name == "id":
                self.ids.append(value or "")

    def handle_starttag(self, tag: str, attributes: list[tuple[str, str | None]]) -> None:
        self._record(tag, attributes)
        if tag not in _VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attributes: list[tuple[str, str | None]]) -> None:
        self._record(tag, attributes)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
            return
        self.stack.pop()


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("report") / "report.html"
    assert main(["report", "--quick", "--out", str(out)]) == 0
    return out.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def parsed(page: str) -> _Checker:
    checker = _Checker()
    checker.feed(page)
    checker.close()
    return checker


def test_the_page_is_well_formed(page: str, parsed: _Checker) -> None:
    assert page.startswith("<!DOCTYPE html>")
    assert parsed.errors == []
    assert parsed.stack == []
    duplicates = {i for i in parsed.ids if parsed.ids.count(i) > 1}
    assert duplicates == set()


def test_the_page_fetches_nothing(page: str, parsed: _Checker) -> None:
    fetching = [(t, n, v) for t, n, v in parsed.attrs if n in _FETCHING]
    assert all(v.startswith("#") for _, _, v in fetching), fetching
    assert "script" not in parsed.tags and "link" not in parsed.tags
    assert "iframe" not in parsed.tags and "img" not in parsed.tags
    assert "@import" not in page and "@font-face" not in page
    assert re.findall(r"url\((?!#)", page) == []
    # the one http: text is the SVG namespace, which names and fetches nothing
    assert set(re.findall(r"https?://[^\"' )<]+", page)) <= {"http://www.w3.org/2000/svg"}


def test_every_variant_and_invariant_has_its_anchor(parsed: _Checker) -> None:
    ids = set(parsed.ids)
    for name in variants.names():
        assert f"variant-{name}" in ids
    for short in ("S1", "S2", "S3", "S4", "S5", "S6", "S7", "L1"):
        assert f"inv-{short}" in ids
    for section in ("machines", "invariants", "variants", "crash-matrix", "mutants", "run"):
        assert section in ids


def test_every_invariant_link_points_at_an_anchor(parsed: _Checker) -> None:
    ids = set(parsed.ids)
    links = {v[1:] for _, n, v in parsed.attrs if n == "href"}
    assert links <= ids


def test_the_diagrams_are_present_with_every_state(page: str, parsed: _Checker) -> None:
    ids = set(parsed.ids)
    for diagram in ("diagram-lease", "diagram-owner", "diagram-cleanup-plan"):
        assert diagram in ids
    lease_svg = page[page.index('id="diagram-lease"') :]
    lease_svg = lease_svg[: lease_svg.index("</svg>")]
    for state in lease.LeaseState:
        assert f">{state.name}</text>" in lease_svg


def test_a_diagram_is_drawn_from_the_table_as_it_is_now(monkeypatch: pytest.MonkeyPatch) -> None:
    table = dict(lease.LEASE_TRANSITIONS)
    table[(lease.LeaseState.ABORTED, lease.LeaseAction.RELEASE)] = lease.LeaseState.RELEASED
    monkeypatch.setattr(lease, "LEASE_TRANSITIONS", table)
    drawn = svg.lease_svg()
    assert drawn.count(">release</text>") == 2


def test_the_run_parameters_are_on_the_page(page: str) -> None:
    section = page[page.index('id="run"') :]
    for text in ("toolswap report --out", "--quick", "artifacts=1,transactions=1", "python"):
        assert text in section
    assert re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", section)


def test_a_one_step_trace_says_one_step(page: str) -> None:
    # gc-follows-unknown-entries breaks S7 at its first step
    assert '<p class="trace-summary">1 step;' in page
    assert re.search(r"\b1 steps", page) is None


def test_the_correct_models_figures_are_given_once(page: str) -> None:
    row = re.search(r"<th>correct model</th><td>([^<]*)</td>", page)
    assert row is not None and row.group(1).count(" states") == 1


def test_the_kill_matrix_legend_explains_every_colour(page: str) -> None:
    for key in ("green", "amber", "red"):
        assert f">{key}</span>:" in page


def test_the_broken_invariant_is_highlighted_in_its_trace(page: str) -> None:
    start = page.index('id="variant-publish-before-prepared"')
    article = page[start : page.index("</article>", start)]
    last_row = article[article.rindex('<tr class="step') :]
    assert "broken" in last_row.split(">", 1)[0]
    assert 'href="#inv-S2"' in last_row
    assert "PREPARED record is not durable" in last_row


# -- the timeline's claims, on the model it is drawn from -----------------------------------


def _timeline(name: str) -> model.Timeline:
    return model.explore_variant(variants.get(name), Bounds(artifacts=1, transactions=1))


def test_a_crash_loses_exactly_what_was_volatile() -> None:
    t = _timeline("counter-restart")
    assert t.crash_steps == (3,)
    before, crash = t.steps[1], t.steps[2]
    assert crash.is_crash
    assert [f.key for f in crash.lost] == [f.key for f in before.volatile] != []
    assert [f.text for f in crash.volatile] == []
    assert [f.text for f in crash.durable] == [f.text for f in before.durable]
    assert t.steps[-1].broken[0][0] == "S6 append-only evidence"


def test_durable_and_volatile_follow_the_models_crash() -> None:
    t = _timeline("publish-before-prepared")
    last = t.steps[-1]
    assert "journal t1: + PREPARED" in [f.text for f in last.volatile]  # page cache only
    assert "owner t1: PUBLISHED (generation 1)" in [f.text for f in last.durable]
    assert last.broken[0][0] == "S2 prepare before publish"


def test_the_correct_rule_does_not_enable_the_mistaken_step() -> None:
    t = _timeline("publish-before-prepared")
    send = next(s for s in t.steps if "sends the publish request" in s.action)
    assert not send.correct.enabled  # no send before PREPARED is durable
    assert t.correct_broken == ()
    assert all(s.correct.enabled for s in t.steps[: send.number - 1])


def test_a_trace_that_does_not_replay_is_refused() -> None:
    variant = variants.get("counter-restart")
    bounds = Bounds(artifacts=1, transactions=1)
    real = explorer.explore(variant.model(bounds), name=variant.name)
    assert real.violation is not None
    bogus_step = Step(StepKind.RELEASE, txn=0)  # nothing to release in the initial state
    bogus = attrs.evolve(
        real, violation=attrs.evolve(real.violation, trace=(bogus_step, *real.violation.trace))
    )
    with pytest.raises(CorruptStateError, match="not enabled when the trace is replayed"):
        model.timeline(variant, bounds, bogus)


def test_the_crash_matrix_shows_a_mutants_violations_in_their_cells() -> None:
    options = model.Options(scenarios=("publish_ok",), seeds=1, modes=("drop",), recovery_crashes=0)
    with mutant_named("publish_before_fsync").active():
        broken = model.crash_matrix(options)
    clean = model.crash_matrix(options)
    (row,) = broken.rows
    assert row.violations > 0
    assert sum(c.violations for c in row.cells) == row.violations
    assert sum(c.states for c in row.cells) == row.states
    assert clean.violations == 0
    rendered = html.render(
        attrs.evolve(model.build(attrs.evolve(model.QUICK, crash=False), "t"), crash=broken)
    )
    assert 'class="cell bad"' in rendered


# -- the command line ---------------------------------------------------------------------


def test_explore_html_writes_the_single_variant_page(tmp_path: Path) -> None:
    out = tmp_path / "one.html"
    code = main(
        [
            "explore",
            "--variant",
            "counter-restart",
            "--bounds",
            "transactions=1",
            "--html",
            str(out),
        ]
    )
    assert code == 1  # the expected violation was found, as for explore without --html
    text = out.read_text(encoding="utf-8")
    assert 'id="variant-counter-restart"' in text
    assert 'id="variant-publish-before-prepared"' not in text
    assert "toolswap explore --variant counter-restart --bounds transactions=1" in text


def test_explore_html_says_where_it_wrote_the_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "one.html"
    main(
        [
            "explore",
            "--variant",
            "counter-restart",
            "--bounds",
            "transactions=1",
            "--html",
            str(out),
        ]
    )
    assert f"wrote {out}" in capsys.readouterr().err


def test_explore_html_without_a_variant_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explore", "--html", str(tmp_path / "x.html")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--html needs --variant" in err
    assert not (tmp_path / "x.html").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--scenario", "nope"], "unknown scenario"),
        (["--mode", "melt"], "unknown crash mode"),
        (["--bounds", "artifacts=9"], "artifacts must be"),
        (["--out", "/nonexistent-folder/r.html"], "no folder /nonexistent-folder"),
    ],
)
def test_report_errors_are_one_line_and_exit_2_before_any_work(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    quick = ["report", "--quick", "--out", str(tmp_path / "r.html")]
    assert main([*quick, *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err
    assert not (tmp_path / "r.html").exists()


def test_every_kind_of_step_has_a_named_actor() -> None:
    assert sorted(model.ACTORS) == sorted(k.name for k in StepKind)


def test_the_second_reconciler_is_named_in_its_steps_and_its_facts() -> None:
    # a trace through both reconcilers, replayed as the report replays a variant's
    variant = variants.get("two-reconcilers")
    bounds = Bounds(artifacts=1, transactions=1, concurrent_reconcilers=True)
    m = variant.model(bounds)
    state, trace = m.initial(), []
    wanted = [
        (StepKind.EXTERNALIZE, 0),
        (StepKind.FSYNC_ARTIFACT, 0),
        (StepKind.PREPARE, 0),
        (StepKind.JOURNAL_FSYNC, 0),
        (StepKind.OBSERVE, 0),
        (StepKind.OBSERVE, 1),
    ]
    for kind, by in wanted:
        step, state = next(
            (st, n) for st, n in m.successors(state) if (st.kind, st.by) == (kind, by)
        )
        trace.append(step)
    explored = attrs.evolve(
        explorer.explore(m, max_states=1),
        violation=explorer.Violation(invariants=(), reasons=(), trace=tuple(trace)),
    )
    t = model.timeline(variant, bounds, explored)
    actors = {s.actor for s in t.steps}
    assert {"reconciler", "reconciler 2"} <= actors
    facts = [f.text for s in t.steps for f in s.volatile]
    assert any(text.startswith("reconciler 2: observed t1") for text in facts)


def test_an_expired_lease_is_a_fact_of_the_timeline() -> None:
    expiry = [f.text for s in _timeline("prepared-lease-expires").steps for f in s.durable]
    assert "t1: now is past its retain_until" in expiry


@pytest.mark.parametrize("unsynced", [False, True])
def test_a_conflict_record_is_durable_only_once_fsynced(unsynced: bool) -> None:
    m = Model(Bounds(artifacts=1, transactions=1))
    txn = JournalTxn(
        durable=(lease.LeaseState.PREPARED,),
        intent=1,
        conflict=0,
        conflict_digest=5,
        conflict_volatile=unsynced,
    )
    s = m.initial()._replace(journal=(txn,))
    durable, volatile = model.split_facts(m, s, None)
    text = "journal t1: CONFLICT, the owner names tool_result_001.txt"
    assert text in [f.text for f in (volatile if unsynced else durable)]
    assert text not in [f.text for f in (durable if unsynced else volatile)]
