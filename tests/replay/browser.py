"""Headless Chromium for the report tests: load a page at a given width, measure its layout, take
a screenshot of all of it.

The report holds no script (it must open offline and do nothing but show), so the layout is
measured on a copy with a small probe script added; ``--dump-dom`` prints the page after that
script wrote its findings into an attribute. Tests skip when no Chromium is installed (CI installs
Debian's ``chromium``).
"""

from __future__ import annotations

import html
import io
import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from rich.console import Console
from rich.terminal_theme import MONOKAI
from rich.text import Text

CHROMIUM_SECONDS = 120
"""Longest a headless Chromium run may take before the test fails (a hung browser)."""
MEASURE_HEIGHT = 1_000
"""Window height the layout is measured at (the width is what matters)."""

_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
)

# Writes, into <body data-layout>, the page's scroll width against the viewport, its height, and
# every table that is wider than the box it sits in (it would need a scroll bar of its own).
_PROBE = """<script>
const page = document.documentElement;
const tables = [...document.querySelectorAll("table")].filter(
  (t) => t.scrollWidth > t.parentElement.clientWidth + 0.5
).map((t) => t.dataset.table + ": " + t.scrollWidth + " > " + t.parentElement.clientWidth);
document.body.setAttribute("data-layout", JSON.stringify({
  scrollWidth: page.scrollWidth, innerWidth: window.innerWidth,
  scrollHeight: page.scrollHeight, overflowingTables: tables,
}));
</script>"""


@dataclass(frozen=True, slots=True)
class Layout:
    """What the probe measured on one page at one width."""

    scroll_width: int
    inner_width: int
    scroll_height: int
    overflowing_tables: list[str]


def chromium() -> str:
    """The Chromium executable; the calling test is skipped when there is none."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("Chromium is not installed (Debian: apt-get install chromium)")


def run_chromium(browser: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """One headless run with its own profile folder."""
    return subprocess.run(
        [browser, *_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=CHROMIUM_SECONDS,
        check=False,
    )


def measure(browser: str, page: Path, width: int, work: Path) -> Layout:
    """The layout of ``page`` in a window ``width`` pixels wide."""
    probed = work / f"probed-{width}.html"
    probed.write_text(
        page.read_text(encoding="utf-8").replace("</body>", _PROBE + "</body>"), encoding="utf-8"
    )
    result = run_chromium(
        browser,
        work / "profile",
        f"--window-size={width},{MEASURE_HEIGHT}",
        "--dump-dom",
        probed.resolve().as_uri(),
    )
    assert result.returncode == 0, result.stderr[-2000:]
    found = re.search(r'data-layout="([^"]*)"', result.stdout)
    assert found, "the probe did not run"
    data = json.loads(html.unescape(found.group(1)))
    return Layout(
        data["scrollWidth"], data["innerWidth"], data["scrollHeight"], data["overflowingTables"]
    )


def screenshot(browser: str, page: Path, width: int, height: int, out: Path, work: Path) -> Path:
    """A PNG of ``page`` in a ``width`` x ``height`` window (the page's own height shows it
    whole)."""
    result = run_chromium(
        browser,
        work / "profile",
        f"--screenshot={out}",
        f"--window-size={width},{height}",
        page.resolve().as_uri(),
    )
    assert result.returncode == 0, result.stderr[-2000:]
    data = out.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    return out


TERMINAL_FONT_PX = 14
"""Font size of a terminal rendered to a picture; its cells are about 0.6 of it wide."""


def terminal_png(ansi: str, columns: int, out: Path, work: Path) -> Path:
    """A PNG of a terminal's text (with its colour escapes) ``columns`` cells wide, drawn by
    Chromium from rich's HTML export of it."""
    lines = ansi.rstrip("\n").split("\n")
    console = Console(record=True, width=columns, file=io.StringIO(), color_system="truecolor")
    console.print(Text.from_ansi("\n".join(lines)), soft_wrap=True)
    page = work / "terminal.html"
    page.write_text(
        console.export_html(theme=MONOKAI, inline_styles=True).replace(
            "<body", f'<body style="margin:0;padding:16px;font-size:{TERMINAL_FONT_PX}px"'
        ),
        encoding="utf-8",
    )
    width = round(columns * TERMINAL_FONT_PX * 0.62) + 40
    height = round(len(lines) * TERMINAL_FONT_PX * 1.2) + 48
    return screenshot(chromium(), page, width, height, out, work)
