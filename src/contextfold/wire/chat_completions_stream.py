"""Chat Completions replies: the stream of chunks and the completion, both directions.

:class:`ChatStreamDecoder` is the one reader of a chat-completions stream (the ``openai``
provider and the proxy use it): chunks in, the neutral events of :mod:`contextfold.chat` out,
and the whole reply at the end. :class:`ChatStreamEncoder` does the reverse, so a reply from
any upstream reaches a Chat client as chunks; :func:`write_completion` is the same for a reply
answered whole.

A chunk's tool call carries its id and name once and its arguments in pieces, keyed by the
call's ``index``; the protocol has no event that ends one call, so every call ends with the
choice's ``finish_reason``. With ``stream_options.include_usage`` a last chunk without choices
carries the usage of the whole call.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from contextfold.chat import (
    ChatResponse,
    Finished,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallDone,
    ToolCallStarted,
    UsageReport,
    WireEvent,
)
from contextfold.messages import Message, Usage
from contextfold.wire.chat_completions import parse_openai_response
from contextfold.wire.neutral import StreamFailed, events_of_message, new_id

__all__ = [
    "ChatStreamDecoder",
    "ChatStreamEncoder",
    "usage_to_openai",
    "write_completion",
]


def usage_to_openai(usage: Usage | None) -> dict[str, Any]:
    """A chat-completions ``usage`` object (``prompt_tokens`` counts cached tokens too)."""
    usage = usage or Usage()
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read_tokens},
    }


# --------------------------------------------------------------------------------------------------
# decoder
# --------------------------------------------------------------------------------------------------


class ChatStreamDecoder:
    """Chat chunks in (as dicts, or SSE data text), neutral events out, and the whole reply at
    the end (:meth:`response`). ``[DONE]`` ends the stream (:attr:`done`); a chunk carrying an
    ``error`` raises :class:`~contextfold.wire.neutral.StreamFailed`."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: Mapping[str, Any] | None = None
        self.header: dict[str, Any] = {}
        self.done = False
        self._calls_done = False

    def feed_sse(self, data: str) -> list[WireEvent]:
        """The neutral events of one SSE ``data:`` payload; ``[DONE]`` ends the reply."""
        if data.strip() == "[DONE]":
            return self.end()
        try:
            chunk = json.loads(data)
        except (ValueError, RecursionError):
            return []
        return self.feed(chunk) if isinstance(chunk, Mapping) else []

    def feed(self, chunk: Mapping[str, Any]) -> list[WireEvent]:
        """The neutral events of one chunk."""
        if "error" in chunk and not chunk.get("choices"):
            error = chunk.get("error")
            raise StreamFailed(
                {"error": error if isinstance(error, Mapping) else {"message": str(error)}},
                provider="openai",
            )
        for key in ("id", "model", "created"):
            if chunk.get(key) and key not in self.header:
                self.header[key] = chunk[key]
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        out: list[WireEvent] = []
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, Mapping) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                self.reasoning.append(reasoning)
                out.append(ThinkingDelta(reasoning))
            content = delta.get("content")
            if isinstance(content, str) and content:
                self.text.append(content)
                out.append(TextDelta(content))
            for call in delta.get("tool_calls") or ():
                if isinstance(call, Mapping):
                    out += self._call_delta(call)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
                out += self._end_calls()
        return out

    def _call_delta(self, delta: Mapping[str, Any]) -> list[WireEvent]:
        index = delta.get("index")
        if not isinstance(index, int):
            # Some servers omit the index when they send each call whole in one delta.
            index = len(self.calls)
        call = self.calls.setdefault(
            index, {"id": "", "name": "", "arguments": [], "started": False, "sent": 0}
        )
        function = delta.get("function") or {}
        if delta.get("id"):
            call["id"] = str(delta["id"])
        if function.get("name"):
            call["name"] += str(function["name"])
        if function.get("arguments"):
            call["arguments"].append(str(function["arguments"]))
        out: list[WireEvent] = []
        if not call["started"] and call["id"] and call["name"]:
            call["started"] = True
            out.append(ToolCallStarted(call["id"], call["name"]))
        if call["started"]:
            # Arguments that came before the id and name go out right after the start.
            out += [ToolCallDelta(call["id"], piece) for piece in call["arguments"][call["sent"] :]]
            call["sent"] = len(call["arguments"])
        return out

    def _end_calls(self) -> list[WireEvent]:
        if self._calls_done:
            return []
        self._calls_done = True
        out: list[WireEvent] = []
        for index, call in sorted(self.calls.items()):
            if not call["started"]:  # a call without an id or name: named now, not lost
                call["id"] = call["id"] or f"call_{index}"
                out.append(ToolCallStarted(call["id"], call["name"]))
            out.append(ToolCallDone(call["id"], "".join(call["arguments"]) or "{}"))
        return out

    def end(self) -> list[WireEvent]:
        """The end of the stream (``[DONE]``): the calls' ends, usage and the finish."""
        if self.done:
            return []
        self.done = True
        out = self._end_calls()
        response = self.response()
        if response.usage is not None:
            out.append(UsageReport(response.usage))
        out.append(Finished(self.finish_reason))
        return out

    def response(self) -> ChatResponse:
        """The assembled reply (after the last chunk): message, usage, finish reason, model."""
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) or None}
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        if self.calls:
            message["tool_calls"] = [
                {
                    "id": call["id"] or f"call_{index}",
                    "type": "function",
                    "function": {"name": call["name"], "arguments": "".join(call["arguments"])},
                }
                for index, call in sorted(self.calls.items())
            ]
        data = {
            **self.header,
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason}],
            "usage": self.usage,
        }
        reply, usage, finish = parse_openai_response(data)
        model = self.header.get("model")
        return ChatResponse(reply, usage, finish, str(model) if model else None)


