"""Type-check the package as it installs: toolswap, toolswap.spec and toolswap.faultinject.

Usage (from the checkout, with the lint extra installed)::

    python tools/typecheck.py            # mypy --strict over the whole package
    python tools/typecheck.py -- --warn-unreachable   # extra mypy options

Why a tool and not ``mypy src spec faultinject``: pyproject maps three folders
into one package (``src/toolswap`` -> ``toolswap``, ``spec`` ->
``toolswap.spec``, ``faultinject`` -> ``toolswap.faultinject``), which mypy
cannot follow from the source tree.  Checking the folders one by one leaves
every import across them unresolved, so the seam between the implementation
and the spec was typed ``Any`` and a real mismatch hid there (the spec took
whole seconds, the code passed floats).  This script builds the package as it
installs, as a tree of symbolic links in a temporary folder, runs mypy on it,
and prints each error with the path of the real file.  It exits with mypy's
status.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Where each part of the package lives in the checkout (pyproject's package-dir).
LAYOUT = {
    "toolswap": ROOT / "src" / "toolswap",
    "spec": ROOT / "spec",
    "faultinject": ROOT / "faultinject",
}


def config() -> str:
    """pyproject's ``[tool.mypy]`` settings, as an ini file for the link tree."""
    with (ROOT / "pyproject.toml").open("rb") as handle:
        settings = tomllib.load(handle)["tool"]["mypy"]
    lines = ["[mypy]", "explicit_package_bases = True"]
    for key, value in settings.items():
        lines.append(f"{key} = {str(value) if isinstance(value, bool) else value}")
    return "\n".join(lines) + "\n"


def link_tree(into: Path) -> Path:
    """The package ``toolswap`` under ``into``, made of links to the checkout's files."""
    package = into / "toolswap"
    package.mkdir()
    for entry in sorted(LAYOUT["toolswap"].iterdir()):
        if entry.name not in {"spec", "faultinject", "__pycache__"}:
            (package / entry.name).symlink_to(entry)
    (package / "spec").symlink_to(LAYOUT["spec"])
    (package / "faultinject").symlink_to(LAYOUT["faultinject"])
    return package


def real_path(line: str) -> str:
    """``toolswap/spec/x.py:3: error`` -> ``spec/x.py:3: error`` (the checkout's path)."""
    for prefix, folder in (("toolswap/spec/", "spec/"), ("toolswap/faultinject/", "faultinject/")):
        if line.startswith(prefix):
            return folder + line[len(prefix) :]
    if line.startswith("toolswap/"):
        return "src/" + line
    return line


def main(argv: list[str]) -> int:
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    with tempfile.TemporaryDirectory(prefix="toolswap-types-") as scratch:
        root = Path(scratch)
        link_tree(root)
        (root / "mypy.ini").write_text(config(), encoding="utf-8")
        done = subprocess.run(
            [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", *extra, "-p", "toolswap"],
            cwd=root,
            capture_output=True,
            text=True,
            env={**os.environ, "MYPY_CACHE_DIR": str(ROOT / ".mypy_cache" / "package")},
            check=False,
        )
    for line in done.stdout.splitlines():
        print(real_path(line))
    sys.stderr.write(done.stderr)
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
