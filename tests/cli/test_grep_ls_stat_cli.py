"""``toolswap read``/``grep``/``ls``/``stat`` as an agent sees them.

Offsets everywhere, output within its cap, errors on one line with exit 2.
"""

from __future__ import annotations

import json
import pathlib
import sys

import pytest

from toolswap.cli import main

BIG = (
    "import sys\n"
    "for i in range(40000): print('ERROR in the middle' if i == 20000 else f'row {i} ok')"
)


@pytest.fixture
def artifact(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    session = str(tmp_path / "s")
    assert main(["run", "--json", "--session", session, "--", sys.executable, "-c", BIG]) == 0
    sid = json.loads(capsys.readouterr().out)["artifact"]["source"]["source_id"]
    return session, sid


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_grep_prints_offsets_that_read_accepts(
    artifact: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    session, sid = artifact
    code, out, _ = _run(capsys, "grep", sid, "ERROR", "-C", "1", "--session", session)
    assert code == 0
    assert out.splitlines()[:3] == [
        "19999-row 19999 ok",
        "20000:ERROR in the middle",
        "20001-row 20001 ok",
    ]
    code, out, _ = _run(
        capsys, "read", sid, "--offset", "20000", "--limit", "1", "--raw", "--session", session
    )
    assert (code, out) == (0, "ERROR in the middle\n")


def test_grep_json_and_options(
    artifact: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    session, sid = artifact
    code, out, _ = _run(capsys, "grep", sid, "error IN", "-F", "-i", "--json", "--session", session)
    doc = json.loads(out)
    assert code == 0 and [m["offset"] for m in doc["matches"]] == [20000]
    assert doc["truncated"] is False and doc["next_offset"] is None
    code, out, _ = _run(
        capsys,
        "grep",
        sid,
        r"row \d+ ok",
        "-m",
        "2",
        "--offset",
        "10",
        "--json",
        "--session",
        session,
    )
    doc = json.loads(out)
    assert [m["offset"] for m in doc["matches"]] == [10, 11] and doc["next_offset"] == 12


def test_grep_without_a_match_exits_1_like_grep(
    artifact: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    session, sid = artifact
    code, out, err = _run(capsys, "grep", sid, "absent", "--session", session)
    assert code == 1 and err == "" and "0 matching lines" in out


def test_grep_output_is_capped(
    artifact: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    session, sid = artifact
    code, out, _ = _run(
        capsys, "grep", sid, "row", "-m", "100000", "--max-bytes", "2000", "--session", session
    )
    assert code == 0 and len(out.encode()) <= 2000 + 512
    assert "resume: toolswap grep" in out.splitlines()[-1]


def test_read_json_names_the_page(
    artifact: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    session, sid = artifact
    code, out, _ = _run(capsys, "read", sid, "--json", "--max-bytes", "100", "--session", session)
    doc = json.loads(out)
    assert code == 0 and doc["total_lines"] == 40000
    # rows 0-9 take 9 bytes each and row 10 takes 10: exactly 100 bytes
    assert (doc["first_line"], doc["last_line"]) == (0, 10)
    assert (doc["next_offset"], doc["next_byte"]) == (11, 0)
    assert doc["truncated"] is True and len(doc["text"].encode()) <= 100


def test_ls_and_stat_describe_the_artifact(
    artifact: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    session, sid = artifact
    code, out, _ = _run(capsys, "ls", "--json", "--session", session)
    rows = json.loads(out)["artifacts"]
    assert code == 0 and [r["source_id"] for r in rows] == [sid]
    assert rows[0]["line_count"] == 40000 and rows[0]["lease_state"] is None
    code, out, _ = _run(capsys, "stat", sid, "--json", "--session", session)
    assert json.loads(out) == rows[0]
    code, out, _ = _run(capsys, "ls", "--session", session)
    assert out.splitlines()[1].startswith("tool_result_001.txt") and sid in out


@pytest.mark.parametrize(
    "args,needle",
    [
        (["grep", "{sid}", "("], "invalid regular expression"),
        (["grep", "{sid}", "x", "-C", "-1"], "context"),
        (["read", "{sid}", "--max-bytes", "1"], "max_bytes"),
        (["read", "{sid}", "--byte", "999"], "past the end of line 0"),
        (["read", "{wrong}"], "does not match the file"),
        (["stat", "artifact:s:../x:0123456789ab"], "invalid"),
        (["ls", "--session", "{missing}"], "no session folder"),
    ],
)
def test_errors_are_one_line_and_exit_2(
    artifact: tuple[str, str],
    capsys: pytest.CaptureFixture[str],
    tmp_path: pathlib.Path,
    args: list[str],
    needle: str,
) -> None:
    session, sid = artifact
    filled = [
        a.format(sid=sid, wrong=sid[:-12] + "0" * 12, missing=str(tmp_path / "nope")) for a in args
    ]
    if "--session" not in filled:
        filled += ["--session", session]
    code, out, err = _run(capsys, *filled)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err
