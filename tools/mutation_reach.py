"""Which test executes which line of the measured modules (issue 39).

One run of the broad suite under coverage.py, with one coverage context per
test (pytest-cov's ``--cov-context=test``), on the unmutated scratch copy,
gives for every measured file and line the tests that execute it, and each
test's duration (from pytest's JUnit XML).  A mutant then runs, fastest
first, only the tests that execute its line (or, for the broad check of a
survivor, any line of its function): a test that never runs the changed line
cannot see the change.  Lines run while modules are imported belong to the
empty context; a mutant there runs the whole selection.

The limit: lines run in a child process that a test starts are not recorded
(coverage is not started in children), so those tests count only for what
they run in the test's own process.
"""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

IMPORT = ""  # coverage's context for lines run outside any test (imports, collection)


@dataclass
class Reach:
    #: file (path in the copy, relative) -> line -> node ids of the tests that run it
    lines: dict[str, dict[int, list[str]]] = field(default_factory=dict)
    #: node id -> seconds (what pytest reported)
    durations: dict[str, float] = field(default_factory=dict)
    #: tests that failed on the unmutated copy: never used to kill a mutant
    failed: list[str] = field(default_factory=list)

    def tests(self, source: str, linenos: Iterable[int]) -> tuple[list[str], bool]:
        """The tests that run any of ``linenos`` of ``source``, fastest first, and
        whether any of those lines also ran at import time."""
        by_line = self.lines.get(source, {})
        found: set[str] = set()
        bad = set(self.failed)
        at_import = False
        for n in linenos:
            for test in by_line.get(n, ()):
                if test == IMPORT:
                    at_import = True
                elif test not in bad:
                    found.add(test)
        return sorted(found, key=lambda t: (self.durations.get(t, 1e9), t)), at_import

    def save(self, path: Path) -> None:
        raw = {"lines": self.lines, "durations": self.durations, "failed": self.failed}
        path.write_text(json.dumps(raw))

    @classmethod
    def load(cls, path: Path) -> Reach:
        raw = json.loads(path.read_text())
        lines = {f: {int(k): v for k, v in by.items()} for f, by in raw["lines"].items()}
        return cls(lines=lines, durations=raw["durations"], failed=raw["failed"])


def _node_id(context: str) -> str:
    # pytest-cov names a context "<node id>|setup", "|run" or "|teardown".
    return context.rpartition("|")[0] if "|" in context else context


def _durations(junit: Path) -> dict[str, float]:
    return {
        _case_id(case): float(case.get("time", "0"))
        for case in ET.parse(junit).getroot().iter("testcase")
    }


def _case_id(case: ET.Element) -> str:
    """The node id of a JUnit test case: ``tests.core.test_x.Class`` + name."""
    parts = case.get("classname", "").split(".")
    i = next((k for k, p in enumerate(parts) if p.startswith("test_")), len(parts) - 1)
    node = "/".join(parts[: i + 1]) + ".py" + "".join(f"::{p}" for p in parts[i + 1 :])
    return f"{node}::{case.get('name', '')}"


def measure(
    python: Path,
    copy: Path,
    sources: list[str],
    tests: list[str],
    pytest_args: list[str],
    env: dict[str, str],
) -> Reach:
    """Run ``tests`` once in ``copy`` under coverage of ``sources``; read the contexts."""
    rc = copy / ".mutation-coveragerc"
    include = ",".join(str(copy / s) for s in sources)
    rc.write_text(f"[run]\nbranch = false\ninclude = {include}\n")
    data_file = copy / ".coverage-reach"
    junit = copy / ".reach-junit.xml"
    cmd = [
        str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider",
        f"--cov={copy / 'src'}", f"--cov-config={rc}", "--cov-context=test",
        "--cov-report=", f"--junitxml={junit}", *pytest_args, *tests,
    ]  # fmt: skip
    env = {**env, "COVERAGE_FILE": str(data_file)}
    print("+", " ".join(cmd), flush=True)
    run = subprocess.run(cmd, cwd=copy, env=env, text=True, capture_output=True)
    (copy / ".reach-pytest.log").write_text(run.stdout + run.stderr)
    if run.returncode not in (0, 1):  # 1: a test failed; the caller leaves those tests out
        raise SystemExit(
            f"coverage run failed ({run.returncode}); see {copy / '.reach-pytest.log'}"
        )
    dumped = copy / ".reach-lines.json"
    # coverage.py lives in the scratch venv, not in the interpreter running this tool.
    subprocess.run([str(python), "-c", _DUMP, str(data_file), str(dumped), str(copy)], check=True)
    reach = Reach(durations=_durations(junit), failed=_failed(junit))
    raw = json.loads(dumped.read_text())
    # pytest-cov measures the whole package (--cov names a source, which overrides
    # include); only the measured modules are kept.
    reach.lines = {
        f: {int(n): sorted({_node_id(c) for c in ctxs}) for n, ctxs in by.items()}
        for f, by in raw.items()
        if f in sources
    }
    return reach


_DUMP = """
import json, sys
from pathlib import Path
from coverage import CoverageData
data = CoverageData(basename=sys.argv[1])
data.read()
copy = Path(sys.argv[3]).resolve()
out = {}
for measured in data.measured_files():
    rel = str(Path(measured).resolve().relative_to(copy))
    out[rel] = {n: list(c) for n, c in data.contexts_by_lineno(measured).items()}
Path(sys.argv[2]).write_text(json.dumps(out))
"""


def _failed(junit: Path) -> list[str]:
    bad = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            bad.append(_case_id(case))
    return sorted(bad)
