"""Chat completions through the official ``openai`` SDK: OpenAI and any OpenAI-compatible server.

:class:`OpenAIChat` talks to OpenAI, and, with ``base_url``, to Ollama
(``http://localhost:11434/v1``, or :meth:`OpenAIChat.ollama`), vLLM, the llama.cpp server or
OpenRouter. The request goes on the wire as
:func:`~contextfold.wire.chat_completions_request.encode_request` makes it (re-exported here; that
module says what every OpenAI-compatible server needs), and the reply is read by
:mod:`contextfold.wire.chat_completions`; this module adds the calls, streaming assembly and the
error map.

Streams ask for ``stream_options={"include_usage": True}``, so the last chunk carries the usage of
the whole call (Ollama, vLLM and llama.cpp honour it too): a streamed response has the same usage
as a complete one. A server that sends no usage anyway gets its calls counted with the model's
token counter, marked :attr:`~contextfold.Usage.estimated`, with one
:class:`UsageEstimatedWarning`.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any

from contextfold.chat import ChatRequest, ChatResponse, StreamDone, StreamEvent
from contextfold.errors import MissingDependencyError
from contextfold.model_registry import default_registry
from contextfold.providers._estimated_usage import UsageEstimatedWarning, estimated_usage
from contextfold.providers._retry import RetryPolicy
from contextfold.providers._sdk import SDKClients, resolve_api_key, wire_dict
from contextfold.providers._server_window import WindowCheck, check_server_window
from contextfold.providers.base import BaseChatModel
from contextfold.providers.errors import map_sdk_errors
from contextfold.providers.ollama import (
    OllamaContext,
    check_ollama_context,
    ollama_native_url,
)
from contextfold.tokens.counters import TokenCounter, counter_for
from contextfold.wire.chat_completions import parse_openai_response
from contextfold.wire.chat_completions_request import MaxTokensField, encode_request
from contextfold.wire.chat_completions_stream import ChatStreamDecoder

try:
    import openai
    from openai.types.chat import ChatCompletion
except ImportError as _exc:  # pragma: no cover - exercised by simulating the missing SDK
    raise MissingDependencyError("openai", "openai") from _exc

__all__ = [
    "DEFAULT_TIMEOUT",
    "LOCAL_SERVER_API_KEY",
    "OPENAI_API_KEY_ENV",
    "OpenAIChat",
    "OpenAIStreamAssembler",
    "encode_request",
    "response_from_completion",
]

OPENAI_API_KEY_ENV = "OPENAI_API_KEY"
"""Where the API key is read from when none is passed."""

DEFAULT_TIMEOUT = 600.0
"""Seconds one call may take (long agent replies stream for minutes)."""

LOCAL_SERVER_API_KEY = "not-needed"
"""Sent to OpenAI-compatible servers when no key is configured: the SDK insists on one, local
servers (Ollama, llama.cpp, vLLM without ``--api-key``) ignore it."""

_OPENAI_HOST = "api.openai.com"


def _openai_errors(provider: str, env_var: str) -> AbstractContextManager[None]:
    """Map ``openai`` SDK errors to contextfold's (the only place this adapter catches them)."""
    return map_sdk_errors(openai, provider, env_var)


OpenAIStreamAssembler = ChatStreamDecoder
"""The stream reader, by its former name: :class:`~contextfold.wire.chat_completions_stream.
ChatStreamDecoder`, the one the proxy uses too."""


def response_from_completion(completion: ChatCompletion | Mapping[str, Any]) -> ChatResponse:
    """The :class:`ChatResponse` of a chat completion: what the official SDK's
    ``client.chat.completions.create(...)`` returned (or the stream helper's
    ``get_final_completion()``), or its JSON as a dict.

    The reply becomes an assistant :class:`~contextfold.Message` (text, tool calls, reasoning),
    with the usage the provider reported, the finish reason and the model name. This is what
    ``session.add_assistant(completion)`` does with an SDK object, so that the reported usage
    anchors the session's token estimates. A streamed chunk is refused with a ``TypeError``:
    assemble the stream first.
    """
    data = wire_dict(completion)
    kind = data.get("object", "chat.completion")  # servers that omit it send completions too
    if kind != "chat.completion":
        raise TypeError(
            f"expected a chat completion (object 'chat.completion'), got {kind!r}: a streamed "
            "chunk has to be assembled first (the SDK's stream helper has "
            "get_final_completion())"
        )
    message, usage, finish_reason = parse_openai_response(data)
    model = data.get("model")
    return ChatResponse(message, usage, finish_reason, str(model) if model else None)


