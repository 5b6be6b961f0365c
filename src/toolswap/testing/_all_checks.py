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
