"""Correct adapters the kit once got wrong, or that a broken family is measured against.

They must conform: a check that fails one of them is a false positive of the
kit, not a bug of the adapter.
"""

from __future__ import annotations

import os

from toolswap.owners.sqlite import _SCHEMA, SQLiteHarness, SQLiteOwner

__all__ = ["LockingConstructorHarness"]


class LockingConstructorOwner(SQLiteOwner):
    """Correct: its constructor takes the store's write lock, which no promise forbids.

    Every new handle checks the schema inside ``BEGIN IMMEDIATE ... COMMIT``
    (a migration lock, as many adapters take at start-up), so opening a
    handle waits while another handle holds a fence.  The kit must open its
    competing handles, and start its competing processes, before it enters
    the fence they compete with; otherwise it deadlocks on its own fence.
    """

    def __init__(self, path: str | os.PathLike[str], **options: object) -> None:
        super().__init__(path, **options)  # type: ignore[arg-type]
        with self._transaction("checking the schema") as conn:
            conn.execute(_SCHEMA)


class LockingConstructorHarness(SQLiteHarness):
    owner_class = LockingConstructorOwner
