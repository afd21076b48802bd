"""LangChain messages <-> contextfold :class:`~contextfold.messages.Message`, both ways.

What maps: ``SystemMessage``, ``HumanMessage``, ``AIMessage`` (text, reasoning, tool calls,
invalid tool calls, usage), ``ToolMessage`` (text, images, error status) and ``ChatMessage`` with
a user/assistant/system role. Content blocks: text, images (the v1 standard ``image`` block,
OpenAI's ``image_url``, Anthropic's ``source``), reasoning (the v1 ``reasoning`` block,
Anthropic's ``thinking`` with its signature and ``redacted_thinking``).

What does not: other content blocks (files, audio, provider tool blocks) have no contextfold
part and are left out of the neutral message. The middleware hands the model the original
LangChain object for every message the engine left as it was, so they only go missing from
messages the engine rewrote (a cut tool output, a summary).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    InvalidToolCall,
    SystemMessage,
    ToolCall,
    ToolMessage,
)
from langchain_core.messages.ai import InputTokenDetails, UsageMetadata

from contextfold.messages import (
    ImagePart,
    Message,
    Meta,
    Part,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)

__all__ = ["from_message", "from_messages", "to_message", "to_messages"]

_CALL_BLOCK_TYPES = frozenset(
    {"tool_use", "tool_call", "tool_call_chunk", "function_call", "invalid_tool_call"}
)
"""Blocks some providers repeat in an AIMessage's content: ``tool_calls`` is where they live."""


# -- LangChain -> contextfold ---------------------------------------------------------------------


def to_messages(messages: Iterable[BaseMessage]) -> list[Message]:
    """A LangChain history as contextfold messages (a ToolMessage without a name takes the name
    of the call it answers)."""
    names: dict[str, str] = {}
    out: list[Message] = []
    for message in messages:
        if isinstance(message, AIMessage):
            names.update({c["id"]: c["name"] for c in message.tool_calls if c["id"]})
        out.append(to_message(message, names))
    return out


def to_message(message: BaseMessage, call_names: Mapping[str, str] | None = None) -> Message:
    """One LangChain message as a contextfold message."""
    if isinstance(message, SystemMessage):
        return Message("system", _text_parts(message.content))
    if isinstance(message, HumanMessage):
        return Message("user", _text_parts(message.content))
    if isinstance(message, AIMessage):
        return _assistant(message)
    if isinstance(message, ToolMessage):
        return Message.tool(_tool_result(message, call_names or {}))
    if isinstance(message, ChatMessage) and message.role in ("system", "developer"):
        return Message("system", _text_parts(message.content))
    if isinstance(message, ChatMessage) and message.role in ("user", "human"):
        return Message("user", _text_parts(message.content))
    if isinstance(message, ChatMessage) and message.role in ("assistant", "ai"):
        return Message("assistant", tuple(_parts(message.content)))
    raise TypeError(f"contextfold cannot map a LangChain {type(message).__name__}")


def _assistant(message: AIMessage) -> Message:
    parts: list[Part] = [p for p in _parts(message.content) if p != TextPart("")]
    for call in message.tool_calls:
        parts.append(ToolCallPart.from_args(call["id"] or "", call["name"], call["args"]))
    for bad in message.invalid_tool_calls:
        parts.append(ToolCallPart(bad["id"] or "", bad["name"] or "", bad["args"] or ""))
    usage = _usage(message.usage_metadata)
    return Message("assistant", tuple(parts), meta=Meta(usage=usage) if usage else Meta())


def _tool_result(message: ToolMessage, call_names: Mapping[str, str]) -> ToolResultPart:
    parts = _parts(message.content)
    text = "\n".join(p.text for p in parts if isinstance(p, TextPart))
    images = tuple(p for p in parts if isinstance(p, ImagePart))
    name = message.name or call_names.get(message.tool_call_id, "")
    return ToolResultPart(message.tool_call_id, name, text, message.status == "error", images)


def _text_parts(content: str | Sequence[str | dict[Any, Any]]) -> tuple[Part, ...]:
    """Parts of a user or system message: never none (an empty message still says nothing)."""
    return tuple(_parts(content)) or (TextPart(""),)


def _parts(content: str | Sequence[str | dict[Any, Any]]) -> list[Part]:
    if isinstance(content, str):
        return [TextPart(content)] if content else []
    parts: list[Part] = []
    for block in content:
        part = TextPart(block) if isinstance(block, str) else _block_part(block)
        if part is not None:
            parts.append(part)
    return parts


def _block_part(block: Mapping[str, Any]) -> Part | None:
    kind = block.get("type")
    if kind == "text":
        return TextPart(str(block.get("text", "")))
    if kind in ("image", "image_url"):
        return _image(block)
    if kind == "reasoning":
        extras = block.get("extras")
        signature = extras.get("signature") if isinstance(extras, Mapping) else None
        return ThinkingPart(str(block.get("reasoning", "")), signature)
    if kind == "thinking":
        return ThinkingPart(str(block.get("thinking", "")), block.get("signature"))
    if kind == "redacted_thinking":
        return ThinkingPart("", None, str(block.get("data", "")))
    # Tool-call blocks duplicate tool_calls; other kinds have no contextfold part (see above).
    return None


