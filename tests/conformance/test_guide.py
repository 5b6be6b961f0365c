"""The adapter guide ``docs/owner-adapters.md`` is executable: every code block in it runs here.

Rules of the guide (this test enforces them)
============================================

1. A fenced block is ``python``, ``sh`` or ``text``; nothing else.  ``text`` is
   sample output, not code.
2. A ``python`` block opens with ``# file: NAME.py``.  It is written, under that
   name, to one scratch folder that is put on ``sys.path``; when
   ``docs/examples/NAME.py`` exists it must be byte for byte the block.
3. An ``sh`` block holds one command per line, run with ``bash`` in the scratch
   folder (PATH leads to this interpreter's scripts; ``PYTHONPATH`` is only what
   the command sets).  A trailing ``# exit N`` is the expected status, 0
   otherwise.  To stay fast, a full run is narrowed without changing what it
   proves about the commands: ``toolswap conformance HARNESS`` with no
   ``--check`` gets ``--check O1``, and a ``pytest`` command with neither
   ``-k`` nor ``--toolswap-check`` gets ``-k O1``; every run draws two
   examples per check.  The full kit on the example runs once, through
   :func:`run_conformance`, without the slow deep checks and without the
   optional O9 (the example offers no census).
4. The check table between the ``check-table`` markers lists every registered
   check, in run order, with its promise and the capabilities it needs.  After
   the registry changed, rewrite it with ``python tests/conformance/test_guide.py``
   (it runs the kit on the example to fill in what each check showed).
"""

from __future__ import annotations

import importlib
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolswap.testing import Capability, OwnerHarness, checks_named, run_conformance
from toolswap.testing.options import RunOptions
from toolswap.testing.reports import render_table as render_summary_table

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "owner-adapters.md"
EXAMPLES = REPO / "docs" / "examples"
BEGIN, END = "<!-- check-table:begin -->", "<!-- check-table:end -->"

_FENCE = re.compile(r"^```([a-z]*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
_FILE_MARK = re.compile(r"^# file: ([A-Za-z_][A-Za-z0-9_]*\.py)\n")
_EXIT_MARK = re.compile(r"\s+#\s*exit\s+(\d+)\s*$")
_SLOW_SHOWS = {
    "MODEL.owner-machine": "Hypothesis drives several handles through publish, remove, fence "
    "and seal, reopen, restart and faults, compares every observation with the spec's owner "
    "model, and shrinks a failure to a short program",
    "DEEP.crash-explorer": "the explorer's scenarios with this owner as the Memory store, "
    "crashed at every crash point, recover and reconcile without breaking S1-S7",
    "DEEP.protocol-machine": "journal, artifacts and cleanup driven beside the spec with this "
    "owner agree step by step (faults the store cannot show run as the nearest outcome)",
}
_MODULES = ("jsonl_owner", "jsonl_harness", "jsonl_lenient", "test_jsonl_owner", "run_kit")
FEW = RunOptions(examples=2, budget=0.3, seed=0)


def guide_text() -> str:
    return GUIDE.read_text(encoding="utf-8")


def blocks(text: str) -> list[tuple[str, str]]:
    """Every fenced block of the guide: (language, body)."""
    return [(m.group(1), m.group(2)) for m in _FENCE.finditer(text)]


def python_files(text: str) -> dict[str, str]:
    files = {}
    for language, body in blocks(text):
        if language == "python":
            mark = _FILE_MARK.match(body)
            assert mark, f"a python block does not open with '# file: NAME.py':\n{body[:200]}"
            assert mark.group(1) not in files, f"two blocks are named {mark.group(1)}"
            files[mark.group(1)] = body
    return files


def shell_commands(text: str) -> list[tuple[str, int]]:
    commands = []
    for language, body in blocks(text):
        if language == "sh":
            for line in body.splitlines():
                if line.strip() and not line.lstrip().startswith("#"):
                    mark = _EXIT_MARK.search(line)
                    status = int(mark.group(1)) if mark else 0
                    commands.append((_EXIT_MARK.sub("", line).strip(), status))
    return commands


def narrowed(command: str) -> str:
    """The command as run here (module rule 3): full runs cut to the O1 checks, and every
    run to two drawn examples per check."""
    words = shlex.split(command)
    program = next(w for w in words if "=" not in w)  # after any VAR=value
    if words[words.index(program) :][:2] == ["toolswap", "conformance"]:
        if "--examples" not in words:
            command = f"{command} --examples 2"
        command = f"{command} --budget 0.2"
        if not {"--check", "--list", "--help"} & set(words):
            return f"{command} --check O1"
    elif program == "pytest":
        command = f"{command} --toolswap-examples 2"
        if not {"-k", "--toolswap-check"} & set(words):
            return f"{command} -k O1"
    return command


# -- the check table --------------------------------------------------------------------


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_table(shows: dict[str, str]) -> str:
    lines = ["| check | needs | promise | a pass shows |", "|---|---|---|---|"]
    for c in checks_named(None):
        needs = ", ".join(sorted(str(n) for n in c.needs)) or "-"
        lines.append(f"| `{c.id}` | {needs} | {_cell(c.promise)} | {_cell(shows.get(c.id, ''))} |")
    return "\n".join(lines)


def table_rows(text: str) -> list[tuple[str, str, str]]:
    """(id, needs, promise) of every row between the markers."""
    start, end = text.index(BEGIN), text.index(END)
    rows = []
    for line in text[start:end].splitlines():
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) == 4 and cells[0].startswith("`"):
            rows.append((cells[0].strip("`"), cells[1], cells[2]))
    return rows


