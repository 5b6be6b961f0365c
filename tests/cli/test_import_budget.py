"""Start-up is most of what an agent waits for: the modules a page read may import.

``toolswap --version`` and ``toolswap read`` run once per page an agent
reads, so each imports only what it needs: never cleanup, the journal, the
owners, the report, the conformance kit, the MCP SDK, the write path's scan
or a regex engine (docs/design.md section 11).  This is a list of modules,
not a time: a new import on the path is a decision to make here, in review.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from toolswap.externalizer import ToolResultExternalizer

VERSION_MODULES = {"toolswap", "toolswap._version", "toolswap.cli", "toolswap.errors"}
READ_MODULES = {
    "toolswap",
    "toolswap.cli",
    "toolswap.cli._common",
    "toolswap.cli.read",
    "toolswap.domain",
    "toolswap.errors",
    "toolswap.externalizer",
    "toolswap.fs",
    "toolswap.high_water",
    "toolswap.line_index",
    "toolswap.pointer",
    "toolswap.reading",
    "toolswap.session",
    "toolswap.verified_record",
}
# Heavy or unrelated, whatever imports them: none belongs on these paths.
NEVER = {
    "ahocorasick_rs",
    "email",
    "hypothesis",
    "importlib.metadata",
    "mcp",
    "psycopg",
    "regex",
    "sqlite3",
    "toolswap.cleanup",
    "toolswap.journal",
    "toolswap.owners",
    "toolswap.report",
    "toolswap.spec",
    "toolswap.testing",
}

_PROBE = """
import sys
from toolswap.cli import main
code = main(sys.argv[1:])
modules = sorted(sys.modules)
sys.stdout.flush()
import json
print(json.dumps({"code": code, "modules": modules}), file=sys.stderr)
"""


def _imported(*argv: str) -> tuple[int, set[str]]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, check=False
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    return report["code"], set(report["modules"])


def test_version_imports_only_the_command_line_itself() -> None:
    code, modules = _imported("--version")
    assert code == 0
    assert {m for m in modules if m.startswith("toolswap")} == VERSION_MODULES
    assert not modules & NEVER


@pytest.fixture
def artifact(tmp_path: pathlib.Path) -> tuple[str, str]:
    ext = ToolResultExternalizer(tmp_path / "s", environ={})
    ref = ext.externalize(b"".join(b"row %d\n" % i for i in range(20_000)), "bash").artifact
    assert ref is not None
    return str(tmp_path / "s"), ref.source_id


def test_a_page_read_imports_only_the_read_path(artifact: tuple[str, str]) -> None:
    session, source_id = artifact
    code, modules = _imported("read", source_id, "--session", session, "--offset", "19990")
    assert code == 0
    assert {m for m in modules if m.startswith("toolswap")} <= READ_MODULES
    assert not modules & NEVER
    assert "json" not in modules  # only --json needs it


def test_the_help_still_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    from toolswap.cli import command_names, main

    assert main(["--help"]) == 0
    shown = capsys.readouterr().out
    assert all(name in shown for name in command_names())
    assert {"read", "grep", "ls", "stat", "gc", "run"} <= set(command_names())
