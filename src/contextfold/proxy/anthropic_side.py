"""The Anthropic Messages protocol, as the proxy speaks it to clients and to the upstream."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from contextfold.engine import PreparedRequest
from contextfold.errors import FormatError
from contextfold.hosts.digests import (
    ArgumentDefaults,
    call_item,
    digest_of,
    fingerprint,
    schema_defaults,
)
from contextfold.messages import Message
from contextfold.proxy._wire import (
    ClientError,
    ClientRequest,
    MessageReader,
    RoundReply,
    add_usage,
    sse,
)
from contextfold.tool_spec import ToolSpec
from contextfold.wire import anthropic_request as anthropic_wire
from contextfold.wire.anthropic import from_anthropic_message, usage_from_anthropic
from contextfold.wire.anthropic_models import AnthropicRequestError, check_request

__all__ = [
    "StreamRelay",
    "client_body",
    "error_body",
    "join",
    "parse_request",
    "read_body",
    "read_reply",
    "stream_error",
    "upstream_body",
    "visible_digest",
    "wire_digest",
]

_ENGINE_OWNED = ("messages", "system", "tools", "max_tokens")
"""Body fields the engine writes; every other field of the client's request goes up as sent."""

_ERROR_TYPES = {
    "invalid_request": "invalid_request_error",
    "authentication": "authentication_error",
    "not_found": "not_found_error",
    "request_too_large": "request_too_large",
    "context_length": "invalid_request_error",
    "upstream": "api_error",
}


def error_body(error: ClientError) -> dict[str, Any]:
    """The error as the Messages API spells one."""
    kind = _ERROR_TYPES.get(error.kind, "api_error")
    return {"type": "error", "error": {"type": kind, "message": error.message}}


def stream_error(error: ClientError) -> bytes:
    """The error as an event in the middle of a Messages stream."""
    return sse(error_body(error), "error")


def _system_text(system: Any, where: str = "system") -> str:
    if system is None:
        return ""
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        texts = []
        for block in system:
            if not isinstance(block, Mapping) or block.get("type") != "text":
                raise ClientError(f"{where}: only text blocks are supported")
            texts.append(str(block.get("text", "")))
        return "\n\n".join(texts)
    raise ClientError(f"{where}: expected a string or a list of text blocks")


def _tools(raw: Any) -> tuple[list[ToolSpec], dict[str, Mapping[str, Any]]]:
    if raw is None:
        return [], {}
    if not isinstance(raw, list):
        raise ClientError("tools: expected a list")
    specs: list[ToolSpec] = []
    by_name: dict[str, Mapping[str, Any]] = {}
    for index, tool in enumerate(raw):
        if not isinstance(tool, Mapping) or not isinstance(tool.get("name"), str):
            raise ClientError(f"tools.{index}: expected an object with a name")
        if tool.get("type") not in (None, "custom"):
            raise ClientError(
                f"tools.{index}: server tools ({tool.get('type')!r}) are not supported by "
                "contextfold proxy"
            )
        schema = tool.get("input_schema")
        specs.append(
            ToolSpec(
                tool["name"],
                str(tool.get("description") or ""),
                schema if isinstance(schema, Mapping) else {"type": "object", "properties": {}},
            )
        )
        by_name[tool["name"]] = tool
    return specs, by_name


def _result_items(block: Mapping[str, Any]) -> list[object]:
    content = block.get("content")
    texts: list[str] = []
    images: list[str] = []
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        for item in content:
            if isinstance(item, Mapping) and item.get("type") == "text":
                texts.append(str(item.get("text", "")))
            elif isinstance(item, Mapping) and item.get("type") == "image":
                images.append(fingerprint(item.get("source")))
    return [
        "result",
        block.get("tool_use_id"),
        "\n".join(texts),
        bool(block.get("is_error")),
        images,
    ]


def wire_digest(raw: Mapping[str, Any], defaults: ArgumentDefaults | None = None) -> bytes:
    """The digest of one Messages-API message (see :mod:`contextfold.proxy._identity`);
    ``defaults``: the client's tools' argument defaults (:func:`schema_defaults`)."""
    content = raw.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    items: list[object] = []
    for block in blocks if isinstance(blocks, list) else []:
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind == "text":
            if text := str(block.get("text", "")).strip():
                items.append(["text", text])
        elif kind == "tool_use":
            items.append(
                call_item(block.get("id"), block.get("name"), block.get("input"), defaults)
            )
        elif kind == "tool_result":
            items.append(_result_items(block))
        elif kind == "image":
            items.append(["image", fingerprint(block.get("source"))])
    return digest_of(raw.get("role"), items)


