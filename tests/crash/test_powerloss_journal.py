"""Our journal and artifacts under real power cuts: real processes, a forgetful disk.

The session and the owner's SQLite database live on a forgetful mount
(:mod:`toolswap.faultinject.powerloss`).  Each round starts real processes on
them -- ``toolswap run`` one after the other, ``toolswap gc apply`` one after
the other, and a publisher (this file run as a script) that externalizes an
artifact, ages it past the GC's TTL, publishes a lease for it with
:meth:`ArtifactRetentionJournal.publish_reference` and :class:`SQLiteOwner`,
and removes every third lease again -- then cuts the power at a seeded moment
in a seeded mode, which kills them all.  After the remount, fresh objects
recover as a restarted agent would (journal recovery, ``reconcile_pending``,
journal-aware GC) and the round checks:

* S1-S7 on what is left, with the spec's own checks
  (:func:`toolswap.faultinject.observe.observe_real`, as the crash explorer);
* every acknowledged artifact (a ``toolswap run`` that printed its pointer) is
  there with the digest it printed;
* every acknowledged lease (a ``publish_reference`` that returned) is
  COMMITTED, its reference visible in the owner and its artifact intact, and
  every acknowledged removal is RELEASED with no reference visible;
* nothing pends after reconciliation with a healthy owner.

The rounds, windows and modes come from one seed; the processes' interleaving
is the machine's.  Run as a module (``python -m tests.crash.test_powerloss_journal
publish SESSION DB PREFIX``) this file is the publisher.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from toolswap.faultinject.observe import observe_real
from toolswap.faultinject.owner_source import inspect_all
from toolswap.faultinject.powerloss import ForgetfulMount, PowerCut
from toolswap.spec.invariants import findings
from toolswap.spec.lease import LeaseState

from toolswap.cleanup import ArtifactCleanupPolicy
from toolswap.domain import ArtifactRetentionClaim, parse_source_id
from toolswap.errors import CorruptStateError
from toolswap.externalizer import ToolResultExternalizer
from toolswap.journal import ArtifactRetentionJournal
from toolswap.owner import owner_publisher, owner_remover
from toolswap.owners.sqlite import SQLiteOwner

from ._fuse import fsync_dir, require_mount, write_file

SEED = 20261207
ROUNDS = 6
WINDOW = (1.0, 3.0)  # seconds the processes run before the cut (each takes ~0.5 s to start)
TTL = 3600  # GC's orphan TTL: fresh run artifacts are never orphans past it
AGE = 2 * TTL  # the publisher ages its artifacts past the TTL: only a lease keeps them
SECRET = b"outside the session\n"
_REPO = Path(__file__).resolve().parents[2]
OUTPUT = "import sys; n = int(sys.argv[1]); sys.stdout.write(f'run {n} line\\n' * 8000)"


# -- the publisher child -----------------------------------------------------------------------


def publisher(session: str, db: str, prefix: str) -> None:
    """Publish leases until killed; one line on stdout per acknowledged publish or removal."""
    ext = ToolResultExternalizer(session, threshold_bytes=1024, environ={})
    journal = ArtifactRetentionJournal(session)
    owner = SQLiteOwner(db)
    for n in range(1_000_000):
        txn = f"{prefix}-{n}"
        ref = ext.externalize([f"{txn} line\n".encode() * 300], "grep").artifact
        assert ref is not None
        past = time.time() - AGE
        os.utime(ref.path, (past, past))
        claim = ArtifactRetentionClaim.from_memory_reference(ref.for_memory())
        try:
            journal.publish_reference(claim, owner_publisher(owner, txn, claim), txn)
        except Exception as error:  # noqa: BLE001 - a GC took the aged orphan first: no ack
            print(json.dumps({"failed": txn, "error": type(error).__name__}), flush=True)
            continue
        print(json.dumps({"published": txn}), flush=True)
        if n % 3 == 2:
            journal.remove_reference(txn, owner_remover(owner, txn))
            print(json.dumps({"removed": txn}), flush=True)


# -- the driver --------------------------------------------------------------------------------


@attrs.define
class Acks:
    """What the processes acknowledged, over all rounds."""

    runs: dict[str, str] = attrs.field(factory=dict)  # artifact name -> digest printed
    published: set[str] = attrs.field(factory=set)
    removed: set[str] = attrs.field(factory=set)
    failures: list[str] = attrs.field(factory=list)  # a process that failed before the cut


class _Loop:
    """Start one command after the other until stopped; remember every child's pid."""

    def __init__(self, name: str, command: list[str], on_done: object) -> None:
        self.name = name
        self.command = command
        self.on_done = on_done
        self.stopped = threading.Event()
        self.children: list[subprocess.Popen[str]] = []
        self._lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        n = 0
        while True:
            with self._lock:
                if self.stopped.is_set():
                    return
                child = subprocess.Popen(
                    [part.replace("{n}", str(n)) for part in self.command],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                self.children.append(child)
            out, err = child.communicate()
            assert callable(self.on_done)
            self.on_done(child.returncode, out, err)
            n += 1

    def stop(self) -> list[int]:
        """No new child from now on; the pids of the children still running."""
        with self._lock:
            self.stopped.set()
            return [c.pid for c in self.children if c.poll() is None]


def _toolswap() -> list[str]:
    return [sys.executable, "-m", "toolswap"]


def _round(
    mount: ForgetfulMount,
    number: int,
    rng: random.Random,
    acks: Acks,
    *,
    publisher_env: dict[str, str] | None = None,
) -> PowerCut:
    session = os.path.join(mount.path, "session")
    db = os.path.join(mount.path, "owner.sqlite")

    def run_done(code: int, out: str, err: str) -> None:
        artifact = json.loads(out)["artifact"] if code == 0 else None
        if artifact is not None:
            acks.runs[os.path.basename(artifact["path"])] = artifact["content_sha256"]
        elif code >= 0:
            acks.failures.append(f"toolswap run exited {code}: {err[-500:]}")

    def gc_done(code: int, out: str, err: str) -> None:
        if code > 0:
            acks.failures.append(f"toolswap gc exited {code}: {err[-500:]}")

    runs = _Loop(
        "runs",
        [
            *_toolswap(),
            "run",
            "--session",
            session,
            "--tool",
            "grep",
            "--json",
            "--",
            sys.executable,
            "-c",
            OUTPUT,
            f"{number}{{n}}",
        ],
        run_done,
    )
    gcs = _Loop(
        "gc",
        [
            *_toolswap(),
            "gc",
            "apply",
            "--yes",
            "--json",
            "--session",
            session,
            "--ttl",
            f"{TTL}s",
            "--max-deletions",
            "1000",
        ],
        gc_done,
    )
    publishing = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.crash.test_powerloss_journal",
            "publish",
            session,
            db,
            f"r{number}",
        ],
        cwd=_REPO,
        env={**os.environ, **(publisher_env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    for loop in (runs, gcs):
        loop.thread.start()
    time.sleep(rng.uniform(*WINDOW))
    mode = rng.choice(["drop", "torn", "dir_subset"])
    pids = [*runs.stop(), *gcs.stop(), publishing.pid]
    cut = mount.power_cut(mode, rng.randrange(2**32), pids=pids)
    out, err = publishing.communicate(timeout=30)
    for loop in (runs, gcs):
        loop.thread.join(timeout=30)
    if publishing.returncode != -signal.SIGKILL:
        acks.failures.append(f"the publisher exited {publishing.returncode}: {err[-500:]}")
    for line in out.splitlines():
        event = json.loads(line)
        if "published" in event:
            acks.published.add(event["published"])
        elif "removed" in event:
            acks.removed.add(event["removed"])
    return cut


@attrs.frozen(kw_only=True)
class Recovered:
    """The state a restarted agent finds and leaves, seen through fresh objects."""

    states: dict[str, LeaseState]
    pending: tuple[str, ...]
    visible: dict[str, tuple[str, str]]
    files: dict[str, bytes]
    violations: list[tuple[str, str]]


def _files(results: Path) -> dict[str, bytes]:
    if not results.is_dir():
        return {}
    return {
        p.name: p.read_bytes()
        for p in sorted(results.iterdir())
        if p.name.startswith("tool_result_") and p.is_file() and not p.is_symlink()
    }


def _recover(mount: ForgetfulMount, acks: Acks) -> Recovered:
    session = os.path.join(mount.path, "session")
    ext = ToolResultExternalizer(session, threshold_bytes=1024, environ={})
    with SQLiteOwner(os.path.join(mount.path, "owner.sqlite")) as owner:
        try:
            journal = ArtifactRetentionJournal(session)
            journal.reconcile_pending(owner)
            policy = ArtifactCleanupPolicy(
                orphan_ttl_seconds=TTL, max_deletions=1000, dry_run=False
            )
            plan = ext.plan_cleanup_from_journal(journal, policy=policy)
            ext.apply_cleanup_from_journal(plan, journal)
            final = journal.recover()
        except CorruptStateError as error:  # fail-closed, but the cut lost evidence (S6)
            files = _files(Path(session, "tool-results"))
            shut = ("S6", f"the journal does not open after the cut: {error}")
            return Recovered(states={}, pending=(), visible={}, files=files, violations=[shut])
        view = inspect_all(owner, {*final.transactions, *acks.published})
    journal_path = Path(session, "retention-leases.jsonl")
    journal_bytes = journal_path.read_bytes() if journal_path.exists() else b""
    files = _files(Path(session, "tool-results"))
    prepared = set(final.transactions)
    observable = observe_real(
        journal=journal_bytes,
        intents=dict(final.transactions),
        now=time.time(),
        view=view,
        files=files,
        ours={*files, *acks.runs},
        landing={},
        acknowledged=acks.published,
        unprepared=set(view.visible()) - prepared,  # S2: visible, but no durable PREPARED
        outside=_outside(mount),
    )
    return Recovered(
        states=dict(final.states),
        pending=final.pending_transaction_ids,
        visible=view.visible(),
        files=files,
        violations=findings(observable),
    )


def _plant_outside(mount: ForgetfulMount) -> None:
    """A secret outside the session and a link to it named like an artifact (S7), durable."""
    root = Path(mount.path)
    secret = root / "outside" / "secret.txt"
    secret.parent.mkdir()
    write_file(secret, SECRET, fsync=True)
    results = root / "session" / "tool-results"
    results.mkdir(parents=True, mode=0o700)
    (results / "tool_result_900.txt").symlink_to(secret)
    for folder in (secret.parent, results, results.parent, root):
        fsync_dir(folder)


def _outside(mount: ForgetfulMount) -> tuple[str, ...]:
    touched = []
    secret = Path(mount.path, "outside", "secret.txt")
    if not secret.is_file() or secret.read_bytes() != SECRET:
        touched.append("outside/secret.txt changed")
    link = Path(mount.path, "session", "tool-results", "tool_result_900.txt")
    if not link.is_symlink():
        touched.append("the link tool_result_900.txt was followed or removed")
    return tuple(touched)


@attrs.frozen(kw_only=True)
class Trial:
    acks: Acks
    cuts: list[PowerCut]
    recovered: list[Recovered]
    seconds: float


@pytest.fixture(scope="module")
def trial(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Trial]:
    require_mount()
    started = time.monotonic()
    rng = random.Random(SEED)
    acks = Acks()
    cuts: list[PowerCut] = []
    recovered: list[Recovered] = []
    with ForgetfulMount(tmp_path_factory.mktemp("powerloss-journal"), control=False) as mount:
        _plant_outside(mount)
        for number in range(ROUNDS):
            cuts.append(_round(mount, number, rng, acks))
            recovered.append(_recover(mount, acks))
    yield Trial(acks=acks, cuts=cuts, recovered=recovered, seconds=time.monotonic() - started)


_ACKED_STATES = (LeaseState.COMMITTED, LeaseState.RELEASED)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_the_processes_did_work_and_failed_only_by_the_cut(trial: Trial) -> None:
    assert trial.acks.failures == []
    assert trial.acks.runs and trial.acks.published and trial.acks.removed


def test_s1_to_s7_hold_after_every_power_cut(trial: Trial) -> None:
    assert [r.violations for r in trial.recovered] == [[] for _ in trial.recovered]


def test_every_acknowledged_artifact_is_there_with_the_digest_it_printed(trial: Trial) -> None:
    final = trial.recovered[-1].files
    damaged = {n: d for n, d in trial.acks.runs.items() if _sha(final.get(n, b"")) != d}
    assert damaged == {}


def _removal_in_flight(acks: Acks) -> set[str]:
    """Per round, the last acknowledged publish whose removal had begun when the power went.

    The publisher removes every third lease right after printing its publish, so the
    cut may land inside that ``remove_reference``: the owner's reference removed (or
    not) and RELEASED durable (or not), with no "removed" printed.
    """
    last: dict[str, int] = {}
    for txn in acks.published:
        prefix, _, n = txn.rpartition("-")
        last[prefix] = max(last.get(prefix, -1), int(n))
    return {f"{p}-{n}" for p, n in last.items() if n % 3 == 2} - acks.removed


def test_every_acknowledged_lease_is_committed_visible_and_its_artifact_intact(
    trial: Trial,
) -> None:
    last = trial.recovered[-1]
    in_flight = _removal_in_flight(trial.acks)
    for txn in sorted(trial.acks.published - trial.acks.removed):
        if txn in in_flight and txn not in last.visible:
            # the cut came after the owner removed it: the lease kept, or released
            assert last.states.get(txn) in {LeaseState.COMMITTED, LeaseState.RELEASED}, txn
            continue
        assert last.states.get(txn) is LeaseState.COMMITTED, txn
        source, digest = last.visible[txn]
        assert _sha(last.files[parse_source_id(source).filename]) == digest, txn


def test_every_acknowledged_removal_is_released_and_invisible(trial: Trial) -> None:
    last = trial.recovered[-1]
    for txn in sorted(trial.acks.removed):
        assert last.states.get(txn) is LeaseState.RELEASED and txn not in last.visible, txn


def test_l1_nothing_pends_after_reconciliation_with_a_healthy_owner(trial: Trial) -> None:
    assert [r.pending for r in trial.recovered] == [() for _ in trial.recovered]


def test_the_cuts_lost_unsynced_work(trial: Trial) -> None:
    """Not vacuous: the processes were cut with work in flight."""
    assert any(cut.report.dir_ops_lost or cut.report.bytes_lost for cut in trial.cuts)
    assert all(cut.killed for cut in trial.cuts)


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        if sys.argv[1] == "publish":
            publisher(sys.argv[2], sys.argv[3], sys.argv[4])


# -- the test can fail ---------------------------------------------------------------------------

_NO_FSYNC = "import toolswap.fs\ntoolswap.fs.OsFileSystem.fsync = lambda self, handle: None\n"


def test_a_publisher_whose_fsync_does_nothing_loses_acknowledged_leases(tmp_path: Path) -> None:
    """The mutant "fsync is a no-op" in the publisher's seam is caught by the checks above."""
    require_mount()
    mutant = tmp_path / "mutant"
    mutant.mkdir()
    (mutant / "sitecustomize.py").write_text(_NO_FSYNC)  # loaded by the publisher at start-up
    backing = tmp_path / "backing"
    backing.mkdir()
    acks = Acks()
    with ForgetfulMount(backing, control=False) as mount:
        _plant_outside(mount)
        _round(mount, 0, random.Random(SEED), acks, publisher_env={"PYTHONPATH": str(mutant)})
        last = _recover(mount, acks)
    lost = {t for t in acks.published if last.states.get(t) not in _ACKED_STATES}
    assert acks.published and (lost or last.violations)
