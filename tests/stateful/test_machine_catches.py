"""The machine can fail: each test breaks one step of the real code and expects a failure.

A stateful test that never fails proves nothing.  Each mutant below patches
one protocol step of the *real* implementation for the duration of one test
(the simulated disk, the journal, the externalizer or the cleanup), runs the
crashing machine with a fixed, derandomized budget and no shrinking, and
asserts that Hypothesis finds a counterexample whose message names what was
broken (an invariant, or the model comparison the broken step trips) -- so a
harness error (a patch whose signature drifted) does not count as a kill.

Mutants written here: a journal whose fsync is a no-op, cleanup apply without
re-validation, publish before prepare, abort without a tombstone, release
before remove, reads that trust the Memory path, a counter that forgets
deleted names.  Then the shared ones of ``toolswap.faultinject.mutants`` (the
crash explorer's kill matrix) against the same machine: all seven are caught
(``trust_memory_path`` with the machine's references as the Memory).

The budget is small on purpose (150 examples, 30 steps): a mutant that needs
a deep search to be caught is a sign that a rule is missing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import Phase as Stage
from hypothesis.stateful import run_state_machine_as_test
from toolswap.faultinject import mutants as shared_mutants
from toolswap.faultinject.disk import SimulatedDisk
from toolswap.spec import catalogue
from toolswap.spec.lease import LeaseState

from toolswap import cleanup as cleanup_module
from toolswap import externalizer as externalizer_module
from toolswap.externalizer import ToolResultExternalizer
from toolswap.high_water import ArtifactHighWaterMark
from toolswap.journal import ArtifactRetentionJournal
from toolswap.owner import ObservedState, ReconcileStatus

from .test_protocol_machine import T0, CrashingMachine, SimulatedDiskMachine

BUDGET = settings(
    max_examples=150,
    stateful_step_count=30,
    derandomize=True,
    database=None,
    deadline=None,
    phases=[Stage.explicit, Stage.generate],  # finding is the claim; shrinking costs time
    report_multiple_bugs=False,
    suppress_health_check=list(HealthCheck),
    print_blob=False,
)


#: For the mutants that random seeds showed need more than BUDGET now and then (1 miss
#: in 4 seeds at 150 examples); the run stops at the first failure, so this is cheap.
WIDER = settings(BUDGET, max_examples=400)


def assert_caught(machine: type, pattern: str, budget: settings = BUDGET) -> None:
    """Running ``machine`` under ``budget`` fails, with a message matching ``pattern``."""
    with pytest.raises(Exception) as caught:  # noqa: B017 - any failure, checked below
        run_state_machine_as_test(machine, settings=budget)
    message = f"{type(caught.value).__name__}: {caught.value}"
    assert re.search(pattern, message), f"caught the mutant, but not as expected: {message}"


#: The mutants' one swap helper: it raises when its target is gone or only inherited.
patched = shared_mutants.swap


# -- mutant 1: the journal's fsync is dropped ------------------------------------------


class _NoJournalFsyncDisk(SimulatedDisk):
    """A disk on which an fsync of the lease journal does nothing (a lying write cache)."""

    def fsync(self, handle: int) -> None:
        if self._handle(handle).path.endswith("/retention-leases.jsonl"):
            return
        super().fsync(handle)


class _NoJournalFsyncMachine(CrashingMachine):
    def make_seam(self) -> tuple[Any, str]:
        disk = _NoJournalFsyncDisk(time_base_ns=int(T0 * 1e9))
        disk.makedirs("/sessions/sess-1")
        return disk, "/sessions/sess-1"


def test_catches_a_journal_without_fsync() -> None:
    """A record that was acknowledged but not durable is lost in a dirty reboot.

    The fsynced journal anchor may be what notices first: it remembers a record
    that the unsynced journal lost (``shrank`` / ``vanished``).
    """
    assert_caught(_NoJournalFsyncMachine, r"phases: model|S2|S1|allowed|shrank|vanished")


# -- mutant 2: cleanup apply deletes without re-validating -------------------------------


def _delete_without_revalidation(paths: Any, entry: Any, *args: Any, **kwargs: Any) -> tuple:
    """Trust the plan: no claim, type, snapshot or digest check before the unlink."""
    _index, _policy, fs, _uid, _now, dry, *_owner_said = args
    if dry:
        return cleanup_module.DRY_RUN, "would be deleted (dry run)"
    try:
        fs.unlink(paths.artifact_path(entry.name))
    except FileNotFoundError:
        return cleanup_module.ALREADY_MISSING, "already gone"
    return cleanup_module.DELETED, "deleted (mutant: no re-validation)"


def test_catches_cleanup_apply_that_skips_revalidation() -> None:
    """A claim, a tamper or a replacement between plan and apply must keep the file."""
    with patched(cleanup_module, "_revalidate_and_delete", _delete_without_revalidation):
        assert_caught(SimulatedDiskMachine, r"cleanup apply: spec|S1")


# -- mutant 3: publish before the PREPARED record is durable ------------------------------


def _publish_first(
    self: ArtifactRetentionJournal,
    claim: Any,
    publisher: Any,
    transaction_id: Any = None,
    **kw: Any,
) -> Any:
    now = kw.get("now")
    value = publisher()
    txn = self.prepare(claim, transaction_id, now=now).transaction_id
    return self.commit(txn, now=now), value


def test_catches_publish_before_prepare() -> None:
    """S2: the owner sees the reference before the journal holds PREPARED."""
    with patched(ArtifactRetentionJournal, "publish_reference", _publish_first):
        assert_caught(SimulatedDiskMachine, r"S2|publish t\d|phases: model|owner row")


# -- mutant 4: reconciliation aborts an absence without sealing it ----------------------


def _abort_without_tombstone(original: Callable[..., Any]) -> Callable[..., Any]:
    def decide(self: ArtifactRetentionJournal, txn: str, observation: Any, now: Any) -> Any:
        if observation.state is ObservedState.ABSENT and not observation.sealed:
            return self._finish(
                txn,
                LeaseState.ABORTED,
                now,
                observation.generation,
                ReconcileStatus.ABORTED,
                "mutant: one 'not found' taken as absence",
            )
        return original(self, txn, observation, now)

    return decide


def test_catches_abort_without_tombstone() -> None:
    """S3: ABORTED is durable while no tombstone refuses a late write."""
    mutant = _abort_without_tombstone(ArtifactRetentionJournal._decide)
    with patched(ArtifactRetentionJournal, "_decide", mutant):
        assert_caught(SimulatedDiskMachine, r"S3|S1|owner (generation|row)|reconcile t\d")


# -- mutant 5: release before the owner removed the reference ----------------------------


def _release_first(
    self: ArtifactRetentionJournal, transaction_id: str, remover: Any, *, now: Any = None
) -> Any:
    self.release(transaction_id, now=now)
    return remover()


def test_catches_release_before_remove() -> None:
    """S4: RELEASED while the owner may still show the reference (the removal failed)."""
    with patched(ArtifactRetentionJournal, "remove_reference", _release_first):
        assert_caught(SimulatedDiskMachine, r"S4|remove t\d|release|RELEASED")


# -- mutant 6: reads trust the path of the Memory record --------------------------------


def _read_via_memory_path(
    self: ToolResultExternalizer, ref: Any, offset: int = 0, limit: int = 2000
):
    source_id, expected = externalizer_module._expected_digest(ref)
    path = getattr(ref, "path", None) or self.paths.path_for_source(source_id)
    handle, index = self._open_verified(path, source_id, expected)
    try:
        data = index.read_lines(offset, limit, lambda n, at: self._fs.pread(handle, n, at))
    finally:
        self._fs.close(handle)
    return data.decode("utf-8", errors="replace")


def test_catches_reads_that_trust_the_memory_path() -> None:
    """S7: a Memory record's ``path`` must never decide what is read."""
    with patched(ToolResultExternalizer, "read_artifact", _read_via_memory_path):
        assert_caught(SimulatedDiskMachine, r"S7|hostile read")


