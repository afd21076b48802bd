"""Anthropic Messages replies: the stream of events and the message, both directions.

:class:`AnthropicStreamDecoder` is the one reader of a Messages stream: the ``anthropic``
provider, the proxy and anything else that reads one use it. It turns each event into the
neutral events of :mod:`contextfold.chat` and assembles the whole reply
(:meth:`~AnthropicStreamDecoder.response`). :class:`AnthropicStreamEncoder` does the reverse:
neutral events in, Messages events out, so that a reply from any upstream reaches a Messages
client as the API streams it; :func:`write_message` is the same for a reply answered whole.

Thinking. A ``thinking`` block grows by ``thinking_delta`` and ends with one ``signature_delta``
carrying the whole signature: the signature *replaces* any earlier one, as the official SDK
reads it (``accumulate_event``), and the block goes back to the API with it unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from contextfold.chat import (
    ChatResponse,
    Finished,
    ProviderItem,
    RedactedThinking,
    TextDelta,
    ThinkingDelta,
    ThinkingSignature,
    ToolCallDelta,
    ToolCallDone,
    ToolCallStarted,
    UsageReport,
    WireEvent,
    neutral_stop_reason,
)
from contextfold.messages import Message, Usage
from contextfold.wire.anthropic import RAW_ARGUMENTS_KEY, parse_anthropic_response
from contextfold.wire.neutral import StreamFailed, events_of_message, new_id

__all__ = [
    "AnthropicStreamDecoder",
    "AnthropicStreamEncoder",
    "anthropic_stop_reason",
    "usage_to_anthropic",
    "write_message",
]

_STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


def anthropic_stop_reason(stop_reason: str | None) -> str:
    """A neutral stop reason in the Messages API's words (``end_turn`` when there is none)."""
    if stop_reason is None:
        return "end_turn"
    return _STOP_REASONS.get(stop_reason, stop_reason)


def usage_to_anthropic(usage: Usage | None) -> dict[str, int]:
    """A Messages ``usage`` object: ``input_tokens`` there counts the uncached prompt only."""
    usage = usage or Usage()
    cached = usage.cache_read_tokens + usage.cache_write_tokens
    return {
        "input_tokens": max(0, usage.input_tokens - cached),
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
        "output_tokens": usage.output_tokens,
    }


# --------------------------------------------------------------------------------------------------
# decoder
# --------------------------------------------------------------------------------------------------


