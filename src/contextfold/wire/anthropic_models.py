"""Typed models of an Anthropic Messages request, checked before anything reads it.

:func:`check_request` validates a client's ``POST /v1/messages`` body whole: the body's own
fields, every message, every content block by its ``type`` (a ``text`` whose text is an integer,
a ``tool_use`` whose id is a list, an ``input`` that is a string, a ``type`` that is a list, are
all refused), the system prompt and the tools, and every text for encodability. It raises
:class:`AnthropicRequestError` naming the first bad field the way Anthropic's own errors do
(``messages.0.content.1.text``). A body that passes is read knowing every value has its type:
its messages by :mod:`contextfold.wire.anthropic`; its system prompt and tools are returned
read, as a :class:`CheckedRequest` (the models are the one validation: no reader checks again).

Which block types each role may carry is the caller's choice (``user_blocks``,
``assistant_blocks``): the proxy refuses blocks it could not carry through a transcript.
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

__all__ = [
    "ASSISTANT_BLOCKS",
    "USER_BLOCKS",
    "AnthropicRequestError",
    "CheckedRequest",
    "CheckedValues",
    "check_request",
    "system_text",
]

USER_BLOCKS = frozenset({"text", "image", "tool_result"})
"""Block types a user message may hold (by default)."""
ASSISTANT_BLOCKS = frozenset({"text", "thinking", "redacted_thinking", "tool_use"})
"""Block types an assistant message may hold (by default)."""


class AnthropicRequestError(RequestBodyError):
    """A Messages request body that is not one; ``param`` names the field
    (``messages.0.content.1.text``)."""


_NonEmpty = Annotated[StrictStr, Field(min_length=1)]
_PositiveInt = Annotated[StrictInt, Field(ge=1)]


class _Typed(WireModel):
    type: StrictStr


class _Text(WireModel):
    type: Literal["text"]
    text: StrictStr
    cache_control: dict[str, Any] | None = None
    citations: list[dict[str, Any]] | None = None


class _ImageSource(WireModel):
    type: StrictStr
    media_type: StrictStr | None = None
    data: StrictStr | None = None
    url: StrictStr | None = None


class _Image(WireModel):
    type: Literal["image"]
    source: _ImageSource
    cache_control: dict[str, Any] | None = None


class _ToolUse(WireModel):
    type: Literal["tool_use"]
    id: StrictStr
    name: StrictStr
    input: dict[str, Any]
    cache_control: dict[str, Any] | None = None


class _ToolResult(WireModel):
    type: Literal["tool_result"]
    tool_use_id: StrictStr
    content: StrictStr | list[dict[str, Any]] | None = None
    is_error: StrictBool | None = None
    cache_control: dict[str, Any] | None = None


class _Thinking(WireModel):
    type: Literal["thinking"]
    thinking: StrictStr
    signature: StrictStr | None = None


class _RedactedThinking(WireModel):
    type: Literal["redacted_thinking"]
    data: StrictStr


_BLOCK_MODELS: dict[str, type[WireModel]] = {
    "text": _Text,
    "image": _Image,
    "tool_use": _ToolUse,
    "tool_result": _ToolResult,
    "thinking": _Thinking,
    "redacted_thinking": _RedactedThinking,
}

_RESULT_BLOCKS = frozenset({"text", "image"})
"""What a ``tool_result``'s content list may hold."""


class _Message(WireModel):
    role: Literal["user", "assistant", "system"]
    content: StrictStr | list[Any]


class _Tool(WireModel):
    name: _NonEmpty
    type: StrictStr | None = None
    description: StrictStr | None = None
    input_schema: dict[str, Any] | None = None
    cache_control: dict[str, Any] | None = None


class _Body(WireModel):
    model: _NonEmpty
    max_tokens: _PositiveInt
    messages: Annotated[list[Any], Field(min_length=1)]
    system: StrictStr | list[Any] | None = None
    stream: StrictBool | None = None
    tools: list[Any] | None = None
    tool_choice: dict[str, Any] | None = None
    temperature: FiniteFloat | None = None
    top_p: FiniteFloat | None = None
    top_k: StrictInt | None = None
    stop_sequences: list[StrictStr] | None = None
    metadata: dict[str, Any] | None = None
    thinking: dict[str, Any] | None = None
    service_tier: StrictStr | None = None


@dataclass(frozen=True)
class CheckedRequest:
    """What a checked body holds besides its messages, read: the system prompt's text and the
    client's tools as neutral specs (in the body's order; a tool without a schema takes no
    arguments)."""

    system: str
    tools: tuple[ToolSpec, ...]


def system_text(system: str | list[Any] | None) -> str:
    """The text of a checked system prompt (the body's, or a mid-conversation system message's
    content): a string, or text blocks joined by blank lines."""
    if system is None or isinstance(system, str):
        return system or ""
    return "\n\n".join(block["text"] for block in system)


def _check(model: type[ModelT], value: Any, where: str) -> ModelT:
    return check(model, value, where, error=AnthropicRequestError, style="dots")


