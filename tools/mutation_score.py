"""Measure the mutation score of the modules that decide what is deleted or kept (issue 39).

Usage (from the checkout; hours on two shared cores, every mutant, nothing sampled)::

    python tools/mutation_score.py                     # the deciding modules, both operator sets
    python tools/mutation_score.py --ops ast cleanup   # our own operators only, one module
    python tools/mutation_score.py --keep --ops mutmut journal  # same copies, mutmut's set
    python tools/mutation_score.py --list              # the modules and their test selections
    python tools/mutation_score.py --report-only       # re-merge the recorded results

docs/mutation.md has the commands that produced its numbers, their durations
and the tree state each row was measured on.

It never touches the checkout it is run from, and it runs at the lowest
priority (``os.nice(19)``) with one test process at a time: other people use
the machine.  It copies the working tree (``.git`` aside) twice under
``--work`` (default ``/tmp/toolswap-mutation``): ``copy/`` for mutmut and
``ast-copy/`` for our own operators, writes ``TREE_STATE`` (HEAD plus a hash of
the uncommitted diff, and the time) into each, and builds one virtualenv with
the test extra, ``mutmut==3.8.1`` and pytest-cov.

Two operator sets, so that one tool's blind spots are covered by the other:

* mutmut's (``--ops mutmut``): mutmut mutates inside functions and switches a
  mutant on after import, so it skips decorated functions and cannot see a
  table built at import time;
* our own (``--ops ast``, tools/ast_mutants.py): deleting a call statement,
  ``return X`` -> ``return None``, negating a condition (if/elif, while,
  conditional expression, assert, comprehension filter), and swapping
  ``continue``/``break``; each mutant is written into ``ast-copy/`` before
  anything imports it, so decorated functions and import-time tables are
  mutated like any other line.

Which tests: first one run of the broad suite (``BROAD``) under coverage, one
context per test (tools/mutation_reach.py), on the unmutated copy; tests that
fail there are never used to kill a mutant.  Then every mutant goes through
two stages.  The module's own selection (``Module.tests``): mutmut runs the
selected tests that reach the mutated function (its own stats pass); ours
runs the selected tests that execute the mutated line, fastest first, or the
whole selection when no test was seen running the line (it ran at import
time, before coverage started, or in no test).  A mutant that survives its
selection is then run against the broad suite's tests that execute its line
(ours: none of our operators changes anything before its statement runs) or
any line of its function (mutmut's, and ours on a line no test was seen
running), and for ours also the rest of the selection; only what survives
both is left for a verdict.  Last, our mutants meet the module's gap tests
(``tests/*/test_mutation_gaps_<module>*.py``, brought into the copy from the
checkout as they are written), so a kill there is one the suite as it was
missed.  Every run stops at its first failure.

Our verdicts: ``killed`` (a test failed), ``timeout`` (one test ran past ten
times its own measured time and at least 30 s, tools/mutation_timeouts.py, or
the run past five times its tests' measured time plus three minutes, when its
process group is killed: a mutant that hangs counts as killed), ``import`` (the module no longer
imports: killed), ``collection`` (a test generated from the sources, such as
one per crash point, is gone: the mutant removed what it tests; killed),
``survived``.  ``ast-results/<module>.json`` records for
each mutant its id (module, operator, line, column and a hash of the mutated
source: the same tree gives the same ids), site, enclosing function, diff,
verdict, the stage and test that killed it, and its duration.  mutmut's are
in ``results/<module>.json`` (selection) and ``<module>.after.json`` (after the
broad suite).  ``summary.md``/``summary.json`` merge both.

Why mutmut's copy is rearranged: pyproject maps ``toolswap.spec`` to
``spec/`` and ``toolswap.faultinject`` to ``faultinject/`` (package-dir).
mutmut names a mutant after the file's path under ``src/`` and its trampoline
compares that name with the running function's ``__module__``; for
``spec/lease.py`` the two disagree (``spec.lease`` vs ``toolswap.spec.lease``)
and no mutant would ever be activated.  So the copy moves both folders under
``src/toolswap/`` (a plain src layout, which also makes the editable install a
plain path that mutmut can shadow with its ``mutants/src``), and leaves links
at the old places for the tests that import ``faultinject`` or read ``spec/``
by path.  ``ast-copy/`` has the same layout and is put first on
``PYTHONPATH``.

Left out of every run: the CrossHair check (``-m crosshair``: a subprocess
that mutmut's trampolines do not reach, tens of seconds a run) and the
PostgreSQL tests; for mutmut also tests/spec/test_purity.py (it reads spec/*.py
as text and would see mutmut's own import).  Hypothesis runs with the ``ci``
profile (derandomized, no example database) so two runs give the same score.

Not part of ``.ci/run``: it is far too slow for it.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ast_mutants  # noqa: E402
import mutation_reach  # noqa: E402
from mutation_reach import Reach  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TOOLS = Path(__file__).resolve().parent
MUTMUT = "mutmut==3.8.1"
#: coverage.py with one context per test: which test runs which line (tools/mutation_reach.py)
COVERAGE = "pytest-cov==7.1.0"
#: ends one hanging test (a mutant's endless loop) instead of waiting for the run's limit
TIMEOUT = "pytest-timeout==2.4.0"

# status names of `mutmut results --all true`
KILLED = {"killed", "timeout", "caught by type check", "segfault"}
SURVIVED = {"survived", "suspicious"}
UNTESTED = {"no tests", "skipped", "not checked"}


@dataclass(frozen=True)
class Module:
    key: str
    source: str  # path in the rearranged copy
    tests: tuple[str, ...]

    @property
    def dotted(self) -> str:
        return self.source.removeprefix("src/").removesuffix(".py").replace("/", ".")


_JOURNAL_TESTS = (
    "tests/core/test_journal.py",
    "tests/core/test_journal_format.py",
    "tests/core/test_journal_open.py",
    "tests/core/test_journal_fast_path.py",
    "tests/core/test_journal_anchor.py",
    "tests/core/test_reconcile.py",
    "tests/core/test_cleanup_journal.py",
)
_CLEANUP_TESTS = (
    "tests/core/test_cleanup.py",
    "tests/core/test_cleanup_choice.py",
    "tests/core/test_cleanup_journal.py",
    "tests/core/test_cleanup_crash.py",
    "tests/core/test_cleanup_writer_mark.py",
    "tests/core/test_hostile_files.py",
)
_SPEC_TESTS = ("tests/spec",)

#: In priority order.  Reconciliation lives in journal.py (no reconcile module).
MODULES = (
    Module("journal_format", "src/toolswap/journal_format.py", _JOURNAL_TESTS),
    Module("journal", "src/toolswap/journal.py", _JOURNAL_TESTS),
    Module("cleanup", "src/toolswap/cleanup.py", _CLEANUP_TESTS),
    Module(
        "journal_anchor",
        "src/toolswap/journal_anchor.py",
        ("tests/core/test_journal_anchor.py", "tests/core/test_journal_open.py"),
    ),
    Module(
        "high_water",
        "src/toolswap/high_water.py",
        ("tests/core/test_high_water.py", "tests/core/test_externalizer.py"),
    ),
    *(
        Module(f"spec.{name}", f"src/toolswap/spec/{name}.py", _SPEC_TESTS)
        for name in (
            "lease",
            "owner",
            "reconcile",
            "cleanup",
            "invariants",
            "actors",
            "symmetry",
            "system",
            "variants",
        )
    ),
)

#: The modules whose decisions delete or keep data (issue 39): the default set.
DECIDING = (
    "cleanup",
    "journal_anchor",
    "high_water",
    "spec.cleanup",
    "spec.reconcile",
    "journal",
    "spec.owner",
)

#: What a survivor of a module's own tests is run against before it is called equivalent.
BROAD = ("tests/core", "tests/crash", "tests/stateful", "tests/spec")
#: Left out of every run: CrossHair's subprocess check (tens of seconds a run,
#: and mutmut's trampolines do not reach it) and the PostgreSQL tests (a server).
PYTEST_ARGS = (
    "-p",
    "no:cacheprovider",
    "-m",
    "not crosshair and not postgres",
    "--ignore=tests/spec/test_crosshair.py",
)


def _gap_tests(module: Module) -> tuple[str, ...]:
    """The tests/**/test_mutation_gaps_<module>.py files written for this module."""
    stem = module.key.split(".")[-1]
    found = [
        *ROOT.glob(f"tests/*/test_mutation_gaps_{stem}.py"),
        *ROOT.glob(f"tests/*/test_mutation_gaps_{stem}_*.py"),
    ]
    return tuple(
        str(p.relative_to(ROOT))
        for p in sorted(found)
        if (p.parent.name == "spec") == module.key.startswith("spec.")
    )


def _sync_gap_tests(copy: Path, module: Module) -> None:
    """Bring this module's gap tests from the checkout into the copy (they are written
    while a long run goes on); nothing else of the copy changes."""
    for gap in _gap_tests(module):
        source, target = ROOT / gap, copy / gap
        data = source.read_bytes()
        if not target.exists() or target.read_bytes() != data:
            partial = target.with_suffix(".partial")
            partial.write_bytes(data)
            partial.rename(target)


def _in_sample(name: str, module: Module, every: int) -> bool:
    """Whether mutant ``name`` is of ``module`` and in its every-Nth sample."""
    return name.startswith(module.dotted + ".") and int(name.rpartition("_")[2]) % every == 0


def _run(cmd: list[str], cwd: Path, **kw: object) -> subprocess.CompletedProcess[str]:
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, cwd=cwd, text=True, check=True, **kw)  # type: ignore[call-overload, no-any-return]


def make_copy(copy: Path, source: str) -> Path:
    """Copy the checkout (working tree or HEAD) to ``copy`` and rearrange it (see above)."""
    if copy.exists():
        shutil.rmtree(copy)
    copy.parent.mkdir(parents=True, exist_ok=True)
    if source == "head":
        # The committed tree (read with `git archive`, which changes nothing in
        # the checkout) plus this task's own gap tests from the working tree.
        copy.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", "HEAD"], capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(copy)], input=archive, check=True)
        for gap in ROOT.glob("tests/*/test_mutation_gaps_*.py"):
            shutil.copy2(gap, copy / gap.relative_to(ROOT))
    else:
        ignore = shutil.ignore_patterns(
            ".git", "mutants", "__pycache__", ".hypothesis", "*.egg-info", ".*_cache"
        )
        shutil.copytree(ROOT, copy, ignore=ignore, symlinks=True)
    for name in ("spec", "faultinject"):
        (copy / name).rename(copy / "src" / "toolswap" / name)
        (copy / name).symlink_to(Path("src") / "toolswap" / name)
    pyproject = copy / "pyproject.toml"
    text, n = re.subn(
        r"^package-dir = \{.*\}$", 'package-dir = { "" = "src" }', pyproject.read_text(), flags=re.M
    )
    if n != 1:
        sys.exit("pyproject.toml: expected one package-dir line to rewrite")
    pyproject.write_text(text)
    (copy / "TREE_STATE").write_text(tree_state(source) + "\n")
    return copy


def tree_state(source: str) -> str:
    """What was measured: HEAD's commit, plus a hash of the uncommitted diff and the time."""
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if source == "head":
        return f"HEAD {head}"
    diff = subprocess.run(
        ["git", "-C", str(ROOT), "diff", "HEAD"], capture_output=True, check=True
    ).stdout
    stamp = time.strftime("%Y-%m-%d %H:%M", time.localtime())
    return (
        f"HEAD {head} + working tree (diff sha256 {hashlib.sha256(diff).hexdigest()[:12]}), {stamp}"
    )


