"""OpenAI chat-completions wire format, both directions.

:func:`to_openai` renders neutral messages as the ``messages`` list of a chat-completions request;
:func:`from_openai` reads such a list (also the looser shapes real logs contain: tool calls as a
stringified list, ``reasoning_content`` from DeepSeek, ``developer`` messages). Tool messages do
not repeat the tool name on the wire, so :func:`from_openai` takes it from the matching call.

Round trip: for a well-formed list ``d``, ``to_openai(from_openai(d)) == d``.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from contextfold.errors import FormatError
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
from contextfold.tool_spec import ToolSpec
from contextfold.wire.values import (
    MessageError,
    as_id,
    as_text,
    child,
    shown,
    string,
    token_count,
    too_deep,
)

__all__ = [
    "from_openai",
    "from_openai_message",
    "parse_openai_response",
    "parse_openai_tool_calls",
    "to_openai",
    "tools_to_openai",
    "usage_from_openai",
]


# --------------------------------------------------------------------------------------------------
# neutral -> wire
# --------------------------------------------------------------------------------------------------


def to_openai(
    messages: Iterable[Message],
    *,
    system: str | None = None,
    include_reasoning: bool = False,
) -> list[dict[str, Any]]:
    """Render ``messages`` as chat-completions dicts.

    ``system`` (if given) becomes a leading system message. Thinking parts are dropped unless
    ``include_reasoning`` is set, in which case they travel as ``reasoning_content`` (the field
    DeepSeek and vLLM use). Messages hidden from the agent are skipped.
    """
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    for message in messages:
        if not message.meta.agent_visible:
            continue
        if message.role == "tool":
            out.extend(_tool_message(p) for p in message.tool_results)
            continue
        if message.role == "assistant":
            out.append(_assistant_message(message, include_reasoning))
            continue
        out.append({"role": message.role, "content": _content(message.parts)})
    return out


def _content(parts: Sequence[Part]) -> str | list[dict[str, Any]]:
    """A plain string when the parts are only text, else the list-of-parts form."""
    texts = [p for p in parts if isinstance(p, TextPart | SummaryPart)]
    images = [p for p in parts if isinstance(p, ImagePart)]
    if not images and len(texts) == 1:
        return texts[0].text
    if not images and not texts:
        return ""
    blocks: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart | SummaryPart):
            blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            image: dict[str, Any] = {"url": part.url}
            if part.detail is not None:
                image["detail"] = part.detail
            blocks.append({"type": "image_url", "image_url": image})
    return blocks


def _assistant_message(message: Message, include_reasoning: bool) -> dict[str, Any]:
    texts = [p.text for p in message.parts if isinstance(p, TextPart | SummaryPart)]
    out: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) if texts else None}
    if include_reasoning:
        thinking = [p.text for p in message.parts if isinstance(p, ThinkingPart) and p.text]
        if thinking:
            out["reasoning_content"] = "\n".join(thinking)
    calls = message.tool_calls
    if calls:
        out["tool_calls"] = [
            {
                "id": c.call_id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for c in calls
        ]
    return out


def _tool_message(result: ToolResultPart) -> dict[str, Any]:
    content = result.content
    if result.images:
        # The tool role carries text only; say so rather than drop the images silently.
        content += f"\n[{len(result.images)} image(s) not shown: tool messages carry text only]"
    return {"role": "tool", "tool_call_id": result.call_id, "content": content}


def tools_to_openai(tools: Iterable[ToolSpec]) -> list[dict[str, Any]]:
    """The ``tools`` list of a chat-completions request."""
    return [t.to_openai() for t in tools]


# --------------------------------------------------------------------------------------------------
# wire -> neutral
# --------------------------------------------------------------------------------------------------


def from_openai(messages: Iterable[Mapping[str, Any]], *, path: str | None = None) -> list[Message]:
    """Read chat-completions dicts into neutral messages.

    Consecutive ``tool`` dicts stay separate messages (one result each), matching the wire.
    ``path`` only improves error messages.
    """
    out: list[Message] = []
    call_names: dict[str, str] = {}
    for index, raw in enumerate(messages):
        message = from_openai_message(raw, call_names=call_names, path=path, index=index)
        for call in message.tool_calls:
            call_names[call.call_id] = call.name
        out.append(message)
    return out


def from_openai_message(
    raw: Mapping[str, Any],
    *,
    call_names: Mapping[str, str] | None = None,
    path: str | None = None,
    index: int | None = None,
) -> Message:
    """Read one chat-completions message dict; a :class:`MessageError` (a :class:`FormatError`
    carrying ``index``) when it is not one."""
    if not isinstance(raw, Mapping):
        raise MessageError(f"expected an object, got {type(raw).__name__}", index=index, path=path)
    role = string(raw, "role")
    if role in ("system", "developer"):
        flags = ("developer",) if role == "developer" else ()
        return Message("system", _parts_from_content(raw.get("content")), meta=Meta(flags=flags))
    if role == "user":
        return Message("user", _parts_from_content(raw.get("content")))
    if role == "assistant":
        return _assistant_from_openai(raw)
    if role in ("tool", "function"):
        call_id = as_id(raw.get("tool_call_id")) or as_id(raw.get("name")) or ""
        name = as_id(raw.get("name")) or (call_names or {}).get(call_id, "")
        text = _text_from_content(raw.get("content"))
        return Message.tool(ToolResultPart(call_id, name, text))
    raise MessageError(f"unknown role {shown(raw.get('role'))}", index=index, path=path)


def _assistant_from_openai(raw: Mapping[str, Any]) -> Message:
    parts: list[Part] = []
    reasoning = raw.get("reasoning_content") or raw.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        parts.append(ThinkingPart(reasoning))
    content = raw.get("content")
    if content:
        parts.extend(_parts_from_content(content))
    refusal = raw.get("refusal")
    if isinstance(refusal, str) and refusal:
        parts.append(TextPart(refusal))
    calls = parse_openai_tool_calls(raw.get("tool_calls"))
    legacy = raw.get("function_call")
    if not calls and isinstance(legacy, Mapping) and legacy.get("name"):
        calls = [ToolCallPart("function_call", as_text(legacy["name"]), _arguments(legacy))]
    parts.extend(calls)
    flags = ("invalid_arguments",) if any(not c.arguments_valid for c in calls) else ()
    return Message("assistant", tuple(parts), meta=Meta(flags=flags))


def parse_openai_tool_calls(value: Any) -> list[ToolCallPart]:
    """Tool calls from a ``tool_calls`` field, accepting a list, or a list stringified as JSON or
    as a Python literal (both occur in real logs)."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        value = _parse_stringified(value)
    if not isinstance(value, list):
        return []
    calls: list[ToolCallPart] = []
    for position, item in enumerate(value):
        if not isinstance(item, Mapping):
            continue
        function = child(item, "function")
        call_id = as_id(item.get("id")) or f"call_{position}"
        calls.append(ToolCallPart(call_id, as_text(function.get("name")), _arguments(function)))
    return calls


