"""Replay files: one failing case of one check, to run again exactly, or to commit as a test.

A replay file is JSON::

    {"format": "toolswap-conformance-replay", "version": 1,
     "check": "O1.publish-keyed-by-exact-id", "harness": "mypkg.harness:Harness",
     "seed": 1234, "example": "generated", "case": [["txn t", "..."], ...],
     "message": "what the check saw"}

``case`` is every value the check drew, in order (see
:mod:`toolswap.testing.cases`); a check that draws its own cases (``MODEL.*``,
``DEEP.*``) has ``case: null`` and is replayed from its seed.  The file holds
drawn ids and identities and the redacted message, never a secret.

``toolswap conformance HARNESS --replay FILE`` runs the case again; the pytest
plugin collects every ``toolswap-replay-*.json`` file as one test, so a
committed replay file is a regression test.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

import attrs

from ..errors import UsageError

__all__ = ["FILE_PREFIX", "Replay", "load_replay", "write_replay"]

FORMAT = "toolswap-conformance-replay"
VERSION = 1
FILE_PREFIX = "toolswap-replay-"


@attrs.frozen(kw_only=True)
class Replay:
    check: str
    harness: str
    seed: int | None
    example: str
    case: list[list[Any]] | None
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "check": self.check,
            "harness": self.harness,
            "seed": self.seed,
            "example": self.example,
            "case": self.case,
            "message": self.message,
        }

    def file_name(self) -> str:
        body = json.dumps([self.check, self.case, self.seed], sort_keys=True)
        digest = hashlib.sha256(body.encode()).hexdigest()[:10]
        return f"{FILE_PREFIX}{self.check}-{digest}.json"


def write_replay(folder: str, replay: Replay) -> str:
    """Write ``replay`` into ``folder`` (made if missing); the file's path."""
    try:
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, replay.file_name())
        with open(path, "w", encoding="utf-8") as out:
            json.dump(replay.to_dict(), out, indent=1, ensure_ascii=True)
            out.write("\n")
    except OSError as exc:
        raise UsageError(f"cannot write a replay file ({exc.strerror})") from exc
    return path


def load_replay(path: str) -> Replay:
    """Read a replay file; anything malformed is one :class:`UsageError` line."""
    name = os.path.basename(path)
    try:
        with open(path, encoding="utf-8") as source:
            data = json.load(source)
    except OSError as exc:
        raise UsageError(f"cannot read the replay file {name!r} ({exc.strerror})") from exc
    except ValueError as exc:
        raise UsageError(f"the replay file {name!r} is not JSON ({exc})") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise UsageError(f"{name!r} is not a toolswap conformance replay file")
    if data.get("version") != VERSION:
        raise UsageError(
            f"the replay file {name!r} has version {data.get('version')!r}; "
            f"this kit reads version {VERSION}"
        )
    case = data.get("case")
    seed = data.get("seed")
    if not isinstance(data.get("check"), str) or not isinstance(data.get("harness"), str):
        raise UsageError(f"the replay file {name!r} names no check or no harness")
    if case is not None and not (
        isinstance(case, list) and all(isinstance(i, list) and len(i) == 2 for i in case)
    ):
        raise UsageError(f"the replay file {name!r} has a malformed case")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise UsageError(f"the replay file {name!r} has a malformed seed")
    return Replay(
        check=data["check"],
        harness=data["harness"],
        seed=seed,
        example=str(data.get("example", "generated")),
        case=case,
        message=str(data.get("message", "")),
    )
