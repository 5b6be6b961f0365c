"""Run the conformance checks against a harness and collect a report.

Order of a run
==============

1. **Preflight** (no check has run yet; any problem is one :class:`HarnessError`
   line): the harness is an :class:`OwnerHarness` subclass; its
   ``known_failures`` name real checks; it can be built; ``open_owner`` returns
   owners and a new object every call; a new store starts empty; and two work
   folders give two stores (a marker published in one is not seen in the other).
2. **Checks**, in registry order, each ``repeat`` times, each time with a new
   harness on a new work folder.  A check runs in a thread of its own with a
   time limit, so a deadlocked adapter fails that check instead of hanging the
   run.  Failing repetitions stop the repetitions of that check.
3. **Verdicts**: ``pass``, ``fail``, ``skip`` (a capability is missing; the
   reason is the harness's), ``xfail`` (a declared known failure that failed:
   not a failure of the run) and ``xpass`` (a declared known failure that
   passed: a failure of the run, as a strict xfail).  Messages are redacted
   of the harness's secrets.
"""

from __future__ import annotations

import os
import platform
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from importlib import metadata
from typing import Any

import attrs

from ..owner import ObservedState
from .bench import Bench
from .harness import HarnessError, OwnerHarness
from .registry import Check, CheckFailed, CheckSkipped, checks_named

__all__ = ["CheckResult", "ConformanceReport", "run_conformance", "preflight", "run_check"]

CHECK_TIMEOUT_SECONDS = 120.0
_VERDICTS = ("pass", "fail", "skip", "xfail", "xpass")


@attrs.frozen(kw_only=True)
class CheckResult:
    """The verdict on one check (over all its repetitions)."""

    check_id: str
    promise: str
    outcome: str
    message: str
    seconds: float
    repetitions: int

    @property
    def failed(self) -> bool:
        return self.outcome in ("fail", "xpass")

    def to_dict(self) -> dict[str, Any]:
        return {
            "check_id": self.check_id,
            "promise": self.promise,
            "outcome": self.outcome,
            "message": self.message,
            "seconds": round(self.seconds, 3),
            "repetitions": self.repetitions,
        }


@attrs.frozen(kw_only=True)
class ConformanceReport:
    """Every verdict of one run, with what is needed to cite and reproduce it."""

    harness: str
    results: tuple[CheckResult, ...]
    repeat: int
    seconds: float
    versions: dict[str, str]

    @property
    def failed(self) -> tuple[CheckResult, ...]:
        return tuple(r for r in self.results if r.failed)

    @property
    def passed(self) -> bool:
        return not self.failed

    def counts(self) -> dict[str, int]:
        return {v: sum(r.outcome == v for r in self.results) for v in _VERDICTS}

    def result(self, check_id: str) -> CheckResult:
        for r in self.results:
            if r.check_id == check_id:
                return r
        raise KeyError(check_id)

    def to_dict(self) -> dict[str, Any]:
        return {
            "harness": self.harness,
            "passed": self.passed,
            "counts": self.counts(),
            "repeat": self.repeat,
            "seconds": round(self.seconds, 3),
            "versions": self.versions,
            "results": [r.to_dict() for r in self.results],
        }


def _harness_name(harness_cls: type[OwnerHarness]) -> str:
    return f"{harness_cls.__module__}:{harness_cls.__qualname__}"


def preflight(harness_cls: Any, workroot: str) -> None:
    """Refuse an unusable harness before any check runs (one line, see the module rules)."""
    if not (isinstance(harness_cls, type) and issubclass(harness_cls, OwnerHarness)):
        raise HarnessError(
            f"the harness must be a subclass of toolswap.testing.OwnerHarness, got {harness_cls!r}"
        )
    name = harness_cls.__qualname__
    known = {c.id for c in checks_named(None)}
    for check_id in harness_cls.known_failures:
        if check_id not in known:
            raise HarnessError(f"harness {name}: known_failures names no check {check_id!r}")
    marker = "kit-preflight-marker"
    first = Bench(harness_cls, os.path.join(workroot, "preflight-a"), "preflight")
    try:
        owner = first.open()
        first.open()
        seen = _preflight_observe(first, owner, marker, name)
        # Lenient on purpose: a malformed observation is for the O8 checks to
        # report; only a marker the store already holds means "not empty".
        if seen.state == ObservedState.PUBLISHED or seen.sealed is True:
            raise HarnessError(
                f"harness {name}: the store does not start empty ({marker!r} is already "
                f"{seen.describe()}); give every harness instance a fresh store"
            )
        outcome = first.publish(owner, marker, first.first)
        if not outcome.ok:
            raise HarnessError(
                f"harness {name}: the preflight publish of a new id {outcome.describe()}"
            )
        second = Bench(harness_cls, os.path.join(workroot, "preflight-b"), "preflight")
        try:
            again = _preflight_observe(second, second.open(), marker, name)
            if again.state == ObservedState.PUBLISHED:
                raise HarnessError(
                    f"harness {name}: two work folders share one store (a marker published "
                    "in one is visible in the other); each harness instance must have its "
                    "own, empty store"
                )
        finally:
            second.finish()
    finally:
        first.finish()


