"""``toolswap report [--out FILE.html] [--quick]``: the visual report, one offline HTML file.

The page holds the lease, owner and cleanup machines drawn from the spec's
tables; every classic mistake's shortest counterexample step by step (durable
and volatile state after each step, the crash, the broken invariant) beside the
same steps under the correct rule; the crash matrix and the mutant kill matrix
of the real code; and the parameters of the run, so a figure can be cited.

The default runs everything, as ``toolswap explore``, ``toolswap crashcheck``
and ``toolswap crashcheck --mutants`` do (minutes).  ``--quick`` keeps it to
seconds: small model bounds, four scenarios, three mutants, drop crashes only.
``--no-crash`` leaves the implementation's matrices out.

Exit status:
  0  the page is written and every figure on it is a pass
  1  the page is written and shows a failure (a violation of the correct model
     or of the real code, a mistake not caught, a mutant that survived)
  2  usage error (bad bounds, unknown scenario, unwritable file)

``--out`` must name a regular file (replaced whole) or a new name in a folder
we can write; a device, FIFO, socket, directory or symlink is refused, and so
is a folder that is missing or not writable, before any exploring starts.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import stat
from typing import Any

import attrs

from ..errors import UsageError
from ..fs import REAL_FS
from ..report import html, model
from . import _progress
from .crashcheck import DEFAULT_SEEDS

__all__ = [
    "register",
    "report",
    "check_out_path",
    "write_page",
    "write_variant_html",
    "DEFAULT_OUT",
]

DEFAULT_OUT = "toolswap-report.html"


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "report",
        help="write the visual report (state machines, traces, crash matrix) as one HTML file",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--out", metavar="FILE", default=DEFAULT_OUT, help=f"where to write (default {DEFAULT_OUT})"
    )
    parser.add_argument(
        "--quick", action="store_true", help="a small run in seconds (see the description)"
    )
    parser.add_argument(
        "--bounds", metavar="K=V,...", default=None, help="model bounds, as for toolswap explore"
    )
    parser.add_argument(
        "--seeds", type=int, default=None, metavar="N", help="crash explorer seeds per mode"
    )
    parser.add_argument(
        "--scenario",
        action="append",
        default=None,
        metavar="NAME",
        help="crash matrix: only this scenario (repeatable)",
    )
    parser.add_argument(
        "--mode",
        action="append",
        default=None,
        metavar="MODE",
        help="crash mode: drop, torn or dir_subset (repeatable)",
    )
    parser.add_argument(
        "--no-crash",
        action="store_true",
        help="leave out the crash matrix and the mutants (model only)",
    )
    parser.set_defaults(handler=report)


def _options(args: argparse.Namespace) -> model.Options:
    base = model.QUICK if args.quick else attrs.evolve(model.FULL, seeds=DEFAULT_SEEDS)
    changes: dict[str, Any] = {}
    if args.bounds is not None:
        try:
            changes["bounds"] = model.parse_bounds(args.bounds)
        except ValueError as exc:
            raise UsageError(str(exc)) from exc
    if args.seeds is not None:
        if not 1 <= args.seeds <= 1000:
            raise UsageError(f"--seeds must be between 1 and 1000, got {args.seeds}")
        changes["seeds"] = args.seeds
    if args.scenario:
        changes["scenarios"] = tuple(args.scenario)
    if args.mode:
        known = model.CRASH_MODES
        bad = [m for m in args.mode if m not in known]
        if bad:
            raise UsageError(f"unknown crash mode(s) {', '.join(bad)}; want {', '.join(known)}")
        changes["modes"] = tuple(args.mode)
    if args.no_crash:
        changes["crash"] = False
    return attrs.evolve(base, **changes)


def _changed_bounds(bounds: Any) -> str:
    default = model.bounds_dict(model.default_bounds())
    now = model.bounds_dict(bounds)
    return ",".join(
        f"{k}={str(v).lower() if isinstance(v, bool) else v}"
        for k, v in now.items()
        if default[k] != v
    )


def _command(args: argparse.Namespace) -> str:
    """The command line that reproduces this page (the out path left as given)."""
    words = ["toolswap", "report", "--out", args.out]
    if args.quick:
        words.append("--quick")
    if args.bounds is not None:
        words += ["--bounds", args.bounds]
    if args.seeds is not None:
        words += ["--seeds", str(args.seeds)]
    for name in args.scenario or ():
        words += ["--scenario", name]
    for mode in args.mode or ():
        words += ["--mode", mode]
    if args.no_crash:
        words.append("--no-crash")
    return " ".join(words)


_KINDS = (
    (stat.S_ISLNK, "a symlink"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
)


def _temporary(path: str, purpose: str) -> str:
    """A name beside ``path`` in its folder, so a rename to ``path`` never crosses devices."""
    folder = os.path.dirname(os.path.abspath(path))
    return os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.{purpose}")


def _cannot_write(path: str, exc: OSError) -> UsageError:
    folder = os.path.dirname(os.path.abspath(path))
    if exc.errno == errno.ENOENT:
        return UsageError(f"cannot write {path}: no folder {folder}")
    if exc.errno == errno.ENOTDIR:
        return UsageError(f"cannot write {path}: {folder} or a parent of it is not a folder")
    return UsageError(f"cannot write {path}: {exc.strerror or exc}")


def _require_replaceable(path: str) -> None:
    """``path`` is a regular file (not through a symlink) or a new name; else a UsageError.

    The rename that publishes the page replaces whatever entry has the name;
    as root that would be ``/dev/null`` itself, so anything but a regular
    file is refused rather than replaced.
    """
    try:
        facts = REAL_FS.lstat(path)
    except FileNotFoundError:
        return  # a new name (a missing folder is the probe's to report)
    except OSError as exc:
        raise _cannot_write(path, exc) from exc
    if facts.is_regular:
        return
    kind = next((name for test, name in _KINDS if test(facts.mode)), "not a regular file")
    raise UsageError(
        f"refusing to write {path}: it is {kind}; the page goes only to a regular file "
        f"or a new name"
    )


def check_out_path(path: str) -> None:
    """Fail now, not after minutes of exploring, if the page could not go to ``path``.

    The folder is probed by creating and removing a file in it: permission
    bits do not answer the question (root passes them; a read-only mount or
    an immutable folder refuses root too).
    """
    _require_replaceable(path)
    probe = _temporary(path, "probe")
    try:
        REAL_FS.close(REAL_FS.create_exclusive(probe, 0o600))
    except OSError as exc:
        raise _cannot_write(path, exc) from exc
    finally:
        with contextlib.suppress(OSError):
            REAL_FS.unlink(probe)


def write_page(path: str, page: str) -> None:
    """Write ``page`` to ``path`` whole (a temporary file, fsync, then a rename), via the seam.

    ``path`` is checked again just before the rename: something put in its
    place while the page was built is refused, not replaced.
    """
    temporary = _temporary(path, "tmp")
    try:
        handle = REAL_FS.create_exclusive(temporary, 0o644)
        try:
            REAL_FS.write(handle, page.encode("utf-8"))
            REAL_FS.fsync(handle)
        finally:
            REAL_FS.close(handle)
        _require_replaceable(path)
        REAL_FS.rename(temporary, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            REAL_FS.unlink(temporary)
        if isinstance(exc, OSError):
            raise _cannot_write(path, exc) from exc
        raise


def report(args: argparse.Namespace) -> int:
    options = _options(args)
    check_out_path(args.out)  # before minutes of exploring
    command = _command(args)
    with _progress.for_args(args) as line:
        built = model.build(options, command, line.update if line.enabled else None)
    write_page(args.out, html.render(built))
    caught = sum(t.caught for t in built.timelines)
    failed = caught < len(built.timelines) or (built.model is not None and not built.model.ok)
    parts = [f"{caught}/{len(built.timelines)} mistakes caught"]
    if built.model is not None:
        parts.insert(0, f"correct model {built.model.states:,} states")
    if built.crash is not None:
        parts.append(f"{built.crash.states:,} crash states, {built.crash.violations} violations")
        failed = failed or built.crash.violations > 0
    if built.mutants is not None:
        killed = sum(r.killed for r in built.mutants.rows)
        parts.append(f"{killed}/{len(built.mutants.rows)} mutants killed")
        failed = failed or killed < len(built.mutants.rows) or built.mutants.baseline_violations > 0
    print(f"wrote {args.out}: {'; '.join(parts)}")
    return 1 if failed else 0


def write_variant_html(path: str, variant: Any, bounds: Any, explored: Any) -> None:
    """The single-variant page of ``toolswap explore --variant NAME --html FILE``."""
    changed = _changed_bounds(bounds)
    command = f"toolswap explore --variant {variant.name}" + (
        f" --bounds {changed}" if changed else ""
    )
    page = model.build_variant_page(variant, bounds, explored, command)
    write_page(path, html.render(page))
