"""The Anthropic Messages protocol, as the proxy speaks it to clients and to the upstream."""

from __future__ import annotations

import operator
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
from contextfold.wire import anthropic_request as anthropic_wire
from contextfold.wire.anthropic import (
    WireBlocks,
    from_anthropic_message,
    parse_anthropic_response,
)
from contextfold.wire.anthropic_models import (
    AnthropicRequestError,
    CheckedValues,
    check_request,
    system_text,
)
from contextfold.wire.anthropic_request import DEFAULT_MAX_TOKENS
from contextfold.wire.anthropic_stream import AnthropicStreamDecoder, AnthropicStreamEncoder
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

UPSTREAM_PATH = "/v1/messages"

_ENGINE_OWNED = ("messages", "system", "tools", "max_tokens")
"""Body fields the engine writes; every other field of the client's request goes up as sent."""

_ERROR_TYPES = {
    "invalid_request": "invalid_request_error",
    "context_length": "invalid_request_error",
    "authentication": "authentication_error",
    "not_found": "not_found_error",
    "request_too_large": "request_too_large",
    "rate_limit": "rate_limit_error",
    "upstream": "api_error",
}

_OVERFLOW_PREFIX = "prompt is too long"
"""How the Messages API words an overflow, and what Claude Code looks for to compact."""


def error_body(error: ClientError) -> dict[str, Any]:
    """The error as the Messages API spells one."""
    kind = _ERROR_TYPES.get(error.kind, "api_error")
    message = error.message
    if error.kind == "context_length" and _OVERFLOW_PREFIX not in message.lower():
        message = f"{_OVERFLOW_PREFIX}: {message}"
    return {"type": "error", "error": {"type": kind, "message": message}}


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


