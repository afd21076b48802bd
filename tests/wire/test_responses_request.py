"""Responses requests: Codex-shaped bodies read into contextfold values and written back, malformed
bodies refused naming the field, and neutral messages through a Responses body and back."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.errors import ContextOverflowError, ProviderError, RateLimitError
from contextfold.messages import (
    ImagePart,
    Message,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from contextfold.tool_spec import ToolSpec
from contextfold.wire.responses import (
    OPAQUE_FLAG,
    PROVIDER_KEY,
    ResponsesRequestError,
    error_body,
    error_from_body,
    read_request,
    write_request,
)
from tests.strategies import arguments, ident, visible_text

# A body shaped like the ones codex-rs sends (core's ResponsesApiRequest and protocol's
# ResponseItem): instructions, developer and user messages with input_text, the reasoning item
# with its encrypted_content, function and custom tool calls and their outputs, a namespaced call,
# a web search item it does not understand, and the options it always sends.
CODEX_BODY: dict[str, Any] = {
    "model": "gpt-5-codex",
    "instructions": "You are Codex, a coding agent.",
    "input": [
        {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": "<permissions instructions>"}],
        },
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "<environment_context>cwd</environment_context>"}
            ],
        },
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "List the files"},
                {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="},
            ],
        },
        {
            "type": "reasoning",
            "summary": [
                {"type": "summary_text", "text": "**Listing**"},
                {"type": "summary_text", "text": "I will run ls."},
            ],
            "encrypted_content": "gAAAAABo-opaque-blob",
        },
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Running ls."}],
            "phase": "commentary",
        },
        {
            "type": "function_call",
            "name": "shell_command",
            "arguments": '{"command":"ls","workdir":"/repo"}',
            "call_id": "call_A1",
        },
        {"type": "function_call_output", "call_id": "call_A1", "output": "README.md\nsrc"},
        {
            "type": "custom_tool_call",
            "status": "completed",
            "call_id": "call_B2",
            "name": "apply_patch",
            "input": "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n",
        },
        {"type": "custom_tool_call_output", "call_id": "call_B2", "output": "Success."},
        {
            "type": "function_call",
            "name": "list_issues",
            "namespace": "mcp__github",
            "arguments": "{}",
            "call_id": "call_C3",
        },
        {
            "type": "function_call_output",
            "call_id": "call_C3",
            "output": [
                {"type": "input_text", "text": "no issues"},
                {"type": "input_image", "image_url": "https://example.com/chart.png"},
            ],
        },
        {
            "type": "web_search_call",
            "status": "completed",
            "action": {"type": "search", "query": "ripgrep flags"},
        },
        {"type": "compaction", "encrypted_content": "cmp-opaque"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Done."}],
            "phase": "final_answer",
        },
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Thanks"}]},
    ],
    "tools": [
        {
            "type": "function",
            "name": "shell_command",
            "description": "Runs a shell command.",
            "strict": False,
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}, "workdir": {"type": "string"}},
                "required": ["command"],
                "additionalProperties": False,
            },
        },
        {
            "type": "custom",
            "name": "apply_patch",
            "description": "Use the apply_patch tool to edit files.",
            "format": {"type": "grammar", "syntax": "lark", "definition": "start: begin_patch"},
        },
        {
            "type": "namespace",
            "name": "mcp__github",
            "description": "GitHub tools",
            "tools": [
                {
                    "type": "function",
                    "name": "list_issues",
                    "description": "List issues",
                    "parameters": {"type": "object", "properties": {}},
                }
            ],
        },
        {"type": "web_search", "external_web_access": False},
    ],
    "tool_choice": "auto",
    "parallel_tool_calls": False,
    "reasoning": {"effort": "medium", "summary": "auto"},
    "store": False,
    "stream": True,
    "include": ["reasoning.encrypted_content"],
    "prompt_cache_key": "0199a213-81c0-7800-8aa1-bbab2a035a53",
    "text": {"verbosity": "low"},
    "client_metadata": {"x-codex-installation-id": "abc"},
}


def _rewrite(body: dict[str, Any]) -> dict[str, Any]:
    """The body :func:`write_request` makes of what :func:`read_request` read."""
    request = read_request(body)
    return write_request(
        request.messages,
        model=request.model or "",
        system=request.system,
        tools=request.tools,
        raw_tools=request.raw_tools,
        custom_tools=request.custom_tools,
        namespaces=request.namespaces,
        tool_choice=request.tool_choice,
        parallel_tool_calls=request.parallel_tool_calls,
        reasoning=request.reasoning,
        include=request.include,
        store=request.store,
        prompt_cache_key=request.prompt_cache_key,
        text=request.text,
        stream=request.stream,
        extra=request.extra,
    )


def test_codex_body_reads_into_neutral_values() -> None:
    request = read_request(CODEX_BODY)
    assert request.model == "gpt-5-codex"
    assert request.system == "You are Codex, a coding agent."
    assert request.stream and request.store is False and request.parallel_tool_calls is False
    assert request.wants_encrypted_reasoning
    assert request.prompt_cache_key == CODEX_BODY["prompt_cache_key"]
    assert request.extra == {"client_metadata": {"x-codex-installation-id": "abc"}}
    roles = [m.role for m in request.messages]
    assert roles == [
        "system",  # developer
        "user",
        "user",
        "assistant",  # reasoning, commentary, shell call
        "tool",
        "assistant",  # apply_patch
        "tool",
        "assistant",  # namespaced call
        "tool",
        "assistant",  # web search (opaque)
        "user",  # compaction (opaque summary)
        "assistant",
        "user",
    ]
    developer, _, user = request.messages[:3]
    assert "developer" in developer.meta.flags
    assert user.parts[1] == ImagePart("data:image/png;base64,iVBORw0KGgo=", "image/png")
    turn = request.messages[3]
    assert turn.parts[0] == ThinkingPart("**Listing**\n\nI will run ls.")
    stored = turn.meta.provider[PROVIDER_KEY]["reasoning"][0]
    assert stored["encrypted_content"] == "gAAAAABo-opaque-blob"
    assert turn.parts[1] == TextPart("Running ls.")
    assert turn.tool_calls == (
        ToolCallPart("call_A1", "shell_command", '{"command":"ls","workdir":"/repo"}'),
    )
    assert request.messages[4].tool_results[0] == ToolResultPart(
        "call_A1", "shell_command", "README.md\nsrc"
    )
    patch = request.messages[5].tool_calls[0]
    assert patch.name == "apply_patch"
    assert patch.args() == {"input": CODEX_BODY["input"][7]["input"]}
    assert request.messages[7].tool_calls[0].name == "mcp__github__list_issues"
    result = request.messages[8].tool_results[0]
    assert result.content == "no issues"
    assert result.images == (ImagePart("https://example.com/chart.png"),)
    assert OPAQUE_FLAG in request.messages[9].meta.flags
    assert request.messages[9].parts == ()
    summary = request.messages[10]
    assert summary.meta.kind == "summary" and isinstance(summary.parts[0], SummaryPart)


def test_codex_tools_read_into_specs() -> None:
    request = read_request(CODEX_BODY)
    assert [t.name for t in request.tools] == [
        "shell_command",
        "apply_patch",
        "mcp__github__list_issues",
    ]
    patch = request.tools[1]
    assert patch.parameters["required"] == ["input"]
    assert "start: begin_patch" in patch.parameters["properties"]["input"]["description"]
    assert request.custom_tools == {"apply_patch"}
    assert request.namespaces == {"mcp__github__list_issues": ("mcp__github", "list_issues")}
    assert request.raw_tools[-1] == {"type": "web_search", "external_web_access": False}


def test_codex_body_is_written_back_as_it_came() -> None:
    """Read and written again, the body is the client's: items, ids, phases, encrypted content,
    namespaces and tools, byte for byte once serialized."""
    written = _rewrite(copy.deepcopy(CODEX_BODY))
    assert written == CODEX_BODY
    assert json.dumps(written, sort_keys=True) == json.dumps(CODEX_BODY, sort_keys=True)


def test_string_input_is_one_user_message() -> None:
    request = read_request({"model": "m", "input": "hello"})
    assert [(m.role, m.text) for m in request.messages] == [("user", "hello")]
    assert _rewrite({"model": "m", "input": "hello"})["input"] == [
        {"type": "message", "role": "user", "content": "hello"}
    ]


def test_additional_tools_are_hoisted_and_compaction_trigger_recognised() -> None:
    body = {
        "model": "m",
        "input": [
            {"type": "message", "role": "user", "content": "hi"},
            {
                "type": "additional_tools",
                "role": "developer",
                "tools": [{"type": "function", "name": "late", "parameters": {"type": "object"}}],
            },
            {"type": "compaction_trigger"},
        ],
        "tools": [{"type": "function", "name": "early"}],
    }
    request = read_request(body)
    assert [t.name for t in request.tools] == ["early", "late"]
    assert [m.role for m in request.messages] == ["user"]
    assert request.compaction_trigger


def test_compaction_trigger_must_be_last() -> None:
    body = {"input": [{"type": "compaction_trigger"}, {"role": "user", "content": "x"}]}
    with pytest.raises(ResponsesRequestError) as caught:
        read_request(body)
    assert caught.value.param == "input[0]"


def test_local_shell_call_reads_as_a_call() -> None:
    body = {
        "input": [
            {
                "type": "local_shell_call",
                "call_id": "ls1",
                "status": "completed",
                "action": {"type": "exec", "command": ["ls", "-la"]},
            },
            {"type": "local_shell_call_output", "id": "ls1", "output": "total 0"},
        ]
    }
    request = read_request(body)
    call = request.messages[0].tool_calls[0]
    assert (call.call_id, call.name, call.args()["command"]) == (
        "ls1",
        "local_shell",
        ["ls", "-la"],
    )
    assert request.messages[1].tool_results[0].content == "total 0"
    assert _rewrite({"model": "", **body})["input"] == body["input"]


@pytest.mark.parametrize(
    ("body", "param", "words"),
    [
        ([], None, "JSON object"),
        (
            {"input": [{"type": "function_call_output", "call_id": 5, "output": "x"}]},
            "input[0].call_id",
            "expected a string",
        ),
        (
            {
                "input": [
                    {},
                    {},
                    {},
                    {"type": "function_call", "name": "f", "arguments": "{}", "call_id": ["x"]},
                ]
            },
            "input[0].type",
            "Field required",
        ),
        (
            {
                "input": [{"role": "user", "content": "x"}] * 3
                + [{"type": "function_call", "name": "f", "arguments": "{}", "call_id": ["x"]}]
            },
            "input[3].call_id",
            "expected a string",
        ),
        ({"input": "a\ud800b"}, "input", "lone surrogate"),
        ({"model": "gpt\udc00"}, "model", "lone surrogate"),
        ({"stream": "yes"}, "stream", "expected a boolean"),
        ({"store": 1}, "store", "expected a boolean"),
        ({"max_output_tokens": "100"}, "max_output_tokens", "expected an integer"),
        ({"max_output_tokens": 0}, "max_output_tokens", "positive"),
        ({"input": 5}, "input", "expected"),
        ({"input": [{"type": "message", "role": "bot", "content": "x"}]}, "input[0].role", "bot"),
        (
            {"input": [{"role": "user", "content": [{"type": [1], "text": "x"}]}]},
            "input[0].content[0].type",
            "expected a string",
        ),
        (
            {"input": [{"role": "user", "content": [{"type": {"a": 1}}]}]},
            "input[0].content[0].type",
            "expected a string",
        ),
        (
            {"input": [{"role": "user", "content": [{"type": "input_text", "text": 3}]}]},
            "input[0].content[0].text",
            "expected a string",
        ),
        (
            {"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]},
            "input[0].content[0].type",
            "not supported",
        ),
        ({"input": [{"type": "reasoning", "summary": "x"}]}, "input[0].summary", "array"),
        ({"input": [{"type": 7}]}, "input[0].type", "expected a string"),
        (
            {"input": [{"type": "reasoning", "content": [{"type": "reasoning_text", "text": 1}]}]},
            "input[0].content[0].text",
            "expected a string",
        ),
        ({"input": ["text"]}, "input[0]", "expected an object"),
        ({"tools": [{"type": "function"}]}, "tools[0].name", "Field required"),
        (
            {"tools": [{"type": "function", "name": "f", "parameters": "x"}]},
            "tools[0].parameters",
            "expected an object",
        ),
        (
            {"tools": [{"type": "namespace", "name": "n", "tools": [{"type": "function"}]}]},
            "tools[0].tools[0].name",
            "Field required",
        ),
        ({"tool_choice": 3}, "tool_choice", "expected"),
        ({"include": ["a", 2]}, "include[1]", "expected a string"),
    ],
)
def test_malformed_bodies_are_refused_naming_the_field(
    body: Any, param: str | None, words: str
) -> None:
    with pytest.raises(ResponsesRequestError) as caught:
        read_request(body)
    assert caught.value.param == param
    assert words in str(caught.value)
    answer = caught.value.body()["error"]
    assert answer["type"] == "invalid_request_error" and answer["param"] == param
    assert answer["message"].startswith(f"{param}: " if param else "")


def test_error_bodies_and_their_reading() -> None:
    overflow = error_body("too long", code="context_length_exceeded")
    assert overflow == {
        "error": {
            "message": "too long",
            "type": "invalid_request_error",
            "param": None,
            "code": "context_length_exceeded",
        }
    }
    assert isinstance(error_from_body(overflow, status=400), ContextOverflowError)
    limited = error_from_body({"error": {"code": "rate_limit_exceeded", "message": "slow"}})
    assert isinstance(limited, RateLimitError)
    other = error_from_body({"error": {"code": "server_error", "message": "boom"}}, status=500)
    assert type(other) is ProviderError and other.status == 500 and str(other) == "boom"


def test_messages_from_another_protocol_are_written_as_items() -> None:
    """Bridging: an Anthropic or Chat client's history, for a Responses upstream."""
    messages = [
        Message.system("be brief"),
        Message.user("read a"),
        Message(
            "assistant",
            (
                ThinkingPart("I should read it", signature="anthropic-sig"),
                TextPart("Reading."),
                ToolCallPart("toolu_1", "read", '{"path":"a"}'),
                ToolCallPart("toolu_2", "patch", '{"input":"*** Begin Patch"}'),
            ),
        ),
        Message.tool(ToolResultPart("toolu_1", "read", "contents", images=(ImagePart("u"),))),
        Message.tool(ToolResultPart("toolu_2", "patch", "ok")),
    ]
    body = write_request(
        messages,
        model="gpt-5",
        system="sys",
        tools=[ToolSpec("read", "Read a file"), ToolSpec("patch", "Patch")],
        custom_tools={"patch"},
        max_output_tokens=100,
        stream=True,
    )
    assert body["instructions"] == "sys"
    assert body["input"] == [
        {
            "type": "message",
            "role": "system",
            "content": [{"type": "input_text", "text": "be brief"}],
        },
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "read a"}]},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "I should read it"}]},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Reading."}],
        },
        {
            "type": "function_call",
            "call_id": "toolu_1",
            "name": "read",
            "arguments": '{"path":"a"}',
        },
        {
            "type": "custom_tool_call",
            "call_id": "toolu_2",
            "name": "patch",
            "input": "*** Begin Patch",
        },
        {
            "type": "function_call_output",
            "call_id": "toolu_1",
            "output": [
                {"type": "input_text", "text": "contents"},
                {"type": "input_image", "image_url": "u"},
            ],
        },
        {"type": "function_call_output", "call_id": "toolu_2", "output": "ok"},
    ]
    assert [t["name"] for t in body["tools"]] == ["read", "patch"]
    assert body["tools"][0]["type"] == "function" and body["tool_choice"] == "auto"
    assert body["max_output_tokens"] == 100 and body["stream"] is True
    assert "store" not in body and "previous_response_id" not in body


