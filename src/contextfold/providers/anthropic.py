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

from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import AbstractContextManager
from typing import Any

from contextfold.chat import ChatRequest, ChatResponse, StreamDone, StreamEvent
from contextfold.errors import MissingDependencyError
from contextfold.providers._retry import RetryPolicy
from contextfold.providers._sdk import SDKClients, resolve_api_key, wire_dict
from contextfold.providers.base import BaseChatModel
from contextfold.providers.errors import map_sdk_errors
from contextfold.wire.anthropic import parse_anthropic_response
from contextfold.wire.anthropic_request import (
    DEFAULT_MAX_TOKENS,
    MAX_CACHE_BREAKPOINTS,
    encode_request,
    limit_cache_breakpoints,
)
from contextfold.wire.anthropic_stream import AnthropicStreamDecoder

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


AnthropicStreamAssembler = AnthropicStreamDecoder
"""The stream reader, by its former name: :class:`~contextfold.wire.anthropic_stream.
AnthropicStreamDecoder`, the one the proxy uses too."""


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
        assembler = AnthropicStreamDecoder()
        kwargs = self.request_kwargs(request, stream=True)
        with self._sync_client().messages.create(**kwargs) as events:
            for event in events:
                yield from assembler.feed(wire_dict(event))
        yield StreamDone(assembler.response())

    async def _astream_once(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        assembler = AnthropicStreamDecoder()
        kwargs = self.request_kwargs(request, stream=True)
        events = await self._async_client_().messages.create(**kwargs)
        async with events:
            async for event in events:
                for item in assembler.feed(wire_dict(event)):
                    yield item
        yield StreamDone(assembler.response())