def rewrite_table() -> None:
    """Run the kit on the example and write the table into the guide (module rule 4)."""
    with tempfile.TemporaryDirectory(prefix="toolswap-guide-") as scratch:
        harness = _load_example(Path(scratch))
        report = run_conformance(harness, workroot=os.path.join(scratch, "kit"))
    print(render_summary(report))
    shows = {
        r.check_id: re.sub(r" \(\d+ examples\)$", "", r.message)
        for r in report.results
        if r.outcome == "pass"
    }
    shows.update(_SLOW_SHOWS)
    text = guide_text()
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    GUIDE.write_text(f"{text[:start]}\n{render_table(shows)}\n{text[end:]}", encoding="utf-8")


def render_summary(report: object) -> str:
    """The last line of the command's table: the summary to quote in the guide."""
    return render_summary_table(report).splitlines()[-1]  # type: ignore[arg-type]


# -- the scratch folder with the guide's files -----------------------------------------------


def _write_files(folder: Path) -> None:
    for name, body in python_files(guide_text()).items():
        (folder / name).write_text(body, encoding="utf-8")


def _load_example(folder: Path) -> type[OwnerHarness]:
    _write_files(folder)
    sys.path.insert(0, str(folder))
    module = importlib.import_module("jsonl_harness")
    harness: type[OwnerHarness] = module.JsonlHarness
    return harness


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The guide's python files in one folder, importable while this module runs."""
    folder = tmp_path_factory.mktemp("guide")
    _write_files(folder)
    sys.path.insert(0, str(folder))
    try:
        yield folder
    finally:
        sys.path.remove(str(folder))
        for name in _MODULES:
            sys.modules.pop(name, None)


# -- the tests ----------------------------------------------------------------------------


def test_every_block_is_python_sh_or_text() -> None:
    found = blocks(guide_text())
    assert found, "the guide has no code block"
    assert {language for language, _ in found} <= {"python", "sh", "text"}


def test_the_example_files_are_the_guides_blocks() -> None:
    files = python_files(guide_text())
    on_disk = sorted(p.name for p in EXAMPLES.glob("*.py"))
    assert on_disk, "docs/examples holds no example"
    for name in on_disk:
        assert name in files, f"docs/examples/{name} is not in the guide"
        assert (EXAMPLES / name).read_text(encoding="utf-8") == files[name], (
            f"docs/examples/{name} differs from the guide's block"
        )


def test_the_example_adapter_passes_every_sentence_check(scratch: Path) -> None:
    harness = importlib.import_module("jsonl_harness").JsonlHarness
    chosen = [c.id for c in checks_named(None) if c.group not in ("MODEL", "DEEP", "O9")]
    report = run_conformance(harness, workroot=scratch / "kit", checks=chosen, options=FEW)
    problems = [f"{r.check_id}: {r.outcome}: {r.message}" for r in report.results]
    assert report.counts()["pass"] == len(chosen), "\n".join(
        p for p in problems if ": pass:" not in p
    )


def test_the_lenient_variant_skips_and_xfails_as_declared(scratch: Path) -> None:
    harness = importlib.import_module("jsonl_lenient").LenientHarness
    chosen = ["O4.remove-never-seen-tombstones", "O4.remove-durable-across-restart", "O8"]
    report = run_conformance(harness, workroot=scratch / "lenient", checks=chosen, options=FEW)
    assert report.passed
    assert report.result("O4.remove-never-seen-tombstones").outcome == "xfail"
    restart = report.result("O4.remove-durable-across-restart")
    assert (restart.outcome, restart.message) == (
        "skip",
        harness.unsupported[Capability.RESTART],
    )
    doubt = report.result("O8.in-doubt-is-unknown")
    assert (doubt.outcome, doubt.message) == ("skip", harness.unsupported[Capability.FAULTS])


def test_the_shell_commands_exit_as_shown(scratch: Path) -> None:
    commands = shell_commands(guide_text())
    assert commands, "the guide shows no command"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = os.pathsep.join((os.path.dirname(sys.executable), env.get("PATH", "")))
    for shown, status in commands:
        command = narrowed(shown)
        started = time.monotonic()
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=scratch,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == status, (
            f"{command!r} exited {done.returncode}, the guide says {status} "
            f"({time.monotonic() - started:.1f} s)\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
        if status == 2:
            lines = done.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("toolswap: error: harness "), done.stderr


def test_the_check_table_lists_every_check() -> None:
    shown = table_rows(guide_text())
    registered = [
        (c.id, ", ".join(sorted(str(n) for n in c.needs)) or "-", c.promise)
        for c in checks_named(None)
    ]
    assert shown == registered, (
        "the guide's check table and the kit's registry disagree; "
        "rewrite it with `python tests/conformance/test_guide.py`"
    )


if __name__ == "__main__":
    rewrite_table()