def _parse_stringified(text: str) -> Any:
    """The value a stringified field holds (JSON or a Python literal); ``None`` when it holds
    none, or one nested too deeply to work with."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested too deeply to read
        try:
            value = ast.literal_eval(text)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            # Whatever the text is, it is not a literal (literal_eval raises all of these).
            return None
    return None if too_deep(value) else value


def _arguments(function: Mapping[str, Any]) -> str:
    # Some logs store the arguments already decoded; they are kept as compact JSON text.
    return as_text(function.get("arguments", "{}"))


def _parts_from_content(content: Any) -> tuple[Part, ...]:
    if content is None:
        return ()
    if isinstance(content, str):
        return (TextPart(content),)
    if not isinstance(content, list):
        return (TextPart(as_text(content)),)
    parts: list[Part] = []
    for block in content:
        if isinstance(block, str):
            parts.append(TextPart(block))
            continue
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind in ("text", "input_text", "output_text"):
            parts.append(TextPart(as_text(block.get("text"))))
        elif kind == "image_url":
            image = block.get("image_url")
            url = as_text(image.get("url") if isinstance(image, Mapping) else image)
            parts.append(ImagePart(url, _media_type(url), string(image, "detail")))
        elif kind == "refusal":
            parts.append(TextPart(as_text(block.get("refusal"))))
    return tuple(parts)


def _text_from_content(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(p.text for p in _parts_from_content(content) if isinstance(p, TextPart))


def _media_type(url: str) -> str | None:
    if url.startswith("data:") and ";" in url:
        return url[5 : url.index(";")]
    return None


# --------------------------------------------------------------------------------------------------
# responses
# --------------------------------------------------------------------------------------------------


def usage_from_openai(usage: Any) -> Usage | None:
    """Neutral usage from a chat-completions ``usage`` object (cached tokens as cache reads);
    ``None`` when there is none or it is not an object. A count that is not a whole number of
    tokens reads as 0."""
    if not usage or not isinstance(usage, Mapping):
        return None
    cached = child(usage, "prompt_tokens_details").get("cached_tokens")
    if cached is None:
        # DeepSeek reports cache hits under its own name.
        cached = usage.get("prompt_cache_hit_tokens")
    return Usage(
        input_tokens=token_count(usage.get("prompt_tokens")) or 0,
        output_tokens=token_count(usage.get("completion_tokens")) or 0,
        cache_read_tokens=token_count(cached) or 0,
    )


def parse_openai_response(response: Mapping[str, Any]) -> tuple[Message, Usage | None, str | None]:
    """The assistant message, usage and finish reason of a chat-completions response dict."""
    choices = response.get("choices") or []
    if not choices:
        raise FormatError("chat-completions response has no choices")
    choice = choices[0]
    message = _assistant_from_openai(choice.get("message") or {})
    usage = usage_from_openai(response.get("usage"))
    provider = {k: response[k] for k in ("id", "model") if response.get(k) is not None}
    message = message.with_meta(usage=usage, provider=provider)
    return message, usage, choice.get("finish_reason")
