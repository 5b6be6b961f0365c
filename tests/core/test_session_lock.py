"""One thread never waits for a session lock it already holds through another object."""

from __future__ import annotations

import pathlib
import threading
from collections.abc import Callable

from toolswap.domain import ArtifactRetentionClaim
from toolswap.errors import UsageError
from toolswap.externalizer import ToolResultExternalizer
from toolswap.journal import ArtifactRetentionJournal
from toolswap.session import SessionPaths

from ._artifacts import lines


def _within(seconds: float, action: Callable[[], None]) -> BaseException | None:
    """Run ``action`` in a thread; a deadlock fails the test instead of hanging it."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            action()
            outcome.append(None)
        except BaseException as exc:  # handed back to the test
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), "deadlocked on its own session lock"
    return outcome[0]


def test_externalizing_inside_a_locked_journal_block_is_refused(tmp_path: pathlib.Path) -> None:
    ext = ToolResultExternalizer(tmp_path / "s", environ={})
    journal = ArtifactRetentionJournal(tmp_path / "s")

    def nested() -> None:
        with journal.locked_state():
            ext.externalize(lines(4000), "bash")

    assert isinstance(_within(10, nested), UsageError)
    assert not (tmp_path / "s" / "tool-results").exists() or not any(
        (tmp_path / "s" / "tool-results").iterdir()
    )


def test_a_second_journal_object_inside_a_locked_block_is_refused(tmp_path: pathlib.Path) -> None:
    ext = ToolResultExternalizer(tmp_path / "s", environ={})
    ref = ext.externalize(lines(4000), "bash").artifact
    assert ref is not None
    claim = ArtifactRetentionClaim.from_memory_reference(ref.for_memory())
    first, second = (
        ArtifactRetentionJournal(tmp_path / "s"),
        ArtifactRetentionJournal(tmp_path / "s"),
    )

    def nested() -> None:
        with first.locked_state():
            second.prepare(claim, "t1")

    assert isinstance(_within(10, nested), UsageError)
    assert "t1" not in first.recover().pending_transaction_ids


def test_the_same_journal_object_may_nest(tmp_path: pathlib.Path) -> None:
    ext = ToolResultExternalizer(tmp_path / "s", environ={})
    ref = ext.externalize(lines(4000), "bash").artifact
    assert ref is not None
    claim = ArtifactRetentionClaim.from_memory_reference(ref.for_memory())
    journal = ArtifactRetentionJournal(tmp_path / "s")

    def nested() -> None:
        with journal.locked_state():
            journal.prepare(claim, "t1")

    assert _within(10, nested) is None
    assert "t1" in journal.recover().pending_transaction_ids


def test_the_lock_is_free_again_after_the_block(tmp_path: pathlib.Path) -> None:
    paths = SessionPaths.at(tmp_path / "s")

    def twice_then_nested() -> None:
        with paths.session_lock():
            pass
        with paths.session_lock():
            pass
        with paths.session_lock(), paths.session_lock():
            pass

    assert isinstance(_within(10, twice_then_nested), UsageError)
