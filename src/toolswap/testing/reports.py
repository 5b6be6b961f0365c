"""A conformance report as a terminal table, JSON, JUnit XML or Markdown.

All four carry the same facts: for each check its id, the promise sentence,
the verdict, the time and the message (already redacted of the harness's
secrets); and for the run the harness, the counts, the repetitions, the time
and the versions, so that a result can be cited and reproduced.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from .runner import ConformanceReport

__all__ = ["render_table", "render_json", "render_junit", "render_markdown"]

_MARK = {"pass": "PASS", "fail": "FAIL", "skip": "SKIP", "xfail": "XFAIL", "xpass": "XPASS"}


def _summary(report: ConformanceReport) -> str:
    counts = report.counts()
    shown = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    verdict = "conforms" if report.passed else "DOES NOT CONFORM"
    missing = (
        "" if report.complete else f"; {(report.chosen or 0) - len(report.results)} did not run"
    )
    seed = "" if report.seed is None else f"; seed {report.seed}"
    repeat = f"; each check {report.repeat} times" if report.repeat > 1 else ""
    return f"{report.harness}: {verdict} ({shown}{missing}{repeat}; {report.seconds:.1f} s{seed})"


def render_table(report: ConformanceReport, *, promises: bool = True) -> str:
    """One line per check (verdict, time, id, promise), the message under failures and skips."""
    width = max((len(r.check_id) for r in report.results), default=10)
    lines = [f"{'result':<6} {'time':>7}  {'check':<{width}}  promise"]
    for r in report.results:
        promise = r.promise if promises else ""
        lines.append(f"{_MARK[r.outcome]:<6} {r.seconds:6.2f}s  {r.check_id:<{width}}  {promise}")
        if r.outcome != "pass":
            for line in r.message.splitlines() or [""]:
                lines.append(f"{'':>16}{line}")
    lines.append(_summary(report))
    return "\n".join(lines)


def render_json(report: ConformanceReport) -> str:
    return json.dumps(report.to_dict(), indent=2, sort_keys=True)


def render_junit(report: ConformanceReport) -> str:
    """JUnit XML: one testcase per check; skip and xfail are skipped, fail and xpass failures."""
    counts = report.counts()
    suites = ET.Element("testsuites")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name="toolswap-conformance",
        tests=str(len(report.results)),
        failures=str(counts["fail"] + counts["xpass"]),
        errors="0",
        skipped=str(counts["skip"] + counts["xfail"]),
        time=f"{report.seconds:.3f}",
    )
    properties = ET.SubElement(suite, "properties")
    for name, value in (("harness", report.harness), ("repeat", str(report.repeat))) + tuple(
        (f"version.{k}", v) for k, v in sorted(report.versions.items())
    ):
        ET.SubElement(properties, "property", name=name, value=value)
    for r in report.results:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"toolswap.conformance.{r.check_id.split('.', 1)[0]}",
            name=r.check_id,
            time=f"{r.seconds:.3f}",
        )
        if r.outcome in ("fail", "xpass"):
            failure = ET.SubElement(case, "failure", message=r.message.splitlines()[0][:500])
            failure.text = f"{r.promise}\n{r.message}"
        elif r.outcome in ("skip", "xfail"):
            ET.SubElement(case, "skipped", message=f"{r.outcome}: {r.message}"[:500])
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "<br>")


def render_markdown(report: ConformanceReport) -> str:
    versions = ", ".join(f"{k} {v}" for k, v in sorted(report.versions.items()))
    lines = [
        "# Owner conformance report",
        "",
        f"- harness: `{report.harness}`",
        f"- verdict: {'conforms' if report.passed else '**does not conform**'}",
        "- counts: " + ", ".join(f"{n} {v}" for v, n in report.counts().items()),
        f"- repetitions per check: {report.repeat}; time: {report.seconds:.1f} s; {versions}",
        "",
        "| check | promise | result | time (s) | message |",
        "|---|---|---|---:|---|",
    ]
    for r in report.results:
        lines.append(
            f"| `{r.check_id}` | {_cell(r.promise)} | {_MARK[r.outcome]} | "
            f"{r.seconds:.2f} | {_cell(r.message)} |"
        )
    return "\n".join(lines) + "\n"
