"""The OpenAI Chat Completions protocol, as the proxy speaks it to clients and to the upstream."""

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
from contextfold.wire import chat_completions_request as openai_wire
from contextfold.wire.chat_completions import from_openai_message, usage_from_openai
from contextfold.wire.chat_completions_models import ChatRequestError, check_request

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

_ENGINE_OWNED = ("messages", "tools", "max_tokens", "max_completion_tokens", "stream_options")
"""Body fields the engine writes; every other field of the client's request goes up as sent."""

_SYSTEM_ROLES = ("system", "developer")

_ERROR_TYPES = {
    "invalid_request": ("invalid_request_error", None),
    "authentication": ("authentication_error", "invalid_api_key"),
    "not_found": ("invalid_request_error", "not_found"),
    "request_too_large": ("invalid_request_error", "request_too_large"),
    "context_length": ("invalid_request_error", "context_length_exceeded"),
    "upstream": ("api_error", None),
}


def error_body(error: ClientError) -> dict[str, Any]:
    """The error as the Chat Completions API spells one."""
    kind, code = _ERROR_TYPES.get(error.kind, ("api_error", None))
    return {"error": {"message": error.message, "type": kind, "param": error.param, "code": code}}


def stream_error(error: ClientError) -> bytes:
    """The error as a chunk in the middle of a Chat Completions stream."""
    return sse(error_body(error))


def _tools(raw: Any) -> tuple[list[ToolSpec], dict[str, Mapping[str, Any]]]:
    if raw is None:
        return [], {}
    if not isinstance(raw, list):
        raise ClientError("tools: expected a list")
    specs: list[ToolSpec] = []
    by_name: dict[str, Mapping[str, Any]] = {}
    for index, tool in enumerate(raw):
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(function, Mapping) or tool.get("type") != "function":
            raise ClientError(f"tools[{index}]: only function tools are supported")
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise ClientError(f"tools[{index}].function.name: Field required")
        parameters = function.get("parameters")
        specs.append(
            ToolSpec(
                name,
                str(function.get("description") or ""),
                parameters
                if isinstance(parameters, Mapping)
                else {"type": "object", "properties": {}},
            )
        )
        by_name[name] = tool
    return specs, by_name


def _content_items(content: Any) -> list[object]:
    if isinstance(content, str):
        return [["text", text]] if (text := content.strip()) else []
    items: list[object] = []
    for part in content if isinstance(content, list) else []:
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind == "text" and (text := str(part.get("text", "")).strip()):
            items.append(["text", text])
        elif kind == "image_url":
            items.append(["image", fingerprint(part.get("image_url"))])
    return items


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "\n".join(
        str(p.get("text", "")) for p in parts if isinstance(p, Mapping) and p.get("type") == "text"
    )


def wire_digest(raw: Mapping[str, Any], defaults: ArgumentDefaults | None = None) -> bytes:
    """The digest of one Chat Completions message (see :mod:`contextfold.proxy._identity`);
    ``defaults``: the client's tools' argument defaults (:func:`schema_defaults`)."""
    role = raw.get("role")
    if role in ("tool", "function"):
        result = ["result", raw.get("tool_call_id"), _content_items(raw.get("content"))]
        return digest_of(role, [result])
    items: list[object] = _content_items(raw.get("content"))
    for call in raw.get("tool_calls") or []:
        function = (call.get("function") or {}) if isinstance(call, Mapping) else {}
        call_id = call.get("id") if isinstance(call, Mapping) else None
        items.append(call_item(call_id, function.get("name"), function.get("arguments"), defaults))
    return digest_of(role, items)


def _reader(raw_messages: Sequence[Mapping[str, Any]]) -> MessageReader:
    def read(start: int, stop: int) -> list[list[Message]]:
        names = {
            str(call.get("id")): str((call.get("function") or {}).get("name"))
            for raw in raw_messages[:stop]
            for call in raw.get("tool_calls") or []
            if isinstance(call, Mapping)
        }
        groups: list[list[Message]] = []
        for index in range(start, stop):
            try:
                message = from_openai_message(raw_messages[index], call_names=names, index=index)
            except FormatError as exc:
                raise ClientError(f"messages[{index}]: {exc}") from None
            groups.append([message])
        return groups

    return read


