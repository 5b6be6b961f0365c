"""Broken adapters that store ids or identities inexactly: right for one id, wrong beside another.

Each passes every check that uses a single readable id and a single identity
(the kit before it drew its cases); only an id or identity one step away from
another, in the same store, shows the bug.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import attrs

from toolswap.domain import ArtifactRetentionClaim, artifact_number, parse_source_id
from toolswap.errors import UsageError
from toolswap.journal_format import validate_transaction_id
from toolswap.owner import ArtifactPublicationRejected, OwnerConflictError
from toolswap.owners.memory import InMemoryHarness, InMemoryOwner
from toolswap.owners.sqlite import SQLiteHarness, SQLiteObservation, SQLiteOwner

from ._base import MemoryRow, insert_published, read_row

__all__ = [
    "CaseFoldingIdsHarness",
    "CaseInsensitiveIdentityHarness",
    "DigestOnlyIdentityHarness",
    "FileNumberIdentityHarness",
    "LatinOneIdsHarness",
    "LowercasedSourceIdHarness",
    "NfcIdsHarness",
    "RejectsUnusualIdsHarness",
    "SanitisedIdsHarness",
    "TruncatingIdsHarness",
    "UnquotedUrlIdsHarness",
    "WholeClaimIdentityHarness",
]


class _FoldedKeys(dict[str, Any]):
    """A dict that files every key under ``fold(key)``: the store's own key rule."""

    def __init__(self, fold: Callable[[str], str]) -> None:
        super().__init__()
        self._fold = fold

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        return super().get(self._fold(key), default)

    def __getitem__(self, key: str) -> Any:
        return super().__getitem__(self._fold(key))

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(self._fold(key), value)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and super().__contains__(self._fold(key))

    def setdefault(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        return super().setdefault(self._fold(key), default)


class _KeyRuleOwner(InMemoryOwner):
    """An in-memory owner whose store files ids under ``key_rule(id)``."""

    @staticmethod
    def key_rule(transaction_id: str) -> str:
        return transaction_id

    def _attach(self, store: Any) -> None:
        if not isinstance(store.rows, _FoldedKeys):
            store.rows, store.fences = _FoldedKeys(self.key_rule), _FoldedKeys(self.key_rule)
        super()._attach(store)


class CaseFoldingIdsOwner(_KeyRuleOwner):
    """Breaks the terms' "a reference is keyed by its transaction id" (O1, O8).

    The store behind it is a case-insensitive key-value store ("ids are
    UUIDs, case never matters"), so ``Kit-T`` and ``kit-t`` are one key: a
    fence over a never-seen id sees another id's reference.
    """

    key_rule = staticmethod(str.casefold)


class CaseFoldingIdsHarness(InMemoryHarness):
    owner_class = CaseFoldingIdsOwner


def _sanitised(transaction_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in transaction_id)


class SanitisedIdsOwner(_KeyRuleOwner):
    """Breaks O4 "remove ... a tombstone for it" on its own id only.

    The author turns every id into a safe key for an object store ("keys
    may not hold '.', ':' or spaces": each becomes ``_``).  Removing
    ``kit.t`` then tombstones ``kit_t`` too, and a published reference there
    disappears.
    """

    key_rule = staticmethod(_sanitised)


class SanitisedIdsHarness(InMemoryHarness):
    owner_class = SanitisedIdsOwner


def _latin_one(transaction_id: str) -> str:
    return transaction_id.encode("latin-1", "replace").decode("latin-1")


class LatinOneIdsOwner(_KeyRuleOwner):
    """Breaks the terms' "keyed by its transaction id" for ids beyond Latin-1.

    The key column of the author's store is Latin-1, and the driver replaces
    what it cannot encode with ``?``: two ids that differ only in characters
    outside Latin-1 are one key.  Readable ASCII ids never show it.
    """

    key_rule = staticmethod(_latin_one)


class LatinOneIdsHarness(InMemoryHarness):
    owner_class = LatinOneIdsOwner


def _url_path(transaction_id: str) -> str:
    return transaction_id.split("#", 1)[0].split("?", 1)[0]


class UnquotedUrlIdsOwner(_KeyRuleOwner):
    """Breaks the terms' "keyed by its transaction id" for ids holding ``#`` or ``?``.

    The store is a REST service and the author builds the URL as
    ``f"/references/{transaction_id}"`` without quoting: ``#`` starts a
    fragment and ``?`` a query, which the server never sees.  Ids that agree
    up to either character are one key.  No fixed example holds one; drawn
    ids often do.
    """

    key_rule = staticmethod(_url_path)


class UnquotedUrlIdsHarness(InMemoryHarness):
    owner_class = UnquotedUrlIdsOwner


class _RekeyedSQLiteOwner(SQLiteOwner):
    """A SQLite owner that stores ``key_rule(id)``; observations still name the caller's id."""

    @staticmethod
    def key_rule(transaction_id: str) -> str:
        return transaction_id

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        super().publish(self.key_rule(validate_transaction_id(transaction_id)), claim)

    def remove(self, transaction_id: str) -> None:
        super().remove(self.key_rule(validate_transaction_id(transaction_id)))

    @contextmanager
    def inspect_fenced(self, transaction_id: str) -> Iterator[SQLiteObservation]:
        txn = validate_transaction_id(transaction_id)
        with super().inspect_fenced(self.key_rule(txn)) as seen:
            yield attrs.evolve(seen, transaction_id=txn)


class NfcIdsOwner(_RekeyedSQLiteOwner):
    """Breaks the terms' "keyed by its transaction id" for ids in another Unicode form.

    The author normalises ids to NFC "so that the same text typed on two
    systems is the same key".  Two ids that differ in normal form are two
    ids to the journal and one to this store.
    """

    @staticmethod
    def key_rule(transaction_id: str) -> str:
        return unicodedata.normalize("NFC", transaction_id)


class NfcIdsHarness(SQLiteHarness):
    owner_class = NfcIdsOwner


class TruncatingIdsOwner(_RekeyedSQLiteOwner):
    """Breaks the terms' "keyed by its transaction id" for long ids.

    The schema came from a MySQL deployment whose key column is
    ``VARCHAR(255)``; the author truncates to match.  Ids that share their
    first 255 characters are one key.
    """

    @staticmethod
    def key_rule(transaction_id: str) -> str:
        return transaction_id[:255]


class TruncatingIdsHarness(SQLiteHarness):
    owner_class = TruncatingIdsOwner


class RejectsUnusualIdsOwner(SQLiteOwner):
    """Breaks O1 "publish returns normally only once a reference ... is durable" for some ids.

    The author validates ids like URL path segments: at most 255 characters,
    no control characters.  The journal allows any non-empty string of up to
    512 characters, so a publish the journal makes can never succeed.
    """

    @staticmethod
    def _check(transaction_id: str) -> str:
        txn = validate_transaction_id(transaction_id)
        if len(txn) > 255 or any(ord(c) < 32 for c in txn):
            raise UsageError("transaction ids are at most 255 printable characters")
        return txn

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        super().publish(self._check(transaction_id), claim)

    def remove(self, transaction_id: str) -> None:
        super().remove(self._check(transaction_id))

    def inspect_fenced(self, transaction_id: str) -> Any:
        return super().inspect_fenced(self._check(transaction_id))


class RejectsUnusualIdsHarness(SQLiteHarness):
    owner_class = RejectsUnusualIdsOwner


# -- identities -----------------------------------------------------------------------------


class DigestOnlyIdentityOwner(InMemoryOwner):
    """Breaks O1 "another identity under an id that holds a reference raises OwnerConflictError".

    "The digest is the content, the source id only says where it came from":
    the author compares digests only.  The same content under another
    session or file name is taken for the held reference (a no-op), so the
    journal commits a lease for an artifact the owner does not show.
    """

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        txn = validate_transaction_id(transaction_id)
        with self._fence(txn):
            row = self._rows.get(txn)
            if row is not None and row.kind == "tombstone":
                raise ArtifactPublicationRejected(f"transaction {txn!r} is tombstoned")
            if row is not None:
                if row.content_sha256 == claim.content_sha256:
                    return
                raise OwnerConflictError(f"transaction {txn!r} holds another reference")
            self._rows[txn] = MemoryRow(
                kind="published",
                source_id=claim.source_id,
                content_sha256=claim.content_sha256,
                generation=1,
            )


class DigestOnlyIdentityHarness(InMemoryHarness):
    owner_class = DigestOnlyIdentityOwner


class LowercasedSourceIdOwner(InMemoryOwner):
    """Breaks O8 "PUBLISHED (source_id and content_sha256 are the durable identity)".

    The author lower-cases source ids on the way in ("hex digests are lower
    case anyway").  The session part of a source id is case-sensitive, so
    the fence shows another identity than the one published, and a lease of
    ``Session`` would be judged a conflict -- or, for ``session``, committed
    for the wrong artifact.
    """

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        lowered = ArtifactRetentionClaim(
            source_id=claim.source_id.lower(),
            content_sha256=claim.content_sha256,
            reference_count=claim.reference_count,
        )
        super().publish(transaction_id, lowered)


class LowercasedSourceIdHarness(InMemoryHarness):
    owner_class = LowercasedSourceIdOwner


class _IdentityRuleOwner(SQLiteOwner):
    """The reference publish, with the adapter's own rule for "the same identity"."""

    def same(self, row: tuple[Any, ...], claim: ArtifactRetentionClaim) -> bool:
        return (row[1], row[2]) == (claim.source_id, claim.content_sha256)

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> None:
        txn = validate_transaction_id(transaction_id)
        with self._transaction("publishing a reference") as conn:
            row = read_row(conn, txn)
            if row is not None and row[0] == "tombstone":
                raise ArtifactPublicationRejected(f"transaction {txn!r} is tombstoned")
            if row is not None:
                held = conn.execute(
                    "SELECT reference_count FROM toolswap_references WHERE transaction_id = ?",
                    (txn,),
                ).fetchone()
                if self.same((*row, held[0]), claim):
                    return
                raise OwnerConflictError(f"transaction {txn!r} holds another reference")
            insert_published(conn, txn, claim)


class CaseInsensitiveIdentityOwner(_IdentityRuleOwner):
    """Breaks O1 "another identity ... raises OwnerConflictError", for a session id's case.

    The author compares source ids case-insensitively, as file systems on
    their laptop do.  ``artifact:Session:...`` and ``artifact:session:...``
    are two sessions, and two artifacts.
    """

    def same(self, row: tuple[Any, ...], claim: ArtifactRetentionClaim) -> bool:
        return (str(row[1]).lower(), row[2]) == (claim.source_id.lower(), claim.content_sha256)


class CaseInsensitiveIdentityHarness(SQLiteHarness):
    owner_class = CaseInsensitiveIdentityOwner


class FileNumberIdentityOwner(_IdentityRuleOwner):
    """Breaks O1 "identity is the pair (source_id, full content_sha256)": it parses the id.

    The author compares the parsed parts (session, artifact number, digest)
    "to be robust to formatting".  ``tool_result_001.txt`` and
    ``tool_result_0001.txt`` are different source ids with one number, so a
    conflicting publish is taken for a no-op.
    """

    def same(self, row: tuple[Any, ...], claim: ArtifactRetentionClaim) -> bool:
        held, new = parse_source_id(row[1]), claim.parsed
        return (
            held.session_id == new.session_id
            and artifact_number(held.filename) == artifact_number(new.filename)
            and row[2] == claim.content_sha256
        )


class FileNumberIdentityHarness(SQLiteHarness):
    owner_class = FileNumberIdentityOwner


class WholeClaimIdentityOwner(_IdentityRuleOwner):
    """Breaks O1 "Publishing the identity an id already holds is a no-op".

    The author compares the whole stored claim, reference count included
    ("a different count is a different claim").  A retried publish of the
    same artifact with another count raises OwnerConflictError, and the
    journal records a conflict for its own reference.
    """

    def same(self, row: tuple[Any, ...], claim: ArtifactRetentionClaim) -> bool:
        return (row[1], row[2], row[4]) == (
            claim.source_id,
            claim.content_sha256,
            claim.reference_count,
        )


class WholeClaimIdentityHarness(SQLiteHarness):
    owner_class = WholeClaimIdentityOwner