def _first_user_text(messages: Sequence[Mapping[str, Any]]) -> str:
    for raw in messages:
        if raw.get("role") != "user":
            continue
        content = raw.get("content")
        if isinstance(content, str):
            return content
        texts = [
            str(b.get("text", ""))
            for b in content or []
            if isinstance(b, Mapping) and b.get("type") == "text"
        ]
        if texts:
            return " ".join(texts)
    return ""


def _reader(raw_messages: Sequence[Mapping[str, Any]]) -> MessageReader:
    def read(start: int, stop: int) -> list[list[Message]]:
        # Tool results name their tool: the names come from every call before them.
        names = {
            str(b.get("id")): str(b.get("name"))
            for raw in raw_messages[:stop]
            if raw.get("role") == "assistant" and isinstance(raw.get("content"), list)
            for b in raw["content"]
            if isinstance(b, Mapping) and b.get("type") == "tool_use"
        }
        groups: list[list[Message]] = []
        for index in range(start, stop):
            raw = raw_messages[index]
            if raw.get("role") == "system":
                text = _system_text(raw.get("content"), f"messages.{index}.content")
                groups.append([Message.system(text)])
                continue
            try:
                groups.append(from_anthropic_message(raw, call_names=dict(names), index=index))
            except FormatError as exc:
                raise ClientError(f"messages.{index}: {exc}") from None
        return groups

    return read


def parse_request(body: Any) -> ClientRequest:
    """The client's ``POST /v1/messages`` body, checked whole against the typed models of
    :mod:`contextfold.wire.anthropic_models` and read; :class:`ClientError` naming the field
    when it is not a request the proxy can carry."""
    try:
        check_request(body)
    except AnthropicRequestError as exc:
        raise ClientError(str(exc), param=exc.param) from None
    model: str = body["model"]
    max_tokens: int = body["max_tokens"]
    raw_messages: list[Mapping[str, Any]] = body["messages"]
    tools, raw_tools = _tools(body.get("tools"))
    defaults = schema_defaults(tools)
    return ClientRequest(
        protocol="anthropic",
        body=body,
        model=model,
        digests=[wire_digest(raw, defaults) for raw in raw_messages],
        reader=_reader(raw_messages),
        system=_system_text(body.get("system")),
        tools=tools,
        raw_tools=raw_tools,
        stream=bool(body.get("stream")),
        max_tokens=max_tokens,
        max_tokens_field="max_tokens",
        first_user_text=_first_user_text(raw_messages),
        has_system_messages=any(raw["role"] == "system" for raw in raw_messages),
    )


def upstream_body(
    client: ClientRequest, prepared: PreparedRequest, *, max_tokens: int | None
) -> dict[str, Any]:
    """The body the upstream receives: the engine's view, with the client's other fields and
    its own tool definitions as it wrote them (plus the engine's tools)."""
    encoded = anthropic_wire.encode_request(
        prepared.to_chat_request(max_tokens=max_tokens),
        model=client.model,
        inline_system=client.has_system_messages,
    )
    body = {k: v for k, v in client.body.items() if k not in _ENGINE_OWNED}
    body.update({k: v for k, v in encoded.items() if k != "model"})
    tools = encoded.get("tools")
    if tools:
        body["tools"] = [_as_client_wrote(tool, client.raw_tools) for tool in tools]
    return body


