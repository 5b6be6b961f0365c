"""Owner checks: run an owner adapter through the promises the journal relies on.

Each check drives the adapter only through :class:`ArtifactReferenceOwner`
and a real lease journal in a scratch session, and reports pass or fail with a
reason.  ``toolswap check`` runs them against the embedded SQLite owner; an
adapter author runs them against their own owner with
:func:`run_owner_checks`.

Rules
=====

* ``open_owner`` opens the *same* store afresh on every call: the durability
  checks close the owner (``close()`` if it has one) and reopen it.
* The store must start empty; the checks use their own transaction ids
  (``toolswap-check-...``) and fail if one is already known.
* A check never stops the run: an unexpected exception is that check's
  failure, named by its type (O7: never its message, which might carry a
  credential).
* The fence check (O5) waits a bounded time for a concurrent publish to be
  held back; a slow machine can only make it pass late, never pass wrongly.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

import attrs

from .domain import ArtifactReference, ArtifactRetentionClaim
from .errors import UsageError
from .externalizer import ToolResultExternalizer
from .fs import REAL_FS
from .journal import ArtifactRetentionJournal
from .owner import (
    ArtifactPublicationRejected,
    ArtifactReferenceOwner,
    ObservedState,
    OwnerConflictError,
    OwnerObservation,
    ReconcileStatus,
)

__all__ = ["OwnerCheckResult", "OwnerOpener", "OWNER_CHECKS", "run_owner_checks"]

OwnerOpener = Callable[[], ArtifactReferenceOwner]
"""Opens the owner's store afresh (same store every call)."""

_FENCE_WAIT_SECONDS = 0.3
_JOIN_SECONDS = 30.0


@attrs.frozen(kw_only=True)
class OwnerCheckResult:
    """One promise checked: its name, the verdict and why."""

    promise: str
    name: str
    passed: bool
    detail: str

    def to_dict(self) -> dict[str, object]:
        return {
            "promise": self.promise,
            "name": self.name,
            "passed": self.passed,
            "detail": self.detail,
        }


class _CheckFailed(Exception):
    """A promise was broken; the message says how."""


@attrs.define
class _Bench:
    """A scratch session with two artifacts and a journal, plus the owner under test."""

    open_owner: OwnerOpener
    journal: ArtifactRetentionJournal
    first: ArtifactRetentionClaim
    second: ArtifactRetentionClaim
    artifact_paths: tuple[str, ...]
    owner: ArtifactReferenceOwner = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.owner = self.open_owner()

    def reopen(self) -> None:
        _close(self.owner)
        self.owner = self.open_owner()

    def state(self, txn: str) -> OwnerObservation:
        with self.owner.inspect_fenced(txn) as observation:
            return observation


def _close(owner: object) -> None:
    close = getattr(owner, "close", None)
    if callable(close):
        close()


def _expect(condition: bool, failure: str) -> None:
    if not condition:
        raise _CheckFailed(failure)


def _txn(name: str) -> str:
    return f"toolswap-check-{name}"


# -- the checks ------------------------------------------------------------------
# Each returns a one-line "what held" on success and raises _CheckFailed otherwise.


def _o1_publish_is_visible(bench: _Bench) -> str:
    txn = _txn("o1-publish")
    bench.owner.publish(txn, bench.first)
    seen = bench.state(txn)
    _expect(seen.state is ObservedState.PUBLISHED, f"after publish the fence saw {seen.state}")
    _expect(
        (seen.source_id, seen.content_sha256)
        == (bench.first.source_id, bench.first.content_sha256),
        "the fence saw another identity than the one published",
    )
    return "a published reference is visible to the next fence with its identity"


def _o1_republish_is_a_no_op(bench: _Bench) -> str:
    txn = _txn("o1-republish")
    bench.owner.publish(txn, bench.first)
    before = bench.state(txn).generation
    bench.owner.publish(txn, bench.first)
    after = bench.state(txn)
    _expect(after.generation == before, "publishing the same identity again moved the generation")
    return "publishing the same identity twice changes nothing"


def _o1_other_identity_conflicts(bench: _Bench) -> str:
    txn = _txn("o1-conflict")
    bench.owner.publish(txn, bench.first)
    before = bench.state(txn).generation
    try:
        bench.owner.publish(txn, bench.second)
    except OwnerConflictError:
        pass
    else:
        raise _CheckFailed("a different identity under a held id was accepted")
    after = bench.state(txn)
    _expect(
        after.content_sha256 == bench.first.content_sha256 and after.generation == before,
        "the refused conflicting publish changed the reference",
    )
    return "another identity under a held id raises OwnerConflictError and changes nothing"


