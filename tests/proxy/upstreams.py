"""A scripted model server that speaks Anthropic's messages API and OpenAI's chat completions.

:class:`ScriptedUpstream` stands where api.anthropic.com or api.openai.com would: the proxy (or
an official SDK, or Claude Code) sends it real HTTP requests and gets answers in each protocol's
exact wire format, streamed as server-sent events or not, as the request's ``stream`` asks. What
it answers is decided by a *script*, a function of the protocol and the parsed request body::

    def script(protocol, body):
        if not any(m["role"] == "tool" for m in body["messages"]):  # OpenAI shape
            return Reply(tool_calls=[ToolCall("call_1", "ls", {"path": "."})])
        return Reply(text="done")

    upstream = ScriptedUpstream(script, window=16_000)
    with serve(upstream) as url: ...

Every request is recorded in :attr:`ScriptedUpstream.requests` (path, query, headers, body,
protocol and the input tokens counted), so a test can check what the proxy sent upstream.

Input tokens. A request's size is :func:`count_input_tokens`: the body is read into contextfold
messages and tool specs with the project's own wire readers (``contextfold.transcripts``), then
counted with the counter's ``count_request`` (system text + tool definitions + messages, with its
chat-template overhead). The counter is Anthropic's family counter (o200k scaled by the measured
Claude ratio) for the messages API and o200k itself for chat completions, unless one is given.
That count is the ``usage`` reported and what ``window`` is checked against: a request over the
window gets the provider's real context-overflow error, in its real shape and wording, which
``contextfold.providers``' error mapping recognises (``tests/proxy/test_upstreams.py`` checks).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from contextfold.messages import Message
from contextfold.tokens.counters import TokenCounter, counter_for
from contextfold.wire import from_anthropic, from_openai
from contextfold.wire.anthropic import from_anthropic_message
from contextfold.wire.values import tool_specs

__all__ = [
    "Protocol",
    "RecordedRequest",
    "Reply",
    "Script",
    "ScriptedUpstream",
    "ToolCall",
    "UpstreamError",
    "anthropic_overflow",
    "count_input_tokens",
    "default_counter",
    "openai_overflow",
    "request_messages",
]

Protocol = Literal["anthropic", "openai"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call the scripted model makes. ``id`` is sent as the call's id as given."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(slots=True)
class Reply:
    """What the scripted model answers: optional thinking, then text, then tool calls."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    thinking: str | None = None
    cut_short: bool = False
    """The reply stopped at its ``max_tokens`` (``max_tokens`` / ``length``)."""

    def anthropic_stop(self) -> str:
        if self.cut_short:
            return "max_tokens"
        return "tool_use" if self.tool_calls else "end_turn"

    def openai_stop(self) -> str:
        if self.cut_short:
            return "length"
        return "tool_calls" if self.tool_calls else "stop"


@dataclass(frozen=True, slots=True)
class UpstreamError:
    """An HTTP error the script wants answered instead of a reply (any status, any JSON body)."""

    status: int
    body: dict[str, Any]


Script = Callable[[Protocol, dict[str, Any]], "Reply | UpstreamError"]
"""The scripted model's brain: given the protocol and the parsed request body, what to answer."""


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request the upstream received. ``protocol`` is None for a path it does not serve
    (answered 404 and recorded, so a test can see what a client tried)."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: dict[str, Any]
    protocol: Protocol | None
    input_tokens: int | None


def default_counter(protocol: Protocol) -> TokenCounter:
    """The counter :class:`ScriptedUpstream` uses when none is given (see the module docstring)."""
    return counter_for("anthropic" if protocol == "anthropic" else "o200k_base")


def request_messages(protocol: Protocol, body: Mapping[str, Any]) -> list[Message]:
    """The messages of a request body as contextfold reads them, the system prompt first."""
    raw_messages = body.get("messages") or []
    if protocol == "openai":
        return from_openai(raw_messages)
    messages = from_anthropic([], system=body.get("system"))
    call_names: dict[str, str] = {}
    for index, raw in enumerate(raw_messages):
        if isinstance(raw, Mapping) and raw.get("role") == "system":
            # A system message inside the conversation (Claude Code sends them, under the beta
            # "mid-conversation-system-2026-04-07"); contextfold's reader takes the system
            # prompt only from the "system" parameter.
            messages += from_anthropic([], system=_system_text(raw.get("content")))
        else:
            messages += from_anthropic_message(raw, call_names=call_names, index=index)
    return messages


