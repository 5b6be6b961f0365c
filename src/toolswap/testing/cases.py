"""Where a check's inputs come from: fixed examples, a replay, or Hypothesis.

A check never invents a transaction id or an identity itself: it asks its
bench, and the bench asks a :class:`Drawer`.  Three drawers give the same
interface:

* :class:`FixedDrawer` -- the explicit examples every check runs first:
  ``plain`` (the kit's readable ids ``kit-<check>-<name>``, the artifacts
  ``first`` and ``second`` of session ``session``) and ``edge`` (ids at the
  edges of what the journal allows: 512 characters, NUL, line breaks, Unicode
  forms, mixed case; a mixed-case session id);
* :class:`ReplayDrawer` -- the values a replay file recorded, in order;
* the Hypothesis drawer (:mod:`toolswap.testing.generate`), which draws from
  the whole domain the protocol allows and shrinks a failure.

Every drawer records what it handed out (:attr:`Drawer.record`), so a
failure can print its case and write it to a replay file.

The domain
==========

* A transaction id is any non-empty string of at most
  :data:`~toolswap.journal_format.MAX_TRANSACTION_ID_LEN` characters without
  lone surrogates (:func:`toolswap.journal_format.validate_transaction_id`).
* An identity is a source id ``artifact:<session>:tool_result_<NNN>.txt:<12
  hex>`` and the full digest whose prefix it names (:mod:`toolswap.domain`).
  The session id is ``[A-Za-z0-9._-]{1,128}``; case matters.
* :func:`id_variants` gives the ids a normalising adapter would take for the
  same one (case, Unicode forms, white space, separators, a shared long
  prefix); :func:`identity_variants` gives claims one field away from a claim.

This module imports no Hypothesis: the fixed examples run without it.
"""

from __future__ import annotations

import hashlib
import os
import unicodedata
from collections.abc import Sequence
from typing import Any

import attrs

from ..domain import ArtifactRetentionClaim, format_source_id
from ..journal_format import MAX_TRANSACTION_ID_LEN

__all__ = [
    "CONTENT_MARK",
    "EDGE_IDS",
    "Drawer",
    "FixedDrawer",
    "Identities",
    "ReplayDrawer",
    "ReplayMismatch",
    "claim_for",
    "how_ids_differ",
    "id_variants",
    "identity_variants",
    "is_transaction_id",
    "short",
]

CONTENT_MARK = "toolswap conformance artifact"
"""Every scratch artifact's content starts with this (O7 scans for it)."""

EDGE_IDS: tuple[str, ...] = (
    # Case, separators, a ligature, sharp s, an astral character, NUL, a line break and
    # composed letters that another Unicode form spells differently.
    "MiXeD-Case_\u00c9dition.\ufb01le:\u00df \U0001f600\x00\n" + "\u00e9" * 40,
    "\u00ff" + "a" * (MAX_TRANSACTION_ID_LEN - 2) + "\U0001f600",  # the longest, astral last
    "Kit-ID_with.MiXeD:Case",
    "id\x00with NUL",
    "line\nbreak\r\u2028sep",
    "e\u0301t\u00e9",  # one NFD and one NFC letter
    " padded id ",
    "\U0001f600/..\\:%s'\";--",
    "\u0130stanbul \u00df \ufb01",  # dotted capital I, sharp s, a ligature
    "zero\u200bwidth\ufeff",
    "0",
    "a" * (MAX_TRANSACTION_ID_LEN - 1) + "b",
    "\t",
)
"""Ids at the edges of the domain (the ``edge`` fixed example draws from these)."""

_EDGE_SESSION = "Kit.Session_Edge-01"
_EDGE_TEXTS = ("\u00e9dge first \x00\n", "EDGE second \U0001f600")


def is_transaction_id(value: str) -> bool:
    if not value or len(value) > MAX_TRANSACTION_ID_LEN:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@attrs.frozen
class Identities:
    """The scratch session's id and the texts of its two artifacts ``first`` and ``second``."""

    session: str
    texts: tuple[str, str]

    def content(self, index: int) -> bytes:
        return f"{CONTENT_MARK}: {self.texts[index]}\n".encode()

    def claim(self, index: int) -> ArtifactRetentionClaim:
        """The claim of artifact ``index`` (0: first, 1: second) as the session will hold it."""
        digest = hashlib.sha256(self.content(index)).hexdigest()
        return claim_for(self.session, index + 1, digest)


