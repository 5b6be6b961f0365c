"""The kit's pytest plugin (entry point ``pytest11: toolswap``): conformance checks as pytest items.

Two ways in, both giving one ordinary pytest item per check (so ``-k``,
``--junitxml`` and ``-x`` work as usual):

* on the command line: ``pytest --toolswap-owner mypkg.harness:Harness``
  (also ``sqlite``, ``memory`` or a ``postgresql://`` URL), with
  ``--toolswap-check ID`` (repeatable) and ``--toolswap-repeat N``;
* in a test file, a class that subclasses :class:`OwnerConformanceTests`
  and names its harness::

      class TestMyOwner(OwnerConformanceTests):
          harness = MyHarness

A check the harness cannot run is skipped with the harness's reason; a check
named in the harness's ``known_failures`` is a strict xfail (the run fails if
it starts passing).  An unusable harness is one error line, before any item
runs.  The plugin does nothing unless one of the two is used.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from typing import Any, ClassVar

import pytest

from .harness import HarnessError, OwnerHarness, resolve_harness
from .registry import Check, checks_named
from .runner import preflight, run_check

__all__ = ["OwnerConformanceTests", "ConformanceItem"]

_PREFLIGHT_DONE: dict[type[OwnerHarness], str | None] = {}


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
        "--toolswap-repeat", type=int, default=1, metavar="N", help="run each check N times"
    )


def _harness_preflight(harness: type[OwnerHarness]) -> str | None:
    """Run the preflight once per harness per process; the error line or ``None``."""
    if harness not in _PREFLIGHT_DONE:
        with tempfile.TemporaryDirectory(prefix="toolswap-preflight-") as root:
            try:
                preflight(harness, root)
                _PREFLIGHT_DONE[harness] = None
            except HarnessError as exc:
                _PREFLIGHT_DONE[harness] = str(exc)
    return _PREFLIGHT_DONE[harness]


class ConformanceFailure(Exception):
    """A check failed; the message says which promise broke and how."""


def _run(harness: type[OwnerHarness], check: Check, repeat: int) -> None:
    problem = _harness_preflight(harness)
    if problem is not None:
        raise ConformanceFailure(problem)
    for attempt in range(repeat):
        with tempfile.TemporaryDirectory(prefix="toolswap-conformance-") as workdir:
            verdict, message = run_check(harness, check, workdir)
        if verdict == "skip":
            pytest.skip(message)
        if verdict == "fail":
            prefix = f"repetition {attempt + 1}/{repeat}: " if repeat > 1 else ""
            raise ConformanceFailure(f"{check.id}: {prefix}{message}\npromise: {check.promise}")


def _mark(item: pytest.Item, harness: type[OwnerHarness], check: Check) -> None:
    known = harness.known_failures.get(check.id)
    if known is not None:
        item.add_marker(pytest.mark.xfail(reason=known, strict=True, raises=ConformanceFailure))


class ConformanceItem(pytest.Item):
    """One check against the harness named by ``--toolswap-owner``."""

    def __init__(self, *, harness: type[OwnerHarness], check: Check, repeat: int, **kw: Any):
        super().__init__(**kw)
        self.harness, self.check, self.repeat = harness, check, repeat

    def runtest(self) -> None:
        _run(self.harness, self.check, self.repeat)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, ConformanceFailure):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[str, int | None, str]:
        return ("toolswap-conformance", None, f"{self.check.id}")


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    spec = config.getoption("--toolswap-owner")
    if not spec:
        return
    try:
        harness = resolve_harness(spec)
        problem = _harness_preflight(harness)
        chosen = checks_named(config.getoption("--toolswap-check"))
    except HarnessError as exc:
        raise pytest.UsageError(f"toolswap conformance: {exc}") from None
    except ValueError as exc:
        raise pytest.UsageError(f"toolswap conformance: {exc}") from None
    if problem is not None:
        raise pytest.UsageError(f"toolswap conformance: {problem}")
    repeat = config.getoption("--toolswap-repeat")
    suite = _Suite.from_parent(session, name=_SUITE, nodeid=_SUITE)
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


class OwnerConformanceTests:
    """Subclass in a test file and set :attr:`harness`: one test per conformance check.

    Optional class attributes: :attr:`checks` (ids, groups or prefixes; all by
    default) and :attr:`repeat`.
    """

    harness: ClassVar[type[OwnerHarness]]
    checks: ClassVar[Sequence[str] | None] = None
    repeat: ClassVar[int] = 1

    def test_promise(self, toolswap_check: Check) -> None:
        _run(type(self).harness, toolswap_check, type(self).repeat)


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
    for check in checks_named(cls.checks):
        marks = []
        known = harness.known_failures.get(check.id)
        if known is not None:
            marks.append(pytest.mark.xfail(reason=known, strict=True, raises=ConformanceFailure))
        params.append(pytest.param(check, id=check.id, marks=marks))
    metafunc.parametrize("toolswap_check", params)
