"""Responses API replies: the response object, its stream of events, both directions.

:class:`ResponsesStreamEncoder` turns neutral stream events (text, reasoning, tool calls, usage,
the end) into the Responses events a client parses, one at a time, so that a proxy can relay any
upstream's stream as a Responses stream. :class:`ResponsesStreamDecoder` does the reverse for an
upstream that speaks Responses, and reads the whole reply at the end. :func:`write_response` and
:func:`read_response` are the same for a non-streamed reply (the encoder builds the response
object, so a reply streamed and one answered whole are the same object).

The neutral events are the stream events of :mod:`contextfold.chat` (:data:`WireEvent`), the
ones every protocol's decoder makes.

What Codex reads of a stream (``codex-rs/codex-api/src/sse/responses.rs``): the JSON ``type`` of
each event (the SSE ``event:`` line is not read); ``response.created``;
``response.output_item.added`` / ``.done`` (the finished item is what it keeps);
``response.output_text.delta``; ``response.reasoning_summary_part.added`` and
``response.reasoning_summary_text.delta``; ``response.completed`` with ``response.id`` and
``usage`` (``input_tokens``, ``input_tokens_details.cached_tokens``, ``output_tokens``,
``output_tokens_details.reasoning_tokens``, ``total_tokens``); ``response.failed`` whose
``response.error.code`` is ``context_length_exceeded`` makes it compact its history. A stream that
ends without ``response.completed`` is an error it retries.
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from contextfold.chat import (
    ChatResponse,
    Finished,
    ProviderItem,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallDone,
    ToolCallStarted,
    UsageReport,
    WireEvent,
)
from contextfold.errors import ProviderError
from contextfold.messages import (
    Message,
    Meta,
    ToolCallPart,
    Usage,
)
from contextfold.wire.neutral import events_of_message
from contextfold.wire.responses import error_from_body
from contextfold.wire.responses_items import (
    NAMESPACE_SEPARATOR,
    PROVIDER_KEY,
    items_to_messages,
    new_id,
)

__all__ = [
    "Finished",
    "NeutralEvent",
    "ProviderItem",
    "ResponsesReply",
    "ResponsesStreamDecoder",
    "ResponsesStreamEncoder",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallDelta",
    "ToolCallDone",
    "ToolCallStarted",
    "UsageReport",
    "events_of_message",
    "read_response",
    "sse_bytes",
    "usage_from_wire",
    "usage_to_wire",
    "write_response",
]


NeutralEvent: TypeAlias = WireEvent
"""The neutral stream events (:data:`contextfold.chat.WireEvent`)."""


# --------------------------------------------------------------------------------------------------
# usage and stop reasons
# --------------------------------------------------------------------------------------------------


def usage_to_wire(usage: Usage | None, reasoning_tokens: int = 0) -> dict[str, Any]:
    """The ``usage`` object of a response (all zeros when there is none: Codex needs the three
    counts as integers, or it cannot read ``response.completed``)."""
    usage = usage or Usage()
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {
            "cached_tokens": usage.cache_read_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
        },
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def usage_from_wire(usage: Any) -> tuple[Usage | None, int]:
    """Neutral usage and the reasoning tokens of a response's ``usage`` object."""
    if not isinstance(usage, Mapping):
        return None, 0
    details = usage.get("input_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    out_details = usage.get("output_tokens_details")
    reasoning = out_details.get("reasoning_tokens") if isinstance(out_details, Mapping) else None
    written = details.get("cache_write_tokens") if isinstance(details, Mapping) else None
    neutral = Usage(
        input_tokens=_count(usage.get("input_tokens")),
        output_tokens=_count(usage.get("output_tokens")),
        cache_read_tokens=_count(cached),
        cache_write_tokens=_count(written),
    )
    return neutral, _count(reasoning)


_INCOMPLETE = {"length": "max_output_tokens", "max_tokens": "max_output_tokens"}


def _status(stop_reason: str | None) -> tuple[str, dict[str, Any] | None]:
    reason = _INCOMPLETE.get(stop_reason or "")
    if reason is None and stop_reason == "content_filter":
        reason = "content_filter"
    return ("incomplete", {"reason": reason}) if reason else ("completed", None)


def _stop_reason(response: Mapping[str, Any], has_calls: bool) -> str:
    if response.get("status") == "incomplete":
        details = response.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, Mapping) else None
        return "content_filter" if reason == "content_filter" else "length"
    return "tool_calls" if has_calls else "stop"


