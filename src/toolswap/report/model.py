"""The figures of the report, gathered from the spec and the crash explorer.

Rules
=====

1. Only public functions are called: :func:`toolswap.spec.explorer.explore`
   and the variants for the model; :class:`CrashExplorer` and
   :func:`kill_matrix` for the implementation.  Nothing here changes what they
   check.
2. A counterexample trace is a list of steps; the states between them are
   recovered by *replaying* the trace through :meth:`Model.successors` (a step
   must match an enabled step exactly, or up to its note).  A trace that does
   not replay is a defect of the explorer, reported as
   :class:`~toolswap.errors.CorruptStateError`, never drawn half right.
3. What a crash keeps is what :meth:`Model.crash` keeps: a fact of a state is
   *durable* when the crashed state still shows it, *volatile* otherwise.  The
   spec stays the only definition of durability.
4. The same steps under the correct rule replay on the model with no mistake;
   a step that model does not enable is kept in the table and marked, and the
   replay goes on from the state before it.
5. Every figure that a reader may cite carries what reproduces it: bounds,
   seeds, modes, scenarios, versions, the date.
"""

from __future__ import annotations

import datetime
import platform
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from importlib import metadata
from typing import Any

import attrs

from toolswap.faultinject import explorer as crash_explorer
from toolswap.faultinject import mutants as mutant_module
from toolswap.faultinject.disk import CRASH_MODES as _CRASH_MODES
from toolswap.spec import explorer, invariants, system, variants

from ..errors import CorruptStateError, UsageError

__all__ = [
    "ACTORS",
    "Fact",
    "CorrectStep",
    "StepView",
    "Timeline",
    "ModelRun",
    "CrashCell",
    "CrashRow",
    "CrashMatrix",
    "MutantRow",
    "MutantMatrix",
    "InvariantCard",
    "Options",
    "Report",
    "QUICK",
    "FULL",
    "invariant_list",
    "timeline",
    "crash_matrix",
    "mutant_matrix",
    "build",
    "build_variant_page",
    "run_info",
    "bounds_dict",
    "parse_bounds",
    "default_bounds",
    "CRASH_MODES",
    "split_facts",
]

Progress = Callable[[str], None]

# Who takes each kind of step, for the timeline's actor column (every StepKind: a test checks).
ACTORS = {
    "EXTERNALIZE": "externalizer",
    "OVERWRITE": "externalizer",
    "FSYNC_ARTIFACT": "externalizer",
    "TICK": "clock",
    "QUIET": "clock",
    "EXPIRE": "clock",
    "TAMPER": "fault",
    "PREPARE": "publisher",
    "JOURNAL_FSYNC": "journal",
    "SEND": "publisher",
    "REJECT": "owner",
    "APPLY_ACK": "owner",
    "APPLY_LOST_ACK": "owner",
    "REFUSE": "owner",
    "DROP": "network",
    "COMMIT": "publisher",
    "ABORT_ON_ERROR": "publisher",
    "REPLAY": "publisher",
    "REMOVE_ACK": "remover",
    "REMOVE_LOST_ACK": "remover",
    "RELEASE": "remover",
    "RELEASE_FIRST": "remover",
    "REMOVE_AFTER": "remover",
    "OBSERVE": "reconciler",
    "SEAL": "reconciler",
    "STALE": "reconciler",
    "FOUND_SEALED": "reconciler",
    "CHECK_GENERATION": "reconciler",
    "WRITE_TOMBSTONE": "reconciler",
    "REPORT_CONFLICT": "reconciler",
    "FOREIGN_PUBLISH": "fault",
    "LOSE_LEASE": "fault",
    "TOMBSTONE_DURABLE": "owner",
    "ABORT": "reconciler",
    "GC_PLAN": "GC",
    "GC_APPLY": "GC",
    "SESSION_END": "session",
    "CRASH": "crash",
}


def _actor(step: Any) -> str:
    actor = ACTORS[step.kind.name]
    return f"{actor} {step.by + 1}" if actor == "reconciler" and step.by else actor


@attrs.frozen
class Fact:
    """One thing true of a state: its component (file, journal, ...), identity and words."""

    component: str
    key: tuple[object, ...]
    text: str
    new: bool = False