def parse_request(body: Any) -> ClientRequest:
    """The client's ``POST /v1/chat/completions`` body, checked whole against the typed models
    of :mod:`contextfold.wire.chat_completions_models` and read; :class:`ClientError` naming
    the field when it is not a request the proxy can carry.

    Leading system (or developer) messages are the system prompt; later ones stay in the
    conversation.
    """
    try:
        check_request(body)
    except ChatRequestError as exc:
        raise ClientError(str(exc), param=exc.param) from None
    model: str = body["model"]
    raw_messages: list[Mapping[str, Any]] = body["messages"]
    if body.get("n") not in (None, 1):
        raise ClientError("n: contextfold proxy carries one choice per request", param="n")
    leading = 0
    while leading < len(raw_messages) and raw_messages[leading].get("role") in _SYSTEM_ROLES:
        leading += 1
    system = [text for raw in raw_messages[:leading] if (text := _text(raw.get("content")))]
    conversation = raw_messages[leading:]
    if not conversation:
        raise ClientError("messages: expected at least one message after the system prompt")
    field = next((f for f in ("max_completion_tokens", "max_tokens") if f in body), None)
    max_tokens = body.get(field) if field else None
    tools, raw_tools = _tools(body.get("tools"))
    first_user = next((m for m in conversation if m.get("role") == "user"), None)
    return ClientRequest(
        protocol="openai",
        body=body,
        model=model,
        digests=[wire_digest(raw, schema_defaults(tools)) for raw in conversation],
        reader=_reader(conversation),
        system="\n\n".join(system),
        tools=tools,
        raw_tools=raw_tools,
        stream=bool(body.get("stream")),
        max_tokens=max_tokens,
        max_tokens_field=field,
        first_user_text=_text(first_user.get("content")) if first_user else "",
        has_system_messages=any(m.get("role") in _SYSTEM_ROLES for m in conversation),
    )


def upstream_body(
    client: ClientRequest, prepared: PreparedRequest, *, max_tokens: int | None
) -> dict[str, Any]:
    """The body the upstream receives: the engine's view, with the client's other fields (its
    ``tool_choice`` included) and its own tool definitions as it wrote them."""
    encoded = openai_wire.encode_request(
        prepared.to_chat_request(max_tokens=max_tokens),
        model=client.model,
        max_tokens_field=client.max_tokens_field or "max_tokens",  # type: ignore[arg-type]
    )
    body = dict(encoded)
    body.update({k: v for k, v in client.body.items() if k not in _ENGINE_OWNED})
    if "tools" in encoded:
        body["tools"] = [client.raw_tools.get(t["function"]["name"], t) for t in encoded["tools"]]
    if client.stream:
        # The engine anchors its estimates on the usage the upstream reports.
        body["stream_options"] = {
            **(client.body.get("stream_options") or {}),
            "include_usage": True,
        }
    return body


def _is_engine_call(call: Mapping[str, Any], engine_tools: Collection[str]) -> bool:
    return (call.get("function") or {}).get("name") in engine_tools


def read_reply(
    message: Mapping[str, Any],
    usage: Mapping[str, Any],
    stop: str | None,
    engine_tools: Collection[str],
) -> tuple[RoundReply, dict[str, Any]]:
    """One upstream reply (its message, usage and finish reason), and the part of the message
    the client may see."""
    full = from_openai_message({**message, "role": "assistant"})
    calls = [c for c in message.get("tool_calls") or [] if not _is_engine_call(c, engine_tools)]
    visible = {k: v for k, v in message.items() if k != "tool_calls"}
    if calls:
        visible["tool_calls"] = calls
    reply = RoundReply(
        message=full,
        usage=usage_from_openai(usage),
        raw_usage=dict(usage),
        stop=stop,
        engine_calls=[c for c in full.tool_calls if c.name in engine_tools],
        client_calls=len(calls),
    )
    return reply, visible