def count_input_tokens(protocol: Protocol, body: Mapping[str, Any], counter: TokenCounter) -> int:
    """Prompt tokens of a request body: its system text, tool definitions and messages."""
    messages = request_messages(protocol, body)
    return counter.count_request(messages, tools=tool_specs(body.get("tools")))


def _system_text(content: Any) -> str:
    if isinstance(content, list):
        return "\n\n".join(
            str(block.get("text", "")) for block in content if isinstance(block, Mapping)
        )
    return str(content or "")


def anthropic_overflow(tokens: int, window: int) -> dict[str, Any]:
    """Anthropic's answer (HTTP 400) to a prompt larger than the model's window."""
    return {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": f"prompt is too long: {tokens} tokens > {window} maximum",
        },
        "request_id": f"req_{uuid.uuid4().hex[:24]}",
    }


def openai_overflow(tokens: int, window: int) -> dict[str, Any]:
    """OpenAI's answer (HTTP 400) to a prompt larger than the model's window."""
    return {
        "error": {
            "message": f"This model's maximum context length is {window} tokens. However, your "
            f"messages resulted in {tokens} tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }


class ScriptedUpstream:
    """A Starlette app (``.app``; the instance itself is the same ASGI app) serving
    ``POST /v1/messages``, ``POST /v1/messages/count_tokens``, ``POST /v1/chat/completions`` and
    ``GET /v1/models`` with answers from ``script``.

    ``window``: requests whose input tokens exceed it get the provider's overflow error and never
    reach the script. ``model``: the model ``/v1/models`` lists, and the one answers name when the
    request names none. ``counter``: how input tokens are counted (default:
    :func:`default_counter`).
    """

    def __init__(
        self,
        script: Script,
        *,
        window: int | None = None,
        model: str = "scripted",
        counter: TokenCounter | None = None,
    ) -> None:
        self.script = script
        self.window = window
        self.model = model
        self.counter = counter
        self.requests: list[RecordedRequest] = []
        self._ids = itertools.count(1)
        self.app = Starlette(
            routes=[
                Route("/v1/messages", self._messages, methods=["POST"]),
                Route("/v1/messages/count_tokens", self._count_tokens, methods=["POST"]),
                Route("/v1/chat/completions", self._chat_completions, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
                Route(
                    "/{path:path}",
                    self._unknown,
                    methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"],
                ),
            ]
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)

    def requests_for(self, path: str) -> list[RecordedRequest]:
        """The recorded requests to one path (query string not included)."""
        return [r for r in self.requests if r.path == path]

    # -- endpoints ---------------------------------------------------------------------------------

    async def _messages(self, request: Request) -> Response:
        body, tokens = await self._record(request, "anthropic")
        if self.window is not None and tokens > self.window:
            return JSONResponse(anthropic_overflow(tokens, self.window), status_code=400)
        answer = self.script("anthropic", body)
        if isinstance(answer, UpstreamError):
            return JSONResponse(answer.body, status_code=answer.status)
        model = str(body.get("model") or self.model)
        message_id = f"msg_{next(self._ids):04d}{uuid.uuid4().hex[:20]}"
        output = self._output_tokens("anthropic", answer)
        if body.get("stream"):
            events = _anthropic_events(answer, message_id, model, tokens, output)
            return _sse(events, {"request-id": f"req_{uuid.uuid4().hex[:24]}"}, done=False)
        return JSONResponse(
            {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": _anthropic_blocks(answer),
                "stop_reason": answer.anthropic_stop(),
                "stop_sequence": None,
                "usage": _anthropic_usage(tokens, output),
            },
            headers={"request-id": f"req_{uuid.uuid4().hex[:24]}"},
        )

    async def _count_tokens(self, request: Request) -> Response:
        _, tokens = await self._record(request, "anthropic")
        return JSONResponse({"input_tokens": tokens})

    async def _chat_completions(self, request: Request) -> Response:
        body, tokens = await self._record(request, "openai")
        if self.window is not None and tokens > self.window:
            return JSONResponse(openai_overflow(tokens, self.window), status_code=400)
        answer = self.script("openai", body)
        if isinstance(answer, UpstreamError):
            return JSONResponse(answer.body, status_code=answer.status)
        model = str(body.get("model") or self.model)
        completion_id = f"chatcmpl-{next(self._ids):04d}{uuid.uuid4().hex[:20]}"
        output = self._output_tokens("openai", answer)
        usage = {
            "prompt_tokens": tokens,
            "completion_tokens": output,
            "total_tokens": tokens + output,
        }
        if body.get("stream"):
            options = body.get("stream_options") or {}
            include_usage = isinstance(options, Mapping) and bool(options.get("include_usage"))
            chunks = _openai_chunks(answer, completion_id, model, usage if include_usage else None)
            return _sse(chunks, {"x-request-id": f"req_{uuid.uuid4().hex[:24]}"}, done=True)
        message: dict[str, Any] = {"role": "assistant", "content": answer.text or None}
        message["refusal"] = None
        if answer.thinking:
            # OpenAI's own API returns no reasoning text; vLLM, DeepSeek and llama.cpp put it
            # here, and contextfold's reader takes it from here.
            message["reasoning_content"] = answer.thinking
        if answer.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
                }
                for call in answer.tool_calls
            ]
        return JSONResponse(
            {
                "id": completion_id,
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": answer.openai_stop(),
                        "logprobs": None,
                    }
                ],
                "usage": usage,
            }
        )

    async def _models(self, request: Request) -> Response:
        await self._record(request, None)
        if "anthropic-version" in request.headers:
            entry: dict[str, Any] = {
                "type": "model",
                "id": self.model,
                "display_name": self.model,
                "created_at": "2025-01-01T00:00:00Z",
            }
            return JSONResponse(
                {"data": [entry], "has_more": False, "first_id": self.model, "last_id": self.model}
            )
        listed = {"id": self.model, "object": "model", "created": 0, "owned_by": "scripted"}
        return JSONResponse({"object": "list", "data": [listed]})

    async def _unknown(self, request: Request) -> Response:
        await self._record(request, None)
        return JSONResponse(
            {"error": {"type": "not_found_error", "message": f"no route {request.url.path}"}},
            status_code=404,
        )

    # -- helpers -----------------------------------------------------------------------------------

    async def _record(
        self, request: Request, protocol: Protocol | None
    ) -> tuple[dict[str, Any], int]:
        raw = await request.body()
        try:
            parsed = json.loads(raw) if raw else {}
        except ValueError:
            parsed = {"_unparsed": raw.decode("utf-8", "replace")}
        body: dict[str, Any] = parsed if isinstance(parsed, dict) else {"_body": parsed}
        tokens = 0
        if protocol is not None:
            tokens = count_input_tokens(protocol, body, self._counter(protocol))
        self.requests.append(
            RecordedRequest(
                method=request.method,
                path=request.url.path,
                query=request.url.query,
                headers=dict(request.headers),
                body=body,
                protocol=protocol,
                input_tokens=tokens if protocol is not None else None,
            )
        )
        return body, tokens

    def _counter(self, protocol: Protocol) -> TokenCounter:
        return self.counter or default_counter(protocol)

    def _output_tokens(self, protocol: Protocol, answer: Reply) -> int:
        counter = self._counter(protocol)
        texts = [answer.thinking or "", answer.text]
        texts += [call.name + json.dumps(call.arguments) for call in answer.tool_calls]
        return max(1, sum(counter.count_text(t) for t in texts if t))