def _calls(raw: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The tool calls of one Messages-API message, as id and name."""
    content = raw.get("content")
    if raw.get("role") != "assistant" or not isinstance(content, list):
        return []
    return [
        (str(b.get("id")), str(b.get("name")))
        for b in content
        if isinstance(b, Mapping) and b.get("type") == "tool_use"
    ]


def _result_ids(raw: Mapping[str, Any]) -> set[str]:
    """The call ids the tool results of ``raw`` answer, as they are read."""
    content = raw.get("content")
    if not isinstance(content, list):
        return set()
    return {
        as_id(b.get("tool_use_id")) or ""
        for b in content
        if isinstance(b, Mapping) and b.get("type") == "tool_result"
    }


def _convert(raw: Mapping[str, Any], names: Mapping[str, str], index: int) -> list[Message]:
    if raw.get("role") == "system":
        return [Message.system(system_text(raw["content"]))]
    try:
        # Tool results name their tool: the names come from the calls before them.
        return from_anthropic_message(raw, call_names=dict(names), index=index)
    except FormatError as exc:
        raise ClientError(f"messages.{index}: {exc}") from None


def _reader(raw_messages: Sequence[Mapping[str, Any]]) -> MessageReader:
    return message_reader(raw_messages, _result_ids, _calls, _convert)


_CHECKED = CheckedValues()
"""The tool lists and system prompts that passed: a client resends them with every request (as
one value, when the body reader shares what is resent byte for byte)."""


def parse_request(body: Any, known: KnownMessages | None = None) -> ClientRequest:
    """The client's ``POST /v1/messages`` body, checked whole against the typed models of
    :mod:`contextfold.wire.anthropic_models` and read; :class:`ClientError` naming the field
    when it is not a request the proxy can carry."""
    try:
        checked = check_request(body, known=known.indices() if known else (), remembered=_CHECKED)
    except AnthropicRequestError as exc:
        raise ClientError(str(exc), param=exc.param) from None
    model: str = body["model"]
    max_tokens: int = body["max_tokens"]
    raw_messages: list[Mapping[str, Any]] = body["messages"]
    raw_tools = {tool["name"]: tool for tool in body.get("tools") or ()}
    defaults = schema_defaults(checked.tools)
    return ClientRequest(
        options=_options(body),
        protocol="anthropic",
        body=body,
        model=model,
        digests=message_digests(wire_digest, raw_messages, defaults, known),
        reader=_reader(raw_messages),
        system=checked.system,
        tools=checked.tools,
        raw_tools=raw_tools,
        stream=bool(body.get("stream")),
        max_tokens=max_tokens,
        max_tokens_field="max_tokens",
        first_user_text=_first_user_text(raw_messages),
        # The roles read in C: a resent history is long (every message has one, checked).
        has_system_messages="system" in map(_ROLE, raw_messages),
    )


_ROLE = operator.itemgetter("role")


def _options(body: Mapping[str, Any]) -> dict[str, Any]:
    options = {k: body[k] for k in ("temperature", "top_p") if isinstance(body.get(k), int | float)}
    if isinstance(body.get("stop_sequences"), list):
        options["stop"] = [str(s) for s in body["stop_sequences"]]
    choice = body.get("tool_choice")
    if isinstance(choice, Mapping):
        kind = choice.get("type")
        if kind == "tool" and isinstance(choice.get("name"), str):
            options["tool_choice"] = {"name": choice["name"]}
        elif kind in ("auto", "none"):
            options["tool_choice"] = kind
        elif kind == "any":
            options["tool_choice"] = "required"
    return options


def _tool_choice(neutral: Any) -> dict[str, Any] | None:
    if isinstance(neutral, Mapping) and isinstance(neutral.get("name"), str):
        return {"type": "tool", "name": neutral["name"]}
    return {"auto": {"type": "auto"}, "none": {"type": "none"}, "required": {"type": "any"}}.get(
        neutral if isinstance(neutral, str) else ""
    )


# --------------------------------------------------------------------------------------------------
# to the upstream, and back
# --------------------------------------------------------------------------------------------------


_RENDERED = WireBlocks()
"""Each message of the sessions' views rendered once: a request resends the whole view, and
the body is only written to JSON, never changed below its blocks."""


def upstream_body(
    client: ClientRequest,
    request: ChatRequest,
    *,
    model: str,
    stream: bool,
    first_party: bool = False,
) -> dict[str, Any]:
    """The body the upstream receives: the engine's view. A Messages client's other fields go
    up as it sent them, and its own tool definitions as it wrote them (plus the engine's
    tools); a client of another protocol's options are carried over where they mean the same."""
    encoded = anthropic_wire.encode_request(
        request,
        model=model,
        inline_system=client.has_system_messages and client.protocol == "anthropic",
        default_max_tokens=DEFAULT_MAX_TOKENS,
        remembered=_RENDERED,
    )
    if client.protocol != "anthropic":
        body = {k: v for k, v in encoded.items() if k != "extra_body"}
        options = client.options
        body.update({k: options[k] for k in ("temperature", "top_p") if k in options})
        if options.get("stop"):
            body["stop_sequences"] = list(options["stop"])
        choice = _tool_choice(options.get("tool_choice"))
        if choice is not None and body.get("tools"):
            body["tool_choice"] = choice
        if stream:
            body["stream"] = True
        return body
    body = {k: v for k, v in client.body.items() if k not in _ENGINE_OWNED}
    body.update({k: v for k, v in encoded.items() if k != "model"})
    body["model"] = model
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


def decoder() -> AnthropicStreamDecoder:
    """The reader of one streamed upstream reply."""
    return AnthropicStreamDecoder()


def read_body(body: Mapping[str, Any]) -> ChatResponse:
    """A non-streamed upstream reply."""
    message, usage, stop = parse_anthropic_response(body)
    model = body.get("model")
    return ChatResponse(message, usage, stop, str(model) if isinstance(model, str) else None)


def upstream_error(status: int, body: object, headers: Mapping[str, str]) -> ProviderError:
    """The error an upstream's HTTP error stands for (an overflow recognised by its wording)."""
    return http_upstream_error("anthropic", status, body, headers)


# --------------------------------------------------------------------------------------------------
# to the client
# --------------------------------------------------------------------------------------------------


class Writer:
    """The reply as a Messages client reads it, streamed or whole, from neutral events."""

    def __init__(self, client: ClientRequest, model: str) -> None:
        self.encoder = AnthropicStreamEncoder(model=model)
        self.defaults = schema_defaults(client.tools)
        self.stream = client.stream

    def feed(self, event: WireEvent) -> list[bytes]:
        return stream_bytes(self.stream, self.encoder.feed(event), _sse)

    def end_round(self) -> list[bytes]:
        return stream_bytes(self.stream, self.encoder.close_block(), _sse)

    def finish(self, stop: str | None, usage: Usage | None) -> list[bytes]:
        if usage is not None:
            self.encoder.feed(UsageReport(usage))
        return stream_bytes(self.stream, self.encoder.finish(stop), _sse)

    def fail(self, error: ClientError) -> list[bytes]:
        failed = error_body(error)["error"]
        events = self.encoder.fail(failed["message"], kind=failed["type"])
        return stream_bytes(self.stream, events, _sse)

    def body(self) -> dict[str, Any]:
        return self.encoder.response()

    def visible_digest(self) -> bytes:
        """The digest of the reply as the client will send it back."""
        return wire_digest({"role": "assistant", "content": self.encoder.content}, self.defaults)


def writer(client: ClientRequest, model: str) -> Writer:
    """The writer of one reply to ``client``."""
    return Writer(client, model)


def _sse(event: Mapping[str, Any]) -> bytes:
    return sse(event, str(event["type"]))