class AnthropicStreamDecoder:
    """Messages stream events in (as dicts, or SSE data text), neutral events out, and the whole
    reply at the end.

    ``message_start`` carries the id, model and the prompt's usage; content blocks open with
    ``content_block_start`` and grow by ``text_delta``, ``thinking_delta``, ``signature_delta``
    and ``input_json_delta`` (a tool's input as JSON text in pieces); ``message_delta`` carries
    the stop reason and the final usage figures, which replace the earlier ones. An ``error``
    event raises :class:`~contextfold.wire.neutral.StreamFailed`.
    """

    def __init__(self) -> None:
        self.header: dict[str, Any] = {}
        self.usage: dict[str, Any] = {}
        self.stop_reason: str | None = None
        self.done = False
        self.blocks: dict[int, dict[str, Any]] = {}
        self.pieces: dict[int, list[str]] = {}

    def feed_sse(self, data: str) -> list[WireEvent]:
        """The neutral events of one SSE ``data:`` payload (non-JSON ignored)."""
        try:
            event = json.loads(data)
        except (ValueError, RecursionError):
            return []
        return self.feed(event) if isinstance(event, Mapping) else []

    def feed(self, event: Mapping[str, Any]) -> list[WireEvent]:
        """The neutral events of one stream event."""
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message") or {}
            self.header = {k: message[k] for k in ("id", "model") if message.get(k)}
            self._merge_usage(message.get("usage"))
        elif kind == "content_block_start":
            return self._start(int(event.get("index", len(self.blocks))), event)
        elif kind == "content_block_delta":
            return self._delta(int(event.get("index", 0)), event.get("delta") or {})
        elif kind == "content_block_stop":
            return self._stop(int(event.get("index", 0)))
        elif kind == "message_delta":
            delta = event.get("delta") or {}
            if delta.get("stop_reason"):
                self.stop_reason = delta["stop_reason"]
            self._merge_usage(event.get("usage"))
        elif kind == "message_stop":
            self.done = True
            response = self.response()
            usage = [UsageReport(response.usage)] if response.usage is not None else []
            return [*usage, Finished(neutral_stop_reason(self.stop_reason))]
        elif kind == "error":
            error = event.get("error")
            body = {"type": "error", "error": error if isinstance(error, Mapping) else {}}
            raise StreamFailed(body, provider="anthropic")
        return []

    def _start(self, index: int, event: Mapping[str, Any]) -> list[WireEvent]:
        block = dict(event.get("content_block") or {})
        self.blocks[index] = block
        self.pieces[index] = []
        kind = block.get("type")
        if kind in ("tool_use", "server_tool_use"):
            return [ToolCallStarted(str(block.get("id", "")), str(block.get("name", "")))]
        if kind == "redacted_thinking":
            return [RedactedThinking(str(block.get("data", "")))]
        if kind == "text" and block.get("text"):
            return [TextDelta(str(block["text"]))]
        if kind == "thinking" and block.get("thinking"):
            return [ThinkingDelta(str(block["thinking"]))]
        return []

    def _delta(self, index: int, delta: Mapping[str, Any]) -> list[WireEvent]:
        block = self.blocks.setdefault(index, {"type": "text", "text": ""})
        pieces = self.pieces.setdefault(index, [])
        kind = delta.get("type")
        if kind == "text_delta":
            pieces.append(str(delta.get("text", "")))
            return [TextDelta(pieces[-1])]
        if kind == "thinking_delta":
            pieces.append(str(delta.get("thinking", "")))
            return [ThinkingDelta(pieces[-1])]
        if kind == "signature_delta":
            # One delta carries the whole signature; a later one replaces it (as the SDK reads).
            block["signature"] = str(delta.get("signature", ""))
            return [ThinkingSignature(block["signature"])]
        if kind == "input_json_delta":
            pieces.append(str(delta.get("partial_json", "")))
            return [ToolCallDelta(str(block.get("id", "")), pieces[-1])] if pieces[-1] else []
        return []

    def _stop(self, index: int) -> list[WireEvent]:
        block = self.blocks.get(index)
        if block is None or block.get("type") not in ("tool_use", "server_tool_use"):
            return []
        joined = "".join(self.pieces.get(index, ()))
        if not joined.strip() and isinstance(block.get("input"), Mapping) and block["input"]:
            joined = json.dumps(block["input"], ensure_ascii=False)
        return [ToolCallDone(str(block.get("id", "")), joined or "{}")]

    def _merge_usage(self, usage: Any) -> None:
        if isinstance(usage, Mapping):
            self.usage.update({k: v for k, v in usage.items() if v is not None})

    def response(self) -> ChatResponse:
        """The assembled reply (after the last event): message, usage, stop reason, model."""
        content = [self._finished(i) for i in sorted(self.blocks)]
        data = {
            **self.header,
            "content": content,
            "stop_reason": self.stop_reason,
            "usage": self.usage or None,
        }
        message, usage, stop_reason = parse_anthropic_response(data)
        model = self.header.get("model")
        return ChatResponse(message, usage, stop_reason, str(model) if model else None)

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
                    # Keep what the model sent, verbatim; the wire reader flags it as invalid.
                    block["input"] = {RAW_ARGUMENTS_KEY: joined}
            else:
                block.setdefault("input", {})
        return block


# --------------------------------------------------------------------------------------------------
# encoder
# --------------------------------------------------------------------------------------------------


@dataclass
class _Block:
    index: int
    kind: str  # text, thinking, tool_use
    call_id: str = ""
    arguments: list[str] = field(default_factory=list)


