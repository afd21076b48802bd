"""OpenAIChat against a local server speaking the chat-completions API."""

from __future__ import annotations

import asyncio
import json
import socket

import openai
import pytest

from contextfold import (
    AuthenticationError,
    ContextOverflowError,
    Message,
    ProviderError,
    ProviderUnavailableError,
    RateLimitError,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from contextfold.providers import (
    ChatRequest,
    OpenAIChat,
    RetryPolicy,
    StreamDone,
    TextDelta,
    ThinkingDelta,
    ToolCallStarted,
)
from tests.providers.conftest import LocalServer, Reply, Sleeps, openai_sse
from tests.providers.payloads import (
    READ_FILE,
    openai_chunk,
    openai_completion,
    openai_error,
    openai_tool_call,
    openai_usage,
)


def make_model(server: LocalServer, retry: RetryPolicy, **kwargs: object) -> OpenAIChat:
    return OpenAIChat("gpt-4.1-mini", base_url=f"{server.url}/v1", retry=retry, **kwargs)  # type: ignore[arg-type]


def ask(text: str = "Hello", **kwargs: object) -> ChatRequest:
    return ChatRequest(messages=(Message.user(text),), **kwargs)  # type: ignore[arg-type]


# -- plain calls -----------------------------------------------------------------------------------


def test_text_reply_with_usage_and_what_was_sent(server: LocalServer, retry: RetryPolicy) -> None:
    server.add(Reply(json=openai_completion("Hi there!", usage=openai_usage(1200, 8, cached=1024))))
    model = make_model(server, retry)

    response = model.complete(ask(system="You are terse.", max_tokens=256, temperature=0.2))

    assert response.text == "Hi there!"
    assert response.usage == Usage(input_tokens=1200, output_tokens=8, cache_read_tokens=1024)
    assert response.message.meta.usage == response.usage
    assert response.stop_reason == "stop"
    assert response.model == "gpt-4.1-mini-2025-04-14"
    [sent] = server.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.json == {
        "model": "gpt-4.1-mini",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Hello"},
        ],
        "max_tokens": 256,
        "temperature": 0.2,
    }


def test_official_openai_gets_max_completion_tokens(
    server: LocalServer, retry: RetryPolicy
) -> None:
    # No base_url means OpenAI itself, whose newer models refuse ``max_tokens``; the injected
    # client points at the local server so that nothing leaves the machine.
    server.add(Reply(json=openai_completion("ok")))
    client = openai.OpenAI(api_key="sk-test", base_url=f"{server.url}/v1")
    model = OpenAIChat("gpt-5", client=client, retry=retry)

    model.complete(ask(max_tokens=100))

    assert model.provider == "openai"
    assert server.bodies[0]["max_completion_tokens"] == 100
    assert "max_tokens" not in server.bodies[0]


def test_several_tool_calls_and_prompt_cache_key(server: LocalServer, retry: RetryPolicy) -> None:
    calls = [
        openai_tool_call("call_a", "read_file", '{"path":"a.py"}'),
        openai_tool_call("call_b", "read_file", '{"path":"b.py"}'),
        openai_tool_call("call_c", "read_file", '{"path": '),
    ]
    server.add(Reply(json=openai_completion(None, calls, finish_reason="tool_calls")))
    model = make_model(server, retry)

    response = model.complete(ask(tools=(READ_FILE,), prompt_cache_key="session-42"))

    assert response.tool_calls == (
        ToolCallPart("call_a", "read_file", '{"path":"a.py"}'),
        ToolCallPart("call_b", "read_file", '{"path":"b.py"}'),
        ToolCallPart("call_c", "read_file", '{"path": '),
    )
    assert "invalid_arguments" in response.message.meta.flags  # the third is not valid JSON
    assert response.stop_reason == "tool_calls"
    body = server.bodies[0]
    assert body["prompt_cache_key"] == "session-42"
    assert body["tools"] == [READ_FILE.to_openai()]


def test_prompt_cache_key_is_left_out_when_unset(server: LocalServer, retry: RetryPolicy) -> None:
    server.add(Reply(json=openai_completion("ok")))
    make_model(server, retry).complete(ask())
    assert "prompt_cache_key" not in server.bodies[0]


def test_extra_fields_reach_the_body(server: LocalServer, retry: RetryPolicy) -> None:
    server.add(Reply(json=openai_completion("ok")))
    make_model(server, retry).complete(ask(extra={"reasoning_effort": "low"}, stop=("END",)))
    assert server.bodies[0]["reasoning_effort"] == "low"
    assert server.bodies[0]["stop"] == ["END"]


