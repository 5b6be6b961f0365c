"""The kit's pytest plugin (entry point ``pytest11: toolswap``): conformance checks as pytest items.

Three ways in, all giving ordinary pytest items (so ``-k``, ``--junitxml`` and
``-x`` work as usual):

* on the command line: ``pytest --toolswap-owner mypkg.harness:Harness``
  (also ``sqlite``, ``memory`` or a ``postgresql://`` URL), with
  ``--toolswap-check ID`` / ``--toolswap-exclude ID`` (repeatable),
  ``--toolswap-repeat N``, ``--toolswap-quick``, ``--toolswap-seed N``,
  ``--toolswap-examples N``, ``--toolswap-budget S``,
  ``--toolswap-check-timeout S``, ``--toolswap-slow`` and
  ``--toolswap-failures DIR``: the same options, and the same verdicts, as
  ``toolswap conformance``.  The run is the kit alone: other collected tests
  (a project's own, found through its ``testpaths``) are deselected;
* in a test file, a class that subclasses :class:`OwnerConformanceTests`
  and names its harness::

      class TestMyOwner(OwnerConformanceTests):
          harness = MyHarness

* a committed replay file (``toolswap-replay-*.json``, written by
  ``--failures``) anywhere pytest collects: one item that runs its case again
  against the harness it names (or ``--toolswap-owner``), a regression test.

A check the harness cannot run is skipped with the harness's reason; a check
named in the harness's ``known_failures`` is a strict xfail (the run fails if
it starts passing).  An unusable harness is one error line, before any item
runs.  The plugin does nothing unless one of the three is used.  The seed of
the session is shown in pytest's header.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import attrs
import pytest

from .harness import HarnessError, OwnerHarness, resolve_harness
from .options import FULL, QUICK, RunOptions
from .registry import Check, checks_named
from .replay import FILE_PREFIX, Replay, load_replay
from .runner import preflight, run_conformance, run_repeated

__all__ = ["OwnerConformanceTests", "ConformanceItem", "ReplayItem"]

_PREFLIGHT_DONE: dict[type[OwnerHarness], str | None] = {}
_SESSION: dict[str, RunOptions] = {}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("toolswap", "toolswap owner conformance kit")
    group.addoption(
        "--toolswap-owner",
        metavar="HARNESS",
        default=None,
        help="run the conformance checks against HARNESS (module:attr, sqlite, memory or a URL)",
    )
    group.addoption(
        "--toolswap-check",
        action="append",
        metavar="ID",
        default=None,
        help="only this check id, group (O5) or prefix (O5.fence-*); repeatable",
    )
    group.addoption(
        "--toolswap-exclude",
        action="append",
        metavar="ID",
        default=[],
        help="leave out this check id, group or prefix; repeatable",
    )
    group.addoption(
        "--toolswap-repeat", type=int, default=1, metavar="N", help="run each check N times"
    )
    group.addoption(
        "--toolswap-quick",
        action="store_true",
        help="leave out MODEL.* and DEEP.*, draw few examples (as toolswap conformance --quick)",
    )
    group.addoption("--toolswap-seed", type=int, metavar="N", help="seed of the drawn examples")
    group.addoption("--toolswap-examples", type=int, metavar="N", help="drawn examples per check")
    group.addoption("--toolswap-budget", type=float, metavar="S", help="seconds per check")
    group.addoption(
        "--toolswap-check-timeout", type=float, metavar="S", help="time limit of one check"
    )
    group.addoption(
        "--toolswap-slow", action="store_true", help="let time pass for real without a clock"
    )
    group.addoption("--toolswap-failures", metavar="DIR", help="write replay files into DIR")


def _options(config: pytest.Config) -> RunOptions:
    """The session's options, seeded once (every item uses the same seed)."""
    if "options" not in _SESSION:
        base = QUICK if config.getoption("--toolswap-quick") else FULL
        changes: dict[str, Any] = {
            "slow": bool(config.getoption("--toolswap-slow")),
            "failures": config.getoption("--toolswap-failures"),
        }
        for name in ("seed", "examples", "budget", "check_timeout"):
            value = config.getoption(f"--toolswap-{name.replace('_', '-')}")
            if value is not None:
                changes[name] = value
        try:
            _SESSION["options"] = attrs.evolve(base, **changes).seeded()
        except ValueError as exc:
            raise pytest.UsageError(f"toolswap conformance: {exc}") from None
    return _SESSION["options"]


