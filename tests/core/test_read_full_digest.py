"""A bare source id read checks the full digest the lease journal records, else 48 bits.

A source id carries 12 hex digits (48 bits) of the content's SHA-256.  No file
with another content and the same 12 digits can be made for a test, so the
journal is given a claim whose full digest shares the file's prefix and differs
in its tail (prepared with the journal's artifact check switched off, the only
way such a claim can exist), and the read must refuse it.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
from collections.abc import Callable
from typing import Any

import pytest

from toolswap.cli import main
from toolswap.domain import ArtifactReference, ArtifactRetentionClaim
from toolswap.errors import ArtifactIntegrityError, CorruptStateError
from toolswap.externalizer import ToolResultExternalizer
from toolswap.fs import OsFileSystem
from toolswap.journal import ArtifactRetentionJournal
from toolswap.owners.memory import InMemoryOwner

DESIGN = pathlib.Path(__file__).resolve().parents[2] / "docs" / "design.md"


def _externalized(session: pathlib.Path, text: bytes = b"build output\n" * 40) -> ArtifactReference:
    ext = ToolResultExternalizer(session, environ={}, threshold_bytes=64)
    ref = ext.externalize(text, "tool").artifact
    assert ref is not None
    return ref


def _twin(digest: str) -> str:
    """Another full digest with the same 12-hex prefix (what a 48-bit collision looks like)."""
    last = "0" if digest[-1] != "0" else "1"
    return digest[:-1] + last


def _claim(ref: ArtifactReference, digest: str | None = None) -> ArtifactRetentionClaim:
    return ArtifactRetentionClaim(
        source_id=ref.source.source_id, content_sha256=digest or ref.content_sha256
    )


def _prepare_unchecked(
    monkeypatch: pytest.MonkeyPatch, journal: ArtifactRetentionJournal, claim: Any, txn: str
) -> None:
    """Prepare a claim the artifact does not match (the journal would refuse it)."""
    with monkeypatch.context() as patch:
        patch.setattr(ArtifactRetentionJournal, "_verify_artifact", lambda self, claim: None)
        journal.prepare(claim, txn)


READS: dict[str, Callable[[ToolResultExternalizer, str], object]] = {
    "read_artifact": lambda ext, sid: ext.read_artifact(sid),
    "read_page": lambda ext, sid: ext.read_page(sid),
    "grep_artifact": lambda ext, sid: ext.grep_artifact(sid, "build"),
    "stat_artifact": lambda ext, sid: ext.stat_artifact(sid),
    "verify_artifact": lambda ext, sid: ext.verify_artifact(sid),
}


@pytest.mark.parametrize("read", sorted(READS))
def test_a_bare_id_read_refuses_a_file_the_journals_full_digest_does_not_match(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, read: str
) -> None:
    session = tmp_path / "sess"
    ref = _externalized(session)
    twin = _twin(ref.content_sha256)
    _prepare_unchecked(monkeypatch, ArtifactRetentionJournal(session), _claim(ref, twin), "t1")
    ext = ToolResultExternalizer(session, environ={})
    with pytest.raises(ArtifactIntegrityError, match="digest the lease journal recorded") as err:
        READS[read](ext, ref.source.source_id)
    assert twin in str(err.value) and "lease t1" in str(err.value)


def test_the_refusal_survives_a_verification_cached_before_the_claim(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = tmp_path / "sess"
    ref = _externalized(session)
    journal = ArtifactRetentionJournal(session)
    journal.prepare(_claim(ref, None), "t0")  # a journal the reader has already looked at
    ext = ToolResultExternalizer(session, environ={})
    ext.read_artifact(ref.source.source_id)
    _prepare_unchecked(monkeypatch, journal, _claim(ref, _twin(ref.content_sha256)), "t1")
    with pytest.raises(CorruptStateError, match="2 different full digests"):
        ext.read_artifact(ref.source.source_id)


def test_toolswap_read_of_a_bare_id_reports_the_refusal_as_state(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    session = tmp_path / "sess"
    ref = _externalized(session)
    twin = _claim(ref, _twin(ref.content_sha256))
    _prepare_unchecked(monkeypatch, ArtifactRetentionJournal(session), twin, "t1")
    code = main(["read", ref.source.source_id, "--session", str(session), "--json"])
    document = json.loads(capsys.readouterr().out)
    assert code != 0 and document["kind"] == "state"
    assert "digest the lease journal recorded" in document["error"]


def test_two_full_digests_for_one_id_refuse_as_corrupt_state(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = tmp_path / "sess"
    ref = _externalized(session)
    journal = ArtifactRetentionJournal(session)
    journal.prepare(_claim(ref), "t1")
    _prepare_unchecked(monkeypatch, journal, _claim(ref, _twin(ref.content_sha256)), "t2")
    ext = ToolResultExternalizer(session, environ={})
    with pytest.raises(CorruptStateError, match=r"2 different full digests .*\(S6\)") as err:
        ext.read_artifact(ref.source.source_id)
    assert not isinstance(err.value, ArtifactIntegrityError)  # the evidence, not the file


def test_an_owners_conflicting_identity_counts_as_evidence(tmp_path: pathlib.Path) -> None:
    session = tmp_path / "sess"
    ref = _externalized(session)
    journal = ArtifactRetentionJournal(session)
    journal.prepare(_claim(ref), "t1")
    owner = InMemoryOwner()
    owner.publish("t1", _claim(ref, _twin(ref.content_sha256)))  # same id and prefix
    assert journal.reconcile_reference("t1", owner).status.value == "pending_conflict"
    ext = ToolResultExternalizer(session, environ={})
    with pytest.raises(CorruptStateError, match="CONFLICT on t1"):
        ext.read_artifact(ref.source.source_id)


def test_an_intact_artifact_whose_full_digest_the_journal_records_reads(
    tmp_path: pathlib.Path,
) -> None:
    session = tmp_path / "sess"
    ref = _externalized(session)
    ArtifactRetentionJournal(session).prepare(_claim(ref), "t1")
    ext = ToolResultExternalizer(session, environ={})
    assert ext.read_artifact(ref.source.source_id, 0, 1) == "build output\n"


@pytest.mark.parametrize("journal", ["none", "other artifacts only"])
def test_an_id_the_journal_does_not_know_reads_by_its_prefix(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, journal: str
) -> None:
    session = tmp_path / "sess"
    ref = _externalized(session)
    if journal != "none":
        other = _externalized(session, b"other output\n" * 40)
        twin = _claim(other, _twin(other.content_sha256))
        _prepare_unchecked(monkeypatch, ArtifactRetentionJournal(session), twin, "t1")
    ext = ToolResultExternalizer(session, environ={})
    assert ext.read_artifact(ref.source.source_id, 0, 1) == "build output\n"
    wrong = ref.source.source_id[:-1] + ("0" if ref.source.source_id[-1] != "0" else "1")
    with pytest.raises(ArtifactIntegrityError, match="the id is wrong"):
        ext.read_artifact(wrong)  # the 48-bit check still runs


def test_a_corrupt_journal_does_not_block_a_read_of_an_intact_artifact(
    tmp_path: pathlib.Path,
) -> None:
    session = tmp_path / "sess"
    ref = _externalized(session)
    journal = ArtifactRetentionJournal(session)
    journal.prepare(_claim(ref), "t1")
    with open(journal.path, "ab") as handle:  # a complete line that is no record
        handle.write(b'{"not": "a record", "id": "' + ref.source.source_id.encode() + b'"}\n')
    with pytest.raises(CorruptStateError):
        ArtifactRetentionJournal(session).recover()
    ext = ToolResultExternalizer(session, environ={})
    assert ext.read_artifact(ref.source.source_id, 0, 1) == "build output\n"


def test_what_was_verified_stays_known_when_the_journal_turns_corrupt(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = tmp_path / "sess"
    ref = _externalized(session)
    journal = ArtifactRetentionJournal(session)
    _prepare_unchecked(monkeypatch, journal, _claim(ref, _twin(ref.content_sha256)), "t1")
    ext = ToolResultExternalizer(session, environ={})
    with pytest.raises(ArtifactIntegrityError):
        ext.read_artifact(ref.source.source_id)
    with open(journal.path, "ab") as handle:
        handle.write(b"garbage " + ref.source.source_id.encode() + b"\n")
    with pytest.raises(ArtifactIntegrityError, match="lease t1"):
        ext.read_artifact(ref.source.source_id)


def test_a_journal_replaced_by_another_file_is_searched_from_its_start(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = tmp_path / "sess"
    ref = _externalized(session)
    other = _externalized(session, b"other output\n" * 40)
    journal = ArtifactRetentionJournal(session)
    journal.prepare(_claim(other), "t0")
    ext = ToolResultExternalizer(session, environ={})
    ext.read_artifact(ref.source.source_id)  # the id is absent from this file
    # A journal of the same session, restored from elsewhere (a new inode).
    restored = ArtifactRetentionJournal(tmp_path / "elsewhere" / "sess")
    _prepare_unchecked(monkeypatch, restored, _claim(ref, _twin(ref.content_sha256)), "t1")
    os.replace(restored.path, journal.path)
    with pytest.raises(ArtifactIntegrityError, match="lease t1"):
        ext.read_artifact(ref.source.source_id)


class _CountingFS(OsFileSystem):
    """The real seam, counting opens of the lease journal for reading."""

    def __init__(self) -> None:
        self.journal_opens = 0

    def open_read(self, path: str) -> int:
        if path.endswith("retention-leases.jsonl"):
            self.journal_opens += 1
        return super().open_read(path)


@pytest.mark.parametrize("leased", [True, False])
def test_a_warm_read_does_not_read_an_unchanged_journal(
    tmp_path: pathlib.Path, leased: bool
) -> None:
    session = tmp_path / "sess"
    ref = _externalized(session)
    other = _externalized(session, b"other output\n" * 40)
    ArtifactRetentionJournal(session).prepare(_claim(ref if leased else other), "t1")
    fs = _CountingFS()
    ext = ToolResultExternalizer(session, environ={}, fs=fs)
    ext.read_artifact(ref.source.source_id)
    first = fs.journal_opens
    for _ in range(3):
        ext.read_artifact(ref.source.source_id)
    assert first >= 1 and fs.journal_opens == first


def test_a_corrupt_journal_is_not_verified_again_until_it_changes(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = tmp_path / "sess"
    ref = _externalized(session)
    journal = ArtifactRetentionJournal(session)
    journal.prepare(_claim(ref), "t1")
    with open(journal.path, "ab") as handle:
        handle.write(b"garbage " + ref.source.source_id.encode() + b"\n")
    opened = _count_journal_opens(monkeypatch)
    ext = ToolResultExternalizer(session, environ={})
    ext.read_artifact(ref.source.source_id)
    ext.read_artifact(ref.source.source_id)
    assert len(opened) == 1


def _count_journal_opens(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    opened: list[object] = []
    real_init = ArtifactRetentionJournal.__init__

    def counting_init(self: ArtifactRetentionJournal, *args: Any, **kwargs: Any) -> None:
        opened.append(self)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(ArtifactRetentionJournal, "__init__", counting_init)
    return opened


def test_an_id_the_journal_never_names_does_not_verify_the_journal(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = tmp_path / "sess"
    ref = _externalized(session)
    other = _externalized(session, b"other output\n" * 40)
    ArtifactRetentionJournal(session).prepare(_claim(other), "t1")
    opened = _count_journal_opens(monkeypatch)
    ToolResultExternalizer(session, environ={}).read_artifact(ref.source.source_id)
    assert opened == []
    ToolResultExternalizer(session, environ={}).read_artifact(other.source.source_id)
    assert len(opened) == 1


def test_a_claim_appended_after_a_search_is_found(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = tmp_path / "sess"
    ref = _externalized(session)
    other = _externalized(session, b"other output\n" * 40)
    journal = ArtifactRetentionJournal(session)
    journal.prepare(_claim(other), "t0")
    ext = ToolResultExternalizer(session, environ={})
    ext.read_artifact(ref.source.source_id)  # searched: the id is absent
    _prepare_unchecked(monkeypatch, journal, _claim(ref, _twin(ref.content_sha256)), "t1")
    with pytest.raises(ArtifactIntegrityError, match="lease t1"):
        ext.read_artifact(ref.source.source_id)


def test_a_torn_tail_that_a_later_record_writes_over_is_searched_again(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = tmp_path / "sess"
    ref = _externalized(session)
    other = _externalized(session, b"other output\n" * 40)
    ArtifactRetentionJournal(session).prepare(_claim(other), "t0")
    with open(ArtifactRetentionJournal(session).path, "ab") as handle:
        # A crash mid-append: no newline.  Shorter than the record that replaces
        # it (so the file grows), longer than where that record names the id.
        handle.write(b'{"torn": "' + b"x" * 390)
    ext = ToolResultExternalizer(session, environ={})
    ext.read_artifact(ref.source.source_id)  # searched, torn bytes included: the id is absent
    # The next append cuts the torn piece off and writes over those very bytes.
    journal = ArtifactRetentionJournal(session)
    _prepare_unchecked(monkeypatch, journal, _claim(ref, _twin(ref.content_sha256)), "t1")
    with pytest.raises(ArtifactIntegrityError, match="lease t1"):
        ext.read_artifact(ref.source.source_id)


class _ShortReadFS(OsFileSystem):
    """The real seam, reading at most 7 bytes at a time (an id spans many reads)."""

    def pread(self, handle: int, size: int, offset: int) -> bytes:
        return super().pread(handle, min(size, 7), offset)


def test_an_id_split_across_short_reads_is_still_found(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = tmp_path / "sess"
    ref = _externalized(session)
    _prepare_unchecked(
        monkeypatch, ArtifactRetentionJournal(session), _claim(ref, _twin(ref.content_sha256)), "t1"
    )
    ext = ToolResultExternalizer(session, environ={}, fs=_ShortReadFS())
    with pytest.raises(ArtifactIntegrityError, match="lease t1"):
        ext.read_artifact(ref.source.source_id)


def test_the_design_doc_states_the_full_digest_rule_and_the_48_bit_limit() -> None:
    text = DESIGN.read_text(encoding="utf-8")
    section = text[text.index("## 4. Externalization") : text.index("## 5. The lease journal")]
    flat = re.sub(r"\s+", " ", section)
    assert "48 bits" in flat
    assert "full digest" in flat and "journal" in flat