def _o3_tombstone_refuses_publish_after_reopen(bench: _Bench) -> str:
    txn = _txn("o3-tombstone")
    with bench.owner.inspect_fenced(txn) as absent:
        _expect(absent.state is ObservedState.ABSENT, f"a never-seen id is {absent.state}")
        _expect(absent.seal_absence() is True, "sealing a fresh absence did not return True")
    bench.reopen()
    try:
        bench.owner.publish(txn, bench.first)
    except ArtifactPublicationRejected:
        pass
    else:
        raise _CheckFailed("a publish after a durable tombstone was accepted")
    seen = bench.state(txn)
    _expect(seen.state is ObservedState.ABSENT and seen.sealed, "the tombstone did not hold")
    return "a tombstone survives a reopen and refuses a later publish"


def _o4_remove_leaves_a_tombstone(bench: _Bench) -> str:
    txn = _txn("o4-remove")
    bench.owner.publish(txn, bench.first)
    bench.owner.remove(txn)
    bench.owner.remove(txn)  # idempotent
    bench.reopen()
    seen = bench.state(txn)
    _expect(seen.state is ObservedState.ABSENT, f"after remove the fence saw {seen.state}")
    _expect(seen.sealed is True, "remove left no tombstone")
    try:
        bench.owner.publish(txn, bench.first)
    except ArtifactPublicationRejected:
        pass
    else:
        raise _CheckFailed("a removed id accepted a late publish")
    return "remove is idempotent, durable, and tombstones the id"


def _o5_fence_holds_back_a_publish(bench: _Bench) -> str:
    txn = _txn("o5-fence")
    other = bench.open_owner()
    outcome: list[BaseException | None] = []

    def publish_elsewhere() -> None:
        try:
            other.publish(txn, bench.first)
            outcome.append(None)
        except BaseException as exc:  # reported below; a fence may make it fail
            outcome.append(exc)

    worker = threading.Thread(target=publish_elsewhere, daemon=True)
    try:
        with bench.owner.inspect_fenced(txn) as observation:
            _expect(observation.state is ObservedState.ABSENT, "a never-seen id is not ABSENT")
            worker.start()
            worker.join(_FENCE_WAIT_SECONDS)
            _expect(
                worker.is_alive() or outcome != [None],
                "a publish by another caller completed while the fence was held",
            )
            _expect(observation.seal_absence() is True, "sealing inside the fence failed")
        worker.join(_JOIN_SECONDS)
        _expect(not worker.is_alive(), "the held-back publish never finished")
    finally:
        _close(other)
    _expect(
        outcome != [None],
        "the held-back publish succeeded after the fence sealed the id",
    )
    seen = bench.state(txn)
    _expect(seen.state is ObservedState.ABSENT and seen.sealed, "the sealed id holds a reference")
    return "a fence holds back a concurrent publish, which then obeys the seal"


def _o6_seal_refuses_a_published_id(bench: _Bench) -> str:
    txn = _txn("o6-seal-published")
    bench.owner.publish(txn, bench.first)
    with bench.owner.inspect_fenced(txn) as seen:
        try:
            seen.seal_absence()
        except UsageError:
            pass
        else:
            raise _CheckFailed("seal_absence on a PUBLISHED observation did not raise UsageError")
    _expect(bench.state(txn).state is ObservedState.PUBLISHED, "the refused seal removed it")
    return "seal_absence is refused on a published id and writes nothing"


def _o7_observations_carry_no_path_or_content(bench: _Bench) -> str:
    txn = _txn("o7-redaction")
    bench.owner.publish(txn, bench.first)
    shown = repr(bench.state(txn)) + str(bench.state(txn))
    for path in bench.artifact_paths:
        _expect(path not in shown, "an observation shows an artifact path")
        _expect(os.path.dirname(path) not in shown, "an observation shows the session folder")
    _expect("toolswap check artifact" not in shown, "an observation shows artifact content")
    return "observations show no artifact path and no content"


def _o8_observation_shapes(bench: _Bench) -> str:
    txn = _txn("o8-shapes")
    absent = bench.state(txn)
    _expect(
        absent.state is ObservedState.ABSENT
        and absent.source_id is None
        and absent.content_sha256 is None
        and absent.sealed is False,
        "a never-seen id is not ABSENT, unsealed, without identity",
    )
    _expect(absent.transaction_id == txn, "the observation names another transaction")
    bench.owner.publish(txn, bench.first)
    published = bench.state(txn)
    _expect(type(published.sealed) is bool, "sealed is not a bool")
    _expect(published.generation != absent.generation, "publish did not move the generation")
    return "observations are well-formed and the generation moves on publish"