def file_state(path: Path) -> str:
    """The sha256 of one measured file, to say which version of it a row is about."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def prepare(work: Path, source: str) -> tuple[Path, Path]:
    """Copy the checkout to work/copy, rearrange it, and build work/venv."""
    copy, venv = make_copy(work / "copy", source), work / "venv"
    python = venv / "bin" / "python"
    if not python.exists():
        _run([sys.executable, "-m", "venv", str(venv)], cwd=work)
    _run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "-e",
            f"{copy}[test]",
            MUTMUT,
            COVERAGE,
            TIMEOUT,
        ],
        cwd=work,
    )
    # The tests must import the copy, not the checkout.
    probe = _run(
        [
            str(python),
            "-c",
            "import toolswap, toolswap.spec; print(toolswap.__file__, toolswap.spec.__file__)",
        ],
        cwd=work,
        capture_output=True,
    ).stdout.split()
    if not all(p.startswith(str(copy)) for p in probe):
        sys.exit(f"the venv imports {probe}, not the copy in {copy}")
    return copy, venv


def configure(copy: Path, modules: tuple[Module, ...]) -> None:
    """Write the [tool.mutmut] section of the copy (never of the checkout)."""
    tests = sorted({t for m in modules for t in (*m.tests, *_gap_tests(m))})
    section = {
        "source_paths": ["src"],
        "only_mutate": [m.source for m in modules],
        "also_copy": ["spec", "faultinject", "docs", "README.md", "benchmarks", ".ci"],
        # test_purity reads spec/*.py as text and would see mutmut's own import.
        "pytest_add_cli_args": [
            "-p",
            "no:cacheprovider",
            "-m",
            "not crosshair and not postgres",
            "--ignore=tests/spec/test_purity.py",
            "--ignore=tests/spec/test_crosshair.py",
        ],
        "pytest_add_cli_args_test_selection": tests,
        "use_git_change_detection": False,
    }
    lines = ["", "[tool.mutmut]"] + [f"{k} = {json.dumps(v)}" for k, v in section.items()]
    pyproject = copy / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + "\n".join(lines) + "\n")


def results(copy: Path, venv: Path) -> dict[str, str]:
    out = subprocess.run(
        [str(venv / "bin" / "mutmut"), "results", "--all", "true"],
        cwd=copy,
        text=True,
        capture_output=True,
        check=True,
    ).stdout
    status: dict[str, str] = {}
    for line in out.splitlines():
        name, sep, value = line.strip().rpartition(": ")
        if sep:
            status[name] = value
    return status


def diff(copy: Path, venv: Path, name: str) -> str:
    shown = subprocess.run(
        [str(venv / "bin" / "mutmut"), "show", name], cwd=copy, text=True, capture_output=True
    )
    return shown.stdout.strip()


def _row(m: Module, mine: dict[str, str], every: int, copy: Path, venv: Path) -> dict[str, Any]:
    killed = sum(v in KILLED for v in mine.values())
    unchecked = sum(v == "not checked" for v in mine.values())
    return {
        "module": m.source,
        "sample": f"every {every}th mutant" if every > 1 else "all",
        "killed": killed,
        "run": len(mine) - unchecked,
        "score": round(100 * killed / max(1, len(mine) - unchecked), 1),
        "survivors": {
            k: {"status": v, "diff": diff(copy, venv, k)}
            for k, v in sorted(mine.items())
            if v not in KILLED and v != "not checked"
        },
    }


def save(work: Path, copy: Path, venv: Path, modules: tuple[Module, ...], every: int) -> None:
    """Record each module's first ("before") result in work/results/<module>.json."""
    status = results(copy, venv)
    saved = work / "results"
    saved.mkdir(exist_ok=True)
    for m in modules:
        mine = {k: v for k, v in status.items() if _in_sample(k, m, every)}
        if any(v != "not checked" for v in mine.values()):
            row = _row(m, mine, every, copy, venv)
            (saved / f"{m.key}.json").write_text(json.dumps(row, indent=1))


