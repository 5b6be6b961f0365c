"""Checks under power loss: what a call acknowledged survives a power cut (O1, O4, O6), and a
publish in doubt at the cut is settled for good (O8).

A restart or a killed caller keeps the operating system's page cache, so an
adapter that never fsyncs passes every other durability check.  These checks
put the store on a forgetful file system (:mod:`toolswap.faultinject.powerloss`),
where a power cut loses everything that was not fsynced.

Rules
=====

1. A power-loss check needs :attr:`Capability.POWER_LOSS` (the harness keeps its
   whole store under its work folder, harness rule 8) and a second process.
   Without a working FUSE mount it is skipped, with the reason.
2. The kit mounts a forgetful file system over a folder of the check's work
   folder and builds a second bench, whose harness's work folder is on the
   mount (made durable first: a folder's name survives a cut only once its
   parent is fsynced).  The bench's own harness is not used.
3. Every change whose durability is checked is made by a writer process
   (:mod:`toolswap.testing._power_writer`) that never closes its handle: a
   close could flush what the adapter did not make durable.  A power cut kills
   the writers and every process using the folder (a server whose data is
   there), loses what was not fsynced, remounts, and calls
   :meth:`~toolswap.testing.OwnerHarness.restart_after_power_cut`.  The kit
   opens its own handles only after the last cut.
4. Everything the writers and the kit see is scanned for secrets (O7), as in
   every other check.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ..fs import REAL_FS
from ..owner import ArtifactReferenceOwner
from ._power_writer import PowerWriter
from .bench import Bench, Snapshot, describe_error, expect
from .harness import Capability, harness_import_path
from .outcome import Outcome, OutcomeKind
from .registry import CheckFailed, CheckSkipped, check

if TYPE_CHECKING:
    from ..domain import ArtifactRetentionClaim
    from ..faultinject.powerloss import ForgetfulMount

__all__ = ["POWER_LOSS_CHECKS", "durable_folder"]

_ANSWER_SECONDS = 60.0
_NEEDS = (Capability.POWER_LOSS, Capability.OTHER_PROCESS)
_IN_DOUBT_STREAM = 200
"""Publishes the in-doubt check's writer is given: enough that it is still busy at the cut."""
_SETTLED = 8
"""How many ids after the last acknowledged one the in-doubt check settles."""

POWER_LOSS_CHECKS = (
    "O1.publish-survives-power-cut",
    "O4.remove-survives-power-cut",
    "O6.seal-survives-power-cut",
    "O8.in-doubt-never-absent-then-published",
)
"""The sentence checks of this module (the kit's own tests run them apart)."""


def durable_folder(path: str, root: str) -> None:
    """Make ``path`` (under ``root``) exist durably: each new folder, then its parent fsynced."""
    missing: list[str] = []
    at = os.path.abspath(path)
    while at != root and not os.path.isdir(at):
        missing.append(at)
        at = os.path.dirname(at)
    for folder in reversed(missing):
        # 0o755, not the seam's 0o700: a store's server may run as another user.
        os.mkdir(folder, 0o755)
        REAL_FS.fsync_dir(os.path.dirname(folder))


