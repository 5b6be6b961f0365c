"""``Bounds.parse``: the CLI's ``--bounds k=v,...``, refused on any doubt."""

from __future__ import annotations

import pytest
from toolswap.spec.errors import BadBounds
from toolswap.spec.system import Bounds


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", Bounds()),
        ("artifacts=1", Bounds(artifacts=1)),
        (" transactions = 3 , crashes=false ", Bounds(transactions=3, crashes=False)),
        (
            "lost_acks=0,unknown=off,tamper=no,foreign_entry=yes",
            Bounds(lost_acks=False, unknown=False, tamper=False, foreign_entry=True),
        ),
        ("max_generation=2,max_deletions=0", Bounds(max_generation=2, max_deletions=0)),
    ],
)
def test_parse_accepts_key_value_pairs(text: str, expected: Bounds) -> None:
    assert Bounds.parse(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("states=3", "bad bound"),
        ("artifacts", "bad bound"),
        ("artifacts=two", "non-negative integer"),
        ("artifacts=-1", "non-negative integer"),
        ("artifacts=0", "artifacts must be 1..4"),
        ("transactions=9", "transactions must be 1..4"),
        ("max_generation=0", "max_generation must be 1..6"),
        ("crashes=maybe", "true or false"),
        ("artifacts=1,artifacts=2", "given twice"),
    ],
)
def test_parse_refuses_with_a_typed_error(text: str, message: str) -> None:
    with pytest.raises(BadBounds, match=message):
        Bounds.parse(text)