@attrs.frozen
class CorrectStep:
    """The same step under the correct rule: taken (maybe worded otherwise) or not enabled."""

    enabled: bool
    action: str
    broken: tuple[tuple[str, str], ...] = ()


@attrs.frozen
class StepView:
    """One row of a timeline: who did what, and the state after it."""

    number: int
    actor: str
    action: str
    durable: tuple[Fact, ...]
    volatile: tuple[Fact, ...]
    lost: tuple[Fact, ...]  # for a crash: the volatile facts it threw away
    is_crash: bool
    broken: tuple[tuple[str, str], ...]
    correct: CorrectStep


@attrs.frozen
class Timeline:
    """A variant's shortest counterexample, step by step, beside the correct rule."""

    name: str
    mistake: str
    expected: str
    lesson: str
    fix: str
    states: int
    transitions: int
    depth: int
    elapsed: float | None
    caught: bool
    broken: tuple[tuple[str, str], ...]
    steps: tuple[StepView, ...]
    correct_broken: tuple[tuple[str, str], ...]
    bounds: dict[str, object]

    @property
    def anchor(self) -> str:
        return f"variant-{self.name}"

    @property
    def crash_steps(self) -> tuple[int, ...]:
        return tuple(s.number for s in self.steps if s.is_crash)

    @property
    def skipped_under_correct(self) -> int:
        return sum(1 for s in self.steps if not s.correct.enabled)


@attrs.frozen
class ModelRun:
    """The correct model's exploration: the figures a paper would cite."""

    name: str
    states: int
    transitions: int
    depth: int
    elapsed: float | None
    complete: bool
    ok: bool
    verdict: str
    bounds: dict[str, object]
    symmetry: int = 1


@attrs.frozen
class CrashCell:
    states: int = 0
    violations: int = 0


@attrs.frozen
class CrashRow:
    scenario: str
    cells: tuple[CrashCell, ...]
    states: int
    violations: int
    skipped: str | None = None


@attrs.frozen
class CrashMatrix:
    """Scenarios x crash points: crash states explored and violations found in each cell."""

    columns: tuple[str, ...]
    rows: tuple[CrashRow, ...]
    seeds: int
    modes: tuple[str, ...]
    recovery_crashes: int
    states: int
    violations_by_invariant: dict[str, int]
    examples: tuple[dict[str, str], ...]
    seconds: float

    @property
    def violations(self) -> int:
        return sum(self.violations_by_invariant.values())

    @property
    def peak(self) -> int:
        return max((c.states for r in self.rows for c in r.cells), default=0)


@attrs.frozen
class MutantRow:
    name: str
    mistake: str
    target: str
    expected: str
    killed: bool
    scenarios: tuple[str, ...]
    crash_states: int
    violations_by_invariant: dict[str, int]
    first: str | None
    seconds: float


@attrs.frozen
class MutantMatrix:
    rows: tuple[MutantRow, ...]
    baseline_states: int
    baseline_violations: int
    seeds: int
    modes: tuple[str, ...]
    total_known: int

    @property
    def invariants(self) -> tuple[str, ...]:
        found = {i for r in self.rows for i in r.violations_by_invariant}
        found.update(r.expected for r in self.rows)
        return tuple(sorted(found))


@attrs.frozen
class InvariantCard:
    """One invariant as the page lists it: the spec's member and its sentence."""

    invariant: Any  # toolswap.spec.invariants.Invariant
    text: str

    @property
    def anchor(self) -> str:
        return f"inv-{self.invariant}"


@attrs.frozen
class Options:
    """What to run.  ``None`` for scenarios or mutants means every one of them."""

    bounds: Any = attrs.field(factory=system.Bounds)
    scenarios: tuple[str, ...] | None = None
    seeds: int = 10
    modes: tuple[str, ...] = _CRASH_MODES
    recovery_crashes: int = 1
    mutants: tuple[str, ...] | None = None
    mutant_seeds: int = 1
    crash: bool = True
    quick: bool = False


#: The default: everything, as ``toolswap crashcheck`` and ``--mutants`` run it (minutes).
FULL = Options()

