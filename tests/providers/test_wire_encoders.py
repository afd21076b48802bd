"""One wire encoder per provider: ``encode_request`` is pure, needs no SDK, and is what the
adapters send (their ``request_kwargs`` add only the model and the client's options)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold import Message, Meta, TextPart, ToolCallPart, ToolSpec
from contextfold.messages import ThinkingPart, ToolResultPart
from contextfold.providers import ChatRequest, SystemBlock
from contextfold.providers.anthropic import AnthropicChat
from contextfold.providers.openai import OpenAIChat
from contextfold.wire import anthropic_request as anthropic_wire
from contextfold.wire import chat_completions_request as openai_wire

EPHEMERAL = {"type": "ephemeral"}
SHELL = ToolSpec("shell", "Run a command", {"type": "object", "properties": {"cmd": {}}})
READ = ToolSpec("read_file", "Read a file", {"type": "object", "properties": {"path": {}}})


def _markers(wire: dict[str, Any]) -> int:
    blocks = [*wire.get("tools", ()), *wire.get("system", ())]
    blocks += [b for m in wire["messages"] for b in m["content"] if isinstance(b, dict)]
    return sum("cache_control" in b for b in blocks)


def _calls_only() -> Message:
    return Message.assistant(tool_calls=[ToolCallPart("c1", "shell", '{"cmd": "ls"}')])


# -- OpenAI ----------------------------------------------------------------------------------------


def test_openai_without_a_model_is_the_wire_form_alone() -> None:
    request = ChatRequest(messages=(Message.user("hi"),), max_tokens=100)
    wire = openai_wire.encode_request(request)
    assert wire == {
        "messages": [{"role": "user", "content": "hi"}],
        "max_completion_tokens": 100,
    }
    assert openai_wire.encode_request(request, model="gpt-4.1") == {"model": "gpt-4.1", **wire}


def test_openai_drops_empty_system_blocks_and_sends_servers_what_they_accept() -> None:
    request = ChatRequest(
        messages=(Message.user("list files"), _calls_only()),
        system=(SystemBlock("base", cache=True), SystemBlock(""), SystemBlock("status")),
        tools=(SHELL,),
        prompt_cache_key="session-1",
        max_tokens=64,
    )
    wire = openai_wire.encode_request(request, max_tokens_field="max_tokens")
    assert wire["messages"][0] == {"role": "system", "content": "base\n\nstatus"}
    assert wire["messages"][2]["content"] == ""  # not null: llama-cpp-python answers 500 to it
    assert wire["tool_choice"] == "auto"
    assert wire["prompt_cache_key"] == "session-1"
    assert wire["max_tokens"] == 64 and "max_completion_tokens" not in wire


def test_openai_stream_asks_for_the_usage() -> None:
    wire = openai_wire.encode_request(ChatRequest(messages=(Message.user("hi"),)), stream=True)
    assert wire["stream"] is True
    assert wire["stream_options"] == {"include_usage": True}


def test_openai_adapter_sends_what_the_encoder_makes() -> None:
    request = ChatRequest(
        messages=(Message.user("list files"), _calls_only()),
        system="be brief",
        tools=(SHELL,),
        max_tokens=64,
        temperature=0.1,
        stop=("END",),
        extra={"seed": 7},
    )
    model = OpenAIChat("llama", base_url="http://127.0.0.1:9/v1", send_reasoning=True)
    assert model.request_kwargs(request, stream=True) == openai_wire.encode_request(
        request, model="llama", stream=True, max_tokens_field="max_tokens", include_reasoning=True
    )


# -- Anthropic -------------------------------------------------------------------------------------


def test_anthropic_without_a_model_is_the_wire_form_alone() -> None:
    request = ChatRequest(messages=(Message.user("hi"),))
    wire = anthropic_wire.encode_request(request)
    assert wire == {
        "max_tokens": anthropic_wire.DEFAULT_MAX_TOKENS,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    }
    assert anthropic_wire.encode_request(request, model="claude") == {"model": "claude", **wire}


def test_anthropic_drops_empty_blocks_and_keeps_their_breakpoint_on_the_prefix() -> None:
    request = ChatRequest(
        messages=(Message("user", (TextPart("  "), TextPart("question"))),),
        system=(SystemBlock("base"), SystemBlock("", cache=True), SystemBlock("status")),
    )
    wire = anthropic_wire.encode_request(request)
    # The API refuses empty text blocks; the mark asked for after the empty block caches the
    # same prefix on the block before it.
    assert wire["system"] == [
        {"type": "text", "text": "base", "cache_control": EPHEMERAL},
        {"type": "text", "text": "status"},
    ]
    assert wire["messages"] == [{"role": "user", "content": [{"type": "text", "text": "question"}]}]


def test_anthropic_caps_breakpoints_at_four() -> None:
    history = tuple(
        Message.user(f"u{i}") if i % 2 == 0 else Message.assistant(f"a{i}") for i in range(6)
    )
    request = ChatRequest(
        messages=history,
        system=(SystemBlock("one", cache=True), SystemBlock("two", cache=True)),
        tools=(READ, SHELL),
        cache_tools=True,
        message_breakpoints=(1, 3, -1),
    )
    wire = anthropic_wire.encode_request(request)
    assert _markers(wire) == anthropic_wire.MAX_CACHE_BREAKPOINTS == 4
    # kept: the last message's, the end of the stable prefix, then the other messages'
    assert "cache_control" in wire["messages"][-1]["content"][-1]
    assert "cache_control" in wire["system"][-1]
    assert "cache_control" not in wire["system"][0]
    assert "cache_control" not in wire["tools"][-1]


def test_anthropic_breakpoints_skip_hidden_messages_and_count_from_the_end() -> None:
    request = ChatRequest(
        messages=(
            Message.user("first"),
            Message.assistant("answer"),
            Message.user("hidden", meta=Meta(agent_visible=False)),
            Message.user("second"),
        ),
        message_breakpoints=(2, -1),
    )
    wire = anthropic_wire.encode_request(request)
    marked = [i for i, m in enumerate(wire["messages"]) if "cache_control" in m["content"][-1]]
    assert marked == [1, 2]


def test_anthropic_adapter_sends_what_the_encoder_makes() -> None:
    request = ChatRequest(
        messages=(Message.user("hi"),),
        system=(SystemBlock("base", cache=True),),
        tools=(SHELL,),
        temperature=0.2,
        stop=("END",),
        extra={"thinking": {"type": "enabled", "budget_tokens": 1024}},
    )
    model = AnthropicChat("claude", api_key="sk-test", default_max_tokens=333)
    assert model.request_kwargs(request) == anthropic_wire.encode_request(
        request, model="claude", default_max_tokens=333
    )
    assert model.request_kwargs(request)["max_tokens"] == 333


# -- no SDK needed ---------------------------------------------------------------------------------


def test_encoders_work_without_either_sdk() -> None:
    code = textwrap.dedent(
        """
        import sys
        sys.modules["openai"] = None
        sys.modules["anthropic"] = None
        from contextfold import Message
        from contextfold.providers import ChatRequest
        from contextfold.wire.anthropic_request import encode_request as to_anthropic
        from contextfold.wire.chat_completions_request import encode_request as to_openai
        request = ChatRequest(messages=(Message.user("hi"),), max_tokens=5)
        print(to_openai(request, model="m")["max_completion_tokens"])
        print(to_anthropic(request, model="m")["max_tokens"])
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["5", "5"]


