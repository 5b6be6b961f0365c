"""The visual report for teachers and researchers (``toolswap report``).

Rules
=====

1. :mod:`.model` gathers the figures: every variant's shortest counterexample
   replayed step by step (durable and volatile state after each step, the
   crash, the broken invariant, the same steps under the correct rule), the
   crash matrix, the mutant kill matrix and the parameters of the run.  It
   only calls the public functions of ``toolswap.spec`` and
   ``toolswap.faultinject``.
2. :mod:`.svg` draws the lease, owner and cleanup machines from the spec's
   tables, so a picture cannot drift from the table it shows.
3. :mod:`.html` renders one self-contained page: inline CSS and SVG, system
   fonts, no script needed to read it, nothing fetched from a network.
"""

from __future__ import annotations
