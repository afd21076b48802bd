"""The OpenAI Responses protocol, as the proxy speaks it to clients (Codex CLI, the ``openai``
SDK's ``responses.create``) and to the upstream.

The request is read and checked by :mod:`contextfold.wire.responses`; the reply is written by
its stream encoder, streamed (the events Codex parses) or whole. Leading ``developer`` and
``system`` input items are the system prompt, as a Chat client's leading system messages are.

Reasoning ``encrypted_content`` and opaque items (``compaction``) belong to the provider that
made them: they go back to a Responses upstream untouched, and to an upstream of another
protocol not at all (:mod:`._exchange` logs it).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from contextfold.chat import ChatRequest, ChatResponse, UsageReport, WireEvent
from contextfold.errors import ProviderError
from contextfold.hosts.digests import message_digest, schema_defaults
from contextfold.messages import Message, Part, Usage
from contextfold.proxy._request_json import KnownMessages
from contextfold.proxy._wire import ClientError, ClientRequest, stream_bytes
from contextfold.wire.responses import (
    ResponsesRequest,
    ResponsesRequestError,
    error_from_body,
    read_request,
    write_request,
)
from contextfold.wire.responses import (
    error_body as responses_error_body,
)
from contextfold.wire.responses_items import OPAQUE_FLAG, PROVIDER_KEY, items_to_messages
from contextfold.wire.responses_stream import (
    ResponsesStreamDecoder,
    ResponsesStreamEncoder,
    read_response,
    sse_bytes,
)

__all__ = [
    "UPSTREAM_PATH",
    "Writer",
    "decoder",
    "error_body",
    "has_encrypted",
    "parse_request",
    "read_body",
    "upstream_body",
    "upstream_error",
    "with_history",
    "with_parsed",
    "writer",
]

logger = logging.getLogger("contextfold.proxy")

UPSTREAM_PATH = "/v1/responses"

_ERROR_CODES = {
    "context_length": ("invalid_request_error", "context_length_exceeded"),
    "rate_limit": ("rate_limit_error", "rate_limit_exceeded"),
    "authentication": ("authentication_error", "invalid_api_key"),
    "not_found": ("invalid_request_error", "not_found"),
    "request_too_large": ("invalid_request_error", "request_too_large"),
    "upstream": ("server_error", None),
}

_STREAM_CODES = {
    "context_length": "context_length_exceeded",  # what makes Codex compact its history
    "rate_limit": "rate_limit_exceeded",
    "invalid_request": "invalid_prompt",  # fatal to Codex: retrying would fail again
}
"""``response.failed`` codes; any other is ``server_error``, which Codex retries."""


def error_body(error: ClientError) -> dict[str, Any]:
    """The error as the Responses API answers one over HTTP."""
    kind, code = _ERROR_CODES.get(error.kind, ("invalid_request_error", None))
    return responses_error_body(error.message, type=kind, code=code, param=error.param)


# --------------------------------------------------------------------------------------------------
# from the client
# --------------------------------------------------------------------------------------------------


def parse_request(body: Any, known: KnownMessages | None = None) -> ClientRequest:
    """The client's ``POST /v1/responses`` body, checked and read; :class:`ClientError` naming
    the field when it is not a request the proxy can carry."""
    try:
        parsed = read_request(body)
    except ResponsesRequestError as exc:
        raise ClientError(str(exc), param=exc.param) from None
    if not parsed.model:
        # read_request leaves the model optional; the proxy needs one to plan for.
        raise ClientError("model: Field required", param="model")
    return _client_request(parsed, list(parsed.messages))


def with_history(client: ClientRequest, earlier: Sequence[Message]) -> ClientRequest:
    """``client``'s request continuing ``earlier`` (the conversation of the response its
    ``previous_response_id`` names)."""
    parsed: ResponsesRequest = client.parsed
    return _client_request(parsed, [*earlier, *parsed.messages])


def with_parsed(client: ClientRequest, parsed: ResponsesRequest) -> ClientRequest:
    """``client`` read again from ``parsed`` (its messages changed: a compaction item opened)."""
    return client if parsed is client.parsed else _client_request(parsed, list(parsed.messages))


def _client_request(parsed: ResponsesRequest, messages: list[Message]) -> ClientRequest:
    leading = 0
    while leading < len(messages) and messages[leading].role == "system":
        leading += 1
    system = [parsed.system] if parsed.system else []
    system += [text for m in messages[:leading] if (text := m.text)]
    conversation = messages[leading:]
    if not conversation:
        raise ClientError("input: expected at least one item after the instructions")
    first_user = next((m for m in conversation if m.role == "user"), None)
    tools = {t.name: {"name": t.name} for t in parsed.tools}
    defaults = schema_defaults(parsed.tools)
    return ClientRequest(
        protocol="responses",
        body=parsed.body,
        model=parsed.model or "",
        digests=[message_digest(m, defaults) for m in conversation],
        reader=lambda start, stop: [[m] for m in conversation[start:stop]],
        system="\n\n".join(system),
        tools=parsed.tools,
        raw_tools=tools,
        stream=parsed.stream,
        max_tokens=parsed.max_output_tokens,
        max_tokens_field="max_output_tokens",
        first_user_text=first_user.text if first_user else "",
        has_system_messages=any(m.role == "system" for m in conversation),
        options=_options(parsed),
        parsed=parsed,
    )


def _options(parsed: ResponsesRequest) -> dict[str, Any]:
    options = {
        k: parsed.extra[k]
        for k in ("temperature", "top_p")
        if isinstance(parsed.extra.get(k), float | int)
    }
    choice = parsed.tool_choice
    if choice in ("auto", "none", "required"):
        options["tool_choice"] = choice
    elif isinstance(choice, Mapping) and isinstance(choice.get("name"), str):
        options["tool_choice"] = {"name": choice["name"]}
    return options


def has_encrypted(message: Message) -> bool:
    """True when ``message`` carries what only the Responses provider that made it can read
    (reasoning ``encrypted_content``, a ``compaction`` item)."""
    if OPAQUE_FLAG in message.meta.flags:
        return True
    details = message.meta.provider.get(PROVIDER_KEY)
    reasoning = details.get("reasoning") if isinstance(details, Mapping) else None
    return any(isinstance(r, Mapping) and r.get("encrypted_content") for r in reasoning or ())


# --------------------------------------------------------------------------------------------------
# to the upstream, and back
# --------------------------------------------------------------------------------------------------


def upstream_body(
    client: ClientRequest, request: ChatRequest, *, model: str, stream: bool, first_party: bool
) -> dict[str, Any]:
    """The body the upstream receives: the engine's view. A Responses client's fields go up as
    it sent them, its tools as it wrote them (hosted ones such as ``web_search`` only to OpenAI
    itself, the one server that runs them); a client of another protocol's options are carried
    over where they mean the same. Nothing is stored upstream for a client that did not ask."""
    messages = list(request.messages)
    if client.protocol != "responses":
        choice = client.options.get("tool_choice")
        if isinstance(choice, Mapping):
            choice = {"type": "function", "name": choice["name"]}
        extra = {k: client.options[k] for k in ("temperature", "top_p") if k in client.options}
        return write_request(
            messages,
            model=model,
            system=request.system_text,
            tools=request.tools,
            tool_choice=choice,
            store=False,
            max_output_tokens=request.max_tokens,
            stream=stream,
            extra=extra,
        )
    parsed: ResponsesRequest = client.parsed
    raw_tools = [
        t
        for t in parsed.raw_tools
        if first_party or t.get("type") in ("function", "custom", "namespace")
    ]
    return write_request(
        messages,
        model=model,
        system=request.system_text,
        tools=request.tools,
        raw_tools=raw_tools,
        custom_tools=parsed.custom_tools,
        namespaces=parsed.namespaces,
        tool_choice=parsed.tool_choice,
        parallel_tool_calls=parsed.parallel_tool_calls,
        reasoning=parsed.reasoning,
        include=parsed.include,
        store=parsed.store,
        prompt_cache_key=parsed.prompt_cache_key,
        text=parsed.text,
        max_output_tokens=request.max_tokens,
        stream=stream,
        extra=parsed.extra,
    )


_CLIENT_TOOLS = ("function", "custom", "namespace")
"""Tools the client runs itself; the others (``web_search``...) only OpenAI runs."""


def decoder() -> ResponsesStreamDecoder:
    """The reader of one streamed upstream reply."""
    return ResponsesStreamDecoder()


def read_body(body: Mapping[str, Any]) -> ChatResponse:
    """A non-streamed upstream reply."""
    reply = read_response(body)
    return ChatResponse(reply.message, reply.usage, reply.stop_reason, reply.model)


def upstream_error(status: int, body: object, headers: Mapping[str, str]) -> ProviderError:
    """The error an upstream's HTTP error stands for (``context_length_exceeded``: overflow)."""
    return error_from_body(body, status=status)


