"""What OpenAIChat sends and reads so that every OpenAI-compatible server works: content of
tool-calling turns, tool_choice, and usage when the server reports none."""

from __future__ import annotations

import warnings

import pytest

from contextfold import Message, ToolCallPart, ToolResultPart, Usage
from contextfold.providers import (
    ChatRequest,
    OpenAIChat,
    RetryPolicy,
    StreamDone,
    UsageEstimatedWarning,
)
from contextfold.tokens.counters import HeuristicCounter
from tests.providers.conftest import LocalServer, Reply, openai_sse
from tests.providers.payloads import READ_FILE, openai_chunk, openai_completion

TOOL_ROUND = (
    Message.user("read a.py"),
    Message.assistant(tool_calls=[ToolCallPart("call_1", "read_file", '{"path":"a.py"}')]),
    Message.tool(ToolResultPart("call_1", "read_file", "print('hi')")),
)


def make_model(server: LocalServer, retry: RetryPolicy, **kwargs: object) -> OpenAIChat:
    return OpenAIChat("local-model", base_url=f"{server.url}/v1", retry=retry, **kwargs)  # type: ignore[arg-type]


def test_a_tool_calling_turn_without_text_sends_empty_content_not_null(
    server: LocalServer, retry: RetryPolicy
) -> None:
    # llama-cpp-python's server answers HTTP 500 to "content": null; "" is accepted everywhere.
    server.add(Reply(json=openai_completion("done")))
    make_model(server, retry).complete(ChatRequest(messages=TOOL_ROUND, tools=(READ_FILE,)))
    assistant = server.bodies[0]["messages"][1]
    assert assistant["role"] == "assistant"
    assert assistant["content"] == ""
    assert assistant["tool_calls"][0]["id"] == "call_1"


def test_tools_go_with_tool_choice_auto(server: LocalServer, retry: RetryPolicy) -> None:
    server.add(Reply(json=openai_completion("a")), Reply(json=openai_completion("b")))
    model = make_model(server, retry)
    model.complete(ChatRequest(messages=TOOL_ROUND, tools=(READ_FILE,)))
    model.complete(ChatRequest(messages=(Message.user("no tools"),)))
    with_tools, without = server.bodies
    assert with_tools["tool_choice"] == "auto"
    assert "tool_choice" not in without and "tools" not in without


def test_extra_can_still_choose_another_tool_choice(
    server: LocalServer, retry: RetryPolicy
) -> None:
    server.add(Reply(json=openai_completion("a")))
    make_model(server, retry).complete(
        ChatRequest(messages=TOOL_ROUND, tools=(READ_FILE,), extra={"tool_choice": "required"})
    )
    assert server.bodies[0]["tool_choice"] == "required"


def stream_without_usage() -> Reply:
    return openai_sse(
        [
            openai_chunk({"role": "assistant", "content": ""}),
            openai_chunk({"content": "Here is the answer to your question."}),
            openai_chunk({}, finish_reason="stop"),
        ]
    )


def test_a_stream_without_usage_is_counted_marked_estimated_and_warned_once(
    server: LocalServer, retry: RetryPolicy
) -> None:
    server.add(stream_without_usage(), stream_without_usage())
    counter = HeuristicCounter()
    model = make_model(server, retry, token_counter=counter)
    request = ChatRequest(
        messages=(Message.user("What is in a.py? " * 20),), system="Be brief.", tools=(READ_FILE,)
    )

    with pytest.warns(UsageEstimatedWarning, match="no token usage") as caught:
        [*_, first] = model.stream(request)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per model, not once per call
        [*_, second] = model.stream(request)

    assert len(caught) == 1
    assert server.bodies[0]["stream_options"] == {"include_usage": True}  # asked for it
    for done in (first, second):
        assert isinstance(done, StreamDone)
        usage = done.response.usage
        assert usage is not None and usage.estimated
        assert usage.input_tokens == counter.count_request(
            request.messages, system=request.system_text, tools=request.tools
        )
        assert usage.output_tokens == counter.count_message(done.response.message)
        assert done.response.message.meta.usage == usage


def test_a_completion_without_usage_is_counted_too(server: LocalServer, retry: RetryPolicy) -> None:
    body = openai_completion("short")
    del body["usage"]
    server.add(Reply(json=body))
    with pytest.warns(UsageEstimatedWarning):
        response = make_model(server, retry).complete(ChatRequest(messages=(Message.user("hi"),)))
    assert response.usage is not None and response.usage.estimated
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0


def test_reported_usage_is_not_estimated(server: LocalServer, retry: RetryPolicy) -> None:
    server.add(Reply(json=openai_completion("ok")))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        response = make_model(server, retry).complete(ChatRequest(messages=(Message.user("hi"),)))
    assert response.usage == Usage(19, 10)
    assert not response.usage.estimated


def test_estimated_usage_survives_a_round_trip_and_marks_sums() -> None:
    usage = Usage(100, 5, estimated=True)
    assert Usage.from_dict(usage.to_dict()) == usage
    assert "estimated" not in Usage(1, 1).to_dict()  # stored reports keep their old form
    assert (usage + Usage(1, 1)).estimated
