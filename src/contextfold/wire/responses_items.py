"""Responses API input items and tools, to and from contextfold's neutral values.

The reading and writing that :mod:`contextfold.wire.responses` (requests) and
:mod:`contextfold.wire.responses_stream` (replies) share; the module docstring of
:mod:`contextfold.wire.responses` says how items map to messages.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from contextfold.messages import (
    ImagePart,
    Message,
    Meta,
    Part,
    Role,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from contextfold.tool_spec import ToolSpec

__all__ = [
    "NAMESPACE_SEPARATOR",
    "OPAQUE_FLAG",
    "PROVIDER_KEY",
    "items_to_messages",
    "messages_to_items",
    "new_id",
    "read_tools",
    "tool_to_spec",
    "tools_to_wire",
]

PROVIDER_KEY = "responses"
"""The key under ``Message.meta.provider`` that holds what the items carried beyond the parts."""

OPAQUE_FLAG = "responses_opaque"
"""Flag of a message that stands for one item contextfold cannot read (kept whole)."""

NAMESPACE_SEPARATOR = "__"
"""Between a namespace and a tool's name in the neutral name: a dot would be refused by Chat and
Anthropic servers, whose tool names allow only ``[A-Za-z0-9_-]``."""

_MODEL_SIDE = frozenset({"reasoning", "function_call", "custom_tool_call", "local_shell_call"})
_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output", "local_shell_call_output"})
_SUMMARY_ITEMS = frozenset({"compaction", "compaction_summary", "context_compaction"})
_OPAQUE_ASSISTANT_SUFFIXES = ("_call",)
_TEXT_PARTS = frozenset({"input_text", "output_text", "text", "summary_text", "reasoning_text"})


def new_id(prefix: str) -> str:
    """A fresh item or response id in OpenAI's style (``msg_…``, ``fc_…``, ``resp_…``)."""
    return f"{prefix}_{secrets.token_hex(12)}"


# --------------------------------------------------------------------------------------------------
# tools
# --------------------------------------------------------------------------------------------------


def tool_to_spec(tool: Mapping[str, Any], *, namespace: str | None = None) -> ToolSpec | None:
    """The neutral tool of one ``function`` or ``custom`` tool dict (``None`` for a hosted tool
    such as ``web_search``, which no other protocol can offer)."""
    kind = tool.get("type")
    name = str(tool.get("name", ""))
    if namespace:
        name = f"{namespace}{NAMESPACE_SEPARATOR}{name}"
    description = str(tool.get("description") or "")
    if kind == "function":
        parameters = tool.get("parameters")
        if not isinstance(parameters, Mapping):
            parameters = {"type": "object", "properties": {}}
        return ToolSpec(name, description, parameters)
    if kind == "custom":
        return ToolSpec(name, description, _custom_parameters(tool.get("format")))
    return None


def _custom_parameters(fmt: Any) -> dict[str, Any]:
    """A freeform tool as a function of one string: the grammar, when there is one, goes in the
    parameter's description so that a model on another protocol can still follow it."""
    note = "The tool's freeform input."
    if isinstance(fmt, Mapping) and fmt.get("type") == "grammar":
        note += (
            f" It must follow this {fmt.get('syntax', '')} grammar:\n{fmt.get('definition', '')}"
        )
    return {
        "type": "object",
        "properties": {"input": {"type": "string", "description": note}},
        "required": ["input"],
        "additionalProperties": False,
    }


def read_tools(
    raw_tools: Sequence[Mapping[str, Any]],
) -> tuple[list[ToolSpec], set[str], dict[str, tuple[str, str]]]:
    specs: list[ToolSpec] = []
    custom: set[str] = set()
    namespaces: dict[str, tuple[str, str]] = {}
    for tool in raw_tools:
        group: list[tuple[Mapping[str, Any], str | None]] = [(tool, None)]
        if tool.get("type") == "namespace":
            group = [(inner, str(tool["name"])) for inner in tool["tools"]]
        for inner, namespace in group:
            spec = tool_to_spec(inner, namespace=namespace)
            if spec is None:
                continue
            specs.append(spec)
            if inner.get("type") == "custom":
                custom.add(spec.name)
            if namespace:
                namespaces[spec.name] = (namespace, str(inner["name"]))
    return specs, custom, namespaces


