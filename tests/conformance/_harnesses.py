"""Harnesses the kit's own front-end tests use: unusable ones, and two small broken adapters.

They live in an importable module because the kit builds harnesses in child
processes by ``module:attr``.
"""

from __future__ import annotations

from toolswap.domain import ArtifactRetentionClaim
from toolswap.owner import OwnerConflictError
from toolswap.owners.memory import InMemoryHarness, InMemoryOwner
from toolswap.owners.sqlite import TABLE, SQLiteHarness, SQLiteOwner
from toolswap.testing import OwnerHarness


class SharedHandleHarness(InMemoryHarness):
    """Returns one object for every ``open_owner`` call."""

    def __init__(self, workdir: str) -> None:
        super().__init__(workdir)
        self._only = InMemoryOwner()

    def open_owner(self) -> InMemoryOwner:
        return self._only


class WrongTypeHarness(OwnerHarness):
    def open_owner(self) -> object:  # type: ignore[override]
        return object()


class NotEmptyHarness(InMemoryHarness):
    """A store that already knows the kit's preflight id."""

    def __init__(self, workdir: str) -> None:
        super().__init__(workdir)
        self.open_owner().remove("kit-preflight-marker")


_ONE_STORE = InMemoryOwner()


class OneStoreHarness(InMemoryHarness):
    """Ignores its work folder: every instance reaches the same store."""

    def open_owner(self) -> InMemoryOwner:
        return _ONE_STORE.new_handle()


class BrokenInitHarness(OwnerHarness):
    def __init__(self, workdir: str) -> None:
        raise RuntimeError("no store configured")


class _DeletingOwner(SQLiteOwner):
    """Removes by deleting the row: no tombstone, so a late replay resurrects (O4)."""

    def remove(self, transaction_id: str) -> None:
        with self._transaction("removing a reference") as conn:
            conn.execute(f"DELETE FROM {TABLE} WHERE transaction_id = ?", (transaction_id,))


class DeletingRemoveHarness(SQLiteHarness):
    owner_class = _DeletingOwner


class _LeakyOwner(SQLiteOwner):
    """Names its database file in a conflict message (O7)."""

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        try:
            super().publish(transaction_id, claim)
        except OwnerConflictError as exc:
            raise OwnerConflictError(f"{exc} (database {self._path})") from exc


class LeakyHarness(SQLiteHarness):
    owner_class = _LeakyOwner


class KnownBrokenHarness(DeletingRemoveHarness):
    """Declares the broken sentence as a known failure (strict xfail)."""

    known_failures = {"O4.remove-leaves-tombstone": "rows are deleted, not tombstoned"}


class WronglyKnownHarness(SQLiteHarness):
    """Declares a known failure that does not fail (a strict xfail must flag it)."""

    known_failures = {"O1.publish-visible-to-next-fence": "declared by mistake"}


class TypoKnownHarness(SQLiteHarness):
    known_failures = {"O1.no-such-check": "a typo"}