#: A small run for tests and a first look (seconds): small bounds, a few scenarios, drop only.
QUICK = Options(
    bounds=system.Bounds(artifacts=1, transactions=1),
    scenarios=("publish_ok", "reconcile_absent", "remove", "gc"),
    seeds=1,
    modes=("drop",),
    recovery_crashes=0,
    mutants=("publish_before_fsync", "release_before_remove", "counter_overwrites"),
    quick=True,
)


@attrs.frozen
class Report:
    """Everything the page shows."""

    title: str
    info: dict[str, str]
    options: Options
    model: ModelRun | None
    timelines: tuple[Timeline, ...]
    invariants: tuple[InvariantCard, ...]
    crash: CrashMatrix | None
    mutants: MutantMatrix | None
    command: str


# -- invariants --------------------------------------------------------------------------------

_BULLET = re.compile(r"^\* \*\*([^*]+)\*\*(?: \([^)]*\))?: (.*?)(?=^\* |\Z)", re.M | re.S)


def invariant_list() -> tuple[InvariantCard, ...]:
    """S1-S7 and L1 with the sentence the spec's invariants module gives each."""
    described = {
        m.group(1).strip(): " ".join(m.group(2).split())
        for m in _BULLET.finditer(invariants.__doc__ or "")
    }
    return tuple(InvariantCard(i, described.get(i.full, "")) for i in invariants.Invariant)


# -- facts of one state ------------------------------------------------------------------------


def _facts(model: Any, s: Any) -> Iterator[Fact]:
    for a, f in enumerate(s.files):
        name = system.artifact_name(a)
        status = f.status.name
        if status == "NONE":
            continue
        if status == "DELETED":
            yield Fact("file", ("file", a, "deleted"), f"{name} deleted")
            continue
        words = "written, not fsynced" if status == "VOLATILE" else "fsynced"
        if f.content > 1:
            words += f", content v{f.content}"
        yield Fact("file", ("file", a, status, f.content), f"{name} {words}")
        if f.old:
            yield Fact("file", ("old", a), f"{name} older than the TTL")
        if f.tampered:
            yield Fact("file", ("tampered", a), f"{name} altered outside toolswap")
    for t, txn in enumerate(s.journal):
        tn = system.txn_name(t)
        if txn.durable:
            text = f"journal {tn}: " + " → ".join(r.value for r in txn.durable)
            yield Fact("journal", ("journal", t, txn.durable), text)
        if txn.volatile:
            text = f"journal {tn}: + " + " → ".join(r.value for r in txn.volatile)
            yield Fact("journal", ("appended", t, txn.durable, txn.volatile), text)
        if txn.conflict >= 0:
            where = system.artifact_name(txn.conflict)
            text = f"journal {tn}: CONFLICT, the owner names {where}"
            yield Fact("journal", ("conflict", t, txn.conflict, txn.conflict_digest), text)
        if txn.expired:
            yield Fact("journal", ("expired", t), f"{tn}: now is past its retain_until")
    for t, o in enumerate(s.owner):
        tn = system.txn_name(t)
        if o.record.generation or o.record.state.name != "ABSENT":
            text = f"owner {tn}: {o.record.state.value} (generation {o.record.generation})"
            yield Fact("owner", ("owner", t, o.record), text)
        if o.pending_tombstone:
            yield Fact("owner", ("tombstone", t), f"owner {tn}: tombstone being written")
        if o.inflight:
            yield Fact("network", ("inflight", t), f"{tn} publish request in flight")
    for t, pc in enumerate(s.publishers):
        if pc.name not in ("IDLE", "DONE"):  # done is as quiet as idle
            yield Fact("actor", ("publisher", t, pc), f"publisher {system.txn_name(t)}: {pc.value}")
    for t, pc in enumerate(s.removers):
        if pc.name != "IDLE":
            yield Fact("actor", ("remover", t, pc), f"remover {system.txn_name(t)}: {pc.value}")
    for i, r in enumerate(s.reconcilers):
        if r.pc.name != "IDLE":
            who = f"reconciler {i + 1}" if i else "reconciler"
            text = f"{who}: {r.pc.value} {system.txn_name(r.txn)} (generation {r.generation})"
            yield Fact("actor", ("reconciler", i, r), text)
    if s.gc_plan is not None:
        yield Fact("actor", ("gc", s.gc_plan), f"GC holds a plan of {len(s.gc_plan)} deletion(s)")
    if s.counter:
        yield Fact("actor", ("counter", s.counter), f"externalizer counter at {s.counter:03d}")
    for t, rejected in enumerate(s.rejected):
        if rejected:
            text = f"owner rejected {system.txn_name(t)} before any write"
            yield Fact("ghost", ("rejected", t), text)
    if s.outside_touched:
        yield Fact("ghost", ("outside",), "a path outside tool-results/ was touched")