def _preflight_observe(bench: Bench, owner: Any, txn: str, name: str) -> Any:
    try:
        return bench.observe(owner, txn, scan=False)
    except CheckFailed as exc:
        raise HarnessError(f"harness {name}: the preflight fence failed: {exc}") from None


def run_check(
    harness_cls: type[OwnerHarness],
    check: Check,
    workdir: str,
    *,
    timeout: float = CHECK_TIMEOUT_SECONDS,
) -> tuple[str, str]:
    """Run one check once on a fresh store: ``(verdict, message)``, verdict pass/fail/skip."""
    box: dict[str, tuple[str, str]] = {}

    def target() -> None:
        bench: Bench | None = None
        try:
            bench = Bench(harness_cls, workdir, check.id)
            for capability in check.needs:
                bench.require(capability)
            box["verdict"] = ("pass", check.run(bench))
        except CheckSkipped as skip:
            box["verdict"] = ("skip", str(skip))
        except CheckFailed as failure:
            box["verdict"] = ("fail", _redacted(bench, str(failure)))
        except HarnessError as exc:
            box["verdict"] = ("fail", _redacted(bench, str(exc)))
        except Exception as exc:  # an adapter bug is a failed check, never a crashed run
            box["verdict"] = (
                "fail",
                _redacted(bench, f"unexpected {type(exc).__name__}: {exc}"),
            )
        finally:
            if bench is not None:
                try:
                    bench.finish()
                except Exception as exc:
                    if box.get("verdict", ("pass",))[0] == "pass":
                        box["verdict"] = (
                            "fail",
                            _redacted(bench, f"closing the handles failed: {type(exc).__name__}"),
                        )

    worker = threading.Thread(target=target, name=f"conformance {check.id}", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        return "fail", f"did not finish within {timeout:.0f} s (a deadlock or a lost wake-up?)"
    return box.get("verdict", ("fail", "the check ended without a verdict"))


def _redacted(bench: Bench | None, text: str) -> str:
    text = " ".join(text.split()) if "\n" not in text else text
    if bench is None:
        return text
    try:
        return bench.redact(text)
    except Exception:  # the scratch session could not even be made
        return text


def run_conformance(
    harness_cls: type[OwnerHarness],
    *,
    workroot: str | os.PathLike[str] | None = None,
    checks: Iterable[str] | None = None,
    repeat: int = 1,
    timeout: float = CHECK_TIMEOUT_SECONDS,
    progress: Callable[[str, int, int], None] | None = None,
) -> ConformanceReport:
    """Run the chosen checks (all by default) against ``harness_cls``.

    ``workroot`` holds one folder per check and repetition (a temporary folder,
    removed afterwards, when ``None``).  ``progress`` hears each check id, its
    index and the total before the check starts.
    """
    if repeat < 1:
        from ..errors import UsageError

        raise UsageError("repeat must be at least 1")
    chosen = checks_named(None if checks is None else list(checks))
    owned = workroot is None
    root = (
        tempfile.mkdtemp(prefix="toolswap-conformance-")
        if workroot is None
        else os.fspath(workroot)
    )
    started = time.perf_counter()
    try:
        os.makedirs(root, exist_ok=True)
        preflight(harness_cls, root)
        results = []
        for index, check in enumerate(chosen):
            if progress is not None:
                progress(check.id, index, len(chosen))
            results.append(_run_repeated(harness_cls, check, root, repeat, timeout))
    finally:
        if owned:
            shutil.rmtree(root, ignore_errors=True)
    return ConformanceReport(
        harness=_harness_name(harness_cls),
        results=tuple(results),
        repeat=repeat,
        seconds=time.perf_counter() - started,
        versions={
            "toolswap": _version(),
            "python": platform.python_version(),
        },
    )


def _run_repeated(
    harness_cls: type[OwnerHarness], check: Check, root: str, repeat: int, timeout: float
) -> CheckResult:
    started = time.perf_counter()
    verdict, message, done = "pass", "", 0
    for attempt in range(repeat):
        workdir = os.path.join(root, check.id, str(attempt))
        verdict, message = run_check(harness_cls, check, workdir, timeout=timeout)
        done = attempt + 1
        if verdict != "pass":
            if verdict == "fail" and repeat > 1:
                message = f"repetition {done}/{repeat}: {message}"
            break
    known = harness_cls.known_failures.get(check.id)
    if known is not None and verdict == "fail":
        verdict, message = "xfail", f"known failure ({known}): {message}"
    elif known is not None and verdict == "pass":
        verdict, message = "xpass", f"declared a known failure ({known}) but passed"
    return CheckResult(
        check_id=check.id,
        promise=check.promise,
        outcome=verdict,
        message=message,
        seconds=time.perf_counter() - started,
        repetitions=done,
    )


def _version() -> str:
    try:
        return metadata.version("toolswap")
    except metadata.PackageNotFoundError:  # pragma: no cover - run from a bare source tree
        return "unknown"