class _PowerRig:
    """One check's forgetful mount, the bench on it, its writers and the kit's handles."""

    def __init__(self, bench: Bench) -> None:
        try:
            from ..faultinject.powerloss import mount_unavailable_reason
        except ImportError as exc:  # pragma: no cover - the kit ships toolswap.faultinject
            raise CheckSkipped(f"the forgetful file system cannot be imported ({exc})") from None
        reason = mount_unavailable_reason()
        if reason is not None:
            raise CheckSkipped(
                f"no forgetful FUSE mount on this machine: {reason} (Debian: apt-get install "
                "fuse3; pip install 'toolswap[powerloss]')"
            )
        self.outer = bench
        self.writers: list[PowerWriter] = []
        self._handles: list[ArtifactReferenceOwner] = []
        self._mount: ForgetfulMount | None = None
        self._bench: Bench | None = None

    def __enter__(self) -> _PowerRig:
        from ..faultinject.powerloss import ForgetfulMount, MountError

        backing = os.path.join(self.outer.workdir, "power")
        os.makedirs(backing, exist_ok=True)
        mount = ForgetfulMount(backing, control=False)
        try:
            mount.start()
        except MountError as exc:
            raise CheckFailed(f"the kit could not mount its forgetful file system: {exc}") from exc
        self._mount = mount
        try:
            workdir = os.path.join(mount.path, "kit")
            durable_folder(os.path.join(workdir, "store"), mount.path)
            self._bench = Bench(
                self.outer.harness_cls,
                workdir,
                self.outer.check_id,
                drawer=self.outer.drawer,
                options=self.outer.options,
            )
            # The store exists (a server is up) before any writer: close right away.
            self.bench.close(self.bench.open())
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def bench(self) -> Bench:
        assert self._bench is not None
        return self._bench

    def close(self) -> None:
        for writer in self.writers:
            writer.close()
        try:
            if self._bench is not None:
                self._bench.finish()
        finally:
            if self._mount is not None:
                self._mount.close()

    # -- changes in a writer, and the cut -------------------------------------------------

    def write(self, ops: Sequence[Sequence[Any]], *, wait: int | None = None) -> PowerWriter:
        """Start a writer on ``ops`` and wait for ``wait`` answers (default: all of them)."""
        writer = PowerWriter(harness_import_path(self.bench.harness_cls), self.bench.store_dir)
        self.writers.append(writer)
        writer.run(ops)
        writer.acked = writer.answers(len(ops) if wait is None else wait, _ANSWER_SECONDS)
        for outcome in writer.acked:
            self.bench.scanned(outcome, "an error in the writer process")
        return writer

    def cut(self, mode: str = "drop", seed: int = 0) -> None:
        """Cut the power (rule 3): writers and the store's processes die, unsynced work is lost."""
        from ..faultinject.powerloss import MountError

        assert self._mount is not None
        try:
            self._mount.power_cut(mode, seed, pids=[w.pid for w in self.writers])
        except MountError as exc:
            raise CheckFailed(f"the kit's power cut failed: {exc}") from exc
        for writer in self.writers:
            writer.acked.extend(writer.killed_answers())
            writer.close()
        self.writers = []
        for handle in self._handles:  # dead with the power; closing reaches no disk now
            with contextlib.suppress(Exception):
                self.bench.close(handle)
        self._handles = []
        try:
            self.bench.harness.restart_after_power_cut()
        except Exception as exc:
            raise CheckFailed(
                f"the store did not start again after a power cut: restart_after_power_cut() "
                f"raised {describe_error(exc)}"
            ) from exc

    def open(self) -> ArtifactReferenceOwner:
        owner = self.bench.open()
        self._handles.append(owner)
        return owner


def _published(txn: str, claim: ArtifactRetentionClaim) -> list[Any]:
    return ["publish", txn, claim.to_dict()]


def _acked(outcomes: Sequence[Outcome], what: str) -> None:
    for index, outcome in enumerate(outcomes):
        expect(outcome.ok, f"setting up: {what} #{index + 1} in the writer {outcome.describe()}")


def _lost(call: str) -> str:
    return (
        f"it was not durable when {call} returned (fsync the data before returning, and the "
        "folder of every new file)"
    )


@check(
    "O1.publish-survives-power-cut",
    "a returned publish is durable: it survives a power cut (the store's processes killed, "
    "everything not fsynced lost)",
    needs=_NEEDS,
    slow=True,
)
def _publish_survives(bench: Bench) -> str:
    with _PowerRig(bench) as rig:
        txns = rig.bench.txns("t", 3)
        claims = [rig.bench.first, rig.bench.second, rig.bench.first]
        writer = rig.write([_published(t, c) for t, c in zip(txns, claims, strict=True)])
        _acked(writer.acked, "publish")
        expect(len(writer.acked) == len(txns), "setting up: the writer's publishes never returned")
        rig.cut()
        owner = rig.open()
        for index, (txn, claim) in enumerate(zip(txns, claims, strict=True)):
            seen = rig.bench.observe(owner, txn)
            expect(
                seen.is_published(claim),
                f"returned publish #{index + 1} shows {seen.describe()} after a power cut: "
                + _lost("publish"),
            )
    return "3 returned publishes survived a power cut with their identities"


