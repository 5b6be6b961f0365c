"""The owner checks pass on both reference owners and catch broken adapters."""

from __future__ import annotations

import pathlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from toolswap.domain import ArtifactRetentionClaim
from toolswap.errors import UsageError
from toolswap.owner_checks import OWNER_CHECKS, OwnerCheckResult, run_owner_checks
from toolswap.owners.memory import InMemoryOwner, MemoryObservation
from toolswap.owners.sqlite import SQLiteOwner


def _failed(results: tuple[OwnerCheckResult, ...]) -> set[str]:
    return {r.name for r in results if not r.passed}


def _names(promise: str) -> set[str]:
    return {name for p, name, _ in OWNER_CHECKS if p == promise}


def test_the_sqlite_owner_passes_every_check(tmp_path: pathlib.Path) -> None:
    results = run_owner_checks(lambda: SQLiteOwner(tmp_path / "owner.db"), tmp_path)
    assert len(results) == len(OWNER_CHECKS)
    assert _failed(results) == set()


def test_the_in_memory_owner_passes_every_check_on_one_instance(tmp_path: pathlib.Path) -> None:
    owner = InMemoryOwner()
    assert _failed(run_owner_checks(lambda: owner, tmp_path)) == set()


def test_an_owner_that_forgets_on_reopen_fails_durability(tmp_path: pathlib.Path) -> None:
    failed = _failed(run_owner_checks(InMemoryOwner, tmp_path))
    # O5 too: a second caller opening the "same" store gets another one, unfenced.
    assert failed == _names("O3") | _names("O4") | _names("O5")


class _IgnoresTombstones(InMemoryOwner):
    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        with self._guard:
            self._rows.pop(transaction_id, None)
        super().publish(transaction_id, claim)


def test_an_owner_that_publishes_over_a_tombstone_is_caught(tmp_path: pathlib.Path) -> None:
    owner = _IgnoresTombstones()
    failed = _failed(run_owner_checks(lambda: owner, tmp_path))
    assert _names("O3") | _names("O4") <= failed


class _RemoveWithoutTombstone(InMemoryOwner):
    def remove(self, transaction_id: str) -> None:
        with self._guard:
            self._rows.pop(transaction_id, None)


def test_an_owner_whose_remove_leaves_no_tombstone_is_caught(tmp_path: pathlib.Path) -> None:
    owner = _RemoveWithoutTombstone()
    failed = _failed(run_owner_checks(lambda: owner, tmp_path))
    assert _names("O4") <= failed


class _NoFence(InMemoryOwner):
    def _fence(self, transaction_id: str) -> threading.Lock:
        return threading.Lock()  # a new lock each time excludes nobody


def test_an_owner_whose_fence_excludes_nobody_is_caught(tmp_path: pathlib.Path) -> None:
    owner = _NoFence()
    assert _failed(run_owner_checks(lambda: owner, tmp_path)) == _names("O5")


class _ConflictOverwrites(InMemoryOwner):
    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        with self._guard:
            row = self._rows.get(transaction_id)
            if row is not None and row.kind == "published":
                del self._rows[transaction_id]
        super().publish(transaction_id, claim)


def test_an_owner_that_overwrites_another_identity_is_caught(tmp_path: pathlib.Path) -> None:
    owner = _ConflictOverwrites()
    failed = _failed(run_owner_checks(lambda: owner, tmp_path))
    assert "another identity conflicts" in failed


class _SeesNothing(InMemoryOwner):
    @contextmanager
    def inspect_fenced(self, transaction_id: str) -> Iterator[MemoryObservation]:
        with super().inspect_fenced(transaction_id + "\x00elsewhere") as observation:
            yield observation


def test_an_owner_whose_fence_reads_the_wrong_row_is_caught(tmp_path: pathlib.Path) -> None:
    owner = _SeesNothing()
    failed = _failed(run_owner_checks(lambda: owner, tmp_path))
    assert {"publish is durable and visible", "observation shapes"} <= failed
    assert "published with the claim's identity -> committed" in failed


def test_the_checks_refuse_a_used_work_folder(tmp_path: pathlib.Path) -> None:
    owner = InMemoryOwner()
    run_owner_checks(lambda: owner, tmp_path)
    with pytest.raises(UsageError, match="fresh work folder"):
        run_owner_checks(lambda: owner, tmp_path)


def test_an_adapter_exception_is_a_failed_check_named_by_type_only(tmp_path: pathlib.Path) -> None:
    class _Leaky(InMemoryOwner):
        def remove(self, transaction_id: str) -> None:
            raise RuntimeError("password=hunter2")

    owner = _Leaky()
    results = run_owner_checks(lambda: owner, tmp_path)
    broken = [r for r in results if r.name == "remove leaves a tombstone"]
    assert [r.detail for r in broken] == ["unexpected RuntimeError"]
    assert all("hunter2" not in r.detail for r in results)