def split_facts(
    model: Any, s: Any, before: Any | None
) -> tuple[tuple[Fact, ...], tuple[Fact, ...]]:
    """(durable, volatile) facts of ``s``; a fact absent from ``before`` is marked new."""
    kept = {f.key for f in _facts(model, model.crash(s))}
    old = set() if before is None else {f.key for f in _facts(model, before)}
    durable: list[Fact] = []
    volatile: list[Fact] = []
    for fact in _facts(model, s):
        fact = attrs.evolve(fact, new=fact.key not in old)
        (durable if fact.key in kept else volatile).append(fact)
    return tuple(durable), tuple(volatile)


# -- replaying a trace -------------------------------------------------------------------------


def _follow(model: Any, s: Any, step: Any) -> tuple[Any, Any] | None:
    """The (step, state) that ``step`` leads to from ``s``: exact, else up to its note."""
    loose = None
    for candidate, nxt in model.successors(s):
        if candidate == step:
            return candidate, nxt
        same = (candidate.kind, candidate.txn, candidate.slot) == (step.kind, step.txn, step.slot)
        if loose is None and same:
            loose = (candidate, nxt)
    return loose


def _pairs(found: Iterable[tuple[Any, str]]) -> tuple[tuple[str, str], ...]:
    """(full invariant name, reason) pairs, as the page prints them."""
    return tuple((invariant.full, reason) for invariant, reason in found)


def _lesson(text: str) -> tuple[str, str]:
    head, sep, fix = text.partition("Fix:")
    fix = fix.strip()
    return head.strip(), fix[:1].upper() + fix[1:] if sep else ""


#: The crash explorer's modes (``drop``, ``torn``, ``dir_subset``).
CRASH_MODES: tuple[str, ...] = tuple(_CRASH_MODES)


def parse_bounds(text: str) -> Any:
    """Model bounds from ``k=v,...``; a ValueError (the spec's BadBounds) on any doubt."""
    return system.Bounds.parse(text)


def default_bounds() -> Any:
    return system.Bounds()


def bounds_dict(bounds: Any) -> dict[str, object]:
    return {f.name: getattr(bounds, f.name) for f in attrs.fields(type(bounds))}


def timeline(variant: Any, bounds: Any, report: Any) -> Timeline:
    """The timeline of ``variant``'s exploration ``report`` (from :func:`explorer.explore`)."""
    model = variant.model(bounds)
    correct_model = system.Model(bounds=variant.bounds(bounds))  # same faults, no mistake
    v = report.violation
    caught = v is not None and variant.expected in v.invariants
    trace = v.trace if v is not None else ()
    steps: list[StepView] = []
    s = model.initial()
    c = correct_model.initial()
    for number, step in enumerate(trace, start=1):
        followed = _follow(model, s, step)
        if followed is None:
            raise CorruptStateError(
                f"variant {variant.name}: step {number} of the explorer's trace "
                f"({step.describe()}) is not enabled when the trace is replayed"
            )
        taken, nxt = followed
        lost: tuple[Fact, ...] = ()
        is_crash = step.kind.name == "CRASH"
        if is_crash:
            lost = split_facts(model, s, None)[1]
        durable, volatile = split_facts(model, nxt, s)
        mirrored = _follow(correct_model, c, step)
        if mirrored is None:
            correct = CorrectStep(False, "")
        else:
            c = mirrored[1]
            correct = CorrectStep(
                True,
                mirrored[0].describe(),
                _pairs(invariants.violations(correct_model, c)),
            )
        steps.append(
            StepView(
                number=number,
                actor=_actor(step),
                action=taken.describe(),
                durable=durable,
                volatile=volatile,
                lost=lost,
                is_crash=is_crash,
                broken=_pairs(invariants.violations(model, nxt)),
                correct=correct,
            )
        )
        s = nxt
    mistake, fix = _lesson(variant.lesson)
    return Timeline(
        name=variant.name,
        mistake=variant.mistake.value,
        expected=variant.expected.full,
        lesson=mistake,
        fix=fix,
        states=report.states,
        transitions=report.transitions,
        depth=report.depth,
        elapsed=report.elapsed,
        caught=caught,
        broken=_pairs(zip(v.invariants, v.reasons, strict=True)) if v is not None else (),
        steps=tuple(steps),
        correct_broken=_pairs(invariants.violations(correct_model, c)),
        # what the figures were explored under: the variant's own faults switched on
        bounds=bounds_dict(variant.bounds(bounds)),
    )