def _pytest(
    python: Path,
    cwd: Path,
    tests: list[str],
    env: dict[str, str],
    timeout: float,
    failing: list[str],
    per_test_timeout: float = 600,
) -> tuple[str, str]:
    """Run ``tests``, stopping at the first failure: the outcome and the failing test.

    The outcome is "passed", "failed", "timeout" or "exit N" (pytest's status).

    The run is its own process group, so a mutant that hangs is ended with
    everything it started when the time is up.
    """
    # Tests that fail on the unmutated copy never count as killing a mutant.
    deselect = [arg for test in failing for arg in ("--deselect", test)]
    # pytest-timeout ends one hanging test early (each test its own limit, from
    # tools/mutation_timeouts.py when the run has a map); ``timeout`` bounds the run.
    per_test = [f"--timeout={per_test_timeout:.0f}"]
    if "MUTATION_TIMEOUTS" in env:
        per_test += ["-p", "mutation_timeouts"]
    cmd = [str(python), "-m", "pytest", "-x", "-q", "-rfE", *per_test, *PYTEST_ARGS, *deselect]
    cmd += tests
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return "timeout", ""
    failed = [
        line.split()[1] for line in out.splitlines() if line.startswith(("FAILED ", "ERROR "))
    ]
    if proc.returncode == 0:
        return "passed", ""
    if "+++ Timeout +++" in out:
        return "timeout", failed[0] if failed else ""
    if proc.returncode == 1:
        return "failed", failed[0] if failed else "(a test failed)"
    return f"exit {proc.returncode}", out[-2000:]