def tools_to_wire(
    tools: Iterable[ToolSpec], *, raw_tools: Iterable[Mapping[str, Any]] = ()
) -> list[dict[str, Any]]:
    """The ``tools`` list of a Responses request: a tool the client defined itself (found by
    name in ``raw_tools``, namespaces included) goes as written; any other as a ``function``.
    Hosted tools of ``raw_tools`` (``web_search``...) are kept, in their place."""
    specs = list(tools)
    wanted = {t.name for t in specs}
    out: list[dict[str, Any]] = []
    written: set[str] = set()
    for tool in raw_tools:
        kind = tool.get("type")
        if kind in ("function", "custom"):
            if tool.get("name") in wanted:
                out.append(dict(tool))
                written.add(str(tool["name"]))
        elif kind == "namespace":
            inner = [
                t
                for t in tool.get("tools", ())
                if f"{tool['name']}{NAMESPACE_SEPARATOR}{t.get('name')}" in wanted
            ]
            written.update(f"{tool['name']}{NAMESPACE_SEPARATOR}{t.get('name')}" for t in inner)
            if inner:
                out.append({**tool, "tools": inner})
        else:
            out.append(dict(tool))
    for spec in specs:
        if spec.name not in written:
            out.append(
                {
                    "type": "function",
                    "name": spec.name,
                    "description": spec.description,
                    "parameters": dict(spec.parameters),
                    "strict": False,
                }
            )
    return out


# --------------------------------------------------------------------------------------------------
# items -> messages
# --------------------------------------------------------------------------------------------------


def _details(item: Mapping[str, Any], *drop: str) -> dict[str, Any]:
    """What an item carries beyond what its parts hold, kept to be written back verbatim."""
    return {k: v for k, v in item.items() if k not in drop}


def items_to_messages(items: Iterable[Mapping[str, Any]]) -> list[Message]:
    """Neutral messages of checked ``input`` (or ``output``) items; see the docstring of
    :mod:`contextfold.wire.responses`. A namespaced call is named ``<namespace>__<name>``."""
    out: list[Message] = []
    group: list[Mapping[str, Any]] = []
    names: dict[str, str] = {}

    def flush() -> None:
        if group:
            message = _assistant_message(group)
            names.update({c.call_id: c.name for c in message.tool_calls})
            out.append(message)
            group.clear()

    for item in items:
        kind = item.get("type", "message")
        if kind in _MODEL_SIDE or (kind == "message" and item.get("role") == "assistant"):
            group.append(item)
            continue
        flush()
        if kind == "message":
            out.append(_plain_message(item))
        elif kind in _OUTPUTS:
            out.append(_result_message(item, names))
        else:
            out.append(_opaque_message(item))
    flush()
    return out


def _content_parts(content: Any) -> list[Part]:
    if isinstance(content, str):
        return [TextPart(content)]
    parts: list[Part] = []
    for block in content:
        kind = block.get("type")
        if kind in _TEXT_PARTS:
            parts.append(TextPart(block["text"]))
        elif kind == "refusal":
            parts.append(TextPart(block["refusal"]))
        elif kind == "input_image":
            url = block["image_url"]
            parts.append(ImagePart(url, _media_type(url), block.get("detail")))
    return parts


def _media_type(url: str) -> str | None:
    if url.startswith("data:") and ";" in url:
        return url[5 : url.index(";")]
    return None


def _plain_message(item: Mapping[str, Any]) -> Message:
    role = item["role"]
    details = _details(item, "type", "role", "content")
    flags: tuple[str, ...] = ()
    if role == "developer":
        role, flags = "system", ("developer",)
    if isinstance(item["content"], str):
        details["content_form"] = "string"
    provider = {PROVIDER_KEY: details} if details else {}
    return Message(
        role, tuple(_content_parts(item["content"])), meta=Meta(flags=flags, provider=provider)
    )


def _call_name(item: Mapping[str, Any]) -> str:
    name = str(item["name"])
    namespace = item.get("namespace")
    return f"{namespace}{NAMESPACE_SEPARATOR}{name}" if namespace else name


def _assistant_message(items: Sequence[Mapping[str, Any]]) -> Message:
    parts: list[Part] = []
    texts: list[dict[str, Any]] = []
    reasoning: list[dict[str, Any]] = []
    calls: dict[str, dict[str, Any]] = {}
    for item in items:
        kind = item.get("type", "message")
        if kind == "message":
            before = len(parts)
            parts.extend(_content_parts(item["content"]))
            texts.append(
                {**_details(item, "type", "role", "content"), "parts": len(parts) - before}
            )
        elif kind == "reasoning":
            parts.append(ThinkingPart(_reasoning_text(item)))
            reasoning.append(dict(item))
        elif kind == "function_call":
            parts.append(ToolCallPart(item["call_id"], _call_name(item), item["arguments"]))
            calls[item["call_id"]] = _details(item, "call_id", "name", "arguments")
        elif kind == "custom_tool_call":
            arguments = json.dumps({"input": item["input"]}, ensure_ascii=False)
            parts.append(ToolCallPart(item["call_id"], _call_name(item), arguments))
            calls[item["call_id"]] = _details(item, "call_id", "name", "input")
        elif kind == "local_shell_call":
            call_id = item.get("call_id") or item.get("id") or new_id("call")
            arguments = json.dumps(item["action"], ensure_ascii=False)
            parts.append(ToolCallPart(call_id, "local_shell", arguments))
            calls[call_id] = _details(item, "call_id", "action")
    details: dict[str, Any] = {}
    if texts:
        details["messages"] = texts
    if reasoning:
        details["reasoning"] = reasoning
    if calls:
        details["calls"] = calls
    flags = ("invalid_arguments",) if any(not c.arguments_valid for c in _calls_of(parts)) else ()
    provider = {PROVIDER_KEY: details} if details else {}
    return Message("assistant", tuple(parts), meta=Meta(flags=flags, provider=provider))


