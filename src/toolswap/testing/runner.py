"""Run the conformance checks against a harness and collect a report.

Order of a run
==============

1. **Preflight** (no check has run yet; any problem is one :class:`HarnessError`
   line): the harness is an :class:`OwnerHarness` subclass; its
   ``known_failures`` name real checks (a misspelled id names the nearest one);
   it can be built; ``open_owner`` returns owners and a new object every call;
   a new store starts empty; and two work folders give two stores (a marker
   published in one is not seen in the other).  The preflight has the check
   time limit too: a constructor or ``open_owner`` that never returns is one
   line, not a hang.
2. **Checks**, in registry order, each ``repeat`` times, each time with new
   harnesses on new work folders.  A check runs in a thread of its own with a
   time limit, so a deadlocked adapter fails that check instead of hanging the
   run.  Failing repetitions stop the repetitions of that check.
3. **Examples** of one check: its fixed examples first (``plain``, then
   ``edge`` for a check that does not wait), each on a fresh store; then, when
   Hypothesis is installed, generated examples on fresh stores until the
   example count or the check's time budget is spent
   (:mod:`toolswap.testing.generate`).  A failing generated example is shrunk;
   the failure names its case and the command that replays it, and with
   ``failures`` set a replay file is written (:mod:`toolswap.testing.replay`).
4. **Verdicts**: ``pass``, ``fail``, ``skip`` (a capability is missing; the
   reason is the harness's), ``xfail`` (a declared known failure that failed:
   not a failure of the run) and ``xpass`` (a declared known failure that
   passed: a failure of the run, as a strict xfail).  Messages are redacted
   of the harness's secrets and of the run's folders.
5. **Nothing ends the run early.**  A harness or adapter that raises
   ``SystemExit`` or calls ``os._exit`` fails its check (or the preflight):
   a process that exits with status 0 must never read as "conforms".
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from importlib import metadata
from typing import Any

import attrs

from ..errors import UsageError
from ..owner import ObservedState
from .bench import Bench, describe_error
from .cases import Drawer, FixedDrawer, ReplayDrawer, ReplayMismatch
from .harness import Capability, HarnessError, OwnerHarness, harness_import_path
from .options import CHECK_TIMEOUT_SECONDS, RunOptions
from .registry import Check, CheckFailed, CheckSkipped, checks_named, nearest_hint
from .replay import Replay, write_replay

__all__ = [
    "CheckResult",
    "ConformanceReport",
    "HarnessExit",
    "end_process",
    "run_conformance",
    "preflight",
    "run_check",
    "run_one",
    "run_repeated",
]

_VERDICTS = ("pass", "fail", "skip", "xfail", "xpass")
_CASE_SHOWN = 1500  # characters of a failing case printed in the message


@attrs.frozen(kw_only=True)
class CheckResult:
    """The verdict on one check (over all its repetitions)."""

    check_id: str
    promise: str
    outcome: str
    message: str
    seconds: float
    repetitions: int
    examples: int = 0
    replay: str | None = None
    case: list[list[Any]] | None = None

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
            "examples": self.examples,
            "replay": self.replay,
        }


@attrs.frozen(kw_only=True)
class ConformanceReport:
    """Every verdict of one run, with what is needed to cite and reproduce it."""

    harness: str
    results: tuple[CheckResult, ...]
    repeat: int
    seconds: float
    versions: dict[str, str]
    seed: int | None = None
    chosen: int | None = None
    """How many checks were chosen; a report with fewer results is incomplete (a fail)."""

    @property
    def failed(self) -> tuple[CheckResult, ...]:
        return tuple(r for r in self.results if r.failed)

    @property
    def complete(self) -> bool:
        return self.chosen is None or len(self.results) == self.chosen

    @property
    def passed(self) -> bool:
        return not self.failed and self.complete

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
            "seed": self.seed,
            "seconds": round(self.seconds, 3),
            "versions": self.versions,
            "results": [r.to_dict() for r in self.results],
        }


def _harness_name(harness_cls: type[OwnerHarness]) -> str:
    return f"{harness_cls.__module__}:{harness_cls.__qualname__}"


# -- the process must not be ended by a harness (module rule 5) ------------------------------


class HarnessExit(BaseException):
    """A harness or adapter called ``os._exit`` while the kit ran it."""

    def __init__(self, code: object) -> None:
        super().__init__(code)
        self.code = code


_GUARD = threading.Lock()
_GUARDS = 0
_REAL_EXIT = os._exit


def end_process(code: int) -> None:
    """End the process now, even while a check stuck in a harness still refuses exits."""
    _REAL_EXIT(code)


@contextlib.contextmanager
def exits_refused() -> Iterator[None]:
    """While the kit runs a harness, ``os._exit`` in this process raises :class:`HarnessExit`.

    A forked child (another pid) still exits for real.
    """
    global _GUARDS
    pid = os.getpid()

    def refuse(code: int) -> Any:
        if os.getpid() != pid:
            _REAL_EXIT(code)
        raise HarnessExit(code)

    with _GUARD:
        _GUARDS += 1
        if _GUARDS == 1:
            os._exit = refuse  # type: ignore[assignment]
    try:
        yield
    finally:
        with _GUARD:
            _GUARDS -= 1
            if _GUARDS == 0:
                os._exit = _REAL_EXIT


def _exit_text(exc: BaseException) -> str:
    if isinstance(exc, HarnessExit):
        return f"os._exit({exc.code!r})"
    return f"SystemExit({getattr(exc, 'code', None)!r})"


# -- preflight ------------------------------------------------------------------------


def preflight(harness_cls: Any, workroot: str, *, timeout: float = CHECK_TIMEOUT_SECONDS) -> None:
    """Refuse an unusable harness before any check runs (one line, see the module rules)."""
    if not (isinstance(harness_cls, type) and issubclass(harness_cls, OwnerHarness)):
        raise HarnessError(
            f"the harness must be a subclass of toolswap.testing.OwnerHarness, got {harness_cls!r}"
        )
    name = harness_cls.__qualname__
    known = {c.id for c in checks_named(None)}
    for check_id in harness_cls.known_failures:
        if check_id not in known:
            raise HarnessError(
                f"harness {name}: known_failures names no check {check_id!r}"
                f"{nearest_hint(check_id)}"
            )
    doing = ["building it"]
    box: dict[str, BaseException | None] = {}

    def target() -> None:
        try:
            with exits_refused():
                _preflight_stores(harness_cls, workroot, name, doing)
            box["error"] = None
        except (HarnessExit, SystemExit) as exc:
            box["error"] = HarnessError(
                f"harness {name}: {doing[-1]} tried to end the process ({_exit_text(exc)})"
            )
        except BaseException as exc:
            box["error"] = exc

    worker = threading.Thread(target=target, name="conformance preflight", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise HarnessError(
            f"harness {name}: {doing[-1]} did not return within {timeout:.0f} s (the preflight "
            "stopped waiting; see --check-timeout)"
        )
    error = box.get("error")
    if error is not None:
        raise error


def _preflight_stores(harness_cls: Any, workroot: str, name: str, doing: list[str]) -> None:
    marker = "kit-preflight-marker"
    first = Bench(harness_cls, os.path.join(workroot, "preflight-a"), "preflight")
    try:
        doing.append("open_owner()")
        owner = _preflight_open(first, name)
        _preflight_open(first, name)
        doing.append("a fence over a new id")
        seen = _preflight_observe(first, owner, marker, name)
        # Lenient on purpose: a malformed observation is for the O8 checks to
        # report; only a marker the store already holds means "not empty".
        if seen.state == ObservedState.PUBLISHED or seen.sealed is True:
            raise HarnessError(
                f"harness {name}: the store does not start empty ({marker!r} is already "
                f"{seen.describe()}); give every harness instance a fresh store"
            )
        doing.append("a publish of a new id")
        outcome = first.publish(owner, marker, first.first)
        if not outcome.ok:
            raise HarnessError(
                f"harness {name}: the preflight publish of a new id {outcome.describe()}"
            )
        doing.append("building a second harness")
        second = Bench(harness_cls, os.path.join(workroot, "preflight-b"), "preflight")
        try:
            doing.append("a fence in a second store")
            again = _preflight_observe(second, _preflight_open(second, name), marker, name)
            if again.state == ObservedState.PUBLISHED:
                raise HarnessError(
                    f"harness {name}: two work folders share one store (a marker published "
                    "in one is visible in the other); each harness instance must have its "
                    "own, empty store"
                )
        finally:
            second.finish()
    finally:
        doing.append("closing its handles")
        first.finish()


def _preflight_open(bench: Bench, name: str) -> Any:
    try:
        return bench.open()
    except HarnessError:
        raise
    except NotImplementedError:
        raise HarnessError(
            f"harness {name}: open_owner() is not implemented (write it: it returns a new "
            "handle on the harness's store)"
        ) from None
    except Exception as exc:
        raise HarnessError(f"harness {name}: open_owner() raised {describe_error(exc)}") from exc


def _preflight_observe(bench: Bench, owner: Any, txn: str, name: str) -> Any:
    try:
        return bench.observe(owner, txn, scan=False)
    except CheckFailed as exc:
        raise HarnessError(f"harness {name}: the preflight fence failed: {exc}") from None


# -- one check ------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class _Verdict:
    verdict: str
    message: str
    examples: int = 0
    case: list[list[Any]] | None = None
    example: str = "plain"


def _attempt(
    harness_cls: type[OwnerHarness],
    check: Check,
    folder: str,
    drawer: Drawer,
    options: RunOptions,
    live: dict[str, Any],
) -> tuple[str, str]:
    """One example on a fresh store: ``(verdict, message)`` with verdict pass/fail/skip."""
    bench: Bench | None = None
    live["drawer"] = drawer
    verdict: tuple[str, str]
    try:
        bench = Bench(harness_cls, folder, check.id, drawer=drawer, options=options)
        for capability in check.needs:
            if capability is Capability.CLOCK:
                bench.require_time()  # no clock: a slow run lets time pass for real
            else:
                bench.require(capability)
        verdict = ("pass", check.run(bench))
    except CheckSkipped as skip:
        verdict = ("skip", str(skip))
    except (CheckFailed, HarnessError) as failure:
        verdict = ("fail", _redacted(bench, str(failure)))
    except ReplayMismatch as exc:
        verdict = ("fail", f"the replay file does not fit this check: {exc}")
    except (HarnessExit, SystemExit) as exc:
        ended = _exit_text(exc)
        verdict = ("fail", f"the harness or the adapter tried to end the process ({ended})")
    except Exception as exc:  # an adapter bug is a failed check, never a crashed run
        verdict = ("fail", _redacted(bench, f"unexpected {type(exc).__name__}: {exc}"))
    finally:
        if bench is not None:
            try:
                bench.finish()
            except Exception as exc:
                if verdict[0] == "pass":
                    verdict = (
                        "fail",
                        _redacted(
                            bench,
                            str(exc)
                            if isinstance(exc, CheckFailed)
                            else f"closing the handles failed: {type(exc).__name__}",
                        ),
                    )
    return verdict


def _examples_of(
    harness_cls: type[OwnerHarness],
    check: Check,
    workdir: str,
    options: RunOptions,
    replay: Replay | None,
    live: dict[str, Any],
) -> _Verdict:
    started = time.perf_counter()
    if replay is not None and replay.case is not None:
        drawer: Drawer = ReplayDrawer(replay.case)
        verdict, message = _attempt(
            harness_cls, check, os.path.join(workdir, "replay"), drawer, options, live
        )
        return _Verdict(verdict=verdict, message=message, case=drawer.record, example="replay")
    styles = [
        style
        for style in options.fixed
        if style == "plain" or (check.generated and not check.waits)
    ]
    first = ""
    slowest = 0.0
    for style in styles:
        began = time.perf_counter()
        drawer = FixedDrawer(check.id, style)
        verdict, message = _attempt(
            harness_cls, check, os.path.join(workdir, style), drawer, options, live
        )
        if verdict != "pass":
            return _Verdict(verdict=verdict, message=message, case=drawer.record, example=style)
        first = first or message
        slowest = max(slowest, time.perf_counter() - began)
    if not check.generated or options.examples == 0:
        return _Verdict(
            verdict="pass", message=first, examples=len(styles) if check.generated else 0
        )
    try:
        from .generate import ExampleFailed, examples_within, run_generated
    except ImportError:
        return _Verdict(
            verdict="pass",
            message=f"{first} (fixed examples only: Hypothesis is not installed)",
            examples=len(styles),
        )
    count = [0]
    kept: list[str] = []

    def example(drawer: Drawer) -> None:
        count[0] += 1
        folder = os.path.join(workdir, f"generated-{count[0]:04d}")
        verdict, message = _attempt(harness_cls, check, folder, drawer, options, live)
        if verdict == "pass":
            shutil.rmtree(folder, ignore_errors=True)
            return
        for older in kept:  # keep only the last failing store: the shrunk one
            shutil.rmtree(older, ignore_errors=True)
        kept[:] = [folder]
        if verdict == "skip":
            raise CheckSkipped(message)
        raise ExampleFailed(message)

    assert options.seed is not None
    left = options.budget - (time.perf_counter() - started)
    wanted = examples_within(options.examples, left, slowest)
    found = run_generated(
        example,
        examples=wanted,
        seed=options.seed,
        shrink_seconds=min(options.shrink_seconds, options.check_timeout / 3),
    )
    if found.failure is not None:
        note = f" ({found.note})" if found.note else ""
        return _Verdict(
            verdict="fail",
            message=f"{found.failure}{note}",
            examples=found.examples,
            case=found.record,
            example="generated",
        )
    if found.stopped is not None:
        stop = found.stopped
        kind = "skip" if isinstance(stop, CheckSkipped) else "fail"
        return _Verdict(verdict=kind, message=str(stop), examples=found.examples)
    if wanted and not found.examples:  # every draw was refused (too large for Hypothesis)
        first = f"{first} (no drawn example could be made)"
    return _Verdict(verdict="pass", message=first, examples=found.examples + len(styles))


def run_one(
    harness_cls: type[OwnerHarness],
    check: Check,
    workdir: str,
    options: RunOptions,
    *,
    replay: Replay | None = None,
) -> _Verdict:
    """Every example of one check, in a thread with the check's time limit."""
    box: dict[str, _Verdict] = {}
    live: dict[str, Any] = {}

    def target() -> None:
        try:
            with exits_refused():
                box["verdict"] = _examples_of(harness_cls, check, workdir, options, replay, live)
        except BaseException as exc:  # the check's own machinery broke: report it, never hang
            box["verdict"] = _Verdict(
                verdict="fail",
                message=f"the check stopped: {type(exc).__name__}: {exc}",
            )

    worker = threading.Thread(target=target, name=f"conformance {check.id}", daemon=True)
    worker.start()
    worker.join(options.check_timeout)
    if worker.is_alive():
        drawer = live.get("drawer")
        return _Verdict(
            verdict="fail",
            message=(
                f"did not finish within {options.check_timeout:.0f} s (a deadlock, a lost "
                "wake-up, or a harness that never returns?)"
            ),
            case=list(drawer.record) if drawer is not None else None,
            example=getattr(drawer, "style", "plain"),
        )
    return box.get("verdict", _Verdict(verdict="fail", message="the check ended without a verdict"))


