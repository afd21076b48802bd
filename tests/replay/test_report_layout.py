"""The report at a glance: it fits an 800-pixel window as well as a 1400-pixel one, every marker
and curve shows, a run of several transcripts has its totals, and failed files are listed.

Set ``CONTEXTFOLD_SCREENSHOTS`` to a folder to keep the screenshots of the pages checked here
(``docs/`` holds the ones of the Claude Code session).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextfold.cli import app
from contextfold.replay import (
    EditMark,
    ReplayRun,
    TranscriptReplay,
    TurnRecord,
    render_report,
    replay_transcript,
    write_report,
)
from contextfold.replay._svg import IDENTICAL_OFFSET, context_chart
from contextfold.replay.records import OriginalAgent
from contextfold.transcripts import Transcript, load_transcript
from tests.conftest import shared_path
from tests.replay.browser import chromium, measure, screenshot
from tests.replay.conftest import EXAMPLE, coding_session

WIDTHS = (800, 1400)
"""Window widths the report must fit without scrolling sideways: a laptop's half screen, and a
desktop's browser."""
SCREENSHOTS = "CONTEXTFOLD_SCREENSHOTS"
"""Environment variable naming the folder to write the screenshots to (none when unset)."""


def _check_fits(report: Path, work: Path, name: str) -> None:
    browser = chromium()
    folder = os.environ.get(SCREENSHOTS)
    for width in WIDTHS:
        layout = measure(browser, report, width, work)
        assert layout.inner_width == width
        assert layout.scroll_width <= layout.inner_width, f"the page scrolls sideways at {width}"
        assert layout.overflowing_tables == [], f"tables wider than their card at {width}"
        if folder:
            out = Path(folder) / f"{name}-{width}.png"
            screenshot(browser, report, width, layout.scroll_height, out, work)


def test_a_report_of_several_transcripts_fits_800_and_1400_pixels(
    example: Transcript, tmp_path: Path
) -> None:
    long_named = tmp_path / ("a-generated-session-with-a-long-name-" + "y" * 40 + ".json")
    long_named.write_text(json.dumps(coding_session(30)), encoding="utf-8")
    replays = [
        replay_transcript(example, window=4_000),
        replay_transcript(load_transcript(long_named), window=4_000),
    ]
    failed = [(str(tmp_path / "broken.json"), "broken.json:1: invalid JSON: Expecting value")]
    report = write_report(replays, tmp_path / "report.html", failed=failed)
    _check_fits(report, tmp_path, "report-generated")


@pytest.mark.shared_data
def test_a_claude_code_report_fits_800_and_1400_pixels(tmp_path: Path) -> None:
    path = shared_path("trajectories", "claude-code", "fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl")
    replays = [replay_transcript(load_transcript(path), window=100_000)]
    _check_fits(write_report(replays, tmp_path / "report.html"), tmp_path, "report")


def test_a_run_of_several_transcripts_has_each_presets_totals(
    example: Transcript, tmp_path: Path
) -> None:
    generated = tmp_path / "generated.json"
    generated.write_text(json.dumps(coding_session(20)), encoding="utf-8")
    replays = [
        replay_transcript(example, window=4_000),
        replay_transcript(load_transcript(generated), window=4_000),
    ]
    html = render_report(replays)
    assert 'data-table="totals"' in html
    assert "Totals per preset over 2 transcripts" in html
    for preset in ("mask-first", "summarize", "window"):
        sent = sum(r.runs[preset].tokens_sent for r in replays)
        assert f'data-totals="{preset}" data-tokens-sent="{sent}"' in html
    # One transcript: no totals to add up.
    assert 'data-table="totals"' not in render_report(replays[:1])


def test_files_that_could_not_be_replayed_are_listed(example: Transcript) -> None:
    failed = [("logs/broken.jsonl", "logs/broken.jsonl:3: invalid JSON"), (None, "no file")]
    html = render_report([replay_transcript(example)], failed=failed)
    assert "Not replayed: 2 files" in html
    assert '<tr data-failed="logs/broken.jsonl"><td>logs/broken.jsonl</td>' in html
    assert "logs/broken.jsonl:3: invalid JSON" in html
    assert "Not replayed" not in render_report([replay_transcript(example)])


def test_the_cli_report_lists_the_files_that_failed(tmp_path: Path) -> None:
    bad = tmp_path / "broken.json"
    bad.write_text('{"messages": [', encoding="utf-8")
    out = tmp_path / "r.html"
    result = CliRunner().invoke(app, ["replay", str(EXAMPLE), str(bad), "--report", str(out)])
    assert result.exit_code == 1
    assert f'data-failed="{bad}"' in out.read_text(encoding="utf-8")


def _run(preset: str, sizes: list[int], edits: dict[int, tuple[EditMark, ...]]) -> ReplayRun:
    run = ReplayRun(preset, "gpt-4o", 10_000, 8_000)
    run.turns = [
        TurnRecord(i, i, tokens, "ok", True, edits=edits.get(i, ()))
        for i, tokens in enumerate(sizes)
    ]
    return run


def _marker_centres(svg: str, preset: str) -> dict[str, tuple[float, float]]:
    """(x, y) of the first point of each marker of ``preset``, by edit kind."""
    found = {}
    for kind, body in re.findall(
        rf'data-edit="(\w+)" data-preset="{preset}"[^>]*>.*?</title>(<[^>]+>)', svg
    ):
        numbers = [float(n) for n in re.findall(r"-?\d+\.\d+", body)]
        found[kind] = (numbers[0], numbers[1])
    return found


def test_markers_of_one_request_are_stacked_not_hidden() -> None:
    both = (EditMark("summary", 4, 900), EditMark("drop", 2, 300))
    svg = context_chart([_run("summarize", [1_000, 5_000, 2_000, 2_500], {2: both})])
    centres = _marker_centres(svg, "summarize")
    assert set(centres) == {"summary", "drop"}
    assert centres["summary"] != centres["drop"]  # the drop no longer covers the summary
    # Markers come after every curve: no line is drawn over them.
    assert svg.rindex("<polyline") < svg.index('class="marker"')


def test_identical_curves_are_offset_and_said_to_be_identical() -> None:
    sizes = [1_000, 3_000, 5_000]
    runs = [_run("mask-first", sizes, {}), _run("summarize", sizes, {}), _run("window", sizes, {})]
    runs[2].turns[1] = TurnRecord(1, 1, 2_000, "ok", True)  # one request differs: not identical
    svg = context_chart(runs)
    assert 'data-series="mask-first" data-offset="0"' in svg
    assert f'data-series="summarize" data-offset="{IDENTICAL_OFFSET}"' in svg
    assert 'data-series="window" data-offset="0"' in svg
    replay = TranscriptReplay("t", None, "openai-messages", 6, 0, OriginalAgent())
    replay.runs = {run.preset: run for run in runs}
    html = render_report([replay])
    assert "summarize made exactly the same requests as mask-first" in html
    assert "window made exactly" not in html
