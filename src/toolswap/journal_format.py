"""The lease journal's line format: canonical JSON, hashes, and strict parsing.

Rules of the format (docs/design.md section 5):

1. One record per line; a line ends with ``b"\\n"``, holds at most
   :data:`MAX_RECORD_BYTES` bytes, and lines are split on that
   byte only (never ``str.splitlines``), so U+2028 and friends inside a field are
   harmless.  Canonical JSON is ASCII-only anyway (``ensure_ascii=True``).
2. Every record has exactly the keys of :data:`RECORD_KEYS`.  ``event_sha256`` is
   the SHA-256 of the canonical JSON of all the *other* keys.
3. Canonical JSON: ``sort_keys=True``, ``separators=(",", ":")``,
   ``ensure_ascii=True``, no NaN/Infinity.  A line must be byte-identical to the
   canonical encoding of what it parses to, so an edit that keeps the meaning
   (an escape written in another case, say) is still corruption.
4. ``intent`` is the claim (a dict) on ``PREPARED`` and ``null`` afterwards;
   ``intent_sha256`` is on every record and names the digest of the canonical
   claim, so a later record cannot silently rewrite the intent.
5. ``CONFLICT`` (docs/design.md section 6) is a note on a PREPARED lease, not a
   phase change: reconciliation saw the owner show, under this transaction id,
   another identity.  Its ``intent`` is that *observed* identity,
   :class:`ObservedIdentity` (``source_id`` and ``content_sha256``, each a string
   of at most :data:`MAX_OBSERVED_LEN` characters, or ``null`` when the owner's
   answer was not one), recorded as seen: never trusted, never a path.  The
   version stays 1: a reader that predates CONFLICT fails closed on it
   ("schema"), it never reads it as fewer leases.

This module is pure: bytes in, records out.  Folding records into transaction
state (chain, sequence, transitions) lives in :mod:`toolswap.journal`.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any, TypeGuard

import attrs

from toolswap.spec.lease import RECORD_PHASES, LeaseNote, LeaseState, RecordPhase

from .domain import ArtifactRetentionClaim
from .errors import (
    JournalCorruptError,  # noqa: F401 (re-exported)
    UsageError,
)

__all__ = [
    "FORMAT_VERSION",
    "MAX_OBSERVED_LEN",
    "ObservedIdentity",
    "GENESIS_SHA256",
    "MAX_RECORD_BYTES",
    "RECORD_KEYS",
    "JournalRecord",
    "JournalCorruptError",
    "CORRUPTION_REASONS",
    "canonical_json",
    "sha256_hex",
    "intent_digest",
    "build_record",
    "encode_record",
    "parse_line",
    "validate_transaction_id",
]

FORMAT_VERSION = 1
GENESIS_SHA256 = "0" * 64
MAX_TRANSACTION_ID_LEN = 512

#: The longest line (without its newline) the format allows.  Every field is
#: bounded: the transaction id is at most 512 characters of at most 12 bytes
#: each once escaped (a surrogate pair), about 6 KiB; session ids are at most
#: 128 safe characters and appear twice; the four hashes are 64 hex digits; and
#: every number (sequence, time, reference count, retain-until, the artifact
#: number in the source id) is at most 4,300 digits, Python's limit for
#: parsing an integer, about 22 KiB together; a CONFLICT's observed identity
#: adds two strings of at most 512 characters (12 KiB escaped).  The total stays
#: under 48 KiB; 64 KiB leaves room.  :func:`encode_record` refuses anything longer, so a
#: final piece longer than this cannot be a torn write of a record.
MAX_RECORD_BYTES = 64 * 1024

RECORD_KEYS = frozenset(
    {
        "version",
        "sequence",
        "previous_sha256",
        "session_id",
        "transaction_id",
        "phase",
        "time",
        "intent",
        "intent_sha256",
        "event_sha256",
    }
)


#: A record's phase by its text: the spec's words, NEW excluded (it is never written).
_PHASE_OF_TEXT: dict[str, RecordPhase] = {p.value: p for p in RECORD_PHASES}


#: Every ``JournalCorruptError.reason``: what a bad line (or file) did wrong.
CORRUPTION_REASONS = frozenset(
    {
        "json",  # not JSON (or absurdly nested)
        "schema",  # wrong keys, types, version or field values
        "canonical",  # valid JSON, but not the canonical bytes
        "hash",  # event_sha256 does not match the record
        "intent",  # a PREPARED intent that is missing, invalid or misdigested
        "sequence",  # not the next sequence number
        "chain",  # previous_sha256 is not the previous record's hash
        "session",  # a record of another session
        "intent_rewrite",  # a later record names another intent digest
        "illegal_transition",  # not in the transition table (S5)
        "newline",  # a whole record followed by more bytes without a newline
        "shrank",  # verified records were cut off
        "rewritten",  # the file no longer extends what was verified before
        "vanished",  # a verified journal is gone
        "not_regular",  # the journal is not a regular file
        "oversized",  # a line or final piece longer than any record (MAX_RECORD_BYTES)
        "checkpoint",  # a checkpoint log entry is malformed or does not follow the one before
        "snapshot",  # a snapshot is missing, malformed or not the one its checkpoint names
        "not_chained",  # the live file does not chain from the last checkpoint
    }
)


MAX_OBSERVED_LEN = 512
_OBSERVED_KEYS = frozenset({"source_id", "content_sha256"})


def _observed_field(value: object) -> str | None:
    if not isinstance(value, str) or not value or len(value) > MAX_OBSERVED_LEN:
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return value


@attrs.frozen
class ObservedIdentity:
    """What an owner showed under a transaction id, as seen (rule 5); ``None``: not a string."""

    source_id: str | None
    content_sha256: str | None

    @classmethod
    def seen(cls, source_id: object, content_sha256: object) -> ObservedIdentity:
        """Whatever the owner answered, reduced to what the format can hold."""
        return cls(_observed_field(source_id), _observed_field(content_sha256))

    def to_dict(self) -> dict[str, str | None]:
        return {"source_id": self.source_id, "content_sha256": self.content_sha256}

    @classmethod
    def from_dict(cls, data: object) -> ObservedIdentity | None:
        """The identity, or ``None`` if ``data`` is not exactly one."""
        if not isinstance(data, dict) or set(data) != _OBSERVED_KEYS:
            return None
        identity = cls.seen(data["source_id"], data["content_sha256"])
        return identity if identity.to_dict() == data else None


# One encoder for every call: json.dumps would build a new one each time.
_ENCODER = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
)


def canonical_json(value: Any) -> bytes:
    """The one byte encoding that hashes and lines use."""
    return _ENCODER.encode(value).encode("ascii")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def intent_digest(claim: ArtifactRetentionClaim) -> str:
    return sha256_hex(canonical_json(claim.to_dict()))


def _is_transaction_id(value: object) -> TypeGuard[str]:
    if not isinstance(value, str) or not value or len(value) > MAX_TRANSACTION_ID_LEN:
        return False
    try:
        value.encode("utf-8")  # a lone surrogate cannot be stored by any owner
    except UnicodeEncodeError:
        return False
    return True


def validate_transaction_id(transaction_id: object) -> str:
    """A transaction id is a non-empty string of at most 512 characters, valid Unicode.

    Any character is allowed (U+2028, newlines, quotes: the journal escapes
    them), except lone surrogates, which no owner could store as text.
    """
    if not _is_transaction_id(transaction_id):
        raise UsageError(
            f"transaction_id must be a non-empty string of at most "
            f"{MAX_TRANSACTION_ID_LEN} characters, without lone surrogates"
        )
    return transaction_id


@attrs.frozen(kw_only=True)
class JournalRecord:
    """One verified journal line."""

    version: int
    sequence: int
    previous_sha256: str
    session_id: str
    transaction_id: str
    phase: RecordPhase
    time: float
    intent: ArtifactRetentionClaim | None
    intent_sha256: str
    event_sha256: str
    observed: ObservedIdentity | None = None  # CONFLICT only (rule 5)

    def body(self) -> dict[str, Any]:
        """Every field but ``event_sha256``, as it is hashed."""
        return {
            "version": self.version,
            "sequence": self.sequence,
            "previous_sha256": self.previous_sha256,
            "session_id": self.session_id,
            "transaction_id": self.transaction_id,
            "phase": self.phase.value,
            "time": self.time,
            "intent": (
                self.intent.to_dict()
                if self.intent is not None
                else None
                if self.observed is None
                else self.observed.to_dict()
            ),
            "intent_sha256": self.intent_sha256,
        }

    def to_dict(self) -> dict[str, Any]:
        data = self.body()
        data["event_sha256"] = self.event_sha256
        return data


def build_record(
    *,
    sequence: int,
    previous_sha256: str,
    session_id: str,
    transaction_id: str,
    phase: RecordPhase,
    time: float,
    claim: ArtifactRetentionClaim,
    observed: ObservedIdentity | None = None,
) -> JournalRecord:
    """A new record; the claim is embedded on PREPARED and digested on every phase.

    ``observed`` is required on CONFLICT and refused on every other phase.
    """
    if (phase is LeaseNote.CONFLICT) != (observed is not None):
        raise UsageError("an observed identity goes on a CONFLICT record, and only there")
    if isinstance(time, bool) or not isinstance(time, int | float) or not math.isfinite(time):
        raise UsageError(f"time must be a finite number, got {time!r}")
    draft = JournalRecord(
        version=FORMAT_VERSION,
        sequence=sequence,
        previous_sha256=previous_sha256,
        session_id=session_id,
        transaction_id=validate_transaction_id(transaction_id),
        phase=phase,
        time=time,
        intent=claim if phase is LeaseState.PREPARED else None,
        intent_sha256=intent_digest(claim),
        event_sha256="",
        observed=observed,
    )
    return attrs.evolve(draft, event_sha256=sha256_hex(canonical_json(draft.body())))


def encode_record(record: JournalRecord) -> bytes:
    line = canonical_json(record.to_dict())
    if len(line) > MAX_RECORD_BYTES:  # unreachable with valid fields; the bound is a rule
        raise UsageError(f"a journal record is limited to {MAX_RECORD_BYTES} bytes")
    return line + b"\n"


_BODY_START = len(b'{"event_sha256":"",') + 64
_HEX64 = re.compile(r"[0-9a-f]{64}")


def _hex64(value: object) -> bool:
    return isinstance(value, str) and _HEX64.fullmatch(value) is not None


def parse_line(line: bytes, line_number: int) -> JournalRecord:
    """Parse and self-verify one complete line (without its ``\\n``).

    Checks JSON, the exact key set and types, canonical bytes, the event hash and
    the intent digest.  Chain, sequence, session and transitions need context and
    are checked by the fold in :mod:`toolswap.journal`.
    """
    record = _parse_plain(line)
    return record if record is not None else _parse_general(line, line_number)


# -- the plain-line fast path ------------------------------------------------------
#
# A fresh open verifies every line, and json.loads plus the canonical re-encode
# were most of that cost.  Almost every line we write is "plain": its strings
# are printable ASCII without a quote or a backslash, so their JSON text *is*
# their value, and the canonical layout is fixed.  One regular expression
# proves such a line canonical and splits it; numbers are canonical when they
# read back to the same text.  Anything else (an escape, a CONFLICT note, a
# line that fails any check) returns None and takes _parse_general, which
# stays the definition of a valid line and is the only one that raises.
# Soundness rule: whatever this accepts, _parse_general accepts as the same
# record (tests/core/test_journal_format.py checks it on generated and mutated
# lines).

_PLAIN = r"[ !#-\[\]-~]"  # printable ASCII but '"' and '\\': JSON text == value
_HEX = r"[0-9a-f]{64}"
_NUM = r"-?[0-9][0-9.eE+-]*"  # a candidate; _plain_number decides
_PLAIN_LINE = re.compile(
    rf'\{{"event_sha256":"({_HEX})","intent":(null|'
    rf'\{{"content_sha256":"({_PLAIN}*)","reference_count":({_NUM}),'
    rf'"retain_until":(null|{_NUM}),"source_id":"({_PLAIN}*)"\}}),'
    rf'"intent_sha256":"({_HEX})","phase":"(PREPARED|COMMITTED|ABORTED|RELEASED)",'
    rf'"previous_sha256":"({_HEX})","sequence":([1-9][0-9]*),"session_id":"({_PLAIN}+)",'
    rf'"time":({_NUM}),"transaction_id":"({_PLAIN}{{1,{MAX_TRANSACTION_ID_LEN}}})",'
    rf'"version":{FORMAT_VERSION}\}}'
)
_CANONICAL_INT = re.compile(r"0|-?[1-9][0-9]*")


def _plain_number(text: str) -> int | float | None:
    """The number whose canonical JSON text is ``text``, or None."""
    try:
        if _CANONICAL_INT.fullmatch(text):
            return int(text)  # ValueError past Python's digit limit, as json.loads
        value = float(text)
    except ValueError:
        return None
    if math.isfinite(value) and float.__repr__(value) == text:
        return value
    return None


def _parse_plain(line: bytes) -> JournalRecord | None:
    """The record of a plain canonical line that verifies, or None (see above)."""
    if not line.isascii():
        return None
    match = _PLAIN_LINE.fullmatch(line.decode("ascii"))
    if match is None:
        return None
    (event, intent_text, digest, count_text, until_text, source_id) = match.group(1, 2, 3, 4, 5, 6)
    (intent_sha, phase_text, previous, sequence_text, session_id) = match.group(7, 8, 9, 10, 11)
    moment = _plain_number(match.group(12))
    sequence = _plain_number(sequence_text)  # an int: the pattern has digits only
    if moment is None or sequence is None:
        return None
    if sha256_hex(b"{" + line[_BODY_START:]) != event:
        return None
    phase = _PHASE_OF_TEXT[phase_text]  # the pattern admits these four only
    claim: ArtifactRetentionClaim | None = None
    if (intent_text == "null") != (phase is not LeaseState.PREPARED):
        return None
    if phase is LeaseState.PREPARED:
        count = _plain_number(count_text)
        until = None if until_text == "null" else _plain_number(until_text)
        if count is None or (until is None and until_text != "null"):
            return None
        start, end = match.span(2)
        if sha256_hex(line[start:end]) != intent_sha:
            return None
        raw = {
            "content_sha256": digest,
            "reference_count": count,
            "retain_until": until,
            "source_id": source_id,
        }
        try:  # numbers and null only (the pattern), which a claim keeps as given
            claim = ArtifactRetentionClaim.from_dict(raw)
        except (UsageError, TypeError):
            return None
    return JournalRecord(
        version=FORMAT_VERSION,
        sequence=int(sequence),
        previous_sha256=previous,
        session_id=session_id,
        transaction_id=match.group(13),
        phase=phase,
        time=moment,
        intent=claim,
        intent_sha256=intent_sha,
        event_sha256=event,
    )


def _parse_general(line: bytes, line_number: int) -> JournalRecord:
    """Every line's parser: json.loads, then each rule; raises JournalCorruptError."""
    # A canonical line is ASCII: decode it once and compare text with text.
    # Anything else takes json.loads' own path, so its errors stay the same.
    text = line.decode("ascii") if line.isascii() else None
    try:
        data = json.loads(line if text is None else text)
    except (ValueError, RecursionError) as exc:  # RecursionError: absurdly nested JSON
        raise JournalCorruptError(line_number, "json", type(exc).__name__) from None
    if not isinstance(data, dict) or set(data) != RECORD_KEYS:
        raise JournalCorruptError(line_number, "schema", "wrong keys")
    version = data["version"]
    if isinstance(version, bool) or version != FORMAT_VERSION:
        raise JournalCorruptError(line_number, "schema", "unsupported version")
    sequence = data["sequence"]
    if isinstance(sequence, bool) or not isinstance(sequence, int) or sequence < 1:
        raise JournalCorruptError(line_number, "schema", "sequence")
    for key in ("previous_sha256", "intent_sha256", "event_sha256"):
        if not _hex64(data[key]):
            raise JournalCorruptError(line_number, "schema", key)
    if not isinstance(data["session_id"], str) or not data["session_id"]:
        raise JournalCorruptError(line_number, "schema", "session_id")
    if not _is_transaction_id(data["transaction_id"]):
        raise JournalCorruptError(line_number, "schema", "transaction_id")
    phase = _PHASE_OF_TEXT.get(data["phase"]) if isinstance(data["phase"], str) else None
    if phase is None:
        raise JournalCorruptError(line_number, "schema", "phase")
    moment = data["time"]
    if isinstance(moment, bool) or not isinstance(moment, int | float):
        raise JournalCorruptError(line_number, "schema", "time")
    try:
        if text is None or _ENCODER.encode(data) != text:
            raise JournalCorruptError(line_number, "canonical", "line is not canonical JSON")
    except ValueError:
        raise JournalCorruptError(line_number, "canonical", "not encodable") from None
    # The line is canonical and "event_sha256" sorts first, so the hashed body is
    # the line without that first member: no second serialization needed.
    if sha256_hex(b"{" + line[_BODY_START:]) != data["event_sha256"]:
        raise JournalCorruptError(line_number, "hash", "event_sha256 does not match")
    raw_intent = data["intent"]
    claim: ArtifactRetentionClaim | None = None
    observed: ObservedIdentity | None = None
    if phase is LeaseNote.CONFLICT:
        observed = ObservedIdentity.from_dict(raw_intent)
        if observed is None:
            raise JournalCorruptError(
                line_number, "intent", "CONFLICT without an observed identity"
            )
    elif phase is LeaseState.PREPARED:
        if not isinstance(raw_intent, dict):
            raise JournalCorruptError(line_number, "intent", "PREPARED without an intent")
        try:
            claim = ArtifactRetentionClaim.from_dict(raw_intent)
        except (UsageError, TypeError) as exc:
            raise JournalCorruptError(line_number, "intent", type(exc).__name__) from None
        # The line is canonical, so the intent's canonical bytes are in it,
        # right after '"intent":' ("intent" sorts second) and before the next key.
        start = _BODY_START + len(b'"intent":')
        end = line.find(b',"intent_sha256":', start)
        if sha256_hex(line[start:end]) != data["intent_sha256"]:
            raise JournalCorruptError(line_number, "intent", "intent_sha256 does not match")
        if claim.to_dict() != raw_intent:
            raise JournalCorruptError(line_number, "intent", "intent is not a canonical claim")
    elif raw_intent is not None:
        raise JournalCorruptError(line_number, "intent", f"{phase.value} carries an intent")
    return JournalRecord(
        version=version,
        sequence=sequence,
        previous_sha256=data["previous_sha256"],
        session_id=data["session_id"],
        transaction_id=data["transaction_id"],
        phase=phase,
        time=moment,
        intent=claim,
        intent_sha256=data["intent_sha256"],
        event_sha256=data["event_sha256"],
        observed=observed,
    )
