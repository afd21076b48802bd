"""Codex rollouts, from small hand-written files in the public rollout shape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contextfold.errors import FormatError
from contextfold.messages import SummaryPart, ThinkingPart, Usage
from contextfold.transcripts import detect_format, load_transcript
from tests.formats.writers import write_jsonl


def line(kind: str, payload: dict[str, Any], second: int = 0) -> dict[str, Any]:
    return {"timestamp": f"2026-03-01T10:00:{second:02d}.000Z", "type": kind, "payload": payload}


def item(**payload: Any) -> dict[str, Any]:
    return line("response_item", payload)


def tokens(input_tokens: int, cached: int, output: int, total: int) -> dict[str, Any]:
    last = {
        "input_tokens": input_tokens,
        "cached_input_tokens": cached,
        "output_tokens": output,
        "reasoning_output_tokens": 0,
        "total_tokens": input_tokens + output,
    }
    info = {
        "total_token_usage": {"total_tokens": total},
        "last_token_usage": last,
        "model_context_window": 200_000,
    }
    return line("event_msg", {"type": "token_count", "info": info})


def user(text: str) -> dict[str, Any]:
    return item(type="message", role="user", content=[{"type": "input_text", "text": text}])


def said(text: str) -> dict[str, Any]:
    return item(type="message", role="assistant", content=[{"type": "output_text", "text": text}])


SESSION = [
    line(
        "session_meta",
        {
            "id": "0199-thread",
            "cwd": "/src/app",
            "cli_version": "0.60.0",
            "base_instructions": {"text": "You are a careful coding agent."},
            "dynamic_tools": [
                {"name": "lookup", "description": "Find a symbol.", "input_schema": {}}
            ],
        },
    ),
    item(
        type="message",
        role="developer",
        content=[{"type": "input_text", "text": "<permissions instructions>sandboxed"}],
    ),
    user("<environment_context>\n  <cwd>/src/app</cwd>\n</environment_context>"),
    line("turn_context", {"model": "gpt-5-codex", "cwd": "/src/app"}),
    user("Make the parser accept trailing commas."),
    line("event_msg", {"type": "user_message", "message": "Make the parser accept..."}),
    item(type="reasoning", summary=[{"type": "summary_text", "text": "Look at the parser."}]),
    said("Let me find the parser first."),
    item(type="function_call", name="shell", arguments='{"command":["rg","parse"]}', call_id="c1"),
    tokens(1200, 1000, 80, 1280),
    tokens(1200, 1000, 80, 1280),
    item(type="function_call_output", call_id="c1", output="Exit code: 1\nWall time: 0.1s\n"),
    item(type="custom_tool_call", name="apply_patch", input="*** Begin Patch\n", call_id="c2"),
    tokens(1500, 1200, 40, 2820),
    item(type="custom_tool_call_output", call_id="c2", output="Done!"),
    item(
        type="local_shell_call",
        call_id="c3",
        status="completed",
        action={"type": "exec", "command": ["pytest", "-q"]},
    ),
    item(type="web_search_call", status="completed", action={"type": "search", "query": "x"}),
    tokens(1700, 1500, 30, 4550),
    item(
        type="function_call_output",
        call_id="c3",
        output=json.dumps({"output": "3 passed", "metadata": {"exit_code": 0}}),
    ),
    line("compacted", {"message": "The parser now accepts trailing commas; tests pass."}),
    user("Now update the changelog."),
    said("Done."),
    tokens(900, 0, 10, 5460),
    item(type="compaction", encrypted_content="gAAAA-opaque"),
]


@pytest.fixture
def session(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "rollout-2026-03-01T10-00-00-0199.jsonl", SESSION)


def test_session_facts(session: Path) -> None:
    transcript = load_transcript(session)
    assert detect_format(session) == "codex"
    assert transcript.session_id == "0199-thread"
    assert transcript.model == "gpt-5-codex"
    assert transcript.task == "Make the parser accept trailing commas."
    assert transcript.metadata["instructions"] == "You are a careful coding agent."
    assert transcript.metadata["model_context_window"] == 200_000
    assert transcript.metadata["skipped_items"] == {"web_search_call": 1}
    assert [t.name for t in transcript.tools] == ["lookup"]


def test_one_response_is_one_assistant_message_with_its_usage(session: Path) -> None:
    transcript = load_transcript(session)
    first = next(m for m in transcript.messages if m.role == "assistant")
    assert [type(p).__name__ for p in first.parts] == ["ThinkingPart", "TextPart", "ToolCallPart"]
    assert isinstance(first.parts[0], ThinkingPart)
    assert first.parts[0].text == "Look at the parser."
    # The repeated token count is not counted twice.
    assert [u for _, u in transcript.usages()] == [
        Usage(1200, 80, 1000),
        Usage(1500, 40, 1200),
        Usage(1700, 30, 1500),
        Usage(900, 10, 0),
    ]


def test_calls_and_results(session: Path) -> None:
    transcript = load_transcript(session)
    calls = {c.call_id: c for c in transcript.tool_calls()}
    assert calls["c1"].args() == {"command": ["rg", "parse"]}
    # A free-form tool's raw text travels under "input", flagged, never as invalid JSON.
    assert calls["c2"].args() == {"input": "*** Begin Patch\n"}
    assert calls["c3"].name == "shell" and calls["c3"].args()["command"] == ["pytest", "-q"]
    patch_message = next(m for m in transcript.messages if calls["c2"] in m.tool_calls)
    assert "custom_tool_call" in patch_message.meta.flags
    results = {r.call_id: r for m in transcript.messages for r in m.tool_results}
    assert results["c1"].is_error and results["c1"].name == "shell"
    assert results["c1"].content == "Exit code: 1\nWall time: 0.1s\n"
    assert not results["c2"].is_error and results["c2"].name == "apply_patch"
    assert not results["c3"].is_error
    assert transcript.unanswered_calls() == []
    assert transcript.warnings == []


def test_injected_context_is_hidden_from_the_user(session: Path) -> None:
    transcript = load_transcript(session)
    developer = transcript.messages[0]
    assert developer.role == "system" and "developer" in developer.meta.flags
    context = transcript.messages[1]
    assert context.role == "user" and not context.meta.user_visible


def test_compactions(session: Path) -> None:
    transcript = load_transcript(session)
    local, remote = transcript.compactions
    summary = transcript.messages[local.index]
    assert summary.id == local.summary_message_id and summary.meta.kind == "summary"
    assert summary.parts == (
        SummaryPart(
            "The parser now accepts trailing commas; tests pass.",
            covers=(transcript.messages[0].id, transcript.messages[local.index - 1].id),
            source="codex",
        ),
    )
    assert local.pre_tokens == 1730  # the context after the last call before compacting
    assert local.trigger is None
    assert remote.summary_text == ""
    assert "encrypted" in transcript.messages[remote.index].meta.flags


def test_early_rollouts_without_envelopes(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "rollout-old.jsonl",
        [
            {"id": "old-1", "timestamp": "2025-05-01T00:00:00Z", "instructions": None},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
            {"record_type": "state"},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "yo"}],
            },
        ],
    )
    transcript = load_transcript(path)
    assert transcript.format == "codex" and transcript.session_id == "old-1"
    assert [(m.role, m.text) for m in transcript.messages] == [("user", "hi"), ("assistant", "yo")]


def test_invalid_arguments_are_kept_and_reported(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "r.jsonl",
        [user("go"), item(type="function_call", name="shell", arguments="{oops", call_id="k")],
    )
    transcript = load_transcript(path)
    [message] = [m for m in transcript.messages if m.tool_calls]
    assert message.tool_calls[0].arguments == "{oops"
    assert "invalid_arguments" in message.meta.flags
    assert len(transcript.warnings) == 1 and "'k'" in transcript.warnings[0]


def test_a_cut_off_last_line_is_left_out_with_a_warning_naming_it(tmp_path: Path) -> None:
    # A rollout still being written ends mid-line: the lines before it are read.
    whole = load_transcript(write_jsonl(tmp_path / "r.jsonl", SESSION[:5]))
    path = tmp_path / "r.jsonl"
    path.write_text(path.read_text() + '{"timestamp": "2026-03-01T10', encoding="utf-8")
    transcript = load_transcript(path)
    assert transcript.warnings[0].startswith("line 6 is incomplete")
    assert transcript.messages == whole.messages


def test_a_cut_off_line_ended_by_a_newline_names_the_line(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "r.jsonl", SESSION[:5])
    path.write_text(path.read_text() + '{"timestamp": "2026-03-01T10\n', encoding="utf-8")
    with pytest.raises(FormatError) as caught:
        load_transcript(path)
    assert caught.value.line == 6 and caught.value.path == str(path)
