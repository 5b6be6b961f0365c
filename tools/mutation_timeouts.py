"""A pytest plugin for the mutation runs: each test's own time limit (issue 39).

tools/mutation_score.py writes the map node id -> seconds (ten times what the
test took in the coverage run, at least 30 s) to the file named by
``MUTATION_TIMEOUTS`` and loads this plugin with ``-p``; each collected test
gets a ``pytest.mark.timeout`` of its own, so a mutant that makes one fast
test loop forever is stopped after seconds, not after the slowest test's
limit.  pytest-timeout does the stopping.
"""

from __future__ import annotations

import json
import os

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    path = os.environ.get("MUTATION_TIMEOUTS")
    if not path:
        return
    with open(path) as handle:
        limits: dict[str, float] = json.load(handle)
    default = limits.get("", 600.0)
    for item in items:
        item.add_marker(pytest.mark.timeout(limits.get(item.nodeid, default)))