# -- mutant 7: the artifact counter forgets names that cleanup deleted -------------------


def _number_after_what_is_on_disk(self: ArtifactHighWaterMark, at_least: int) -> int:
    return at_least + 1  # no durable mark: a deleted highest name is handed out again


def test_catches_a_counter_that_reuses_deleted_names() -> None:
    """S6: once cleanup deleted the highest artifact, its name must not get new bytes."""
    with patched(ArtifactHighWaterMark, "advance", _number_after_what_is_on_disk):
        assert_caught(SimulatedDiskMachine, r"S6", WIDER)


# -- the shared kill matrix: faultinject's mutants against the stateful machine ----------
#
# ``toolswap.faultinject.mutants`` switches the seed's classic mistakes into the real
# code for the crash explorer.  The machine must catch them too (issue 6, item 7: "the
# stateful tests or the crash explorer").  ``trust_memory_path`` looks Memory records up
# in the explorer's world; here the machine's own references are the Memory.


class _MemoryMachine(CrashingMachine):
    """The crashing machine whose references are what ``trust_memory_path`` looks up."""

    current: _MemoryMachine | None = None

    def __init__(self) -> None:
        super().__init__()
        _MemoryMachine.current = self

    @staticmethod
    def memory(transaction_id: str) -> Any:
        machine = _MemoryMachine.current
        if machine is None or transaction_id not in machine.model.intent:
            return None
        source = machine.model.intent[transaction_id].source_id
        for ref in machine.model.refs:
            if ref.source.source_id == source:
                # the record a careless agent kept: the artifact's physical path
                return ref.for_memory()
        return None


def _shared(name: str) -> Any:
    return {m.name: m for m in shared_mutants.MUTANTS}[name]


#: The catalogue's mistakes shown both in code and in this machine, by mutant name;
#: gc-trusts-memory-path needs the machine's references as the Memory (its own test).
STATEFUL = [
    m.name
    for m in shared_mutants.MUTANTS
    if (e := catalogue.entry(m.label)) is not None
    and e.stateful
    and e.name != "gc-trusts-memory-path"
]


def test_every_mistake_the_catalogue_shows_here_has_a_test() -> None:
    shown = {e.name for e in catalogue.CATALOGUE.values() if e.stateful}
    tested = {_shared(name).label for name in STATEFUL} | {"gc-trusts-memory-path"}
    assert shown == tested


@pytest.mark.parametrize("name", STATEFUL)
def test_catches_the_shared_mutant(name: str) -> None:
    budget = WIDER if name == "splitlines_journal" else BUDGET
    with _shared(name).active():
        assert_caught(CrashingMachine, r"^AssertionError: |^JournalCorruptError: ", budget)


def test_catches_the_shared_trust_memory_path_mutant() -> None:
    """GC unlinks the path a released reference's Memory record names (S7, S1)."""
    install = shared_mutants._trust_memory_path(memory=_MemoryMachine.memory)
    with install:
        assert_caught(_MemoryMachine, r"^AssertionError: ")