def sse_bytes(event: Mapping[str, Any]) -> bytes:
    """One event as server-sent-event bytes, named by its ``type`` as OpenAI names them."""
    data = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
    return f"event: {event['type']}\ndata: {data}\n\n".encode()


# --------------------------------------------------------------------------------------------------
# encoder
# --------------------------------------------------------------------------------------------------


@dataclass
class _Open:
    kind: str  # message, reasoning, function_call, custom_tool_call
    index: int
    item: dict[str, Any]
    text: list[str] = field(default_factory=list)


class ResponsesStreamEncoder:
    """Neutral stream events in, Responses stream events (dicts) out.

    ``start()`` gives ``response.created`` and ``response.in_progress`` (``feed`` calls it when
    it was not called); ``feed(event)`` the events one neutral event makes; ``finish()`` closes
    what is open and gives ``response.completed`` (``response.incomplete`` when the reply ran
    out of tokens); ``fail()`` ends with ``response.failed``. Every event has a
    ``sequence_number``. ``custom_tools`` and ``namespaces`` (from the client's
    :class:`~contextfold.wire.responses.ResponsesRequest`) say which calls go back as
    ``custom_tool_call`` and under which namespace. ``echo`` is merged into the response object
    (the request's ``tools``, ``tool_choice``, ``instructions``... that OpenAI echoes).
    """

    def __init__(
        self,
        *,
        model: str,
        response_id: str | None = None,
        created_at: float | None = None,
        custom_tools: Collection[str] = (),
        namespaces: Mapping[str, tuple[str, str]] | None = None,
        echo: Mapping[str, Any] | None = None,
    ) -> None:
        self.model = model
        self.response_id = response_id or new_id("resp")
        self.created_at = int(created_at if created_at is not None else time.time())
        self.custom_tools = frozenset(custom_tools)
        self.namespaces = dict(namespaces or {})
        self.echo = dict(echo or {})
        self.output: list[dict[str, Any]] = []
        """The finished output items, in order."""
        self.usage: Usage | None = None
        self.reasoning_tokens = 0
        self.response: dict[str, Any] | None = None
        """The final response object, once :meth:`finish` or :meth:`fail` ran."""
        self._sequence = 0
        self._started = False
        self._open: dict[str, _Open] = {}  # by call id, or "message" / "reasoning"
        self._order: list[str] = []
        self._next_index = 0

    # -- helpers ---------------------------------------------------------------------------------

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"type": kind, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return event

    def _response(self, status: str, **fields: Any) -> dict[str, Any]:
        response: dict[str, Any] = {
            "id": self.response_id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "model": self.model,
            "output": [dict(i) for i in self.output],
            "error": None,
            "incomplete_details": None,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": None,
        }
        response.update(self.echo)
        response.update(fields)
        return response

    # -- the stream ------------------------------------------------------------------------------

    def start(self) -> list[dict[str, Any]]:
        """``response.created`` and ``response.in_progress``."""
        if self._started:
            return []
        self._started = True
        return [
            self._event("response.created", response=self._response("in_progress")),
            self._event("response.in_progress", response=self._response("in_progress")),
        ]

    def feed(self, event: NeutralEvent) -> list[dict[str, Any]]:
        """The Responses events for one neutral event."""
        out = self.start()
        if isinstance(event, TextDelta):
            if event.text:
                out += self._text(event.text)
        elif isinstance(event, ThinkingDelta):
            if event.text:
                out += self._thinking(event.text)
        elif isinstance(event, ToolCallStarted):
            out += self._close("message") + self._close("reasoning")
            out += self._call_start(event.call_id, event.name)
        elif isinstance(event, ToolCallDelta):
            out += self._call_delta(event.call_id, event.arguments)
        elif isinstance(event, ToolCallDone):
            out += self._call_done(event.call_id, event.arguments)
        elif isinstance(event, UsageReport):
            self.usage, self.reasoning_tokens = event.usage, event.reasoning_tokens
        elif isinstance(event, ProviderItem):
            out += self._close_all()
            out += self._whole_item(dict(event.item))
        elif isinstance(event, Finished):
            out += self.finish(event.stop_reason)
        return out

    def _add(self, key: str, kind: str, item: dict[str, Any]) -> tuple[_Open, dict[str, Any]]:
        opened = _Open(kind, self._next_index, item)
        self._next_index += 1
        self._open[key] = opened
        self._order.append(key)
        added = self._event("response.output_item.added", output_index=opened.index, item=item)
        return opened, added

    def _text(self, text: str) -> list[dict[str, Any]]:
        out = self._close("reasoning")
        opened = self._open.get("message")
        if opened is None:
            item = {
                "id": new_id("msg"),
                "type": "message",
                "status": "in_progress",
                "role": "assistant",
                "content": [],
            }
            opened, added = self._add("message", "message", item)
            part = {"type": "output_text", "text": "", "annotations": []}
            out += [
                added,
                self._event(
                    "response.content_part.added",
                    item_id=item["id"],
                    output_index=opened.index,
                    content_index=0,
                    part=part,
                ),
            ]
        opened.text.append(text)
        out.append(
            self._event(
                "response.output_text.delta",
                item_id=opened.item["id"],
                output_index=opened.index,
                content_index=0,
                delta=text,
                logprobs=[],
            )
        )
        return out

    def _thinking(self, text: str) -> list[dict[str, Any]]:
        out = self._close("message")
        opened = self._open.get("reasoning")
        if opened is None:
            item = {"id": new_id("rs"), "type": "reasoning", "summary": []}
            opened, added = self._add("reasoning", "reasoning", item)
            out += [
                added,
                self._event(
                    "response.reasoning_summary_part.added",
                    item_id=item["id"],
                    output_index=opened.index,
                    summary_index=0,
                    part={"type": "summary_text", "text": ""},
                ),
            ]
        opened.text.append(text)
        out.append(
            self._event(
                "response.reasoning_summary_text.delta",
                item_id=opened.item["id"],
                output_index=opened.index,
                summary_index=0,
                delta=text,
            )
        )
        return out

    def _call_start(self, call_id: str, name: str) -> list[dict[str, Any]]:
        if call_id in self._open:
            return []
        custom = name in self.custom_tools
        item: dict[str, Any] = {
            "id": new_id("ctc" if custom else "fc"),
            "type": "custom_tool_call" if custom else "function_call",
            "status": "in_progress",
            "call_id": call_id,
            "name": name,
        }
        if name in self.namespaces:
            item["namespace"], item["name"] = self.namespaces[name]
        item["input" if custom else "arguments"] = ""
        _, added = self._add(call_id, item["type"], item)
        return [added]

    def _call_delta(self, call_id: str, arguments: str) -> list[dict[str, Any]]:
        opened = self._open.get(call_id)
        if opened is None or not arguments:
            return []
        opened.text.append(arguments)
        if opened.kind == "custom_tool_call":
            return []  # the input sits inside {"input": ...}: it is sent whole when the call ends
        return [
            self._event(
                "response.function_call_arguments.delta",
                item_id=opened.item["id"],
                output_index=opened.index,
                delta=arguments,
            )
        ]

    def _call_done(self, call_id: str, arguments: str | None) -> list[dict[str, Any]]:
        opened = self._open.get(call_id)
        if opened is None:
            return []
        if arguments is not None and arguments != "".join(opened.text):
            out = self._call_delta(call_id, arguments.removeprefix("".join(opened.text)))
            opened.text = [arguments]
        else:
            out = []
        return out + self._close(call_id)

    def _close(self, key: str) -> list[dict[str, Any]]:
        opened = self._open.pop(key, None)
        if opened is None:
            return []
        self._order.remove(key)
        item, index, text = opened.item, opened.index, "".join(opened.text)
        ids = {"item_id": item["id"], "output_index": index}
        out: list[dict[str, Any]] = []
        if opened.kind == "message":
            part = {"type": "output_text", "text": text, "annotations": []}
            out.append(
                self._event(
                    "response.output_text.done", **ids, content_index=0, text=text, logprobs=[]
                )
            )
            out.append(self._event("response.content_part.done", **ids, content_index=0, part=part))
            item = {**item, "status": "completed", "content": [part]}
        elif opened.kind == "reasoning":
            part = {"type": "summary_text", "text": text}
            out.append(
                self._event(
                    "response.reasoning_summary_text.done", **ids, summary_index=0, text=text
                )
            )
            out.append(
                self._event(
                    "response.reasoning_summary_part.done", **ids, summary_index=0, part=part
                )
            )
            item = {**item, "summary": [part]}
        elif opened.kind == "custom_tool_call":
            value = _custom_input(text)
            out.append(self._event("response.custom_tool_call_input.delta", **ids, delta=value))
            out.append(self._event("response.custom_tool_call_input.done", **ids, input=value))
            item = {**item, "status": "completed", "input": value}
        else:
            arguments = text or "{}"
            out.append(
                self._event("response.function_call_arguments.done", **ids, arguments=arguments)
            )
            item = {**item, "status": "completed", "arguments": arguments}
        out.append(self._event("response.output_item.done", output_index=index, item=item))
        self.output.append(item)
        return out

    def close_items(self) -> list[dict[str, Any]]:
        """Close every open item, so that what follows starts new ones (another round's text
        is a message of its own)."""
        return self._close_all()

    def _close_all(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for key in list(self._order):
            out += self._close(key)
        return out

    def _whole_item(self, item: dict[str, Any]) -> list[dict[str, Any]]:
        index = self._next_index
        self._next_index += 1
        self.output.append(item)
        return [
            self._event("response.output_item.added", output_index=index, item=item),
            self._event("response.output_item.done", output_index=index, item=item),
        ]

    def finish(
        self, stop_reason: str | None = None, usage: Usage | None = None
    ) -> list[dict[str, Any]]:
        """Close what is open, and end the stream: ``response.completed``, or
        ``response.incomplete`` when ``stop_reason`` says the reply ran out of tokens."""
        if self.response is not None:
            return []
        out = self.start() + self._close_all()
        if usage is not None:
            self.usage = usage
        status, incomplete = _status(stop_reason)
        self.response = self._response(
            status,
            incomplete_details=incomplete,
            usage=usage_to_wire(self.usage, self.reasoning_tokens),
        )
        kind = "response.completed" if status == "completed" else "response.incomplete"
        out.append(self._event(kind, response=self.response))
        return out

    def fail(self, message: str, *, code: str = "server_error") -> list[dict[str, Any]]:
        """End the stream with ``response.failed``. ``code="context_length_exceeded"`` is what
        makes Codex compact its history (it reads an HTTP 400 as fatal instead)."""
        if self.response is not None:
            return []
        out = self.start() + self._close_all()
        error = {"code": code, "message": message}
        self.response = self._response("failed", error=error, usage=None)
        out.append(self._event("response.failed", response=self.response))
        return out

    @property
    def message(self) -> Message:
        """The assistant message streamed so far (finished items), for the transcript."""
        return _reply_message(self.output, self.usage)


def _custom_input(arguments: str) -> str:
    """A freeform call's input from its neutral ``{"input": ...}`` arguments (the text itself
    when a model wrote something else)."""
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):
        return arguments
    text = value.get("input") if isinstance(value, dict) else None
    return text if isinstance(text, str) else arguments


