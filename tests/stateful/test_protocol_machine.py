"""The protocol machine: the real implementation on the simulated disk vs the spec model.

Rules for every operation (see :mod:`tests.stateful._machine`) plus the two
crash rules of this module:

* ``dirty_reboot(mode)`` -- crash the disk between operations in a drawn mode,
  build fresh objects over the durable state and recover.  Everything an
  operation returned was durable, so the recovered state must equal the model.
* ``crash_during(op, target, mode)`` -- arm a named crash point or the k-th I/O
  operation, run a drawn operation, crash in a drawn mode, reboot, recover.
  Each transaction the operation touched must be at a state on its spec path
  (a prefix of what it meant to do), untouched ones unchanged, no surviving
  artifact changed, only planned files gone; then the model adopts what
  survived and the S1-S7 invariants judge it.

``hypothesis.event`` names each crash point, I/O crash and mode, so
``--hypothesis-show-statistics`` shows the coverage.
"""

from __future__ import annotations

from typing import Any

from hypothesis import event, note
from hypothesis import strategies as st
from hypothesis.stateful import rule
from toolswap.faultinject.disk import CRASH_MODES, Chooser, SimulatedCrash, SimulatedDisk
from toolswap.faultinject.explorer import known_crash_points
from toolswap.spec import lease as spec_lease
from toolswap.spec import owner as spec_owner
from toolswap.spec.errors import IllegalTransition

from ._machine import (
    CONTENTS,
    PUBLISH_OUTCOMES,
    RECONCILE_ANSWERS,
    REMOVE_OUTCOMES,
    TTLS,
    TXNS,
    Crashed,
    LeaseAction,
    LeaseState,
    ProtocolMachine,
    Touch,
    identity,
    lease_of,
)

T0 = 1_700_000_000.0
CRASH_POINTS = known_crash_points()


class SimulatedDiskMachine(ProtocolMachine):
    """The shared rules over :class:`SimulatedDisk` (no crashes yet)."""

    def make_seam(self) -> tuple[Any, str]:
        disk = SimulatedDisk(time_base_ns=int(T0 * 1e9))
        root = "/sessions/sess-1"
        disk.makedirs(root)
        return disk, root

    def start_time(self) -> float:
        return T0

    def advance_seam_time(self, seconds: float) -> None:
        self.base_fs.advance_time(seconds)

    def tamper_bytes(self, path: str, data: bytes) -> None:
        self.base_fs.put_file(path, data, durable=True)

    def raw_bytes(self, path: str) -> bytes | None:
        try:
            return self.base_fs.read_file(path)
        except FileNotFoundError:
            return None

    def durable_journal(self) -> bytes:
        return self.base_fs.durable_read(self.journal_path) or b""

    def artifact_files(self) -> dict[str, bytes]:
        prefix = self.results_dir + "/"
        return {
            path[len(prefix) :]: data
            for path, data in self.base_fs.snapshot().items()
            if path.startswith(prefix) and isinstance(data, bytes)
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

    def reboot(self, mode: str, data: st.DataObject) -> None:
        report = self.base_fs.crash(
            mode, Chooser(lambda n: data.draw(st.integers(0, n - 1), label="crash choice"))
        )
        event(f"crash mode: {mode}" + (f" ({report.granularity} B)" if report.granularity else ""))
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
        op = data.draw(
            st.sampled_from(
                ["externalize", "prepare", "publish", "publish", "remove", "direct",
                 "reconcile", "reconcile", "reconcile_pending", "gc", "gc"]
            ),
            label="operation",
        )
        if op in ("prepare", "publish") and not self.model.refs:
            op = "externalize"
        if data.draw(st.booleans(), label="crash at a named point"):
            point = data.draw(st.sampled_from(CRASH_POINTS), label="crash point")
            self.base_fs.arm(point)
            target = f"point {point}"
        else:
            self._io_target = data.draw(st.integers(1, 14), label="crash before I/O #")
            target = f"I/O #{self._io_target}"
        pre = self.model.clone()
        try:
            self.run_op(op, data)
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
        event(f"crash at {target.split(' #')[0] if target.startswith('I/O') else target}")
        note(f"crash in {op} at {target}: {reason}")
        self.reboot(mode, data)
        self.resync(pre, self._touch)

    def run_op(self, op: str, data: st.DataObject) -> None:
        fresh = op in ("prepare", "publish")
        txn = data.draw(st.sampled_from(TXNS), label="txn") if fresh else self.draw_txn(data)
        if op == "externalize":
            self.op_externalize(data.draw(CONTENTS, label="content"), False)
        elif op == "prepare":
            self.op_prepare(txn, self.draw_claim(data))
        elif op == "publish":
            outcome = data.draw(st.sampled_from(PUBLISH_OUTCOMES), label="outcome")
            self.op_publish(txn, self.draw_claim(data), outcome)
        elif op == "remove":
            self.op_remove(txn, data.draw(st.sampled_from(REMOVE_OUTCOMES), label="outcome"))
        elif op == "direct":
            action = data.draw(
                st.sampled_from([LeaseAction.COMMIT, LeaseAction.ABORT, LeaseAction.RELEASE])
            )
            self.op_direct(txn, action)
        elif op == "reconcile":
            self.op_reconcile(txn, data.draw(st.sampled_from(RECONCILE_ANSWERS), label="answer"))
        elif op == "reconcile_pending":
            self.op_reconcile_pending(data.draw(st.sampled_from(["truthful", "unknown"])))
        else:
            ttl = data.draw(st.sampled_from(TTLS), label="ttl")
            self.op_gc_plan(ttl, 100, False)
            self.op_gc_apply()
            self.plan = None

    def resync(self, pre: Any, touch: Touch) -> None:
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
        rows = self.owner.rows()
        for txn in set(rows) | set(pre.owner):
            kind, source, digest, generation = rows.get(txn, ("absent", None, None, 0))
            record = pre.record(txn)
            if txn not in touch.actions:
                assert generation == record.generation, f"owner row of untouched {txn} moved"
                continue
            if generation == record.generation:
                continue
            state = {
                "published": spec_owner.OwnerState.PUBLISHED,
                "tombstone": spec_owner.OwnerState.TOMBSTONED,
            }[kind]
            ident = identity(source, digest) if source is not None else record.digest
            m.owner[txn] = spec_owner.OwnerRecord(state=state, generation=generation, digest=ident)
        m.in_flight = list(self.owner.in_flight)
        self.model = m


TestProtocolMachine = CrashingMachine.TestCase