def claim_for(session: str, number: int, digest: str) -> ArtifactRetentionClaim:
    name = f"tool_result_{number:03d}.txt"
    return ArtifactRetentionClaim(
        source_id=format_source_id(session, name, digest), content_sha256=digest
    )


class ReplayMismatch(Exception):
    """A replay file's values do not fit the check as it runs now (another kit version)."""


class Drawer:
    """The interface a bench draws through; subclasses give the values (module docstring)."""

    style = "drawn"

    def __init__(self) -> None:
        self.record: list[list[Any]] = []

    def _keep(self, label: str, value: Any) -> Any:
        self.record.append([label, value])
        return value

    def txn(self, name: str, taken: Sequence[str]) -> str:
        raise NotImplementedError

    def family(self, base: str) -> tuple[str, ...]:
        raise NotImplementedError

    def identities(self) -> Identities:
        raise NotImplementedError

    def integer(self, label: str, low: int, high: int, fixed: int) -> int:
        raise NotImplementedError

    def choice(self, label: str, options: Sequence[Any], fixed: Any) -> Any:
        raise NotImplementedError


class FixedDrawer(Drawer):
    """An explicit example: ``plain`` or ``edge`` (module docstring)."""

    def __init__(self, check_id: str, style: str = "plain") -> None:
        super().__init__()
        if style not in ("plain", "edge"):
            raise ValueError(f"unknown fixed example {style!r}")
        self.check_id = check_id
        self.style = style

    def txn(self, name: str, taken: Sequence[str]) -> str:
        if self.style == "plain":
            value = f"kit-{self.check_id.lower()}-{name}"
        else:
            value = next((t for t in EDGE_IDS if t not in taken), None) or _spare(name, taken)
        return str(self._keep(f"txn {name}", value))

    def family(self, base: str) -> tuple[str, ...]:
        return tuple(self._keep("family", list(id_variants(base))))

    def identities(self) -> Identities:
        if self.style == "plain":
            value = Identities(session="session", texts=("first", "second"))
        else:
            value = Identities(session=_EDGE_SESSION, texts=_EDGE_TEXTS)
        self._keep("identities", [value.session, *value.texts])
        return value

    def integer(self, label: str, low: int, high: int, fixed: int) -> int:
        return int(self._keep(label, fixed))

    def choice(self, label: str, options: Sequence[Any], fixed: Any) -> Any:
        return self._keep(label, fixed)


def _spare(name: str, taken: Sequence[str]) -> str:
    value, n = f"edge {name}", 0
    while value in taken:
        n += 1
        value = f"edge {name} {n}"
    return value


class ReplayDrawer(Drawer):
    """The values of a replay file, handed out in the order they were recorded."""

    style = "replay"

    def __init__(self, record: Sequence[Sequence[Any]]) -> None:
        super().__init__()
        self._values = [list(item) for item in record]

    def _next(self, label: str) -> Any:
        if not self._values:
            raise ReplayMismatch(f"the replay file has no value for {label!r}")
        got, value = self._values.pop(0)
        if got != label:
            raise ReplayMismatch(f"the replay file has {got!r} where the check draws {label!r}")
        return self._keep(label, value)

    def txn(self, name: str, taken: Sequence[str]) -> str:
        return str(self._next(f"txn {name}"))

    def family(self, base: str) -> tuple[str, ...]:
        return tuple(self._next("family"))

    def identities(self) -> Identities:
        session, first, second = self._next("identities")
        return Identities(session=session, texts=(first, second))

    def integer(self, label: str, low: int, high: int, fixed: int) -> int:
        return int(self._next(label))

    def choice(self, label: str, options: Sequence[Any], fixed: Any) -> Any:
        return self._next(label)


# -- ids a normalising adapter would confuse --------------------------------------------

_SEPARATORS = {"-": "_", "_": "-", ".": "-", ":": "_", "/": "_", " ": "_", "\\": "/"}


def _other_wide(char: str) -> str:
    """Another character beyond Latin-1 for one beyond it (a lossy encoding joins the two)."""
    if ord(char) <= 0xFF:
        return char
    other = chr(ord(char) ^ 1)
    return other if ord(other) > 0xFF and is_transaction_id(other) else char