# -- streaming -------------------------------------------------------------------------------------


def streamed_tool_calls() -> Reply:
    """Text, then two tool calls whose arguments arrive in pieces, then the usage chunk."""
    return openai_sse(
        [
            openai_chunk({"role": "assistant", "content": ""}),
            openai_chunk({"content": "Reading "}),
            openai_chunk({"content": "both files."}),
            openai_chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "read_file", "arguments": ""},
                        }
                    ]
                }
            ),
            openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"pa'}}]}),
            openai_chunk(
                {
                    "tool_calls": [
                        {
                            "index": 1,
                            "id": "call_2",
                            "type": "function",
                            "function": {"name": "read_file", "arguments": '{"path"'},
                        }
                    ]
                }
            ),
            openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'th":"a.py"}'}}]}),
            openai_chunk({"tool_calls": [{"index": 1, "function": {"arguments": ':"b.py"}'}}]}),
            openai_chunk({}, finish_reason="tool_calls"),
            openai_chunk(choices=False, usage=openai_usage(900, 40, cached=512)),
        ]
    )


def test_stream_assembles_text_tool_calls_and_final_usage(
    server: LocalServer, retry: RetryPolicy
) -> None:
    server.add(streamed_tool_calls())
    model = make_model(server, retry)

    events = list(model.stream(ask(tools=(READ_FILE,))))

    assert events[:2] == [TextDelta("Reading "), TextDelta("both files.")]
    assert [e for e in events if isinstance(e, ToolCallStarted)] == [
        ToolCallStarted("call_1", "read_file"),
        ToolCallStarted("call_2", "read_file"),
    ]
    done = events[-1]
    assert isinstance(done, StreamDone)
    response = done.response
    assert response.text == "Reading both files."
    assert response.tool_calls == (
        ToolCallPart("call_1", "read_file", '{"path":"a.py"}'),
        ToolCallPart("call_2", "read_file", '{"path":"b.py"}'),
    )
    assert response.usage == Usage(900, 40, cache_read_tokens=512)
    assert response.message.meta.usage == response.usage
    assert response.stop_reason == "tool_calls"
    body = server.bodies[0]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


def test_stream_reasoning_becomes_thinking(server: LocalServer, retry: RetryPolicy) -> None:
    # DeepSeek and vLLM send ``reasoning_content``; Ollama and OpenRouter send ``reasoning``.
    server.add(
        openai_sse(
            [
                openai_chunk({"role": "assistant", "reasoning_content": "Two plus "}),
                openai_chunk({"reasoning": "two is four."}),
                openai_chunk({"content": "4"}, finish_reason="stop"),
                openai_chunk(choices=False, usage=openai_usage(20, 9)),
            ]
        )
    )
    events = list(make_model(server, retry).stream(ask("2+2?")))

    assert events[:3] == [ThinkingDelta("Two plus "), ThinkingDelta("two is four."), TextDelta("4")]
    response = events[-1].response  # type: ignore[union-attr]
    assert response.message.parts[0] == ThinkingPart("Two plus two is four.")
    assert response.text == "4"


def test_stream_retries_a_failure_before_the_first_event(
    server: LocalServer, retry: RetryPolicy, sleeps: Sleeps
) -> None:
    server.add(Reply(503, openai_error("The server is overloaded", type="server_error")))
    server.add(streamed_tool_calls())

    events = list(make_model(server, retry).stream(ask()))

    assert isinstance(events[-1], StreamDone)
    assert len(server.requests) == 2
    assert len(sleeps.delays) == 1


def test_error_object_mid_stream_is_raised_after_output_not_retried(
    server: LocalServer, retry: RetryPolicy
) -> None:
    # vLLM reports a failure during generation as an error object in the event stream.
    error = {
        "error": {
            "object": "error",
            "message": "CUDA out of memory",
            "type": "InternalServerError",
            "param": None,
            "code": 500,
        }
    }
    server.add(openai_sse([openai_chunk({"role": "assistant", "content": "Hel"}), error]))
    seen: list[object] = []

    with pytest.raises(ProviderUnavailableError, match="CUDA out of memory"):
        for event in make_model(server, retry).stream(ask()):
            seen.append(event)

    assert seen == [TextDelta("Hel")]  # a retry would have repeated it
    assert len(server.requests) == 1


