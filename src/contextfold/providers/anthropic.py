"""Claude through the official ``anthropic`` SDK (messages API).

The request goes on the wire as :func:`~contextfold.wire.anthropic_request.encode_request`
makes it (empty blocks left out, cache breakpoints capped at four: see that module), and the
reply is read by :mod:`contextfold.wire.anthropic`; this module adds the calls, streaming
assembly and the error map. ``encode_request``, ``limit_cache_breakpoints`` and their constants
are re-exported here.

Thinking. Thinking blocks come back with their ``signature``, redacted thinking with its opaque
``data``, both kept in the assistant message (:class:`ThinkingPart`) so that a tool loop can send
them back unchanged, as the API requires.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import AbstractContextManager
from typing import Any

from contextfold.chat import (
    ChatRequest,
    ChatResponse,
    StreamDone,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallStarted,
)
from contextfold.errors import MissingDependencyError
from contextfold.providers._retry import RetryPolicy
from contextfold.providers._sdk import SDKClients, resolve_api_key, wire_dict
from contextfold.providers.base import BaseChatModel
from contextfold.providers.errors import map_sdk_errors
from contextfold.wire.anthropic import _RAW_ARGUMENTS_KEY, parse_anthropic_response
from contextfold.wire.anthropic_request import (
    DEFAULT_MAX_TOKENS,
    MAX_CACHE_BREAKPOINTS,
    encode_request,
    limit_cache_breakpoints,
)

try:
    import anthropic
    from anthropic.types import Message as AnthropicMessage
except ImportError as _exc:  # pragma: no cover - exercised by simulating the missing SDK
    raise MissingDependencyError("anthropic", "anthropic") from _exc

__all__ = [
    "ANTHROPIC_API_KEY_ENV",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_TIMEOUT",
    "MAX_CACHE_BREAKPOINTS",
    "AnthropicChat",
    "AnthropicStreamAssembler",
    "encode_request",
    "limit_cache_breakpoints",
    "response_from_message",
]

ANTHROPIC_API_KEY_ENV = "ANTHROPIC_API_KEY"
"""Where the API key is read from when none is passed."""

DEFAULT_TIMEOUT = 600.0
"""Seconds one call may take."""


def _anthropic_errors(provider: str, env_var: str) -> AbstractContextManager[None]:
    """Map ``anthropic`` SDK errors to contextfold's (the only place this adapter catches them)."""
    return map_sdk_errors(anthropic, provider, env_var)


# --------------------------------------------------------------------------------------------------
# streaming
# --------------------------------------------------------------------------------------------------


class AnthropicStreamAssembler:
    """Builds a :class:`ChatResponse` from messages-API stream events, yielding events on the way.

    ``message_start`` carries the id, model and the prompt's usage; content blocks open with
    ``content_block_start`` and grow by ``text_delta``, ``thinking_delta``, ``signature_delta`` and
    ``input_json_delta`` (a tool's input as JSON text in pieces); ``message_delta`` carries the
    stop reason and the final usage figures, which replace the earlier ones.
    """

    def __init__(self) -> None:
        self.header: dict[str, Any] = {}
        self.usage: dict[str, Any] = {}
        self.stop_reason: str | None = None
        self.blocks: dict[int, dict[str, Any]] = {}
        self.pieces: dict[int, list[str]] = {}

    def feed(self, event: Mapping[str, Any]) -> Iterator[StreamEvent]:
        """Take one event (as a dict); yield the stream events it contains."""
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message") or {}
            self.header = {k: message[k] for k in ("id", "model") if message.get(k)}
            self._merge_usage(message.get("usage"))
        elif kind == "content_block_start":
            index = int(event.get("index", len(self.blocks)))
            block = dict(event.get("content_block") or {})
            self.blocks[index] = block
            self.pieces[index] = []
            if block.get("type") in ("tool_use", "server_tool_use"):
                yield ToolCallStarted(str(block.get("id", "")), str(block.get("name", "")))
        elif kind == "content_block_delta":
            yield from self._delta(int(event.get("index", 0)), event.get("delta") or {})
        elif kind == "message_delta":
            delta = event.get("delta") or {}
            if delta.get("stop_reason"):
                self.stop_reason = delta["stop_reason"]
            self._merge_usage(event.get("usage"))

    def _delta(self, index: int, delta: Mapping[str, Any]) -> Iterator[StreamEvent]:
        block = self.blocks.setdefault(index, {"type": "text", "text": ""})
        pieces = self.pieces.setdefault(index, [])
        kind = delta.get("type")
        if kind == "text_delta":
            pieces.append(str(delta.get("text", "")))
            yield TextDelta(pieces[-1])
        elif kind == "thinking_delta":
            pieces.append(str(delta.get("thinking", "")))
            yield ThinkingDelta(pieces[-1])
        elif kind == "signature_delta":
            block["signature"] = block.get("signature", "") + str(delta.get("signature", ""))
        elif kind == "input_json_delta":
            pieces.append(str(delta.get("partial_json", "")))

    def _merge_usage(self, usage: Any) -> None:
        if isinstance(usage, Mapping):
            self.usage.update({k: v for k, v in usage.items() if v is not None})

    def response(self) -> ChatResponse:
        """The assembled response (call after the last event)."""
        content = [self._finished(i) for i in sorted(self.blocks)]
        data = {
            **self.header,
            "content": content,
            "stop_reason": self.stop_reason,
            "usage": self.usage or None,
        }
        return response_from_message(data)

    def _finished(self, index: int) -> dict[str, Any]:
        block = dict(self.blocks[index])
        joined = "".join(self.pieces.get(index, ()))
        kind = block.get("type")
        if kind == "text":
            block["text"] = block.get("text", "") + joined
        elif kind == "thinking":
            block["thinking"] = block.get("thinking", "") + joined
        elif kind in ("tool_use", "server_tool_use"):
            if joined.strip():
                try:
                    block["input"] = json.loads(joined)
                except ValueError:
                    # Keep what the model sent, verbatim; the wire adapter flags it as invalid.
                    block["input"] = {_RAW_ARGUMENTS_KEY: joined}
            else:
                block.setdefault("input", {})
        return block