def _calls_of(parts: Iterable[Part]) -> list[ToolCallPart]:
    return [p for p in parts if isinstance(p, ToolCallPart)]


def _reasoning_text(item: Mapping[str, Any]) -> str:
    """What the model's reasoning said: its summaries, or its full text when a server sends that
    instead (open models through vLLM do)."""
    summaries = [s["text"] for s in item.get("summary") or ()]
    if summaries:
        return "\n\n".join(summaries)
    return "\n\n".join(c["text"] for c in item.get("content") or ())


def _output_text(output: Any) -> tuple[str, tuple[ImagePart, ...]]:
    if isinstance(output, str):
        return output, ()
    parts = _content_parts(output)
    text = "\n".join(p.text for p in parts if isinstance(p, TextPart))
    return text, tuple(p for p in parts if isinstance(p, ImagePart))


def _result_message(item: Mapping[str, Any], names: Mapping[str, str]) -> Message:
    kind = item["type"]
    if kind == "local_shell_call_output":
        call_id = item["id"]
        details = _details(item, "id", "output")
    else:
        call_id = item["call_id"]
        details = _details(item, "call_id", "output")
        if isinstance(item["output"], list):
            details["output_form"] = "list"
    text, images = _output_text(item["output"])
    result = ToolResultPart(call_id, names.get(call_id, ""), text, images=images)
    return Message.tool(result, meta=Meta(kind="tool_result", provider={PROVIDER_KEY: details}))


def _opaque_message(item: Mapping[str, Any]) -> Message:
    kind = str(item.get("type"))
    details = {"item": dict(item)}
    if kind in _SUMMARY_ITEMS:
        # The summary OpenAI (or this proxy) made of what came before; readable only by whoever
        # encrypted it, so its text is empty here.
        part = SummaryPart("", source="openai" if kind != "context_compaction" else "codex")
        return Message(
            "user",
            (part,),
            meta=Meta(kind="summary", flags=(OPAQUE_FLAG,), provider={PROVIDER_KEY: details}),
        )
    role: Role = "assistant" if kind.endswith(_OPAQUE_ASSISTANT_SUFFIXES) else "user"
    return Message(role, (), meta=Meta(flags=(OPAQUE_FLAG,), provider={PROVIDER_KEY: details}))


# --------------------------------------------------------------------------------------------------
# messages -> items
# --------------------------------------------------------------------------------------------------


def messages_to_items(
    messages: Iterable[Message],
    *,
    custom_tools: Iterable[str] = (),
    namespaces: Mapping[str, tuple[str, str]] | None = None,
    keep_encrypted: bool = True,
) -> list[dict[str, Any]]:
    """The ``input`` items of ``messages`` (those hidden from the agent are left out).

    What a message read by :func:`items_to_messages` carried beyond its parts is written back
    verbatim. ``custom_tools`` names freeform tools, whose calls are written as
    ``custom_tool_call`` (their ``{"input": ...}`` arguments unwrapped); ``namespaces`` maps a
    neutral name to its namespace. ``keep_encrypted=False`` drops reasoning ``encrypted_content``
    and opaque items (for an upstream that did not make them).
    """
    custom = frozenset(custom_tools)
    spaces = dict(namespaces or {})
    out: list[dict[str, Any]] = []
    for message in messages:
        if not message.meta.agent_visible:
            continue
        details = message.meta.provider.get(PROVIDER_KEY)
        details = details if isinstance(details, Mapping) else {}
        if OPAQUE_FLAG in message.meta.flags and isinstance(details.get("item"), Mapping):
            if keep_encrypted:
                out.append(dict(details["item"]))
            continue
        if message.role == "tool":
            out.extend(_result_items(message, details))
        elif message.role == "assistant":
            out.extend(_assistant_items(message, details, custom, spaces, keep_encrypted))
        else:
            out.extend(_plain_items(message, details))
    return out