# --------------------------------------------------------------------------------------------------
# to the client
# --------------------------------------------------------------------------------------------------


class Writer:
    """The reply as a Responses client reads it: the full event sequence (Codex, the SDK and
    opencode read it), or the response object whole."""

    def __init__(self, client: ClientRequest, model: str) -> None:
        parsed: ResponsesRequest | None = client.parsed if client.protocol == "responses" else None
        echo: dict[str, Any] = {}
        if parsed is not None:
            if parsed.tool_choice is not None:
                echo["tool_choice"] = parsed.tool_choice
            if parsed.parallel_tool_calls is not None:
                echo["parallel_tool_calls"] = parsed.parallel_tool_calls
            if parsed.previous_response_id:
                echo["previous_response_id"] = parsed.previous_response_id
        self.defaults = schema_defaults(client.tools)
        self.encoder = ResponsesStreamEncoder(
            model=model,
            custom_tools=parsed.custom_tools if parsed else (),
            namespaces=parsed.namespaces if parsed else None,
            echo=echo,
        )
        self.stream = client.stream

    @property
    def response_id(self) -> str:
        return self.encoder.response_id

    def feed(self, event: WireEvent) -> list[bytes]:
        return stream_bytes(self.stream, self.encoder.feed(event), sse_bytes)

    def end_round(self) -> list[bytes]:
        return stream_bytes(self.stream, self.encoder.close_items(), sse_bytes)

    def finish(self, stop: str | None, usage: Usage | None) -> list[bytes]:
        if usage is not None:
            self.encoder.feed(UsageReport(usage))
        return stream_bytes(self.stream, self.encoder.finish(stop), sse_bytes)

    def fail(self, error: ClientError) -> list[bytes]:
        code = _STREAM_CODES.get(error.kind, "server_error")
        return stream_bytes(self.stream, self.encoder.fail(error.message, code=code), sse_bytes)

    def body(self) -> dict[str, Any]:
        if self.encoder.response is None:
            self.encoder.finish()
        assert self.encoder.response is not None  # finish() sets it
        return self.encoder.response

    def reply_messages(self) -> list[Message]:
        """The reply as the client will send it back: neutral messages of its output items."""
        return items_to_messages(self.encoder.output)

    def visible_digest(self) -> bytes:
        """The digest of the reply as the client will send it back."""
        parts: list[Part] = [p for m in self.reply_messages() for p in m.parts]
        return message_digest(Message("assistant", tuple(parts)), self.defaults)


def writer(client: ClientRequest, model: str) -> Writer:
    """The writer of one reply to ``client``."""
    return Writer(client, model)
