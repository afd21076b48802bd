"""Replays plan against the window the original agent had, and say when theirs is far larger."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextfold.replay import replay_transcript
from contextfold.replay.records import WINDOW_NOTE_RATIO
from contextfold.transcripts import load_transcript
from tests.conftest import shared_path
from tests.formats.test_claude_code import reply, user
from tests.formats.writers import write_jsonl


def _compacted_session(tmp_path: Path, pre_tokens: int) -> Path:
    """A short Claude Code session that recorded an auto-compaction at ``pre_tokens``."""
    boundary = {
        "type": "system",
        "subtype": "compact_boundary",
        "uuid": "k",
        "parentUuid": None,
        "logicalParentUuid": "b",
        "compactMetadata": {"trigger": "auto", "preTokens": pre_tokens},
    }
    return write_jsonl(
        tmp_path / "s.jsonl",
        [
            user("a", None, "Port the billing module to the new payments API."),
            reply("b", "a", "working"),
            boundary,
            user("s", "k", "Summary: porting billing.", isCompactSummary=True),
            user("c", "s", "continue"),
            reply("d", "c", "done"),
        ],
    )


def test_a_claude_code_session_replays_at_the_standard_window(tmp_path: Path) -> None:
    result = replay_transcript(load_transcript(_compacted_session(tmp_path, 167_117)))
    assert {run.model for run in result.runs.values()} == {"claude-opus-4-6"}
    assert {run.context_window for run in result.runs.values()} == {200_000}
    assert result.window_note() is None  # 200k is not far above the 167k Claude Code reached


def test_the_long_window_is_there_when_asked_for(tmp_path: Path) -> None:
    transcript = load_transcript(_compacted_session(tmp_path, 167_117))
    for model in ("claude-opus-4-6[1m]", "claude-opus-4-6-1m"):
        result = replay_transcript(transcript, ["window"], model=model)
        assert result.runs["window"].context_window == 1_000_000
        note = result.window_note()
        assert note is not None
        assert note.startswith("Claude Code compacted at 167k tokens; this replay's window of 1M")
        assert "never needed to" in note  # no preset compacted this small session


def test_a_window_far_above_the_agents_peak_is_said_beside_the_comparison(tmp_path: Path) -> None:
    transcript = load_transcript(_compacted_session(tmp_path, 40_000))
    far = 40_000 * WINDOW_NOTE_RATIO + 1_000
    assert replay_transcript(transcript, ["window"], window=int(far)).window_note() is not None
    near = 40_000 * WINDOW_NOTE_RATIO - 1_000
    assert replay_transcript(transcript, ["window"], window=int(near)).window_note() is None
    # A session the agent never compacted has no comparison to qualify.
    plain = write_jsonl(tmp_path / "p.jsonl", [user("a", None, "hi"), reply("b", "a", "hello")])
    assert replay_transcript(load_transcript(plain), ["window"]).window_note() is None


@pytest.mark.shared_data
def test_the_recorded_claude_code_session_states_its_window() -> None:
    path = shared_path("trajectories", "claude-code", "fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl")
    result = replay_transcript(load_transcript(path), ["window"], model="claude-opus-4-6[1m]")
    assert result.original.peak_tokens >= 167_117
    note = result.window_note()
    assert note is not None and "Claude Code compacted at 167k tokens" in note
    assert result.to_json(turns=False)["notes"] == [note]