def id_variants(base: str) -> tuple[str, ...]:
    """Valid ids other than ``base`` that a lossy adapter would store as ``base``.

    Case changes, the four Unicode normal forms, white space and NUL added or
    stripped, separators swapped or dropped (all at once, or one for another
    at one place), a zero-width character, every character beyond Latin-1
    swapped for another (a lossy encoding), and pairs of ids that share their
    first 63, 64, 127, 128, 191, 255, 256 or 511 characters (truncation).
    """
    found: list[str] = [
        base.swapcase(),
        base.upper(),
        base.lower(),
        base.casefold(),
        *(unicodedata.normalize(form, base) for form in ("NFC", "NFD", "NFKC", "NFKD")),
        base.strip(),
        f" {base}",
        f"{base} ",
        f"{base}\n",
        f"{base}\x00",
        f"{base}\u200b",
        "".join(_SEPARATORS.get(c, c) for c in base),
        "".join(c for c in base if c.isalnum()),
        "".join(c if c.isalnum() else "_" for c in base),
        "".join(_other_wide(c) for c in base),
    ]
    marks = [i for i, c in enumerate(base) if not c.isalnum()][:3]
    for i in marks:  # one separator for another, at one place
        found.extend(base[:i] + other + base[i + 1 :] for other in "-_.: /" if other != base[i])
    long = (base * (MAX_TRANSACTION_ID_LEN // max(len(base), 1) + 1))[: MAX_TRANSACTION_ID_LEN - 1]
    for length in (63, 64, 127, 128, 191, 255, 256, MAX_TRANSACTION_ID_LEN - 1):
        stem = long[:length]
        found.extend((stem + "\u0001", stem + "\u0002"))
    unique: list[str] = []
    for value in found:
        if value != base and value not in unique and is_transaction_id(value):
            unique.append(value)
    return tuple(unique)


def how_ids_differ(base: str, other: str) -> str:
    """A few words on how ``other`` differs from ``base`` (for a failure message)."""
    if other.casefold() == base.casefold():
        return "only in letter case"
    if unicodedata.normalize("NFKD", other) == unicodedata.normalize("NFKD", base):
        return "only in Unicode normal form"
    if other.strip() == base.strip():
        return "only in white space"
    if other.rstrip("\x00\u200b\n") == base:
        return "only in a trailing control or zero-width character"
    shared = len(os.path.commonprefix([base, other]))
    if shared >= 63:
        return f"only after the first {shared} characters"
    if "".join(c for c in other if c.isalnum()) == "".join(c for c in base if c.isalnum()):
        return "only in separators and punctuation"
    return "in a few characters"


def short(text: str, limit: int = 40) -> str:
    """``repr`` of ``text``, cut in the middle when long (a 512-character id stays readable)."""
    shown = repr(text)
    if len(shown) <= limit:
        return shown
    return f"{shown[: limit // 2]}...{shown[-limit // 2 :]} ({len(text)} chars)"


# -- identities one field away -----------------------------------------------------------


def identity_variants(claim: ArtifactRetentionClaim) -> dict[str, ArtifactRetentionClaim]:
    """Claims one field away from ``claim``, by name.

    ``other-*``: another identity (O1: a conflict).  ``same-*``: the same
    identity with another reference count or retention (O1: a no-op).
    """
    parts = claim.parsed
    digest = claim.content_sha256
    session = parts.session_id
    number = int(parts.filename[len("tool_result_") : -len(".txt")])
    tail = hashlib.sha256(digest.encode()).hexdigest()
    twin = digest[:12] + (tail[12:] if tail[12:] != digest[12:] else tail[12:][::-1])
    sessions = {
        "other-session-case": session.swapcase(),
        "other-session-separator": "".join(_SEPARATORS.get(c, c) for c in session),
        "other-session-suffix": session + "." if len(session) < 128 else session[:-1],
    }
    found: dict[str, ArtifactRetentionClaim] = {
        "other-digest-same-prefix": ArtifactRetentionClaim(
            source_id=claim.source_id, content_sha256=twin
        ),
    }
    for name, other in sessions.items():
        if other != session and other not in (".", ".."):
            found[name] = claim_for(other, number, digest)
    padded = f"tool_result_0{parts.filename[len('tool_result_') :]}"
    found["other-file-zero-padded"] = ArtifactRetentionClaim(
        source_id=format_source_id(session, padded, digest), content_sha256=digest
    )
    found["other-file-number"] = claim_for(session, number + 1, digest)
    found["same-reference-count"] = ArtifactRetentionClaim(
        source_id=claim.source_id, content_sha256=digest, reference_count=claim.reference_count + 2
    )
    found["same-retain-until"] = ArtifactRetentionClaim(
        source_id=claim.source_id,
        content_sha256=digest,
        reference_count=claim.reference_count,
        retain_until=4_102_444_800.0,
    )
    return found