@check(
    "O4.remove-survives-power-cut",
    "a returned remove is durable: the reference stays invisible and the tombstone stays, "
    "across a power cut",
    needs=_NEEDS,
    slow=True,
)
def _remove_survives(bench: Bench) -> str:
    with _PowerRig(bench) as rig:
        held, never = rig.bench.txn("t"), rig.bench.txn("never-seen")
        writer = rig.write([_published(held, rig.bench.first), ["remove", held], ["remove", never]])
        _acked(writer.acked, "call")
        expect(len(writer.acked) == 3, "setting up: the writer's calls never returned")
        rig.cut()
        owner = rig.open()
        for txn, what in ((held, "a removed reference"), (never, "a removed never-seen id")):
            seen = rig.bench.observe(owner, txn)
            expect(
                seen.is_tombstone,
                f"after a power cut {what} shows {seen.describe()}: " + _lost("remove"),
            )
        late = rig.bench.publish(owner, held, rig.bench.first)
        expect(
            late.kind is OutcomeKind.REJECTED,
            f"after a power cut a replayed publish of a removed id {late.describe()}, "
            "not ArtifactPublicationRejected",
        )
    return "a removed reference and a removed never-seen id stayed tombstoned across a power cut"


@check(
    "O6.seal-survives-power-cut",
    "seal_absence returns True only once the tombstone is durable: it survives a power cut "
    "and refuses a late publish",
    needs=_NEEDS,
    slow=True,
)
def _seal_survives(bench: Bench) -> str:
    with _PowerRig(bench) as rig:
        txn = rig.bench.txn("t")
        writer = rig.write([["settle", txn]])
        _acked(writer.acked, "fence and seal")
        settled = writer.acked[0].value if writer.acked else None
        expect(
            isinstance(settled, dict) and settled.get("sealed") is True,
            f"setting up: sealing a fresh absence in the writer answered {settled!r:.80}",
        )
        rig.cut()
        owner = rig.open()
        seen = rig.bench.observe(owner, txn)
        expect(
            seen.is_tombstone,
            f"after a power cut an id sealed with True shows {seen.describe()}: "
            + _lost("seal_absence"),
        )
        late = rig.bench.publish(owner, txn, rig.bench.first)
        expect(
            late.kind is OutcomeKind.REJECTED,
            f"after a power cut a late publish of a sealed id {late.describe()}, "
            "not ArtifactPublicationRejected",
        )
    return "a seal that returned True held across a power cut and refused a late publish"


@check(
    "O8.in-doubt-never-absent-then-published",
    "a publish in doubt at a power cut is settled for good: a fence after the restart shows "
    "the durable state, so an id it shows ABSENT and seals never shows PUBLISHED later (nor "
    "one shown PUBLISHED ABSENT), also after another power cut",
    needs=_NEEDS,
    slow=True,
)
def _in_doubt_settled(bench: Bench) -> str:
    with _PowerRig(bench) as rig:
        b = rig.bench
        txns = b.txns("t", _IN_DOUBT_STREAM)
        claims = [(b.first, b.second)[i % 2] for i in range(len(txns))]
        before = b.integer("publishes acknowledged before the cut", 1, 6, 2)
        writer = rig.write(
            [_published(t, c) for t, c in zip(txns, claims, strict=True)], wait=before
        )
        expect(len(writer.acked) >= before, "setting up: the writer's publishes never returned")
        # Cut inside a call: once the next publish has started, and a little later.
        busy = writer.inside_next_call(_ANSWER_SECONDS)
        time.sleep(b.integer("milliseconds into the call", 0, 20, 10) / 1000)
        rig.cut("torn", b.integer("seed of the first cut", 0, 2**16, 0))
        expect(busy, "setting up: the writer finished every publish before the cut")
        answers = writer.acked  # in the order of the publishes; the rest never returned
        acked = [t for t, o in zip(txns, answers, strict=False) if o.ok]
        first_open = next((i for i, o in enumerate(answers) if not o.ok), len(answers))
        doubtful = txns[first_open : first_open + _SETTLED]
        settler = rig.write([["settle", t] for t in doubtful])
        settled = dict(zip(doubtful, settler.acked, strict=False))
        for outcome in settled.values():
            if outcome.ok:
                b.scan(str(outcome.value), "an observation in the writer process")
        rig.cut("drop", b.integer("seed of the second cut", 0, 2**16, 1))
        owner = rig.open()
        for index, txn in enumerate(acked):
            seen = b.observe(owner, txn)
            expect(
                seen.is_published(claims[txns.index(txn)]),
                f"acknowledged publish #{index + 1} shows {seen.describe()} after a power cut "
                "(see O1.publish-survives-power-cut)",
            )
        shown = {"ABSENT": 0, "PUBLISHED": 0, "cannot tell": 0}
        for txn, outcome in settled.items():
            kind = _judge(b, owner, txn, claims[txns.index(txn)], outcome)
            shown[kind] += 1
    return (
        f"{len(acked)} acknowledged publishes kept; {len(doubtful)} in doubt settled "
        f"({shown['ABSENT']} sealed ABSENT, {shown['PUBLISHED']} PUBLISHED, "
        f"{shown['cannot tell']} could not tell) and unchanged by a second power cut"
    )