def write_response(
    message: Message,
    *,
    model: str,
    usage: Usage | None = None,
    stop_reason: str | None = None,
    reasoning_tokens: int = 0,
    response_id: str | None = None,
    created_at: float | None = None,
    custom_tools: Collection[str] = (),
    namespaces: Mapping[str, tuple[str, str]] | None = None,
    echo: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The response object of a non-streamed reply: the same object a streamed one ends with."""
    encoder = ResponsesStreamEncoder(
        model=model,
        response_id=response_id,
        created_at=created_at,
        custom_tools=custom_tools,
        namespaces=namespaces,
        echo=echo,
    )
    for event in events_of_message(message):
        encoder.feed(event)
    encoder.feed(UsageReport(usage or message.meta.usage or Usage(), reasoning_tokens))
    encoder.finish(stop_reason)
    assert encoder.response is not None  # finish() always sets it
    return encoder.response


# --------------------------------------------------------------------------------------------------
# decoder
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ResponsesReply:
    """One Responses reply read whole: the assistant message (``meta.usage`` set, item details
    under ``meta.provider["responses"]``), usage, the stop reason in Chat's words, ids."""

    message: Message
    usage: Usage | None
    stop_reason: str
    response_id: str | None = None
    model: str | None = None
    reasoning_tokens: int = 0
    raw_usage: Mapping[str, Any] = field(default_factory=dict)
    output: tuple[Mapping[str, Any], ...] = ()


def _reply_message(output: Iterable[Mapping[str, Any]], usage: Usage | None) -> Message:
    messages = items_to_messages(output)
    parts = [p for m in messages if m.role == "assistant" for p in m.parts]
    provider: dict[str, Any] = {}
    for m in messages:
        details = m.meta.provider.get(PROVIDER_KEY)
        if m.role == "assistant" and isinstance(details, Mapping):
            for key, value in details.items():
                if isinstance(value, list):
                    provider.setdefault(key, []).extend(value)
                elif isinstance(value, Mapping):
                    provider.setdefault(key, {}).update(value)
    flags = (
        ("invalid_arguments",)
        if any(isinstance(p, ToolCallPart) and not p.arguments_valid for p in parts)
        else ()
    )
    meta = Meta(usage=usage, flags=flags, provider={PROVIDER_KEY: provider} if provider else {})
    return Message("assistant", tuple(parts), meta=meta)


def read_response(body: Any) -> ResponsesReply:
    """A non-streamed Responses response (or the ``response`` of ``response.completed``) read
    whole; a failed one raises the error it carries (:class:`ContextOverflowError` for
    ``context_length_exceeded``)."""
    if not isinstance(body, Mapping):
        raise ProviderError(
            "a Responses response must be a JSON object", provider="openai-responses"
        )
    if "error" in body and body.get("error") and body.get("object") != "response":
        raise error_from_body(body)
    if body.get("status") == "failed" or body.get("error"):
        raise error_from_body({"error": body.get("error") or {}})
    output = [i for i in body.get("output") or () if isinstance(i, Mapping) and "type" in i]
    usage, reasoning = usage_from_wire(body.get("usage"))
    message = _reply_message(output, usage)
    return ResponsesReply(
        message=message,
        usage=usage,
        stop_reason=_stop_reason(body, bool(message.tool_calls)),
        response_id=body.get("id") if isinstance(body.get("id"), str) else None,
        model=body.get("model") if isinstance(body.get("model"), str) else None,
        reasoning_tokens=reasoning,
        raw_usage=dict(body["usage"]) if isinstance(body.get("usage"), Mapping) else {},
        output=tuple(output),
    )


class ResponsesStreamDecoder:
    """Responses stream events in (parsed JSON, or SSE data text), neutral events out, and the
    whole reply at the end (:meth:`reply`).

    ``response.failed`` and ``error`` events raise the error they carry
    (:class:`ContextOverflowError` for ``context_length_exceeded``); a stream that ended without
    ``response.completed`` / ``response.incomplete`` has no :meth:`reply`.
    """

    def __init__(self) -> None:
        self.done = False
        self._items: dict[int, Mapping[str, Any]] = {}
        self._calls: dict[str, str] = {}  # item id -> call id
        self._custom: dict[str, list[str]] = {}
        self._summaries: set[tuple[str, int]] = set()
        self._reply: ResponsesReply | None = None

    def feed_sse(self, data: str) -> list[NeutralEvent]:
        """The neutral events of one SSE ``data:`` payload (``[DONE]`` and non-JSON ignored)."""
        if data.strip() == "[DONE]":
            return []
        try:
            event = json.loads(data)
        except (ValueError, RecursionError):
            return []
        return self.feed(event) if isinstance(event, Mapping) else []

    def feed(self, event: Mapping[str, Any]) -> list[NeutralEvent]:
        """The neutral events of one Responses stream event."""
        kind = event.get("type")
        if kind == "response.output_item.added":
            return self._added(event)
        if kind == "response.output_text.delta" or kind == "response.refusal.delta":
            return [TextDelta(str(event.get("delta", "")))]
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            return [ThinkingDelta(str(event.get("delta", "")))]
        if kind == "response.reasoning_summary_part.added":
            # Codex shows summary parts apart; the neutral text keeps them apart with a blank line.
            key = (str(event.get("item_id")), int(event.get("summary_index") or 0))
            first = key[1] == 0 or key in self._summaries
            self._summaries.add(key)
            return [] if first else [ThinkingDelta("\n\n")]
        if kind == "response.function_call_arguments.delta":
            call_id = self._calls.get(str(event.get("item_id")))
            delta = str(event.get("delta", ""))
            return [ToolCallDelta(call_id, delta)] if call_id and delta else []
        if kind == "response.custom_tool_call_input.delta":
            self._custom.setdefault(str(event.get("item_id")), []).append(str(event.get("delta")))
            return []
        if kind == "response.output_item.done":
            return self._done(event)
        if kind in ("response.completed", "response.incomplete", "response.done"):
            return self._finished(event.get("response"))
        if kind == "response.failed":
            response = event.get("response")
            error = response.get("error") if isinstance(response, Mapping) else None
            raise error_from_body({"error": error or {"message": "response.failed"}})
        if kind == "error":
            raise error_from_body({"error": event.get("error", event)})
        return []

    def _added(self, event: Mapping[str, Any]) -> list[NeutralEvent]:
        item = event.get("item")
        if not isinstance(item, Mapping):
            return []
        kind = item.get("type")
        if kind in ("function_call", "custom_tool_call") and isinstance(item.get("call_id"), str):
            self._calls[str(item.get("id"))] = item["call_id"]
            name = str(item.get("name", ""))
            if item.get("namespace"):
                name = f"{item['namespace']}{NAMESPACE_SEPARATOR}{name}"
            return [ToolCallStarted(item["call_id"], name)]
        return []

    def _done(self, event: Mapping[str, Any]) -> list[NeutralEvent]:
        item = event.get("item")
        if not isinstance(item, Mapping):
            return []
        index = event.get("output_index")
        self._items[index if isinstance(index, int) else len(self._items)] = item
        kind = item.get("type")
        if kind == "function_call" and isinstance(item.get("call_id"), str):
            return [ToolCallDone(item["call_id"], str(item.get("arguments", "")))]
        if kind == "custom_tool_call" and isinstance(item.get("call_id"), str):
            arguments = json.dumps({"input": str(item.get("input", ""))}, ensure_ascii=False)
            return [ToolCallDelta(item["call_id"], arguments), ToolCallDone(item["call_id"])]
        return []

    def _finished(self, response: Any) -> list[NeutralEvent]:
        response = response if isinstance(response, Mapping) else {}
        done = [self._items[i] for i in sorted(self._items)]
        body = {**response, "output": done or list(response.get("output") or ())}
        body.setdefault("status", "completed")
        self._reply = read_response(body)
        self.done = True
        out: list[NeutralEvent] = []
        if self._reply.usage is not None:
            out.append(UsageReport(self._reply.usage, self._reply.reasoning_tokens))
        out.append(Finished(self._reply.stop_reason))
        return out

    def response(self) -> ChatResponse:
        """The reply read whole as a :class:`~contextfold.chat.ChatResponse`, like the other
        protocols' decoders give it; :class:`ProviderError` when the stream has not ended."""
        reply = self.reply()
        return ChatResponse(reply.message, reply.usage, reply.stop_reason, reply.model)

    def reply(self) -> ResponsesReply:
        """The reply read whole; :class:`ProviderError` when the stream has not ended."""
        if self._reply is None:
            raise ProviderError(
                "the stream closed before response.completed", provider="openai-responses"
            )
        return self._reply