class OpenAIChat(BaseChatModel):
    """A chat-completions model: OpenAI itself, or any OpenAI-compatible server via ``base_url``.

    - ``api_key``: defaults to the ``api_key_env`` variable (``OPENAI_API_KEY``). Without either,
      a call fails with :class:`AuthenticationError` when ``key_required`` (the default for OpenAI
      itself); other servers get :data:`LOCAL_SERVER_API_KEY`;
    - ``client`` / ``async_client``: an ``openai.OpenAI`` / ``openai.AsyncOpenAI`` to use instead
      of building one (tests, custom transports). Its own retries are switched off: contextfold's
      ``retry`` policy owns retrying, so attempts are not multiplied;
    - ``max_tokens_field``: ``"max_completion_tokens"`` for OpenAI (its newer models refuse
      ``max_tokens``), ``"max_tokens"`` for other servers unless given;
    - ``send_reasoning``: send earlier reasoning back as ``reasoning_content`` (DeepSeek, vLLM);
    - ``token_counter``: counts calls the server reports no usage for (default: the registry's
      counter for ``model``, else the heuristic one).
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        api_key_env: str = OPENAI_API_KEY_ENV,
        provider: str | None = None,
        client: openai.OpenAI | None = None,
        async_client: openai.AsyncOpenAI | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        max_tokens_field: MaxTokensField | None = None,
        send_reasoning: bool = False,
        key_required: bool | None = None,
        token_counter: TokenCounter | None = None,
    ) -> None:
        super().__init__(model, retry=retry)
        self.model = model
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.timeout = timeout
        self.send_reasoning = send_reasoning
        self._api_key = api_key
        self.is_openai = base_url is None or _OPENAI_HOST in base_url
        self.key_required = self.is_openai if key_required is None else key_required
        self.provider = provider or ("openai" if self.is_openai else "openai-compatible")
        self.max_tokens_field = max_tokens_field or (
            "max_completion_tokens" if self.is_openai else "max_tokens"
        )
        self._clients = SDKClients(
            lambda: openai.OpenAI(
                api_key=self._key(), base_url=self.base_url, timeout=self.timeout, max_retries=0
            ),
            lambda: openai.AsyncOpenAI(
                api_key=self._key(), base_url=self.base_url, timeout=self.timeout, max_retries=0
            ),
            client,
            async_client,
        )
        self.ollama_context: OllamaContext | None = None
        self.server_window: WindowCheck | None = None
        self._token_counter = token_counter
        self._warned_no_usage = False

    @classmethod
    def ollama(
        cls,
        model: str,
        *,
        base_url: str | None = None,
        context_window: int | None = None,
        **kwargs: Any,
    ) -> OpenAIChat:
        """A model served by Ollama's OpenAI-compatible API (default ``localhost:11434/v1``).

        With ``context_window`` (the window contextfold will fill), the server is asked at once how
        much context it keeps for the model, and an :class:`OllamaContextWarning` is issued when
        that is less: Ollama would cut longer prompts without an error. The finding is kept in
        :attr:`ollama_context`.
        """
        url = f"{ollama_native_url(base_url)}/v1"
        kwargs.setdefault("provider", "ollama")
        kwargs.setdefault("api_key", os.environ.get("OLLAMA_API_KEY") or "ollama")
        chat = cls(model, base_url=url, **kwargs)
        if context_window is not None:
            chat.check_ollama_context(context_window)
        return chat

    def check_ollama_context(self, planned_window: int, *, warn: bool = True) -> OllamaContext:
        """Ask the Ollama server behind ``base_url`` whether ``planned_window`` tokens fit; warns
        (and records :attr:`ollama_context`) when they do not."""
        info = check_ollama_context(self.model, planned_window, base_url=self.base_url, warn=warn)
        self.ollama_context = info
        return info

    def check_server_window(
        self, planned_window: int, *, name: str | None = None, warn: bool = True
    ) -> WindowCheck:
        """Ask the server behind ``base_url`` how many tokens a request may hold (llama.cpp's
        ``/props``, vLLM's ``/v1/models``); warns when ``planned_window`` is larger or cannot be
        confirmed, and records the finding in :attr:`server_window`. ``name`` is the
        ``provider/model`` the user wrote, for the warning's advice."""
        if self.base_url is None:
            raise ValueError("check_server_window needs a base_url: OpenAI's own API has none")
        api_key = self._api_key or os.environ.get(self.api_key_env)
        self.server_window = check_server_window(
            name or f"{self.provider}/{self.model}",
            planned_window,
            base_url=self.base_url,
            model=self.model,
            api_key=api_key,
            warn=warn,
        )
        return self.server_window

    # -- clients ---------------------------------------------------------------------------------

    def _key(self) -> str:
        fallback = None if self.key_required else LOCAL_SERVER_API_KEY
        return resolve_api_key(self.provider, self._api_key, self.api_key_env, fallback=fallback)

    def _sync_client(self) -> openai.OpenAI:
        return self._clients.sync()

    def _async_client_(self) -> openai.AsyncOpenAI:
        return self._clients.async_()

    def close(self) -> None:
        """Close the HTTP client this model built (an injected one stays open)."""
        self._clients.close()

    async def aclose(self) -> None:
        """Close the async HTTP client this model built (an injected one stays open)."""
        await self._clients.aclose()

    def _error_map(self) -> AbstractContextManager[None]:
        return _openai_errors(self.provider, self.api_key_env)

    def request_kwargs(self, request: ChatRequest, *, stream: bool = False) -> dict[str, Any]:
        """The keyword arguments for ``client.chat.completions.create``: the request as
        :func:`~contextfold.wire.chat_completions_request.encode_request` puts it on the wire, for
        this model and server (its reply-budget field, whether earlier reasoning is sent back)."""
        return encode_request(
            request,
            model=self.model,
            stream=stream,
            max_tokens_field=self.max_tokens_field,
            include_reasoning=self.send_reasoning,
        )

    def _with_usage(self, response: ChatResponse, request: ChatRequest) -> ChatResponse:
        """``response`` as is when the server reported usage; else with usage counted here,
        marked estimated (and the user warned, once per model)."""
        if response.usage is not None:
            return response
        if self._token_counter is None:
            info = default_registry().find(self.model)
            self._token_counter = counter_for(info if info is not None else "heuristic")
        usage = estimated_usage(request, response.message, self._token_counter)
        if not self._warned_no_usage:
            self._warned_no_usage = True
            warnings.warn(
                f"{self.provider} at {self.base_url or 'api.openai.com'} sent no token usage for "
                f"{self.model!r}: contextfold counts its calls itself from now on, so token "
                "figures are estimates (Usage.estimated) and may be off by tens of percent.",
                UsageEstimatedWarning,
                stacklevel=2,
            )
        return replace(response, usage=usage, message=response.message.with_meta(usage=usage))

    def _complete_once(self, request: ChatRequest) -> ChatResponse:
        completion = self._sync_client().chat.completions.create(**self.request_kwargs(request))
        return self._with_usage(response_from_completion(completion), request)

    async def _acomplete_once(self, request: ChatRequest) -> ChatResponse:
        client = self._async_client_()
        completion = await client.chat.completions.create(**self.request_kwargs(request))
        return self._with_usage(response_from_completion(completion), request)

    def _stream_once(self, request: ChatRequest) -> Iterator[StreamEvent]:
        assembler = ChatStreamDecoder()
        kwargs = self.request_kwargs(request, stream=True)
        with self._sync_client().chat.completions.create(**kwargs) as chunks:
            for chunk in chunks:
                yield from assembler.feed(wire_dict(chunk))
        yield StreamDone(self._with_usage(assembler.response(), request))

    async def _astream_once(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        assembler = ChatStreamDecoder()
        kwargs = self.request_kwargs(request, stream=True)
        chunks = await self._async_client_().chat.completions.create(**kwargs)
        async with chunks:
            async for chunk in chunks:
                for event in assembler.feed(wire_dict(chunk)):
                    yield event
        yield StreamDone(self._with_usage(assembler.response(), request))
