"""``contextfold replay`` in a real terminal 80 or 100 columns wide (a tmux pane): the table
fits, no number, label or file name is cut, and ``--wide`` loses no column.

Set ``CONTEXTFOLD_SCREENSHOTS`` to a folder to keep a picture of the pane (the docs' screenshots
are made by ``docs/screenshots.py``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.text import Text

from tests.conftest import shared_path
from tests.replay.browser import terminal_png
from tests.replay.conftest import EXAMPLE, coding_session

PANE_COLUMNS, PANE_ROWS = 100, 60
"""The pane the command runs in: as wide as the table must fit, tall enough for all of it."""
REPLAY_SECONDS = 120
"""Longest the replay may take in the pane before the test fails (the pane is then ended)."""
DONE = "__replay finished__"
"""Printed after the command, so that the test knows the pane holds all of its output."""
_FACTS = r"(\d+/\d+( \(\+\d+ ref\))?|—)"
_PRESET_ROW = re.compile(
    rf"^  [a-z-]+ +[\d,]+ +[\d,]+ +[\d,]+ / [\d,]+ +[\d,]+ +[\d.]+% +{_FACTS}$"
)
"""A preset's row: peak, over window, compactions / masks, tokens sent, prefix reuse, facts."""
_RECORDED_ROW = re.compile(rf"^  [A-Z][\w -]+ +\d+ / — +[\d,]+ +[\d.]+% +{_FACTS}$")
"""The original agent's recorded row (no peak or over-window figure of its own)."""


@pytest.fixture
def tmux() -> Iterator[list[str]]:
    """``tmux`` on a server of this test's own (its own socket, no user configuration), ended
    after the test."""
    executable = shutil.which("tmux")
    if executable is None:
        pytest.skip("tmux is not installed (Debian: apt-get install tmux)")
    command = [executable, "-L", f"contextfold-test-{uuid.uuid4().hex[:12]}", "-f", os.devnull]
    yield command
    subprocess.run([*command, "kill-server"], capture_output=True, check=False)


def _in_pane(
    tmux: list[str], folder: Path, files: list[Path], *options: str, columns: int = PANE_COLUMNS
) -> str:
    """The pane's text (with its colour escapes) once ``contextfold replay FILES OPTIONS`` has
    run in it, from ``folder`` where the files are linked under their own names (so that the
    command and the table show those names, as a user's would)."""
    for file in files:
        (folder / file.name).symlink_to(file)
    args = ["replay", *(f.name for f in files), *options]
    shown = shlex.join(["contextfold", *args])
    command = shlex.join([sys.executable, "-c", "from contextfold.cli import main; main()", *args])
    script = f"echo {shlex.quote('$ ' + shown)}; {command} 2>/dev/null; echo {DONE}; sleep 600"
    session = ["new-session", "-d", "-s", "replay", "-c", str(folder), *_size(columns)]
    subprocess.run(
        [*tmux, *session, "sh", "-c", script],
        check=True,
        env=os.environ,
    )
    deadline = time.monotonic() + REPLAY_SECONDS
    while time.monotonic() < deadline:
        pane = subprocess.run(
            [*tmux, "capture-pane", "-p", "-e", "-t", "replay"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        if DONE in pane:
            return pane.split(DONE, 1)[0]
        time.sleep(0.5)
    pytest.fail(f"the replay did not finish within {REPLAY_SECONDS} s")


def _size(columns: int = PANE_COLUMNS) -> list[str]:
    return ["-x", str(columns), "-y", str(PANE_ROWS)]


def _plain(ansi: str) -> str:
    return Text.from_ansi(ansi).plain


def _check_table(ansi: str, rows: int, name: str, work: Path) -> None:
    text = _plain(ansi)
    assert "…" not in text  # no cell, number or header, was cut
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= PANE_COLUMNS
    # Every row of figures is whole, on one line: from its name to the facts kept.
    assert sum(1 for line in lines if _PRESET_ROW.match(line) or _RECORDED_ROW.match(line)) == rows
    folder = os.environ.get("CONTEXTFOLD_SCREENSHOTS")
    if folder:
        terminal_png(ansi, PANE_COLUMNS, Path(folder) / f"{name}.png", work)


def test_the_table_fits_a_100_column_pane(tmux: list[str], tmp_path: Path) -> None:
    generated = (
        tmp_path / "made" / ("a-generated-session-with-a-long-file-name-" + "z" * 30 + ".json")
    )
    generated.parent.mkdir()
    generated.write_text(json.dumps(coding_session(40)), encoding="utf-8")
    pane = tmp_path / "pane"
    pane.mkdir()
    shown = _in_pane(tmux, pane, [EXAMPLE, generated], "--window", "6000")
    # Three presets of each transcript, and their totals.
    _check_table(shown, 9, "replay-table-generated", tmp_path)


@pytest.mark.shared_data
def test_a_claude_code_replay_fits_a_100_column_pane(tmux: list[str], tmp_path: Path) -> None:
    session = shared_path(
        "trajectories", "claude-code", "fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl"
    )
    pane = tmp_path / "pane"
    pane.mkdir()
    shown = _in_pane(tmux, pane, [session, EXAMPLE], "--window", "100000")
    # Three presets and Claude Code's recorded row, three presets, and the totals.
    _check_table(shown, 10, "replay-table", tmp_path)


WIDE_HEADERS = ("requests", "peak", "window", "masks", "sent", "reads", "reuse", "anthropic")
"""Words of every figure column's header in ``--wide`` (with ``openai`` and ``kept``)."""


@pytest.mark.parametrize("columns", [80, 100])
@pytest.mark.parametrize("wide", [False, True], ids=["default", "wide"])
def test_every_column_and_name_fits_80_and_100_columns(
    tmux: list[str], tmp_path: Path, columns: int, wide: bool
) -> None:
    """A table wider than the pane comes in parts, each repeating the preset column: no column,
    label or figure is lost, and file names are never split."""
    long_name = "a-generated-session-with-a-long-file-name-" + "z" * 20 + ".json"
    generated = tmp_path / "made" / long_name
    generated.parent.mkdir()
    generated.write_text(json.dumps(coding_session(40)), encoding="utf-8")
    pane = tmp_path / "pane"
    pane.mkdir()
    options = ["--window", "6000", *(["--wide"] if wide else [])]
    text = _plain(_in_pane(tmux, pane, [EXAMPLE, generated], *options, columns=columns))
    lines = text.splitlines()
    assert "…" not in text
    assert max(len(line) for line in lines) <= columns
    assert any(line.startswith(long_name) for line in lines)  # whole, on one line
    assert any(line.startswith(EXAMPLE.name) for line in lines)
    words = " ".join(lines).split()
    for header in (*WIDE_HEADERS, "openai") if wide else ("peak", "window", "reuse"):
        assert header in words
    assert words.count("kept") >= 1
    # Every preset row ends in its facts, whole ("4/4", never "4/").
    facts = re.findall(r"^  (?:mask-first|summarize|window) .*?(\S+)$", text, flags=re.M)
    assert facts and all(re.fullmatch(r"\d+/\d+|\)|[\d.,%]+", f) for f in facts)