def _plain_items(message: Message, details: Mapping[str, Any]) -> list[dict[str, Any]]:
    role: str = message.role
    if role == "system" and "developer" in message.meta.flags:
        role = "developer"
    kind = "output_text" if role == "assistant" else "input_text"
    content: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart | SummaryPart):
            content.append({"type": kind, "text": part.text})
        elif isinstance(part, ImagePart):
            image: dict[str, Any] = {"type": "input_image", "image_url": part.url}
            if part.detail is not None:
                image["detail"] = part.detail
            content.append(image)
    if not content:
        return []
    extra = {k: v for k, v in details.items() if k not in ("content_form",)}
    if details.get("content_form") == "string" and len(content) == 1 and "text" in content[0]:
        return [{"type": "message", "role": role, "content": content[0]["text"], **extra}]
    return [{"type": "message", "role": role, "content": content, **extra}]


def _result_items(message: Message, details: Mapping[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for result in message.tool_results:
        kind = details.get("type", "function_call_output")
        output: Any = result.content
        if result.images or details.get("output_form") == "list":
            output = [{"type": "input_text", "text": result.content}] if result.content else []
            output += [{"type": "input_image", "image_url": i.url} for i in result.images]
        extra = {k: v for k, v in details.items() if k not in ("type", "output_form")}
        if kind == "local_shell_call_output":
            out.append({**extra, "type": kind, "id": result.call_id, "output": result.content})
        else:
            out.append({**extra, "type": kind, "call_id": result.call_id, "output": output})
    return out


def _assistant_items(
    message: Message,
    details: Mapping[str, Any],
    custom: frozenset[str],
    spaces: Mapping[str, tuple[str, str]],
    keep_encrypted: bool,
) -> list[dict[str, Any]]:
    stubs = list(details.get("messages") or ())
    reasoning = list(details.get("reasoning") or ())
    calls = details.get("calls") or {}
    out: list[dict[str, Any]] = []
    texts: list[Part] = []

    def flush_texts() -> None:
        while texts:
            stub = dict(stubs.pop(0)) if stubs else {}
            count = int(stub.pop("parts", len(texts)) or len(texts))
            taken, texts[:] = texts[:count], texts[count:]
            content = [
                {"type": "output_text", "text": p.text}
                for p in taken
                if isinstance(p, TextPart | SummaryPart)
            ]
            # No made-up id: a body written twice from one history must be the same bytes.
            out.append({"type": "message", "role": "assistant", "content": content, **stub})

    for part in message.parts:
        if isinstance(part, TextPart | SummaryPart):
            texts.append(part)
            continue
        flush_texts()
        if isinstance(part, ThinkingPart):
            raw = reasoning.pop(0) if reasoning else None
            out.extend(_reasoning_items(part, raw, keep_encrypted))
        elif isinstance(part, ToolCallPart):
            out.append(_call_item(part, calls.get(part.call_id) or {}, custom, spaces))
    flush_texts()
    return out


def _reasoning_items(
    part: ThinkingPart, raw: Mapping[str, Any] | None, keep_encrypted: bool
) -> list[dict[str, Any]]:
    if raw is not None and _reasoning_text(raw) == part.text:
        item = dict(raw)
        if not keep_encrypted:
            item.pop("encrypted_content", None)
        return [item]
    # Reasoning from another provider, or changed since it was read: its summary only, since an
    # encrypted_content that no longer matches the text would mislead the model that reads it.
    if not part.text:
        return []
    return [{"type": "reasoning", "summary": [{"type": "summary_text", "text": part.text}]}]


def _call_item(
    part: ToolCallPart,
    stored: Mapping[str, Any],
    custom: frozenset[str],
    spaces: Mapping[str, tuple[str, str]],
) -> dict[str, Any]:
    kind = stored.get("type") or ("custom_tool_call" if part.name in custom else "function_call")
    extra = {k: v for k, v in stored.items() if k != "type"}
    if kind == "local_shell_call":
        return {**extra, "type": kind, "call_id": part.call_id, "action": part.args()}
    name = part.name
    if part.name in spaces:
        extra["namespace"], name = spaces[part.name]
    elif "namespace" in extra:
        name = part.name.removeprefix(f"{extra['namespace']}{NAMESPACE_SEPARATOR}")
    item: dict[str, Any] = {"type": kind, **extra, "call_id": part.call_id, "name": name}
    if kind == "custom_tool_call":
        value = part.args().get("input")
        item["input"] = value if isinstance(value, str) else part.arguments
    else:
        item["arguments"] = part.arguments
    return item
