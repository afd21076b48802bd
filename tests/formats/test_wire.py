"""OpenAI and Anthropic wire adapters: round trips and the provider-specific rules."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings

from contextfold.messages import (
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from contextfold.wire.anthropic import (
    from_anthropic,
    parse_anthropic_response,
    to_anthropic,
    usage_from_anthropic,
)
from contextfold.wire.chat_completions import (
    from_openai,
    parse_openai_response,
    parse_openai_tool_calls,
    to_openai,
)
from tests.strategies import anthropic_conversations, openai_conversations


@settings(max_examples=200)
@given(openai_conversations())
def test_openai_round_trip(conversation: list[dict[str, Any]]) -> None:
    assert to_openai(from_openai(conversation)) == conversation


@settings(max_examples=200)
@given(anthropic_conversations())
def test_anthropic_round_trip(conversation: list[dict[str, Any]]) -> None:
    assert to_anthropic(from_anthropic(conversation)).messages == conversation


def test_openai_tool_names_come_from_the_calls() -> None:
    messages = from_openai(
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "bash", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ]
    )
    assert messages[1].tool_results[0].name == "bash"


def test_openai_stringified_tool_calls_are_parsed() -> None:
    as_json = '[{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]'
    as_python = (
        "[{'id': 'c1', 'type': 'function', 'function': {'name': 'bash', 'arguments': '{}'}}]"
    )
    assert parse_openai_tool_calls(as_json)[0].name == "bash"
    assert parse_openai_tool_calls(as_python)[0].call_id == "c1"


def test_openai_invalid_arguments_are_flagged_and_kept() -> None:
    [message] = from_openai(
        [
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "bash", "arguments": "{oops"},
                    }
                ],
            }
        ]
    )
    assert message.tool_calls[0].arguments == "{oops"
    assert "invalid_arguments" in message.meta.flags


def test_openai_reasoning_is_thinking_and_only_sent_on_request() -> None:
    [message] = from_openai([{"role": "assistant", "content": "hi", "reasoning_content": "hmm"}])
    assert isinstance(message.parts[0], ThinkingPart)
    assert "reasoning_content" not in to_openai([message])[0]
    assert to_openai([message], include_reasoning=True)[0]["reasoning_content"] == "hmm"


def test_anthropic_folds_tool_results_and_following_text_into_one_user_turn() -> None:
    messages = [
        Message.user("go"),
        Message.assistant("", [ToolCallPart("c1", "bash", "{}"), ToolCallPart("c2", "bash", "{}")]),
        Message.tool(ToolResultPart("c1", "bash", "one")),
        Message.tool(ToolResultPart("c2", "bash", "two", is_error=True)),
        Message.user("and now?"),
    ]
    wire = to_anthropic(messages).messages
    assert [m["role"] for m in wire] == ["user", "assistant", "user"]
    assert [b["type"] for b in wire[2]["content"]] == ["tool_result", "tool_result", "text"]
    assert wire[2]["content"][1]["is_error"] is True


def test_anthropic_system_and_breakpoints() -> None:
    messages = [
        Message.system("rules"),
        Message.user("a"),
        Message.assistant("b"),
        Message.user("c"),
    ]
    request = to_anthropic(
        messages, system=["base"], system_breakpoints=[1], message_breakpoints=[2]
    )
    assert [b["text"] for b in request.system] == ["base", "rules"]
    assert request.system[1]["cache_control"] == {"type": "ephemeral"}
    assert request.messages[1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in request.messages[0]["content"][-1]


def test_anthropic_invalid_arguments_survive_the_round_trip() -> None:
    call = ToolCallPart("c1", "bash", "{not json")
    wire = to_anthropic([Message.user("x"), Message.assistant("", [call])]).messages
    assert from_anthropic(wire)[1].tool_calls[0].arguments == "{not json"


def test_anthropic_usage_counts_cached_tokens_as_input() -> None:
    usage = usage_from_anthropic(
        {
            "input_tokens": 3,
            "cache_creation_input_tokens": 100,
            "cache_read_input_tokens": 900,
            "output_tokens": 7,
        }
    )
    assert usage == Usage(1003, 7, 900, 100)


def test_response_parsers() -> None:
    message, usage, stop = parse_openai_response(
        {
            "id": "chatcmpl-1",
            "model": "gpt-4o",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "c",
                                "type": "function",
                                "function": {"name": "f", "arguments": "{}"},
                            }
                        ],
                    },
                }
            ],
            "usage": {
                "prompt_tokens": 50,
                "completion_tokens": 5,
                "prompt_tokens_details": {"cached_tokens": 32},
            },
        }
    )
    assert stop == "tool_calls" and usage == Usage(50, 5, 32, 0)
    assert message.meta.usage == usage and message.tool_calls[0].name == "f"
    message, usage, stop = parse_anthropic_response(
        {
            "id": "msg_1",
            "model": "claude",
            "stop_reason": "end_turn",
            "content": [{"type": "text", "text": "hi"}],
            "usage": {"input_tokens": 5, "output_tokens": 2},
        }
    )
    assert message.text == "hi" and usage == Usage(5, 2) and stop == "end_turn"


def test_anthropic_drops_whitespace_only_text_blocks() -> None:
    wire = to_anthropic(
        [Message.user("go"), Message.assistant("\n\n", [ToolCallPart("c", "f", "{}")])]
    )
    assert [b["type"] for b in wire.messages[1]["content"]] == ["tool_use"]


def test_anthropic_breakpoints_skip_thinking_and_empty_blocks() -> None:
    thinking_last = Message("assistant", (TextPart("answer"), ThinkingPart("hmm", "sig")))
    request = to_anthropic(
        [Message.user("a"), thinking_last, Message.user("")],
        system=["base", "", "more"],
        system_breakpoints=[1],
        message_breakpoints=[1, 2],
    )
    assert request.system[0]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in request.system[1]
    assert request.messages[1]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in request.messages[1]["content"][1]
