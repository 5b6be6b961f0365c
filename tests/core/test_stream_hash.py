"""The digest computed beside the write is the digest of the bytes, in order."""

from __future__ import annotations

import hashlib
import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from toolswap import stream_hash
from toolswap.stream_hash import StreamSha256

chunks = st.lists(
    st.one_of(st.binary(max_size=64), st.integers(0, 600_000).map(lambda n: bytes([n % 251]) * n)),
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(chunks, st.integers(0, 300_000))
def test_the_digest_is_hashlibs_whatever_the_chunks(parts: list[bytes], inline: int) -> None:
    digest = StreamSha256(inline_bytes=inline)
    for part in parts:
        digest.update(part)
    assert digest.hexdigest() == hashlib.sha256(b"".join(parts)).hexdigest()


def test_large_streams_are_hashed_on_a_helper_that_ends_with_the_digest() -> None:
    digest = StreamSha256(inline_bytes=0)
    data = [bytes([i]) * stream_hash.BATCH_BYTES for i in range(3)]
    for part in data:
        digest.update(part)
    assert any(t.name == "toolswap-sha256" for t in threading.enumerate())
    assert digest.hexdigest() == hashlib.sha256(b"".join(data)).hexdigest()
    assert not any(t.name == "toolswap-sha256" for t in threading.enumerate())


def test_closing_a_failed_stream_leaves_no_helper_behind() -> None:
    digest = StreamSha256(inline_bytes=0)
    digest.update(b"x" * stream_hash.BATCH_BYTES)
    digest.close()
    digest.close()
    assert not any(t.name == "toolswap-sha256" for t in threading.enumerate())