class AnthropicStreamEncoder:
    """Neutral events in, Messages stream events (dicts) out, as one assistant message.

    ``start()`` gives ``message_start``; ``feed(event)`` the events one neutral event makes
    (blocks opened and closed as the kind of content changes); ``finish()`` closes the last
    block and gives ``message_delta`` (stop reason, usage) and ``message_stop``; ``fail()`` an
    ``error`` event. :attr:`content` holds the finished blocks: the message a non-streamed
    reply carries (:func:`write_message`).
    """

    def __init__(self, *, model: str, message_id: str | None = None) -> None:
        self.model = model
        self.message_id = message_id or new_id("msg")
        self.content: list[dict[str, Any]] = []
        self.usage: Usage | None = None
        self.stop_reason: str | None = None
        self.finished = False
        self._started = False
        self._open: _Block | None = None

    def _message(self) -> dict[str, Any]:
        return {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [dict(b) for b in self.content],
            "stop_reason": self.stop_reason,
            "stop_sequence": None,
            "usage": usage_to_anthropic(self.usage),
        }

    def start(self) -> list[dict[str, Any]]:
        """``message_start`` (once)."""
        if self._started:
            return []
        self._started = True
        return [{"type": "message_start", "message": self._message()}]

    def feed(self, event: WireEvent) -> list[dict[str, Any]]:
        """The Messages events for one neutral event."""
        out = self.start()
        if isinstance(event, TextDelta) and event.text:
            out += self._into("text", {"type": "text", "text": ""})
            out.append(self._delta({"type": "text_delta", "text": event.text}))
            self.content[-1]["text"] += event.text
        elif isinstance(event, ThinkingDelta) and event.text:
            out += self._into("thinking", {"type": "thinking", "thinking": "", "signature": ""})
            out.append(self._delta({"type": "thinking_delta", "thinking": event.text}))
            self.content[-1]["thinking"] += event.text
        elif isinstance(event, ThinkingSignature):
            out += self._into("thinking", {"type": "thinking", "thinking": "", "signature": ""})
            out.append(self._delta({"type": "signature_delta", "signature": event.signature}))
            self.content[-1]["signature"] = event.signature
            out += self._close()
        elif isinstance(event, RedactedThinking):
            out += self._close()
            out += self._into(
                "redacted_thinking", {"type": "redacted_thinking", "data": event.data}
            )
            out += self._close()
        elif isinstance(event, ToolCallStarted):
            out += self._close()
            block = {"type": "tool_use", "id": event.call_id, "name": event.name, "input": {}}
            out += self._into("tool_use", block, call_id=event.call_id)
        elif isinstance(event, ToolCallDelta):
            out += self._arguments(event.call_id, event.arguments)
        elif isinstance(event, ToolCallDone):
            opened = self._open
            if opened is not None and opened.call_id == event.call_id and not opened.arguments:
                out += self._arguments(event.call_id, event.arguments or "")
            out += self._close()
        elif isinstance(event, UsageReport):
            self.usage = event.usage
        elif isinstance(event, Finished):
            out += self.finish(event.stop_reason)
        elif isinstance(event, ProviderItem):
            pass  # a Responses item (encrypted reasoning) only a Responses client can read
        return out

    def _into(self, kind: str, block: dict[str, Any], *, call_id: str = "") -> list[dict[str, Any]]:
        """Open a block of ``kind`` unless one is open already."""
        if self._open is not None and self._open.kind == kind and not call_id:
            return []
        out = self._close()
        self._open = _Block(len(self.content), kind, call_id)
        self.content.append(dict(block))
        start = dict(block)
        if kind == "tool_use":
            start["input"] = {}
        return [
            *out,
            {"type": "content_block_start", "index": self._open.index, "content_block": start},
        ]

    def _delta(self, delta: dict[str, Any]) -> dict[str, Any]:
        assert self._open is not None
        return {"type": "content_block_delta", "index": self._open.index, "delta": delta}

    def _arguments(self, call_id: str, arguments: str) -> list[dict[str, Any]]:
        opened = self._open
        if opened is None or opened.call_id != call_id or not arguments:
            return []
        opened.arguments.append(arguments)
        return [self._delta({"type": "input_json_delta", "partial_json": arguments})]

    def _close(self) -> list[dict[str, Any]]:
        opened, self._open = self._open, None
        if opened is None:
            return []
        if opened.kind == "tool_use":
            self.content[opened.index]["input"] = _tool_input("".join(opened.arguments))
        return [{"type": "content_block_stop", "index": opened.index}]

    def close_block(self) -> list[dict[str, Any]]:
        """Close the open block, so that what follows starts a new one (another round's text
        is a block of its own)."""
        return self._close()

    def finish(self, stop_reason: str | None = None) -> list[dict[str, Any]]:
        """Close the last block and end the message."""
        if self.finished:
            return []
        self.finished = True
        out = self.start() + self._close()
        self.stop_reason = anthropic_stop_reason(stop_reason)
        delta = {"stop_reason": self.stop_reason, "stop_sequence": None}
        out.append(
            {"type": "message_delta", "delta": delta, "usage": usage_to_anthropic(self.usage)}
        )
        out.append({"type": "message_stop"})
        return out

    def fail(self, message: str, *, kind: str = "api_error") -> list[dict[str, Any]]:
        """An ``error`` event (the stream ends after it)."""
        self.finished = True
        return [*self.start(), {"type": "error", "error": {"type": kind, "message": message}}]

    def response(self) -> dict[str, Any]:
        """The message object of the reply (complete once :meth:`finish` ran)."""
        return self._message()


def _tool_input(arguments: str) -> Any:
    if not arguments.strip():
        return {}
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):
        return {RAW_ARGUMENTS_KEY: arguments}
    return value if isinstance(value, dict) else {RAW_ARGUMENTS_KEY: arguments}


def write_message(
    message: Message,
    *,
    model: str,
    usage: Usage | None = None,
    stop_reason: str | None = None,
    message_id: str | None = None,
) -> dict[str, Any]:
    """The Messages API's response object for a reply answered whole: the same message a
    streamed one adds up to."""
    encoder = AnthropicStreamEncoder(model=model, message_id=message_id)
    for event in events_of_message(message):
        encoder.feed(event)
    encoder.feed(UsageReport(usage or message.meta.usage or Usage()))
    encoder.finish(stop_reason)
    return encoder.response()
