"""The report's "Loss report" section (issue 19): per compaction of each preset, how many facts
left the view and where they can still be read, on the bundled example and on a replayed Claude
Code session at a 32k window."""

from __future__ import annotations

import re
from html import unescape

import pytest

from contextfold.replay import TranscriptReplay, render_report, replay_transcript
from contextfold.replay.records import LossMark
from contextfold.transcripts import Transcript, load_transcript
from tests.conftest import shared_path

ROW = re.compile(
    r'<tr data-loss="(?P<preset>[^"]+)" data-turn="(?P<turn>\d+)" '
    r'data-messages="(?P<messages>\d+)" data-out="(?P<out>\d+)" data-lost="(?P<lost>\d+)">'
    r"(?P<cells>.*?)</tr>"
)


def _loss_rows(html: str) -> list[re.Match[str]]:
    assert "<h3>Loss report</h3>" in html
    section = html.split("<h3>Loss report</h3>", 1)[1].split("<h3>Summaries</h3>", 1)[0]
    return list(ROW.finditer(section))


def _check_rows_match_the_runs(replay: TranscriptReplay, html: str) -> None:
    rows = _loss_rows(html)
    expected = [
        (preset, mark)
        for preset, run in replay.runs.items()
        for mark in run.losses
        if mark.out_of_view or mark.messages_out
    ]
    assert len(rows) == len(expected) > 0
    for row, (preset, mark) in zip(rows, expected, strict=True):
        assert row["preset"] == preset
        assert (int(row["turn"]), int(row["messages"]), int(row["out"]), int(row["lost"])) == (
            mark.turn,
            mark.messages_out,
            mark.out_of_view,
            mark.lost,
        )
        cells = [
            unescape(c) for c in re.findall(r'<td class="num[^"]*"[^>]*>(\d+)</td>', row["cells"])
        ]
        counts = [mark.in_summary, mark.pinned, mark.in_ledger, mark.behind_ref, mark.lost]
        assert [int(c) for c in cells] == [mark.turn, mark.messages_out, mark.out_of_view, *counts]


def test_the_example_report_has_a_loss_report_per_compaction(example: Transcript) -> None:
    replay = replay_transcript(example, window=3_000, label="example")
    html = render_report([replay])
    _check_rows_match_the_runs(replay, html)
    for run in replay.runs.values():
        # A report follows every compaction and mask batch of the run.
        edited = [t for t in run.turns if t.edits]
        assert len(run.losses) >= len(edited)
        assert all(isinstance(m, LossMark) for m in run.losses)
    data = replay.runs["window"].to_json()
    assert data["losses"] and {"turn", "out_of_view", "lost"} <= set(data["losses"][0])


def test_a_report_without_compaction_says_so() -> None:
    html = render_report([replay_transcript(Transcript([], "openai-messages", path="empty"))])
    assert "<h3>Loss report</h3>" in html
    assert "data-loss-empty" in html


@pytest.mark.slow
def test_a_replayed_claude_code_session_at_32k_shows_its_loss_report() -> None:
    path = shared_path("trajectories", "claude-code", "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl")
    transcript = load_transcript(path)
    replay = replay_transcript(transcript, window=32_000, label="claude-code")
    html = render_report([replay])
    _check_rows_match_the_runs(replay, html)
    presets = {row["preset"] for row in _loss_rows(html)}
    assert presets == set(replay.runs)  # every preset compacted at 32k, and says what it lost
