"""Typed models of an OpenAI Chat Completions request, checked before anything reads it.

:func:`check_request` validates a client's ``POST /v1/chat/completions`` body whole: the body's
own fields (``stream: "yes"`` and ``stream_options: "x"`` are refused), every message by its
role, every content part by its ``type``, every tool call and tool, and every text for
encodability. It raises :class:`ChatRequestError` naming the first bad field as OpenAI does
(``messages[2].tool_calls[0].function.arguments``), which the 400 answer carries as ``param``.
A body that passes is read knowing every value has its type: its messages by
:mod:`contextfold.wire.chat_completions`; its tools are returned read, as a
:class:`CheckedRequest` (the models are the one validation: no reader checks again).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field, FiniteFloat, StrictBool, StrictInt, StrictStr

from contextfold.tool_spec import ToolSpec
from contextfold.wire._checked import (
    ModelT,
    RequestBodyError,
    WireModel,
    check,
    check_unicode,
    unknown_positions,
)

__all__ = ["CONTENT_PARTS", "ChatRequestError", "CheckedRequest", "check_request"]

CONTENT_PARTS = frozenset({"text", "image_url"})
"""Content part types a message may hold (by default)."""


class ChatRequestError(RequestBodyError):
    """A Chat Completions request body that is not one; ``param`` names the field
    (``messages[2].content[0].text``)."""


_NonEmpty = Annotated[StrictStr, Field(min_length=1)]
_PositiveInt = Annotated[StrictInt, Field(ge=1)]


class _Typed(WireModel):
    type: StrictStr


class _TextPart(WireModel):
    type: Literal["text"]
    text: StrictStr


class _ImageURL(WireModel):
    url: StrictStr
    detail: StrictStr | None = None


class _ImagePart(WireModel):
    type: Literal["image_url"]
    image_url: _ImageURL


_PART_MODELS: dict[str, type[WireModel]] = {"text": _TextPart, "image_url": _ImagePart}


class _Function(WireModel):
    name: StrictStr
    arguments: StrictStr


class _ToolCall(WireModel):
    id: StrictStr
    type: Literal["function"] = "function"
    function: _Function


class _Role(WireModel):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]


class _SystemMessage(WireModel):
    role: Literal["system", "developer"]
    content: StrictStr | list[Any]
    name: StrictStr | None = None


class _UserMessage(WireModel):
    role: Literal["user"]
    content: StrictStr | list[Any]
    name: StrictStr | None = None


class _AssistantMessage(WireModel):
    role: Literal["assistant"]
    content: StrictStr | list[Any] | None = None
    tool_calls: list[_ToolCall] | None = None
    function_call: _Function | None = None
    reasoning_content: StrictStr | None = None
    refusal: StrictStr | None = None
    name: StrictStr | None = None


class _ToolMessage(WireModel):
    role: Literal["tool"]
    tool_call_id: StrictStr
    content: StrictStr | list[Any]


class _FunctionMessage(WireModel):
    role: Literal["function"]
    name: StrictStr
    content: StrictStr | None = None


_MESSAGE_MODELS: dict[str, type[WireModel]] = {
    "system": _SystemMessage,
    "developer": _SystemMessage,
    "user": _UserMessage,
    "assistant": _AssistantMessage,
    "tool": _ToolMessage,
    "function": _FunctionMessage,
}


class _FunctionTool(WireModel):
    name: _NonEmpty
    description: StrictStr | None = None
    parameters: dict[str, Any] | None = None
    strict: StrictBool | None = None


class _Tool(WireModel):
    type: StrictStr
    function: dict[str, Any] | None = None


class _Body(WireModel):
    model: _NonEmpty
    messages: Annotated[list[Any], Field(min_length=1)]
    stream: StrictBool | None = None
    stream_options: dict[str, Any] | None = None
    max_tokens: _PositiveInt | None = None
    max_completion_tokens: _PositiveInt | None = None
    n: StrictInt | None = None
    tools: list[Any] | None = None
    tool_choice: StrictStr | dict[str, Any] | None = None
    parallel_tool_calls: StrictBool | None = None
    temperature: FiniteFloat | None = None
    top_p: FiniteFloat | None = None
    presence_penalty: FiniteFloat | None = None
    frequency_penalty: FiniteFloat | None = None
    stop: StrictStr | list[StrictStr] | None = None
    seed: StrictInt | None = None
    user: StrictStr | None = None
    response_format: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    reasoning_effort: StrictStr | None = None


@dataclass(frozen=True)
class CheckedRequest:
    """What a checked body holds besides its messages, read: the client's tools as neutral
    specs (in the body's order; a tool without parameters takes no arguments)."""

    tools: tuple[ToolSpec, ...]


def _check(model: type[ModelT], value: Any, where: str) -> ModelT:
    return check(model, value, where, error=ChatRequestError)


def check_request(
    body: Any, *, content_parts: Collection[str] = CONTENT_PARTS, known: Collection[int] = ()
) -> CheckedRequest:
    """Check a client's Chat Completions body whole; :class:`ChatRequestError` naming the first
    bad field (see the module docstring). ``known``: positions of messages whose exact text
    passed these checks in an earlier request: not checked again."""
    if not isinstance(body, Mapping):
        raise ChatRequestError(None, "the request body must be a JSON object")
    check_unicode(body, error=ChatRequestError, known=known)
    checked = _check(_Body, body, "")
    if checked.stream_options is not None:
        include = checked.stream_options.get("include_usage")
        if include is not None and not isinstance(include, bool):
            raise ChatRequestError("stream_options.include_usage", "expected a boolean")
    for index in unknown_positions(len(checked.messages), known):
        _check_message(checked.messages[index], f"messages[{index}]", content_parts)
    tools = [_check_tool(tool, f"tools[{index}]") for index, tool in enumerate(checked.tools or ())]
    return CheckedRequest(tuple(tools))


def _check_message(raw: Any, where: str, content_parts: Collection[str]) -> None:
    role = _check(_Role, raw, where).role
    message = _check(_MESSAGE_MODELS[role], raw, where)
    content = getattr(message, "content", None)
    if isinstance(content, list):
        for position, part in enumerate(content):
            _check_part(part, f"{where}.content[{position}]", content_parts)


def _check_part(part: Any, where: str, allowed: Collection[str]) -> None:
    kind = _check(_Typed, part, where).type
    if kind not in allowed:
        raise ChatRequestError(
            f"{where}.type",
            f"part type {kind[:40]!r} is not supported by contextfold proxy "
            f"(supported: {', '.join(sorted(allowed))})",
        )
    model = _PART_MODELS.get(kind)
    if model is not None:
        _check(model, part, where)


def _check_tool(tool: Any, where: str) -> ToolSpec:
    checked = _check(_Tool, tool, where)
    if checked.type != "function" or checked.function is None:
        raise ChatRequestError(f"{where}.type", "only function tools are supported")
    function = _check(_FunctionTool, checked.function, f"{where}.function")
    if function.parameters is None:
        return ToolSpec(function.name, function.description or "")
    return ToolSpec(function.name, function.description or "", function.parameters)
