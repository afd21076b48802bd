"""A model that replays the assistant turns of a recorded conversation, in order.

Give it the messages of a real session (a list of :class:`Message`, or any object with a
``.messages`` attribute such as an imported transcript) and drive the engine or the agent loop with
it: each request gets the next recorded assistant message back, with the usage recorded for it.
This reproduces a session's context growth without calling a model.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from contextfold.chat import ChatRequest, ChatResponse
from contextfold.errors import UsageError
from contextfold.messages import Message, new_message_id
from contextfold.providers._retry import RetryPolicy
from contextfold.providers.scripted import STREAM_CHUNK_CHARS, InProcessModel

__all__ = ["ReplayModel"]


class ReplayModel(InProcessModel):
    """A :class:`ChatModel` answering request *n* with the *n*-th recorded assistant message.

    Compaction summaries (``meta.kind == "summary"``) are not turns and are skipped. Each answer is
    a copy of the recorded message with a fresh id (the original id is kept in
    ``meta.provider["replayed_from"]``) so it can be appended to a new session; its
    ``meta.usage`` is the recorded usage, ``None`` when the recording had none. Requests are kept
    in :attr:`requests`. Once every turn is used, a :class:`UsageError` says so.
    """

    provider = "replay"

    def __init__(
        self,
        source: Iterable[Message] | Any,
        *,
        name: str = "replay",
        chunk_chars: int = STREAM_CHUNK_CHARS,
    ) -> None:
        super().__init__(name, retry=RetryPolicy.never())
        messages = getattr(source, "messages", source)
        self.turns: list[Message] = [
            m
            for m in messages
            if isinstance(m, Message) and m.role == "assistant" and m.meta.kind != "summary"
        ]
        self.chunk_chars = chunk_chars
        self.requests: list[ChatRequest] = []
        self._position = 0

    @property
    def remaining(self) -> int:
        """Recorded turns not replayed yet."""
        return len(self.turns) - self._position

    def _next(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        if self._position >= len(self.turns):
            raise UsageError(
                f"ReplayModel {self.name!r} has replayed all {len(self.turns)} recorded assistant "
                f"turn(s); request {len(self.requests)} has no recorded answer. The code under "
                "test made more calls than the recorded session did."
            )
        recorded = self.turns[self._position]
        self._position += 1
        provider = {**recorded.meta.provider, "replayed_from": recorded.id}
        message = replace(
            recorded, id=new_message_id(), meta=replace(recorded.meta, provider=provider)
        )
        stop = "tool_calls" if message.tool_calls else "stop"
        model = recorded.meta.provider.get("model")
        return ChatResponse(
            message, message.meta.usage, stop, str(model) if model is not None else self.name
        )