def pytest_configure(config: pytest.Config) -> None:
    _SESSION.clear()


def pytest_report_header(config: pytest.Config) -> str | None:
    if config.getoption("--toolswap-owner"):
        return f"toolswap conformance: seed {_options(config).seed}"
    return None


def _harness_preflight(harness: type[OwnerHarness], timeout: float) -> str | None:
    """Run the preflight once per harness per process; the error line or ``None``."""
    if harness not in _PREFLIGHT_DONE:
        with tempfile.TemporaryDirectory(prefix="toolswap-preflight-") as root:
            try:
                preflight(harness, root, timeout=timeout)
                _PREFLIGHT_DONE[harness] = None
            except HarnessError as exc:
                _PREFLIGHT_DONE[harness] = str(exc)
    return _PREFLIGHT_DONE[harness]


class ConformanceFailure(Exception):
    """A check failed; the message says which promise broke and how."""


def _run(harness: type[OwnerHarness], check: Check, repeat: int, options: RunOptions) -> None:
    """One check, judged exactly as the command judges it (the runner's own verdict)."""
    problem = _harness_preflight(harness, options.check_timeout)
    if problem is not None:
        raise ConformanceFailure(problem)
    with tempfile.TemporaryDirectory(prefix="toolswap-conformance-") as root:
        result = run_repeated(harness, check, root, repeat, options, None)
    if result.outcome == "skip":
        pytest.skip(result.message)
    if result.outcome in ("fail", "xfail"):  # xfail: the strict xfail mark expects this
        message = _unknown(result.message)
        raise ConformanceFailure(f"{check.id}: {message}\npromise: {check.promise}")


def _unknown(message: str) -> str:
    """The message without the runner's known-failure prefix (pytest's mark says it)."""
    return message.split("): ", 1)[1] if message.startswith("known failure (") else message


class ConformanceItem(pytest.Item):
    """One check against the harness named by ``--toolswap-owner``."""

    def __init__(self, *, harness: type[OwnerHarness], check: Check, repeat: int, **kw: Any):
        super().__init__(**kw)
        self.harness, self.check, self.repeat = harness, check, repeat

    def runtest(self) -> None:
        _run(self.harness, self.check, self.repeat, _options(self.config))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, ConformanceFailure):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[str, int | None, str]:
        return ("toolswap-conformance", None, f"{self.check.id}")


def _mark(item: pytest.Item, harness: type[OwnerHarness], check: Check) -> None:
    known = harness.known_failures.get(check.id)
    if known is not None:
        item.add_marker(pytest.mark.xfail(reason=known, strict=True, raises=ConformanceFailure))


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    spec = config.getoption("--toolswap-owner")
    if not spec:
        return
    options = _options(config)
    try:
        harness = resolve_harness(spec)
        problem = _harness_preflight(harness, options.check_timeout)
        chosen = checks_named(
            config.getoption("--toolswap-check"), config.getoption("--toolswap-exclude")
        )
    except (HarnessError, ValueError) as exc:
        raise pytest.UsageError(f"toolswap conformance: {exc}") from None
    if problem is not None:
        raise pytest.UsageError(f"toolswap conformance: {problem}")
    if config.getoption("--toolswap-quick"):
        chosen = [c for c in chosen if c.group not in ("MODEL", "DEEP")]
    repeat = config.getoption("--toolswap-repeat")
    suite = _Suite.from_parent(session, name=_SUITE, nodeid=_SUITE)
    # The option asks for a conformance run: what else was collected (a project's
    # own tests, found through its testpaths) is deselected, not run beside it.
    others = [item for item in items if not isinstance(item, (ConformanceItem, ReplayItem))]
    if others:
        config.hook.pytest_deselected(items=others)
        items[:] = [item for item in items if item not in others]
    for check in chosen:
        item = ConformanceItem.from_parent(
            suite, name=check.id, harness=harness, check=check, repeat=repeat
        )
        _mark(item, harness, check)
        items.append(item)


