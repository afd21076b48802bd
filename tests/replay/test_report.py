"""The HTML report: self-contained, readable in a real browser, and showing where the original
agent and each preset compacted and what each kept."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from contextfold.replay import TranscriptReplay, render_report, replay_transcript, write_report
from contextfold.replay.probes import PROBE_KINDS, Retention
from contextfold.transcripts import Transcript, load_transcript
from tests.conftest import shared_path
from tests.replay.browser import chromium, run_chromium


@pytest.fixture(scope="module")
def example_html(example: Transcript) -> str:
    # Small enough that every preset compacts the example session.
    return render_report([replay_transcript(example, window=3_000, label="example")])


def test_the_report_is_self_contained(example_html: str) -> None:
    assert example_html.startswith("<!doctype html>")
    assert "<style>" in example_html and "<svg" in example_html
    # Nothing is fetched when the file is opened: no scripts, stylesheets or images by URL.
    assert not re.search(r"<(script|link|img|iframe)\b", example_html)
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", example_html)
    assert "url(" not in example_html


def test_the_report_has_the_chart_tables_and_markers(example_html: str) -> None:
    assert 'data-chart="context-size"' in example_html
    assert 'data-chart="budget"' in example_html
    for table in ("presets", "budget", "retention"):
        assert f'data-table="{table}"' in example_html
    for preset in ("mask-first", "summarize", "window"):
        assert f'data-series="{preset}"' in example_html
        assert f'data-retention="{preset}"' in example_html
    assert 'data-series="window" data-tokens=' in example_html  # the window line
    assert re.search(r'data-edit="(summary|drop|mask_batch|mask)"', example_html)


def test_text_from_the_transcript_is_escaped() -> None:
    transcript = Transcript(
        [],
        "openai-messages",
        path="<script>alert(1)</script>.json",
    )
    html = render_report([replay_transcript(transcript)])
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;" in html


def _retention_row(html: str, key: str) -> str:
    match = re.search(rf'<tr data-retention="{re.escape(key)}"[^>]*>.*?</tr>', html)
    assert match, key
    return match.group(0)


def _check_retention_row(html: str, key: str, retention: Retention | None) -> None:
    assert retention is not None
    row = _retention_row(html, key)
    assert f'data-kept="{retention.kept()}" data-total="{retention.total()}"' in row
    assert f"{retention.kept()}/{retention.total()}" in row
    for kind in PROBE_KINDS:
        if retention.total(kind):
            assert f"{retention.kept(kind)}/{retention.total(kind)}" in row


def test_claude_code_compactions_and_each_presets_are_shown_with_retention(
    claude_compacted: list[tuple[Transcript, TranscriptReplay]],
) -> None:
    html = render_report([result for _, result in claude_compacted])
    for transcript, result in claude_compacted:
        section = html.split(f'data-transcript="{result.label}"', 1)[1].split("</section>", 1)[0]
        (compaction,) = result.original.compactions
        assert (
            f'data-original-compaction="{compaction.trigger}" data-turn="{compaction.turn}"'
            in section
        )
        assert f"Claude Code compacted before request {compaction.turn}" in section
        assert f"{compaction.pre_tokens:,} tokens" in section
        for preset, run in result.runs.items():
            # Where this preset would have compacted or masked a batch (mask-first's batches,
            # carrying the hygiene edits too, may spare it the compaction)...
            compacted = [t.turn for t in run.turns if t.edits]
            assert compacted, preset
            for turn in compacted:  # ...is marked on its curve
                assert re.search(
                    rf'data-edit="\w+" data-preset="{preset}" data-turn="{turn}"', section
                )
            _check_retention_row(section, preset, run.retention)
        _check_retention_row(section, "original", result.original.retention)
        # Theirs and ours are probed for the same facts; the default keeps at least as many.
        original = result.original.retention
        default = result.runs["mask-first"].retention
        assert original is not None and default is not None
        assert original.total() == default.total()
        assert default.kept() >= original.kept()
        # Claude Code's summary is shown beside ours.
        assert 'data-summary="original"' in section
        # Ours beside it, for each preset that wrote one (mask-first may not need to).
        written = [preset for preset, run in result.runs.items() if run.summaries]
        assert written
        for preset in written:
            assert f'data-summary="{preset}"' in section
        assert transcript.compactions[0].summary_text[:60].replace("\n", " ") in section.replace(
            "\n", " "
        )


def test_the_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    browser = chromium()
    transcript = load_transcript(
        shared_path(
            "trajectories",
            "mini-swe-agent-deepseek",
            "dev_marshmallow-code__marshmallow-1343_marshmallow-code__marshmallow-1343.traj.json",
        )
    )
    report = write_report([replay_transcript(transcript, window=32_000)], tmp_path / "r.html")
    url = report.resolve().as_uri()
    dom = run_chromium(browser, tmp_path / "profile", "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    assert '<svg class="chart" data-chart="context-size"' in html
    assert html.count("<polyline") >= 4  # three presets and the recorded prompt sizes
    for table in ("presets", "budget", "retention"):
        assert f'data-table="{table}"' in html
    screenshot = tmp_path / "report.png"
    shot = run_chromium(
        browser, tmp_path / "profile", f"--screenshot={screenshot}", "--window-size=1280,1600", url
    )
    assert shot.returncode == 0, shot.stderr[-2000:]
    data = screenshot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 20_000
