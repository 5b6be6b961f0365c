"""docs/tutorial.md runs, in order, the way a student would run it.

Rules
=====

1. Shell blocks run line by line with ``bash -c`` in one scratch folder, in
   document order.  ``pip install`` lines are not run: installing is what CI
   does before this suite (as in tests/cli/test_readme.py).
2. A Python block whose first line is ``# NAME.py`` is saved as that file in
   the scratch folder when the walk reaches it; a later shell line runs it.
3. A ``text`` block right after a shell block is the output of that block's
   last command: each of its lines must appear in that output, in order;
   ``...`` stands for lines left out.
4. Every command exits 0 unless :data:`EXPECTED_EXIT` says otherwise, and why.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "docs" / "tutorial.md"
_FENCE = re.compile(r"^```(\w+)\n(.*?)^```$", re.M | re.S)

EXPECTED_EXIT = {
    # a variant's expected violation is found: exit 1, as the tutorial says
    "toolswap explore --variant abort-before-tombstone": 1,
    "toolswap explore --variant abort-before-tombstone --html abort.html": 1,
}


def _blocks() -> list[tuple[str, str]]:
    return _FENCE.findall(TUTORIAL.read_text(encoding="utf-8"))


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TOOLSWAP_SESSION_DIR"}
    env["PYTHONPATH"] = str(ROOT)
    return env


def _shown_in_order(shown: str, printed: str) -> list[str]:
    """The lines of ``shown`` missing from ``printed`` (in order; ``...`` skips)."""
    lines = printed.splitlines()
    at = 0
    missing = []
    for want in shown.splitlines():
        if want.strip() == "...":
            continue
        try:
            at = lines.index(want, at) + 1
        except ValueError:
            missing.append(want)
    return missing


@pytest.mark.slow
def test_the_tutorial_runs_as_written(tmp_path: Path) -> None:
    last: subprocess.CompletedProcess[str] | None = None
    ran: list[str] = []
    for language, body in _blocks():
        if language == "python":
            first = body.splitlines()[0]
            assert re.fullmatch(r"# [\w.-]+\.py", first), f"python block without a file: {first}"
            (tmp_path / first[2:]).write_text(body, encoding="utf-8")
        elif language == "sh":
            for line in body.splitlines():
                command = line.strip()
                if not command or command.startswith("pip install"):
                    continue
                last = subprocess.run(
                    ["bash", "-c", command],
                    cwd=tmp_path,
                    env=_env(),
                    capture_output=True,
                    text=True,
                    timeout=600,
                )
                ran.append(command)
                want = EXPECTED_EXIT.get(command, 0)
                assert last.returncode == want, (
                    f"{command!r} exited {last.returncode}\n{last.stdout[-3000:]}\n"
                    f"{last.stderr[-3000:]}"
                )
        elif language == "text" and last is not None:
            missing = _shown_in_order(body, last.stdout)
            assert missing == [], f"after {ran[-1]!r}, not printed: {missing}\n{last.stdout}"
            last = None  # one output block per command
    assert any("--html" in c for c in ran) and any(c.startswith("python ") for c in ran)
    page = (tmp_path / "abort.html").read_text(encoding="utf-8")
    assert 'id="variant-abort-before-tombstone"' in page and 'id="inv-S3"' in page
    assert 'id="variant-counter-restart"' in (tmp_path / "report.html").read_text(encoding="utf-8")


def test_the_tutorial_is_linked_from_the_docs_index() -> None:
    assert "(tutorial.md)" in (ROOT / "docs" / "README.md").read_text(encoding="utf-8")


def test_a_changed_output_would_be_noticed() -> None:
    printed = "a\nb\nc\n"
    assert _shown_in_order("a\n...\nc", printed) == []
    assert _shown_in_order("c\na", printed) == ["a"]  # order matters
    assert _shown_in_order("b\nd", printed) == ["d"]
