"""What every protocol's stream codec shares: a message as neutral stream events, the error a
stream ends with, and fresh ids.

A reply answered whole is written by streaming :func:`events_of_message` through the client's
encoder, so a reply streamed and one answered whole are the same object in every protocol.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contextfold.chat import (
    ProviderItem,
    RedactedThinking,
    TextDelta,
    ThinkingDelta,
    ThinkingSignature,
    ToolCallDelta,
    ToolCallDone,
    ToolCallStarted,
    WireEvent,
)
from contextfold.errors import ProviderError
from contextfold.messages import Message, SummaryPart, TextPart, ThinkingPart, ToolCallPart
from contextfold.wire.responses_items import PROVIDER_KEY, new_id

__all__ = ["StreamFailed", "events_of_message", "new_id"]


class StreamFailed(ProviderError):
    """A provider's stream ended with an error event; ``body`` is the error as it sent it (an
    HTTP error body's shape), for whoever maps it to its own errors."""

    def __init__(self, body: Mapping[str, Any], *, provider: str) -> None:
        error = body.get("error", body)
        message = error.get("message") if isinstance(error, Mapping) else None
        super().__init__(str(message or "the stream failed"), provider=provider)
        self.body = dict(body)


def events_of_message(message: Message) -> list[WireEvent]:
    """The neutral events that stream ``message``: signed and redacted thinking with what they
    carry, and reasoning read from a Responses upstream kept whole (its ``encrypted_content``
    included) while its text is unchanged."""
    details = message.meta.provider.get(PROVIDER_KEY)
    stored = list(details.get("reasoning") or ()) if isinstance(details, Mapping) else []
    out: list[WireEvent] = []
    for part in message.parts:
        if isinstance(part, TextPart | SummaryPart) and part.text:
            out.append(TextDelta(part.text))
        elif isinstance(part, ThinkingPart):
            out += _thinking_events(part, stored.pop(0) if stored else None)
        elif isinstance(part, ToolCallPart):
            out += [
                ToolCallStarted(part.call_id, part.name),
                ToolCallDelta(part.call_id, part.arguments),
                ToolCallDone(part.call_id),
            ]
    return out


def _thinking_events(part: ThinkingPart, raw: Mapping[str, Any] | None) -> list[WireEvent]:
    if part.redacted_data is not None:
        return [RedactedThinking(part.redacted_data)]
    summary = raw.get("summary") if raw is not None else None
    if (
        isinstance(summary, list)
        and "\n\n".join(str(s.get("text", "")) for s in summary if isinstance(s, Mapping))
        == part.text
    ):
        return [ProviderItem(raw)] if raw is not None else []
    out: list[WireEvent] = [ThinkingDelta(part.text)] if part.text else []
    if part.signature:
        out.append(ThinkingSignature(part.signature))
    return out
