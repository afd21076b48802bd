"""What the engine needs from a model (:class:`ChatModel`), and the base class the adapters share.

A :class:`ChatModel` takes a :class:`~contextfold.chat.ChatRequest` and answers with a
:class:`~contextfold.chat.ChatResponse`, or streams
:data:`~contextfold.chat.StreamEvent` values ending with one ``StreamDone``. Those
values live in :mod:`contextfold.chat`.

:class:`BaseChatModel` holds the logic that does no I/O, written once: the retry loop (backoff on
5xx, timeouts and connection errors; waiting out 429 and "overloaded"), the one-time retry with a
lower ``max_tokens`` when the provider says only the reply budget overflowed, and the error map.
Adapters implement only the I/O: ``_complete_once`` (required), and ``_stream_once``,
``_acomplete_once``, ``_astream_once`` (optional; a missing one raises ``NotImplementedError``
naming the class).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import Protocol, runtime_checkable

from contextfold.chat import (
    ChatRequest,
    ChatResponse,
    StreamEvent,
)
from contextfold.errors import ProviderError
from contextfold.providers._retry import RetryPolicy

__all__ = ["BaseChatModel", "ChatModel"]


# --------------------------------------------------------------------------------------------------
# protocol and base class
# --------------------------------------------------------------------------------------------------


@runtime_checkable
class ChatModel(Protocol):
    """What the engine and the agent need from a model. ``provider`` is e.g. ``"openai"``."""

    name: str
    provider: str

    def complete(self, request: ChatRequest) -> ChatResponse:
        """Run one call and return the whole response."""
        ...

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        """Run one call, yielding events as they arrive; the last one is a :class:`StreamDone`."""
        ...

    async def acomplete(self, request: ChatRequest) -> ChatResponse:
        """Async twin of :meth:`complete`."""
        ...

    def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Async twin of :meth:`stream`."""
        ...


class BaseChatModel(ABC):
    """Shared behaviour of contextfold's models: retries, overflow recovery and error mapping.

    Subclasses set ``provider`` and implement :meth:`_complete_once` (plus the optional
    ``_stream_once``, ``_acomplete_once``, ``_astream_once``), and override :meth:`_error_map`
    with the one context manager that turns their SDK's errors into contextfold's.

    A stream is retried only while it has yielded nothing: once text has reached the caller a
    second attempt would repeat it, so a failure mid-stream is raised as is.
    """

    provider: str = ""

    def __init__(self, name: str, *, retry: RetryPolicy | None = None) -> None:
        self.name = name
        self.retry = retry if retry is not None else RetryPolicy()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, provider={self.provider!r})"

    def close(self) -> None:  # noqa: B027 - optional hook: models without connections keep it
        """Release the connections this model opened (clients passed in are left to their owner)."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook, as close()
        """Release the async connections this model opened; call it inside the event loop that
        made the calls."""

    # -- what subclasses provide -----------------------------------------------------------------

    def _error_map(self) -> AbstractContextManager[None]:
        """The context manager that maps this adapter's SDK errors to :class:`ProviderError`."""
        return nullcontext()

    @abstractmethod
    def _complete_once(self, request: ChatRequest) -> ChatResponse:
        """One call, no retries."""

    def _stream_once(self, request: ChatRequest) -> Iterator[StreamEvent]:
        """One streamed call, no retries."""
        raise NotImplementedError(f"{type(self).__name__} does not support streaming")

    async def _acomplete_once(self, request: ChatRequest) -> ChatResponse:
        """One async call, no retries."""
        raise NotImplementedError(f"{type(self).__name__} does not support async calls")

    def _astream_once(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """One async streamed call, no retries."""
        raise NotImplementedError(f"{type(self).__name__} does not support async streaming")

    # -- public API: the loops below repeat only the I/O, the decisions live in RetryPolicy --------

    def complete(self, request: ChatRequest) -> ChatResponse:
        """Run one call, retrying what is worth retrying; raises a :class:`ProviderError`."""
        attempts = self.retry.start(request, provider=self.provider)
        while True:
            try:
                with self._error_map():
                    return self._complete_once(attempts.request)
            except ProviderError as exc:
                delay = attempts.after_failure(exc)
            if delay > 0:
                self.retry.sleep(delay)

    async def acomplete(self, request: ChatRequest) -> ChatResponse:
        """Async twin of :meth:`complete`."""
        attempts = self.retry.start(request, provider=self.provider)
        while True:
            try:
                with self._error_map():
                    return await self._acomplete_once(attempts.request)
            except ProviderError as exc:
                delay = attempts.after_failure(exc)
            if delay > 0:
                await self.retry.asleep(delay)

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        """Yield events as they arrive; the last one is a :class:`StreamDone`."""
        attempts = self.retry.start(request, provider=self.provider)
        while True:
            started = False
            try:
                with self._error_map():
                    for event in self._stream_once(attempts.request):
                        started = True
                        yield event
                return
            except ProviderError as exc:
                if started:
                    raise
                delay = attempts.after_failure(exc)
            if delay > 0:
                self.retry.sleep(delay)

    async def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Async twin of :meth:`stream`."""
        attempts = self.retry.start(request, provider=self.provider)
        while True:
            started = False
            try:
                with self._error_map():
                    async for event in self._astream_once(attempts.request):
                        started = True
                        yield event
                return
            except ProviderError as exc:
                if started:
                    raise
                delay = attempts.after_failure(exc)
            if delay > 0:
                await self.retry.asleep(delay)