class CheckedValues:
    """The system prompts and tool lists of bodies that passed :func:`check_request`,
    remembered by the value itself (the very list, held): a body that holds the same list again
    (a reader that shares the values a client resends byte for byte, as the proxy's does: Claude
    Code resends some twenty tools, 18k tokens, on every request) is not checked again there,
    and gets the same tool specs. Whether a value passes does not depend on the rest of the
    body, and nothing changes a value once read. At most ``size`` of each (then it starts
    over)."""

    def __init__(self, size: int = 16) -> None:
        self.size = size
        self._tools: dict[int, tuple[list[Any], tuple[ToolSpec, ...]]] = {}
        self._systems: dict[int, list[Any]] = {}

    def tools(self, value: Any) -> tuple[ToolSpec, ...] | None:
        """The specs of ``value``, a tool list that passed before (None if it did not)."""
        entry = self._tools.get(id(value))
        # The entry holds its list, so its id is no other value's while it is here.
        return entry[1] if entry is not None and entry[0] is value else None

    def system(self, value: Any) -> bool:
        """True when ``value`` is a system prompt (a list of blocks) that passed before."""
        return self._systems.get(id(value)) is value

    def passed(self, body: Mapping[str, Any], tools: tuple[ToolSpec, ...]) -> None:
        """``body`` passed: its tool list (read as ``tools``) and system prompt are remembered."""
        value, system = body.get("tools"), body.get("system")
        if type(value) is list:
            if len(self._tools) >= self.size:
                self._tools.clear()
            self._tools[id(value)] = (value, tools)
        if type(system) is list:
            if len(self._systems) >= self.size:
                self._systems.clear()
            self._systems[id(system)] = system


def check_request(
    body: Any,
    *,
    user_blocks: Collection[str] = USER_BLOCKS,
    assistant_blocks: Collection[str] = ASSISTANT_BLOCKS,
    known: Collection[int] = (),
    remembered: CheckedValues | None = None,
) -> CheckedRequest:
    """Check a client's Messages body whole; :class:`AnthropicRequestError` naming the first bad
    field (see the module docstring). ``known``: positions of messages whose exact text passed
    these checks in an earlier request (a client resends its history): not checked again.
    ``remembered``: the tool lists and system prompts that passed before, likewise (see
    :class:`CheckedValues`); this body's are added when it passes."""
    if not isinstance(body, Mapping):
        raise AnthropicRequestError(None, "the request body must be a JSON object")
    same_tools = remembered.tools(body.get("tools")) if remembered is not None else None
    same_system = remembered is not None and remembered.system(body.get("system"))
    skip = [n for n, same in (("tools", same_tools is not None), ("system", same_system)) if same]
    check_unicode(body, error=AnthropicRequestError, style="dots", known=known, skip=skip)
    checked = _check(_Body, body, "")
    if not same_system:
        _check_system(checked.system, "system")
    for index in unknown_positions(len(checked.messages), known):
        raw = checked.messages[index]
        where = f"messages.{index}"
        message = _check(_Message, raw, where)
        if message.role == "system":  # the mid-conversation system beta (Claude Code sends it)
            _check_system(message.content, f"{where}.content")
            continue
        allowed = assistant_blocks if message.role == "assistant" else user_blocks
        if isinstance(message.content, list):
            for position, block in enumerate(message.content):
                _check_block(block, f"{where}.content.{position}", message.role, allowed)
    tools = (
        same_tools
        if same_tools is not None
        else tuple(
            _check_tool(tool, f"tools.{index}") for index, tool in enumerate(checked.tools or ())
        )
    )
    if remembered is not None:
        remembered.passed(body, tools)
    return CheckedRequest(system_text(checked.system), tools)


def _check_system(system: Any, where: str) -> None:
    if system is None or isinstance(system, str):
        return
    if not isinstance(system, list):
        raise AnthropicRequestError(where, "expected a string or a list of text blocks")
    for index, block in enumerate(system):
        at = f"{where}.{index}"
        if _check(_Typed, block, at).type != "text":
            raise AnthropicRequestError(f"{at}.type", "only text blocks are supported here")
        _check(_Text, block, at)


def _check_block(block: Any, where: str, role: str, allowed: Collection[str]) -> None:
    kind = _check(_Typed, block, where).type
    if kind not in allowed:
        raise AnthropicRequestError(
            f"{where}.type",
            f"block type {kind[:40]!r} is not supported by contextfold proxy in a {role} "
            f"message (supported: {', '.join(sorted(allowed))})",
        )
    model = _BLOCK_MODELS.get(kind)
    if model is None:
        return
    checked = _check(model, block, where)
    if isinstance(checked, _ToolResult) and isinstance(checked.content, list):
        for index, item in enumerate(checked.content):
            _check_block(item, f"{where}.content.{index}", "tool result", _RESULT_BLOCKS)


def _check_tool(tool: Any, where: str) -> ToolSpec:
    checked = _check(_Tool, tool, where)
    if checked.type not in (None, "custom"):
        raise AnthropicRequestError(
            f"{where}.type",
            f"server tools ({checked.type[:40]!r}) are not supported by contextfold proxy",
        )
    if checked.input_schema is None:
        return ToolSpec(checked.name, checked.description or "")
    return ToolSpec(checked.name, checked.description or "", checked.input_schema)
