"""``etcd://`` owner specs, ``toolswap owner init`` and ``reconcile`` on etcd, and docs/etcd.md.

Spec parsing needs no cluster.  The rest needs the one ``TOOLSWAP_ETCD_ENDPOINTS``
names (they skip without it, and fail under CI).  The examples of
``docs/etcd.md`` are executed as written: shell blocks with bash, Python
blocks with the interpreter, in document order, in a scratch folder whose
``.ci`` is the repository's.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import pathlib
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest
from toolswap.spec.lease import LeaseState

from tests._etcd import (
    delete_prefix,
    fresh_prefix,
    require_endpoints,
)
from toolswap.cli import main
from toolswap.domain import ArtifactRetentionClaim, format_source_id
from toolswap.errors import UsageError
from toolswap.journal import ArtifactRetentionJournal
from toolswap.owner import ObservedState
from toolswap.owners.etcd import EtcdOwner
from toolswap.owners.uri import parse_owner_spec

from ..core._journal_support import make_artifact

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def etcd_endpoints() -> str:
    return require_endpoints()


@pytest.fixture
def etcd_prefix(etcd_endpoints: str) -> Iterator[str]:
    with fresh_prefix(etcd_endpoints) as prefix:
        yield prefix


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("toolswap: error: ") and captured.err.count("\n") == 1
    return captured.err


# -- specs (no cluster) ----------------------------------------------------------


def test_an_etcd_spec_keeps_the_endpoints_and_takes_out_the_prefix() -> None:
    spec = parse_owner_spec("etcd://10.0.0.1:2379,10.0.0.2:2379?prefix=teams/a")
    assert (spec.kind, spec.location, spec.prefix) == (
        "etcd",
        "10.0.0.1:2379,10.0.0.2:2379",
        "teams/a",
    )
    assert "10.0.0.1" not in repr(spec)


def test_an_etcd_spec_without_a_prefix_uses_the_default() -> None:
    assert parse_owner_spec("etcd://db.internal:2379").prefix == "toolswap"


@pytest.mark.parametrize(
    "spec",
    [
        "etcd:db.internal:2379",
        "etcd://db.internal",
        "etcd://db.internal:2379?schema=x",
        "etcd://db.internal:2379?prefix=a&prefix=b",
        "etcd://https://db.internal:2379",
        "etcd://db.internal:notaport",
    ],
)
def test_malformed_etcd_specs_are_usage_errors_that_do_not_echo_the_endpoints(spec: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_owner_spec(spec)
    assert "db.internal" not in str(caught.value)


def test_an_empty_prefix_is_refused_not_read_as_the_default() -> None:
    with pytest.raises(UsageError, match="prefix= is empty"):
        parse_owner_spec("etcd://db.internal:2379?prefix=")


def test_a_prefix_outside_the_allowed_characters_is_refused_before_any_round_trip() -> None:
    # port 9 (discard) on loopback: a round trip would fail as refused, not as usage
    with pytest.raises(UsageError, match="prefix"):
        EtcdOwner("127.0.0.1:9", prefix="a b")


# -- against the cluster ------------------------------------------------------------


@pytest.fixture
def spare_prefix(etcd_endpoints: str) -> Iterator[str]:
    """A prefix nobody initialized; deleted afterwards."""
    prefix = f"toolswap-test/cli-{os.getpid()}"
    delete_prefix(etcd_endpoints, prefix)
    yield prefix
    delete_prefix(etcd_endpoints, prefix)


@pytest.mark.etcd
def test_owner_init_marks_a_prefix_once_and_reconcile_uses_it(
    etcd_endpoints: str,
    spare_prefix: str,
    tmp_path: pathlib.Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = f"etcd://{etcd_endpoints}?prefix={spare_prefix}"
    assert main(["owner", "init", spec]) == 0
    assert capsys.readouterr().out == f"etcd owner prefix '{spare_prefix}': created (version 1)\n"
    assert main(["owner", "init", spec]) == 0
    assert capsys.readouterr().out.endswith("already at version 1\n")

    session = tmp_path / "s1"
    claim = make_artifact(session)
    journal = ArtifactRetentionJournal(session)
    journal.prepare(claim, "published")
    journal.prepare(claim, "absent")
    with EtcdOwner(etcd_endpoints, prefix=spare_prefix) as owner:
        owner.publish("published", claim)
    assert main(["reconcile", "--owner", spec, "--session", str(session), "--json"]) == 0
    out = capsys.readouterr().out
    reports = json.loads(out)["reports"]
    assert {r["transaction_id"]: r["status"] for r in reports} == {
        "published": "committed",
        "absent": "aborted",
    }
    assert dict(journal.recover().states) == {
        "published": LeaseState.COMMITTED,
        "absent": LeaseState.ABORTED,
    }
    assert etcd_endpoints.split(",")[0] not in out


@pytest.mark.etcd
def test_reconcile_against_an_unmarked_prefix_is_one_line_and_touches_nothing(
    etcd_endpoints: str,
    spare_prefix: str,
    tmp_path: pathlib.Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    session = tmp_path / "s1"
    ArtifactRetentionJournal(session).prepare(make_artifact(session), "t1")
    before = (session / "retention-leases.jsonl").read_bytes()
    spec = f"etcd://{etcd_endpoints}?prefix={spare_prefix}"
    assert main(["reconcile", "--owner", spec, "--session", str(session)]) == 2
    line = _one_error_line(capsys)
    assert "not initialized" in line and "toolswap owner init" in line
    assert etcd_endpoints.split(",")[0] not in line
    assert (session / "retention-leases.jsonl").read_bytes() == before


def _old_artifact(session: pathlib.Path) -> tuple[str, str]:
    results = session / "tool-results"
    results.mkdir(parents=True)
    data = b"referenced only by the owner\n" * 10
    path = results / "tool_result_001.txt"
    path.write_bytes(data)
    os.utime(path, (1_000_000, 1_000_000))
    digest = hashlib.sha256(data).hexdigest()
    return format_source_id("s1", "tool_result_001.txt", digest), digest


@pytest.mark.etcd
def test_gc_apply_with_an_etcd_owner_keeps_what_the_owner_still_references(
    etcd_endpoints: str, etcd_prefix: str, tmp_path: pathlib.Path
) -> None:
    # the journal knows no lease; the owner's census (O9) shows one, so the file stays
    session = tmp_path / "s1"
    source_id, digest = _old_artifact(session)
    with EtcdOwner(etcd_endpoints, prefix=etcd_prefix) as owner:
        owner.publish("t-lost", ArtifactRetentionClaim(source_id=source_id, content_sha256=digest))
    spec = f"etcd://{etcd_endpoints}?prefix={etcd_prefix}"
    gc = subprocess.run(
        [sys.executable, "-m", "toolswap", "gc", "apply", "--yes", "--session", str(session)]
        + ["--owner", spec, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert gc.returncode == 0, gc.stderr
    (entry,) = json.loads(gc.stdout)["report"]["entries"]
    assert (entry["status"], "t-lost" in entry["reason"]) == ("retained_referenced", True)
    assert (session / "tool-results" / "tool_result_001.txt").exists()


# -- docs/etcd.md, as written ---------------------------------------------------------

_BLOCK = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


@pytest.mark.etcd
@pytest.mark.slow
def test_the_etcd_deployment_page_runs_as_written(
    etcd_endpoints: str, tmp_path: pathlib.Path
) -> None:
    text = (ROOT / "docs" / "etcd.md").read_text()
    blocks = [(lang, body) for lang, body in _BLOCK.findall(text) if lang in ("sh", "python")]
    assert [lang for lang, _ in blocks] == ["sh", "python", "sh"]
    (tmp_path / ".ci").symlink_to(ROOT / ".ci")  # the page's cluster commands run from a clone
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLSWAP_ETCD_")}
    env["TOOLSWAP_ETCD_ENDPOINTS"] = etcd_endpoints
    clusters_before = set(glob.glob("/tmp/toolswap-etcd.*"))
    delete_prefix(etcd_endpoints, "team_a")
    outputs = []
    try:
        for lang, body in blocks:
            command = ["bash", "-e", "-c", body] if lang == "sh" else [sys.executable, "-c", body]
            done = subprocess.run(
                command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
            )
            assert done.returncode == 0, (
                f"{lang} example failed:\n{body}\n{done.stdout}{done.stderr}"
            )
            outputs.append(done.stdout)
    finally:
        for leaked in set(glob.glob("/tmp/toolswap-etcd.*")) - clusters_before:
            subprocess.run([str(ROOT / ".ci" / "etcd-cluster"), "stop", leaked], check=False)
    init, _, conformance = outputs
    assert init == (
        "etcd owner prefix 'team_a': created (version 1)\n"
        "etcd owner prefix 'team_a': already at version 1\n"
        "0 pending lease(s) examined\n"
    )
    assert "O5.fence-holds-back-publish-process" in conformance
    assert set(glob.glob("/tmp/toolswap-etcd.*")) == clusters_before  # stopped and removed

    # The Python example left its lease RELEASED and the id tombstoned.
    journal = ArtifactRetentionJournal(tmp_path / "sessions" / "host-a")
    assert dict(journal.recover().states) == {"host-a-1": LeaseState.RELEASED}
    with (
        EtcdOwner(etcd_endpoints, prefix="team_a") as owner,
        owner.inspect_fenced("host-a-1") as seen,
    ):
        assert (seen.state, seen.sealed) == (ObservedState.ABSENT, True)
    delete_prefix(etcd_endpoints, "team_a")
