"""Every runnable block of the docs has a test that runs it.

A ``sh``, ``python`` or ``sql`` block in ``docs/*.md`` is an example a reader
will type; each page that has one must be listed here with the test that
executes its blocks.  Listings that are not programs use ``text``.
"""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
RUNNABLE = re.compile(r"^```(sh|bash|python|sql)\s*$", re.MULTILINE)

#: page -> the test module that runs its blocks as written.
RUNNERS = {
    "owner-adapters.md": "tests/conformance/test_guide.py",
    "postgres.md": "tests/cli/test_owner_cli.py",
    "etcd.md": "tests/cli/test_etcd_cli.py",
    "tutorial.md": "tests/cli/test_tutorial.py",
    "mcp.md": "tests/cli/test_mcp_docs.py",
}


def test_every_page_with_runnable_blocks_has_a_runner() -> None:
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md") if RUNNABLE.search(p.read_text()))
    assert [p for p in pages if p not in RUNNERS] == []


def test_each_runner_reads_its_page() -> None:
    for page, runner in RUNNERS.items():
        assert page in (ROOT / runner).read_text(encoding="utf-8"), (page, runner)
