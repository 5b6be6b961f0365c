"""What a power cut keeps of the unsynced work: the crash modes as pure functions.

Rules
=====

These are the decisions of :meth:`toolswap.faultinject.disk.SimulatedDisk.crash`,
written once more without the disk around them, for the forgetful file system
(:mod:`.powerloss`).  They take their choices from a
:class:`~toolswap.faultinject.disk.Chooser` in the same order as the simulated
disk does, so the same seed keeps the same things on both (a differential test,
``tests/crash/test_powerloss_model.py``, holds the two to that):

1. In ``torn`` mode without a granularity, the first choice picks one of
   :data:`~toolswap.faultinject.disk.TORN_GRANULARITIES`.
2. Then the directory log, oldest first (:func:`surviving_dir_ops`): in
   ``dir_subset`` mode each operation whose names no dropped operation touched
   is kept on a choice of 1 out of 2; in every other mode all are dropped.
3. Then each file with unsynced writes, in inode order (:func:`torn_kept`):
   in ``torn`` mode one choice picks how far its writes got; in every other
   mode none survive.

Theory of operation
===================

A file's unsynced work is a list of :data:`Pending` operations, a write
``("w", offset, data)`` or a truncation ``("t", size, b"")``.  A torn file keeps
whole operations in order and then a prefix of the next write, cut at a
multiple of the granularity in the file (or at its end).  A write that the
kernel split in two at a multiple of the granularity offers the same cut points
as the whole write, which is why the mount, whose writes arrive split at page
boundaries, tears the way the simulated disk does.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from .disk import CRASH_MODES, TORN_GRANULARITIES, Chooser

__all__ = [
    "DirOp",
    "Pending",
    "apply_dir_op",
    "apply_pending",
    "choose_granularity",
    "surviving_dir_ops",
    "torn_kept",
]

#: One unsynced file operation: ("w", offset, data) or ("t", size, b"").
Pending = tuple[str, int, bytes]


@attrs.frozen
class DirOp:
    """One unsynced directory operation: ``link``/``unlink`` of ``name``, or ``rename``."""

    dir_ino: int
    kind: str
    name: str
    ino: int
    new_name: str = ""


def choose_granularity(mode: str, granularity: int | None, chooser: Chooser) -> int | None:
    """The torn granularity (rule 1); refuses an unknown mode or a granularity below 1."""
    if mode not in CRASH_MODES:
        raise ValueError(f"unknown crash mode {mode!r}; want one of {CRASH_MODES}")
    if granularity is not None and granularity < 1:
        raise ValueError("granularity must be >= 1")
    if mode == "torn" and granularity is None:
        return TORN_GRANULARITIES[chooser.choose(len(TORN_GRANULARITIES))]
    return granularity


def surviving_dir_ops(log: Sequence[DirOp], chooser: Chooser | None) -> list[DirOp]:
    """The unsynced directory operations a crash keeps, in order (rule 2).

    Without a chooser nothing is kept.  Once an operation on a name is dropped,
    every later one touching that name is dropped too, so what is kept could
    have reached the disk in that order.
    """
    kept: list[DirOp] = []
    blocked: set[tuple[int, str]] = set()
    for op in log:
        names = {(op.dir_ino, op.name)}
        if op.kind == "rename":
            names.add((op.dir_ino, op.new_name))
        if chooser is not None and not (names & blocked) and chooser.choose(2) == 1:
            kept.append(op)
        else:
            blocked |= names
    return kept


def apply_dir_op(entries: dict[str, int], op: DirOp) -> None:
    """Apply one kept operation to its directory's durable entries."""
    if op.kind == "link":
        entries[op.name] = op.ino
    elif op.kind == "unlink":
        entries.pop(op.name, None)
    else:
        ino = entries.pop(op.name, op.ino)
        entries[op.new_name] = ino


def torn_kept(pending: Sequence[Pending], granularity: int, chooser: Chooser) -> list[Pending]:
    """The prefix of a file's unsynced operations a torn crash keeps (rule 3)."""
    # candidate cut points: index 0 = nothing kept; then per op its aligned cuts
    cuts: list[tuple[int, int]] = [(-1, 0)]  # (op index, prefix length)
    for index, (kind, offset, data) in enumerate(pending):
        if kind == "w":
            first = (offset // granularity + 1) * granularity
            for boundary in range(first, offset + len(data), granularity):
                cuts.append((index, boundary - offset))
        cuts.append((index, len(data) if kind == "w" else 0))
    op_index, prefix = cuts[chooser.choose(len(cuts))]
    if op_index < 0:
        return []
    kind, offset, data = pending[op_index]
    return [*pending[:op_index], (kind, offset, data[:prefix] if kind == "w" else data)]


def apply_pending(content: bytearray, ops: Sequence[Pending]) -> None:
    """Apply writes and truncations to a file's bytes, zero-filling any gap."""
    for kind, offset, data in ops:
        if kind == "t":
            if offset > len(content):
                content.extend(b"\0" * (offset - len(content)))
            else:
                del content[offset:]
            continue
        if len(content) < offset:
            content.extend(b"\0" * (offset - len(content)))
        content[offset : offset + len(data)] = data
