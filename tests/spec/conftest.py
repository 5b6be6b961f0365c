"""Markers of the spec tests.

``crosshair`` selects the CrossHair contract check alone
(``pytest tests/spec -m crosshair``); ``-m "not crosshair"`` skips it.
"""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "crosshair: runs `crosshair check` on spec/ (tens of seconds)"
    )