_PARTS = st.sampled_from(["text", "blank", "call", "result", "thinking"])


def _message(kind: str, role: str, index: int, hidden: bool) -> Message:
    meta = Meta(agent_visible=not hidden)
    if kind == "blank":
        return Message(role, (TextPart("  "),), meta=meta)  # type: ignore[arg-type]
    if kind == "call" and role == "assistant":
        return Message.assistant(tool_calls=[ToolCallPart(f"c{index}", "shell", "{}")], meta=meta)
    if kind == "result":
        return Message.tool(ToolResultPart(f"c{index}", "shell", f"out {index}"), meta=meta)
    if kind == "thinking" and role == "assistant":
        return Message("assistant", (ThinkingPart("hmm", signature="s"),), meta=meta)
    return Message(role, (TextPart(f"{role} {index}"),), meta=meta)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(_PARTS, st.sampled_from(["user", "assistant", "system"]), st.booleans()),
        min_size=1,
        max_size=8,
    ),
    st.lists(st.integers(-9, 9), max_size=6),
    st.lists(st.booleans(), max_size=3),
    st.booleans(),
    st.booleans(),
)
def test_anthropic_breakpoints_within_the_cap_are_not_looked_for(
    shapes: list[tuple[str, str, bool]],
    breakpoints: list[int],
    system_cache: list[bool],
    cache_tools: bool,
    inline_system: bool,
) -> None:
    """encode_request skips the search for markers to remove when the breakpoints asked for
    are within the cap: the body is the one made with the search always run."""
    request = ChatRequest(
        messages=tuple(_message(k, r, i, h) for i, (k, r, h) in enumerate(shapes)),
        system=tuple(SystemBlock(f"s{i}", cache=c) for i, c in enumerate(system_cache)),
        tools=(READ, SHELL),
        cache_tools=cache_tools,
        message_breakpoints=tuple(breakpoints),
    )
    fast = anthropic_wire.encode_request(request, inline_system=inline_system)
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(anthropic_wire, "MAX_CACHE_BREAKPOINTS", -1)  # always searched
        full = anthropic_wire.encode_request(request, inline_system=inline_system)
    assert fast == full
    assert _markers(fast) <= anthropic_wire.MAX_CACHE_BREAKPOINTS
