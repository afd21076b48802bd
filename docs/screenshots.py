"""Terminal screenshots of ``sessions list``, ``replay`` and ``inspect`` for the docs, made from
what the build prints.

Each command runs in a tmux pane 80 and 100 columns wide; the pane's text (``tmux
capture-pane``) is drawn as an SVG, ``docs/screenshots/NAME-WIDTH.svg``. The session shown is
the demo's (run here, with its folder at a fixed place so that its refs are the same every
time); the replay is of ``examples/coding_session.json``.

Run from the checkout: ``python docs/screenshots.py`` (needs tmux). ``tests/test_screenshots.py``
captures the panes again and fails when a screenshot no longer shows what the build prints.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "screenshots"
WIDTHS = (80, 100)
ROWS = 60
"""Pane height: tall enough for every command's output."""
WORK = Path(tempfile.gettempdir()) / "contextfold-screenshots"
"""Where the demo runs: a fixed place, because its path is in the outputs the model reads."""
DONE = "__done__"
SECONDS = 120

CHAR_WIDTH, LINE_HEIGHT, FONT_SIZE, MARGIN = 8.4, 17, 14, 12
"""The SVG's grid: a monospace cell, in pixels."""


@dataclass(frozen=True)
class Shot:
    """One screenshot: its file name's start and the command line, as shown."""

    name: str
    args: tuple[str, ...]

    @property
    def shown(self) -> str:
        return shlex.join(["contextfold", *self.args])


SHOTS = (
    Shot("sessions-list", ("sessions", "list")),
    Shot("replay", ("replay", "examples/coding_session.json", "--window", "6000", "--wide")),
    Shot("inspect", ("inspect", "ses_d0")),
)


@contextmanager
def demo_home() -> Iterator[dict[str, str]]:
    """The environment of a contextfold home holding the demo's session in its default store."""
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    env = {**os.environ, "TMPDIR": str(WORK), "CONTEXTFOLD_HOME": str(WORK / "home")}
    env.pop("COLUMNS", None)
    try:
        _contextfold(env, "demo", "--keep")
        store = WORK / "home" / "data" / "sessions.db"
        store.parent.mkdir(parents=True)
        shutil.copy(WORK / "contextfold-demo-1" / "sessions.db", store)
        yield env
    finally:
        shutil.rmtree(WORK, ignore_errors=True)


def _contextfold(env: Mapping[str, str], *args: str) -> None:
    subprocess.run(
        [sys.executable, "-c", _LAUNCH, *args], env=env, cwd=ROOT, check=True, capture_output=True
    )


_LAUNCH = "import sys\nsys.argv[0] = 'contextfold'\nfrom contextfold.cli import main\nmain()"


def capture(shot: Shot, width: int, env: Mapping[str, str]) -> str:
    """The text of a ``width``-column tmux pane once ``shot`` has run in it."""
    tmux = [shutil.which("tmux") or "tmux", "-L", f"cf-shot-{uuid.uuid4().hex[:12]}"]
    tmux += ["-f", os.devnull]
    command = shlex.join([sys.executable, "-c", _LAUNCH, *shot.args])
    script = f"echo {shlex.quote('$ ' + shot.shown)}; {command}; echo {DONE}; sleep 600"
    session = ["new-session", "-d", "-s", "shot", "-c", str(ROOT), "-x", str(width)]
    try:
        subprocess.run([*tmux, *session, "-y", str(ROWS), "sh", "-c", script], env=env, check=True)
        deadline = time.monotonic() + SECONDS
        while time.monotonic() < deadline:
            pane = subprocess.run(
                [*tmux, "capture-pane", "-p", "-t", "shot"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            if DONE in pane:
                return pane.split(DONE, 1)[0].rstrip() + "\n"
            time.sleep(0.3)
        raise TimeoutError(f"{shot.shown} did not finish within {SECONDS} s")
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True, check=False)


def svg(text: str, width: int) -> str:
    """``text`` as a terminal-looking SVG ``width`` columns wide, one ``<text>`` per line."""
    lines = [line.rstrip() for line in text.rstrip("\n").split("\n")]
    pixels_wide = round(width * CHAR_WIDTH + 2 * MARGIN)
    pixels_high = round(len(lines) * LINE_HEIGHT + 2 * MARGIN)
    rows = [
        f'<text x="{MARGIN}" y="{MARGIN + (n + 1) * LINE_HEIGHT - 4}" xml:space="preserve"'
        f' textLength="{len(line) * CHAR_WIDTH:.1f}">{escape(line)}</text>'
        for n, line in enumerate(lines)
    ]
    return "\n".join(
        [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{pixels_wide}" '
            f'height="{pixels_high}" viewBox="0 0 {pixels_wide} {pixels_high}">',
            '<rect width="100%" height="100%" rx="6" fill="#1e1e1e"/>',
            '<g font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" '
            f'style="white-space:pre" font-size="{FONT_SIZE}" fill="#e6e6e6">',
            *rows,
            "</g>",
            "</svg>",
            "",
        ]
    )


def svg_text(document: str) -> str:
    """The terminal text an SVG made by :func:`svg` shows."""
    import re
    from xml.sax.saxutils import unescape

    return "\n".join(unescape(line) for line in re.findall(r">([^<]*)</text>", document))


def path(shot: Shot, width: int) -> Path:
    return OUT / f"{shot.name}-{width}.svg"


def main() -> None:
    if shutil.which("tmux") is None:
        raise SystemExit("tmux is needed (Debian: apt-get install tmux)")
    OUT.mkdir(parents=True, exist_ok=True)
    with demo_home() as env:
        for shot in SHOTS:
            for width in WIDTHS:
                target = path(shot, width)
                target.write_text(svg(capture(shot, width, env), width), encoding="utf-8")
                print(target.relative_to(ROOT))


if __name__ == "__main__":
    main()
