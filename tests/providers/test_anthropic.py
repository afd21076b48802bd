"""AnthropicChat against a local server speaking the messages API."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from contextfold import (
    AuthenticationError,
    ContextOverflowError,
    Message,
    Meta,
    ProviderUnavailableError,
    RateLimitError,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    Usage,
)
from contextfold.chat import (
    Finished,
    ThinkingSignature,
    ToolCallDelta,
    ToolCallDone,
    UsageReport,
)
from contextfold.providers import (
    AnthropicChat,
    ChatRequest,
    RetryPolicy,
    StreamDone,
    SystemBlock,
    TextDelta,
    ThinkingDelta,
    ToolCallStarted,
)
from contextfold.providers.anthropic import DEFAULT_MAX_TOKENS
from tests.providers.conftest import LocalServer, Reply, Sleeps, anthropic_sse
from tests.providers.payloads import (
    anthropic_error,
    anthropic_message,
    anthropic_stream_start,
    anthropic_usage,
)

EPHEMERAL = {"type": "ephemeral"}
TOOLS = (
    ToolSpec("read_file", "Read a file", {"type": "object", "properties": {"path": {}}}),
    ToolSpec("shell", "Run a command", {"type": "object", "properties": {"cmd": {}}}),
)


def make_model(server: LocalServer, retry: RetryPolicy) -> AnthropicChat:
    return AnthropicChat(
        "claude-test-model", base_url=server.url, api_key="sk-ant-test", retry=retry
    )


def ask(text: str = "Hello", **kwargs: Any) -> ChatRequest:
    return ChatRequest(messages=(Message.user(text),), **kwargs)


def markers(body: dict[str, Any]) -> list[str]:
    """Where the cache_control markers sit, as readable labels."""
    found = [f"tool:{t['name']}" for t in body.get("tools", []) if "cache_control" in t]
    found += [f"system:{b['text']}" for b in body.get("system", []) if "cache_control" in b]
    for i, message in enumerate(body["messages"]):
        for block in message["content"]:
            if "cache_control" in block:
                found.append(f"message:{i}")
    return found


# -- plain calls -----------------------------------------------------------------------------------


def test_text_reply_usage_counts_cached_prompt_tokens(
    server: LocalServer, retry: RetryPolicy
) -> None:
    usage = anthropic_usage(50, 12, cache_write=2000, cache_read=30000)
    server.add(Reply(json=anthropic_message([{"type": "text", "text": "Hi!"}], usage=usage)))

    response = make_model(server, retry).complete(ask())

    assert response.text == "Hi!"
    assert response.usage == Usage(32050, 12, cache_read_tokens=30000, cache_write_tokens=2000)
    assert response.message.meta.usage == response.usage
    assert response.stop_reason == "end_turn"
    [sent] = server.requests
    assert sent.path == "/v1/messages"
    # The key travels as x-api-key or, with anthropic>=2, as a bearer token.
    credentials = (sent.headers.get("x-api-key"), sent.headers.get("authorization"))
    assert "sk-ant-test" in credentials or "Bearer sk-ant-test" in credentials
    assert sent.json["max_tokens"] == DEFAULT_MAX_TOKENS  # the API requires one
    assert sent.json["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Hello"}]}
    ]


def test_cache_control_on_system_blocks_last_tool_and_messages(
    server: LocalServer, retry: RetryPolicy
) -> None:
    server.add(Reply(json=anthropic_message([{"type": "text", "text": "ok"}])))
    history = (
        Message.user("first"),
        Message.assistant("answer"),
        Message.user("hidden note", meta=Meta(agent_visible=False)),
        Message.user("second"),
    )
    request = ChatRequest(
        messages=history,
        system=(SystemBlock("base prompt", cache=True), SystemBlock(""), SystemBlock("status")),
        tools=TOOLS,
        cache_tools=True,
        message_breakpoints=(2, -1),  # the hidden message's breakpoint moves to the one before
        max_tokens=1000,
        temperature=0.3,
        stop=("STOP",),
    )

    make_model(server, retry).complete(request)

    body = server.bodies[0]
    assert body["system"] == [
        {"type": "text", "text": "base prompt", "cache_control": EPHEMERAL},
        {"type": "text", "text": "status"},
    ]
    assert [t["name"] for t in body["tools"]] == ["read_file", "shell"]
    assert markers(body) == ["tool:shell", "system:base prompt", "message:1", "message:2"]
    assert body["max_tokens"] == 1000
    assert body["temperature"] == 0.3
    assert body["stop_sequences"] == ["STOP"]


def test_at_most_four_breakpoints_keep_the_furthest_and_the_stable_prefix(
    server: LocalServer, retry: RetryPolicy
) -> None:
    server.add(Reply(json=anthropic_message([{"type": "text", "text": "ok"}])))
    history = tuple(
        Message.user(f"u{i}") if i % 2 == 0 else Message.assistant(f"a{i}") for i in range(6)
    )
    request = ChatRequest(
        messages=history,
        system=(
            SystemBlock("s0", cache=True),
            SystemBlock("s1", cache=True),
            SystemBlock("s2", cache=True),
        ),
        tools=TOOLS,
        cache_tools=True,
        message_breakpoints=(1, 3, 5),
    )

    make_model(server, retry).complete(request)

    # Seven asked for: kept the last message (covers the most), the end of the system prompt
    # (survives compaction), then the later message breakpoints.
    assert markers(server.bodies[0]) == ["system:s2", "message:1", "message:3", "message:5"]


def test_thinking_with_signature_and_redacted_thinking_are_kept(
    server: LocalServer, retry: RetryPolicy
) -> None:
    content = [
        {
            "type": "thinking",
            "thinking": "The user wants a.py read.",
            "signature": "EqQBCgIYAhIM1gbcDa9GJwZA",
        },
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
        {"type": "text", "text": "Let me read it."},
        {"type": "tool_use", "id": "toolu_01A", "name": "read_file", "input": {"path": "a.py"}},
        {"type": "tool_use", "id": "toolu_01B", "name": "shell", "input": {"cmd": "ls"}},
    ]
    server.add(Reply(json=anthropic_message(content, stop_reason="tool_use")))
    server.add(Reply(json=anthropic_message([{"type": "text", "text": "Done."}])))
    model = make_model(server, retry)

    first = model.complete(ask("read a.py", tools=TOOLS))

    assert first.message.parts == (
        ThinkingPart("The user wants a.py read.", signature="EqQBCgIYAhIM1gbcDa9GJwZA"),
        ThinkingPart("", redacted_data="EmwKAhgBEgy3va3pzix/LafPsn4a"),
        TextPart("Let me read it."),
        ToolCallPart("toolu_01A", "read_file", '{"path":"a.py"}'),
        ToolCallPart("toolu_01B", "shell", '{"cmd":"ls"}'),
    )
    assert first.stop_reason == "tool_use"

    # The tool loop sends the thinking back unchanged, as the API requires.
    results = Message.tool(
        ToolResultPart("toolu_01A", "read_file", "print(1)"),
        ToolResultPart("toolu_01B", "shell", "a.py"),
    )
    model.complete(
        ChatRequest(messages=(Message.user("read a.py"), first.message, results), tools=TOOLS)
    )
    assistant_turn = server.bodies[1]["messages"][1]
    assert assistant_turn["content"][:2] == content[:2]
    assert [b["type"] for b in server.bodies[1]["messages"][2]["content"]] == [
        "tool_result",
        "tool_result",
    ]


# -- streaming -------------------------------------------------------------------------------------


def stream_events() -> list[dict[str, Any]]:
    return [
        anthropic_stream_start(anthropic_usage(472, 2, cache_read=4000)),
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
        },
        {"type": "ping"},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "Need the "},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "file."},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "signature_delta", "signature": "ErUBCkYIARgC"},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "text_delta", "text": "Reading"},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "text_delta", "text": " it."},
        },
        {"type": "content_block_stop", "index": 1},
        {
            "type": "content_block_start",
            "index": 2,
            "content_block": {
                "type": "tool_use",
                "id": "toolu_01T",
                "name": "read_file",
                "input": {},
            },
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": ""},
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": '{"path": "sr'},
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": 'c/a.py"}'},
        },
        {"type": "content_block_stop", "index": 2},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 89},
        },
        {"type": "message_stop"},
    ]


def test_stream_assembles_thinking_text_tool_use_and_usage(
    server: LocalServer, retry: RetryPolicy
) -> None:
    server.add(anthropic_sse(stream_events()))

    events = list(make_model(server, retry).stream(ask(tools=TOOLS)))

    assert events[:-1] == [
        ThinkingDelta("Need the "),
        ThinkingDelta("file."),
        ThinkingSignature("ErUBCkYIARgC"),
        TextDelta("Reading"),
        TextDelta(" it."),
        ToolCallStarted("toolu_01T", "read_file"),
        ToolCallDelta("toolu_01T", '{"path": "sr'),
        ToolCallDelta("toolu_01T", 'c/a.py"}'),
        ToolCallDone("toolu_01T", '{"path": "src/a.py"}'),
        UsageReport(Usage(4472, 89, cache_read_tokens=4000)),
        Finished("tool_calls"),
    ]
    done = events[-1]
    assert isinstance(done, StreamDone)
    response = done.response
    assert response.message.parts == (
        ThinkingPart("Need the file.", signature="ErUBCkYIARgC"),
        TextPart("Reading it."),
        ToolCallPart("toolu_01T", "read_file", '{"path":"src/a.py"}'),
    )
    assert response.usage == Usage(4472, 89, cache_read_tokens=4000)
    assert response.stop_reason == "tool_use"
    assert response.model == "claude-test-model-20260101"
    assert server.bodies[0]["stream"] is True


def test_overloaded_error_event_before_any_output_is_retried(
    server: LocalServer, retry: RetryPolicy, sleeps: Sleeps
) -> None:
    server.add(
        anthropic_sse(
            [
                anthropic_stream_start(anthropic_usage(10, 1)),
                {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            ]
        )
    )
    server.add(anthropic_sse(stream_events()))

    events = list(make_model(server, retry).stream(ask()))

    assert isinstance(events[-1], StreamDone)
    assert len(server.requests) == 2
    assert len(sleeps.delays) == 1


def test_error_event_after_output_is_raised_not_retried(
    server: LocalServer, retry: RetryPolicy
) -> None:
    server.add(
        anthropic_sse(
            [
                anthropic_stream_start(anthropic_usage(10, 1)),
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": "Par"},
                },
                {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            ]
        )
    )
    seen: list[object] = []
    with pytest.raises(RateLimitError):
        for event in make_model(server, retry).stream(ask()):
            seen.append(event)
    assert seen == [TextDelta("Par")]  # a retry would have shown "Par" twice
    assert len(server.requests) == 1


def test_async_complete_and_stream(server: LocalServer, retry: RetryPolicy) -> None:
    server.add(Reply(json=anthropic_message([{"type": "text", "text": "async hi"}])))
    server.add(anthropic_sse(stream_events()))
    model = make_model(server, retry)

    async def run() -> tuple[str, list[object]]:
        response = await model.acomplete(ask())
        events = [e async for e in model.astream(ask())]
        await model.aclose()
        return response.text, events

    text, events = asyncio.run(run())

    assert text == "async hi"
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.response.text == "Reading it."


# -- errors ----------------------------------------------------------------------------------------


def test_prompt_too_long_carries_the_figures(server: LocalServer, retry: RetryPolicy) -> None:
    server.add(
        Reply(
            400,
            anthropic_error(
                "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"
            ),
        )
    )

    with pytest.raises(ContextOverflowError) as caught:
        make_model(server, retry).complete(ask(max_tokens=4000))

    assert (caught.value.prompt_tokens, caught.value.limit) == (210000, 200000)
    assert not caught.value.max_tokens_adjustable
    assert len(server.requests) == 1


def test_input_plus_max_tokens_overflow_retries_with_lower_max_tokens(
    server: LocalServer, retry: RetryPolicy
) -> None:
    message = (
        "input length and `max_tokens` exceed context limit: 178959 + 64000 > 200000, decrease "
        "input length or `max_tokens` and try again"
    )
    server.add(Reply(400, anthropic_error("invalid_request_error", message)))
    server.add(Reply(json=anthropic_message([{"type": "text", "text": "short answer"}])))

    response = make_model(server, retry).complete(ask(max_tokens=64000))

    assert response.text == "short answer"
    assert [b["max_tokens"] for b in server.bodies] == [64000, 200000 - 178959 - 16]


def test_adjustable_overflow_surfaces_when_retry_is_off(
    server: LocalServer, sleeps: Sleeps
) -> None:
    message = (
        "input length and `max_tokens` exceed context limit: 199759 + 8192 > 200000, decrease "
        "input length or `max_tokens` and try again"
    )
    server.add(Reply(400, anthropic_error("invalid_request_error", message)))
    retry = RetryPolicy(
        lower_max_tokens_on_overflow=False, sleep=sleeps.sleep, asleep=sleeps.asleep
    )

    with pytest.raises(ContextOverflowError) as caught:
        make_model(server, retry).complete(ask(max_tokens=8192))

    assert caught.value.max_tokens_adjustable
    assert (caught.value.prompt_tokens, caught.value.limit) == (199759, 200000)


def test_529_overloaded_is_a_rate_limit_that_is_retried(
    server: LocalServer, retry: RetryPolicy, sleeps: Sleeps
) -> None:
    server.add(Reply(529, anthropic_error("overloaded_error", "Overloaded")))
    server.add(
        Reply(
            429,
            anthropic_error(
                "rate_limit_error",
                "Number of request tokens has exceeded your per-minute rate limit",
            ),
            headers={"retry-after": "7"},
        )
    )
    server.add(Reply(json=anthropic_message([{"type": "text", "text": "finally"}])))

    response = make_model(server, retry).complete(ask())

    assert response.text == "finally"
    assert len(sleeps.delays) == 2
    assert sleeps.delays[1] == 7.0


def test_overloaded_to_the_end_raises_rate_limit_with_status(
    server: LocalServer, sleeps: Sleeps
) -> None:
    retry = RetryPolicy(max_attempts=2, sleep=sleeps.sleep, asleep=sleeps.asleep)
    server.add(Reply(529, anthropic_error("overloaded_error", "Overloaded")))
    server.add(Reply(529, anthropic_error("overloaded_error", "Overloaded")))

    with pytest.raises(RateLimitError, match="overloaded") as caught:
        make_model(server, retry).complete(ask())
    assert caught.value.status == 529


def test_long_retry_after_goes_to_the_caller(
    server: LocalServer, retry: RetryPolicy, sleeps: Sleeps
) -> None:
    server.add(
        Reply(
            429, anthropic_error("rate_limit_error", "slow down"), headers={"retry-after": "3600"}
        )
    )

    with pytest.raises(RateLimitError) as caught:
        make_model(server, retry).complete(ask())

    assert caught.value.retry_after == 3600
    assert sleeps.delays == []  # not slept through


def test_api_error_500_retried_once_then_unavailable(
    server: LocalServer, retry: RetryPolicy
) -> None:
    for _ in range(4):
        server.add(Reply(500, anthropic_error("api_error", "Internal server error")))

    with pytest.raises(ProviderUnavailableError, match="after 2 attempts"):
        make_model(server, retry).complete(ask())
    assert len(server.requests) == 2


def test_401_names_anthropic_api_key(server: LocalServer, retry: RetryPolicy) -> None:
    server.add(Reply(401, anthropic_error("authentication_error", "invalid x-api-key")))

    with pytest.raises(AuthenticationError) as caught:
        make_model(server, retry).complete(ask())

    assert caught.value.env_var == "ANTHROPIC_API_KEY"
    assert "ANTHROPIC_API_KEY" in str(caught.value)
    assert len(server.requests) == 1


def test_missing_key_fails_before_any_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(AuthenticationError, match="ANTHROPIC_API_KEY"):
        AnthropicChat("claude-test-model").complete(ask())