# -- Anthropic wire format -------------------------------------------------------------------------

SIGNATURE = "c2NyaXB0ZWQtdXBzdHJlYW0tc2lnbmF0dXJl"
"""The opaque signature sent with thinking blocks (clients must hand it back unchanged)."""


def _anthropic_usage(input_tokens: int, output_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": output_tokens,
    }


def _anthropic_blocks(answer: Reply) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if answer.thinking:
        blocks.append({"type": "thinking", "thinking": answer.thinking, "signature": SIGNATURE})
    if answer.text:
        blocks.append({"type": "text", "text": answer.text})
    blocks += [
        {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
        for call in answer.tool_calls
    ]
    return blocks


def _pieces(text: str, count: int = 3) -> list[str]:
    """``text`` cut in up to ``count`` non-empty pieces, as a model's deltas arrive."""
    if not text:
        return []
    size = max(1, -(-len(text) // count))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _anthropic_events(
    answer: Reply, message_id: str, model: str, input_tokens: int, output_tokens: int
) -> list[tuple[str | None, dict[str, Any]]]:
    """The event stream of one message, in the order the API sends it."""
    start_usage = _anthropic_usage(input_tokens, 1)
    events: list[tuple[str | None, dict[str, Any]]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": start_usage,
                },
            },
        ),
        ("ping", {"type": "ping"}),
    ]

    def block(index: int, start: dict[str, Any], deltas: list[dict[str, Any]]) -> None:
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
        )
        events.extend(
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
            for delta in deltas
        )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))

    index = 0
    if answer.thinking:
        deltas = [{"type": "thinking_delta", "thinking": p} for p in _pieces(answer.thinking)]
        deltas.append({"type": "signature_delta", "signature": SIGNATURE})
        block(index, {"type": "thinking", "thinking": "", "signature": ""}, deltas)
        index += 1
    if answer.text:
        deltas = [{"type": "text_delta", "text": p} for p in _pieces(answer.text)]
        block(index, {"type": "text", "text": ""}, deltas)
        index += 1
    for call in answer.tool_calls:
        arguments = json.dumps(call.arguments)
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in _pieces(arguments)]
        block(index, {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}, deltas)
        index += 1
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": answer.anthropic_stop(),
                    "stop_sequence": None,
                },
                "usage": _anthropic_usage(input_tokens, output_tokens),
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