def _timeout(reach: Reach, tests: list[str]) -> float:
    """Generous: five times what the tests took under coverage, plus start-up."""
    return 180 + 5 * sum(reach.durations.get(t, 10.0) for t in tests)


def _per_test_timeout(reach: Reach, tests: list[str]) -> float:
    """One test: ten times the slowest of them under coverage, and at least a minute."""
    return max(60.0, 10 * max((reach.durations.get(t, 10.0) for t in tests), default=10.0))


def _in_files(test: str, files: tuple[str, ...]) -> bool:
    path = test.partition("::")[0]
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in files)


def _scopes(source: str) -> dict[str, range]:
    """Dotted name of each function and class -> its lines."""
    out: dict[str, range] = {}

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                out[name] = range(child.lineno, (child.end_lineno or child.lineno) + 1)
                walk(child, name + ".")
            else:
                walk(child, prefix)

    walk(ast.parse(source), "")
    return out


def _env(copy: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "HYPOTHESIS_PROFILE": "ci",
        "PYTHONPATH": f"{copy / 'src'}{os.pathsep}{TOOLS}",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    limits = copy / ".mutation-timeouts.json"
    if limits.exists():
        env["MUTATION_TIMEOUTS"] = str(limits)
    return env


def _write_timeouts(copy: Path, reach: Reach) -> None:
    """Each test's own limit: ten times its time in the coverage run, at least 30 s."""
    limits = {test: max(30.0, 10 * seconds) for test, seconds in reach.durations.items()}
    limits[""] = 600.0  # a test the coverage run did not time (a new gap test)
    (copy / ".mutation-timeouts.json").write_text(json.dumps(limits))


def ast_copy(work: Path, source: str, venv: Path) -> Path:
    """The copy our own operators write into (never the one mutmut works in)."""
    copy = make_copy(work / "ast-copy", source)
    probe = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import toolswap.spec as s; print(s.__file__)"],
        cwd=copy, env=_env(copy), text=True, capture_output=True, check=True,
    ).stdout.strip()  # fmt: skip
    if not probe.startswith(str(copy)):
        sys.exit(f"the venv imports {probe}, not the copy in {copy}")
    return copy


def measure_reach(
    work: Path, copy: Path, venv: Path, modules: tuple[Module, ...], tests: list[str]
) -> Reach:
    started = time.monotonic()
    reach = mutation_reach.measure(
        venv / "bin" / "python", copy, [m.source for m in modules], tests,
        list(PYTEST_ARGS), _env(copy),
    )  # fmt: skip
    reach.save(work / "reach.json")
    (work / "reach.txt").write_text(
        f"{(copy / 'TREE_STATE').read_text().strip()}; {' '.join(tests)}; "
        f"{time.monotonic() - started:.0f}s; "
        f"failed on the unmutated copy: {reach.failed}\n"
    )
    return reach


