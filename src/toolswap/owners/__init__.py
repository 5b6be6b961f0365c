"""Reference owner adapters: in-memory (teaching, tests), SQLite (the embedded
default) and PostgreSQL (a shared server; its driver, psycopg, is imported only
when a :class:`PostgresOwner` is built)."""

from __future__ import annotations

from .memory import InMemoryOwner
from .postgres import PostgresOwner
from .sqlite import SQLiteOwner

__all__ = ["InMemoryOwner", "PostgresOwner", "SQLiteOwner"]
