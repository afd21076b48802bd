"""The OpenAI Chat Completions protocol, as the proxy speaks it to clients and to the upstream."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from contextfold.chat import ChatRequest, ChatResponse, UsageReport, WireEvent
from contextfold.errors import FormatError, ProviderError
from contextfold.hosts.digests import (
    ArgumentDefaults,
    call_item,
    digest_of,
    fingerprint,
    schema_defaults,
)
from contextfold.messages import Message, Usage
from contextfold.proxy._request_json import KnownMessages, message_digests
from contextfold.proxy._wire import (
    ClientError,
    ClientRequest,
    MessageReader,
    http_upstream_error,
    message_reader,
    sse,
    stream_bytes,
)
from contextfold.wire import chat_completions_request as openai_wire
from contextfold.wire.chat_completions import from_openai_message, parse_openai_response
from contextfold.wire.chat_completions_models import ChatRequestError, check_request
from contextfold.wire.chat_completions_stream import ChatStreamDecoder, ChatStreamEncoder
from contextfold.wire.values import as_id

__all__ = [
    "UPSTREAM_PATH",
    "Writer",
    "decoder",
    "error_body",
    "parse_request",
    "read_body",
    "upstream_body",
    "upstream_error",
    "wire_digest",
    "writer",
]

UPSTREAM_PATH = "/v1/chat/completions"

_ENGINE_OWNED = ("messages", "tools", "max_tokens", "max_completion_tokens", "stream_options")
"""Body fields the engine writes; every other field of the client's request goes up as sent."""

_SYSTEM_ROLES = ("system", "developer")

_ERROR_TYPES = {
    "invalid_request": ("invalid_request_error", None),
    "context_length": ("invalid_request_error", "context_length_exceeded"),
    "rate_limit": ("rate_limit_error", "rate_limit_exceeded"),
    "authentication": ("authentication_error", "invalid_api_key"),
    "not_found": ("invalid_request_error", "not_found"),
    "request_too_large": ("invalid_request_error", "request_too_large"),
    "upstream": ("api_error", None),
}


def error_body(error: ClientError) -> dict[str, Any]:
    """The error as the Chat Completions API spells one."""
    kind, code = _ERROR_TYPES.get(error.kind, ("api_error", None))
    return {"error": {"message": error.message, "type": kind, "param": error.param, "code": code}}


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


