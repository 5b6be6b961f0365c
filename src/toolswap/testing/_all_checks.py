"""Imports every check module, in run order (registration order is run order)."""

from __future__ import annotations

from . import (  # noqa: F401
    checks_deep,
    checks_fence,
    checks_publish,
    checks_rows,
    checks_shape,
    checks_tombstone,
)

# Imported after the sentence checks above (whatever an import sorter does to the
# block): these go deeper into the same sentences, so they run after them.
for _deeper in (
    "checks_calls",
    "checks_ids",
    "checks_shared",
    "checks_time",
    "checks_witness",
    "checks_powerloss",
):
    __import__(f"{__package__}.{_deeper}")