def run_check(
    harness_cls: type[OwnerHarness],
    check: Check,
    workdir: str,
    *,
    timeout: float = CHECK_TIMEOUT_SECONDS,
    options: RunOptions | None = None,
) -> tuple[str, str]:
    """Run one check once on fresh stores: ``(verdict, message)``, verdict pass/fail/skip."""
    chosen = (options or RunOptions()).seeded()
    done = run_one(harness_cls, check, workdir, attrs.evolve(chosen, check_timeout=timeout))
    return done.verdict, done.message


def _redacted(bench: Bench | None, text: str) -> str:
    text = " ".join(text.split()) if "\n" not in text else text
    if bench is None:
        return text
    try:
        text = bench.redact(text)
    except Exception:  # the harness's secrets() failed
        return text
    return _without_folders(text, bench.workdir)


def _without_folders(text: str, workdir: str) -> str:
    """Replace the run's own folders with ``<workdir>`` (no absolute path in a message)."""
    for folder in sorted({workdir, os.path.realpath(workdir)}, key=len, reverse=True):
        text = text.replace(folder, "<workdir>")
    root = tempfile.gettempdir()
    return text.replace(root + os.sep, "<tmp>" + os.sep)


# -- the whole run ----------------------------------------------------------------------------


def run_conformance(
    harness_cls: type[OwnerHarness],
    *,
    workroot: str | os.PathLike[str] | None = None,
    checks: Iterable[str] | None = None,
    exclude: Iterable[str] = (),
    repeat: int = 1,
    timeout: float | None = None,
    options: RunOptions | None = None,
    replay: Replay | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> ConformanceReport:
    """Run the chosen checks (all by default, less ``exclude``) against ``harness_cls``.

    ``options`` sets examples, budgets, the seed, the time limit (``timeout``
    overrides its ``check_timeout``), ``slow`` and the folder for replay files.
    ``replay`` runs the one check and case of a replay file.  ``workroot``
    holds one folder per check and repetition (a temporary folder, removed
    afterwards, when ``None``).  ``progress`` hears each check id, its index
    and the total before the check starts.
    """
    if repeat < 1:
        raise UsageError("repeat must be at least 1")
    chosen_options = (options or RunOptions()).seeded()
    if timeout is not None:
        chosen_options = attrs.evolve(chosen_options, check_timeout=timeout)
    if replay is not None:
        checks = [replay.check]
        if replay.seed is not None:
            chosen_options = attrs.evolve(chosen_options, seed=replay.seed)
    chosen = checks_named(None if checks is None else list(checks), exclude)
    owned = workroot is None
    root = (
        tempfile.mkdtemp(prefix="toolswap-conformance-")
        if workroot is None
        else os.fspath(workroot)
    )
    started = time.perf_counter()
    results: list[CheckResult] = []
    try:
        os.makedirs(root, exist_ok=True)
        preflight(harness_cls, root, timeout=chosen_options.check_timeout)
        for index, check in enumerate(chosen):
            if progress is not None:
                progress(check.id, index, len(chosen))
            results.append(run_repeated(harness_cls, check, root, repeat, chosen_options, replay))
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
        seed=chosen_options.seed,
        chosen=len(chosen),
    )


