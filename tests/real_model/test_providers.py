"""The provider layer against a real llama.cpp server (Gemma 3 270M): what the server says does
not matter, the plumbing does. Replies are kept to a few tokens so the tier stays fast."""

from __future__ import annotations

import asyncio
import warnings

import pytest

from contextfold import (
    ContextOverflowError,
    Message,
    ProviderError,
    ToolCallPart,
    ToolResultPart,
)
from contextfold.providers import (
    ChatRequest,
    ContextWindowWarning,
    OllamaContextWarning,
    OpenAIChat,
    RetryPolicy,
    StreamDone,
    UsageEstimatedWarning,
    check_ollama_context,
    model_from_name,
    probe_server_window,
    served_window,
)
from tests.providers.payloads import READ_FILE
from tests.real_model.conftest import LlamaServerFactory

REPLY_TOKENS = 4
"""max_tokens of every request: enough to see a reply, cheap on 2 cores."""

OVERFLOW_N_CTX = 1024
"""The small server the overflow tests fill (an overflow is found before any evaluation)."""


def no_retry_sleep() -> RetryPolicy:
    return RetryPolicy(sleep=lambda _: None)


def model_at(server_url: str) -> OpenAIChat:
    return OpenAIChat(
        "gemma-3-270m", base_url=server_url, provider="llamacpp", retry=no_retry_sleep()
    )


def ask(text: str = "Say hello.", **kwargs: object) -> ChatRequest:
    return ChatRequest(messages=(Message.user(text),), max_tokens=REPLY_TOKENS, **kwargs)  # type: ignore[arg-type]


def test_complete_reports_the_servers_usage(llama_server: LlamaServerFactory) -> None:
    server = llama_server()
    response = model_at(server.base_url).complete(ask(system="Be brief."))
    usage = response.usage
    assert usage is not None and not usage.estimated
    assert usage.input_tokens > 0 and 0 < usage.output_tokens <= REPLY_TOKENS
    assert response.message.meta.usage == usage


def test_stream_reports_usage_in_its_last_event(llama_server: LlamaServerFactory) -> None:
    server = llama_server()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UsageEstimatedWarning)  # the server's own figures
        events = list(model_at(server.base_url).stream(ask()))
    done = events[-1]
    assert isinstance(done, StreamDone)
    usage = done.response.usage
    assert usage is not None and not usage.estimated
    assert usage.input_tokens > 0 and usage.output_tokens > 0


def test_async_stream_reports_usage(llama_server: LlamaServerFactory) -> None:
    server = llama_server()

    async def run() -> StreamDone:
        model = model_at(server.base_url)
        try:
            events = [event async for event in model.astream(ask())]
        finally:
            await model.aclose()
        done = events[-1]
        assert isinstance(done, StreamDone)
        return done

    usage = asyncio.run(run()).response.usage
    assert usage is not None and usage.input_tokens > 0 and not usage.estimated


def test_a_stream_without_usage_is_counted_and_marked(llama_server: LlamaServerFactory) -> None:
    # A server that sends no usage, played by this one told not to include it.
    server = llama_server()
    request = ask(extra={"stream_options": {"include_usage": False}})
    with pytest.warns(UsageEstimatedWarning):
        done = list(model_at(server.base_url).stream(request))[-1]
    assert isinstance(done, StreamDone)
    usage = done.response.usage
    assert usage is not None and usage.estimated and usage.input_tokens > 0


def test_a_tool_call_round_trip_is_accepted(llama_server: LlamaServerFactory) -> None:
    server = llama_server()
    history = (
        Message.user("What is in a.txt?"),
        Message.assistant(tool_calls=[ToolCallPart("call_1", "read_file", '{"path":"a.txt"}')]),
        Message.tool(ToolResultPart("call_1", "read_file", "hello world")),
    )
    model = model_at(server.base_url)
    sent = model.request_kwargs(ChatRequest(messages=history, tools=(READ_FILE,)))
    assert sent["messages"][1]["content"] == "" and sent["tool_choice"] == "auto"

    response = model.complete(
        ChatRequest(messages=history, tools=(READ_FILE,), max_tokens=REPLY_TOKENS)
    )

    assert response.usage is not None and response.usage.input_tokens > 0


def test_overflow_carries_the_servers_window_and_prompt(llama_server: LlamaServerFactory) -> None:
    server = llama_server(OVERFLOW_N_CTX)
    with pytest.raises(ContextOverflowError) as caught:
        model_at(server.base_url).complete(ask("hello " * 1500))
    error = caught.value
    assert error.limit == OVERFLOW_N_CTX
    assert error.prompt_tokens is not None and error.prompt_tokens > OVERFLOW_N_CTX
    assert error.status == 400
    assert not error.max_tokens_adjustable  # only a smaller prompt fits


def test_streamed_overflow_is_the_same_error(llama_server: LlamaServerFactory) -> None:
    server = llama_server(OVERFLOW_N_CTX)
    with pytest.raises(ContextOverflowError) as caught:
        list(model_at(server.base_url).stream(ask("hello " * 1500)))
    assert caught.value.limit == OVERFLOW_N_CTX


def test_props_give_the_servers_window(llama_server: LlamaServerFactory) -> None:
    server = llama_server(OVERFLOW_N_CTX)
    assert probe_server_window(server.base_url).window == OVERFLOW_N_CTX
    found = served_window("llamacpp/gemma-3-270m", base_url=server.base_url)
    assert found is not None and found.window == OVERFLOW_N_CTX


def test_a_plan_larger_than_the_server_warns_and_goes_on(llama_server: LlamaServerFactory) -> None:
    server = llama_server(OVERFLOW_N_CTX)
    with pytest.warns(ContextWindowWarning, match=f"--window {OVERFLOW_N_CTX}"):
        model = model_from_name(
            "llamacpp/gemma-3-270m", base_url=server.base_url, context_window=2 * OVERFLOW_N_CTX
        )
    assert model.complete(ask()).text is not None  # it still works within the real window


def test_ollama_pointed_at_llamacpp_says_so_and_goes_on(llama_server: LlamaServerFactory) -> None:
    server = llama_server(OVERFLOW_N_CTX)
    with pytest.warns(OllamaContextWarning) as caught:
        model = model_from_name(
            "ollama/gemma-3-270m", base_url=server.base_url, context_window=2 * OVERFLOW_N_CTX
        )
    text = str(caught[0].message)
    assert "/api/show" in text and "404" in text
    assert f"{OVERFLOW_N_CTX} tokens per request" in text and "--window" in text
    info = check_ollama_context("gemma-3-270m", 512, base_url=server.base_url, warn=False)
    assert (info.window, info.source, info.truncates) == (OVERFLOW_N_CTX, "server", False)
    assert model.complete(ask()).usage is not None  # and the chat itself works


def test_a_repeating_server_error_is_tried_twice_not_four_times(
    llama_server: LlamaServerFactory,
) -> None:
    # Without Jinja, llama.cpp refuses every request with tools: HTTP 500, the same each time.
    server = llama_server(OVERFLOW_N_CTX, template="gemma", jinja=False)
    with pytest.raises(ProviderError, match=r"--jinja.*after 2 attempts") as caught:
        model_at(server.base_url).complete(ask(tools=(READ_FILE,)))
    assert caught.value.status == 500
