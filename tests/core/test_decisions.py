"""The implementation decides from the spec's tables, row by row (one source of truth).

For every row of ``lease.LEASE_TRANSITIONS``, ``reconcile.RECONCILE_TABLE``,
``reconcile.SEAL_TABLE`` and ``cleanup.PLAN_RULES``, the real journal or the
real cleanup is driven into that row and its decision must equal the table's.
Then each row is replaced (the mutant seam): the implementation must follow the
replaced row, which it can only do if it reads the table rather than a copy.
"""

from __future__ import annotations

import fcntl
import hashlib
import itertools
import os
import pathlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import MappingProxyType
from typing import Any

import attrs
import pytest
from toolswap.spec import cleanup as spec_cleanup
from toolswap.spec import lease as spec_lease
from toolswap.spec import reconcile as spec_reconcile
from toolswap.spec.lease import LeaseNote, LeaseState
from toolswap.spec.owner import SealResult

from toolswap import decisions
from toolswap.cleanup import ArtifactCleanupPolicy, PlanEntry, plan_cleanup
from toolswap.domain import ArtifactRetentionClaim, format_source_id
from toolswap.errors import UsageError
from toolswap.fs import FileFacts, OsFileSystem
from toolswap.journal import ArtifactRetentionJournal, IllegalTransitionError
from toolswap.owner import ObservedState, ReconcileStatus
from toolswap.owners.memory import InMemoryOwner
from toolswap.session import SessionPaths

from ._journal_support import make_artifact

L = spec_lease.LeaseState
A = spec_lease.LeaseAction
K = spec_reconcile.ObservationKind

# -- one vocabulary: the implementation speaks the spec's enums -----------------------


def test_the_core_names_are_the_spec_enums_themselves() -> None:
    from toolswap.spec import cleanup as c
    from toolswap.spec import owner as o

    import toolswap

    assert toolswap.LeaseState is L and toolswap.LeaseNote is spec_lease.LeaseNote
    assert ObservedState is o.ObservedState and ReconcileStatus is spec_reconcile.ReconcileStatus
    from toolswap import cleanup as core_cleanup

    assert core_cleanup.PLANNED_DELETE is c.PlanStatus.PLANNED_DELETE
    assert core_cleanup.DELETED is c.ApplyStatus.DELETED
    assert set(c.PlanStatus) == core_cleanup.PLAN_STATUSES


def test_a_journal_record_carries_exactly_the_spec_record_phases() -> None:
    from toolswap import journal_format

    assert set(journal_format._PHASE_OF_TEXT.values()) == set(spec_lease.RECORD_PHASES)
    assert L.NEW not in spec_lease.RECORD_PHASES  # "new" is never written, so never read
    assert all(journal_format._PHASE_OF_TEXT[p.value] is p for p in spec_lease.RECORD_PHASES)


def test_no_module_outside_the_spec_defines_its_own_enum_of_a_spec_vocabulary() -> None:
    # A second enum spelling the same words (as Phase once did next to LeaseState)
    # is what this item removed: any enum in the package whose members share a
    # word with a spec vocabulary enum must be that enum.
    import enum
    import importlib
    import pkgutil

    from toolswap.spec import cleanup as c
    from toolswap.spec import owner as o

    import toolswap

    vocabularies = [
        L,
        spec_lease.LeaseNote,
        o.ObservedState,
        spec_reconcile.ReconcileStatus,
        c.PlanStatus,
        c.ApplyStatus,
    ]
    words = {m.value for v in vocabularies for m in v}
    seen = []
    for info in pkgutil.walk_packages(toolswap.__path__, "toolswap."):
        if info.name.startswith("toolswap.spec") or info.name.endswith("__main__"):
            continue
        try:
            module = importlib.import_module(info.name)
        except ModuleNotFoundError as exc:  # the MCP server needs the optional SDK
            if exc.name != "mcp":
                raise
            continue
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, enum.Enum)
                and value.__module__ == module.__name__
            ):
                seen.append(value)
                shared = {m.value for m in value} & words
                assert not shared, f"{value.__qualname__} in {info.name} re-spells {shared}"
    assert seen, "the walk found no enum at all: it did not look"