def run_ast(
    work: Path,
    copy: Path,
    venv: Path,
    reach: Reach,
    m: Module,
    seed: int,
    sample: int,
    gaps_first: bool = False,
) -> dict[str, Any]:
    """Every mutant of our own operators in ``m``, each through the two stages.

    Stage "selection": the module's own tests that run the mutated line,
    fastest first, stopping at the first failure.  A mutant they let live goes
    to stage "broad": the rest of the module's tests and every test of the
    broad suite that runs the mutated line.  A line no test was seen running
    (it ran at import time, or in no test) gets the whole selection, then the
    broad suite's tests that run its function (its module, at module level).
    Stage "gap": the module's tests/*/test_mutation_gaps_<module>*.py, last,
    so a mutant killed there is one the suite as it was let live (with
    ``gaps_first``, second: a mutant killed there never met the broad stage).
    """
    _write_timeouts(copy, reach)
    target = copy / m.source
    saved = work / "ast-results"
    saved.mkdir(exist_ok=True)
    pristine = saved / f"{m.key}.original.py"
    if not pristine.exists():
        pristine.write_text(target.read_text())
    original = pristine.read_text()
    if target.read_text() != original:  # a run was stopped with a mutant in place
        target.write_text(original)
    out_path = saved / f"{m.key}.json"
    done: dict[str, dict[str, Any]] = {}
    if out_path.exists():
        done = {r["id"]: r for r in json.loads(out_path.read_text())["mutants"]}
    sites = ast_mutants.find_sites(original)
    if sample:
        sites = sorted(random.Random(seed).sample(sites, min(sample, len(sites))),
                       key=lambda s: (s.lineno, s.col, s.operator))  # fmt: skip
    scopes = _scopes(original)
    everything = range(1, original.count("\n") + 2)
    python = venv / "bin" / "python"
    rows: list[dict[str, Any]] = []
    for site in sites:
        mutant = ast_mutants.mutate(m.source, original, site)
        if mutant.id in done and done[mutant.id]["verdict"] != "error":
            rows.append(done[mutant.id])
            continue
        started = time.monotonic()
        _sync_gap_tests(copy, m)
        line_tests, at_import = reach.tests(m.source, [site.stmt_lineno])
        # A line no test was seen running either ran while the module was imported
        # (before coverage started: pytest loads the package's plugin first) or
        # runs in no test: either way the whole selection is its first stage.
        unseen = site.stmt_lineno not in reach.lines.get(m.source, {})
        whole = at_import or site.import_time or unseen
        stage1 = list(m.tests) if whole else [t for t in line_tests if _in_files(t, m.tests)]
        # The gap tests written for this module (perhaps while the run goes on, so
        # newer than the coverage map) come last: a mutant they kill is one the
        # suite as it was let live.
        gaps = list(_gap_tests(m))
        if whole:
            # Not seen in any test: whatever runs its function (its module, at import time).
            scope = everything if site.import_time else scopes.get(site.scope, everything)
            broad, _ = reach.tests(m.source, scope)
            if not broad:
                broad, _ = reach.tests(m.source, everything)
            stage2 = []
        else:
            # These operators change nothing until the mutated statement runs, so a
            # test that never runs that line cannot tell the mutant from the original.
            broad = line_tests
            stage2 = list(m.tests)
        stage2 += [t for t in broad if t not in stage1 and not _in_files(t, m.tests)]
        verdict, stage, killer = "survived", "", ""
        target.write_text(mutant.source)
        try:
            # The fastest test that runs the line goes alone first, with a tight
            # limit: it is where an endless loop usually shows, and a kill there is cheap.
            stages = [("selection", stage1[:1]), ("selection", stage1[1:])]
            stages += [("broad", stage2), ("gap", gaps)]
            if gaps_first:
                stages[2:] = stages[:1:-1]
            for stage_name, tests in stages:
                if not tests:
                    continue
                result, detail = _pytest(
                    python,
                    copy,
                    tests,
                    _env(copy),
                    _timeout(reach, tests),
                    reach.failed,
                    _per_test_timeout(reach, tests),
                )
                if result == "passed":
                    continue
                stage = stage_name
                if result == "timeout":
                    verdict, killer = "timeout", ""
                elif result == "failed":
                    verdict, killer = "killed", detail
                elif result == "exit 4" and "ERROR: not found:" in detail:
                    # A test the coverage run saw is not collected any more: its
                    # parameters are read from the sources (the crash points), and
                    # the mutant removed one.
                    verdict, killer = "collection", detail.partition("ERROR: not found: ")[2]
                    killer = killer.splitlines()[0].replace(str(copy) + "/", "")
                elif _imports(python, copy, m):
                    verdict, killer = "error", detail
                else:
                    verdict, killer = "import", ""
                break
        finally:
            target.write_text(original)
        row = {
            "id": mutant.id,
            "operator": site.operator,
            "line": site.lineno,
            "scope": site.scope or "<module>",
            "whole_selection": whole,
            "tests": [len(stage1), len(stage2), len(gaps)],
            "order": "selection, gap, broad" if gaps_first else "selection, broad, gap",
            "verdict": verdict,
            "stage": stage,
            "killer": killer,
            "seconds": round(time.monotonic() - started, 1),
            "diff": mutant.diff,
        }
        rows.append(row)
        print(f"{mutant.id} {verdict} {stage} {killer} ({row['seconds']}s)", flush=True)
        _write_ast(out_path, m, original, seed, sample, rows, done)
    return _write_ast(out_path, m, original, seed, sample, rows, done)