def response_from_message(message: AnthropicMessage | Mapping[str, Any]) -> ChatResponse:
    """The :class:`ChatResponse` of a messages-API reply: what the official SDK's
    ``client.messages.create(...)`` returned (or the stream helper's ``get_final_message()``),
    or its JSON as a dict.

    The reply becomes an assistant :class:`~contextfold.Message` (text, tool calls, thinking
    blocks with their signatures), with the usage the provider reported (cache reads and writes
    included), the stop reason and the model name. This is what
    ``session.add_assistant(message)`` does with an SDK object, so that the reported usage
    anchors the session's token estimates. A stream event is refused with a ``TypeError``.
    """
    data = wire_dict(message)
    kind = data.get("type", "message")
    if kind != "message":
        raise TypeError(
            f"expected a messages-API reply (type 'message'), got {kind!r}: a stream has to be "
            "assembled first (the SDK's stream helper has get_final_message())"
        )
    reply, usage, stop_reason = parse_anthropic_response(data)
    model = data.get("model")
    return ChatResponse(reply, usage, stop_reason, str(model) if model else None)


# --------------------------------------------------------------------------------------------------
# the model
# --------------------------------------------------------------------------------------------------


class AnthropicChat(BaseChatModel):
    """A Claude model through the messages API.

    - ``api_key``: defaults to ``ANTHROPIC_API_KEY`` (``api_key_env``);
    - ``client`` / ``async_client``: an ``anthropic.Anthropic`` / ``anthropic.AsyncAnthropic`` to
      use instead of building one; its own retries are switched off (``retry`` owns retrying);
    - ``default_max_tokens``: the reply budget for requests that give none
      (:data:`DEFAULT_MAX_TOKENS`).

    ``ChatRequest.temperature`` and ``extra`` travel in the request body as given;
    ``prompt_cache_key`` is OpenAI's and is not sent.
    """

    provider = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        api_key_env: str = ANTHROPIC_API_KEY_ENV,
        client: anthropic.Anthropic | None = None,
        async_client: anthropic.AsyncAnthropic | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        default_max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> None:
        super().__init__(model, retry=retry)
        self.model = model
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.timeout = timeout
        self.default_max_tokens = default_max_tokens
        self._api_key = api_key
        self._clients = SDKClients(
            lambda: anthropic.Anthropic(
                api_key=self._key(), base_url=self.base_url, timeout=self.timeout, max_retries=0
            ),
            lambda: anthropic.AsyncAnthropic(
                api_key=self._key(), base_url=self.base_url, timeout=self.timeout, max_retries=0
            ),
            client,
            async_client,
        )

    def _key(self) -> str:
        return resolve_api_key(self.provider, self._api_key, self.api_key_env)

    def _sync_client(self) -> anthropic.Anthropic:
        return self._clients.sync()

    def _async_client_(self) -> anthropic.AsyncAnthropic:
        return self._clients.async_()

    def close(self) -> None:
        """Close the HTTP client this model built (an injected one stays open)."""
        self._clients.close()

    async def aclose(self) -> None:
        """Close the async HTTP client this model built (an injected one stays open)."""
        await self._clients.aclose()

    def _error_map(self) -> AbstractContextManager[None]:
        return _anthropic_errors(self.provider, self.api_key_env)

    def request_kwargs(self, request: ChatRequest, *, stream: bool = False) -> dict[str, Any]:
        """The keyword arguments for ``client.messages.create``: the request as
        :func:`~contextfold.wire.anthropic_request.encode_request` puts it on the wire, for
        this model, with its reply budget for requests that give none."""
        return encode_request(
            request, model=self.model, stream=stream, default_max_tokens=self.default_max_tokens
        )

    def _complete_once(self, request: ChatRequest) -> ChatResponse:
        message = self._sync_client().messages.create(**self.request_kwargs(request))
        return response_from_message(message)

    async def _acomplete_once(self, request: ChatRequest) -> ChatResponse:
        client = self._async_client_()
        message = await client.messages.create(**self.request_kwargs(request))
        return response_from_message(message)

    def _stream_once(self, request: ChatRequest) -> Iterator[StreamEvent]:
        assembler = AnthropicStreamAssembler()
        kwargs = self.request_kwargs(request, stream=True)
        with self._sync_client().messages.create(**kwargs) as events:
            for event in events:
                yield from assembler.feed(wire_dict(event))
        yield StreamDone(assembler.response())

    async def _astream_once(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        assembler = AnthropicStreamAssembler()
        kwargs = self.request_kwargs(request, stream=True)
        events = await self._async_client_().messages.create(**kwargs)
        async with events:
            async for event in events:
                for item in assembler.feed(wire_dict(event)):
                    yield item
        yield StreamDone(assembler.response())