def test_the_vocabulary_is_json_as_its_words() -> None:
    import json

    sample = [L.PREPARED, spec_lease.LeaseNote.CONFLICT, ReconcileStatus.PENDING_UNKNOWN]
    assert json.loads(json.dumps(sample)) == ["PREPARED", "CONFLICT", "pending_unknown"]
    assert [str(s) for s in sample] == ["PREPARED", "CONFLICT", "pending_unknown"]


def test_an_odd_or_missing_observed_state_is_the_unknown_row() -> None:
    assert decisions.observation_kind(None, True, True) is K.UNKNOWN
    assert decisions.observation_kind(ObservedState.UNKNOWN, True, True) is K.UNKNOWN


def test_only_a_real_true_seals_an_absence() -> None:
    # a truthy answer that is not True may not be a tombstone: the owner must seal
    assert decisions.observation_kind(ObservedState.ABSENT, False, 1) is K.ABSENT_UNSEALED
    assert decisions.observation_kind(ObservedState.ABSENT, False, True) is K.ABSENT_SEALED


# -- lease transitions: every (state, action) pair ----------------------------------


def _journal_in(tmp_path: pathlib.Path, state: Any) -> tuple[ArtifactRetentionJournal, Any]:
    session = tmp_path / "s1"
    claim = make_artifact(session)
    journal = ArtifactRetentionJournal(session)
    path = {
        L.NEW: [],
        L.PREPARED: [A.PREPARE],
        L.COMMITTED: [A.PREPARE, A.COMMIT],
        L.ABORTED: [A.PREPARE, A.ABORT],
        L.RELEASED: [A.PREPARE, A.COMMIT, A.RELEASE],
    }[state]
    for action in path:
        _act(journal, claim, action)
    return journal, claim


def _act(journal: ArtifactRetentionJournal, claim: ArtifactRetentionClaim, action: Any) -> None:
    if action is A.PREPARE:
        journal.prepare(claim, "t1")
    else:
        getattr(journal, action.value)("t1")


def _records(journal: ArtifactRetentionJournal) -> int:
    return len(pathlib.Path(journal.path).read_bytes().splitlines())


@pytest.mark.parametrize(
    ("state", "action"), list(itertools.product(L, A)), ids=lambda v: str(v.name)
)
def test_the_journal_takes_exactly_the_lease_tables_transitions(
    tmp_path: pathlib.Path, state: Any, action: Any
) -> None:
    journal, claim = _journal_in(tmp_path, state)
    before = _records(journal) if state is not L.NEW else 0
    legal = (state, action) in spec_lease.LEASE_TRANSITIONS
    if not legal:
        with pytest.raises(UsageError):  # illegal, unknown id, or an id never replayed
            _act(journal, claim, action)
        return
    _act(journal, claim, action)
    after = spec_lease.step(state, action)
    assert journal.recover().states["t1"].value == after.value
    assert (_records(journal) - before == 1) is spec_lease.appends(state, action)


@pytest.mark.parametrize(
    ("current", "record"),
    list(itertools.product([None, *(set(L) - {L.NEW})], spec_lease.RECORD_PHASES)),
    ids=lambda v: "none" if v is None else v.value,
)
def test_a_journal_record_follows_exactly_when_the_lease_table_appends_it(
    current: LeaseState | None, record: Any
) -> None:
    # the verifier's rule for a record read back, against the table directly
    state = L.NEW if current is None else current
    if record is LeaseNote.CONFLICT:
        expected = spec_lease.is_pending(state)
    else:
        key = (state, spec_lease.RECORD_ACTION[record])
        expected = key in spec_lease.LEASE_TRANSITIONS and spec_lease.appends(*key)
    assert decisions.record_follows(current, record) is expected


