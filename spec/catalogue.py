"""The catalogue of classic mistakes: one entry per mistake, wherever it is shown.

Rules
=====

1. Every classic mistake toolswap teaches or guards against has exactly one
   :class:`Entry` in :data:`CATALOGUE`, under its name (the hyphenated handle
   users type: ``toolswap explore --variant NAME``, ``crashcheck --mutants --mutant NAME``).
2. The entry names the one invariant that must catch it (an
   :class:`invariants.Invariant` of docs/design.md section 8) and where the
   mistake is shown:

   * ``model``: a variant of the spec model (:mod:`variants`), found by the
     spec explorer;
   * ``code``: a mutant of the real implementation
     (``toolswap.faultinject.mutants``), killed by the crash explorer;
   * ``stateful``: caught by the implementation-vs-model machine
     (``tests/stateful/test_machine_catches.py``).

3. A variant or a mutant whose name is not here is refused when it is
   defined (``ValueError``).  Neither states an invariant of its own: each
   reads its entry's (``Variant.expected``, ``Mutant.invariant``), so the
   catalogue is the one place that says which invariant catches a mistake.

Theory of operation
===================

The same mistake is worth showing at three levels: in the model, where the
explorer finds the shortest trace that it hurts; in the real code, where the
crash explorer shows that the implementation's own rule is what stops it; and
in the stateful machine, which compares the two.  Each level needs its own
mechanics (a :class:`system.Mistake` flag, a swapped function or table row, a
patched step), but the question "which invariant catches it?" has one answer,
written here.  To add a mistake: add its entry, then its variant and/or mutant
(docs/where-things-live.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import attrs

from .invariants import Invariant

__all__ = ["Entry", "CATALOGUE", "entry", "invariant_of"]

S1, S2, S3, S4, S5, S6, S7, L1 = Invariant


@attrs.frozen
class Entry:
    """One classic mistake: the invariant that catches it and where it is shown."""

    name: str
    invariant: Invariant
    model: bool = False
    code: bool = False
    stateful: bool = False

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.invariant, Invariant):
            raise ValueError(f"mistake {self.name}: unknown invariant {self.invariant!r}")
        if not (self.model or self.code):
            raise ValueError(f"mistake {self.name}: shown nowhere")


_ROWS = (
    Entry("publish-before-prepared", S2, model=True, code=True, stateful=True),
    Entry("release-before-remove", S4, model=True, code=True, stateful=True),
    Entry("abort-before-tombstone", S3, model=True, code=True, stateful=True),
    Entry("not-found-is-absent", S3, model=True),
    Entry("gc-skips-revalidation", S1, model=True, code=True, stateful=True),
    Entry("gc-trusts-memory-path", S7, model=True, code=True, stateful=True),
    Entry("counter-restart", S6, model=True, code=True, stateful=True),
    Entry("gc-follows-unknown-entries", S7, model=True),
    Entry("gc-ignores-digest-conflict", S1, model=True, code=True),
    Entry("delete-folder-at-session-end", S1, model=True),
    Entry("blind-terminal-append", S5, model=True),
    Entry("conflict-unprotected", S1, model=True),
    Entry("prepared-lease-expires", S1, model=True, code=True),
    Entry("uncertain-error-aborts", S3, model=True, code=True),
    Entry("replay-transaction-id", S1, model=True, code=True),
    Entry("client-side-generation", S3, model=True, code=True),
    Entry("two-reconcilers", S5, model=True),
    Entry("gc-ignores-writer", S1, model=True, code=True),
    Entry("gc-without-owner-witness", S1, model=True, code=True),
    Entry("splitlines-journal", S6, code=True, stateful=True),
    Entry("gc-ignores-corrupt-journal", S1, code=True),
    Entry("prepare-skips-checks", S1, code=True),
    Entry("raw-cleanup-bypasses-journal", S1, code=True),
    Entry("gc-skips-name-denial", L1, code=True),
    Entry("unanchored-artifact-name", S7, code=True),
    Entry("reconcile-without-fence", S3, code=True),
    # journal compaction's mistakes in the real code, named as spec/compaction.py's model
    # names them (``toolswap explore --compaction-mistake``; C2 and C1 serve S6 and S1)
    Entry("remove-before-checkpoint-durable", S6, code=True),
    Entry("snapshot-without-settled-check", S1, code=True),
)

#: name -> entry, in the order the tools list them.
CATALOGUE: Mapping[str, Entry] = MappingProxyType({e.name: e for e in _ROWS})


def entry(name: str) -> Entry | None:
    """The catalogue entry called ``name`` (hyphens or underscores), or None."""
    return CATALOGUE.get(name.replace("_", "-"))


def invariant_of(name: str, where: str) -> Invariant:
    """The invariant that catches mistake ``name``, shown in ``where`` (``"model"``, ``"code"``).

    A variant or mutant asks this for its invariant when it is defined, so one
    the catalogue does not list there is refused (``ValueError``).
    """
    found = entry(name)
    if found is None or not getattr(found, where):
        raise ValueError(f"mistake {name!r} is not in the catalogue as shown in {where}")
    return found.invariant