def test_encrypted_content_is_dropped_for_another_upstream_and_when_the_text_changed() -> None:
    turn = read_request(CODEX_BODY).messages[3]
    kept = write_request([turn], model="m")["input"][0]
    assert kept["encrypted_content"] == "gAAAAABo-opaque-blob"
    dropped = write_request([turn], model="m", keep_encrypted=False)["input"][0]
    assert "encrypted_content" not in dropped and dropped["summary"] == kept["summary"]
    edited = turn.with_parts([ThinkingPart("something else"), *turn.parts[1:]])
    rewritten = write_request([edited], model="m")["input"][0]
    assert rewritten == {
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "something else"}],
    }
    opaque = read_request(CODEX_BODY).messages[9]
    assert write_request([opaque], model="m", keep_encrypted=False)["input"] == []


def test_written_bodies_are_stable() -> None:
    """Two bodies written from one history are the same bytes (no made-up ids): the upstream's
    prompt cache and the proxy's digests depend on it."""
    messages = [Message.user("a"), Message.assistant("b", [ToolCallPart("c", "f", "{}")])]
    assert write_request(messages, model="m") == write_request(messages, model="m")


# --------------------------------------------------------------------------------------------------
# property: messages -> Responses request -> messages keeps texts, calls, ids and results
# --------------------------------------------------------------------------------------------------


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    messages: list[Message] = [Message.user(draw(visible_text))]
    for turn in range(draw(st.integers(1, 4))):
        parts: list[Any] = []
        if draw(st.booleans()):
            parts.append(ThinkingPart(draw(visible_text)))
        if draw(st.booleans()):
            parts.append(TextPart(draw(visible_text)))
        calls = [
            ToolCallPart(f"call_{turn}_{n}", draw(ident), draw(arguments))
            for n in range(draw(st.integers(0 if parts else 1, 3)))
        ]
        messages.append(Message("assistant", (*parts, *calls)))
        for call in calls:
            content = draw(st.text(max_size=40))
            messages.append(Message.tool(ToolResultPart(call.call_id, call.name, content)))
        messages.append(Message.user(draw(visible_text)))
    return messages


def _essence(messages: list[Message]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, TextPart | ThinkingPart):
                out.append((message.role, type(part).__name__, part.text))
            elif isinstance(part, ToolCallPart):
                out.append(("call", part.call_id, part.name, part.arguments))
            elif isinstance(part, ToolResultPart):
                out.append(("result", part.call_id, part.name, part.content))
    return out


@settings(max_examples=150, deadline=None)
@given(conversations())
def test_messages_survive_a_responses_body(messages: list[Message]) -> None:
    body = json.loads(json.dumps(write_request(messages, model="m", stream=True)))
    read = read_request(body)
    assert _essence(list(read.messages)) == _essence(messages)
    assert [m.role for m in read.messages] == [m.role for m in messages]
