"""Claude Code sessions: branches, compaction records, hidden and synthetic records, subagents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contextfold.errors import FormatError
from contextfold.messages import SummaryPart
from contextfold.transcripts import load_claude_code, load_transcript
from tests.compaction.harness_session import TASK, write_harness_session
from tests.formats.writers import write_jsonl


def user(uuid: str, parent: str | None, content: Any, **extra: Any) -> dict[str, Any]:
    record = {
        "type": "user",
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": "s-1",
        "isSidechain": False,
        "timestamp": "2026-02-01T12:00:00.000Z",
        "message": {"role": "user", "content": content},
    }
    return record | extra


def reply(uuid: str, parent: str | None, text: str, **extra: Any) -> dict[str, Any]:
    message = {
        "id": f"msg-{uuid}",
        "model": "claude-opus-4-6",
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "usage": {"input_tokens": 5, "cache_read_input_tokens": 100, "output_tokens": 7},
    }
    record = {"type": "assistant", "uuid": uuid, "parentUuid": parent, "sessionId": "s-1"}
    return record | {"message": message} | extra


def test_a_rewound_conversation_keeps_the_final_branch(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            user("a", None, "first question"),
            reply("b", "a", "first answer"),
            user("c", "b", "a question the user took back"),
            reply("d", "c", "an answer nobody kept"),
            user("e", "b", "the question asked instead"),
            reply("f", "e", "the answer that stayed"),
        ],
    )
    transcript = load_transcript(path)
    assert [m.text for m in transcript.messages] == [
        "first question",
        "first answer",
        "the question asked instead",
        "the answer that stayed",
    ]
    assert transcript.metadata["dropped_records"] == 2
    assert "line 3" in transcript.warnings[0]


def test_compaction_boundary_and_summary(tmp_path: Path) -> None:
    boundary = {
        "type": "system",
        "subtype": "compact_boundary",
        "uuid": "k",
        "parentUuid": None,
        "logicalParentUuid": "b",
        "compactMetadata": {"trigger": "auto", "preTokens": 150_000},
    }
    summary = user("s", "k", "Summary: the user wants X; Y is done.", isCompactSummary=True)
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            user("a", None, "do X"),
            reply("b", "a", "working"),
            boundary,
            summary,
            user("c", "s", "continue"),
            reply("d", "c", "continuing"),
        ],
    )
    transcript = load_transcript(path)
    [compaction] = transcript.compactions
    assert (compaction.index, compaction.trigger, compaction.pre_tokens) == (2, "auto", 150_000)
    message = transcript.messages[2]
    assert message.id == compaction.summary_message_id == "s"
    assert message.parts == (
        SummaryPart(
            "Summary: the user wants X; Y is done.", covers=("a", "b"), source="claude-code"
        ),
    )
    # The pre-compaction history stays: the boundary's logical parent links it.
    assert [m.id for m in transcript.messages] == ["a", "b", "s", "c", "d"]
    assert transcript.summaries() == [message]


def test_a_session_continued_after_a_compaction_begins_with_the_summary(tmp_path: Path) -> None:
    # The boundary's logical parent and the history it summarizes are in the earlier file.
    boundary = {
        "type": "system",
        "subtype": "compact_boundary",
        "uuid": "k",
        "parentUuid": None,
        "logicalParentUuid": "in-the-earlier-file",
        "compactMetadata": {"trigger": "manual", "preTokens": 120_000},
    }
    summary = user("s", "k", "Summary: the user wants X.", isCompactSummary=True)
    path = write_jsonl(tmp_path / "s.jsonl", [boundary, summary, reply("a", "s", "on it")])
    transcript = load_transcript(path)
    assert transcript.warnings == []
    assert [m.id for m in transcript.messages] == ["s", "a"]
    assert transcript.messages[0].meta.kind == "summary"
    assert transcript.messages[0].parts == (
        SummaryPart("Summary: the user wants X.", covers=None, source="claude-code"),
    )
    [compaction] = transcript.compactions
    assert (compaction.index, compaction.trigger, compaction.pre_tokens) == (0, "manual", 120_000)


def test_meta_records_are_hidden_and_api_errors_never_reach_the_model(tmp_path: Path) -> None:
    error = reply("e", "m", "API Error: overloaded", isApiErrorMessage=True)
    error["message"]["model"] = "<synthetic>"
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            {"type": "summary", "summary": "Fix the flaky test", "leafUuid": "e"},
            user("a", None, "fix the flaky test"),
            user("m", "a", "<system-reminder>skill text</system-reminder>", isMeta=True),
            error,
        ],
    )
    transcript = load_transcript(path)
    hidden = transcript.messages[1]
    assert not hidden.meta.user_visible and hidden.meta.agent_visible
    synthetic = transcript.messages[2]
    assert not synthetic.meta.agent_visible and "api_error" in synthetic.meta.flags
    assert transcript.usages() == []
    assert transcript.title == "Fix the flaky test"
    assert transcript.task == "fix the flaky test"


def test_subagent_files_are_linked_to_the_call_that_started_them(tmp_path: Path) -> None:
    task_call = {
        "type": "tool_use",
        "id": "toolu_task",
        "name": "Task",
        "input": {"description": "Survey the repo", "prompt": "look around"},
    }
    started = reply("b", "a", "")
    started["message"]["content"] = [task_call]
    result = user(
        "c",
        "b",
        [{"type": "tool_result", "tool_use_id": "toolu_task", "content": "found it"}],
        toolUseResult={"status": "completed", "agentId": "x1"},
    )
    main = write_jsonl(tmp_path / "s-1.jsonl", [user("a", None, "survey"), started, result])
    folder = tmp_path / "s-1" / "subagents"
    folder.mkdir(parents=True)
    write_jsonl(
        folder / "agent-x1.jsonl",
        [
            user("x-a", None, "look around", isSidechain=True, agentId="x1"),
            reply("x-b", "x-a", "found it", isSidechain=True, agentId="x1"),
        ],
    )
    (folder / "agent-broken.jsonl").write_text("{not json\n", encoding="utf-8")
    transcript = load_claude_code(main)
    [subagent] = transcript.subagents
    assert subagent.metadata == subagent.metadata | {
        "agent_id": "x1",
        "role": "task",
        "parent_call_id": "toolu_task",
    }
    assert subagent.title == "Survey the repo"
    assert [m.text for m in subagent.messages] == ["look around", "found it"]
    assert any("agent-broken.jsonl:1" in w for w in transcript.warnings)
    assert load_claude_code(main, subagents=False).subagents == []


def test_sidechain_records_inside_the_main_file_become_a_subagent(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            user("a", None, "main question"),
            user("x", None, "side question", isSidechain=True),
            reply("y", "x", "side answer", isSidechain=True),
            reply("b", "a", "main answer"),
        ],
    )
    transcript = load_transcript(path)
    assert [m.text for m in transcript.messages] == ["main question", "main answer"]
    [side] = transcript.subagents
    assert [m.text for m in side.messages] == ["side question", "side answer"]


def test_records_that_are_not_objects_name_their_line(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", [user("a", None, "hi"), ["not", "a", "record"]])
    with pytest.raises(FormatError) as caught:
        load_claude_code(path)
    assert caught.value.line == 2


def test_a_message_record_without_its_message_names_its_line(tmp_path: Path) -> None:
    broken = user("b", "a", "x")
    del broken["message"]
    path = write_jsonl(tmp_path / "s.jsonl", [user("a", None, "hi"), broken])
    with pytest.raises(FormatError, match=r"s\.jsonl:2: user record without"):
        load_claude_code(path)


def test_records_the_harness_wrote_are_notes_not_user_turns(tmp_path: Path) -> None:
    """Interruption markers, task notifications, a local command's records and isMeta records
    are harness notes; what the user typed (a prompt command too) stays an ordinary message."""
    transcript = load_transcript(write_harness_session(tmp_path / "s.jsonl"))
    users = [m for m in transcript.messages if m.role == "user"]
    assert [(m.text.split("\n")[0][:26], m.meta.kind) for m in users] == [
        ("Fix the failing slug test ", "message"),
        ("[Request interrupted by us", "harness_note"),
        ("Run the tests in the backg", "message"),
        ("<task-notification>", "harness_note"),
        ("<local-command-caveat>Cave", "harness_note"),
        ("<command-name>/compact</co", "harness_note"),
        ("<local-command-stdout>Comp", "harness_note"),
        ("<command-message>review</c", "message"),
        ("Review the code the user n", "harness_note"),
        ("<system-reminder>", "harness_note"),
        ("[Request interrupted by us", "harness_note"),
    ]
    hidden = [m for m in users if "meta" in m.meta.flags]
    assert len(hidden) == 3 and not any(m.meta.user_visible for m in hidden)
    assert transcript.task == TASK