def _image(block: Mapping[str, Any]) -> ImagePart | None:
    if block.get("type") == "image_url":
        inner = block.get("image_url")
        if isinstance(inner, str):
            return ImagePart(inner, _data_url_type(inner))
        inner_url = inner.get("url") if isinstance(inner, Mapping) else None
        if isinstance(inner, Mapping) and isinstance(inner_url, str):
            return ImagePart(inner_url, _data_url_type(inner_url), inner.get("detail"))
        return None
    source = block.get("source")
    if isinstance(source, Mapping):  # Anthropic's own image block
        if source.get("type") == "base64":
            source_type = str(source.get("media_type", ""))
            data = source.get("data", "")
            return ImagePart(f"data:{source_type};base64,{data}", source_type or None)
        source_url = source.get("url")
        if isinstance(source_url, str):
            return ImagePart(source_url)
        return None
    media = block.get("mime_type")
    extras = block.get("extras")
    detail = extras.get("detail") if isinstance(extras, Mapping) else None
    if isinstance(block.get("base64"), str):
        return ImagePart(f"data:{media or ''};base64,{block['base64']}", media, detail)
    if isinstance(block.get("url"), str):
        return ImagePart(block["url"], media or _data_url_type(block["url"]), detail)
    return None


def _data_url_type(url: str) -> str | None:
    if not url.startswith("data:"):
        return None
    media = url[5:].split(";", 1)[0].split(",", 1)[0]
    return media or None


def _usage(metadata: UsageMetadata | None) -> Usage | None:
    if not metadata:
        return None
    details = metadata.get("input_token_details") or {}
    return Usage(
        input_tokens=metadata.get("input_tokens", 0),
        output_tokens=metadata.get("output_tokens", 0),
        cache_read_tokens=details.get("cache_read", 0) or 0,
        cache_write_tokens=details.get("cache_creation", 0) or 0,
    )


# -- contextfold -> LangChain ---------------------------------------------------------------------


def from_messages(messages: Iterable[Message]) -> list[AnyMessage]:
    """contextfold messages as a LangChain history (a tool message holding several results
    becomes one ToolMessage per result, as LangChain keeps them)."""
    return [out for message in messages for out in from_message(message)]


def from_message(message: Message) -> list[AnyMessage]:
    """One contextfold message as LangChain messages (several for a multi-result tool message)."""
    if message.role == "tool":
        return [_tool_message(r) for r in message.tool_results]
    if message.role == "assistant":
        return [_ai_message(message)]
    content = _content(message.parts)
    if message.role == "system":
        return [SystemMessage(content=content, id=message.id)]
    return [HumanMessage(content=content, id=message.id)]


def _ai_message(message: Message) -> AIMessage:
    calls: list[ToolCall] = []
    invalid: list[InvalidToolCall] = []
    for call in message.tool_calls:
        if call.arguments_valid:
            calls.append(ToolCall(name=call.name, args=call.args(), id=call.call_id))
        else:
            invalid.append(
                InvalidToolCall(
                    type="invalid_tool_call",
                    name=call.name,
                    args=call.arguments,
                    id=call.call_id,
                    error=None,
                )
            )
    content = _content([p for p in message.parts if not isinstance(p, ToolCallPart)])
    usage = message.meta.usage
    return AIMessage(
        content=content,
        tool_calls=calls,
        invalid_tool_calls=invalid,
        usage_metadata=_usage_metadata(usage) if usage is not None else None,
        id=message.id,
    )


def _tool_message(result: ToolResultPart) -> ToolMessage:
    content: str | list[str | dict[str, Any]] = result.content
    if result.images:
        content = [{"type": "text", "text": result.content}]
        content.extend(_image_block(i) for i in result.images)
    return ToolMessage(
        content=content,
        tool_call_id=result.call_id,
        name=result.name or None,
        status="error" if result.is_error else "success",
    )


def _content(parts: Sequence[Part]) -> str | list[str | dict[str, Any]]:
    """A lone text part as a plain string (how LangChain spells most messages), else blocks."""
    if not parts:
        return ""
    if len(parts) == 1 and isinstance(parts[0], TextPart | SummaryPart):
        return parts[0].text
    return [_block(p) for p in parts]


def _block(part: Part) -> dict[str, Any]:
    if isinstance(part, TextPart | SummaryPart):
        # LangChain has no summary block: the model reads a summary as text.
        return {"type": "text", "text": part.text}
    if isinstance(part, ImagePart):
        return _image_block(part)
    if isinstance(part, ThinkingPart):
        if part.redacted_data is not None:
            return {"type": "redacted_thinking", "data": part.redacted_data}
        if part.signature is not None:
            # Anthropic wants its signed thinking back in its own block, unchanged.
            return {"type": "thinking", "thinking": part.text, "signature": part.signature}
        return {"type": "reasoning", "reasoning": part.text}
    if isinstance(part, ToolResultPart):  # a result outside a tool message: keep its text
        return {"type": "text", "text": part.content}
    return {"type": "text", "text": json.dumps({"name": part.name, "arguments": part.arguments})}


def _image_block(image: ImagePart) -> dict[str, Any]:
    if image.is_inline and ";base64," in image.url:
        header, data = image.url.split(";base64,", 1)
        media = image.media_type or header[5:] or None
        block: dict[str, Any] = {"type": "image", "base64": data}
        if media:
            block["mime_type"] = media
    else:
        block = {"type": "image", "url": image.url}
        if image.media_type:
            block["mime_type"] = image.media_type
    if image.detail is not None:
        block["extras"] = {"detail": image.detail}
    return block


def _usage_metadata(usage: Usage) -> UsageMetadata:
    return UsageMetadata(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        total_tokens=usage.total_tokens,
        input_token_details=InputTokenDetails(
            cache_read=usage.cache_read_tokens, cache_creation=usage.cache_write_tokens
        ),
    )
