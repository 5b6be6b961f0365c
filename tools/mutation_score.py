"""Measure the mutation score of the protocol core and the spec with mutmut.

Usage (from the checkout; takes tens of minutes on two cores)::

    python tools/mutation_score.py                       # every module, every mutant
    python tools/mutation_score.py --from head --sample 5 journal_format  # committed tree, 1/5
    python tools/mutation_score.py --keep --sample 10 journal cleanup  # same copy, more modules
    python tools/mutation_score.py --after journal_format journal  # survivors vs the gap tests
    python tools/mutation_score.py --list                # the modules and their tests
    python tools/mutation_score.py --report-only         # re-merge the recorded results

docs/mutation.md has the commands that produced its numbers.

It never touches the checkout it is run from.  It copies the working tree
(``.git`` aside) to ``--work`` (default ``/tmp/toolswap-mutation``), builds a
virtualenv there with the test extra and ``mutmut==3.8.1``, runs ``mutmut run``
once per module on its own mutants, and writes ``summary.md`` and
``summary.json`` (killed/total per module, each surviving mutant and its diff)
into ``--work``.  The verdicts on the survivors live in ``docs/mutation.md``.

Why the copy is rearranged: pyproject maps ``toolswap.spec`` to ``spec/`` and
``toolswap.faultinject`` to ``faultinject/`` (package-dir).  mutmut names a
mutant after the file's path under ``src/`` and its trampoline compares that
name with the running function's ``__module__``; for ``spec/lease.py`` the two
disagree (``spec.lease`` vs ``toolswap.spec.lease``) and no mutant would ever be
activated.  So the copy moves both folders under ``src/toolswap/`` (a plain src
layout, which also makes the editable install a plain path that mutmut can
shadow with its ``mutants/src``), and leaves links at the old places for the
tests that import ``faultinject`` or read ``spec/`` by path.

Which tests: mutmut records which test reaches which function during its first
(stats) pass and runs, for each mutant, only those tests; the per-module list
below bounds that pass to the tests that exercise the module.  The CrossHair
check (``-m crosshair``) is left out: it runs in a subprocess that mutmut's
trampolines do not reach, and takes tens of seconds per run.  Hypothesis runs
with the ``ci`` profile (derandomized, no example database) so two runs give
the same score.

Not part of ``.ci/run``: it is far too slow for it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MUTMUT = "mutmut==3.8.1"

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
_SPEC_TESTS = ("tests/spec",)

#: In priority order.  Reconciliation lives in journal.py (no reconcile module).
MODULES = (
    Module("journal_format", "src/toolswap/journal_format.py", _JOURNAL_TESTS),
    Module("journal", "src/toolswap/journal.py", _JOURNAL_TESTS),
    Module(
        "cleanup",
        "src/toolswap/cleanup.py",
        (
            "tests/core/test_cleanup.py",
            "tests/core/test_cleanup_journal.py",
            "tests/core/test_cleanup_crash.py",
            "tests/core/test_hostile_files.py",
        ),
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


def _gap_tests(module: Module) -> tuple[str, ...]:
    """The tests/**/test_mutation_gaps_<module>.py files written for this module."""
    stem = module.key.split(".")[-1]
    return tuple(
        str(p.relative_to(ROOT))
        for p in sorted(ROOT.glob(f"tests/*/test_mutation_gaps_{stem}.py"))
        if (p.parent.name == "spec") == module.key.startswith("spec.")
    )


def _in_sample(name: str, module: Module, every: int) -> bool:
    """Whether mutant ``name`` is of ``module`` and in its every-Nth sample."""
    return name.startswith(module.dotted + ".") and int(name.rpartition("_")[2]) % every == 0


def _run(cmd: list[str], cwd: Path, **kw: object) -> subprocess.CompletedProcess[str]:
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, cwd=cwd, text=True, check=True, **kw)  # type: ignore[call-overload, no-any-return]


def prepare(work: Path, source: str) -> tuple[Path, Path]:
    """Copy the checkout to work/copy, rearrange it, and build work/venv."""
    copy, venv = work / "copy", work / "venv"
    if copy.exists():
        shutil.rmtree(copy)
    work.mkdir(parents=True, exist_ok=True)
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
    python = venv / "bin" / "python"
    if not python.exists():
        _run([sys.executable, "-m", "venv", str(venv)], cwd=work)
    _run([str(python), "-m", "pip", "install", "-q", "-e", f"{copy}[test]", MUTMUT], cwd=work)
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


def save_after(work: Path, copy: Path, venv: Path, modules: tuple[Module, ...]) -> None:
    """Rerun each recorded survivor against the module's gap tests; write <module>.after.json.

    A survivor counts as killed when at least one gap test fails with it active
    (mutmut's own switch: ``MUTANT_UNDER_TEST`` over the ``mutants/`` tree).
    The rest of the suite had already let it live, so this is the same verdict
    a full rerun would give, at a fraction of its cost.
    """
    mutants = copy / "mutants"
    for m in modules:
        gaps = _gap_tests(m)
        for gap in gaps:  # the copy's tests are those of the recorded run
            shutil.copy2(ROOT / gap, mutants / gap)
        before = _load(work / "results" / f"{m.key}.json")
        killers: dict[str, list[str]] = {}
        for name in before["survivors"]:
            if not gaps:
                break
            env = {**os.environ, "MUTANT_UNDER_TEST": name, "PYTHONPATH": str(mutants / "src")}
            env["HYPOTHESIS_PROFILE"] = "ci"
            run = subprocess.run(
                [
                    str(venv / "bin" / "python"),
                    "-m",
                    "pytest",
                    "-q",
                    "-p",
                    "no:cacheprovider",
                    "-rf",
                    *gaps,
                ],
                cwd=mutants,
                env=env,
                text=True,
                capture_output=True,
                timeout=600,
            )
            failed = [
                line.split()[1] for line in run.stdout.splitlines() if line.startswith("FAILED ")
            ]
            if run.returncode != 0:
                killers[name] = failed or [f"exit {run.returncode}"]
        killed = before["killed"] + len(killers)
        after = {
            **before,
            "killed": killed,
            "score": round(100 * killed / max(1, before["run"]), 1),
            "survivors": {k: v for k, v in before["survivors"].items() if k not in killers},
            "killed_by_gap_tests": killers,
        }
        (work / "results" / f"{m.key}.after.json").write_text(json.dumps(after, indent=1))


def _load(path: Path) -> dict[str, Any]:
    row: dict[str, Any] = json.loads(path.read_text())
    if "run" not in row:  # written by an earlier version of this script
        row["run"] = row["total"] - row["not_checked"]
    return row


def summarize(work: Path) -> None:
    """Merge work/results/ into summary.md and summary.json."""
    saved = work / "results"
    rows: list[dict[str, Any]] = []
    for m in MODULES:
        if not (saved / f"{m.key}.json").exists():
            continue
        before = _load(saved / f"{m.key}.json")
        after_path = saved / f"{m.key}.after.json"
        after = _load(after_path) if after_path.exists() else before
        rows.append({"key": m.key, "before": before, "after": after})
    (work / "summary.json").write_text(json.dumps(rows, indent=1))
    md = [
        "| module | sample | before: killed/run | after: killed/run |",
        "| --- | --- | --- | --- |",
    ]
    for r in rows:
        b, a = r["before"], r["after"]
        md.append(
            f"| `{b['module']}` | {b['sample']} | {b['killed']}/{b['run']} ({b['score']}%) "
            f"| {a['killed']}/{a['run']} ({a['score']}%) |"
        )
    md.append("")
    for r in rows:
        for k, s in r["after"]["survivors"].items():
            md += [f"### `{k}` ({s['status']})", "", "```diff", s["diff"], "```", ""]
    (work / "summary.md").write_text("\n".join(md))
    print("\n".join(md[: len(rows) + 2]))
    print(f"details in {work / 'summary.md'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help="module keys (default: all, in order)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/toolswap-mutation"))
    parser.add_argument("--max-children", type=int, default=2)
    parser.add_argument("--list", action="store_true", help="print the modules and their tests")
    parser.add_argument("--report-only", action="store_true", help="summarize the last runs")
    parser.add_argument(
        "--keep",
        action="store_true",
        help="reuse the copy, venv and mutmut's cache of the last run (no fresh copy)",
    )
    parser.add_argument(
        "--sample",
        type=int,
        default=1,
        metavar="N",
        help="run only every Nth mutant of each module (by number); the rest stay 'not checked'",
    )
    parser.add_argument(
        "--after",
        action="store_true",
        help="rerun the recorded survivors against the gap tests (needs the recorded run's copy)",
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
    unknown = [k for k in args.modules if k not in by_key]
    if unknown:
        parser.error(f"unknown modules {unknown}; known: {list(by_key)}")
    chosen = tuple(by_key[k] for k in args.modules) if args.modules else MODULES
    if args.list:
        for m in chosen:
            print(m.key, m.source, *m.tests, *_gap_tests(m))
        return 0
    work = args.work.resolve()
    if work == ROOT or ROOT in work.parents:
        parser.error("--work must be outside the checkout")
    copy, venv = work / "copy", work / "venv"
    if args.report_only:
        summarize(work)
        return 0
    if args.after:
        save_after(work, copy, venv, chosen)
        summarize(work)
        return 0
    if not args.keep:
        copy, venv = prepare(work, args.source)
        configure(copy, chosen)
    env = {**os.environ, "HYPOTHESIS_PROFILE": "ci"}
    mutmut = [str(venv / "bin" / "mutmut"), "run", "--max-children", str(args.max_children)]
    if not (copy / "mutants").is_dir():  # generate every mutant and collect the stats once
        subprocess.run([*mutmut, "no.such.mutant"], cwd=copy, env=env, check=False)
    for m in chosen:
        started = time.monotonic()
        # Named mutants are always rerun: name only those with no result yet.
        names = sorted(
            k
            for k, v in results(copy, venv).items()
            if _in_sample(k, m, args.sample) and v == "not checked"
        )
        if names:
            subprocess.run([*mutmut, *names], cwd=copy, env=env, check=False)
        print(f"{m.key}: {len(names)} mutants in {time.monotonic() - started:.0f}s", flush=True)
    save(work, copy, venv, chosen, args.sample)
    summarize(work)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