def _calls(raw: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The tool calls of one Chat Completions message, as id and name."""
    return [
        (str(call.get("id")), str((call.get("function") or {}).get("name")))
        for call in raw.get("tool_calls") or []
        if isinstance(call, Mapping)
    ]


def _result_ids(raw: Mapping[str, Any]) -> tuple[str, ...]:
    """The call id a tool message answers (it names its tool by the call before it)."""
    if raw.get("role") not in ("tool", "function"):
        return ()
    return (as_id(raw.get("tool_call_id")) or as_id(raw.get("name")) or "",)


def _convert(raw: Mapping[str, Any], names: Mapping[str, str], index: int) -> list[Message]:
    try:
        return [from_openai_message(raw, call_names=names, index=index)]
    except FormatError as exc:
        raise ClientError(f"messages[{index}]: {exc}") from None


def _reader(raw_messages: Sequence[Mapping[str, Any]]) -> MessageReader:
    return message_reader(raw_messages, _result_ids, _calls, _convert)


def parse_request(body: Any, known: KnownMessages | None = None) -> ClientRequest:
    """The client's ``POST /v1/chat/completions`` body, checked whole against the typed models
    of :mod:`contextfold.wire.chat_completions_models` and read; :class:`ClientError` naming
    the field when it is not a request the proxy can carry.

    Leading system (or developer) messages are the system prompt; later ones stay in the
    conversation.
    """
    try:
        checked = check_request(body, known=known.indices() if known else ())
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
    raw_tools = {tool["function"]["name"]: tool for tool in body.get("tools") or ()}
    first_user = next((m for m in conversation if m.get("role") == "user"), None)
    return ClientRequest(
        options=_options(body),
        protocol="openai",
        body=body,
        model=model,
        digests=message_digests(
            wire_digest, conversation, schema_defaults(checked.tools), known, start=leading
        ),
        reader=_reader(conversation),
        system="\n\n".join(system),
        tools=checked.tools,
        raw_tools=raw_tools,
        stream=bool(body.get("stream")),
        max_tokens=max_tokens,
        max_tokens_field=field,
        first_user_text=_text(first_user.get("content")) if first_user else "",
        has_system_messages=any(m.get("role") in _SYSTEM_ROLES for m in conversation),
    )


def _options(body: Mapping[str, Any]) -> dict[str, Any]:
    options = {k: body[k] for k in ("temperature", "top_p") if isinstance(body.get(k), int | float)}
    stop = body.get("stop")
    if isinstance(stop, str):
        options["stop"] = [stop]
    elif isinstance(stop, list):
        options["stop"] = [str(s) for s in stop]
    choice = body.get("tool_choice")
    if choice in ("auto", "none", "required"):
        options["tool_choice"] = choice
    elif isinstance(choice, Mapping):
        name = (choice.get("function") or {}).get("name")
        if isinstance(name, str):
            options["tool_choice"] = {"name": name}
    return options


def _tool_choice(neutral: Any) -> Any:
    if isinstance(neutral, Mapping) and isinstance(neutral.get("name"), str):
        return {"type": "function", "function": {"name": neutral["name"]}}
    return neutral if neutral in ("auto", "none", "required") else None


# --------------------------------------------------------------------------------------------------
# to the upstream, and back
# --------------------------------------------------------------------------------------------------


def upstream_body(
    client: ClientRequest,
    request: ChatRequest,
    *,
    model: str,
    stream: bool,
    first_party: bool = False,
) -> dict[str, Any]:
    """The body the upstream receives: the engine's view. A Chat client's other fields (its
    ``tool_choice`` included) go up as it sent them, and its own tool definitions as it wrote
    them; a client of another protocol's options are carried over where they mean the same.
    Earlier reasoning goes back as ``reasoning_content`` (llama.cpp, vLLM and DeepSeek read
    it; other servers ignore the field)."""
    same = client.protocol == "openai"
    encoded = openai_wire.encode_request(
        request,
        model=model,
        max_tokens_field=(client.max_tokens_field if same else None)  # type: ignore[arg-type]
        or "max_tokens",
        include_reasoning=not same,
    )
    encoded.pop("extra_body", None)
    if same:
        body = dict(encoded)
        body.update({k: v for k, v in client.body.items() if k not in _ENGINE_OWNED})
        body["model"] = model
        if "tools" in encoded:
            body["tools"] = [
                client.raw_tools.get(t["function"]["name"], t) for t in encoded["tools"]
            ]
    else:
        body = encoded
        options = client.options
        body.update({k: options[k] for k in ("temperature", "top_p") if k in options})
        if options.get("stop"):
            body["stop"] = list(options["stop"])
        choice = _tool_choice(options.get("tool_choice"))
        if choice is not None and body.get("tools"):
            body["tool_choice"] = choice
    if stream:
        body["stream"] = True
        # The engine anchors its estimates on the usage the upstream reports.
        asked = client.body.get("stream_options") if same else None
        body["stream_options"] = {**(asked or {}), "include_usage": True}
    return body


def decoder() -> ChatStreamDecoder:
    """The reader of one streamed upstream reply."""
    return ChatStreamDecoder()


def read_body(body: Mapping[str, Any]) -> ChatResponse:
    """A non-streamed upstream reply."""
    try:
        message, usage, stop = parse_openai_response(body)
    except FormatError as exc:
        raise ClientError(f"contextfold proxy: the upstream's reply: {exc}", status=502) from None
    model = body.get("model")
    return ChatResponse(message, usage, stop, str(model) if isinstance(model, str) else None)


def upstream_error(status: int, body: object, headers: Mapping[str, str]) -> ProviderError:
    """The error an upstream's HTTP error stands for (an overflow recognised by its wording)."""
    return http_upstream_error("openai", status, body, headers)


# --------------------------------------------------------------------------------------------------
# to the client
# --------------------------------------------------------------------------------------------------


class Writer:
    """The reply as a Chat client reads it, streamed (chunks, then ``[DONE]``) or whole."""

    def __init__(self, client: ClientRequest, model: str) -> None:
        options = client.body.get("stream_options") if client.protocol == "openai" else None
        wants_usage = isinstance(options, Mapping) and bool(options.get("include_usage"))
        self.encoder = ChatStreamEncoder(model=model, include_usage=wants_usage)
        self.defaults = schema_defaults(client.tools)
        self.stream = client.stream

    def feed(self, event: WireEvent) -> list[bytes]:
        return stream_bytes(self.stream, self.encoder.feed(event), sse)

    def end_round(self) -> list[bytes]:
        return []  # one message: the rounds' texts join

    def finish(self, stop: str | None, usage: Usage | None) -> list[bytes]:
        if usage is not None:
            self.encoder.feed(UsageReport(usage))
        chunks: list[Mapping[str, Any] | str] = [*self.encoder.finish(stop), "[DONE]"]
        return stream_bytes(self.stream, chunks, sse)

    def fail(self, error: ClientError) -> list[bytes]:
        chunks: list[Mapping[str, Any] | str] = [error_body(error), "[DONE]"]
        return stream_bytes(self.stream, chunks, sse)

    def body(self) -> dict[str, Any]:
        return self.encoder.completion()

    def visible_digest(self) -> bytes:
        """The digest of the reply as the client will send it back."""
        return wire_digest(self.encoder.completion()["choices"][0]["message"], self.defaults)


def writer(client: ClientRequest, model: str) -> Writer:
    """The writer of one reply to ``client``."""
    return Writer(client, model)
