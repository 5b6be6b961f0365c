"""Verified once, not per process: the session's record of verified artifacts.

A fresh externalizer (what each ``toolswap read`` process is) serves a page
of an artifact verified before without hashing it, but only while the file's
identity is the one recorded: any change of device, inode, size, mtime or
ctime is hashed again, and changed bytes are refused.  The record is a cache:
a forged or broken one never lets a wrong digest through.

The record waits two seconds after a file's last change (``SETTLED_NS``);
the tests use a seam whose clock runs ahead (``LaterFS``) instead of
sleeping.  The real seam's clock and file timestamps are the kernel's.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import time
from collections.abc import Iterator

import pytest

from toolswap import externalizer as externalizer_module
from toolswap.domain import ArtifactReference, format_source_id
from toolswap.errors import ArtifactIntegrityError
from toolswap.externalizer import ToolResultExternalizer
from toolswap.fs import OsFileSystem
from toolswap.verified_record import RECORD_NAME, SETTLED_NS

from ._artifacts import lines

DATA = lines(50_000)  # about 2 MB, several line-index strides
OLD_NS = 1_600_000_000 * 10**9


class LaterFS(OsFileSystem):
    """The real seam whose clock is past the record's settling time."""

    def now_ns(self) -> int:
        return super().now_ns() + 2 * SETTLED_NS


