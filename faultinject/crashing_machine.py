"""The protocol machine on the simulated disk, with crashes: the real implementation vs the spec.

:class:`SimulatedDiskMachine` runs the rules of
:mod:`toolswap.faultinject.protocol_machine` over a
:class:`~toolswap.faultinject.disk.SimulatedDisk`; :class:`CrashingMachine`
adds the crash rules:

* ``dirty_reboot(mode)`` -- crash the disk between operations in a drawn mode,
  build fresh objects over the durable state and recover.  Everything an
  operation returned was durable, so the recovered state must equal the model.
* ``crash_during(op, target, mode)`` -- arm a named crash point or the k-th I/O
  operation, run a drawn operation, crash in a drawn mode, reboot, recover.
  Each transaction the operation touched must be at a state on its spec path
  (a prefix of what it meant to do), untouched ones unchanged, no surviving
  artifact changed, only planned files gone; then the model adopts what
  survived (the owner's part read through its fences) and the S1-S7
  invariants judge it.
* ``torn_journal_append(granularity)`` -- crash between a journal write and
  its fsync and keep a torn prefix of the record (1 B, 512 B, 4 KiB cuts):
  recovery must ignore the torn tail and the next append must cut it first.

The disk is toolswap's; the owner is another process and is not crashed by a
reboot (``owner_crash`` restarts it).  A named crash point is paired with an
operation that passes it (and, where only one outcome reaches it, that
outcome: ``publish.after_rejected`` needs a rejection), so every point is
reached, not merely armed.  ``hypothesis.event`` names each crash point, I/O
crash and mode, so ``--hypothesis-show-statistics`` shows the coverage.
"""

from __future__ import annotations

from typing import Any

from hypothesis import event, note
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule
from toolswap.spec import lease as spec_lease
from toolswap.spec.errors import IllegalTransition

from .disk import CRASH_MODES, TORN_GRANULARITIES, Chooser, SimulatedCrash, SimulatedDisk
from .explorer import known_crash_points
from .protocol_machine import (
    CONTENTS,
    OUTSIDE_BYTES,
    PUBLISH_OUTCOMES,
    RECONCILE_ANSWERS,
    REMOVE_OUTCOMES,
    THRESHOLD_BYTES,
    TTLS,
    TXNS,
    Crashed,
    Expected,
    LeaseAction,
    LeaseState,
    OwnerRecord,
    OwnerState,
    ProtocolMachine,
    Touch,
    identity,
    lease_of,
)

__all__ = ["CRASH_POINTS", "CrashingMachine", "SimulatedDiskMachine", "T0"]

T0 = 1_700_000_000.0
CRASH_POINTS = known_crash_points()
OPERATIONS = (
    "externalize",
    "prepare",
    "publish",
    "publish",
    "remove",
    "direct",
    "reconcile",
    "reconcile",
    "reconcile_pending",
    "gc",
    "gc",
)
#: Crash point prefix -> the operations that pass such a point.
POINT_OPS = {
    "cleanup": ("gc",),
    "externalize": ("externalize",),
    "high_water": ("externalize",),
    "publish": ("publish",),
    "reconcile": ("reconcile", "reconcile_pending"),
    "remove": ("remove",),
    "journal": ("prepare", "publish", "direct", "reconcile", "reconcile_pending", "remove"),
}
#: The outcome (or owner answer) without which the operation never reaches the point.
POINT_OUTCOME = {
    "publish.after_rejected": "rejected",
    "publish.after_owner_write": "ok",
    "remove.after_owner_remove": "ok",
    "reconcile.after_tombstone": "truthful",
}


class SimulatedDiskMachine(ProtocolMachine):
    """The shared rules over :class:`SimulatedDisk` (no crashes yet)."""

    def make_seam(self) -> tuple[Any, str]:
        disk = SimulatedDisk(time_base_ns=int(T0 * 1e9))
        root = "/sessions/sess-1"
        disk.makedirs(root)
        return disk, root

    def start_time(self) -> float:
        return T0

    def make_outside(self) -> str:
        self.base_fs.makedirs("/outside")
        self.base_fs.put_file("/outside/secret.txt", OUTSIDE_BYTES, durable=True)
        return "/outside/secret.txt"

    def plant(self, path: str, kind: str) -> None:
        if kind == "symlink":
            self.base_fs.make_symlink(path, self.outside)
        elif kind == "regular":
            self.base_fs.put_file(path, b"someone else's notes\n", durable=True)
        else:
            self.base_fs.makedirs(path)

    def advance_seam_time(self, seconds: float) -> None:
        self.base_fs.advance_time(seconds)

    def tamper_bytes(self, path: str, data: bytes) -> None:
        self.base_fs.put_file(path, data, durable=True)

    def raw_bytes(self, path: str) -> bytes | None:
        try:
            data: bytes = self.base_fs.read_file(path)
        except FileNotFoundError:
            return None
        return data

    def durable_journal(self) -> bytes:
        return self.base_fs.durable_read(self.journal_path) or b""

    def artifact_files(self) -> dict[str, bytes]:
        prefix = self.results_dir + "/"
        return {
            path[len(prefix) :]: data
            for path, data in self.base_fs.snapshot().items()
            if path.startswith(prefix)
            and isinstance(data, bytes)
            and path[len(prefix) :] not in self.model.foreign
        }