def run_repeated(
    harness_cls: type[OwnerHarness],
    check: Check,
    root: str,
    repeat: int,
    options: RunOptions,
    replay: Replay | None,
) -> CheckResult:
    """One check, ``repeat`` times (a new seed each), judged against ``known_failures``."""
    started = time.perf_counter()
    done, examples = 0, 0
    outcome = _Verdict(verdict="pass", message="")
    used = options
    for attempt in range(repeat):
        workdir = os.path.join(root, check.id, str(attempt))
        assert options.seed is not None
        # Each repetition draws other examples: a new seed, reported with the failure.
        used = attrs.evolve(options, seed=(options.seed + attempt) % 2**32)
        outcome = run_one(harness_cls, check, workdir, used, replay=replay)
        done = attempt + 1
        examples += outcome.examples
        if outcome.verdict != "pass":
            break
    verdict, message = outcome.verdict, outcome.message
    replay_path: str | None = None
    if verdict == "fail":
        message, replay_path = _failure_text(harness_cls, check, outcome, used, replay)
        if repeat > 1:
            message = f"repetition {done}/{repeat}: {message}"
    known = harness_cls.known_failures.get(check.id)
    if known is not None and verdict == "fail":
        verdict, message = "xfail", f"known failure ({known}): {message}"
    elif known is not None and verdict == "pass":
        verdict, message = "xpass", f"declared a known failure ({known}) but passed"
    elif verdict == "pass" and examples:
        message = f"{message} ({examples} examples)"
    return CheckResult(
        check_id=check.id,
        promise=check.promise,
        outcome=verdict,
        message=message,
        seconds=time.perf_counter() - started,
        repetitions=done,
        examples=examples,
        replay=replay_path,
        case=outcome.case,
    )


