"""The owner machine passes both reference adapters and catches broken ones.

Each broken adapter below breaks one owner promise sentence in a realistic way,
over the SQLite or the in-memory reference owner, with its own harness.  The
machine must flag it with a short shrunk sequence whose text names what broke.
The runs use a fixed seed so a failure reproduces.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest

from toolswap.domain import ArtifactRetentionClaim
from toolswap.errors import OwnerStoreError, UsageError
from toolswap.owner import ArtifactPublicationRejected, ObservedState, OwnerConflictError
from toolswap.owners.memory import InMemoryHarness, InMemoryOwner, _Row
from toolswap.owners.sqlite import TABLE, SQLiteHarness, SQLiteOwner
from toolswap.testing.harness import Capability, OwnerHarness
from toolswap.testing.machine import (
    MachineResult,
    OwnerMachine,
    owner_machine,
    run_owner_machine,
)

SEED = 20261204
MAX_SHRUNK_STEPS = 8


# -- broken adapters over SQLite ------------------------------------------------


class _DeletingRemove(SQLiteOwner):
    """remove() deletes the row instead of leaving a tombstone (breaks O4)."""

    def remove(self, transaction_id: str) -> None:
        with self._transaction("removing a reference") as conn:
            conn.execute(f"DELETE FROM {TABLE} WHERE transaction_id = ?", (transaction_id,))


class DeletingRemoveHarness(SQLiteHarness):
    owner_class = _DeletingRemove


class _ProcessCounter(SQLiteOwner):
    """Stamps every change of an id with a per-id counter kept in the store process's
    memory, which a restart empties (breaks "a generation is never reused")."""

    counters: dict[str, int]

    def _stamp(self, transaction_id: str, before: int) -> None:
        if self.generation(transaction_id) == before:
            return  # nothing changed
        version = self.counters[transaction_id] = self.counters.get(transaction_id, 0) + 1
        with self._transaction("stamping a generation") as conn:
            conn.execute(
                f"UPDATE {TABLE} SET generation = ? WHERE transaction_id = ?",
                (version, transaction_id),
            )

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        before = self.generation(transaction_id)
        super().publish(transaction_id, claim)
        self._stamp(transaction_id, before)

    def remove(self, transaction_id: str) -> None:
        before = self.generation(transaction_id)
        super().remove(transaction_id)
        self._stamp(transaction_id, before)


class ProcessCounterHarness(SQLiteHarness):
    owner_class = _ProcessCounter
    unsupported = {Capability.FAULTS: "the stamping makes extra store calls"}

    def __init__(self, workdir: str) -> None:
        super().__init__(workdir)
        self._counters: dict[str, int] = {}

    def open_owner(self) -> SQLiteOwner:
        owner = super().open_owner()
        owner.counters = self._counters  # type: ignore[attr-defined]
        return owner

    def restart_store(self) -> None:
        self._counters = {}  # the store process starts counting again


class _RejectsOnStoreError(SQLiteOwner):
    """Turns a failing store into ArtifactPublicationRejected (breaks O2)."""

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        try:
            super().publish(transaction_id, claim)
        except OwnerStoreError as exc:
            raise ArtifactPublicationRejected("the store refused the write") from exc


class RejectsOnStoreErrorHarness(SQLiteHarness):
    owner_class = _RejectsOnStoreError


class _PathInConflict(SQLiteOwner):
    """Names its database file in the conflict error (breaks O7)."""

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        try:
            super().publish(transaction_id, claim)
        except OwnerConflictError as exc:
            raise OwnerConflictError(f"{exc} (database {self._path})") from exc


class PathInConflictHarness(SQLiteHarness):
    owner_class = _PathInConflict


@attrs.frozen(kw_only=True)
class _GuessedAbsence:
    transaction_id: str
    state: ObservedState = ObservedState.ABSENT
    source_id: str | None = None
    content_sha256: str | None = None
    generation: int = 0
    sealed: bool = False

    def seal_absence(self) -> bool:
        raise OwnerStoreError("the store is unavailable")


class _AbsentWhenInDoubt(SQLiteOwner):
    """A fence that cannot read the store answers ABSENT (breaks O8: in doubt, UNKNOWN)."""

    @contextmanager
    def inspect_fenced(self, transaction_id: str) -> Iterator[Any]:
        entered = False
        try:
            with super().inspect_fenced(transaction_id) as observation:
                entered = True
                yield observation
        except OwnerStoreError:
            if entered:
                raise
            yield _GuessedAbsence(transaction_id=transaction_id)


class AbsentWhenInDoubtHarness(SQLiteHarness):
    owner_class = _AbsentWhenInDoubt


# -- broken adapters over the in-memory owner ----------------------------------


def _memory_harness(owner_cls: type[InMemoryOwner]) -> type[InMemoryHarness]:
    name = owner_cls.__name__.lstrip("_") + "Harness"
    return type(name, (InMemoryHarness,), {"owner_class": owner_cls, "__qualname__": name})


class _BlindSeal(InMemoryOwner):
    """seal_absence() writes the tombstone whatever the generation (breaks O6's CAS)."""

    def _cas_tombstone(self, transaction_id: str, observed: int) -> bool:
        self._write_tombstone(transaction_id, self.generation(transaction_id))
        return True


class _CacheRows:
    """A handle's read-through cache of rows: its own writes update it, others' do not."""

    def __init__(self, rows: dict[str, _Row]) -> None:
        self._rows = rows
        self._seen: dict[str, _Row | None] = {}

    def get(self, key: str, default: _Row | None = None) -> _Row | None:
        if key not in self._seen:
            self._seen[key] = self._rows.get(key)
        row = self._seen[key]
        return default if row is None else row

    def __setitem__(self, key: str, row: _Row) -> None:
        self._rows[key] = row
        self._seen[key] = row


class _StaleCache(InMemoryOwner):
    """Each handle reads through its own cache, never invalidated by another handle's
    write (breaks O8: ABSENT is read from the authoritative store)."""

    def _attach(self, store: Any) -> None:
        super()._attach(store)
        self._rows = _CacheRows(store.rows)  # type: ignore[assignment]


class _WritesOverTombstone(InMemoryOwner):
    """Publishing a tombstoned id writes the reference, then reports the rejection
    (breaks O2/O3: a rejection means nothing was written)."""

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        row = self._rows.get(transaction_id)
        if row is not None and row.kind == "tombstone":
            self._rows[transaction_id] = _Row(
                kind="published",
                source_id=claim.source_id,
                content_sha256=claim.content_sha256,
                generation=row.generation + 1,
            )
            raise ArtifactPublicationRejected(f"transaction {transaction_id!r} is tombstoned")
        super().publish(transaction_id, claim)


BlindSealHarness = _memory_harness(_BlindSeal)
StaleCacheHarness = _memory_harness(_StaleCache)
WritesOverTombstoneHarness = _memory_harness(_WritesOverTombstone)

# harness -> patterns the failure text must contain (what broke, and the promise).
BROKEN: dict[type[OwnerHarness], tuple[str, ...]] = {
    DeletingRemoveHarness: (r"tombstone", r"O[34]"),
    ProcessCounterHarness: (r"generation", r"never reused", r"state\.restart\(\)"),
    RejectsOnStoreErrorHarness: (r"under a \w+ fault", r"ArtifactPublicationRejected", r"O2"),
    PathInConflictHarness: (r"OwnerConflictError|publish", r"reveals secret", r"O7"),
    AbsentWhenInDoubtHarness: (r"under a \w+ fault", r"observed ABSENT", r"UNKNOWN"),
    BlindSealHarness: (r"second seal_absence\(\)", r"compare-and-set", r"O6"),
    StaleCacheHarness: (r"came through h\d", r"never a cache"),
    WritesOverTombstoneHarness: (r"observed PUBLISHED", r"TOMBSTONED"),
}


def _steps(result: MachineResult) -> list[str]:
    assert result.failure is not None
    return [
        line
        for line in result.failure.splitlines()
        if line.startswith("state.") and line != "state.teardown()"
    ]


# -- the reference adapters pass -----------------------------------------------


@pytest.mark.parametrize("harness", [SQLiteHarness, InMemoryHarness], ids=lambda h: h.__name__)
def test_reference_adapter_passes(harness: type[OwnerHarness], tmp_path: Path) -> None:
    result = run_owner_machine(harness, tmp_path, max_examples=40, step_count=30)
    assert result.passed, result.failure
    assert result.failure is None


# -- broken adapters are caught, with a short shrunk sequence that names the bug --


@pytest.mark.parametrize("harness", list(BROKEN), ids=lambda h: h.__name__)
def test_broken_adapter_is_caught(harness: type[OwnerHarness], tmp_path: Path) -> None:
    result = run_owner_machine(harness, tmp_path, max_examples=500, step_count=25, seed=SEED)
    assert not result.passed
    assert result.failure is not None
    for pattern in BROKEN[harness]:
        assert re.search(pattern, result.failure), (pattern, result.failure)
    assert 0 < len(_steps(result)) <= MAX_SHRUNK_STEPS, result.failure
    assert "FAILED" in result.summary and "\n" not in result.summary


def test_failure_reproduction_names_handles_ids_and_identities(tmp_path: Path) -> None:
    result = run_owner_machine(WritesOverTombstoneHarness, tmp_path, seed=SEED, max_examples=500)
    steps = _steps(result)
    assert any(
        re.fullmatch(r"state\.publish\(handle='h\d', identity='[\w-]+', txn='t\d'\)", s)
        for s in steps
    ), steps


# -- the entry points ----------------------------------------------------------


def test_run_owner_machine_prints_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_owner_machine(InMemoryHarness, tmp_path / "ok", max_examples=5)
    run_owner_machine(BlindSealHarness, tmp_path / "broken", seed=SEED, max_examples=500)
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", "")


def test_each_example_leaves_no_work_folder(tmp_path: Path) -> None:
    run_owner_machine(SQLiteHarness, tmp_path, max_examples=5, step_count=10)
    assert list(tmp_path.iterdir()) == []


def test_bound_machine_runs_as_a_unittest_case(tmp_path: Path) -> None:
    case = owner_machine(InMemoryHarness, tmp_path).TestCase("runTest")
    outcome = case.defaultTestResult()
    case.run(outcome)
    assert outcome.wasSuccessful(), outcome.failures + outcome.errors


def test_bound_machine_fails_as_a_unittest_case_on_a_broken_adapter(tmp_path: Path) -> None:
    case = owner_machine(BlindSealHarness, tmp_path).TestCase("runTest")
    outcome = case.defaultTestResult()
    case.run(outcome)
    assert not outcome.wasSuccessful()


def test_owner_machine_refuses_a_non_harness(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="OwnerHarness"):
        owner_machine(SQLiteOwner, tmp_path)  # type: ignore[arg-type]


def test_unbound_machine_refuses_to_run() -> None:
    with pytest.raises(UsageError, match="owner_machine"):
        OwnerMachine()