# -- OpenAI wire format ----------------------------------------------------------------------------


def _openai_chunks(
    answer: Reply, completion_id: str, model: str, usage: dict[str, Any] | None
) -> list[tuple[str | None, dict[str, Any]]]:
    """The ``chat.completion.chunk`` stream of one completion (``usage`` given: the caller set
    ``stream_options.include_usage``, so every chunk carries ``usage: null`` and a last chunk
    with no choices carries the usage)."""
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [
                {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
            ],
        }
        if usage is not None:
            out["usage"] = None
        return out

    chunks: list[dict[str, Any]] = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"reasoning_content": p}) for p in _pieces(answer.thinking or "")]
    chunks += [chunk({"content": p}) for p in _pieces(answer.text)]
    for index, call in enumerate(answer.tool_calls):
        head = {"index": index, "id": call.id, "type": "function"}
        head["function"] = {"name": call.name, "arguments": ""}
        chunks.append(chunk({"tool_calls": [head]}))
        chunks += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": p}}]})
            for p in _pieces(json.dumps(call.arguments))
        ]
    chunks.append(chunk({}, answer.openai_stop()))
    if usage is not None:
        last = chunk({})
        last["choices"] = []
        last["usage"] = usage
        chunks.append(last)
    return [(None, c) for c in chunks]


# -- server-sent events ----------------------------------------------------------------------------


def _sse(
    events: Sequence[tuple[str | None, dict[str, Any]]], headers: dict[str, str], *, done: bool
) -> StreamingResponse:
    """Send ``(event name, data)`` pairs as server-sent events, one network write each; ``done``
    ends the stream with OpenAI's ``data: [DONE]`` (its events also have no names)."""

    async def body() -> AsyncIterator[bytes]:
        for name, data in events:
            prefix = f"event: {name}\n" if name else ""
            yield f"{prefix}data: {json.dumps(data)}\n\n".encode()
            # Yield to the event loop so each event leaves in its own write, as over a network.
            await asyncio.sleep(0)
        if done:
            yield b"data: [DONE]\n\n"

    headers = {"cache-control": "no-cache", **headers}
    return StreamingResponse(body(), media_type="text/event-stream", headers=headers)
