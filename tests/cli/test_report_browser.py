"""The report, rendered in a real headless Chromium.

Rules
=====

1. The browser is Debian's ``chromium-headless-shell`` or ``chromium``, run
   with no sandbox, no GPU, no network services, no first-run work and an
   empty profile.  Without one the test skips, with the reason; under
   ``CI=true`` it fails instead (``.ci/run`` installs Chromium).
2. What the page does is read through the DOM: a copy of the page gets a
   small probe script that records errors and writes the rendered sizes into
   the DOM, which ``--dump-dom`` prints.  The page itself ships no script.
3. Screenshots go to ``$TOOLSWAP_TEST_ARTIFACTS`` when set, else to the
   test's temporary folder, and are checked to be real, non-blank images.
"""

from __future__ import annotations

import html as html_module
import json
import os
import re
import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path
from typing import Any

import pytest
from toolswap.spec import variants

from toolswap.report import html, model

BROWSERS = ("chromium-headless-shell", "chromium")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
    "--enable-logging=stderr",
    "--v=0",
)
WIDTH = 1400
TALLEST = 16000  # Chromium's window cannot be much taller

PROBE = """<script>(function () {
  var errors = [];
  window.addEventListener("error", function (e) {
    var t = e.target || {};
    errors.push(String(e.message || t.src || t.href || "resource error"));
  }, true);
  console.error = function () { errors.push(Array.prototype.join.call(arguments, " ")); };
  function box(el) {
    var r = el.getBoundingClientRect();
    return {id: el.id, width: r.width, height: r.height,
            overflow: el.scrollWidth - el.clientWidth};
  }
  window.addEventListener("load", function () {
    var q = function (s) { return Array.prototype.map.call(document.querySelectorAll(s), box); };
    var out = {errors: errors, diagrams: q("svg.diagram"), variants: q("article.variant"),
               broken: q("tr.broken"), crashes: q("tr.crash"), sections: q("main > section"),
               height: document.documentElement.scrollHeight,
               wider: document.documentElement.scrollWidth - document.documentElement.clientWidth};
    var pre = document.createElement("pre");
    pre.id = "probe";
    pre.textContent = JSON.stringify(out);
    document.body.appendChild(pre);
  });
})();</script>"""


def _browser() -> str | None:
    for name in BROWSERS:
        found = shutil.which(name) or (
            f"/usr/bin/{name}" if os.access(f"/usr/bin/{name}", os.X_OK) else None
        )
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def browser() -> str:
    found = _browser()
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("no Chromium under CI=true: .ci/run must install Debian's chromium")
        pytest.skip("no Chromium (chromium-headless-shell or chromium) on this machine")
    return found


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    chosen = os.environ.get("TOOLSWAP_TEST_ARTIFACTS")
    folder = Path(chosen) if chosen else tmp_path_factory.mktemp("report-artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    built = model.build(model.QUICK, "toolswap report --quick")
    path = tmp_path_factory.mktemp("report-page") / "report.html"
    path.write_text(html.render(built), encoding="utf-8")
    return path


def _chromium(browser: str, *args: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="toolswap-chromium-") as profile:
        return subprocess.run(
            [browser, *FLAGS, f"--user-data-dir={profile}", *args],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )


def _console(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


@pytest.fixture(scope="module")
def probe(browser: str, page: Path) -> dict[str, Any]:
    text = page.read_text(encoding="utf-8")
    probed = page.with_name("probed.html")
    probed.write_text(text.replace('<meta charset="utf-8">', '<meta charset="utf-8">' + PROBE, 1))
    done = _chromium(browser, f"--window-size={WIDTH},1000", "--dump-dom", probed.as_uri())
    found = re.search(r'<pre id="probe">(.*?)</pre>', done.stdout, re.S)
    assert found, f"no probe output (exit {done.returncode}): {done.stderr[-2000:]}"
    result: dict[str, Any] = json.loads(html_module.unescape(found.group(1)))
    result["console"] = _console(done.stderr)  # the probe logs nothing itself
    return result


def _png(path: Path) -> tuple[int, int, bytes]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    chunks, at = [], 8
    while at < len(data):
        (size,) = struct.unpack(">I", data[at : at + 4])
        kind = data[at + 4 : at + 8]
        if kind == b"IDAT":
            chunks.append(data[at + 8 : at + 8 + size])
        at += 12 + size
    return width, height, zlib.decompress(b"".join(chunks))


def _screenshot(browser: str, source: Path, out: Path, height: int) -> None:
    done = _chromium(
        browser, f"--window-size={WIDTH},{height}", f"--screenshot={out}", source.as_uri()
    )
    assert out.exists(), f"no screenshot (exit {done.returncode}): {done.stderr[-2000:]}"
    width, tall, pixels = _png(out)
    assert (width, tall) == (WIDTH, height)
    assert len(set(pixels[::97])) > 8, f"{out} looks blank"


def test_no_console_message_and_no_error_while_rendering(probe: dict[str, Any]) -> None:
    assert probe["console"] == []
    assert probe["errors"] == []


def test_every_variant_section_is_rendered(probe: dict[str, Any]) -> None:
    shown = {v["id"] for v in probe["variants"] if v["width"] > 0 and v["height"] > 0}
    assert shown == {f"variant-{name}" for name in variants.names()}
    # each trace ends in its highlighted broken row; the crash row of counter-restart shows
    assert len([b for b in probe["broken"] if b["height"] > 0]) == len(variants.names())
    assert any(c["height"] > 0 for c in probe["crashes"])


def test_every_diagram_has_a_size(probe: dict[str, Any]) -> None:
    sizes = {d["id"]: (d["width"], d["height"]) for d in probe["diagrams"]}
    assert set(sizes) >= {"diagram-lease", "diagram-owner", "diagram-cleanup-plan"}
    assert all(w > 100 and h > 50 for w, h in sizes.values()), sizes


def test_nothing_sticks_out_of_a_variant(probe: dict[str, Any]) -> None:
    assert [v["id"] for v in probe["variants"] if v["overflow"] > 1] == []


def test_the_page_is_no_wider_than_a_1400_pixel_window(probe: dict[str, Any]) -> None:
    assert probe["wider"] <= 0


def test_screenshots(browser: str, page: Path, probe: dict[str, Any], artifacts: Path) -> None:
    _screenshot(browser, page, artifacts / "report.png", min(probe["height"], TALLEST))
    # one trace alone, the way a lecturer would put it on a slide
    focus = "variant-counter-restart"
    alone = page.with_name("one-variant.html")
    style = (
        "<style>body>header,nav.toc,footer,main>section:not(#variants),#variants>h2,#variants>p,"
        f"#variants>table,article.variant:not(#{focus}){{display:none}}</style>"
    )
    alone.write_text(page.read_text(encoding="utf-8").replace("</head>", style + "</head>", 1))
    _screenshot(browser, alone, artifacts / "report-counter-restart.png", 900)