_SUITE = "toolswap-conformance"


class _Suite(pytest.Collector):
    """The parent of the option's items, so their ids read ``toolswap-conformance::O1...``."""

    def collect(self) -> list[pytest.Item]:  # the items are made by the hook above
        return []


# -- committed replay files ---------------------------------------------------------------


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.name.startswith(FILE_PREFIX) and file_path.suffix == ".json":
        return ReplayFile.from_parent(parent, path=file_path)
    return None


class ReplayFile(pytest.File):
    """A replay file: one item, named after its check."""

    def collect(self) -> list[pytest.Item]:
        try:
            replay = load_replay(str(self.path))
        except Exception as exc:
            raise pytest.UsageError(f"toolswap conformance: {exc}") from None
        return [ReplayItem.from_parent(self, name=replay.check, replay=replay)]


class ReplayItem(pytest.Item):
    """The case of a replay file, run again: it passes once the adapter is fixed."""

    def __init__(self, *, replay: Replay, **kw: Any) -> None:
        super().__init__(**kw)
        self.replay = replay

    def runtest(self) -> None:
        spec = self.config.getoption("--toolswap-owner") or self.replay.harness
        try:
            harness = resolve_harness(spec)
        except HarnessError as exc:
            raise ConformanceFailure(str(exc)) from None
        options = attrs.evolve(_options(self.config), failures=None)
        try:
            report = run_conformance(harness, options=options, replay=self.replay)
        except HarnessError as exc:
            raise ConformanceFailure(str(exc)) from None
        result = report.results[0]
        if result.outcome == "skip":
            pytest.skip(result.message)
        if result.failed:
            raise ConformanceFailure(
                f"{self.replay.check} (replayed from {self.path.name}): {result.message}"
            )

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, ConformanceFailure):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[str, int | None, str]:
        return (str(self.path), None, f"replay {self.replay.check}")


# -- the base class ------------------------------------------------------------------------


class OwnerConformanceTests:
    """Subclass in a test file and set :attr:`harness`: one test per conformance check.

    Optional class attributes: :attr:`checks` (ids, groups or prefixes; all by
    default), :attr:`exclude`, :attr:`repeat` and :attr:`options` (a
    :class:`~toolswap.testing.options.RunOptions`; the ``--toolswap-*`` options
    otherwise).
    """

    harness: ClassVar[type[OwnerHarness]]
    checks: ClassVar[Sequence[str] | None] = None
    exclude: ClassVar[Sequence[str]] = ()
    repeat: ClassVar[int] = 1
    options: ClassVar[RunOptions | None] = None

    def test_promise(self, toolswap_check: Check, request: pytest.FixtureRequest) -> None:
        cls = type(self)
        options = cls.options.seeded() if cls.options is not None else _options(request.config)
        _run(cls.harness, toolswap_check, cls.repeat, options)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    cls = metafunc.cls
    if cls is None or not issubclass(cls, OwnerConformanceTests):
        return
    if "toolswap_check" not in metafunc.fixturenames:
        return
    harness = getattr(cls, "harness", None)
    if not (isinstance(harness, type) and issubclass(harness, OwnerHarness)):
        raise pytest.UsageError(
            f"{cls.__qualname__}: set `harness` to a toolswap.testing.OwnerHarness subclass"
        )
    params = []
    for check in checks_named(cls.checks, cls.exclude):
        marks = []
        known = harness.known_failures.get(check.id)
        if known is not None:
            marks.append(pytest.mark.xfail(reason=known, strict=True, raises=ConformanceFailure))
        params.append(pytest.param(check, id=check.id, marks=marks))
    metafunc.parametrize("toolswap_check", params)
