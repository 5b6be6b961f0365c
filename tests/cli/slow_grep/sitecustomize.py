"""Test-only: make grep_artifact hold the interpreter lock for hours (a stand-in for any slow call).

A process started with this folder on ``PYTHONPATH`` and ``TOOLSWAP_TEST_SLOW_GREP=1``
runs this at startup.  The stdlib ``re`` engine never lets go of the lock while it
backtracks, so a server that ran reads in threads would stop answering altogether,
whatever grep itself does about slow patterns.
"""

import os

if os.environ.get("TOOLSWAP_TEST_SLOW_GREP") == "1":
    try:
        import re

        from toolswap import mcp_tools
    except ImportError:  # a python3 without toolswap (a command the test runs)
        pass
    else:

        def _slow_grep(self: object, args: object) -> object:
            re.search(r"(a+)+$", "a" * 60 + "b")
            raise AssertionError("unreachable in any test's lifetime")

        mcp_tools._READ_TOOLS["grep_artifact"] = _slow_grep  # what the dispatch calls