def _reconcile_row(
    name: str,
    arrange: Callable[[_Bench, str], None],
    expected: ReconcileStatus,
) -> Callable[[_Bench], str]:
    """One docs/design.md section 6 row: a PREPARED lease, the owner arranged, one reconcile."""

    def check(bench: _Bench) -> str:
        txn = _txn(f"row-{name}")
        bench.journal.prepare(bench.first, txn)
        arrange(bench, txn)
        report = bench.journal.reconcile_reference(txn, bench.owner)
        _expect(report.status is expected, f"reconcile gave {report.status}, want {expected}")
        again = bench.journal.reconcile_reference(txn, bench.owner)
        _expect(
            again.status.value.startswith("already_") or again.status is expected,
            f"a second reconcile gave {again.status}",
        )
        return f"{name}: {expected}"

    return check


def _publish_first(bench: _Bench, txn: str) -> None:
    bench.owner.publish(txn, bench.first)


def _publish_second(bench: _Bench, txn: str) -> None:
    bench.owner.publish(txn, bench.second)


def _leave_absent(bench: _Bench, txn: str) -> None:
    del bench, txn


def _tombstone(bench: _Bench, txn: str) -> None:
    bench.owner.remove(txn)


OWNER_CHECKS: tuple[tuple[str, str, Callable[[_Bench], str]], ...] = (
    ("O1", "publish is durable and visible", _o1_publish_is_visible),
    ("O1", "republish of the same identity is a no-op", _o1_republish_is_a_no_op),
    ("O1", "another identity conflicts", _o1_other_identity_conflicts),
    ("O3", "tombstone refuses publish after reopen", _o3_tombstone_refuses_publish_after_reopen),
    ("O4", "remove leaves a tombstone", _o4_remove_leaves_a_tombstone),
    ("O5", "fence holds back a concurrent publish", _o5_fence_holds_back_a_publish),
    ("O6", "seal refuses a published id", _o6_seal_refuses_a_published_id),
    ("O7", "no path or content in observations", _o7_observations_carry_no_path_or_content),
    ("O8", "observation shapes", _o8_observation_shapes),
    (
        "§6",
        "published with the claim's identity -> committed",
        _reconcile_row("published-same", _publish_first, ReconcileStatus.COMMITTED),
    ),
    (
        "§6",
        "published with another identity -> pending_conflict",
        _reconcile_row("published-other", _publish_second, ReconcileStatus.PENDING_CONFLICT),
    ),
    (
        "§6",
        "absent, not sealed -> seal, aborted",
        _reconcile_row("absent", _leave_absent, ReconcileStatus.ABORTED),
    ),
    (
        "§6",
        "absent and sealed -> aborted",
        _reconcile_row("sealed", _tombstone, ReconcileStatus.ABORTED),
    ),
)
"""(promise, name, check) in the order they run."""


def run_owner_checks(
    open_owner: OwnerOpener, workdir: str | os.PathLike[str]
) -> tuple[OwnerCheckResult, ...]:
    """Run every check against the store ``open_owner`` opens (it must start empty).

    The scratch session (two small artifacts and a journal) is made under
    ``workdir``; nothing outside it is written by the checks themselves.
    """
    session = os.path.join(os.fspath(workdir), "owner-check-session")
    try:
        REAL_FS.lstat(session)
    except FileNotFoundError:
        pass
    else:
        raise UsageError(f"owner checks need a fresh work folder; {session} exists")
    ext = ToolResultExternalizer(session, threshold_bytes=1, bash_threshold_chars=1, environ={})
    refs = [_artifact(ext, text) for text in ("first", "second")]
    journal = ArtifactRetentionJournal(session)
    bench = _Bench(
        open_owner=open_owner,
        journal=journal,
        first=ArtifactRetentionClaim.from_memory_reference(refs[0].for_memory()),
        second=ArtifactRetentionClaim.from_memory_reference(refs[1].for_memory()),
        artifact_paths=tuple(ref.path for ref in refs),
    )
    results: list[OwnerCheckResult] = []
    try:
        for promise, name, check in OWNER_CHECKS:
            try:
                detail, passed = check(bench), True
            except _CheckFailed as failure:
                detail, passed = str(failure), False
            except Exception as exc:  # an adapter bug is a failed check, not a crash
                detail, passed = f"unexpected {type(exc).__name__}", False
            results.append(
                OwnerCheckResult(promise=promise, name=name, passed=passed, detail=detail)
            )
    finally:
        _close(bench.owner)
    return tuple(results)


def _artifact(ext: ToolResultExternalizer, text: str) -> ArtifactReference:
    result = ext.externalize(f"toolswap check artifact: {text}\n".encode(), "owner-check")
    if result.artifact is None:  # pragma: no cover - the threshold is one byte
        raise AssertionError("the scratch artifact was not externalized")
    return result.artifact