def test_removing_a_lease_row_makes_the_journal_refuse_it(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal, _ = _journal_in(tmp_path, L.PREPARED)
    rows = dict(spec_lease.LEASE_TRANSITIONS)
    del rows[(L.PREPARED, A.ABORT)]
    monkeypatch.setattr(spec_lease, "LEASE_TRANSITIONS", MappingProxyType(rows))
    with pytest.raises(IllegalTransitionError):
        journal.abort("t1")


# -- reconciliation: every row of both tables ---------------------------------------


@attrs.define
class _Observation:
    transaction_id: str
    state: ObservedState
    source_id: str | None
    content_sha256: str | None
    generation: int
    sealed: bool
    answer: Callable[[], object]

    def seal_absence(self) -> object:
        return self.answer()


class _ScriptedOwner:
    """Shows one observation kind for ``t1``; the seal answers what it is told."""

    def __init__(self, claim: ArtifactRetentionClaim, kind: Any, answer: Callable[[], object]):
        self.claim, self.kind, self.answer = claim, kind, answer
        self.inspected = 0

    def publish(self, transaction_id: str, claim: ArtifactRetentionClaim) -> object:
        raise AssertionError("not used")

    def remove(self, transaction_id: str) -> None:
        raise AssertionError("not used")

    @contextmanager
    def inspect_fenced(self, transaction_id: str) -> Iterator[_Observation]:
        self.inspected += 1
        other = hashlib.sha256(b"something else").hexdigest()
        source, digest = self.claim.source_id, self.claim.content_sha256
        state = {
            K.PUBLISHED_MATCH: ObservedState.PUBLISHED,
            K.PUBLISHED_MISMATCH: ObservedState.PUBLISHED,
            K.UNKNOWN: ObservedState.UNKNOWN,
            K.ABSENT_UNSEALED: ObservedState.ABSENT,
            K.ABSENT_SEALED: ObservedState.ABSENT,
        }[self.kind]
        if self.kind is K.PUBLISHED_MISMATCH:
            source = format_source_id("s1", "tool_result_002.txt", other)
            digest = other
        published = state is ObservedState.PUBLISHED
        yield _Observation(
            transaction_id=transaction_id,
            state=state,
            source_id=source if published else None,
            content_sha256=digest if published else None,
            generation=3,
            sealed=self.kind is K.ABSENT_SEALED,
            answer=self.answer,
        )


def _refuse() -> object:
    raise ConnectionError("seal lost")


#: How the implementation's seal answer reaches each SEAL_TABLE row.
SEAL_ANSWERS: dict[Any, Callable[[], object]] = {
    SealResult.SEALED: lambda: True,
    SealResult.STALE: lambda: False,
    SealResult.UNKNOWN: _refuse,
}


def _expected_phase(state: Any, decision: Any) -> str:
    if decision.journal_action is None:
        return str(state.value)
    return str(spec_lease.step(state, decision.journal_action).value)


@pytest.mark.parametrize(
    "key", list(spec_reconcile.RECONCILE_TABLE), ids=lambda k: f"{k[0].name}-{k[1].name}"
)
def test_reconciliation_decides_every_row_as_the_table_says(
    tmp_path: pathlib.Path, key: tuple[Any, Any]
) -> None:
    state, kind = key
    journal, claim = _journal_in(tmp_path, state)
    decision = spec_reconcile.RECONCILE_TABLE[key]
    if decision.seal_first:  # the seal's answer is the row of the second table
        decision = spec_reconcile.SEAL_TABLE[SealResult.SEALED]
    report = journal.reconcile_reference("t1", _ScriptedOwner(claim, kind, lambda: True))
    assert report.status.value == decision.status.value
    assert journal.recover().states["t1"].value == _expected_phase(state, decision)
    assert bool(journal.recover().conflicts) is decision.record_observed


@pytest.mark.parametrize("result", list(SEAL_ANSWERS), ids=lambda r: r.name)
def test_the_seal_answer_decides_as_the_seal_table_says(
    tmp_path: pathlib.Path, result: Any
) -> None:
    journal, claim = _journal_in(tmp_path, L.PREPARED)
    owner = _ScriptedOwner(claim, K.ABSENT_UNSEALED, SEAL_ANSWERS[result])
    report = journal.reconcile_reference("t1", owner)
    decision = spec_reconcile.SEAL_TABLE[result]
    assert report.status.value == decision.status.value
    assert journal.recover().states["t1"].value == _expected_phase(L.PREPARED, decision)


def test_a_seal_answer_that_is_neither_true_nor_false_is_the_unknown_row(
    tmp_path: pathlib.Path,
) -> None:
    journal, claim = _journal_in(tmp_path, L.PREPARED)
    report = journal.reconcile_reference("t1", _ScriptedOwner(claim, K.ABSENT_UNSEALED, lambda: 1))
    assert report.status.value == spec_reconcile.SEAL_TABLE[SealResult.UNKNOWN].status.value


def test_every_seal_table_row_but_already_sealed_is_reached_through_the_seal() -> None:
    # ALREADY_SEALED is reached through the observation (ABSENT, sealed), never the seal
    assert set(SEAL_ANSWERS) == set(SealResult) - {SealResult.ALREADY_SEALED}


def test_reconciliation_follows_a_replaced_observation_classifier(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal, claim = _journal_in(tmp_path, L.PREPARED)
    before = decisions.observation_kind(ObservedState.PUBLISHED, True, None)  # remembered
    assert before is K.PUBLISHED_MATCH
    # the mutant: the classifier calls everything unknown; a remembered kind must not hide it
    monkeypatch.setattr(spec_reconcile, "classify_observation", lambda seen: K.UNKNOWN)
    report = journal.reconcile_reference(
        "t1", _ScriptedOwner(claim, K.PUBLISHED_MATCH, lambda: True)
    )
    assert report.status is spec_reconcile.ReconcileStatus.PENDING_UNKNOWN


def test_a_reconciliation_decision_follows_a_replaced_lease_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = decisions.reconcile_decision(L.PREPARED, K.ABSENT_SEALED)  # remembered
    assert before.target is L.ABORTED
    # the mutant: aborting a PREPARED lease lands it in COMMITTED
    rows = dict(spec_lease.LEASE_TRANSITIONS)
    rows[(L.PREPARED, A.ABORT)] = L.COMMITTED
    monkeypatch.setattr(spec_lease, "LEASE_TRANSITIONS", MappingProxyType(rows))
    assert decisions.reconcile_decision(L.PREPARED, K.ABSENT_SEALED).target is L.COMMITTED


@pytest.mark.parametrize(
    "key", list(spec_reconcile.RECONCILE_TABLE), ids=lambda k: f"{k[0].name}-{k[1].name}"
)
def test_reconciliation_follows_a_replaced_row(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, key: tuple[Any, Any]
) -> None:
    journal, claim = _journal_in(tmp_path, key[0])
    rows = dict(spec_reconcile.RECONCILE_TABLE)
    # the mutant: this row now keeps the lease as it is, reporting 'stale'; for a
    # terminal lease the rows now differ, so the owner must be asked at all
    rows[key] = spec_reconcile.Decision(False, None, spec_reconcile.ReconcileStatus.PENDING_STALE)
    monkeypatch.setattr(spec_reconcile, "RECONCILE_TABLE", MappingProxyType(rows))
    report = journal.reconcile_reference("t1", _ScriptedOwner(claim, key[1], lambda: True))
    assert report.status is ReconcileStatus.PENDING_STALE
    assert journal.recover().states["t1"].value == key[0].value


def test_a_failed_inspection_reports_what_the_tables_unknown_row_says(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal, _ = _journal_in(tmp_path, L.PREPARED)
    key = (L.PREPARED, spec_reconcile.ObservationKind.UNKNOWN)
    rows = dict(spec_reconcile.RECONCILE_TABLE)
    rows[key] = spec_reconcile.Decision(False, None, spec_reconcile.ReconcileStatus.PENDING_STALE)
    monkeypatch.setattr(spec_reconcile, "RECONCILE_TABLE", MappingProxyType(rows))

    class Failing:
        def inspect_fenced(self, txn: str) -> object:
            raise TimeoutError("the owner did not answer")

    report = journal.reconcile_reference("t1", Failing())  # type: ignore[arg-type]
    assert report.status is ReconcileStatus.PENDING_STALE  # the row, not a hard-coded status
    assert journal.recover().states["t1"] is L.PREPARED


@pytest.mark.parametrize("state", [L.COMMITTED, L.ABORTED, L.RELEASED], ids=lambda s: s.name)
def test_a_lease_the_table_settles_whatever_is_seen_is_not_asked_about(
    tmp_path: pathlib.Path, state: Any
) -> None:
    journal, claim = _journal_in(tmp_path, state)

    class Unreachable:
        def inspect_fenced(self, txn: str) -> object:
            raise AssertionError("the owner was asked about a settled lease")

    report = journal.reconcile_reference("t1", Unreachable())  # type: ignore[arg-type]
    assert decisions.unobserved_decision(state) is not None
    assert report.status.value == f"already_{state.value.lower()}"


# -- the facts the cleanup rows read, built positionally for speed -------------------


def test_the_facts_of_a_file_carry_each_value_in_its_own_field() -> None:
    facts = FileFacts(
        size=11, mtime_ns=3_000_000_000, ctime_ns=5, device=7, inode=13, uid=0, mode=0o100600
    )
    seen = decisions.spec_facts("tool_result_001.txt", facts, trusted=False, digest=17)
    assert seen._asdict() == {
        "kind": spec_cleanup.EntryKind.REGULAR,
        "owned_name": True,
        "linked": False,
        "trusted": False,
        "readable": True,
        "digest": 17,
        "size": 11,
        "mtime": 3.0,
        "device": 7,
        "inode": 13,
        "mtime_exact": 3_000_000_000,
        "writing": False,
    }


def test_the_facts_a_plan_saw_carry_each_value_in_its_own_field() -> None:
    planned = decisions.planned_facts("0" * 63 + "f", 11, 3_000_000_000, 7, 13)
    assert planned == spec_cleanup.EntryFacts(
        digest=15, size=11, mtime=3.0, device=7, inode=13, mtime_exact=3_000_000_000
    )


# -- the cleanup plan: every row of PLAN_RULES ----------------------------------------

NOW = 2_000_000_000.0
DAY = 86400
OLD = NOW - 10 * DAY
DATA = b"tool output\n"
SHA = hashlib.sha256(DATA).hexdigest()


class _OtherUidFS(OsFileSystem):
    """The real seam, run by someone who owns none of the files."""

    def current_uid(self) -> int:
        return super().current_uid() + 1


@attrs.frozen
class _Scenario:
    """A real session built so that one plan row decides ``name``, and the row's facts."""

    build: Callable[[SessionPaths], list[ArtifactRetentionClaim]]
    facts: Any
    claims: tuple[Any, ...] = ()
    name: str = "tool_result_001.txt"
    policy: ArtifactCleanupPolicy = ArtifactCleanupPolicy()
    fs: OsFileSystem = OsFileSystem()


def _write(paths: SessionPaths, name: str = "tool_result_001.txt", *, mtime: float = OLD) -> str:
    path = os.path.join(paths.tool_results, name)
    pathlib.Path(path).write_bytes(DATA)
    ns = int(mtime * 1e9)
    os.utime(path, ns=(ns, ns))
    return path


def _claim(paths: SessionPaths, sha256: str = SHA) -> ArtifactRetentionClaim:
    return ArtifactRetentionClaim(
        source_id=format_source_id(paths.session_id, "tool_result_001.txt", sha256),
        content_sha256=sha256,
    )


def _only_file(paths: SessionPaths) -> list[ArtifactRetentionClaim]:
    _write(paths)
    return []


def _claimed(sha256: str) -> Callable[[SessionPaths], list[ArtifactRetentionClaim]]:
    def build(paths: SessionPaths) -> list[ArtifactRetentionClaim]:
        _write(paths)
        return [_claim(paths, sha256)]

    return build


def _recent(paths: SessionPaths) -> list[ArtifactRetentionClaim]:
    _write(paths, mtime=NOW - 60)
    return []


def _linked(paths: SessionPaths) -> list[ArtifactRetentionClaim]:
    os.link(_write(paths), os.path.join(paths.root, "elsewhere.txt"))
    return []


def _symlink(paths: SessionPaths) -> list[ArtifactRetentionClaim]:
    target = _write(paths, "tool_result_009.txt")
    os.symlink(target, os.path.join(paths.tool_results, "tool_result_001.txt"))
    return []


def _foreign(paths: SessionPaths) -> list[ArtifactRetentionClaim]:
    _write(paths, "notes.txt")
    return []


_WRITERS: list[int] = []  # the writers' handles a scenario left open, closed after each test


@pytest.fixture(autouse=True)
def _close_writers() -> Iterator[None]:
    yield
    while _WRITERS:
        os.close(_WRITERS.pop())


def _mark_as_written(paths: SessionPaths) -> list[ArtifactRetentionClaim]:
    """A writer holds its mark on the file: an exclusive flock on its own open of it."""
    path = os.path.join(paths.tool_results, "tool_result_001.txt")
    if not os.path.exists(path):
        _write(paths)
    handle = os.open(path, os.O_WRONLY)
    fcntl.flock(handle, fcntl.LOCK_EX)
    _WRITERS.append(handle)
    return []


OTHER_SHA = hashlib.sha256(b"other").hexdigest()
_F = spec_cleanup.EntryFacts
_old = int(OLD)
SCENARIOS: dict[spec_cleanup.PlanStatus | str, _Scenario] = {
    "no file, a claim names it": _Scenario(
        build=lambda paths: [_claim(paths)],
        facts=None,
        claims=(spec_cleanup.Claim(digest=1),),
    ),
    "not a regular file": _Scenario(
        build=_symlink, facts=_F(kind=spec_cleanup.EntryKind.SYMLINK, mtime=_old)
    ),
    "hard-linked (more than one name)": _Scenario(build=_linked, facts=_F(linked=True, mtime=_old)),
    "name is not tool_result_NNN.txt": _Scenario(
        build=_foreign, facts=_F(owned_name=False, mtime=_old), name="notes.txt"
    ),
    "not ours to judge (owner, unreadable, changing)": _Scenario(
        build=_only_file, facts=_F(trusted=False, mtime=_old), fs=_OtherUidFS()
    ),
    "still being written (its writer's mark)": _Scenario(
        build=_mark_as_written, facts=_F(mtime=_old, writing=True)
    ),
    "an active claim's digest differs": _Scenario(
        build=_claimed(OTHER_SHA), facts=_F(digest=1, mtime=_old), claims=(spec_cleanup.Claim(2),)
    ),
    "an active claim's full digest matches": _Scenario(
        build=_claimed(SHA), facts=_F(digest=1, mtime=_old), claims=(spec_cleanup.Claim(1),)
    ),
    "younger than the orphan TTL": _Scenario(build=_recent, facts=_F(mtime=int(NOW - 60))),
    "max_deletions already planned": _Scenario(
        build=_only_file,
        facts=_F(mtime=_old),
        policy=ArtifactCleanupPolicy(max_deletions=0),
    ),
    "otherwise": _Scenario(build=_only_file, facts=_F(mtime=_old)),
}


def test_every_plan_rule_has_a_scenario() -> None:
    assert [name for name, _, _ in spec_cleanup.PLAN_RULES] == list(SCENARIOS)


def _plan_status(tmp_path: pathlib.Path, scenario: _Scenario) -> PlanEntry:
    paths = SessionPaths.at(tmp_path / "s1")
    os.makedirs(paths.tool_results)
    claims = scenario.build(paths)
    plan = plan_cleanup(paths, claims, policy=scenario.policy, fs=scenario.fs, now=NOW)
    return plan.entry(scenario.name)


def _spec_policy(policy: ArtifactCleanupPolicy) -> spec_cleanup.Policy:
    return spec_cleanup.Policy(int(policy.orphan_ttl_seconds), policy.max_deletions)


@pytest.mark.parametrize("rule", list(SCENARIOS))
def test_the_plan_decides_every_row_as_the_table_says(tmp_path: pathlib.Path, rule: str) -> None:
    scenario = SCENARIOS[rule]
    index = [name for name, _, _ in spec_cleanup.PLAN_RULES].index(rule)
    policy = _spec_policy(scenario.policy)
    # the scenario's facts are that row's case in the spec ...
    assert spec_cleanup.plan_rule(scenario.facts, scenario.claims, policy, int(NOW)) == index
    # ... and the real cleanup, on the real files, says what that row says
    entry = _plan_status(tmp_path, scenario)
    assert entry.status == spec_cleanup.PLAN_RULES[index][2].value


@pytest.mark.parametrize("rule", list(SCENARIOS))
def test_the_plan_follows_a_replaced_rule(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, rule: str
) -> None:
    statuses = (spec_cleanup.PlanStatus.RETAINED_UNKNOWN, spec_cleanup.PlanStatus.DENIED)
    swapped = _replace_row(monkeypatch, "PLAN_RULES", rule, statuses)
    assert _plan_status(tmp_path, SCENARIOS[rule]).status == swapped.value


def _replace_row(
    monkeypatch: pytest.MonkeyPatch, table: str, rule: str, statuses: tuple[Any, Any]
) -> Any:
    """The mutant: the row named ``rule`` of ``spec.cleanup.<table>`` says something else.

    Its new status is the first of ``statuses`` unless the row says that already.
    """
    rules = list(getattr(spec_cleanup, table))
    index = [name for name, _, _ in rules].index(rule)
    name, condition, status = rules[index]
    swapped = statuses[0] if status is not statuses[0] else statuses[1]
    rules[index] = (name, condition, swapped)
    monkeypatch.setattr(spec_cleanup, table, tuple(rules))
    return swapped


def test_the_plan_counts_max_deletions_in_the_order_of_the_spec_plan(
    tmp_path: pathlib.Path,
) -> None:
    paths = SessionPaths.at(tmp_path / "s1")
    os.makedirs(paths.tool_results)
    ages = {3: 30 * 86400, 1: 10 * 86400, 4: 40 * 86400, 2: 20 * 86400}  # not in name order
    entries = []
    for number, age in ages.items():
        name = f"tool_result_{number:03d}.txt"
        path = os.path.join(paths.tool_results, name)
        with open(path, "wb") as handle:
            handle.write(b"orphan %d" % number)
        mtime_ns = int((NOW - age) * 1e9)
        os.utime(path, ns=(mtime_ns, mtime_ns))
        with open(path, "rb") as handle:
            digest = hashlib.sha256(handle.read()).hexdigest()
        facts = OsFileSystem().lstat(path)
        entries.append((name, decisions.spec_facts(name, facts, sha256=digest), ()))
    policy = ArtifactCleanupPolicy(orphan_ttl_seconds=86400, max_deletions=2)
    plan = plan_cleanup(paths, [], policy=policy, now=NOW)
    expected = spec_cleanup.plan(entries, _spec_policy(policy), int(NOW))
    assert [(e.name, e.status) for e in plan.entries] == [(n, s.value) for n, s in expected]
    assert {e.name for e in plan.planned} == {"tool_result_003.txt", "tool_result_004.txt"}


# -- cleanup apply: every row of APPLY_RULES ----------------------------------------


class _UnreadableFS(OsFileSystem):
    """The real seam, on which opening an artifact for reading fails (EACCES)."""

    def open_read(self, path: str) -> int:
        if path.endswith(".txt"):
            raise PermissionError(13, "Permission denied")
        return super().open_read(path)


def _claim_now(sha256: str) -> Callable[[SessionPaths], list[ArtifactRetentionClaim]]:
    return lambda paths: [_claim(paths, sha256)]


def _remove(paths: SessionPaths) -> list[ArtifactRetentionClaim]:
    os.unlink(os.path.join(paths.tool_results, "tool_result_001.txt"))
    return []


def _rewrite(paths: SessionPaths) -> list[ArtifactRetentionClaim]:
    path = os.path.join(paths.tool_results, "tool_result_001.txt")
    pathlib.Path(path).write_bytes(DATA + b"more\n")
    os.utime(path, ns=(int(OLD * 1e9), int(OLD * 1e9)))
    return []


def _nothing(paths: SessionPaths) -> list[ArtifactRetentionClaim]:
    return []


class _CannotTell(InMemoryOwner):
    """An owner whose census fence fails to enter: it cannot tell."""

    def census_fenced(self, source_ids: Any) -> Any:
        raise TimeoutError("the census fence timed out")


def _lost_lease_owner() -> InMemoryOwner:
    """An owner that still shows a reference to the orphan: the journal lost its lease."""
    owner = InMemoryOwner()
    source = format_source_id("s1", "tool_result_001.txt", SHA)
    owner.publish("t-lost", ArtifactRetentionClaim(source_id=source, content_sha256=SHA))
    return owner


@attrs.frozen
class _Change:
    """What happens between a plan (at NOW, deleting the old orphan) and its apply."""

    between: Callable[[SessionPaths], list[ArtifactRetentionClaim]]
    now: float = NOW
    fs: OsFileSystem = OsFileSystem()
    owner: Callable[[], InMemoryOwner | None] = lambda: None


APPLY_SCENARIOS: dict[str, _Change] = {
    "an active claim names it now, another digest": _Change(_claim_now(OTHER_SHA)),
    "an active claim names it now": _Change(_claim_now(SHA)),
    "the file is gone": _Change(_remove),
    "the owner shows a visible reference naming it": _Change(_nothing, owner=_lost_lease_owner),
    "the owner was asked and cannot tell": _Change(_nothing, owner=_CannotTell),
    "cannot be inspected or read now": _Change(_nothing, fs=_UnreadableFS()),
    "still being written (its writer's mark)": _Change(_mark_as_written),
    "type, links, owner, snapshot or digest changed": _Change(_rewrite),
    "younger than the orphan TTL now": _Change(_nothing, now=OLD + 60),
    "unchanged and unclaimed": _Change(_nothing),
}


def test_every_apply_rule_has_a_scenario() -> None:
    assert [name for name, _, _ in spec_cleanup.APPLY_RULES] == list(APPLY_SCENARIOS)


def _apply_status(tmp_path: pathlib.Path, change: _Change) -> str:
    from toolswap.cleanup import apply_cleanup

    paths = SessionPaths.at(tmp_path / "s1")
    os.makedirs(paths.tool_results)
    _write(paths)
    delete = ArtifactCleanupPolicy(dry_run=False)
    plan = plan_cleanup(paths, [], policy=delete, now=NOW)
    assert [e.name for e in plan.planned] == ["tool_result_001.txt"]
    claims = change.between(paths)
    owner = change.owner()
    report = apply_cleanup(paths, plan, claims=claims, owner=owner, fs=change.fs, now=change.now)
    return report.entry("tool_result_001.txt").status


@pytest.mark.parametrize("rule", list(APPLY_SCENARIOS))
def test_apply_decides_every_row_as_the_table_says(tmp_path: pathlib.Path, rule: str) -> None:
    index = [name for name, _, _ in spec_cleanup.APPLY_RULES].index(rule)
    assert (
        _apply_status(tmp_path, APPLY_SCENARIOS[rule]) == spec_cleanup.APPLY_RULES[index][2].value
    )


@pytest.mark.parametrize("rule", list(APPLY_SCENARIOS))
def test_apply_follows_a_replaced_rule(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, rule: str
) -> None:
    statuses = (spec_cleanup.ApplyStatus.RACE_DETECTED, spec_cleanup.ApplyStatus.RETAINED_UNKNOWN)
    swapped = _replace_row(monkeypatch, "APPLY_RULES", rule, statuses)
    assert _apply_status(tmp_path, APPLY_SCENARIOS[rule]) == swapped.value


# -- claim activity: spec.cleanup.claim_is_active ----------------------------------------------


def _expired_claim(paths: SessionPaths) -> ArtifactRetentionClaim:
    _write(paths)
    return attrs.evolve(_claim(paths), retain_until=NOW - DAY)


@pytest.mark.parametrize("active", [False, True])
def test_cleanup_keeps_a_file_exactly_when_the_spec_calls_its_claim_active(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, active: bool
) -> None:
    paths = SessionPaths.at(str(tmp_path / "s"))
    os.makedirs(paths.tool_results)
    expired = _expired_claim(paths)
    if active:  # the spec says every claim holds: the expired one must protect
        monkeypatch.setattr(spec_cleanup, "claim_is_active", lambda claim, now: True)
    plan = plan_cleanup(paths, [expired], policy=ArtifactCleanupPolicy(), now=NOW)
    wanted = "retained_referenced" if active else "planned_delete"
    assert plan.entry("tool_result_001.txt").status == wanted


@pytest.mark.parametrize("active", [False, True])
def test_the_journal_counts_a_committed_lease_exactly_when_the_spec_calls_it_active(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, active: bool
) -> None:
    paths = SessionPaths.at(str(tmp_path / "s"))
    os.makedirs(paths.tool_results)
    claim = _expired_claim(paths)
    journal = ArtifactRetentionJournal(paths.root)
    journal.prepare(claim, "t1", now=OLD)
    journal.commit("t1", now=OLD)
    if active:
        monkeypatch.setattr(spec_cleanup, "claim_is_active", lambda claim, now: True)
    rec = journal.recover(now=NOW)
    assert bool(rec.protecting_claims(NOW)) is active
    assert bool(rec.claims_by_source(NOW)) is active


def test_a_prepared_lease_is_a_pending_claim_whatever_its_expiry(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = SessionPaths.at(str(tmp_path / "s"))
    os.makedirs(paths.tool_results)
    journal = ArtifactRetentionJournal(paths.root)
    journal.prepare(_expired_claim(paths), "t1", now=OLD)
    asked: list[bool] = []

    def claim_is_active(claim: Any, now: float) -> bool:
        asked.append(claim.pending)
        return bool(claim.pending)

    monkeypatch.setattr(spec_cleanup, "claim_is_active", claim_is_active)
    assert journal.recover(now=NOW).claims_by_source(NOW)
    assert asked == [True]