def _failure_text(
    harness_cls: type[OwnerHarness],
    check: Check,
    outcome: _Verdict,
    options: RunOptions,
    replay: Replay | None,
) -> tuple[str, str | None]:
    """The failure message with its case and how to replay it; the replay file written."""
    message = outcome.message
    if replay is not None:
        return message, None
    harness = harness_import_path(harness_cls)
    case = outcome.case if check.generated else None
    if case is not None and outcome.example in ("generated", "edge"):
        shown = json.dumps(case, ensure_ascii=True)
        if len(shown) > _CASE_SHOWN:
            shown = shown[: _CASE_SHOWN - 3] + "..."
        label = "shrunk case" if outcome.example == "generated" else "edge example"
        message = f"{message}\n{label}: {shown}"
    written: str | None = None
    if options.failures:
        written = write_replay(
            options.failures,
            Replay(
                check=check.id,
                harness=harness,
                seed=options.seed,
                example=outcome.example,
                case=case,
                message=message,
            ),
        )
        message = f"{message}\nreplay: toolswap conformance {harness} --replay {written}"
    elif outcome.example in ("generated",) or not check.generated:
        message = (
            f"{message}\nreplay: toolswap conformance {harness} --check {check.id} "
            f"--seed {options.seed} (add --failures DIR to keep this case as a replay file)"
        )
    return message, written


def _version() -> str:
    try:
        return metadata.version("toolswap")
    except metadata.PackageNotFoundError:  # pragma: no cover - run from a bare source tree
        return "unknown"
