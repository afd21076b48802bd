"""What an agent harness wrote in user-role messages is never the user's task, request or
constraint: not in the extractive summary, not in the turn structure compaction protects."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from contextfold.compaction import (
    SECTION_NAMES,
    ExtractiveSummarizer,
    RecentWindow,
    StructuredSummary,
    ToolResultDigest,
)
from contextfold.edits import SummarizeEdit, apply_edits
from contextfold.history.harness_notes import HARNESS_NOTE_KIND
from contextfold.history.turns import is_user_turn, last_user_index, task_index
from contextfold.messages import Message, Meta
from contextfold.outputs.intake import InMemoryBlobStore
from contextfold.transcripts import Transcript, load_transcript, load_transcripts
from tests.conftest import shared_path

from .conftest import agent_log, make_ctx, tool_round
from .harness_session import (
    COMMAND_TYPED,
    LATER_REQUEST,
    NOT_THE_USERS,
    TASK,
    USER_REQUESTS,
    write_claude_code,
    write_harness_session,
)

ITEM_LABELS = (
    "Task: ",
    "User asked: ",
    "Constraint: ",
    "Focus requested: ",
    "Latest request: ",
    "Latest progress: ",
    "Last action: ",
)
"""The labels the extractive summary puts before an item's own words."""


def _texts(summary: StructuredSummary, section: str) -> list[str]:
    return [item.text for item in summary.items(section)]


def _words(summary: StructuredSummary) -> Iterator[tuple[str, str]]:
    """Every item of every section, without its label: (section, the words it quotes)."""
    for section in SECTION_NAMES:
        for text in _texts(summary, section):
            yield section, next((text[len(x) :] for x in ITEM_LABELS if text.startswith(x)), text)


def test_the_summary_of_a_claude_code_session_names_the_users_requests_only(
    tmp_path: Path,
) -> None:
    transcript = load_transcript(write_harness_session(tmp_path / "s.jsonl"))
    summary = ExtractiveSummarizer().summarize(transcript.messages)
    assert _texts(summary, "Session Intent") == [
        f"Task: {TASK}",
        *(f"User asked: {request}" for request in USER_REQUESTS),
        "Constraint: Do not change the public API.",
        f"Constraint: {COMMAND_TYPED}",
    ]
    assert _texts(summary, "Current Task")[0] == f"Latest request: {COMMAND_TYPED}"
    for section, words in _words(summary):
        assert not any(marker in words for marker in NOT_THE_USERS), (section, words)


def test_plain_text_markers_are_not_requests_in_any_format() -> None:
    """A transcript of another format carries Claude Code's markers as ordinary user text."""
    view = [
        Message.user("[Request interrupted by user]", id="stop0"),
        Message.user("Fix the crash in app.py", id="task"),
        *tool_round(0, "python app.py", "<returncode>0</returncode>\n<output>\n</output>"),
        Message.user("[Request interrupted by user for tool use]", id="stop1"),
        Message.user("<system-reminder>Do not stop early.</system-reminder>", id="reminder"),
        Message.user(LATER_REQUEST, id="later"),
        *tool_round(1, "pytest", "<returncode>0</returncode>\n<output>\n</output>"),
        Message.user("<task-notification>\n<status>completed</status>", id="notified"),
        Message.user("[Request interrupted by user]", id="stop2"),
    ]
    assert [m.id for m in view if is_user_turn(m)] == ["task", "later"]
    assert (task_index(view), last_user_index(view)) == (1, 6)
    summary = ExtractiveSummarizer().summarize(view)
    assert _texts(summary, "Session Intent") == [
        "Task: Fix the crash in app.py",
        f"User asked: {LATER_REQUEST}",
    ]
    assert _texts(summary, "Current Task")[0] == f"Latest request: {LATER_REQUEST}"


def test_the_task_of_a_log_that_opens_with_hook_reminders_is_the_first_request(
    tmp_path: Path,
) -> None:
    """A compaction subagent's log opens with isMeta hook reminders; its task comes after, and
    it is the task compaction keeps verbatim."""
    reminders = [
        Message.user(f"<system-reminder>\nPostToolUse:Edit hook: error {n}\n</system-reminder>")
        for n in range(2)
    ]
    messages = [*reminders, Message.user(TASK), Message.assistant("On it.")]
    path = write_claude_code(tmp_path / "s.jsonl", messages, {0, 1})
    view = load_transcript(path).messages
    assert view[task_index(view) or 0].text == TASK
    assert _texts(ExtractiveSummarizer().summarize(view), "Session Intent")[0] == f"Task: {TASK}"


def test_the_tool_digest_never_folds_a_harness_note_away(blobs: InMemoryBlobStore) -> None:
    """A hook's reminder between tool rounds says what no digest line keeps (a compile error):
    the digest stops before it, as before a user turn."""
    view = agent_log(rounds=16, output_chars=800)
    reminder = Message.user(
        "<system-reminder>\nPostToolUse:Edit hook: [COMPILE ERROR] undefined function slug/1\n"
        "</system-reminder>",
        id="hook",
        meta=Meta(kind=HARNESS_NOTE_KIND, user_visible=False),
    )
    view.insert(8, reminder)  # after the third tool round
    ctx = make_ctx(view, target=0, window=10**5, blobs=blobs, recent=RecentWindow(max_share=0.01))
    [edit] = ToolResultDigest(cutoff=10).plan(ctx)
    assert isinstance(edit, SummarizeEdit) and edit.last_id == "t2"
    assert "hook" in [m.id for m in apply_edits(view, [edit])]


def _claude_code_sessions() -> Iterator[tuple[str, Transcript]]:
    for path in sorted(shared_path("trajectories", "claude-code").glob("*.jsonl")):
        for transcript in load_transcripts(path):
            yield path.name, transcript
            for sub in transcript.subagents:
                yield f"{path.name}/{sub.metadata.get('agent_id')}", sub


@pytest.mark.shared_data
def test_no_summary_item_of_a_shared_claude_code_session_is_harness_text() -> None:
    checked = 0
    for label, transcript in _claude_code_sessions():
        summary = ExtractiveSummarizer().summarize(transcript.messages)
        task = _texts(summary, "Session Intent")[0]
        assert task.startswith("Task: "), label
        for section, words in _words(summary):
            assert not words.lstrip().startswith(NOT_THE_USERS), (label, section, words)
            assert "DO NOT respond to these messages" not in words, (label, section, words)
        checked += 1
    assert checked >= 10