def explore_variant(variant: Any, bounds: Any) -> Timeline:
    report = explorer.explore(variant.model(bounds), name=variant.name, clock=time.perf_counter)
    return timeline(variant, bounds, report)


def explore_correct(bounds: Any) -> ModelRun:
    report = explorer.explore(system.Model(bounds=bounds), clock=time.perf_counter)
    verdict = explorer.format_report(report).splitlines()[1].removeprefix("verdict: ")
    return ModelRun(
        name=report.name,
        states=report.states,
        transitions=report.transitions,
        depth=report.depth,
        elapsed=report.elapsed,
        complete=report.complete,
        ok=report.ok,
        verdict=verdict,
        bounds=bounds_dict(bounds),
        symmetry=getattr(report, "symmetry", 1),
    )


# -- the implementation: crash matrix and mutants ----------------------------------------------


def _scenario_names(options: Options) -> tuple[str, ...]:
    known = tuple(s.name for s in crash_explorer.STANDARD_SCENARIOS)
    names = options.scenarios if options.scenarios is not None else known
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(
            f"unknown scenario(s) {', '.join(unknown)}; see toolswap crashcheck --list"
        )
    return names


def _mutant_names(options: Options) -> tuple[str, ...]:
    known = tuple(m.name for m in mutant_module.MUTANTS)
    names = options.mutants if options.mutants is not None else known
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(f"unknown mutant(s) {', '.join(unknown)}; see toolswap crashcheck --list")
    return names


def _column(target: str) -> str:
    if target.startswith("io#"):
        return "I/O op"
    if target == "end":
        return "end of run"
    return target.rpartition("#")[0]


def crash_matrix(options: Options, progress: Progress | None = None) -> CrashMatrix:
    """One crash exploration per scenario, tallied per crash point (and I/O op, end, recovery)."""
    by_name = {s.name: s for s in crash_explorer.STANDARD_SCENARIOS}
    names = _scenario_names(options)
    points = crash_explorer.known_crash_points()
    columns = (*points, "I/O op", "end of run", "recovery crash")
    rows: list[CrashRow] = []
    by_invariant: dict[str, int] = {}
    examples: list[dict[str, str]] = []
    started = time.perf_counter()
    for name in names:
        scenario = by_name[name]
        runner = crash_explorer.CrashExplorer(
            [scenario],
            seeds=options.seeds,
            modes=options.modes,
            recovery_crashes=options.recovery_crashes,
            max_violations=10**9,
        )
        result = runner.explore()
        if progress is not None:
            progress(f"crash matrix: {name}: {result.states:,} crash states")
        if name in result.skipped:
            rows.append(CrashRow(name, (CrashCell(),) * len(columns), 0, 0, result.skipped[name]))
            continue
        per_target = len(runner.variants())
        targets = runner.targets(scenario)
        states = dict(result.crash_point_states)
        states["I/O op"] = per_target * sum(1 for t in targets if t.kind == "io")
        states["end of run"] = per_target * sum(1 for t in targets if t.kind == "end")
        states["recovery crash"] = result.states - sum(states.values())
        broken: dict[str, int] = {}
        for v in result.violations:
            column = "recovery crash" if "recovery-crash" in v.mode else _column(v.target)
            broken[column] = broken.get(column, 0) + 1
            if len(examples) < 20:
                examples.append(v.to_dict())
        for invariant, count in result.violation_counts.items():
            by_invariant[invariant] = by_invariant.get(invariant, 0) + count
        cells = tuple(CrashCell(states.get(c, 0), broken.get(c, 0)) for c in columns)
        rows.append(CrashRow(name, cells, result.states, result.violation_total))
    return CrashMatrix(
        columns=columns,
        rows=tuple(rows),
        seeds=options.seeds,
        modes=tuple(options.modes),
        recovery_crashes=options.recovery_crashes,
        states=sum(r.states for r in rows),
        violations_by_invariant=by_invariant,
        examples=tuple(examples),
        seconds=time.perf_counter() - started,
    )