def test_async_complete_and_stream(server: LocalServer, retry: RetryPolicy, sleeps: Sleeps) -> None:
    server.add(
        Reply(
            429,
            openai_error("Rate limit reached", type="requests", code="rate_limit_exceeded"),
            headers={"retry-after": "3"},
        )
    )
    server.add(Reply(json=openai_completion("async hello")))
    server.add(streamed_tool_calls())
    model = make_model(server, retry)

    async def run() -> tuple[str, list[object]]:
        response = await model.acomplete(ask())
        events = [e async for e in model.astream(ask())]
        await model.aclose()
        return response.text, events

    text, events = asyncio.run(run())

    assert text == "async hello"
    assert sleeps.delays == [3.0]
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.response.usage == Usage(900, 40, cache_read_tokens=512)


# -- errors ----------------------------------------------------------------------------------------


def test_openai_overflow_carries_the_figures(server: LocalServer, retry: RetryPolicy) -> None:
    message = (
        "This model's maximum context length is 128000 tokens. However, your messages resulted "
        "in 131072 tokens. Please reduce the length of the messages."
    )
    server.add(Reply(400, openai_error(message, code="context_length_exceeded", param="messages")))

    with pytest.raises(ContextOverflowError) as caught:
        make_model(server, retry).complete(ask(max_tokens=4096))

    assert caught.value.prompt_tokens == 131072
    assert caught.value.limit == 128000
    assert not caught.value.max_tokens_adjustable
    assert caught.value.status == 400
    assert len(server.requests) == 1  # the caller compacts; no blind retry


def test_overflow_code_without_figures(server: LocalServer, retry: RetryPolicy) -> None:
    server.add(
        Reply(
            400,
            openai_error(
                "Your input exceeds the context window of this model.",
                code="context_length_exceeded",
            ),
        )
    )
    with pytest.raises(ContextOverflowError) as caught:
        make_model(server, retry).complete(ask())
    assert caught.value.prompt_tokens is None and caught.value.limit is None


def test_vllm_overflow_retries_once_with_lower_max_tokens(
    server: LocalServer, retry: RetryPolicy
) -> None:
    # vLLM's body has no "error" wrapper in older versions.
    message = (
        "This model's maximum context length is 32768 tokens. However, you requested 34768 "
        "tokens (26768 in the messages, 8000 in the completion). Please reduce the length of "
        "the messages or completion."
    )
    server.add(
        Reply(
            400,
            {
                "object": "error",
                "message": message,
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            },
        )
    )
    server.add(Reply(json=openai_completion("fits now")))

    response = make_model(server, retry).complete(ask(max_tokens=8000))

    assert response.text == "fits now"
    assert [b["max_tokens"] for b in server.bodies] == [8000, 32768 - 26768 - 16]


def test_vllm_new_wording_and_a_second_overflow_is_raised(
    server: LocalServer, retry: RetryPolicy
) -> None:
    message = (
        "You passed 30721 input tokens and requested 2048 output tokens. However, the model's "
        "context length is only 32768 tokens, resulting in a maximum input length of 30720 "
        "tokens. Please reduce the length of the input prompt. (parameter=input_tokens, "
        "value=30721)"
    )
    server.add(
        Reply(
            400,
            {
                "error": {
                    "message": message,
                    "type": "BadRequestError",
                    "param": "input_tokens",
                    "code": 400,
                }
            },
        )
    )
    server.add(
        Reply(
            400,
            {
                "error": {
                    "message": message,
                    "type": "BadRequestError",
                    "param": "input_tokens",
                    "code": 400,
                }
            },
        )
    )
    # The prompt alone fits (30721 < 32768): one retry with the reply budget that fits. When the
    # server still refuses, the overflow goes to the caller rather than round a loop.
    with pytest.raises(ContextOverflowError) as caught:
        make_model(server, retry).complete(ask(max_tokens=2048))
    assert (caught.value.prompt_tokens, caught.value.limit) == (30721, 32768)
    assert [b["max_tokens"] for b in server.bodies] == [2048, 32768 - 30721 - 16]


def test_llamacpp_exceed_context_size_error(server: LocalServer, retry: RetryPolicy) -> None:
    body = {
        "error": {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 14429,
            "n_ctx": 8192,
        }
    }
    server.add(Reply(400, body))
    with pytest.raises(ContextOverflowError) as caught:
        make_model(server, retry).complete(ask())
    assert (caught.value.prompt_tokens, caught.value.limit) == (14429, 8192)


def test_429_with_retry_after_then_success(
    server: LocalServer, retry: RetryPolicy, sleeps: Sleeps
) -> None:
    server.add(
        Reply(
            429,
            openai_error(
                "Rate limit reached for gpt-4.1-mini", type="requests", code="rate_limit_exceeded"
            ),
            headers={"retry-after": "2"},
        )
    )
    server.add(Reply(json=openai_completion("after the wait")))

    response = make_model(server, retry).complete(ask())

    assert response.text == "after the wait"
    assert sleeps.delays == [2.0]