# --------------------------------------------------------------------------------------------------
# encoder
# --------------------------------------------------------------------------------------------------


class ChatStreamEncoder:
    """Neutral events in, chat-completion chunks (dicts) out, as one completion.

    Text goes as ``content``, reasoning as ``reasoning_content`` (the field DeepSeek, vLLM and
    llama.cpp use), calls as ``tool_calls`` numbered in order. ``finish()`` gives the chunk with
    the finish reason and, when ``include_usage``, the usage chunk; the caller ends the stream
    with ``data: [DONE]``. :meth:`completion` is the whole completion (:func:`write_completion`).
    """

    def __init__(
        self,
        *,
        model: str,
        completion_id: str | None = None,
        include_usage: bool = False,
        created: int | None = None,
    ) -> None:
        self.template = {
            "id": completion_id or new_id("chatcmpl"),
            "object": "chat.completion.chunk",
            "created": created if created is not None else int(time.time()),
            "model": model,
        }
        self.include_usage = include_usage
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[str, dict[str, Any]] = {}
        self.usage: Usage | None = None
        self.finish_reason: str | None = None
        self.finished = False
        self._role_sent = False

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        if not self._role_sent:
            self._role_sent = True
            delta = {"role": "assistant", **delta}
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return {**self.template, "choices": [choice]}

    def feed(self, event: WireEvent) -> list[dict[str, Any]]:
        """The chunks for one neutral event."""
        if isinstance(event, TextDelta) and event.text:
            self.text.append(event.text)
            return [self._chunk({"content": event.text})]
        if isinstance(event, ThinkingDelta) and event.text:
            self.reasoning.append(event.text)
            return [self._chunk({"reasoning_content": event.text})]
        if isinstance(event, ToolCallStarted):
            index = len(self.calls)
            self.calls[event.call_id] = {"index": index, "name": event.name, "arguments": []}
            function = {"name": event.name, "arguments": ""}
            call = {"index": index, "id": event.call_id, "type": "function", "function": function}
            return [self._chunk({"tool_calls": [call]})]
        if isinstance(event, ToolCallDelta):
            return self._arguments(event.call_id, event.arguments)
        if isinstance(event, ToolCallDone):
            known = self.calls.get(event.call_id)
            if known is not None and not known["arguments"] and event.arguments:
                return self._arguments(event.call_id, event.arguments)
            return []
        if isinstance(event, UsageReport):
            self.usage = event.usage
        elif isinstance(event, Finished):
            return self.finish(event.stop_reason)
        return []  # signatures, redacted thinking, Responses items: nothing a Chat client reads

    def _arguments(self, call_id: str, arguments: str) -> list[dict[str, Any]]:
        known = self.calls.get(call_id)
        if known is None or not arguments:
            return []
        known["arguments"].append(arguments)
        call = {"index": known["index"], "function": {"arguments": arguments}}
        return [self._chunk({"tool_calls": [call]})]

    def finish(self, stop_reason: str | None = None) -> list[dict[str, Any]]:
        """The chunk with the finish reason, and the usage chunk when the client asked."""
        if self.finished:
            return []
        self.finished = True
        self.finish_reason = stop_reason or ("tool_calls" if self.calls else "stop")
        out = [self._chunk({}, self.finish_reason)]
        if self.include_usage:
            out.append({**self.template, "choices": [], "usage": usage_to_openai(self.usage)})
        return out

    def completion(self) -> dict[str, Any]:
        """The ``chat.completion`` object of the reply."""
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) or None}
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        if self.calls:
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": call["name"], "arguments": "".join(call["arguments"])},
                }
                for call_id, call in self.calls.items()
            ]
        choice = {"index": 0, "message": message, "finish_reason": self.finish_reason or "stop"}
        return {
            **self.template,
            "object": "chat.completion",
            "choices": [choice],
            "usage": usage_to_openai(self.usage),
        }


def write_completion(
    message: Message,
    *,
    model: str,
    usage: Usage | None = None,
    stop_reason: str | None = None,
    completion_id: str | None = None,
) -> dict[str, Any]:
    """The ``chat.completion`` object for a reply answered whole: the same completion a
    streamed one adds up to."""
    encoder = ChatStreamEncoder(model=model, completion_id=completion_id)
    for event in events_of_message(message):
        encoder.feed(event)
    encoder.feed(UsageReport(usage or message.meta.usage or Usage()))
    encoder.finish(stop_reason)
    return encoder.completion()