def mutant_matrix(options: Options, progress: Progress | None = None) -> MutantMatrix:
    """The kill matrix of the implementation mutants (``toolswap crashcheck --mutants``)."""
    known = {m.name: m for m in mutant_module.MUTANTS}
    names = _mutant_names(options)

    def tell(result: Any) -> None:
        if progress is not None:
            verdict = "killed" if result.killed else "SURVIVED"
            progress(f"mutants: {result.mutant.label}: {verdict}")

    matrix = mutant_module.kill_matrix(
        [known[n] for n in names], seeds=options.mutant_seeds, modes=options.modes, progress=tell
    )
    rows = []
    for r in matrix.results:
        first = None
        if r.first is not None:
            f = r.first
            first = f"{f.invariant} in {f.scenario} at {f.target} [{f.mode}]: {f.detail}"
        rows.append(
            MutantRow(
                name=r.mutant.label,
                mistake=r.mutant.mistake,
                target=r.mutant.target,
                expected=r.mutant.invariant,
                killed=r.killed,
                scenarios=tuple(r.mutant.scenarios),
                crash_states=r.crash_states,
                violations_by_invariant=dict(sorted(r.violations_by_invariant.items())),
                first=first,
                seconds=r.seconds,
            )
        )
    return MutantMatrix(
        rows=tuple(rows),
        baseline_states=matrix.baseline.states,
        baseline_violations=matrix.baseline.violation_total,
        seeds=options.mutant_seeds,
        modes=tuple(options.modes),
        total_known=len(known),
    )


# -- the run -----------------------------------------------------------------------------------


def run_info() -> dict[str, str]:
    """Versions and date: what a citation of these figures needs besides the bounds."""
    try:
        version = metadata.version("toolswap")
    except metadata.PackageNotFoundError:  # a source checkout that was never installed
        version = "unknown (not installed)"
    now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    return {
        "toolswap": version,
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "platform": f"{platform.system()} {platform.release()} ({platform.machine()})",
        "date": now.isoformat().replace("+00:00", "Z"),
        "argv": " ".join(sys.argv[1:]) if sys.argv else "",
    }


def build(options: Options, command: str, progress: Progress | None = None) -> Report:
    """The whole report: the correct model, every variant, the crash and mutant matrices."""

    def tell(message: str) -> None:
        if progress is not None:
            progress(message)

    if options.crash:  # a typo is reported before minutes of work, not after
        _scenario_names(options)
        _mutant_names(options)
    tell("exploring the correct model")
    model_run = explore_correct(options.bounds)
    timelines = []
    for variant in variants.VARIANTS.values():
        tell(f"variant {variant.name}")
        timelines.append(explore_variant(variant, options.bounds))
    crash = mutants = None
    if options.crash:
        crash = crash_matrix(options, tell)
        mutants = mutant_matrix(options, tell)
    return Report(
        title="toolswap: crash safety, trace by trace",
        info=run_info(),
        options=options,
        model=model_run,
        timelines=tuple(timelines),
        invariants=invariant_list(),
        crash=crash,
        mutants=mutants,
        command=command,
    )


def build_variant_page(variant: Any, bounds: Any, report: Any, command: str) -> Report:
    """The single-variant page of ``toolswap explore --variant NAME --html FILE``."""
    return Report(
        title=f"toolswap: the {variant.name} mistake",
        info=run_info(),
        options=Options(bounds=bounds, crash=False),
        model=None,
        timelines=(timeline(variant, bounds, report),),
        invariants=invariant_list(),
        crash=None,
        mutants=None,
        command=command,
    )