@pytest.fixture
def hashes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The names of the artifacts hashed (whole-file verifications), in order."""
    seen: list[str] = []
    real = externalizer_module._hash_and_index

    def counting(fs: object, handle: int) -> object:
        result = real(fs, handle)  # type: ignore[arg-type]
        seen.append(result[0])
        return result

    monkeypatch.setattr(externalizer_module, "_hash_and_index", counting)
    yield seen


def _artifact(tmp_path: pathlib.Path, data: bytes = DATA) -> ArtifactReference:
    ext = ToolResultExternalizer(tmp_path / "sess", environ={})
    ref = ext.externalize(data, "bash").artifact
    assert ref is not None
    os.utime(ref.path, ns=(OLD_NS, OLD_NS))  # an old mtime, as an artifact read later has
    return ref


def _fresh(tmp_path: pathlib.Path) -> ToolResultExternalizer:
    return ToolResultExternalizer(tmp_path / "sess", environ={}, fs=LaterFS())


def _rewrite_in_place(path: str, data: bytes) -> None:
    """New bytes of the same size, mtime put back: only ctime can tell."""
    before = os.stat(path).st_ctime_ns
    with open(path, "r+b") as handle:
        handle.write(data)
    os.utime(path, ns=(OLD_NS, OLD_NS))
    while os.stat(path).st_ctime_ns == before:  # a coarse clock: wait out one tick
        time.sleep(0.01)
        os.utime(path, ns=(OLD_NS, OLD_NS))


def test_a_fresh_process_reads_a_recorded_artifact_without_hashing_it(
    tmp_path: pathlib.Path, hashes: list[str]
) -> None:
    ref = _artifact(tmp_path)
    first = _fresh(tmp_path).read_page(ref.source.source_id, 49_000, 10)
    assert hashes == [ref.content_sha256]
    assert (tmp_path / "sess" / RECORD_NAME).is_file()
    second = _fresh(tmp_path).read_page(ref.source.source_id, 49_000, 10)
    assert hashes == [ref.content_sha256]  # the second process did not hash
    assert second == first and second.text.startswith("line 49000 ")


def test_a_changed_artifact_with_the_same_size_and_mtime_is_hashed_again_and_refused(
    tmp_path: pathlib.Path, hashes: list[str]
) -> None:
    ref = _artifact(tmp_path)
    _fresh(tmp_path).read_page(ref.source.source_id)
    tampered = DATA.replace(b"line 40000 ", b"LINE 40000 ")
    assert len(tampered) == len(DATA)
    _rewrite_in_place(ref.path, tampered)
    facts = os.stat(ref.path)
    assert (facts.st_size, facts.st_mtime_ns) == (len(DATA), OLD_NS)
    with pytest.raises(ArtifactIntegrityError, match="fail closed"):
        _fresh(tmp_path).read_page(ref.source.source_id)
    assert hashes == [ref.content_sha256, hashlib.sha256(tampered).hexdigest()]


def test_the_same_process_also_hashes_a_changed_artifact_again(
    tmp_path: pathlib.Path, hashes: list[str]
) -> None:
    ref = _artifact(tmp_path)
    reader = _fresh(tmp_path)
    reader.read_page(ref)
    _rewrite_in_place(ref.path, DATA.replace(b"line 1 ", b"LINE 1 "))
    with pytest.raises(ArtifactIntegrityError):
        reader.read_page(ref)
    assert len(hashes) == 2


def _forge(tmp_path: pathlib.Path, digest: str) -> None:
    """Put ``digest`` in place of every recorded digest (a rewrite of the record)."""
    record = tmp_path / "sess" / RECORD_NAME
    rows = record.read_bytes().split(b"\n")
    forged = []
    for row in rows:
        fields = row.split(b" ")
        if len(fields) == 11:
            fields[6] = digest.encode()
        forged.append(b" ".join(fields))
    record.write_bytes(b"\n".join(forged))


def test_a_forged_digest_for_an_unchanged_file_is_checked_by_a_fresh_hash(
    tmp_path: pathlib.Path, hashes: list[str]
) -> None:
    ref = _artifact(tmp_path)
    _fresh(tmp_path).read_page(ref.source.source_id)
    _forge(tmp_path, "0" * 64)
    page = _fresh(tmp_path).read_page(ref.source.source_id)  # never read as "0000..."
    assert page.text.startswith("line 0 ")
    assert hashes == [ref.content_sha256, ref.content_sha256]


def test_a_forged_record_for_a_changed_file_still_fails_closed(
    tmp_path: pathlib.Path, hashes: list[str]
) -> None:
    ref = _artifact(tmp_path)
    source_id = ref.source.source_id
    tampered = DATA.replace(b"line 7 ", b"LINE 7 ")
    _rewrite_in_place(ref.path, tampered)
    # Someone records the changed file as verified, with the digest of its
    # new bytes: it cannot be the id's, so the read refuses all the same.
    _fresh(tmp_path).read_page(format_source_id("sess", "tool_result_001.txt", _sha(tampered)))
    with pytest.raises(ArtifactIntegrityError):
        _fresh(tmp_path).read_page(source_id)
    assert hashes[-1] == _sha(tampered)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("damage", ["garbage", "truncated", "hard link", "symlink"])
def test_a_damaged_or_foreign_record_is_ignored_and_the_file_hashed(
    tmp_path: pathlib.Path, hashes: list[str], damage: str
) -> None:
    ref = _artifact(tmp_path)
    _fresh(tmp_path).read_page(ref)
    record = tmp_path / "sess" / RECORD_NAME
    if damage == "garbage":
        record.write_bytes(b"toolswap verified-artifacts 1\ntool_result_001.txt 1 2 x\n")
    elif damage == "truncated":
        record.write_bytes(record.read_bytes()[:-20])
    elif damage == "hard link":
        os.link(record, tmp_path / "elsewhere")
    else:
        (tmp_path / "copy").write_bytes(record.read_bytes())
        record.unlink()
        record.symlink_to(tmp_path / "copy")
    hashes.clear()
    page = _fresh(tmp_path).read_page(ref)
    assert page.text.startswith("line 0 ") and hashes == [ref.content_sha256]


def test_a_file_changed_less_than_the_settling_time_ago_is_not_recorded(
    tmp_path: pathlib.Path,
) -> None:
    ref = _artifact(tmp_path)  # its ctime is now
    ToolResultExternalizer(tmp_path / "sess", environ={}).read_page(ref)
    assert not (tmp_path / "sess" / RECORD_NAME).exists()


def test_listing_in_a_fresh_process_uses_the_record(
    tmp_path: pathlib.Path, hashes: list[str]
) -> None:
    ref = _artifact(tmp_path)
    _fresh(tmp_path).list_artifacts()
    hashes.clear()
    (info,) = _fresh(tmp_path).list_artifacts()
    assert info.source_id == ref.source.source_id and hashes == []


def test_the_record_is_written_through_the_seam(tmp_path: pathlib.Path) -> None:
    from toolswap.faultinject.disk import SimulatedDisk

    disk = SimulatedDisk()
    session = "/work/sess"
    ref = ToolResultExternalizer(session, environ={}, fs=disk).externalize(DATA).artifact
    assert ref is not None
    disk.advance_time(3)
    ToolResultExternalizer(session, environ={}, fs=disk).read_page(ref)
    assert disk.exists(f"{session}/{RECORD_NAME}")
    assert not os.path.exists(f"{session}/{RECORD_NAME}")
