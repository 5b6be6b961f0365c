"""The kit's power-loss checks tell a durable store from the same store with durability off.

Claims
======

* ``SQLiteOwner`` and the guide's JSONL example pass every power-loss check;
  ``SQLiteOwner`` with ``PRAGMA synchronous=OFF`` and the example without its
  fsyncs fail every one of them (each pair: the same adapter, durability on and off).
* The writer never closes its handle: an adapter that fsyncs only in ``close()``
  fails.
* A store that answers a fence before its recovery is done (ABSENT, then the
  late replay makes it PUBLISHED) fails the in-doubt check, and only it.
* The crash explorer with power cuts passes ``SQLiteOwner`` and finds the
  unsynced one breaking S1 (seed 0).
* Without a forgetful mount the checks skip with a reason that says what to
  install; the in-memory harness skips them with its own reason; the kit lists
  and runs its other checks without ``mfusepy``.
* No mount, FUSE server or writer process outlives a check, also a failing one.

The PostgreSQL and Redis pairs are in ``test_kit_powerloss_servers.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conformance import _powerloss_harnesses as variants
from tests.crash._fuse import require_mount
from toolswap.owners.memory import InMemoryHarness
from toolswap.owners.sqlite import SQLiteHarness
from toolswap.testing import Capability, OwnerHarness, run_conformance
from toolswap.testing.checks_powerloss import POWER_LOSS_CHECKS
from toolswap.testing.options import RunOptions

PLAIN = RunOptions(examples=0, seed=0, fixed=("plain",))
JsonlHarness = variants.JsonlHarness


def _outcomes(harness: type[OwnerHarness], tmp_path: Path) -> dict[str, tuple[str, str]]:
    report = run_conformance(harness, workroot=tmp_path, checks=POWER_LOSS_CHECKS, options=PLAIN)
    return {r.check_id: (r.outcome, r.message) for r in report.results}


@pytest.mark.parametrize("harness", [SQLiteHarness, JsonlHarness], ids=lambda h: h.__name__)
def test_a_durable_store_passes_every_power_loss_check(
    harness: type[OwnerHarness], tmp_path: Path
) -> None:
    require_mount()
    outcomes = _outcomes(harness, tmp_path)
    assert {c: o for c, (o, _) in outcomes.items()} == dict.fromkeys(POWER_LOSS_CHECKS, "pass"), (
        outcomes
    )


@pytest.mark.parametrize(
    "harness",
    [variants.UnsyncedSQLiteHarness, variants.UnsyncedJsonlHarness],
    ids=lambda h: h.__name__,
)
def test_the_same_store_with_durability_off_fails_every_power_loss_check(
    harness: type[OwnerHarness], tmp_path: Path
) -> None:
    require_mount()
    outcomes = _outcomes(harness, tmp_path)
    assert {c: o for c, (o, _) in outcomes.items()} == dict.fromkeys(POWER_LOSS_CHECKS, "fail"), (
        outcomes
    )
    for _check, (_, message) in outcomes.items():
        assert "after a power cut" in message, message  # the finding, not a crash


def test_an_adapter_that_syncs_only_when_closed_fails(tmp_path: Path) -> None:
    require_mount()
    outcomes = _outcomes(variants.FsyncOnCloseJsonlHarness, tmp_path)
    outcome, message = outcomes["O1.publish-survives-power-cut"]
    assert outcome == "fail" and "after a power cut" in message, message


def test_a_fence_answered_before_recovery_is_caught_as_absent_then_published(
    tmp_path: Path,
) -> None:
    require_mount()
    outcomes = _outcomes(variants.LateReplayJsonlHarness, tmp_path)
    outcome, message = outcomes["O8.in-doubt-never-absent-then-published"]
    assert outcome == "fail" and "ABSENT-then-PUBLISHED" in message, message
    others = {
        c: o for c, (o, _) in outcomes.items() if c != "O8.in-doubt-never-absent-then-published"
    }
    assert set(others.values()) == {"pass"}, outcomes


_EXPLORER = "DEEP.crash-explorer-power-cuts"


@pytest.mark.parametrize(
    ("harness", "verdict"),
    [(SQLiteHarness, "pass"), (variants.UnsyncedSQLiteHarness, "fail")],
    ids=["synchronous-full", "synchronous-off"],
)
def test_the_crash_explorer_with_power_cuts_tells_the_two_sqlite_owners_apart(
    harness: type[OwnerHarness], verdict: str, tmp_path: Path
) -> None:
    require_mount()
    # Seed 0 samples a scenario whose journal relies on a reference the owner said it
    # holds (the digest-conflict scenario; S1) and one whose removal tombstone the owner
    # must keep (compaction's RELEASED lease; S4): the unsynced owner loses both at the cut.
    report = run_conformance(harness, workroot=tmp_path, checks=[_EXPLORER], options=PLAIN)
    result = report.result(_EXPLORER)
    assert result.outcome == verdict, result.message
    if verdict == "fail":
        assert "S1 in gc_digest_conflict" in result.message, result.message
        assert result.message.startswith(("S1 ", "S4 ")), result.message


def test_without_a_mount_the_checks_skip_saying_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolswap.faultinject import powerloss

    monkeypatch.setattr(powerloss, "mount_unavailable_reason", lambda: "no /dev/fuse")
    outcomes = _outcomes(SQLiteHarness, tmp_path)
    for outcome, message in outcomes.values():
        assert outcome == "skip" and "no /dev/fuse" in message and "fuse3" in message, message


def test_the_in_memory_harness_skips_them_with_its_own_reason(tmp_path: Path) -> None:
    declared = set(InMemoryHarness.unsupported.values())
    outcomes = _outcomes(InMemoryHarness, tmp_path)
    assert {o for o, _ in outcomes.values()} == {"skip"}
    assert {m for _, m in outcomes.values()} <= declared
    assert Capability.POWER_LOSS in InMemoryHarness.unsupported


_WITHOUT_MFUSEPY = """
import json, sys
sys.modules["mfusepy"] = None  # import mfusepy now fails, as where it is not installed
from toolswap.testing import run_conformance
from toolswap.testing.options import RunOptions
report = run_conformance(
    __import__("toolswap.owners.sqlite", fromlist=["x"]).SQLiteHarness,
    checks=["O1.publish-survives-power-cut", "O1.publish-visible-to-next-fence"],
    options=RunOptions(examples=0, seed=0, fixed=("plain",)),
)
print(json.dumps({r.check_id: [r.outcome, r.message] for r in report.results}))
"""


def test_the_kit_runs_without_mfusepy_and_says_the_power_checks_need_it() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_MFUSEPY],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout.strip().splitlines()[-1])
    assert rows["O1.publish-visible-to-next-fence"][0] == "pass", rows
    outcome, message = rows["O1.publish-survives-power-cut"]
    assert outcome == "skip" and "toolswap[powerloss]" in message, rows


def _live_children(mentioning: str) -> list[str]:
    """The command lines of this process's children that still run and name ``mentioning``.

    Only those: other tests run slow commands in the background as children of
    this process too (tests/cli/test_readme.py), and they are not this check's.
    """
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                command = cmdline.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError):
            continue
        if int(fields[1]) == os.getpid() and fields[0] != "Z" and mentioning in command:
            found.append(command)
    return found


def test_no_mount_server_or_writer_outlives_a_failing_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_mount()
    from toolswap.faultinject import powerloss

    mounted: list[str] = []
    start = powerloss.ForgetfulMount.start

    def recorded(self: powerloss.ForgetfulMount) -> None:
        mounted.append(self.path)
        start(self)

    monkeypatch.setattr(powerloss.ForgetfulMount, "start", recorded)
    outcomes = _outcomes(variants.UnsyncedJsonlHarness, tmp_path)
    assert outcomes["O8.in-doubt-never-absent-then-published"][0] == "fail"
    assert len(mounted) == len(POWER_LOSS_CHECKS)
    assert [path for path in mounted if powerloss.is_mounted(path)] == []
    assert _live_children(str(tmp_path)) == []
