"""Reference owner adapters: in-memory (teaching, tests) and SQLite (the embedded default)."""

from __future__ import annotations

from .memory import InMemoryOwner
from .sqlite import SQLiteOwner

__all__ = ["InMemoryOwner", "SQLiteOwner"]
