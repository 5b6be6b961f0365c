"""``PostgresOwner`` when the server fails under it: crash restarts, timeouts, bad passwords.

A crash restart (``TOOLSWAP_POSTGRES_RESTART``: an immediate stop, then a
start) is made to happen at an exact step of a call by a connection class
that runs it just before a chosen statement is sent.  Each test states what
the journal must believe afterwards: an interrupted write is "maybe written"
(the lease stays PREPARED, never ABORTED), and reconciliation settles it
from what the server really kept.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import pytest
from toolswap.spec.lease import LeaseState

from toolswap.cli import main
from toolswap.errors import OwnerStoreError
from toolswap.journal import ArtifactRetentionJournal
from toolswap.owner import (
    ArtifactPublicationRejected,
    ObservedState,
    ReconcileStatus,
    owner_publisher,
)
from toolswap.owners.postgres import PostgresOwner, dsn_secrets

from .._postgres import require_psycopg, restart_server
from ._journal_support import make_artifact

require_psycopg()  # skips the module without the driver; fails under CI
import psycopg  # noqa: E402

pytestmark = pytest.mark.postgres


def _crash_before(predicate: Callable[[str], bool]) -> type[psycopg.Connection[Any]]:
    """A connection class that crash-restarts the server before the first statement
    matching ``predicate`` is sent (once), then lets the statement meet the dead link."""
    fired: list[bool] = []

    class CrashingConnection(psycopg.Connection[Any]):
        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            if not fired and isinstance(query, str) and predicate(query):
                fired.append(True)
                restart_server()
            return super().execute(query, params, **kwargs)

    CrashingConnection.fired = fired  # type: ignore[attr-defined]
    return CrashingConnection


def _is_commit(query: str) -> bool:
    return query.strip() == "COMMIT"


def _session(tmp_path: pathlib.Path) -> tuple[ArtifactRetentionJournal, Any]:
    claim = make_artifact(tmp_path / "s1")
    return ArtifactRetentionJournal(tmp_path / "s1"), claim


def test_server_killed_inside_a_fence(pg_dsn: str, pg_schema: str, tmp_path: pathlib.Path) -> None:
    """The fence's lock dies with the server; the seal then fails ("maybe sealed"),
    the block still ends cleanly, and afterwards the id is as it was: absent, unsealed."""
    journal, claim = _session(tmp_path)
    journal.prepare(claim, "t1")
    with PostgresOwner(pg_dsn, schema=pg_schema) as owner:
        with owner.inspect_fenced("t1") as seen:
            assert (seen.state, seen.sealed) == (ObservedState.ABSENT, False)
            restart_server()
            with pytest.raises(OwnerStoreError) as caught:
                seen.seal_absence()
            assert isinstance(caught.value.__cause__, psycopg.Error)
        with owner.inspect_fenced("t1") as after:  # the pool reconnects by itself
            assert (after.state, after.sealed) == (ObservedState.ABSENT, False)
        [report] = journal.reconcile_pending(owner)
        assert report.status is ReconcileStatus.ABORTED
    assert journal.recover().states["t1"] is LeaseState.ABORTED


def test_server_killed_during_a_seal_leaves_the_lease_pending(
    pg_dsn: str, pg_schema: str, tmp_path: pathlib.Path
) -> None:
    """Killed after the tombstone was written but before its COMMIT: reconciliation
    reports pending_unknown (not aborted), and the next run seals and aborts."""
    journal, claim = _session(tmp_path)
    journal.prepare(claim, "t1")
    sealing: list[bool] = []

    def before_the_seal_commits(query: str) -> bool:
        if "'tombstone'" in query:
            sealing.append(True)
        return bool(sealing) and _is_commit(query)

    crashing = _crash_before(before_the_seal_commits)
    with PostgresOwner(pg_dsn, schema=pg_schema, connection_class=crashing) as owner:
        [report] = journal.reconcile_pending(owner)
        assert crashing.fired == [True]  # type: ignore[attr-defined]
        assert report.status is ReconcileStatus.PENDING_UNKNOWN
        assert journal.recover().states["t1"] is LeaseState.PREPARED
        with owner.inspect_fenced("t1") as seen:  # the uncommitted tombstone is gone
            assert (seen.state, seen.sealed, seen.generation) == (ObservedState.ABSENT, False, 0)
        [again] = journal.reconcile_pending(owner)
        assert again.status is ReconcileStatus.ABORTED
        with pytest.raises(ArtifactPublicationRejected):
            owner.publish("t1", claim)


@pytest.mark.parametrize("committed", [False, True], ids=["before-commit", "after-commit"])
def test_server_killed_during_a_publish_is_maybe_written(
    pg_dsn: str, pg_schema: str, tmp_path: pathlib.Path, committed: bool
) -> None:
    """Killed before the publish's COMMIT (nothing kept) or right after it (kept, answer
    lost): either way the lease stays PREPARED, and reconciliation follows the server."""
    journal, claim = _session(tmp_path)
    inserted: list[bool] = []

    def at_the_commit(query: str) -> bool:
        if query.startswith("INSERT"):
            inserted.append(True)
        return bool(inserted) and _is_commit(query)

    class LosesTheAnswer(psycopg.Connection[Any]):
        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            if isinstance(query, str) and query.startswith("INSERT"):
                inserted.append(True)
            result = super().execute(query, params, **kwargs)
            if inserted and isinstance(query, str) and _is_commit(query):
                restart_server()  # durable now; the caller never hears back
                super().execute("SELECT 1")
            return result

    crashing = LosesTheAnswer if committed else _crash_before(at_the_commit)
    with PostgresOwner(pg_dsn, schema=pg_schema, connection_class=crashing) as owner:
        with pytest.raises(OwnerStoreError) as caught:
            journal.publish_reference(claim, owner_publisher(owner, "t1", claim), "t1")
        assert not isinstance(caught.value, ArtifactPublicationRejected)
        assert journal.recover().states["t1"] is LeaseState.PREPARED
        [report] = journal.reconcile_pending(owner)
    expected = ReconcileStatus.COMMITTED if committed else ReconcileStatus.ABORTED
    assert report.status is expected
    with PostgresOwner(pg_dsn, schema=pg_schema) as fresh, fresh.inspect_fenced("t1") as seen:
        assert (seen.state is ObservedState.PUBLISHED) is committed


def test_a_statement_timeout_is_maybe_written(
    pg_dsn: str, pg_schema: str, tmp_path: pathlib.Path
) -> None:
    """A publish cancelled by statement_timeout (stuck behind a fence) raises
    OwnerStoreError naming the timeout, never a rejection; the lease stays PREPARED."""
    journal, claim = _session(tmp_path)
    with (
        PostgresOwner(pg_dsn, schema=pg_schema) as holder,
        PostgresOwner(pg_dsn, schema=pg_schema, statement_timeout=0.3) as hasty,
    ):
        with holder.inspect_fenced("t1"):
            with pytest.raises(OwnerStoreError, match="statement timeout") as caught:
                journal.publish_reference(claim, owner_publisher(hasty, "t1", claim), "t1")
            cause = caught.value.__cause__
            assert isinstance(cause, psycopg.errors.QueryCanceled)
            assert not isinstance(caught.value, ArtifactPublicationRejected)
        assert journal.recover().states["t1"] is LeaseState.PREPARED
        [report] = journal.reconcile_pending(hasty)
        assert report.status is ReconcileStatus.ABORTED  # it really was not written


def test_a_wrong_password_is_one_line_with_only_the_reason(
    pg_dsn: str, pg_schema: str, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    journal, claim = _session(tmp_path)
    journal.prepare(claim, "t1")
    password = dsn_secrets(pg_dsn)[1]
    wrong = pg_dsn.replace(password, "wrong-password") + f"&schema={pg_schema}"
    before = (tmp_path / "s1" / "retention-leases.jsonl").read_bytes()
    code = main(["reconcile", "--owner", wrong, "--session", str(tmp_path / "s1")])
    captured = capsys.readouterr()
    assert (code, captured.out) == (2, "")
    assert captured.err == (
        "toolswap: error: PostgreSQL owner: opening the owner: connecting failed "
        "(password authentication failed)\n"
    )
    assert (tmp_path / "s1" / "retention-leases.jsonl").read_bytes() == before
