"""Which claims protect is the library's choice; a forged plan is a list of candidates only.

``plan_cleanup``, ``apply_cleanup`` and ``cleanup_session`` take a journal, raw
claims, or neither; with neither they use the session's journal if it has (or
had) one, and refuse otherwise: a forgotten argument is never "no claims".
Each test states one claim.
"""

from __future__ import annotations

import os
import pathlib

import attrs
import pytest

from tests.core.test_cleanup import DELETE, NOW, claim_for, exists, make_session, put
from toolswap.cleanup import (
    ClaimsRequiredError,
    CleanupRefused,
    JournalRequiredError,
    apply_cleanup,
    cleanup_session,
    plan_cleanup,
    session_journal,
)
from toolswap.errors import UsageError
from toolswap.journal import ArtifactRetentionJournal
from toolswap.journal_anchor import ANCHOR_NAME

DATA = b"old orphan\n"


def test_a_session_that_never_had_a_journal_is_cleaned_with_no_claims_only_when_told(
    tmp_path: pathlib.Path,
) -> None:
    paths = make_session(tmp_path)
    put(paths, 1, DATA)
    assert session_journal(paths) is None
    plan, report = cleanup_session(paths, (), policy=DELETE, now=NOW)
    assert (plan.journal_aware, report.deleted) == (False, ("tool_result_001.txt",))


@pytest.mark.parametrize("call", ["plan", "apply", "cleanup_session"])
def test_neither_claims_nor_a_journal_on_a_session_without_one_refuses(
    tmp_path: pathlib.Path, call: str
) -> None:
    paths = make_session(tmp_path)
    put(paths, 1, DATA)
    with pytest.raises(ClaimsRequiredError, match=r"claims=\(\)"):
        if call == "plan":
            plan_cleanup(paths, policy=DELETE, now=NOW)
        elif call == "apply":
            apply_cleanup(paths, plan_cleanup(paths, (), policy=DELETE, now=NOW), now=NOW)
        else:
            cleanup_session(paths, policy=DELETE, now=NOW)
    assert exists(paths, "tool_result_001.txt")


def test_a_raw_plan_applied_without_its_claims_refuses_and_keeps_the_claimed_file(
    tmp_path: pathlib.Path,
) -> None:
    # the claims the plan honoured are not "no claims" at apply time (fail closed)
    paths = make_session(tmp_path)
    put(paths, 1, DATA)
    claim = claim_for(paths, "tool_result_001.txt", DATA)
    plan = plan_cleanup(paths, [claim], policy=DELETE, now=NOW)
    with pytest.raises(ClaimsRequiredError):
        apply_cleanup(paths, plan, now=NOW)
    assert exists(paths, "tool_result_001.txt")


def test_with_neither_the_sessions_journal_protects(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    put(paths, 1, DATA)
    ArtifactRetentionJournal(paths.root).prepare(
        claim_for(paths, "tool_result_001.txt", DATA), "t1"
    )
    plan = plan_cleanup(paths, policy=DELETE, now=NOW)
    assert plan.journal_aware
    assert plan.entry("tool_result_001.txt").status == "retained_referenced"
    assert apply_cleanup(paths, plan, now=NOW).deleted == ()


def test_the_clock_given_is_the_chosen_journals_clock(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    put(paths, 1, DATA)
    ArtifactRetentionJournal(paths.root).prepare(
        claim_for(paths, "tool_result_001.txt", DATA), "t1"
    )
    assert plan_cleanup(paths, policy=DELETE, clock=lambda: NOW).planned_at == NOW


def test_claims_and_a_journal_together_are_refused(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    journal = ArtifactRetentionJournal(paths.root)
    with pytest.raises(UsageError, match="not both"):
        plan_cleanup(paths, [], journal=journal, policy=DELETE, now=NOW)


def test_claims_that_are_not_iterable_are_not_read_as_no_claims(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    put(paths, 1, DATA)
    with pytest.raises(TypeError):
        plan_cleanup(paths, 0, policy=DELETE, now=NOW)  # type: ignore[arg-type]
    assert exists(paths, "tool_result_001.txt")


def test_a_raw_plan_stays_raw_and_refuses_once_a_journal_appeared(tmp_path: pathlib.Path) -> None:
    paths = make_session(tmp_path)
    put(paths, 1, DATA)
    plan = plan_cleanup(paths, (), policy=DELETE, now=NOW)
    ArtifactRetentionJournal(paths.root).prepare(
        claim_for(paths, "tool_result_001.txt", DATA), "t1"
    )
    with pytest.raises(JournalRequiredError):
        apply_cleanup(paths, plan, claims=(), now=NOW)
    assert exists(paths, "tool_result_001.txt")


def test_a_journal_aware_plan_refuses_once_the_journal_and_its_anchor_are_gone(
    tmp_path: pathlib.Path,
) -> None:
    paths = make_session(tmp_path)
    put(paths, 1, DATA)
    put(paths, 2, b"another\n")
    ArtifactRetentionJournal(paths.root).prepare(
        claim_for(paths, "tool_result_002.txt", b"another\n"), "t1"
    )
    plan = plan_cleanup(paths, policy=DELETE, now=NOW)
    assert plan.journal_aware and [e.name for e in plan.planned] == ["tool_result_001.txt"]
    os.unlink(paths.journal)
    anchor = os.path.join(paths.root, ANCHOR_NAME)
    if os.path.exists(anchor):
        os.unlink(anchor)
    with pytest.raises(CleanupRefused, match="which is gone"):
        apply_cleanup(paths, plan, now=NOW)
    assert exists(paths, "tool_result_001.txt")


@pytest.mark.parametrize(
    "forged",
    [
        {"sha256": "g" * 64},  # not hex
        {"sha256": "A" * 64},  # not as hashlib writes it
        {"snapshot": "mtime"},  # a time no clock has
    ],
    ids=["non-hex-digest", "uppercase-digest", "huge-mtime"],
)
def test_a_forged_planned_entry_is_kept_as_a_race_not_a_crash(
    tmp_path: pathlib.Path, forged: dict[str, str]
) -> None:
    paths = make_session(tmp_path)
    put(paths, 1, DATA)
    put(paths, 2, b"second\n")
    plan = plan_cleanup(paths, [], policy=DELETE, now=NOW)
    first = plan.entry("tool_result_001.txt")
    if "sha256" in forged:
        sha = forged["sha256"] if forged["sha256"] != "A" * 64 else first.sha256.upper()
        entry = attrs.evolve(first, sha256=sha)
    else:
        assert first.snapshot is not None
        entry = attrs.evolve(first, snapshot=attrs.evolve(first.snapshot, mtime_ns=10**400))
    entries = tuple(entry if e.name == first.name else e for e in plan.entries)
    report = apply_cleanup(paths, attrs.evolve(plan, entries=entries), claims=[], now=NOW)
    assert report.entry("tool_result_001.txt").status == "race_detected"
    assert exists(paths, "tool_result_001.txt")
    assert report.deleted == ("tool_result_002.txt",)  # the rest of the plan still applies
