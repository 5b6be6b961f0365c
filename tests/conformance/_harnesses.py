"""Harnesses the kit's own front-end tests use: unusable ones, and two small broken adapters.

They live in an importable module because the kit builds harnesses in child
processes by ``module:attr``.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import ClassVar

from toolswap.domain import ArtifactRetentionClaim
from toolswap.owner import OwnerConflictError
from toolswap.owners.memory import InMemoryHarness, InMemoryOwner
from toolswap.owners.sqlite import TABLE, SQLiteHarness, SQLiteOwner
from toolswap.testing import Capability, OwnerHarness


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


# -- harnesses that hang or end the process (the runner must outlive them) -----------------


class HangingConstructorHarness(OwnerHarness):
    """Its constructor never returns (a connect without a time-out)."""

    def __init__(self, workdir: str) -> None:
        super().__init__(workdir)
        threading.Event().wait()


class HangingOpenHarness(InMemoryHarness):
    """``open_owner`` never returns."""

    def open_owner(self) -> InMemoryOwner:
        threading.Event().wait()
        raise AssertionError("unreachable")


class ExitingOpenHarness(InMemoryHarness):
    """``open_owner`` calls ``sys.exit(0)``."""

    def open_owner(self) -> InMemoryOwner:
        sys.exit(0)


class HardExitOpenHarness(InMemoryHarness):
    """``open_owner`` calls ``os._exit(0)``: the process would end with status 0."""

    def open_owner(self) -> InMemoryOwner:
        os._exit(0)


class LateHardExitHarness(InMemoryHarness):
    """Passes the preflight, then ends the process from inside a check (``os._exit(0)``)."""

    opened: ClassVar[list[int]] = []

    def open_owner(self) -> InMemoryOwner:
        self.opened.append(1)
        if len(self.opened) > 3:  # the preflight opens three handles
            os._exit(0)
        return super().open_owner()


class SecretInitHarness(OwnerHarness):
    """Its constructor's error names a DSN with a password: it must not be shown."""

    def __init__(self, workdir: str) -> None:
        raise RuntimeError("could not connect to postgresql://kit:hunter2@db.internal/owners")


class LateHangingHarness(InMemoryHarness):
    """Passes the preflight, then ``open_owner`` never returns (inside a check)."""

    opened: ClassVar[list[int]] = []

    def open_owner(self) -> InMemoryOwner:
        self.opened.append(1)
        if len(self.opened) > 3:
            threading.Event().wait()
        return super().open_owner()


class NearTypoKnownHarness(SQLiteHarness):
    known_failures = {"O1.publish-visble-to-next-fence": "a typo of a real id"}


class RaisingOpenHarness(InMemoryHarness):
    """``open_owner`` raises (its message names nothing secret)."""

    def open_owner(self) -> InMemoryOwner:
        raise ConnectionError("the store refused the connection")


class PrintingHarness(InMemoryHarness):
    """Prints while it opens handles, as a chatty client library does."""

    def open_owner(self) -> InMemoryOwner:
        print("hello from the harness")
        return super().open_owner()


class NoClockHarness(InMemoryHarness):
    """Cannot move its store's clock (a server's ``now()``): time passes only for real."""

    unsupported = {
        **InMemoryHarness.unsupported,
        Capability.CLOCK: "the store's clock is the server's",
    }
