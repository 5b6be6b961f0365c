"""Runs ``crosshair check`` on modules, with a bounded time per condition."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import attrs

PER_CONDITION_TIMEOUT = 2  # CPU seconds per contract: enough for these small tables
#: Two groups of about equal cost, run side by side (one per core).
SPEC_GROUPS = (("cleanup",), ("lease", "owner", "reconcile", "variants"))


@attrs.frozen
class Result:
    returncode: int
    stdout: str
    stderr: str

    @property
    def counterexamples(self) -> list[str]:
        """The ``file:line: error: ...`` lines: each a contract with a counterexample."""
        return [line for line in self.stdout.splitlines() if ": error: " in line]


def _start(targets: list[str], path: pathlib.Path | None) -> subprocess.Popen[str]:
    env = dict(os.environ)
    if path is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(path), env.get("PYTHONPATH")]))
    command = [
        sys.executable,
        "-m",
        "crosshair",
        "check",
        "--analysis_kind=PEP316",
        f"--per_condition_timeout={PER_CONDITION_TIMEOUT}",
        *targets,
    ]
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def crosshair_check(
    *groups: list[str], path: pathlib.Path | None = None, timeout: float = 240
) -> Result:
    """``crosshair check`` on each group of module names, groups in parallel; results merged.

    ``path`` is prepended to PYTHONPATH (for a package outside the install).
    The merged return code is the worst one: 0 clean, 1 counterexample, 2 error.
    """
    procs = [_start(group, path) for group in groups]
    outs, errs, codes = [], [], []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        outs.append(out)
        errs.append(err)
        codes.append(proc.returncode)
    worst = 2 if any(c not in (0, 1) for c in codes) else max(codes)
    return Result(worst, "".join(outs), "".join(errs))
