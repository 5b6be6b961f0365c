"""The guide's Redis example with Redis's default durability (importable by the kit's writer).

Apart from :mod:`._powerloss_harnesses` because it needs the ``redis`` client.
"""

from __future__ import annotations

import importlib

from . import _powerloss_harnesses  # noqa: F401  (puts docs/examples on sys.path)

__all__ = ["EverysecRedisHarness", "RedisHarness"]

RedisHarness = importlib.import_module("redis_harness").RedisHarness


class EverysecRedisHarness(RedisHarness):  # type: ignore[misc,valid-type]
    """``appendfsync everysec`` (Redis's default): Redis answers before it fsyncs."""

    appendfsync = "everysec"
