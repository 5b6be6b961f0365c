"""The MCP server's tools as plain synchronous code: arguments in, bounded results out.

No MCP SDK here (:mod:`toolswap.mcp_server` wraps this in the SDK), so the
read workers (:mod:`toolswap.mcp_workers`) import it in a fraction of the
time the SDK takes, and tests can call the tools directly.

Rules
=====

1. **No result is larger than the page cap** (``page_bytes``).  The cap
   counts what a client may show the model: the UTF-8 bytes of the text
   *and* of the structured content and the resource link (compact JSON).  Each part is sized to
   fit: the text body leaves :data:`RESERVE_BYTES` for the tool's own lines
   and :data:`STRUCTURED_RESERVE_BYTES` for the structured content; the
   pointer's head and tail windows are derived from the cap the same way; a
   listing shows as many rows as fit and names the next call.  :func:`fit`
   is the guard behind all that: it cuts whatever would still pass the cap,
   saying so.
2. **Every result has structured content** matching the tool's output schema
   (:mod:`toolswap.mcp_schemas`): the facts of the text, never the text.
3. **Errors are one line**, ``<kind> error: <message>`` with kind usage,
   state or environment, as the CLI splits blame, or ``expired handle: ...``
   / ``unknown handle: ...`` for a source id whose artifact is gone.  At most
   :data:`MAX_ERROR_BYTES`; a caller's value is echoed clipped
   (:func:`toolswap.domain.clipped_repr`).  An absolute path is shown only
   if it is inside the session or the caller gave it in this call's
   arguments (the user's own program is no secret to the user); any other is
   ``<outside the session>``, since error texts end up in contexts and logs.
   A defect of toolswap is ``internal error: <type>``, the detail on stderr.
4. **Every read goes through the externalizer**, so each one verifies the
   artifact (ownership, type, digest) and a hostile source id or resource URI
   never becomes a path (S7).
5. **Reads are named as MCP calls.**  The pointer, the pages and grep name
   their next read as ``read_artifact(source_id="...", offset=N)`` (or the
   next resource URI), never the CLI's ``toolswap read``, and the first line
   of ``run_command`` ends with the source id, so nothing is glued to it.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from . import mcp_args as check
from . import mcp_render as render
from .command import (
    CommandResult,
    CommandStartError,
    OutputMeter,
    Stop,
    check_session,
    run_command,
)
from .domain import artifact_number, clipped_repr
from .errors import (
    ArtifactNotOwnedError,
    CorruptStateError,
    EnvironmentFailure,
    ToolswapError,
    UsageError,
)
from .externalizer import DEFAULT_THRESHOLD_BYTES, THRESHOLD_ENV, ToolResultExternalizer
from .mcp_args import MAX_ERROR_BYTES
from .mcp_handles import artifact_uri, deleted_up_to, lifetime_text, parse_artifact_uri
from .pointer import read_hint
from .reading import (
    DEFAULT_PAGE_BYTES,
    DEFAULT_PAGE_LINES,
    MAX_TRAILER_BYTES,
    MIN_PAGE_BYTES,
    ArtifactInfo,
    render_listing,
    render_page,
    validate_page_bytes,
)

__all__ = [
    "ServerSettings",
    "Toolbox",
    "ToolOutput",
    "ToolFailure",
    "fit",
    "bounded",
    "result_bytes",
    "artifact_uri",
    "parse_artifact_uri",
    "lifetime_text",
    "RESERVE_BYTES",
    "STRUCTURED_RESERVE_BYTES",
    "POINTER_RESERVE_BYTES",
    "MIN_SERVER_PAGE_BYTES",
    "MAX_ERROR_BYTES",
    "DEFAULT_GC_TTL_SECONDS",
    "RUN_TOOL_NAME",
    "READ_TOOL_NAMES",
    "TOOL_NAMES",
]

log = logging.getLogger("toolswap.mcp")

#: Bytes each tool keeps for its own lines (status line, trailer) around the body.
RESERVE_BYTES = 1024
#: Bytes each tool keeps for its structured content (rule 1).
STRUCTURED_RESERVE_BYTES = 3 * 1024
#: Bytes of the pointer that are not head or tail preview: header, marker, notable lines.
POINTER_RESERVE_BYTES = 6 * 1024
#: The smallest cap that leaves every part of a result some room.
MIN_SERVER_PAGE_BYTES = 12 * 1024
#: What the cleanup keeps an unleased artifact by default (``toolswap gc --ttl``'s default).
DEFAULT_GC_TTL_SECONDS = 86400.0
DEFAULT_TIMEOUT_SECONDS = 300.0
DEFAULT_MAX_TIMEOUT_SECONDS = 3600.0
DEFAULT_READ_TIMEOUT_SECONDS = 60.0
DEFAULT_READ_WORKERS = 2
DEFAULT_MAX_COMMANDS = 4
#: Most resources in one ``resources/list`` page (fewer when the cap says so).
RESOURCE_PAGE_SIZE = 50

RUN_TOOL_NAME = "run_command"
READ_TOOL_NAMES = ("read_artifact", "grep_artifact", "list_artifacts", "stat_artifact")
TOOL_NAMES = (RUN_TOOL_NAME, *READ_TOOL_NAMES)

_CUT_NOTE = "\n[toolswap] result cut at the page cap of {cap} bytes\n"
_ARTIFACT_NAME = re.compile(r"tool_result_[0-9]{3,}\.txt")


@attrs.frozen(kw_only=True)
class ServerSettings:
    """Options of one server; :meth:`validate` refuses what cannot work."""

    session_dir: str
    page_bytes: int = DEFAULT_PAGE_BYTES
    threshold_bytes: int | None = None  # default: TOOL_RESULT_THRESHOLD_KB or 50 KiB, capped
    timeout: float = DEFAULT_TIMEOUT_SECONDS
    max_timeout: float = DEFAULT_MAX_TIMEOUT_SECONDS
    cwd: str | None = None  # where commands run by default (the server's folder)
    gc_ttl_seconds: float = DEFAULT_GC_TTL_SECONDS  # stated in the descriptions (handles)
    read_workers: int = DEFAULT_READ_WORKERS  # read calls at once, each in its own process
    read_timeout: float = DEFAULT_READ_TIMEOUT_SECONDS  # a read call longer than this is stopped
    max_commands: int = DEFAULT_MAX_COMMANDS  # run_command calls at once

    def validate(self) -> ServerSettings:
        validate_page_bytes(self.page_bytes, "page_bytes")
        if self.page_bytes < MIN_SERVER_PAGE_BYTES:
            raise UsageError(
                f"page_bytes must be at least {MIN_SERVER_PAGE_BYTES} for the MCP server "
                f"(a pointer needs room), got {self.page_bytes}"
            )
        for name in ("timeout", "max_timeout", "read_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not (isinstance(value, int | float) and 0 < value < 1e9):
                raise UsageError(f"{name} must be a positive number of seconds, got {value!r}")
        if self.timeout > self.max_timeout:
            raise UsageError(
                f"timeout {self.timeout:g} s is above max_timeout {self.max_timeout:g} s"
            )
        ttl = self.gc_ttl_seconds
        if isinstance(ttl, bool) or not (isinstance(ttl, int | float) and 0 <= ttl < 1e12):
            raise UsageError(f"gc_ttl_seconds must be a number of seconds >= 0, got {ttl!r}")
        for name, most in (("read_workers", 16), ("max_commands", 64)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
                raise UsageError(f"{name} must be an integer from 1 to {most}, got {value!r}")
        if self.threshold_bytes is not None and (
            isinstance(self.threshold_bytes, bool)
            or not isinstance(self.threshold_bytes, int)
            or self.threshold_bytes < 1
        ):
            raise UsageError(
                f"threshold_bytes must be a positive integer, got {self.threshold_bytes!r}"
            )
        return self

    @property
    def inline_bytes(self) -> int:
        """Output up to this size comes back whole; above it, a pointer (rule 1)."""
        return self.page_bytes - RESERVE_BYTES - STRUCTURED_RESERVE_BYTES

    @property
    def body_bytes(self) -> int:
        """The ``max_bytes`` a page or a grep may use, leaving room for its trailer."""
        return self.page_bytes - RESERVE_BYTES - MAX_TRAILER_BYTES - STRUCTURED_RESERVE_BYTES

    @property
    def preview_bytes(self) -> tuple[int, int]:
        """(head, tail) windows of the pointer: a fifth and four fifths of what is left."""
        room = self.page_bytes - RESERVE_BYTES - POINTER_RESERVE_BYTES - STRUCTURED_RESERVE_BYTES
        head = max(64, room // 5)
        return head, max(64, room - head)

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ServerSettings:
        return cls(**dict(data)).validate()


@attrs.frozen(kw_only=True)
class ToolOutput:
    """One successful result: the text the model reads, its facts, and a link to the artifact.

    ``link`` is the ``resource_link`` content block (its fields, by their
    Python names), set when a command's output became an artifact.
    """

    text: str
    structured: dict[str, Any]
    link: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "structured": self.structured, "link": self.link}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ToolOutput:
        return cls(text=data["text"], structured=data["structured"], link=data.get("link"))


class ToolFailure(Exception):
    """A call that failed; ``str()`` is the one line the model sees.

    ``kind`` is usage, state, environment, expired, unknown or internal: the
    server maps it to a protocol error code where it needs one (resources).
    """

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


def result_bytes(
    text: str, structured: Mapping[str, Any] | None, link: Mapping[str, Any] | None = None
) -> int:
    """What rule 1 counts: the text's UTF-8 bytes plus the compact JSON of the rest."""
    size = len(text.encode("utf-8"))
    for part in (structured, link):
        if part is not None:
            size += len(_compact(part).encode("utf-8"))
    return size


