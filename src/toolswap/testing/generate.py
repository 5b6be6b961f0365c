"""Generated cases: a sentence check run on examples Hypothesis draws, shrunk when one fails.

The runner first runs a check's fixed examples (:mod:`toolswap.testing.cases`),
then hands :func:`run_generated` one function that runs the check once, on a
fresh store, with the drawer it is given.  Hypothesis then draws transaction
ids from the whole domain the journal allows, identities field by field and
whatever else the check asks its bench for, until the check's example count or
time budget is spent; a failing example is shrunk, and its draws come back as
the case to print and to write to a replay file.

Rules
=====

1. Bounded: at most ``examples`` examples, as many as the check's budget
   leaves room for at the pace of its fixed examples (:func:`examples_within`);
   a failure is shrunk for at most ``shrink_seconds``.
2. Reproducible: the run is seeded; the same seed, kit and adapter draw the
   same examples.
3. Quiet: Hypothesis prints nothing; the failure's message is the check's own.
4. Only a broken promise is shrunk.  A :class:`~toolswap.errors.HarnessError`
   or a skip stops the search at once and is reported as it is.

This module imports Hypothesis; the runner imports it only when it runs.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import attrs
import hypothesis
from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis import strategies as st
from hypothesis.errors import FlakyFailure, Unsatisfiable

from ..journal_format import MAX_TRANSACTION_ID_LEN
from .cases import EDGE_IDS, Drawer, Identities, id_variants

__all__ = [
    "ExampleFailed",
    "Generated",
    "HypothesisDrawer",
    "examples_within",
    "identities",
    "run_generated",
    "shrinking_for",
    "transaction_ids",
]

_CHARS = st.characters(exclude_categories=["Cs"])  # any code point but a lone surrogate
_SESSION_CHARS = string.ascii_letters + string.digits + "._-"


def transaction_ids() -> st.SearchStrategy[str]:
    """Any id the journal allows: short ones, printable ones, the longest, the edge cases."""
    return st.one_of(
        st.text(_CHARS, min_size=1, max_size=24),
        st.text(st.characters(min_codepoint=32, max_codepoint=126), min_size=1, max_size=64),
        st.text(_CHARS, min_size=MAX_TRANSACTION_ID_LEN - 16, max_size=MAX_TRANSACTION_ID_LEN),
        st.sampled_from(EDGE_IDS),
    )


def identities() -> st.SearchStrategy[Identities]:
    """A session id from its whole grammar (case matters) and the texts of two artifacts."""
    session = st.text(st.sampled_from(_SESSION_CHARS), min_size=1, max_size=128).filter(
        lambda s: s not in (".", "..")
    )
    text = st.text(_CHARS, max_size=48)
    return st.builds(
        lambda s, a, b: Identities(session=s, texts=(a, b)),
        session,
        text,
        text,
    ).filter(lambda i: i.texts[0] != i.texts[1])


class HypothesisDrawer(Drawer):
    """Draws every value from Hypothesis's ``data`` (so a failure shrinks)."""

    style = "generated"

    def __init__(self, data: Any) -> None:
        super().__init__()
        self._data = data

    def txn(self, name: str, taken: Sequence[str]) -> str:
        chosen = set(taken)
        value = self._data.draw(
            transaction_ids().filter(lambda t: t not in chosen), label=f"txn {name}"
        )
        return str(self._keep(f"txn {name}", value))

    def family(self, base: str) -> tuple[str, ...]:
        variants = id_variants(base)
        if not variants:
            return tuple(self._keep("family", []))
        value = self._data.draw(
            st.lists(
                st.sampled_from(variants), min_size=1, max_size=min(8, len(variants)), unique=True
            ),
            label="family",
        )
        return tuple(self._keep("family", list(value)))

    def identities(self) -> Identities:
        value: Identities = self._data.draw(identities(), label="identities")
        self._keep("identities", [value.session, *value.texts])
        return value

    def integer(self, label: str, low: int, high: int, fixed: int) -> int:
        return int(self._keep(label, self._data.draw(st.integers(low, high), label=label)))

    def choice(self, label: str, options: Sequence[Any], fixed: Any) -> Any:
        return self._keep(label, self._data.draw(st.sampled_from(list(options)), label=label))


class ExampleFailed(Exception):
    """One example broke the check's promise; the message is redacted and final."""


@attrs.frozen(kw_only=True)
class Generated:
    """What the generated examples of one check found."""

    examples: int
    failure: str | None = None
    record: list[list[Any]] | None = None
    note: str = ""
    stopped: BaseException | None = None


def examples_within(examples: int, seconds_left: float, seconds_each: float) -> int:
    """How many examples fit in what is left of a budget, at most ``examples``.

    Counted before the search starts: stopping a search half-way would make
    Hypothesis see the same draws behave differently.
    """
    if seconds_left <= 0:
        return 0
    return max(0, min(examples, int(seconds_left / max(seconds_each, 1e-3))))


def run_generated(
    example: Callable[[Drawer], None],
    *,
    examples: int,
    seed: int,
    shrink_seconds: float = 20.0,
) -> Generated:
    """Run ``example`` on ``examples`` drawn cases (module rules).

    ``example`` raises :class:`ExampleFailed` when the check fails.
    """
    if examples <= 0:
        return Generated(examples=0)
    ran = 0
    failing: tuple[str, list[list[Any]]] | None = None
    stopped: BaseException | None = None

    def body(data: Any) -> None:
        nonlocal ran, failing, stopped
        if stopped is not None:
            return  # the search is over; Hypothesis finishes its count quickly
        drawer = HypothesisDrawer(data)
        try:
            example(drawer)
        except ExampleFailed as failure:
            failing = (str(failure), list(drawer.record))
            raise
        except Exception as exc:  # a harness defect or a skip: not a case to shrink
            stopped = exc
            return
        ran += 1

    test: Any = hypothesis.given(st.data())(body)
    test = settings(
        max_examples=max(examples, 1),
        deadline=None,
        database=None,
        derandomize=False,
        phases=(Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
        print_blob=False,
        report_multiple_bugs=False,
    )(test)
    test = hypothesis.seed(seed)(test)
    with shrinking_for(shrink_seconds):
        try:
            test()
        except ExampleFailed:
            assert failing is not None
            return Generated(examples=ran + 1, failure=failing[0], record=failing[1])
        except FlakyFailure:
            if failing is None:
                raise
            return Generated(
                examples=ran + 1,
                failure=failing[0],
                record=failing[1],
                note="it did not fail again when replayed at once (timing-dependent)",
            )
        except Unsatisfiable:
            pass  # nothing could be drawn: nothing failed
    return Generated(examples=ran, stopped=stopped)


@contextmanager
def shrinking_for(seconds: float) -> Iterator[None]:
    """Bound Hypothesis's shrinking (its own limit is minutes) for the duration of a run."""
    from hypothesis.internal.conjecture import engine

    previous = getattr(engine, "MAX_SHRINKING_SECONDS", None)
    if previous is None:  # a Hypothesis without the knob: its own limit applies
        yield
        return
    engine.MAX_SHRINKING_SECONDS = seconds  # type: ignore[assignment]
    try:
        yield
    finally:
        engine.MAX_SHRINKING_SECONDS = previous
