"""Hypothesis profiles, registered on purpose.

* ``ci``   -- derandomized, no example database, bounded examples (``CI`` set).
* ``dev``  -- the local default: random, with the example database.
* ``deep`` -- many more examples, for a long run before a release.

``HYPOTHESIS_PROFILE`` picks one explicitly; otherwise ``CI`` selects ``ci``.
"""

from __future__ import annotations

import os
import sys

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    max_examples=60,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.register_profile(
    "deep",
    max_examples=2000,
    deadline=None,
    stateful_step_count=100,
    suppress_health_check=[HealthCheck.too_slow],
)

_profile = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
settings.load_profile(_profile)

# PostgreSQL fixtures (skip with a reason without a server; fail under CI).
from ._postgres import pg_dsn, pg_schema  # noqa: E402, F401


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Run the README's examples last, in their own order, so that its slow commands,
    started in the background when collection ends, overlap the whole suite."""
    readme = [item for item in items if item.nodeid.startswith("tests/cli/test_readme.py")]
    if readme:
        items[:] = [item for item in items if item not in readme] + readme


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the README's slow, independent commands early (tests/cli/test_readme.py rule 7)."""
    readme = sys.modules.get("tests.cli.test_readme")
    if readme is None or session.config.option.collectonly:
        return
    readme.start_background([item.name for item in session.items])
