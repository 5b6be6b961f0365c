"""The owner protocol (docs/design.md section 6) against both reference adapters.

Each test states one promise of :mod:`toolswap.owner` (O1-O7) and runs it
against ``InMemoryOwner`` and ``SQLiteOwner``.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import pathlib
import sqlite3
import threading
import time
from collections.abc import Iterator
from typing import Any

import attrs
import pytest

from toolswap.domain import ArtifactRetentionClaim
from toolswap.errors import EnvironmentFailure, OwnerStoreError, UsageError
from toolswap.owner import (
    ArtifactPublicationRejected,
    ArtifactReferenceOwner,
    ObservedState,
    OwnerConflictError,
)
from toolswap.owners.memory import InMemoryOwner, _Row
from toolswap.owners.sqlite import TABLE, SQLiteOwner

from ._journal_support import sqlite_publish_many, sqlite_publish_one

DIGEST = "ab" * 32
CLAIM = ArtifactRetentionClaim(
    source_id="artifact:s1:tool_result_001.txt:" + DIGEST[:12], content_sha256=DIGEST
)
OTHER = ArtifactRetentionClaim(
    source_id="artifact:s1:tool_result_002.txt:" + DIGEST[:12], content_sha256=DIGEST
)


@pytest.fixture(params=["memory", "sqlite"])
def owner(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Iterator[Any]:
    if request.param == "memory":
        yield InMemoryOwner()
    else:
        with SQLiteOwner(tmp_path / "owner.db") as db:
            yield db


def _observe(owner: Any, txn: str) -> Any:
    with owner.inspect_fenced(txn) as seen:
        return attrs.evolve(seen)


def test_adapters_satisfy_the_protocol(owner: Any) -> None:
    assert isinstance(owner, ArtifactReferenceOwner)


def test_o1_publish_is_visible_with_identity_and_generation(owner: Any) -> None:
    owner.publish("t1", CLAIM)
    seen = _observe(owner, "t1")
    assert (seen.state, seen.source_id, seen.content_sha256, seen.generation, seen.sealed) == (
        ObservedState.PUBLISHED,
        CLAIM.source_id,
        DIGEST,
        1,
        False,
    )


def test_o1_republishing_the_same_identity_is_a_no_op(owner: Any) -> None:
    owner.publish("t1", CLAIM)
    owner.publish("t1", CLAIM)
    assert _observe(owner, "t1").generation == 1


def test_o1_another_identity_under_an_id_is_a_conflict_and_writes_nothing(owner: Any) -> None:
    owner.publish("t1", CLAIM)
    with pytest.raises(OwnerConflictError):
        owner.publish("t1", OTHER)
    assert _observe(owner, "t1").source_id == CLAIM.source_id


def test_never_seen_id_is_an_unsealed_absence_at_generation_zero(owner: Any) -> None:
    seen = _observe(owner, "nobody")
    assert (seen.state, seen.generation, seen.sealed) == (ObservedState.ABSENT, 0, False)


def test_o3_o6_seal_by_cas_advances_generation_and_refuses_later_publish(owner: Any) -> None:
    with owner.inspect_fenced("t1") as seen:
        assert seen.seal_absence() is True
    after = _observe(owner, "t1")
    assert (after.state, after.sealed, after.generation) == (ObservedState.ABSENT, True, 1)
    with pytest.raises(ArtifactPublicationRejected):
        owner.publish("t1", CLAIM)
    assert _observe(owner, "t1").generation == 1


def test_o6_seal_with_a_moved_generation_writes_nothing(owner: Any) -> None:
    with owner.inspect_fenced("t1") as seen:
        assert attrs.evolve(seen, generation=5).seal_absence() is False
    assert _observe(owner, "t1").sealed is False
    owner.publish("t1", CLAIM)  # nothing was tombstoned


def test_o6_a_stale_observation_of_an_existing_row_writes_nothing(owner: Any) -> None:
    """The conditional update: a row at another generation than observed is left alone."""
    owner.remove("t1")  # a tombstone at generation 1
    with owner.inspect_fenced("t1") as seen:
        stale = attrs.evolve(seen, sealed=False, generation=seen.generation + 4)
        assert stale.seal_absence() is False
    after = _observe(owner, "t1")
    assert (after.sealed, after.generation) == (True, 1)


def _sneak_in_a_publication(owner: Any, seen: Any, txn: str) -> None:
    """Change the id behind an observation's back, through the fence's own channel."""
    if isinstance(owner, InMemoryOwner):
        owner._rows[txn] = _Row(
            kind="published", source_id=CLAIM.source_id, content_sha256=DIGEST, generation=1
        )
    else:
        seen._connection.execute(
            f"INSERT INTO {TABLE} (transaction_id, kind, source_id, content_sha256, "
            "reference_count, generation) VALUES (?, 'published', ?, ?, 1, 1)",
            (txn, CLAIM.source_id, DIGEST),
        )


def _peek(owner: Any, seen: Any, txn: str) -> tuple[str, int] | None:
    """(kind, generation) of the id's row, read through the fence's own channel."""
    if isinstance(owner, InMemoryOwner):
        row = owner._rows.get(txn)
        return None if row is None else (row.kind, row.generation)
    found = SQLiteOwner._row(seen._connection, txn)
    return None if found is None else (found[0], found[3])


def test_o6_the_seal_of_a_never_seen_id_fails_once_a_row_appeared(owner: Any) -> None:
    """The CAS of generation 0: a row that appeared after the observation is not overwritten."""
    with owner.inspect_fenced("t1") as seen:
        assert (seen.state, seen.generation) == (ObservedState.ABSENT, 0)
        _sneak_in_a_publication(owner, seen, "t1")
        assert seen.seal_absence() is False
        assert _peek(owner, seen, "t1") == ("published", 1)


def test_o6_a_seal_never_tombstones_a_visible_reference(owner: Any) -> None:
    """Even an observation forged to say ABSENT at the right generation cannot hide a reference."""
    owner.publish("t1", CLAIM)
    with owner.inspect_fenced("t1") as seen:
        forged = attrs.evolve(seen, state=ObservedState.ABSENT, source_id=None, content_sha256=None)
        assert forged.seal_absence() is False
    assert _observe(owner, "t1").state is ObservedState.PUBLISHED


def test_o6_seal_outside_its_fence_is_refused(owner: Any) -> None:
    with owner.inspect_fenced("t1") as seen:
        pass
    with pytest.raises(UsageError, match="inside its inspect_fenced"):
        seen.seal_absence()
    assert _observe(owner, "t1").sealed is False
    owner.publish("t1", CLAIM)  # nothing was tombstoned


def test_o6_seal_is_only_for_an_unsealed_absence(owner: Any) -> None:
    owner.publish("t1", CLAIM)
    with owner.inspect_fenced("t1") as seen, pytest.raises(UsageError):
        seen.seal_absence()
    owner.remove("t1")
    with owner.inspect_fenced("t1") as seen, pytest.raises(UsageError):
        seen.seal_absence()


def test_o4_remove_leaves_a_tombstone_and_is_idempotent(owner: Any) -> None:
    owner.publish("t1", CLAIM)
    owner.remove("t1")
    owner.remove("t1")
    seen = _observe(owner, "t1")
    assert (seen.state, seen.sealed, seen.generation) == (ObservedState.ABSENT, True, 2)
    with pytest.raises(ArtifactPublicationRejected):
        owner.publish("t1", CLAIM)


def test_o5_the_fence_excludes_publication_of_that_id(owner: Any) -> None:
    published = threading.Event()

    def late_writer() -> None:
        with contextlib.suppress(ArtifactPublicationRejected):
            owner.publish("t1", CLAIM)
        published.set()

    with owner.inspect_fenced("t1") as seen:
        writer = threading.Thread(target=late_writer)
        writer.start()
        assert not published.wait(0.3), "a publish got through the fence"
        assert seen.seal_absence() is True
    writer.join(10)
    assert published.is_set()
    assert _observe(owner, "t1").sealed is True, "the late write was refused by the tombstone"


def test_sqlite_tombstone_and_reference_survive_reopen(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "owner.db"
    with SQLiteOwner(path) as first:
        first.publish("kept", CLAIM)
        with first.inspect_fenced("sealed") as seen:
            assert seen.seal_absence()
    with SQLiteOwner(path, create=False) as second:
        assert _observe(second, "kept").state is ObservedState.PUBLISHED
        assert _observe(second, "sealed").sealed is True
        with pytest.raises(ArtifactPublicationRejected):
            second.publish("sealed", CLAIM)


def test_sqlite_is_durable_wal_with_full_sync(tmp_path: pathlib.Path) -> None:
    owner = SQLiteOwner(tmp_path / "owner.db")
    conn = owner._connection()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    owner.close()


def test_sqlite_fence_is_a_real_write_transaction(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "owner.db"
    owner = SQLiteOwner(path)
    outsider = sqlite3.connect(path, timeout=0.1, isolation_level=None)
    with owner.inspect_fenced("t1"), pytest.raises(sqlite3.OperationalError):
        outsider.execute("BEGIN IMMEDIATE")
    outsider.execute("BEGIN IMMEDIATE")
    outsider.execute("ROLLBACK")
    outsider.close()
    owner.close()


def test_sqlite_refuses_a_missing_database_when_not_creating(tmp_path: pathlib.Path) -> None:
    with pytest.raises(UsageError):
        SQLiteOwner(tmp_path / "typo.db", create=False)
    assert not (tmp_path / "typo.db").exists()
    sqlite3.connect(tmp_path / "empty.db").execute("CREATE TABLE other (x)").connection.close()
    with pytest.raises(UsageError):
        SQLiteOwner(tmp_path / "empty.db", create=False)


def test_sqlite_store_failures_are_owner_store_errors_without_paths(
    tmp_path: pathlib.Path,
) -> None:
    """A locked database: publish and the fence fail as OwnerStoreError ("maybe"), typed."""
    path = tmp_path / "owner.db"
    owner = SQLiteOwner(path, timeout=0.05)
    outsider = sqlite3.connect(path, isolation_level=None)
    outsider.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(OwnerStoreError) as publish_error:
            owner.publish("t1", CLAIM)
        with pytest.raises(OwnerStoreError), owner.inspect_fenced("t1"):
            pass  # pragma: no cover - the fence cannot be taken
    finally:
        outsider.execute("ROLLBACK")
        outsider.close()
    assert isinstance(publish_error.value, EnvironmentFailure)
    assert isinstance(publish_error.value.__cause__, sqlite3.OperationalError)
    assert str(tmp_path) not in str(publish_error.value)
    assert _observe(owner, "t1").state is ObservedState.ABSENT
    owner.close()


@pytest.mark.parametrize("where", ["", ":memory:"])
def test_sqlite_refuses_a_database_that_is_not_a_durable_file(where: str) -> None:
    with pytest.raises(UsageError, match="durable"):
        SQLiteOwner(where)


def test_sqlite_refuses_a_file_that_is_not_a_database(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"this is not a database, just text " * 100)
    with pytest.raises(OwnerStoreError):
        SQLiteOwner(path, create=False)
    assert path.read_bytes().startswith(b"this is not a database")


@pytest.mark.slow
def test_sqlite_fence_excludes_a_publish_from_another_process(tmp_path: pathlib.Path) -> None:
    """O5 across processes: the child's publish waits for the fence, then meets the tombstone."""
    path = tmp_path / "owner.db"
    context = multiprocessing.get_context("spawn")
    started, result = context.Event(), context.Queue()
    with SQLiteOwner(path) as owner:
        with owner.inspect_fenced("t1") as seen:
            child = context.Process(
                target=sqlite_publish_one,
                args=(str(path), "t1", CLAIM.source_id, DIGEST, started, result),
            )
            child.start()
            assert started.wait(60), "the child did not start"
            time.sleep(0.3)
            assert result.empty(), "a publish from another process got through the fence"
            assert seen.seal_absence() is True
        assert result.get(timeout=60) == "rejected"
        child.join(60)
        assert child.exitcode == 0
        assert _observe(owner, "t1").sealed is True


@pytest.mark.slow
def test_sqlite_several_processes_share_one_file(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "owner.db"
    SQLiteOwner(path).close()
    context = multiprocessing.get_context("spawn")
    workers = [
        context.Process(
            target=sqlite_publish_many, args=(str(path), w, 25, CLAIM.source_id, DIGEST)
        )
        for w in range(4)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert [w.exitcode for w in workers] == [0, 0, 0, 0]
    with SQLiteOwner(path) as owner:
        for w in range(4):
            for i in range(25):
                assert _observe(owner, f"p{w}-{i}").state is ObservedState.PUBLISHED