def _judge(
    bench: Bench,
    owner: ArtifactReferenceOwner,
    txn: str,
    claim: ArtifactRetentionClaim,
    outcome: Outcome,
) -> str:
    """How the settling fence saw ``txn``; fail if the state after the second cut contradicts it."""
    if not outcome.ok or not isinstance(outcome.value, dict):
        return "cannot tell"  # the fence could not tell: the journal keeps the lease (O8)
    observed = outcome.value["observed"]
    state, sealed = observed.get("state"), outcome.value.get("sealed")
    after = bench.observe(owner, txn)
    if state == "PUBLISHED":
        expect(
            after.is_published(claim),
            f"a fence after a power cut showed an in-doubt publish PUBLISHED, and after another "
            f"cut it shows {after.describe()}: the fence reported a state that was not durable "
            "(PUBLISHED-then-ABSENT)",
        )
        return "PUBLISHED"
    if state != "ABSENT":
        return "cannot tell"
    expect(
        not _is_published(after),
        "a fence after a power cut showed an in-doubt publish ABSENT"
        + (" and sealed it" if sealed is True else "")
        + ", and after another cut it shows PUBLISHED (ABSENT-then-PUBLISHED): the journal "
        "would have aborted the lease and deleted the artifact the reference names",
    )
    if sealed is True or observed.get("sealed") is True:
        expect(
            after.is_tombstone,
            f"an in-doubt publish sealed after a power cut shows {after.describe()} after "
            f"another cut: the seal returned True before the tombstone was durable",
        )
    return "ABSENT"


def _is_published(seen: Snapshot) -> bool:
    return bool(getattr(seen.state, "value", seen.state) == "PUBLISHED")


_SAMPLED_SCENARIOS = 6
_SAMPLED_SCENARIOS_SLOW = 3  # a harness with ``slow_restart`` (a server per store)


@check(
    "DEEP.crash-explorer-power-cuts",
    "the crash explorer's scenarios, crashed at a seeded sample of crash points with this "
    "owner's store on a forgetful mount and its power cut there too, keep S1-S7",
    needs=[Capability.POWER_LOSS],
    slow=True,
)
def _explorer_power_cuts(bench: Bench) -> str:
    from ..faultinject.powerloss import ForgetfulMount, MountError
    from ._power_explorer import explore_with_power_cuts

    _PowerRig(bench)  # skips without a mount, like the sentence checks
    harness_cls = bench.harness_cls
    assert bench.options.seed is not None
    backing = os.path.join(bench.workdir, "power")
    os.makedirs(backing, exist_ok=True)
    mount = ForgetfulMount(backing, control=False)
    try:
        mount.start()
    except MountError as exc:
        raise CheckFailed(f"the kit could not mount its forgetful file system: {exc}") from exc
    try:
        found = explore_with_power_cuts(
            harness_cls,
            mount,
            durable_folder,
            seed=bench.options.seed,
            scenarios=_SAMPLED_SCENARIOS_SLOW if harness_cls.slow_restart else _SAMPLED_SCENARIOS,
        )
    finally:
        mount.close()
    expect(not found.problems, bench.redact("; ".join(found.problems[:3])))
    skipped = ", ".join(found.skipped)
    skipped = f", skipped (the owner cannot show their faults): {skipped}" if skipped else ""
    return (
        f"{found.states} crash states, one in each of {len(found.scenarios)} seeded scenarios, "
        f"each with the owner's power cut: 0 violations{skipped}"
    )
