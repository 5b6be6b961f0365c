"""The kit's O9 checks: the census of references that makes an owner cleanup's second witness.

Claims
======

* The shipped owners keep O9 (the PostgreSQL one in tests/conformance/test_kit_postgres.py
  runs every check).
* Each broken census below is flagged by the check written for its mistake,
  through that check's own finding.
* An owner without a census is skipped with a reason, never failed: O9 is optional.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import pytest

from toolswap.domain import artifact_prefix
from toolswap.owner import Census
from toolswap.owners.memory import InMemoryHarness, InMemoryOwner
from toolswap.owners.sqlite import SQLiteHarness
from toolswap.testing import OwnerHarness, checks_named, run_conformance

O9 = [c.id for c in checks_named(["O9"])]


class _ExactSourceIdCensus(InMemoryOwner):
    """Counts only references whose source id is exactly the one asked about."""

    @contextmanager
    def census_fenced(self, source_ids: Sequence[str]) -> Iterator[Census]:
        with super().census_fenced(source_ids):
            rows = list(self._rows.items())
            yield {
                s: tuple(sorted(t for t, r in rows if r.kind == "published" and r.source_id == s))
                for s in source_ids
            }


class _UnfencedCensus(InMemoryOwner):
    """Reads the references but holds nothing back: a snapshot, not a fence."""

    @contextmanager
    def census_fenced(self, source_ids: Sequence[str]) -> Iterator[Census]:
        prefixes = {s: artifact_prefix(s) for s in source_ids}
        rows = list(self._rows.items())
        yield {
            s: tuple(
                sorted(
                    t
                    for t, r in rows
                    if r.kind == "published" and (r.source_id or "").startswith(p)
                )
            )
            for s, p in prefixes.items()
        }


class _TombstonesCountCensus(InMemoryOwner):
    """Lists every id that ever held a reference naming the artifact, removed ones too."""

    _ever: ClassVar[dict[str, str]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def publish(self, transaction_id: str, claim: Any) -> None:
        super().publish(transaction_id, claim)
        with self._lock:
            self._ever[transaction_id] = claim.source_id

    @contextmanager
    def census_fenced(self, source_ids: Sequence[str]) -> Iterator[Census]:
        with super().census_fenced(source_ids):
            with self._lock:
                ever = dict(self._ever)
            yield {
                s: tuple(
                    sorted(t for t, named in ever.items() if named.startswith(artifact_prefix(s)))
                )
                for s in source_ids
            }


class _NoCensus(InMemoryOwner):
    census_fenced = None  # type: ignore[assignment]


def _harness(owner: type[InMemoryOwner]) -> type[OwnerHarness]:
    return type(f"{owner.__name__.lstrip('_')}Harness", (InMemoryHarness,), {"owner_class": owner})


BROKEN = [
    (_ExactSourceIdCensus, "O9.census-names-the-artifact-whatever-the-digest"),
    (_UnfencedCensus, "O9.census-holds-back-a-publish-naming-it"),
    (_TombstonesCountCensus, "O9.census-lists-every-visible-reference"),
]


@pytest.mark.parametrize("harness", [InMemoryHarness, SQLiteHarness])
def test_the_shipped_owners_keep_o9(harness: type[OwnerHarness], tmp_path: Path) -> None:
    report = run_conformance(harness, workroot=tmp_path, checks=["O9"])
    assert [(r.check_id, r.outcome) for r in report.results] == [(c, "pass") for c in O9]


@pytest.mark.parametrize(("owner", "intended"), BROKEN, ids=[c for _, c in BROKEN])
def test_a_broken_census_is_flagged_by_its_check(
    owner: type[InMemoryOwner], intended: str, tmp_path: Path
) -> None:
    report = run_conformance(_harness(owner), workroot=tmp_path, checks=[intended], timeout=30)
    result = report.result(intended)
    assert result.outcome == "fail", result.message
    assert not result.message.startswith(("unexpected ", "did not finish")), result.message


def test_an_owner_without_a_census_is_skipped_with_a_reason(tmp_path: Path) -> None:
    report = run_conformance(_harness(_NoCensus), workroot=tmp_path, checks=["O9"])
    assert {r.outcome for r in report.results} == {"skip"}
    assert all("O9 is optional" in r.message for r in report.results)