def _compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def bounded(text: str, cap: int, *, room: int | None = None) -> str:
    """``text`` if its UTF-8 size is within ``room`` (default ``cap``), else cut on a
    character boundary to fit it, saying so (the note names the page cap)."""
    limit = cap if room is None else room
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    note = _CUT_NOTE.format(cap=cap)
    keep = max(0, limit - len(note.encode("utf-8")))
    return data[:keep].decode("utf-8", "ignore") + note


def fit(output: ToolOutput, cap: int) -> ToolOutput:
    """The guard of rule 1: ``output`` within ``cap``, cutting the text if it must.

    The structured content and the link are small by construction (each tool
    keeps them within :data:`STRUCTURED_RESERVE_BYTES`); if they still leave
    the text no room, the notable lines lose their text first.
    """
    structured = output.structured
    if result_bytes("", structured, output.link) > STRUCTURED_RESERVE_BYTES and isinstance(
        structured.get("notable"), list
    ):
        notable = [{**row, "text": "", "clipped": True} for row in structured["notable"]]
        structured = {**structured, "notable": notable}
    room = cap - result_bytes("", structured, output.link)
    text = bounded(output.text, cap, room=max(room, 0))
    return attrs.evolve(output, text=text, structured=structured)


# -- the tools -------------------------------------------------------------------