def read_body(
    body: Mapping[str, Any], engine_tools: Collection[str]
) -> tuple[RoundReply, dict[str, Any]]:
    """A non-streaming upstream response, read like one streamed round."""
    choices = body.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], Mapping) else {}
    return read_reply(
        _mapping(choice.get("message")),
        _mapping(body.get("usage")),
        choice.get("finish_reason"),
        engine_tools,
    )


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def join(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The client's one message from every round's visible share: texts joined, calls in order."""
    merged: dict[str, Any] = {"role": "assistant", "content": None}
    texts = [p["content"] for p in parts if isinstance(p.get("content"), str) and p["content"]]
    if texts:
        merged["content"] = "".join(texts)
    reasoning = [p["reasoning_content"] for p in parts if p.get("reasoning_content")]
    if reasoning:
        merged["reasoning_content"] = "".join(reasoning)
    calls = [c for p in parts for c in p.get("tool_calls") or []]
    if calls:
        merged["tool_calls"] = calls
    if parts:
        extra = {k: v for k, v in parts[-1].items() if k not in merged and k != "tool_calls"}
        merged.update(extra)
    return merged


def visible_digest(message: Mapping[str, Any]) -> bytes:
    """The digest of the reply as the client will send it back."""
    return wire_digest({**message, "role": "assistant"})


def client_body(
    final: Mapping[str, Any], message: Mapping[str, Any], stop: str | None, usage: Mapping[str, Any]
) -> dict[str, Any]:
    """The response the client gets: the last upstream reply, carrying every round's visible
    message and the usage of all of them."""
    choices = list(final.get("choices") or [{}])
    choices[0] = {**choices[0], "message": dict(message), "finish_reason": stop}
    body = {**final, "choices": choices}
    if usage:
        body["usage"] = dict(usage)
    return body


class StreamRelay:
    """Passes an upstream stream of chunks on to the client, round after round, as one
    completion: engine tool calls held back, call indexes renumbered, one ``id``, the finish
    reason and usage sent once at the end. Each round is read whole as it passes."""

    def __init__(self, engine_tools: Collection[str], client: ClientRequest) -> None:
        self.engine_tools = frozenset(engine_tools)
        options = client.body.get("stream_options")
        self.client_wants_usage = isinstance(options, Mapping) and bool(
            options.get("include_usage")
        )
        self.parts: list[dict[str, Any]] = []
        self.round_over = False
        self.usage: dict[str, Any] = {}
        self._template: dict[str, Any] | None = None
        self._role_sent = False
        self._next_call = 0
        self._begin_round()

    def _begin_round(self) -> None:
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}
        self._hidden: set[int] = set()
        self._index: dict[int, int] = {}
        self._round_usage: dict[str, Any] = {}
        self._stop: str | None = None
        self.round_over = False

    @property
    def visible(self) -> dict[str, Any]:
        """The client's message so far, every round's visible share joined."""
        return join(self.parts)

    def _chunk(self, delta: Mapping[str, Any], finish: str | None = None) -> bytes:
        template = self._template or {"object": "chat.completion.chunk"}
        choice = {"index": 0, "delta": dict(delta), "finish_reason": finish}
        return sse({**template, "choices": [choice]})

    def feed(self, event: str | None, text: str) -> list[bytes]:
        """The bytes to pass on for one upstream chunk (none for what is held back);
        :attr:`round_over` turns true at ``[DONE]``."""
        if text.strip() == "[DONE]":
            self.round_over = True
            return []
        data = json.loads(text)
        if not isinstance(data, dict):
            return []
        if "error" in data:  # a server's error in the middle of a stream: the client reads it
            return [sse(data)]
        if self._template is None:
            self._template = {k: v for k, v in data.items() if k not in ("choices", "usage")}
        if isinstance(data.get("usage"), Mapping):
            self._round_usage = dict(data["usage"])
        choices = data.get("choices") or []
        if not choices:
            return []
        choice = choices[0]
        delta = choice.get("delta") or {}
        if choice.get("finish_reason"):
            self._stop = choice["finish_reason"]
        out: dict[str, Any] = {}
        if delta.get("role") and not self._role_sent:
            out["role"] = delta["role"]
            self._role_sent = True
        for key, sink in (("content", self._text), ("reasoning_content", self._reasoning)):
            if isinstance(delta.get(key), str) and delta[key]:
                sink.append(delta[key])
                out[key] = delta[key]
        calls = [c for c in delta.get("tool_calls") or [] if isinstance(c, Mapping)]
        shown = [shown for call in calls if (shown := self._call_delta(call)) is not None]
        if shown:
            out["tool_calls"] = shown
        return [self._chunk(out)] if out else []

    def _call_delta(self, call: Mapping[str, Any]) -> dict[str, Any] | None:
        index = int(call.get("index", 0))
        function = call.get("function") or {}
        known = self._calls.get(index)
        if known is None:
            known = {
                "id": call.get("id") or "",
                "type": "function",
                "function": {"name": function.get("name") or "", "arguments": ""},
            }
            self._calls[index] = known
            if known["function"]["name"] in self.engine_tools:
                self._hidden.add(index)
            else:
                self._index[index] = self._next_call
                self._next_call += 1
        elif function.get("name") and not known["function"]["name"]:
            known["function"]["name"] = function["name"]
        known["function"]["arguments"] += str(function.get("arguments") or "")
        if index in self._hidden:
            return None
        return {**call, "index": self._index[index]}

    def reply(self) -> RoundReply:
        """The round just streamed, read whole; its visible share joins the client's message."""
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self._text) or None}
        if self._reasoning:
            message["reasoning_content"] = "".join(self._reasoning)
        calls = [self._calls[i] for i in sorted(self._calls)]
        if calls:
            message["tool_calls"] = calls
        reply, visible = read_reply(message, self._round_usage, self._stop, self.engine_tools)
        self.parts.append(visible)
        self.usage = add_usage(self.usage, self._round_usage)
        self._begin_round()
        return reply

    def finish(self, stop: str | None) -> list[bytes]:
        """The end of the client's completion: the finish reason, the usage if it asked."""
        out = [self._chunk({}, stop or "stop")]
        if self.client_wants_usage and self.usage:
            template = self._template or {"object": "chat.completion.chunk"}
            out.append(sse({**template, "choices": [], "usage": self.usage}))
        out.append(sse("[DONE]"))
        return out
