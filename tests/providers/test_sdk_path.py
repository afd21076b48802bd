"""The official SDKs used directly with the engine (issue 15): ``request.to_openai(model=...)``
and ``request.to_anthropic(model=...)`` are complete keyword arguments for the SDKs, and
``session.add_assistant`` takes the SDKs' own replies, their reported usage anchoring the
session's estimates.

The replies are real SDK objects, built from the providers' documented JSON
(:mod:`tests.providers.payloads`) or returned by the SDK clients talking to a local server.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterator

import anthropic
import openai
import pytest
from anthropic.types import Message as AnthropicMessage
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from contextfold import (
    ContextEngine,
    ContextPolicy,
    Message,
    PreparedRequest,
    Session,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    Usage,
)
from contextfold.providers.anthropic import response_from_message
from contextfold.providers.openai import response_from_completion
from tests.providers.conftest import LocalServer, Reply, anthropic_sse
from tests.providers.payloads import (
    READ_FILE,
    anthropic_message,
    anthropic_usage,
    openai_chunk,
    openai_completion,
    openai_tool_call,
    openai_usage,
)
from tests.providers.test_anthropic import stream_events

SYSTEM = "You are a careful coding agent."
TASK = "The parser crashes on empty input; fix it."


def make_engine(model: str) -> ContextEngine:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # this machine's SQLite may warn about the WAL bug
        return ContextEngine(model, store=":memory:", policy=ContextPolicy(background=False))


@pytest.fixture
def engine() -> Iterator[ContextEngine]:
    engine = make_engine("openai/gpt-4.1-mini")
    yield engine
    engine.close()


@pytest.fixture
def claude_engine() -> Iterator[ContextEngine]:
    engine = make_engine("anthropic/claude-opus-4-5")
    yield engine
    engine.close()


def new_session(engine: ContextEngine) -> Session:
    session = engine.new_session(title="sdk path")
    session.add_user(TASK)
    return session


def read_call_completion(prompt_tokens: int = 4_321) -> ChatCompletion:
    return ChatCompletion.model_validate(
        openai_completion(
            None,
            [openai_tool_call("call_1", "read_file", '{"path": "parser.py"}')],
            finish_reason="tool_calls",
            usage=openai_usage(prompt_tokens, 25, cached=1_024),
        )
    )


def read_call_message() -> AnthropicMessage:
    return AnthropicMessage.model_validate(
        anthropic_message(
            [
                {"type": "thinking", "thinking": "Read it first.", "signature": "sig-abc"},
                {"type": "text", "text": "Reading the parser."},
                {
                    "type": "tool_use",
                    "id": "toolu_01",
                    "name": "read_file",
                    "input": {"path": "parser.py"},
                },
            ],
            stop_reason="tool_use",
            usage=anthropic_usage(1_200, 40, cache_write=3_000, cache_read=800),
        )
    )


# -- the keyword arguments -------------------------------------------------------------------------


def test_to_openai_and_to_anthropic_name_the_model_when_given(engine: ContextEngine) -> None:
    request = new_session(engine).prepare(system=SYSTEM, tools=[READ_FILE])

    assert request.to_openai(model="gpt-4.1-mini") == {
        "model": "gpt-4.1-mini",
        **request.to_openai(),
    }
    assert request.to_anthropic(model="claude-opus-4-5") == {
        "model": "claude-opus-4-5",
        **request.to_anthropic(),
    }
    assert "model" not in request.to_openai()  # the wire form alone, to inspect or measure


# -- the SDKs' replies ----------------------------------------------------------------------------


def test_add_assistant_takes_an_openai_chat_completion(engine: ContextEngine) -> None:
    session = new_session(engine)
    first = session.prepare(system=SYSTEM, tools=[READ_FILE])
    assert first.tokens < 2_000  # our own count, far below what the provider will report

    message = session.add_assistant(read_call_completion(prompt_tokens=4_321))

    [call] = message.tool_calls
    assert (call.call_id, call.name, call.args()) == ("call_1", "read_file", {"path": "parser.py"})
    assert message.meta.usage == Usage(4_321, 25, cache_read_tokens=1_024)
    assert session.view[-1] == message
    usage = session.usage()
    assert (usage.calls, usage.input_tokens, usage.output_tokens) == (1, 4_321, 25)
    # The reported size anchors the estimate of the next request: the call and its result on top.
    session.add_tool_result(call.call_id, "def parse(text):\n    return text.split()\n")
    following = session.prepare(system=SYSTEM, tools=[READ_FILE])
    assert 4_321 + 25 < following.tokens < 4_321 + 25 + 200


def test_add_assistant_takes_an_anthropic_message(engine: ContextEngine) -> None:
    session = new_session(engine)
    session.prepare(system=SYSTEM, tools=[READ_FILE])

    message = session.add_assistant(read_call_message())

    [call] = message.tool_calls
    assert (call.call_id, call.name, call.args()) == (
        "toolu_01",
        "read_file",
        {"path": "parser.py"},
    )
    assert message.text == "Reading the parser."
    [thinking] = message.parts_of(ThinkingPart)
    assert thinking.signature == "sig-abc"  # sent back unchanged on the next call, as required
    # Anthropic's input_tokens leaves the cached prompt out; the whole prompt is counted here.
    assert message.meta.usage == Usage(5_000, 40, cache_read_tokens=800, cache_write_tokens=3_000)
    assert session.usage().input_tokens == 5_000
    session.add_tool_result(call.call_id, "def parse(text):\n    return text.split()\n")
    assert session.prepare(system=SYSTEM, tools=[READ_FILE]).tokens > 5_000 + 40


def test_the_converters_take_the_sdk_object_or_its_json() -> None:
    for convert, reply in (
        (response_from_completion, read_call_completion()),
        (response_from_message, read_call_message()),
    ):
        from_object, from_json = convert(reply), convert(json.loads(reply.to_json()))
        assert from_object.message.parts == from_json.message.parts
        assert from_object.usage == from_json.usage is not None
        assert from_object.stop_reason == from_json.stop_reason in ("tool_calls", "tool_use")
        assert from_object.model == from_json.model == reply.model


def test_add_assistant_refuses_what_is_not_a_whole_reply(engine: ContextEngine) -> None:
    session = new_session(engine)
    session.prepare(system=SYSTEM)
    chunk = ChatCompletionChunk.model_validate(openai_chunk({"content": "Hel"}))

    with pytest.raises(TypeError, match="get_final_completion"):
        session.add_assistant(chunk)
    with pytest.raises(TypeError, match="OpenAI ChatCompletion or an Anthropic Message; got"):
        session.add_assistant({"role": "assistant", "content": "Hi"})
    assert len(session.view) == 1  # nothing was appended


# -- end to end: the SDK clients against a local server -------------------------------------------

FILE_TEXT = "def parse(text): ..."


def agent_loop(session: Session, call_model: Callable[[PreparedRequest], object]) -> Message:
    """The loop a user writes around an SDK client: prepare, call the model, add its reply as
    it comes, answer its tool calls; the final reply."""
    for _ in range(4):
        request = session.prepare(system=SYSTEM, tools=[READ_FILE])
        message = session.add_assistant(call_model(request))
        if not message.tool_calls:
            return message
        for call in message.tool_calls:
            session.add_tool_result(call.call_id, FILE_TEXT, name=call.name)
    raise AssertionError("the model never stopped calling tools")


def test_an_openai_client_loop_with_the_engine(engine: ContextEngine, server: LocalServer) -> None:
    server.add(
        Reply(json=read_call_completion().to_dict()),
        Reply(json=openai_completion("Fixed: empty input returns [].", usage=openai_usage(900, 9))),
    )
    client = openai.OpenAI(api_key="sk-test", base_url=f"{server.url}/v1", max_retries=0)
    session = new_session(engine)

    message = agent_loop(
        session,
        lambda request: client.chat.completions.create(**request.to_openai(model="gpt-4.1-mini")),
    )

    assert message.text == "Fixed: empty input returns []."
    first, second = server.bodies
    assert first["model"] == "gpt-4.1-mini"
    assert first["messages"][0] == {"role": "system", "content": SYSTEM}
    assert first["messages"][1] == {"role": "user", "content": TASK}
    assert first["max_completion_tokens"] > 0
    assert "read_file" in [t["function"]["name"] for t in first["tools"]]
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": FILE_TEXT,
    }
    assert session.usage().calls == 2 and session.usage().input_tokens == 4_321 + 900


def test_an_anthropic_client_loop_with_the_engine(
    claude_engine: ContextEngine, server: LocalServer
) -> None:
    done = anthropic_message(
        [{"type": "text", "text": "Fixed."}], usage=anthropic_usage(300, 5, cache_read=4_700)
    )
    server.add(Reply(json=read_call_message().to_dict()), Reply(json=done))
    # Claude's reply budget (tens of thousands of tokens) is more than the SDK lets a call that
    # does not stream wait for under its default timeout: it asks for a timeout of your own.
    client = anthropic.Anthropic(
        api_key="sk-ant-test", base_url=server.url, max_retries=0, timeout=600.0
    )
    session = new_session(claude_engine)

    message = agent_loop(
        session,
        lambda request: client.messages.create(**request.to_anthropic(model="claude-opus-4-5")),
    )

    assert message.text == "Fixed."
    first, second = server.bodies
    assert first["model"] == "claude-opus-4-5"
    reply_budget = first["max_tokens"]
    assert reply_budget == claude_engine.reserved_output > 21_333  # the SDK's non-streaming limit
    assert SYSTEM in json.dumps(first["system"])
    assert first["messages"][0]["role"] == "user"
    assistant, result = second["messages"][-2:]
    assert assistant["content"][0] == {
        "type": "thinking",
        "thinking": "Read it first.",
        "signature": "sig-abc",
    }
    [block] = [b for b in result["content"] if b["type"] == "tool_result"]
    assert block["tool_use_id"] == "toolu_01"
    assert session.usage().input_tokens == 5_000 + 5_000


def test_a_streamed_anthropic_reply_is_added_whole(
    claude_engine: ContextEngine, server: LocalServer
) -> None:
    """The SDK's stream helper assembles the reply; the session takes it as the adapter's own
    stream assembly would have made it."""
    server.add(anthropic_sse(stream_events()))
    client = anthropic.Anthropic(api_key="sk-ant-test", base_url=server.url, max_retries=0)
    session = new_session(claude_engine)
    request = session.prepare(system=SYSTEM, tools=[READ_FILE])

    with client.messages.stream(**request.to_anthropic(model="claude-opus-4-5")) as stream:
        message = session.add_assistant(stream.get_final_message())

    assert server.bodies[0]["stream"] is True
    thinking, text, call = message.parts
    assert thinking == ThinkingPart("Need the file.", signature="ErUBCkYIARgC")
    assert text == TextPart("Reading it.")
    assert isinstance(call, ToolCallPart)
    assert (call.call_id, call.name, call.args()) == (
        "toolu_01T",
        "read_file",
        {"path": "src/a.py"},
    )
    assert message.meta.usage == Usage(4_472, 89, cache_read_tokens=4_000)
