"""The scripted upstream speaks both protocols well enough for the official SDKs: replies,
streams, tool calls and thinking parse, usage counts the request, and its context-overflow
errors are the ones contextfold's error mapping recognises. The proxy tests rely on all of it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from contextfold import ContextOverflowError
from contextfold.providers.errors import map_sdk_errors
from tests.proxy.servers import serve
from tests.proxy.upstreams import (
    Protocol,
    Reply,
    ScriptedUpstream,
    ToolCall,
    UpstreamError,
    count_input_tokens,
    default_counter,
)

LIST_FILES = ToolCall("toolu_01", "list_files", {"path": "src", "pattern": "*.py", "depth": 2})
GREP = ToolCall("toolu_02", "grep", {"query": "def main", "paths": ["a.py", "b.py"]})
ANTHROPIC_TOOLS = [
    {
        "name": name,
        "description": f"The {name} tool",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
    for name in ("list_files", "grep")
]
OPENAI_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"The {name} tool",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
    for name in ("list_files", "grep")
]


class Replies:
    """A script answering whatever the test set last (and counting its calls)."""

    def __init__(self) -> None:
        self.next: Reply | UpstreamError = Reply(text="hello")
        self.seen: list[tuple[Protocol, dict[str, Any]]] = []

    def __call__(self, protocol: Protocol, body: dict[str, Any]) -> Reply | UpstreamError:
        self.seen.append((protocol, body))
        return self.next


@pytest.fixture
def replies() -> Replies:
    return Replies()


@pytest.fixture
def upstream(replies: Replies) -> ScriptedUpstream:
    return ScriptedUpstream(replies, window=2_000)


@pytest.fixture
def base_url(upstream: ScriptedUpstream) -> Iterator[str]:
    with serve(upstream) as url:
        yield url


@pytest.fixture
def claude(base_url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=base_url, api_key="dummy", max_retries=0)


@pytest.fixture
def gpt(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="dummy", max_retries=0)


def ask_claude(text: str = "list the files") -> dict[str, Any]:
    return {
        "model": "claude-test",
        "max_tokens": 256,
        "system": [{"type": "text", "text": "You are a coding agent."}],
        "tools": ANTHROPIC_TOOLS,
        "messages": [{"role": "user", "content": text}],
    }


def ask_gpt(text: str = "list the files") -> dict[str, Any]:
    return {
        "model": "gpt-test",
        "tools": OPENAI_TOOLS,
        "messages": [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": text},
        ],
    }


# -- Anthropic -------------------------------------------------------------------------------------


def test_anthropic_reply_with_thinking_text_and_tool_calls(
    claude: anthropic.Anthropic, replies: Replies, upstream: ScriptedUpstream
) -> None:
    replies.next = Reply(text="Looking.", tool_calls=[LIST_FILES, GREP], thinking="Plan: look.")
    request = ask_claude()
    message = claude.messages.create(**request)

    assert [block.type for block in message.content] == ["thinking", "text", "tool_use", "tool_use"]
    thinking, text, first, second = message.content
    assert thinking.type == "thinking" and thinking.thinking == "Plan: look."
    assert thinking.signature
    assert text.type == "text" and text.text == "Looking."
    assert first.type == "tool_use" and (first.id, first.name) == ("toolu_01", "list_files")
    assert first.input == LIST_FILES.arguments
    assert second.type == "tool_use" and second.input == GREP.arguments
    assert message.stop_reason == "tool_use"
    assert message.model == "claude-test"
    expected = count_input_tokens("anthropic", request, default_counter("anthropic"))
    assert message.usage.input_tokens == expected > 0
    assert message.usage.output_tokens > 0

    [recorded] = upstream.requests
    assert (recorded.path, recorded.protocol, recorded.input_tokens) == (
        "/v1/messages",
        "anthropic",
        expected,
    )
    # The SDK sends the key as x-api-key or (newer versions) as a bearer token.
    key = recorded.headers.get("x-api-key") or recorded.headers.get("authorization", "")
    assert key.endswith("dummy")
    assert recorded.body["tools"] == ANTHROPIC_TOOLS


def test_anthropic_stream_assembles_split_deltas(
    claude: anthropic.Anthropic, replies: Replies, upstream: ScriptedUpstream
) -> None:
    replies.next = Reply(
        text="Let me look at the files.",
        tool_calls=[LIST_FILES, GREP],
        thinking="I should list them first.",
    )
    events: list[str] = []
    with claude.messages.stream(**ask_claude()) as stream:
        for event in stream:
            events.append(event.type)
        message = stream.get_final_message()

    assert events[0] == "message_start" and events[-1] == "message_stop"
    # The stream really came in pieces: several deltas per block, JSON input included.
    raw = [e for e in events if e in ("text", "thinking", "input_json", "signature")]
    assert raw.count("input_json") >= 4 and raw.count("text") >= 2 and "signature" in raw
    assert [block.type for block in message.content] == ["thinking", "text", "tool_use", "tool_use"]
    assert message.content[0].type == "thinking"
    assert message.content[0].thinking == "I should list them first."
    assert message.content[1].type == "text"
    assert message.content[1].text == "Let me look at the files."
    assert (
        message.content[2].type == "tool_use" and message.content[2].input == LIST_FILES.arguments
    )
    assert message.content[3].type == "tool_use" and message.content[3].input == GREP.arguments
    assert message.stop_reason == "tool_use"
    assert message.usage.input_tokens == upstream.requests[0].input_tokens
    assert message.usage.output_tokens > 1


def test_anthropic_count_tokens_and_models(
    claude: anthropic.Anthropic, upstream: ScriptedUpstream
) -> None:
    request = ask_claude()
    del request["max_tokens"]
    counted = claude.messages.count_tokens(**request)
    assert counted.input_tokens == count_input_tokens(
        "anthropic", request, default_counter("anthropic")
    )
    assert [model.id for model in claude.models.list()] == ["scripted"]
    assert [r.path for r in upstream.requests] == ["/v1/messages/count_tokens", "/v1/models"]


def test_anthropic_overflow_is_a_context_overflow(
    claude: anthropic.Anthropic, replies: Replies, upstream: ScriptedUpstream
) -> None:
    request = ask_claude("word " * 3_000)
    with pytest.raises(anthropic.BadRequestError) as raised:
        claude.messages.create(**request)
    assert "prompt is too long" in raised.value.message
    assert not replies.seen  # an overflowing request never reaches the script

    mapping = map_sdk_errors(anthropic, "anthropic", "ANTHROPIC_API_KEY")
    with pytest.raises(ContextOverflowError) as mapped, mapping:
        claude.messages.create(**request, stream=True)
    assert mapped.value.limit == 2_000
    refused = upstream.requests[-1].input_tokens
    assert refused is not None and mapped.value.prompt_tokens == refused > 2_000


def test_script_errors_pass_through(claude: anthropic.Anthropic, replies: Replies) -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    replies.next = UpstreamError(529, overloaded)
    with pytest.raises(anthropic.APIStatusError) as raised:
        claude.messages.create(**ask_claude())
    assert raised.value.status_code == 529
    assert raised.value.body == overloaded["error"] or raised.value.body == overloaded


# -- OpenAI ----------------------------------------------------------------------------------------


def test_openai_reply_with_tool_calls(
    gpt: openai.OpenAI, replies: Replies, upstream: ScriptedUpstream
) -> None:
    replies.next = Reply(text="Looking.", tool_calls=[LIST_FILES, GREP])
    request = ask_gpt()
    completion = gpt.chat.completions.create(**request)

    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Looking."
    calls = choice.message.tool_calls or []
    assert [(c.id, c.function.name) for c in calls] == [
        ("toolu_01", "list_files"),
        ("toolu_02", "grep"),
    ]
    assert [json.loads(c.function.arguments) for c in calls] == [
        LIST_FILES.arguments,
        GREP.arguments,
    ]
    expected = count_input_tokens("openai", request, default_counter("openai"))
    assert completion.usage is not None and completion.usage.prompt_tokens == expected > 0
    assert upstream.requests[0].protocol == "openai"


def test_openai_stream_with_usage_assembles_tool_call_deltas(
    gpt: openai.OpenAI, replies: Replies, upstream: ScriptedUpstream
) -> None:
    replies.next = Reply(text="Let me look.", tool_calls=[LIST_FILES, GREP])
    stream = gpt.chat.completions.create(
        **ask_gpt(), stream=True, stream_options={"include_usage": True}
    )
    text = ""
    arguments: dict[int, str] = {}
    names: dict[int, str] = {}
    argument_deltas = 0
    finish_reasons: list[str] = []
    usage = None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            text += choice.delta.content or ""
            if choice.finish_reason:
                finish_reasons.append(choice.finish_reason)
            for call in choice.delta.tool_calls or []:
                if call.function and call.function.name:
                    names[call.index] = call.function.name
                if call.function and call.function.arguments:
                    argument_deltas += 1
                    arguments[call.index] = arguments.get(call.index, "") + call.function.arguments

    assert text == "Let me look."
    assert names == {0: "list_files", 1: "grep"}
    assert {i: json.loads(a) for i, a in arguments.items()} == {
        0: LIST_FILES.arguments,
        1: GREP.arguments,
    }
    assert argument_deltas >= 4  # split in chunks, as a real model streams them
    assert finish_reasons == ["tool_calls"]
    assert usage is not None and usage.prompt_tokens == upstream.requests[0].input_tokens


def test_openai_stream_without_usage_option_sends_none(
    gpt: openai.OpenAI, replies: Replies
) -> None:
    replies.next = Reply(text="done")
    chunks = list(gpt.chat.completions.create(**ask_gpt(), stream=True))
    assert all(chunk.usage is None for chunk in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "done"
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_openai_overflow_is_a_context_overflow(
    gpt: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    request = ask_gpt("word " * 3_000)
    with pytest.raises(openai.BadRequestError) as raised:
        gpt.chat.completions.create(**request)
    assert raised.value.code == "context_length_exceeded"

    mapping = map_sdk_errors(openai, "openai", "OPENAI_API_KEY")
    with pytest.raises(ContextOverflowError) as mapped, mapping:
        gpt.chat.completions.create(**request, stream=True)
    assert mapped.value.limit == 2_000
    refused = upstream.requests[-1].input_tokens
    assert refused is not None and mapped.value.prompt_tokens == refused > 2_000


def test_openai_models(gpt: openai.OpenAI) -> None:
    assert [model.id for model in gpt.models.list()] == ["scripted"]


def test_unknown_paths_are_recorded_and_refused(base_url: str, upstream: ScriptedUpstream) -> None:
    client = anthropic.Anthropic(base_url=base_url, api_key="dummy", max_retries=0)
    with pytest.raises(anthropic.NotFoundError):
        client.post("/v1/files", cast_to=object, body={"x": 1})
    [recorded] = upstream.requests
    assert (recorded.path, recorded.protocol, recorded.body) == ("/v1/files", None, {"x": 1})


def test_system_messages_inside_the_conversation_are_counted() -> None:
    # Claude Code sends `system` role messages inside `messages`; the upstream counts them.
    counter = default_counter("anthropic")
    plain = ask_claude()
    with_system = ask_claude()
    reminder = "Reminder: the task tools have not been used recently. " * 20
    with_system["messages"] = [*plain["messages"], {"role": "system", "content": reminder}]
    added = count_input_tokens("anthropic", with_system, counter) - count_input_tokens(
        "anthropic", plain, counter
    )
    assert added >= counter.count_text(reminder)