def test_429_that_keeps_coming_is_raised_with_retry_after(
    server: LocalServer, retry: RetryPolicy, sleeps: Sleeps
) -> None:
    for _ in range(4):
        server.add(
            Reply(
                429, openai_error("slow down", type="requests"), headers={"retry-after-ms": "1500"}
            )
        )

    with pytest.raises(RateLimitError) as caught:
        make_model(server, retry).complete(ask())

    assert caught.value.retry_after == 1.5
    assert caught.value.status == 429
    assert len(server.requests) == 4
    assert sleeps.delays == [1.5, 1.5, 1.5]


def test_503_is_retried_with_backoff_then_unavailable(server: LocalServer, sleeps: Sleeps) -> None:
    retry = RetryPolicy(
        max_attempts=3, backoff_base=1.0, jitter=0.5, sleep=sleeps.sleep, asleep=sleeps.asleep
    )
    for _ in range(3):
        server.add(Reply(503, openai_error("The engine is overloaded", type="server_error")))

    with pytest.raises(ProviderUnavailableError) as caught:
        make_model(server, retry).complete(ask())

    assert "after 3 attempts" in str(caught.value)
    assert caught.value.status == 503
    assert len(server.requests) == 3
    first, second = sleeps.delays
    assert 0.5 <= first <= 1.0 and 1.0 <= second <= 2.0  # doubling, up to half taken off


def test_connection_refused_is_unavailable_after_retries(sleeps: Sleeps) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    retry = RetryPolicy(max_attempts=2, sleep=sleeps.sleep, asleep=sleeps.asleep)
    model = OpenAIChat("m", base_url=f"http://127.0.0.1:{port}/v1", retry=retry)

    with pytest.raises(ProviderUnavailableError, match="could not connect"):
        model.complete(ask())
    assert len(sleeps.delays) == 1


def test_401_names_the_env_var_and_is_not_retried(
    server: LocalServer, retry: RetryPolicy, sleeps: Sleeps
) -> None:
    server.add(
        Reply(401, openai_error("Incorrect API key provided: sk-abc.", code="invalid_api_key"))
    )
    model = OpenAIChat(
        "m",
        base_url=f"{server.url}/v1",
        api_key="sk-abc",
        api_key_env="OPENROUTER_API_KEY",
        retry=retry,
    )

    with pytest.raises(AuthenticationError) as caught:
        model.complete(ask())

    assert caught.value.env_var == "OPENROUTER_API_KEY"
    assert "OPENROUTER_API_KEY" in str(caught.value)
    assert len(server.requests) == 1 and sleeps.delays == []


def test_missing_key_for_openai_fails_before_any_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(AuthenticationError, match="OPENAI_API_KEY"):
        OpenAIChat("gpt-4.1").complete(ask())


def test_other_client_errors_are_plain_provider_errors(
    server: LocalServer, retry: RetryPolicy
) -> None:
    server.add(Reply(404, openai_error("The model `nope` does not exist", code="model_not_found")))
    with pytest.raises(ProviderError, match="does not exist") as caught:
        make_model(server, retry).complete(ask())
    assert type(caught.value) is ProviderError
    assert caught.value.status == 404


def test_timeout_is_unavailable(server: LocalServer, sleeps: Sleeps) -> None:
    server.add(Reply(json=openai_completion("too late"), delay=1.0))
    retry = RetryPolicy(max_attempts=1, sleep=sleeps.sleep, asleep=sleeps.asleep)
    model = OpenAIChat("m", base_url=f"{server.url}/v1", timeout=0.05, retry=retry)

    with pytest.raises(ProviderUnavailableError, match="timed out"):
        model.complete(ask())


def test_request_json_is_what_the_wire_adapter_renders(
    server: LocalServer, retry: RetryPolicy
) -> None:
    history = (
        Message.user("read a.py"),
        Message.assistant(tool_calls=[ToolCallPart("call_1", "read_file", '{"path":"a.py"}')]),
        Message.tool(ToolResultPart("call_1", "read_file", "print('hi')")),
    )
    server.add(Reply(json=openai_completion("done")))
    make_model(server, retry).complete(ChatRequest(messages=history))
    sent = server.bodies[0]["messages"]
    assert sent[1]["tool_calls"][0]["function"]["arguments"] == '{"path":"a.py"}'
    assert sent[2] == {"role": "tool", "tool_call_id": "call_1", "content": "print('hi')"}
    assert json.dumps(sent)  # plain JSON, nothing SDK-specific