class Toolbox:
    """The tools, as synchronous methods over one session; each returns a :class:`ToolOutput`."""

    def __init__(self, settings: ServerSettings, *, environ: Mapping[str, str] | None = None):
        self.settings = settings.validate()
        env = os.environ if environ is None else environ
        self.environ = dict(env)  # what a read worker builds its own Toolbox from
        threshold = settings.threshold_bytes
        if threshold is None:
            raw = env.get(THRESHOLD_ENV)
            # Reuse the externalizer's own parsing (and its errors) for the variable.
            threshold = (
                ToolResultExternalizer(
                    settings.session_dir, environ={THRESHOLD_ENV: raw}
                ).threshold_bytes
                if raw is not None
                else DEFAULT_THRESHOLD_BYTES
            )
        head, tail = settings.preview_bytes
        self.externalizer = ToolResultExternalizer(
            settings.session_dir,
            threshold_bytes=min(threshold, settings.inline_bytes),
            head_bytes=head,
            tail_bytes=tail,
            page_bytes=settings.body_bytes,
            environ=env,
        )
        self.root = self.externalizer.paths.root
        check_session(self.externalizer, tool=RUN_TOOL_NAME)

    # -- run_command -----------------------------------------------------------------

    def run_command(
        self,
        args: Mapping[str, Any],
        stop: Stop | None = None,
        meter: OutputMeter | None = None,
    ) -> ToolOutput:
        check.only(args, {"command", "argv", "cwd", "timeout_seconds", "summary"})
        command = args.get("command")
        argv = args.get("argv")
        if (command is None) == (argv is None):
            raise UsageError("give exactly one of command (a shell string) or argv (a list)")
        if command is not None and not isinstance(command, str):
            raise UsageError("command must be a string (run by /bin/sh -c)")
        if argv is not None and (
            not isinstance(argv, list) or not all(isinstance(a, str) for a in argv)
        ):
            raise UsageError("argv must be a list of strings")
        cwd = check.optional_str(args, "cwd")
        if cwd is not None:
            cwd = os.path.join(self.settings.cwd or os.getcwd(), cwd)
        else:
            cwd = self.settings.cwd
        timeout = args.get("timeout_seconds", self.settings.timeout)
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not 0 < timeout <= self.settings.max_timeout
        ):
            raise UsageError(
                f"timeout_seconds must be a number in (0, {self.settings.max_timeout:g}], "
                f"got {clipped_repr(timeout)}"
            )
        summary = check.optional_str(args, "summary")
        check_session(self.externalizer, tool=RUN_TOOL_NAME, summary=summary)
        what: str | list[str] = command if isinstance(command, str) else list(argv or [])
        counted = meter if meter is not None else OutputMeter()
        result = run_command(
            self.externalizer,
            what,
            cwd=cwd,
            timeout=float(timeout),
            tool=RUN_TOOL_NAME,
            summary=summary,
            stop=stop,
            stdin_devnull=True,
            meter=counted,
        )
        return self._command_output(result, counted)

    def _command_output(self, result: CommandResult, meter: OutputMeter) -> ToolOutput:
        artifact = result.output.artifact
        reason = None
        if result.timed_out:
            reason = "timed out, the command was stopped"
        elif result.interrupted:
            reason = f"stopped ({result.interrupted_by})"
        facts: dict[str, Any] = {
            "exit_status": result.exit_status,
            "complete": result.complete,
            "incomplete_reason": reason,
            "externalized": artifact is not None,
            "source_id": None,
            "resource_uri": None,
            "sha256": None,
            "bytes": meter.bytes,
            "lines": meter.lines,
            "next_offset": None,
            "next_byte": 0,
            "notable": [],
            "lease_state": None,  # a new artifact: no lease can name it yet
        }
        if artifact is None:
            return ToolOutput(
                text=render.status_line(result) + result.output.context_text, structured=facts
            )
        source_id = artifact.source.source_id
        pointer, next_read = self._mcp_pointer(result.output.context_text, source_id)
        uri = artifact_uri(source_id)
        facts.update(
            source_id=source_id,
            resource_uri=uri,
            sha256=artifact.content_sha256,
            bytes=artifact.size_bytes,
            lines=artifact.line_count,
            notable=render.notable_rows(pointer),
        )
        if next_read is not None:
            facts.update(next_offset=next_read[0], next_byte=next_read[1])
        link = {  # the resource_link block as the client gets it (rule 1 counts it)
            "type": "resource_link",
            "uri": uri,
            "name": os.path.basename(artifact.path),
            "mime_type": "text/plain",
            "size": artifact.size_bytes,
        }
        return ToolOutput(text=render.status_line(result) + pointer, structured=facts, link=link)

    def _mcp_pointer(self, pointer: str, source_id: str) -> tuple[str, tuple[int, int] | None]:
        """The pointer with its reads named as MCP calls (rule 5), and its first omitted read."""
        pointer = pointer.replace(
            "as `toolswap read --offset` takes them", "as read_artifact's offset takes them", 1
        )
        found = re.search(
            rf"`toolswap read {re.escape(source_id)} --offset (\d+)(?: --byte (\d+))?`", pointer
        )
        if found is None:
            return pointer, None
        offset, byte = int(found.group(1)), int(found.group(2) or 0)
        page_bytes = self.settings.body_bytes
        cli = read_hint(source_id, offset, byte, page_bytes)
        mcp = read_hint(source_id, offset, byte, page_bytes, form="mcp")
        return pointer.replace(cli, mcp, 1), (offset, byte)

    # -- the read tools ----------------------------------------------------------------

    def read_artifact(self, args: Mapping[str, Any]) -> ToolOutput:
        check.only(args, {"source_id", "offset", "limit", "start_byte", "max_bytes"})
        page = self.externalizer.read_page(
            check.source_id(args),
            check.integer(args, "offset", 0, minimum=0),
            check.integer(args, "limit", DEFAULT_PAGE_LINES, minimum=1),
            max_bytes=self._max_bytes(args),
            start_byte=check.integer(args, "start_byte", 0, minimum=0),
        )
        text = render.rename_next_read(page, render_page(page), render.read_call(page))
        return ToolOutput(text=text, structured=render.page_facts(page))

    def grep_artifact(self, args: Mapping[str, Any]) -> ToolOutput:
        check.only(
            args,
            {"source_id", "pattern", "fixed", "ignore_case", "context", "max_matches", "offset"},
        )
        pattern = args.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise UsageError("pattern must be a non-empty string")
        result = self.externalizer.grep_artifact(
            check.source_id(args),
            pattern,
            fixed=check.boolean(args, "fixed"),
            ignore_case=check.boolean(args, "ignore_case"),
            context=check.integer(args, "context", 0, minimum=0),
            max_matches=check.integer(args, "max_matches", 100, minimum=1),
            max_bytes=self.settings.body_bytes,
            offset=check.integer(args, "offset", 0, minimum=0),
        )
        return ToolOutput(text=render.mcp_grep_text(result), structured=render.grep_facts(result))

    def list_artifacts(self, args: Mapping[str, Any]) -> ToolOutput:
        check.only(args, {"offset", "limit"})
        offset = check.integer(args, "offset", 0, minimum=0)
        limit = check.integer(args, "limit", 50, minimum=1)
        infos = self._artifacts()
        window = infos[offset : offset + limit]
        budget = self.settings.page_bytes - RESERVE_BYTES

        def listing(count: int) -> tuple[str, dict[str, Any]]:
            shown = window[:count]
            rest = len(infos) - offset - count
            facts = {
                "total": len(infos),
                "offset": offset,
                "count": count,
                "next_offset": offset + count if rest > 0 else None,
                "artifacts": [self._artifact_facts(info) for info in shown],
            }
            return render_listing(shown), facts

        # The largest count that fits: sizes grow with the count (rule 1).
        low, high = 0, len(window)
        while low < high:
            middle = (low + high + 1) // 2
            if result_bytes(*listing(middle)) <= budget:
                low = middle
            else:
                high = middle - 1
        text, facts = listing(low)
        rest = len(infos) - offset - low
        if rest > 0:
            text += (
                f"[toolswap] {rest} more artifact{'s' if rest != 1 else ''}; "
                f"next: list_artifacts(offset={offset + low})\n"
            )
        return ToolOutput(text=text, structured=facts)

    def stat_artifact(self, args: Mapping[str, Any]) -> ToolOutput:
        check.only(args, {"source_id"})
        facts = self._artifact_facts(self.externalizer.stat_artifact(check.source_id(args)))
        return ToolOutput(text=json.dumps(facts, indent=2, sort_keys=True) + "\n", structured=facts)

    def _artifacts(self) -> list[ArtifactInfo]:
        return sorted(self.externalizer.list_artifacts(), key=lambda i: artifact_number(i.name))

    def _artifact_facts(self, info: ArtifactInfo) -> dict[str, Any]:
        facts = info.to_json()
        facts["resource_uri"] = artifact_uri(info.source_id)
        return facts

    def _max_bytes(self, args: Mapping[str, Any]) -> int:
        body = self.settings.body_bytes
        wanted = check.integer(args, "max_bytes", body, minimum=MIN_PAGE_BYTES)
        return min(wanted, body)  # a larger request is lowered to the cap (rule 1)

    # -- resources -------------------------------------------------------------------

    def list_resources(self, cursor: str | None) -> dict[str, Any]:
        """One page of ``resources/list``: artifacts after ``cursor`` (an artifact number)."""
        after = 0
        if cursor is not None:
            if not (isinstance(cursor, str) and cursor.isdigit() and len(cursor) <= 18):
                raise UsageError(f"invalid cursor {clipped_repr(cursor)}: use a nextCursor given")
            after = int(cursor)
        infos = [i for i in self._artifacts() if artifact_number(i.name) > after]
        budget = self.settings.page_bytes - RESERVE_BYTES
        resources: list[dict[str, Any]] = []
        used = 0
        for info in infos[:RESOURCE_PAGE_SIZE]:
            entry = render.resource_entry(info)
            used += len(_compact(entry).encode("utf-8"))
            if used > budget:
                break
            resources.append(entry)
        more = len(resources) < len(infos)
        last = artifact_number(resources[-1]["name"]) if resources else after
        return {"resources": resources, "next_cursor": str(last) if more else None}

    def read_resource(self, uri: str) -> ToolOutput:
        """One bounded page of an artifact resource; ``structured`` names the next page's URI."""
        source_id, offset, byte = parse_artifact_uri(uri)
        page = self.externalizer.read_page(
            source_id,
            offset,
            DEFAULT_PAGE_LINES,
            max_bytes=self.settings.body_bytes,
            start_byte=byte,
        )
        following = (
            None
            if page.next_offset is None
            else artifact_uri(source_id, page.next_offset, page.next_byte)
        )
        text = render_page(page)
        if following is not None:
            text = render.rename_next_read(page, text, f"resources/read {following}")
        return ToolOutput(text=text, structured={"uri": uri, "next_uri": following})

    # -- dispatch ----------------------------------------------------------------

    def call(
        self,
        name: str,
        args: Mapping[str, Any] | None,
        stop: Stop | None = None,
        meter: OutputMeter | None = None,
    ) -> ToolOutput:
        """Run tool ``name``; the result is within the cap; failures raise :class:`ToolFailure`."""
        arguments = {} if args is None else args

        def run() -> ToolOutput:
            if name == RUN_TOOL_NAME:
                return self.run_command(arguments, stop, meter)
            method = _READ_TOOLS.get(name)
            if method is None:
                known = ", ".join(TOOL_NAMES)
                raise UsageError(f"unknown tool {clipped_repr(name)}; the tools are {known}")
            return method(self, arguments)

        output = self.guarded(run, name, arguments)
        return fit(output, self.settings.page_bytes)

    def resource(self, operation: str, value: str | None) -> Any:
        """``resources/list`` (``value``: the cursor) or ``resources/read`` (``value``: the URI)."""
        if operation == "list":
            cursor = {"cursor": value}
            return self.guarded(lambda: self.list_resources(value), "resources/list", cursor)
        uri = {"uri": value}  # the caller's own URI is echoed as given (rule 3)
        output = self.guarded(lambda: self.read_resource(str(value)), "resources/read", uri)
        return fit(output, self.settings.page_bytes)

    def guarded(self, action: Callable[[], Any], what: str, arguments: Mapping[str, Any]) -> Any:
        """``action()``, its failures as one-line :class:`ToolFailure` s (rule 3)."""
        try:
            return action()
        except (ToolswapError, OSError) as exc:
            kind, message = self.describe(exc, arguments)
            raise ToolFailure(message, kind) from None
        except Exception as exc:  # a defect: the model gets one line, the log gets the rest
            log.exception("%s failed", what)
            raise ToolFailure(f"internal error: {type(exc).__name__}", "internal") from None

    def describe(
        self, exc: BaseException, arguments: Mapping[str, Any] | None = None
    ) -> tuple[str, str]:
        """(kind, the one line) for a failure; see rule 3."""
        expired = self._describe_missing(exc)
        if expired is not None:
            return expired
        if isinstance(exc, CommandStartError | UsageError):
            kind = "usage"
        elif isinstance(exc, CorruptStateError):
            kind = "state"
        elif isinstance(exc, EnvironmentFailure | OSError):
            kind = "environment"
        else:  # pragma: no cover - every ToolswapError is one of the above
            kind = "toolswap"
        message = " ".join(str(exc).split()) or type(exc).__name__
        shown = check.hide_outside_paths(message, self.root, check.strings(arguments or {}))
        return kind, check.clip_error(f"{kind} error: {shown}")

    def _describe_missing(self, exc: BaseException) -> tuple[str, str] | None:
        """An artifact that is not there: expired (cleanup deleted it) or unknown."""
        if not (
            isinstance(exc, ArtifactNotOwnedError) and isinstance(exc.__cause__, FileNotFoundError)
        ):
            return None
        found = _ARTIFACT_NAME.search(str(exc))
        if found is None:
            return None
        name = found.group(0)
        number = artifact_number(name)
        if number <= deleted_up_to(self.root):
            return "expired", check.clip_error(
                f"expired handle: {name} was deleted by the session's cleanup; "
                + lifetime_text(self.settings.gc_ttl_seconds)
            )
        return "unknown", check.clip_error(
            f"unknown handle: {name} does not exist in this session (never written, or "
            "removed by something other than toolswap's cleanup)"
        )


_READ_TOOLS: dict[str, Callable[[Toolbox, Mapping[str, Any]], ToolOutput]] = {
    "read_artifact": Toolbox.read_artifact,
    "grep_artifact": Toolbox.grep_artifact,
    "list_artifacts": Toolbox.list_artifacts,
    "stat_artifact": Toolbox.stat_artifact,
}