def _as_client_wrote(tool: dict[str, Any], raw: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    own = raw.get(tool["name"])
    if own is None:
        return tool
    out = {k: v for k, v in own.items() if k != "cache_control"}
    if "cache_control" in tool:  # the engine's breakpoint, where it put one
        out["cache_control"] = tool["cache_control"]
    return out


def _is_engine_call(block: Mapping[str, Any], engine_tools: Collection[str]) -> bool:
    return block.get("type") == "tool_use" and block.get("name") in engine_tools


def read_reply(
    blocks: Sequence[Mapping[str, Any]],
    usage: Mapping[str, Any],
    stop: str | None,
    engine_tools: Collection[str],
) -> tuple[RoundReply, list[dict[str, Any]]]:
    """One upstream reply (its content blocks, usage and stop reason), and the blocks the
    client may see."""
    [message] = from_anthropic_message({"role": "assistant", "content": list(blocks)})
    visible = [dict(b) for b in blocks if not _is_engine_call(b, engine_tools)]
    engine = [c for c in message.tool_calls if c.name in engine_tools]
    reply = RoundReply(
        message=message,
        usage=usage_from_anthropic(usage),
        raw_usage=dict(usage),
        stop=stop,
        engine_calls=engine,
        client_calls=sum(1 for b in visible if b.get("type") == "tool_use"),
    )
    return reply, visible


def read_body(
    body: Mapping[str, Any], engine_tools: Collection[str]
) -> tuple[RoundReply, list[dict[str, Any]]]:
    """A non-streaming upstream response, read like one streamed round."""
    content = body.get("content")
    blocks = [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []
    usage = body.get("usage")
    return read_reply(
        blocks, usage if isinstance(usage, Mapping) else {}, body.get("stop_reason"), engine_tools
    )


def join(pieces: Sequence[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The client's one message from every round's visible blocks."""
    return [block for piece in pieces for block in piece]


def visible_digest(blocks: Sequence[Mapping[str, Any]]) -> bytes:
    """The digest of the reply as the client will send it back."""
    return wire_digest({"role": "assistant", "content": list(blocks)})


def client_body(
    final: Mapping[str, Any],
    blocks: Sequence[Mapping[str, Any]],
    stop: str | None,
    usage: Mapping[str, Any],
) -> dict[str, Any]:
    """The response the client gets: the last upstream reply, carrying every round's visible
    blocks and the usage of all of them."""
    return {**final, "content": list(blocks), "stop_reason": stop, "usage": dict(usage)}


class StreamRelay:
    """Passes an upstream stream on to the client, round after round, as one message.

    Calls to the engine's tools are held back; block indexes are renumbered so the client sees
    one contiguous message however many upstream replies it took. Each round is read whole as
    it passes (:meth:`reply`), for the transcript.
    """

    def __init__(self, engine_tools: Collection[str], client: ClientRequest) -> None:
        self.engine_tools = frozenset(engine_tools)
        self.visible: list[dict[str, Any]] = []
        self.round_over = False
        self.usage: dict[str, Any] = {}
        self.started = False
        self._next_index = 0
        self._begin_round()

    def _begin_round(self) -> None:
        self._blocks: dict[int, dict[str, Any]] = {}
        self._json: dict[int, str] = {}
        self._hidden: set[int] = set()
        self._index: dict[int, int] = {}
        self._round_usage: dict[str, Any] = {}
        self._stop: str | None = None
        self.round_over = False

    def feed(self, event: str | None, text: str) -> list[bytes]:
        """The bytes to pass on for one upstream event (none for what is held back);
        :attr:`round_over` turns true at the reply's end."""
        data = json.loads(text)
        if not isinstance(data, dict):
            return []
        kind = data.get("type", event)
        if kind == "message_start":
            self._round_usage = dict(data.get("message", {}).get("usage") or {})
            if self.started:
                return []
            self.started = True
            return [sse(data, "message_start")]
        if kind == "content_block_start":
            index = int(data["index"])
            block = dict(data.get("content_block") or {})
            self._blocks[index] = block
            if _is_engine_call(block, self.engine_tools):
                self._hidden.add(index)
                return []
            self._index[index] = self._next_index
            self._next_index += 1
            return [sse({**data, "index": self._index[index]}, "content_block_start")]
        if kind in ("content_block_delta", "content_block_stop"):
            index = int(data["index"])
            if kind == "content_block_delta":
                self._accumulate(index, data.get("delta") or {})
            else:
                self._close_block(index)
            if index in self._hidden or index not in self._index:
                return []
            return [sse({**data, "index": self._index[index]}, str(kind))]
        if kind == "message_delta":
            self._stop = (data.get("delta") or {}).get("stop_reason")
            self._round_usage.update(data.get("usage") or {})
            return []
        if kind == "message_stop":
            self.round_over = True
            return []
        return [sse(data, str(kind))]  # ping, error, and events this relay does not know

    def _accumulate(self, index: int, delta: Mapping[str, Any]) -> None:
        block = self._blocks.setdefault(index, {"type": "text", "text": ""})
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = block.get("text", "") + str(delta.get("text", ""))
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + str(delta.get("thinking", ""))
        elif kind == "signature_delta":
            block["signature"] = delta.get("signature")
        elif kind == "input_json_delta":
            self._json[index] = self._json.get(index, "") + str(delta.get("partial_json", ""))

    def _close_block(self, index: int) -> None:
        block = self._blocks.get(index)
        if block is None or block.get("type") != "tool_use" or index not in self._json:
            return
        text = self._json.pop(index)
        try:
            block["input"] = json.loads(text) if text.strip() else {}
        except ValueError:
            block["input"] = text  # kept verbatim: the transcript shows what the model sent

    def reply(self) -> RoundReply:
        """The round just streamed, read whole; its visible blocks join the client's message."""
        blocks = [self._blocks[i] for i in sorted(self._blocks)]
        reply, visible = read_reply(blocks, self._round_usage, self._stop, self.engine_tools)
        self.visible.extend(visible)
        self.usage = add_usage(self.usage, self._round_usage)
        self._begin_round()
        return reply

    def finish(self, stop: str | None) -> list[bytes]:
        """The end of the client's message: the last stop reason and every round's usage."""
        delta = {"stop_reason": stop, "stop_sequence": None}
        return [
            sse({"type": "message_delta", "delta": delta, "usage": self.usage}, "message_delta"),
            sse({"type": "message_stop"}, "message_stop"),
        ]
