"""A corpus of deliberately broken owner adapters: each breaks one promise sentence.

Rules
=====

1. Each adapter breaks exactly one sentence of the owner promises (O1-O8 in
   :mod:`toolswap.owner`) or of the generation terms, the way a real adapter
   author would: a cache, a read-then-write race, a swallowed exception, a
   blind upsert, a lock that holds threads but not processes.  Its class
   docstring quotes the sentence and tells how the author came to write it.
2. Adapters are built over both bases: subclasses of
   :class:`~toolswap.owners.sqlite.SQLiteOwner` (``sqlite_*`` modules) and of
   :class:`~toolswap.owners.memory.InMemoryOwner` (``memory_*`` modules).  Each
   comes with a harness that reuses the reference harness's restart and fault
   machinery; a harness whose adapter keeps engine state in the process (a
   lock table, a sequence, a write-behind buffer) drops it on restart, as a
   real restart would.
3. Harnesses live in importable modules: the kit builds them again in child
   processes by ``module:attr``.
4. ``tests/conformance/test_broken_adapters.py`` holds the table of which
   check must flag which adapter.
"""
