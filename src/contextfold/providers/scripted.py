"""A model that answers from a script: for tests, demos, and anything that must not call a real API.

``ScriptedModel(["hello", Message.assistant(tool_calls=[...]), RateLimitError("slow down")])``
answers the first request with "hello", the second with the tool call, and raises on the third.
Every request it receives is kept in :attr:`ScriptedModel.requests`, so a test can assert exactly
what the engine sent. Unless a response says otherwise, usage is estimated from the request with
the rule in :func:`estimate_tokens`, so the engine's token anchoring has numbers to work with.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import replace
from typing import TypeAlias

from contextfold.chat import (
    ChatRequest,
    ChatResponse,
    StreamDone,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallStarted,
)
from contextfold.errors import UsageError
from contextfold.messages import (
    ImagePart,
    Message,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from contextfold.providers._retry import RetryPolicy
from contextfold.providers.base import BaseChatModel

__all__ = [
    "CHARS_PER_TOKEN",
    "IMAGE_TOKENS",
    "STREAM_CHUNK_CHARS",
    "Responder",
    "ScriptItem",
    "ScriptedModel",
    "estimate_tokens",
    "response_events",
]

CHARS_PER_TOKEN = 4
"""The scripted model's usage estimate: one token per four characters, rounded up."""

IMAGE_TOKENS = 1200
"""Tokens counted for each image in the usage estimate (a typical full-size image)."""

STREAM_CHUNK_CHARS = 16
"""Characters per :class:`TextDelta` when a scripted or replayed answer is streamed."""

Reply: TypeAlias = ChatResponse | Message | str
Responder: TypeAlias = Callable[[ChatRequest], Reply]
ScriptItem: TypeAlias = ChatResponse | Message | str | Responder | BaseException


def estimate_tokens(request: ChatRequest) -> int:
    """A rough prompt size for ``request``: characters of the system blocks, the agent-visible
    messages and the tool descriptions, divided by :data:`CHARS_PER_TOKEN`, plus
    :data:`IMAGE_TOKENS` per image."""
    chars = sum(len(b.text) for b in request.system)
    chars += sum(len(t.description_text()) for t in request.tools)
    images = 0
    for message in request.messages:
        if not message.meta.agent_visible:
            continue
        message_chars, message_images = _message_size(message)
        chars += message_chars
        images += message_images
    return math.ceil(chars / CHARS_PER_TOKEN) + images * IMAGE_TOKENS


def _message_size(message: Message) -> tuple[int, int]:
    chars = 0
    images = 0
    for part in message.parts:
        if isinstance(part, TextPart | SummaryPart | ThinkingPart):
            chars += len(part.text)
        elif isinstance(part, ToolCallPart):
            chars += len(part.name) + len(part.arguments)
        elif isinstance(part, ToolResultPart):
            chars += len(part.content)
            images += len(part.images)
        elif isinstance(part, ImagePart):
            images += 1
    return chars, images


def _output_tokens(message: Message) -> int:
    chars, images = _message_size(message)
    return math.ceil(chars / CHARS_PER_TOKEN) + images * IMAGE_TOKENS


def response_events(
    response: ChatResponse, chunk_chars: int = STREAM_CHUNK_CHARS
) -> Iterator[StreamEvent]:
    """The events a stream of ``response`` would have produced, text cut into ``chunk_chars``."""
    for part in response.message.parts:
        if isinstance(part, ThinkingPart) and part.text:
            yield ThinkingDelta(part.text)
        elif isinstance(part, TextPart):
            for start in range(0, len(part.text), max(1, chunk_chars)):
                yield TextDelta(part.text[start : start + chunk_chars])
        elif isinstance(part, ToolCallPart):
            yield ToolCallStarted(part.call_id, part.name)
    yield StreamDone(response)


class InProcessModel(BaseChatModel):
    """A model answered in this process by :meth:`_next` (no I/O): sync and async, whole or
    streamed in chunks of ``chunk_chars`` characters. Base of the test doubles."""

    chunk_chars: int = STREAM_CHUNK_CHARS

    def _next(self, request: ChatRequest) -> ChatResponse:
        raise NotImplementedError(f"{type(self).__name__} must implement _next")

    def _complete_once(self, request: ChatRequest) -> ChatResponse:
        return self._next(request)

    def _stream_once(self, request: ChatRequest) -> Iterator[StreamEvent]:
        yield from response_events(self._next(request), self.chunk_chars)

    async def _acomplete_once(self, request: ChatRequest) -> ChatResponse:
        return self._next(request)

    async def _astream_once(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        for event in response_events(self._next(request), self.chunk_chars):
            yield event


class ScriptedModel(InProcessModel):
    """A :class:`ChatModel` whose answers are given in advance, consumed one per request.

    Script items:

    - ``str``: a plain text answer;
    - :class:`Message`: an assistant message, returned as is (its ``meta.usage`` kept if set);
    - :class:`ChatResponse`: returned as is (usage filled in when it has none);
    - a callable ``(request) -> str | Message | ChatResponse``: computed from the request;
    - an exception instance: raised (after the request is recorded).

    When the script runs out, ``default`` (a callable like the above) answers every further
    request; without one a :class:`UsageError` says how many requests the script covered.
    Failures reach the caller on the first raise: the model does not retry unless given a
    ``retry`` policy, so a scripted ``ContextOverflowError`` tests the caller's recovery.
    """

    provider = "scripted"

    def __init__(
        self,
        script: Iterable[ScriptItem] = (),
        *,
        name: str = "scripted",
        default: Responder | None = None,
        chunk_chars: int = STREAM_CHUNK_CHARS,
        retry: RetryPolicy | None = None,
    ) -> None:
        super().__init__(name, retry=retry if retry is not None else RetryPolicy.never())
        self.script: list[ScriptItem] = list(script)
        self.default = default
        self.chunk_chars = chunk_chars
        self.requests: list[ChatRequest] = []
        self._position = 0

    @property
    def remaining(self) -> int:
        """Script items not used yet."""
        return len(self.script) - self._position

    def add(self, *items: ScriptItem) -> None:
        """Append answers to the script."""
        self.script.extend(items)

    def _next(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        if self._position < len(self.script):
            item = self.script[self._position]
            self._position += 1
        elif self.default is not None:
            item = self.default
        else:
            raise UsageError(
                f"ScriptedModel {self.name!r} ran out of script: it held {len(self.script)} "
                f"response(s) and got request {len(self.requests)}. Add responses to the script "
                "(or pass default=...) to cover every call the code under test makes."
            )
        if isinstance(item, BaseException):
            raise item
        reply = item(request) if callable(item) else item
        return self._as_response(reply, request)

    def _as_response(self, reply: Reply, request: ChatRequest) -> ChatResponse:
        if isinstance(reply, str):
            reply = Message.assistant(reply)
        if isinstance(reply, Message):
            if reply.role != "assistant":
                raise UsageError(
                    f"ScriptedModel answers must be assistant messages, got role {reply.role!r}"
                )
            stop = "tool_calls" if reply.tool_calls else "stop"
            reply = ChatResponse(reply, reply.meta.usage, stop, self.name)
        usage = reply.usage or reply.message.meta.usage
        if usage is None:
            usage = Usage(estimate_tokens(request), _output_tokens(reply.message))
        message = reply.message
        if message.meta.usage != usage:
            message = message.with_meta(usage=usage)
        return replace(reply, message=message, usage=usage)
