"""The typed models of Anthropic Messages and Chat Completions request bodies: every wrong type
the hostile-client run found stored is refused, naming the field, and valid bodies pass."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from contextfold.wire import anthropic_models, chat_completions_models
from contextfold.wire.anthropic_models import AnthropicRequestError
from contextfold.wire.chat_completions_models import ChatRequestError

ANTHROPIC_OK: dict[str, Any] = {
    "model": "claude-x",
    "max_tokens": 100,
    "stream": True,
    "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
    "tools": [{"name": "bash", "input_schema": {"type": "object"}}],
    "messages": [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                {"type": "text", "text": "running"},
                {"type": "tool_use", "id": "tu_1", "name": "bash", "input": {"cmd": "ls"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "tu_1",
                    "content": [{"type": "text", "text": "a.txt"}],
                },
                {"type": "image", "source": {"type": "base64", "media_type": "x", "data": "AA"}},
            ],
        },
    ],
    "some_future_field": {"kept": True},
}

CHAT_OK: dict[str, Any] = {
    "model": "gpt-x",
    "stream": True,
    "stream_options": {"include_usage": True},
    "max_completion_tokens": 50,
    "tools": [{"type": "function", "function": {"name": "bash", "parameters": {}}}],
    "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
    ],
}


def _with(body: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(body)
    target: Any = out
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return out


def test_valid_bodies_pass_and_come_back_read() -> None:
    anthropic = anthropic_models.check_request(ANTHROPIC_OK)
    assert anthropic.system == "be brief"
    assert [(t.name, dict(t.parameters)) for t in anthropic.tools] == [("bash", {"type": "object"})]
    chat = chat_completions_models.check_request(CHAT_OK)
    assert [(t.name, dict(t.parameters)) for t in chat.tools] == [("bash", {})]


def test_a_tool_without_a_schema_takes_no_arguments() -> None:
    body = _with(ANTHROPIC_OK, ("tools",), [{"name": "t", "description": "d"}])
    [tool] = anthropic_models.check_request(body).tools
    assert (tool.description, dict(tool.parameters)) == ("d", {"type": "object", "properties": {}})
    body = _with(CHAT_OK, ("tools",), [{"type": "function", "function": {"name": "t"}}])
    [tool] = chat_completions_models.check_request(body).tools
    assert dict(tool.parameters) == {"type": "object", "properties": {}}


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (("system",), 5, "system: expected a string or an array"),
        (("system", 0, "type"), "image", "system.0.type: only text blocks are supported here"),
        (("tools",), {"name": "t"}, "tools: expected an array"),
        (("tools", 0), "bash", "tools.0: expected an object"),
        (("tools", 0, "name"), "", "tools.0.name: expected a non-empty string"),
        (
            ("tools", 0, "type"),
            "web_search_20250305",
            "tools.0.type: server tools ('web_search_20250305') are not supported",
        ),
    ],
)
def test_anthropic_system_and_tools_are_refused_in_words(
    path: tuple[Any, ...], value: Any, expected: str
) -> None:
    """What the proxy's own checks of the system prompt and tools used to say, said by the
    models (which name the field more closely)."""
    with pytest.raises(AnthropicRequestError) as caught:
        anthropic_models.check_request(_with(ANTHROPIC_OK, path, value))
    assert str(caught.value).startswith(expected)


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (("tools",), "bash", "tools: expected an array"),
        (("tools", 0, "function"), None, "tools[0].type: only function tools are supported"),
        (("tools", 0, "function", "name"), "", "tools[0].function.name: expected a non-empty"),
        (("tools", 0, "function", "parameters"), [], "tools[0].function.parameters: expected an"),
    ],
)
def test_chat_tools_are_refused_in_words(path: tuple[Any, ...], value: Any, expected: str) -> None:
    with pytest.raises(ChatRequestError) as caught:
        chat_completions_models.check_request(_with(CHAT_OK, path, value))
    assert str(caught.value).startswith(expected)


@pytest.mark.parametrize(
    ("path", "value", "param"),
    [
        (("messages", 1, "content", 1, "text"), 5, "messages.1.content.1.text"),
        (("messages", 1, "content", 2, "id"), ["a"], "messages.1.content.2.id"),
        (("messages", 1, "content", 2, "input"), "ls", "messages.1.content.2.input"),
        (("stream",), "yes", "stream"),
        (("messages", 1, "content", 0, "type"), ["text"], "messages.1.content.0.type"),
        (("messages", 1, "content", 0, "type"), {"a": 1}, "messages.1.content.0.type"),
        (("messages", 0, "content"), "a\ud800b", "messages.0.content"),
        (("model",), "claude\udfff", "model"),
        (("max_tokens",), "100", "max_tokens"),
        (("max_tokens",), True, "max_tokens"),
        (("messages", 0, "role"), "robot", "messages.0.role"),
        (("messages", 2, "content", 0, "is_error"), "no", "messages.2.content.0.is_error"),
        (("system", 0, "text"), None, "system.0.text"),
        (("tools", 0, "name"), 3, "tools.0.name"),
        (("messages", 2, "content", 1, "type"), "document", "messages.2.content.1.type"),
    ],
)
def test_anthropic_wrong_types_are_refused_naming_the_field(
    path: tuple[Any, ...], value: Any, param: str
) -> None:
    with pytest.raises(AnthropicRequestError) as caught:
        anthropic_models.check_request(_with(ANTHROPIC_OK, path, value))
    assert caught.value.param == param
    str(caught.value).encode("utf-8")  # the message itself can always be sent back


@pytest.mark.parametrize(
    ("path", "value", "param"),
    [
        (("stream",), "yes", "stream"),
        (("stream_options",), "x", "stream_options"),
        (("stream_options",), {"include_usage": "y"}, "stream_options.include_usage"),
        (("messages", 1, "content", 0, "text"), 7, "messages[1].content[0].text"),
        (("messages", 1, "content", 0, "type"), ["text"], "messages[1].content[0].type"),
        (("messages", 1, "content", 0, "type"), {"t": 1}, "messages[1].content[0].type"),
        (("messages", 2, "tool_calls", 0, "id"), ["c"], "messages[2].tool_calls[0].id"),
        (
            ("messages", 2, "tool_calls", 0, "function", "arguments"),
            {"a": 1},
            "messages[2].tool_calls[0].function.arguments",
        ),
        (("messages", 3, "tool_call_id"), 1, "messages[3].tool_call_id"),
        (("messages", 0, "content"), "\ud800", "messages[0].content"),
        (("model",), "gpt\ud800", "model"),
        (("max_completion_tokens",), 0, "max_completion_tokens"),
        (("temperature",), "hot", "temperature"),
        (("tools", 0, "type"), "retrieval", "tools[0].type"),
    ],
)
def test_chat_wrong_types_are_refused_naming_the_field(
    path: tuple[Any, ...], value: Any, param: str
) -> None:
    with pytest.raises(ChatRequestError) as caught:
        chat_completions_models.check_request(_with(CHAT_OK, path, value))
    assert caught.value.param == param


def test_a_bad_key_is_named_in_text_that_can_be_sent() -> None:
    body = _with(CHAT_OK, ("metadata",), {"k\ud800": 1})
    with pytest.raises(ChatRequestError) as caught:
        chat_completions_models.check_request(body)
    assert caught.value.param is not None
    caught.value.param.encode("utf-8")


def test_remembered_tools_and_system_are_checked_as_fresh_ones() -> None:
    """``check_request(remembered=...)``: a tool list or system prompt that passed before (the
    same value) is not checked again; the answer and the errors are those of a fresh check."""
    remembered = anthropic_models.CheckedValues()
    tools = [{"name": "t", "input_schema": {"type": "object", "properties": {}}}]
    system = [{"type": "text", "text": "be brief"}]
    good = {**ANTHROPIC_OK, "tools": tools, "system": system}
    first = anthropic_models.check_request(good, remembered=remembered)
    assert first == anthropic_models.check_request(good)
    again = anthropic_models.check_request({**good}, remembered=remembered)
    assert again == first and again.tools is first.tools
    # The same tools beside a bad message: the message's error, as without the memory.
    bad_message = {**good, "messages": [{"role": "user", "content": 3}]}
    for memory in (remembered, None):
        with pytest.raises(anthropic_models.AnthropicRequestError) as error:
            anthropic_models.check_request(bad_message, remembered=memory)
        assert error.value.param == "messages.0.content"
    # A bad tool list is never remembered: it fails every time.
    bad_tools = {**good, "tools": [{"name": ""}]}
    for _ in range(2):
        with pytest.raises(anthropic_models.AnthropicRequestError):
            anthropic_models.check_request(bad_tools, remembered=remembered)
    # A remembered list that a lone surrogate was never in; another list is checked.
    surrogate = {**good, "system": [{"type": "text", "text": "a\ud800"}]}
    with pytest.raises(anthropic_models.AnthropicRequestError):
        anthropic_models.check_request(surrogate, remembered=remembered)