def _imports(python: Path, copy: Path, m: Module) -> bool:
    check = subprocess.run(
        [str(python), "-c", f"import {m.dotted}"], cwd=copy, env=_env(copy), capture_output=True
    )
    return check.returncode == 0


def _write_ast(
    path: Path, m: Module, original: str, seed: int, sample: int,
    rows: list[dict[str, Any]], done: dict[str, dict[str, Any]],
) -> dict[str, Any]:  # fmt: skip
    kept = {r["id"] for r in rows}
    every = rows + [r for k, r in done.items() if k not in kept]
    killed = sum(r["verdict"] in AST_KILLED for r in every)
    result = {
        "module": m.source,
        "file_sha256": hashlib.sha256(original.encode()).hexdigest()[:12],
        "seed": seed,
        "sample": sample or "all",
        "killed": killed,
        "total": sum(r["verdict"] != "error" for r in every),
        "mutants": sorted(every, key=lambda r: (r["line"], r["id"])),
    }
    path.write_text(json.dumps(result, indent=1))
    return result


#: Verdicts of our own operators that count as killed: a failing test, a run
#: past its time limit (a mutant that hangs), a module that no longer imports,
#: a test generated from the sources that the mutant made disappear.
AST_KILLED = {"killed", "timeout", "import", "collection"}


def _mutmut_scope(name: str, m: Module) -> str:
    """``toolswap.cleanup.xǁPlanEntryǁfrom_dict__mutmut_3`` -> ``PlanEntry.from_dict``."""
    local = name.removeprefix(m.dotted + ".").rpartition("__mutmut_")[0]
    if local.startswith("x\u01c1"):
        return ".".join(local.split("\u01c1")[1:])
    return local.removeprefix("x_")


def mutmut_broad(
    work: Path, copy: Path, venv: Path, reach: Reach, modules: tuple[Module, ...]
) -> None:
    """Run each recorded mutmut survivor against the broad suite's tests that reach it.

    The tests are those that run any line of the mutated function (coverage of
    the unmutated copy), plus the module's gap tests; mutmut's own switch
    (``MUTANT_UNDER_TEST`` over the ``mutants/`` tree) turns the mutant on.
    Writes ``results/<module>.after.json``.
    """
    mutants = copy / "mutants"
    python = venv / "bin" / "python"
    for m in modules:
        before_path = work / "results" / f"{m.key}.json"
        if not before_path.exists():
            continue
        gaps = _gap_tests(m)
        for gap in gaps:  # written after mutmut copied the tests
            shutil.copy2(ROOT / gap, mutants / gap)
        before = _load(before_path)
        scopes = _scopes((copy / m.source).read_text())
        killers: dict[str, list[str]] = {}
        for name in before["survivors"]:
            scope = _mutmut_scope(name, m)
            lines = scopes.get(scope)
            tests = list(gaps)
            if lines is None:
                print(f"{name}: no function {scope!r} in {m.source}; gap tests only", flush=True)
            else:
                tests += [t for t in reach.tests(m.source, lines)[0] if t not in gaps]
            if not tests:
                continue
            env = {
                **_env(mutants),
                "MUTANT_UNDER_TEST": name,
            }
            result, detail = _pytest(
                python, mutants, tests, env, _timeout(reach, tests), reach.failed
            )
            print(f"{name}: {len(tests)} tests, {result} {detail[:200]}", flush=True)
            if result != "passed":
                killers[name] = [detail if result == "failed" else result]
        killed = before["killed"] + len(killers)
        after = {
            **before,
            "killed": killed,
            "score": round(100 * killed / max(1, before["run"]), 1),
            "survivors": {k: v for k, v in before["survivors"].items() if k not in killers},
            "killed_by_broad_suite": killers,
        }
        (work / "results" / f"{m.key}.after.json").write_text(json.dumps(after, indent=1))


def _load(path: Path) -> dict[str, Any]:
    row: dict[str, Any] = json.loads(path.read_text())
    if "run" not in row:  # written by an earlier version of this script
        row["run"] = row["total"] - row["not_checked"]
    return row