class CrashingMachine(SimulatedDiskMachine):
    """Adds ``dirty_reboot`` and ``crash_during`` (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self._touch = Touch()
        self._io_target: int | None = None

    def call(self, fn: Any, touch: Touch) -> tuple[Any, BaseException | None]:
        """Run one real call; an I/O crash is armed only inside it (helpers do I/O too)."""
        self._touch = touch
        disk = self.base_fs
        if self._io_target is not None:
            disk.arm_io(self._io_target)
        try:
            return self.real(fn)
        except SimulatedCrash as crash:
            raise Crashed(str(crash)) from None
        finally:
            if self._io_target is not None and not disk.halted:
                armed = disk._armed_io  # what is left of the count carries to the next call
                self._io_target = None if armed is None else armed[0]
                disk.disarm()

    def reboot(self, mode: str, data: st.DataObject, granularity: int | None = None) -> None:
        report = self.base_fs.crash(
            mode,
            Chooser(lambda n: data.draw(st.integers(0, n - 1), label="crash choice")),
            granularity=granularity,
        )
        event(f"crash mode: {mode}" + (f" ({report.granularity} B)" if report.granularity else ""))
        journal = self.raw_bytes(self.journal_path)
        if journal and not journal.endswith(b"\n"):
            event("crash left a torn journal tail")
        note(f"reboot: {report}")
        self.plan = None
        self.owner.heal()
        self.boot()

    @rule(mode=st.sampled_from(CRASH_MODES), data=st.data())
    def dirty_reboot(self, mode: str, data: st.DataObject) -> None:
        """Between operations everything returned is durable: recovery equals the model."""
        self.reboot(mode, data)

    @rule(data=st.data(), mode=st.sampled_from(CRASH_MODES))
    def crash_during(self, data: st.DataObject, mode: str) -> None:
        forced: str | None = None
        if data.draw(st.booleans(), label="crash at a named point"):
            point = data.draw(st.sampled_from(CRASH_POINTS), label="crash point")
            # an operation that passes the point (new points: any operation)
            ops = POINT_OPS.get(point.split(".")[0], OPERATIONS)
            op = data.draw(st.sampled_from(ops), label="operation")
            forced = POINT_OUTCOME.get(point)
            self.base_fs.arm(point)
            target = f"point {point}"
        else:
            op = data.draw(st.sampled_from(OPERATIONS), label="operation")
            self._io_target = data.draw(st.integers(1, 14), label="crash before I/O #")
            target = f"I/O #{self._io_target}"
        self.crash_inside(op, data, forced, target, mode)

    @precondition(lambda self: self.model.refs)
    @rule(
        data=st.data(),
        op=st.sampled_from(("prepare", "publish", "direct", "reconcile", "remove")),
        granularity=st.sampled_from(TORN_GRANULARITIES),
    )
    def torn_journal_append(self, data: st.DataObject, op: str, granularity: int) -> None:
        """Crash between a journal write and its fsync, keeping a torn prefix of the record.

        Recovery must ignore the torn tail (the operation did not happen) and the
        next append must cut it first (``journal.before_truncate`` and
        ``journal.after_truncate`` are reachable only after this).
        """
        self.base_fs.arm("journal.before_fsync")
        self.crash_inside(op, data, None, "point journal.before_fsync", "torn", granularity)
        journal = self.raw_bytes(self.journal_path)
        if journal and not journal.endswith(b"\n") and data.draw(st.booleans(), label="again?"):
            # the next append cuts the torn tail first: crash around that cut too
            point = data.draw(
                st.sampled_from(("journal.before_truncate", "journal.after_truncate")),
                label="truncate point",
            )
            again = data.draw(st.sampled_from(("prepare", "publish")), label="next append")
            mode = data.draw(st.sampled_from(CRASH_MODES), label="mode")
            self.base_fs.arm(point)
            self.crash_inside(again, data, None, f"point {point}", mode)

    def crash_inside(
        self,
        op: str,
        data: st.DataObject,
        forced: str | None,
        target: str,
        mode: str,
        granularity: int | None = None,
    ) -> None:
        """Run ``op`` with the crash armed; if it fired, reboot in ``mode`` and judge."""
        if op in ("prepare", "publish") and not self.model.refs:
            op = "externalize"
        pre = self.model.clone()
        self.base_fs.crash_points_seen.clear()  # which points this operation passed
        reason: str | None
        try:
            self.run_op(op, data, forced)
        except Crashed as crash:
            reason = str(crash)
        else:
            reason = None
        finally:
            self.base_fs.disarm()
            self._io_target = None
        if reason is None:
            event(f"crash_during {op}: target not reached")
            return
        event(f"crashed in {op}")
        if target.startswith("I/O"):
            seen = self.base_fs.crash_points_seen
            after = seen[-1] if seen else "start"
            event(f"crash at I/O after point {after}")
        else:
            event(f"crash at {target}")
        note(f"crash in {op} at {target}: {reason}")
        self.reboot(mode, data, granularity)
        self.resync(pre, self._touch)

    def run_op(self, op: str, data: st.DataObject, forced: str | None = None) -> None:
        """Run one drawn operation; ``forced`` fixes its outcome or owner answer."""
        fresh = op in ("prepare", "publish")
        if fresh:
            txn = data.draw(st.sampled_from(TXNS), label="txn")
        else:
            txn = self.draw_txn(data, LeaseState.COMMITTED, LeaseState.PREPARED)
        if op == "externalize":
            content = data.draw(CONTENTS, label="content")
            self.op_externalize(b"x" * (THRESHOLD_BYTES + 1) + content, False)  # writes a file
        elif op == "prepare":
            self.op_prepare(txn, self.draw_claim(data))
        elif op == "publish":
            outcome = forced or data.draw(st.sampled_from(PUBLISH_OUTCOMES), label="outcome")
            self.op_publish(txn, self.draw_claim(data), outcome)
        elif op == "remove":
            outcome = forced or data.draw(st.sampled_from(REMOVE_OUTCOMES), label="outcome")
            self.op_remove(txn, outcome)
        elif op == "direct":
            action = data.draw(
                st.sampled_from([LeaseAction.COMMIT, LeaseAction.ABORT, LeaseAction.RELEASE])
            )
            self.op_direct(txn, action)
        elif op == "reconcile":
            answer = forced or data.draw(st.sampled_from(RECONCILE_ANSWERS), label="answer")
            self.op_reconcile(txn, answer)
        elif op == "reconcile_pending":
            self.op_reconcile_pending(forced or data.draw(st.sampled_from(["truthful", "unknown"])))
        else:
            ttl = data.draw(st.sampled_from(TTLS), label="ttl")
            self.op_gc_plan(ttl, 100, False)
            self.op_gc_apply()
            self.plan = None

    def resync(self, pre: Expected, touch: Touch) -> None:
        """Judge what survived a crash inside an operation, then adopt it into the model."""
        rec = self.journal.recover(now=self.now)
        m = pre.clone()
        for txn in set(pre.lease) | set(rec.states):
            before = pre.phase(txn)
            got = lease_of(rec.states[txn]) if txn in rec.states else LeaseState.NEW
            allowed = {before}
            frontier = [before]
            while frontier:
                state = frontier.pop()
                for action in touch.actions.get(txn, ()):
                    try:
                        nxt = spec_lease.step(state, action)
                    except IllegalTransition:
                        continue
                    if nxt not in allowed:
                        allowed.add(nxt)
                        frontier.append(nxt)
            assert got in allowed, f"after a crash {txn} is {got.name}; allowed {allowed}"
            if got is not before:
                event(f"crash kept {before.name} -> {got.name}")
                if before is LeaseState.NEW:
                    m.intent[txn] = rec.transactions[txn]
                    m.order.append(txn)
                m.lease[txn] = got
        # a CONFLICT append may or may not have become durable: adopt what recovery says
        m.conflicts = {
            txn: tuple(
                (i.source_id, i.content_sha256)
                for i in seen
                if i.source_id is not None and i.content_sha256 is not None
            )
            for txn, seen in rec.conflicts.items()
        }
        on_disk = self.artifact_files()
        for name, content in pre.files.items():
            if name not in on_disk:
                assert name in touch.may_delete, f"after a crash {name} vanished"
                del m.files[name]
                event("crash: a planned deletion survived")
            else:
                assert on_disk[name] == content, f"after a crash the bytes of {name} changed"
        for name in set(on_disk) - set(pre.files):
            assert touch.may_create, f"after a crash {name} appeared"
            self.adopt_name(m, name, on_disk[name])
            m.files[name] = on_disk[name]
            event("crash: an unreturned artifact survived (orphan)")
        view = self.view()
        for txn in TXNS:
            seen = view.seen[txn]
            record = pre.record(txn)
            same = self.same_generation(txn, record.generation, seen.generation)
            if txn not in touch.actions:
                assert same, f"owner row of untouched {txn} moved"
                continue
            if same:
                continue
            # one operation changes an id at most once: the spec's next generation
            shown = {"published": OwnerState.PUBLISHED, "tombstone": OwnerState.TOMBSTONED}.get(
                seen.kind
            )
            assert shown is not None, f"after a crash the owner shows {txn} as {seen.kind}"
            ident = record.digest
            if seen.source_id is not None and seen.content_sha256 is not None:
                ident = identity(seen.source_id, seen.content_sha256)
            after = record.generation + 1
            assert self.same_generation(txn, after, seen.generation), (
                f"owner generation of {txn} reused after a crash"
            )
            m.owner[txn] = OwnerRecord(state=shown, generation=after, digest=ident)
        m.in_flight = list(self.source.in_flight)
        self.model = m