def summarize(work: Path) -> None:
    """Merge work/results/ (mutmut) and work/ast-results/ (ours) into summary.md and .json."""
    kills_path = work / "gap-kills.json"
    gap_kills: dict[str, str] = json.loads(kills_path.read_text()) if kills_path.exists() else {}
    rows: list[dict[str, Any]] = []
    for m in MODULES:
        row: dict[str, Any] = {"key": m.key, "module": m.source}
        before_path = work / "results" / f"{m.key}.json"
        if before_path.exists():
            before = _load(before_path)
            after_path = work / "results" / f"{m.key}.after.json"
            row["mutmut"] = {
                "before": before,
                "after": _load(after_path) if after_path.exists() else None,
            }
        ours_path = work / "ast-results" / f"{m.key}.json"
        if ours_path.exists():
            row["ours"] = json.loads(ours_path.read_text())
            for mutant in row["ours"]["mutants"]:
                if mutant["verdict"] == "survived" and mutant["id"] in gap_kills:
                    mutant["gap_test"] = gap_kills[mutant["id"]]
        after = row.get("mutmut", {}).get("after")
        for name in list(after["survivors"]) if after else ():
            if name in gap_kills:
                del after["survivors"][name]
                after["killed"] += 1
                after.setdefault("killed_by_gap_tests", {})[name] = gap_kills[name]
        if len(row) > 2:
            rows.append(row)
    (work / "summary.json").write_text(json.dumps(rows, indent=1))
    md = [
        "| module | mutmut: selection | + broad suite | + gap tests "
        "| ours: selection + broad | + gap tests |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        mm, ours = r.get("mutmut"), r.get("ours")
        first = f"{mm['before']['killed']}/{mm['before']['run']}" if mm else "-"
        after = mm and mm["after"]
        broad = f"{after['killed']}/{after['run']}" if after else "-"
        gaps = f"{after['killed']}/{after['run']}" if after else "-"
        if after:
            broad_killed = after["killed"] - len(after.get("killed_by_gap_tests", {}))
            broad = f"{broad_killed}/{after['run']}"
        mine = mine_gap = "-"
        if ours:
            suite = sum(x["verdict"] in AST_KILLED and x["stage"] != "gap" for x in ours["mutants"])
            by_gaps = sum(
                x["stage"] == "gap" or "gap_test" in x
                for x in ours["mutants"]
                if x["verdict"] != "error"
            )
            mine = f"{suite}/{ours['total']}"
            mine_gap = f"{suite + by_gaps}/{ours['total']}"
        md.append(f"| `{r['module']}` | {first} | {broad} | {gaps} | {mine} | {mine_gap} |")
    md.append("")
    for r in rows:
        mm, ours = r.get("mutmut"), r.get("ours")
        last = mm and (mm["after"] or mm["before"])
        for k, s in (last["survivors"] if last else {}).items():
            md += [f"### mutmut `{k}` ({s['status']})", "", "```diff", s["diff"], "```", ""]
        for mutant in ours["mutants"] if ours else ():
            if mutant["verdict"] not in AST_KILLED and "gap_test" not in mutant:
                md += [
                    f"### ours `{mutant['id']}` ({mutant['verdict']}, in {mutant['scope']})",
                    "",
                    "```diff",
                    mutant["diff"].rstrip("\n"),
                    "```",
                    "",
                ]
    (work / "summary.md").write_text("\n".join(md))
    print("\n".join(md[: len(rows) + 2]))
    print(f"details in {work / 'summary.md'}")


def check_mutant(work: Path, venv: Path, source: str, mutant_id: str, tests: list[str]) -> int:
    """Switch one recorded mutant on in a fresh copy and run ``tests`` (the gap tests' check).

    Our mutants are found by id in ``ast-results/`` and written into
    ``check-copy/`` (made from the checkout now, so it has the new tests);
    mutmut's (``toolswap.x.y__mutmut_N``) are switched on over mutmut's
    ``mutants/`` tree, into which the given tests are copied first.  Prints
    the outcome; returns 0 when a test failed (the mutant is killed).
    """
    python = venv / "bin" / "python"
    if "__mutmut_" in mutant_id:
        mutants = work / "copy" / "mutants"
        for test in tests:
            shutil.copy2(ROOT / test, mutants / test)
        env = {**_env(mutants), "MUTANT_UNDER_TEST": mutant_id}
        result, detail = _pytest(python, mutants, tests, env, 1800, [])
    else:
        module_key = mutant_id.partition(":")[0]
        copy = make_copy(work / "check-copy", source)
        target = copy / module_key
        # An id holds only for the file it was made from: the measured version if
        # there is one (the checkout's may have changed since), else the checkout's.
        measured = [
            work / "ast-results" / f"{m.key}.original.py" for m in MODULES if m.source == module_key
        ]
        if measured and measured[0].exists():
            target.write_text(measured[0].read_text())
        original = target.read_text()
        site = next(
            (
                s
                for s in ast_mutants.find_sites(original)
                if ast_mutants.mutate(module_key, original, s).id == mutant_id
            ),
            None,
        )
        if site is None:
            sys.exit(f"{mutant_id}: no such mutant of {module_key} as it is now")
        target.write_text(ast_mutants.mutate(module_key, original, site).source)
        result, detail = _pytest(python, copy, tests, _env(copy), 1800, [])
    print(result, detail[-1500:])
    if result != "passed":
        _record_gap_kill(work, mutant_id, detail if result == "failed" else result)
    return 0 if result != "passed" else 1


def _record_gap_kill(work: Path, mutant_id: str, killer: str) -> None:
    """Note that a gap test kills this survivor, in ``gap-kills.json`` (apart from the
    results, which a run still going on rewrites)."""
    path = work / "gap-kills.json"
    kills = json.loads(path.read_text()) if path.exists() else {}
    kills[mutant_id] = killer
    path.write_text(json.dumps(kills, indent=1, sort_keys=True))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help=f"module keys (default: {' '.join(DECIDING)})")
    parser.add_argument("--work", type=Path, default=Path("/tmp/toolswap-mutation"))
    parser.add_argument(
        "--ops",
        choices=("both", "mutmut", "ast"),
        default="both",
        help="which operator set: mutmut's, our own (tools/ast_mutants.py), or both",
    )
    parser.add_argument("--max-children", type=int, default=1)
    parser.add_argument("--list", action="store_true", help="print the modules and their tests")
    parser.add_argument("--report-only", action="store_true", help="summarize the last runs")
    parser.add_argument(
        "--reach-only", action="store_true", help="make the copies and the coverage map, stop"
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="reuse the copies, venv, coverage map and results of the last run (no fresh copy)",
    )
    parser.add_argument(
        "--sample",
        type=int,
        default=1,
        metavar="N",
        help="mutmut: run only every Nth mutant of each module (by number); default all",
    )
    parser.add_argument(
        "--ast-sample",
        type=int,
        default=0,
        metavar="K",
        help="our operators: K sites per module drawn with --seed (default 0: every site)",
    )
    parser.add_argument("--seed", type=int, default=39)
    parser.add_argument(
        "--venv",
        type=Path,
        help="ours only: a venv this tool built before (its copy is put on PYTHONPATH "
        "instead); skips the copy for mutmut and the install",
    )
    parser.add_argument(
        "--reach-tests",
        nargs="+",
        default=list(BROAD),
        metavar="PATH",
        help="the tests the coverage run measures (default: the broad suite)",
    )
    parser.add_argument(
        "--gaps-first",
        action="store_true",
        help="ours: run the gap tests before the broad stage (faster; the suite-only "
        "score is then a lower bound)",
    )
    parser.add_argument(
        "--check",
        metavar="MUTANT",
        help="switch one recorded mutant on and run the tests named as modules (gap tests)",
    )
    parser.add_argument(
        "--from",
        dest="source",
        choices=("worktree", "head"),
        default="worktree",
        help="copy the working tree (default) or the committed HEAD plus the gap tests",
    )
    args = parser.parse_args(argv)
    by_key = {m.key: m for m in MODULES}
    unknown = [k for k in args.modules if k not in by_key and not args.check]
    if unknown:
        parser.error(f"unknown modules {unknown}; known: {list(by_key)}")
    if args.check:
        work = args.work.resolve()
        return check_mutant(work, work / "venv", args.source, args.check, args.modules)
    chosen = tuple(by_key[k] for k in (args.modules or DECIDING))
    if args.list:
        for m in chosen:
            print(m.key, m.source, *m.tests, *_gap_tests(m))
        return 0
    work = args.work.resolve()
    if work == ROOT or ROOT in work.parents:
        parser.error("--work must be outside the checkout")
    # Other people share this machine: every test run below inherits the lowest priority.
    os.nice(19)
    copy, venv = work / "copy", work / "venv"
    if args.report_only:
        summarize(work)
        return 0
    if args.venv is not None:
        if args.ops != "ast":
            parser.error("--venv is for --ops ast")
        venv = args.venv.resolve()
    if args.keep:
        acopy = work / "ast-copy"
    else:
        if args.venv is None:
            copy, venv = prepare(work, args.source)
            configure(copy, chosen)
        acopy = ast_copy(work, args.source, venv)
        for stale in ("reach.json", "results", "ast-results"):
            if (work / stale).is_dir():
                shutil.rmtree(work / stale)
            elif (work / stale).exists():
                (work / stale).unlink()
    if (work / "reach.json").exists():
        reach = Reach.load(work / "reach.json")
    else:
        reach = measure_reach(work, acopy, venv, chosen, args.reach_tests)
    if args.reach_only:
        return 0
    if args.ops in ("both", "ast"):
        for m in chosen:
            started = time.monotonic()
            row = run_ast(work, acopy, venv, reach, m, args.seed, args.ast_sample, args.gaps_first)
            print(
                f"{m.key}: ours {row['killed']}/{row['total']} "
                f"in {time.monotonic() - started:.0f}s",
                flush=True,
            )
    if args.ops in ("both", "mutmut"):
        run_mutmut(work, copy, venv, chosen, args.sample, args.max_children)
        mutmut_broad(work, copy, venv, reach, chosen)
    summarize(work)
    return 0


def run_mutmut(
    work: Path, copy: Path, venv: Path, chosen: tuple[Module, ...], every: int, children: int
) -> None:
    env = {**os.environ, "HYPOTHESIS_PROFILE": "ci"}
    mutmut = [str(venv / "bin" / "mutmut"), "run", "--max-children", str(children)]
    if not (copy / "mutants").is_dir():  # generate every mutant and collect the stats once
        subprocess.run([*mutmut, "no.such.mutant"], cwd=copy, env=env, check=False)
    for m in chosen:
        started = time.monotonic()
        # Named mutants are always rerun: name only those with no result yet.
        names = sorted(
            k
            for k, v in results(copy, venv).items()
            if _in_sample(k, m, every) and v == "not checked"
        )
        if names:
            subprocess.run([*mutmut, *names], cwd=copy, env=env, check=False)
        print(f"{m.key}: {len(names)} mutants in {time.monotonic() - started:.0f}s", flush=True)
        save(work, copy, venv, (m,), every)


if __name__ == "__main__":
    raise SystemExit(main())
