"""A scripted model server that also speaks the OpenAI Responses API (``POST /v1/responses``).

Codex CLI speaks nothing else (``wire_api = "responses"``; the Chat API is refused since early
2026), and opencode's ``openai`` provider and mini-swe-agent's ``litellm_response`` model use it
too. :class:`ResponsesUpstream` is :class:`tests.proxy.upstreams.ScriptedUpstream` with that
route added, so one server answers all three protocols from one script.

The wire shapes follow what Codex parses (``codex-rs/codex-api/src/sse/responses.rs``): named
server-sent events ``response.created``, ``response.output_item.added`` / ``.done`` (the item
whole in ``.done``: Codex builds its history from those), ``response.output_text.delta``,
``response.reasoning_summary_text.delta``, and ``response.completed`` whose ``response`` carries
``id`` and ``usage`` (``input_tokens``, ``input_tokens_details.cached_tokens``,
``output_tokens``, ``output_tokens_details.reasoning_tokens``, ``total_tokens``). A stream that
ends without ``response.completed`` is an error to Codex. A request over the window gets
``response.failed`` with ``error.code = "context_length_exceeded"`` when streamed (what makes
Codex compact itself), and HTTP 400 with the same code when not.

Tokens: the body is turned into the equivalent Chat Completions body (:func:`as_chat_body`) and
counted as the Chat route counts (o200k by default).
"""

from __future__ import annotations

import itertools
import json
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Literal

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.proxy.upstreams import (
    RecordedRequest,
    Reply,
    ScriptedUpstream,
    UpstreamError,
    _sse,
    count_input_tokens,
    default_counter,
)

__all__ = [
    "AnyProtocol",
    "AnyScript",
    "ResponsesUpstream",
    "as_chat_body",
    "responses_overflow",
    "serving_only",
]

AnyProtocol = Literal["anthropic", "openai", "responses"]
AnyScript = Callable[[AnyProtocol, dict[str, Any]], "Reply | UpstreamError"]
"""A script for all three protocols (``"openai"`` is Chat Completions)."""

ENCRYPTED = "c2NyaXB0ZWQtcmVhc29uaW5n"
"""The opaque ``encrypted_content`` of reasoning items (a client must hand it back unchanged)."""


def responses_overflow(tokens: int, window: int) -> dict[str, Any]:
    """The ``error`` object of a Responses request larger than the model's window."""
    return {
        "code": "context_length_exceeded",
        "type": "invalid_request_error",
        "param": "input",
        "message": f"Your input exceeds the context window of this model: {tokens} tokens > "
        f"{window} maximum. Please adjust your input and try again.",
    }


def as_chat_body(body: Mapping[str, Any]) -> dict[str, Any]:
    """The Chat Completions body saying what a Responses body says (for counting tokens)."""
    messages: list[dict[str, Any]] = []
    if isinstance(body.get("instructions"), str):
        messages.append({"role": "system", "content": body["instructions"]})
    items = body.get("input")
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type") or "message"
        if kind == "message":
            role = str(item.get("role") or "user")
            messages.append(
                {"role": "system" if role == "developer" else role, "content": _text(item)}
            )
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            arguments = item.get("arguments") if kind == "function_call" else item.get("input")
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments if arguments is not None else item.get("action"))
            call = {
                "id": str(item.get("call_id") or item.get("id")),
                "type": "function",
                "function": {"name": str(item.get("name") or kind), "arguments": arguments},
            }
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant" and "tool_calls" in last:
                last["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind.endswith("_output"):
            output = item.get("output")
            text = output if isinstance(output, str) else json.dumps(output)
            messages.append(
                {"role": "tool", "tool_call_id": str(item.get("call_id")), "content": text}
            )
        elif kind == "reasoning":
            summary = " ".join(str(s.get("text", "")) for s in item.get("summary") or [])
            if summary:
                messages.append({"role": "assistant", "content": summary})
    tools: list[dict[str, Any]] = []
    for tool in body.get("tools") or []:
        if not isinstance(tool, Mapping):
            continue
        function = {
            "name": str(tool.get("name") or tool.get("type")),
            "description": str(tool.get("description") or ""),
            "parameters": tool.get("parameters") or {"type": "object", "properties": {}},
        }
        tools.append({"type": "function", "function": function})
    return {"messages": messages, "tools": tools}


_ROUTES: dict[AnyProtocol, tuple[str, ...]] = {
    "anthropic": ("/v1/messages", "/v1/messages/count_tokens"),
    "openai": ("/v1/chat/completions",),
    "responses": ("/v1/responses",),
}


def serving_only(upstream: ScriptedUpstream, *protocols: AnyProtocol) -> ScriptedUpstream:
    """``upstream`` with the model routes of every other protocol taken away: their paths fall
    to the catch-all 404, as on a server that never had them (Ollama, vLLM and LM Studio speak
    Chat Completions only). The proxy in front must then bridge."""
    gone = {
        path for protocol, paths in _ROUTES.items() if protocol not in protocols for path in paths
    }
    routes = upstream.app.router.routes
    routes[:] = [r for r in routes if getattr(r, "path", None) not in gone]
    return upstream


def _text(item: Mapping[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(c.get("text", "")) for c in content if isinstance(c, Mapping))
    return ""


class ResponsesUpstream(ScriptedUpstream):
    """:class:`ScriptedUpstream` plus ``POST /v1/responses`` (see the module docstring).

    ``script`` is called with ``"responses"`` for that route, and with ``"anthropic"`` or
    ``"openai"`` for the others, as before.
    """

    def __init__(self, script: AnyScript, *, window: int | None = None, model: str = "scripted"):
        super().__init__(script, window=window, model=model)  # type: ignore[arg-type]
        self.any_script = script
        self._response_ids = itertools.count(1)
        self.app.router.routes.insert(0, Route("/v1/responses", self._responses, methods=["POST"]))

    async def _responses(self, request: Request) -> Response:
        raw = await request.body()
        try:
            parsed = json.loads(raw) if raw else {}
        except ValueError:
            parsed = {"_unparsed": raw.decode("utf-8", "replace")}
        body: dict[str, Any] = parsed if isinstance(parsed, dict) else {"_body": parsed}
        counter = default_counter("openai")
        tokens = count_input_tokens("openai", as_chat_body(body), counter)
        self.requests.append(
            RecordedRequest(
                method=request.method,
                path=request.url.path,
                query=request.url.query,
                headers=dict(request.headers),
                body=body,
                protocol="openai",
                input_tokens=tokens,
            )
        )
        response_id = f"resp_{next(self._response_ids):04d}{uuid.uuid4().hex[:20]}"
        model = str(body.get("model") or self.model)
        stream = bool(body.get("stream"))
        if self.window is not None and tokens > self.window:
            error = responses_overflow(tokens, self.window)
            if not stream:
                return JSONResponse({"error": error}, status_code=400)
            failed = _response(response_id, model, "failed", [], None) | {"error": error}
            events = [
                ("response.created", _event("response.created", response=_in_progress(failed))),
                ("response.failed", _event("response.failed", response=failed)),
            ]
            return _sse(_numbered(events), {}, done=False)
        answer = self.any_script("responses", body)
        if isinstance(answer, UpstreamError):
            return JSONResponse(answer.body, status_code=answer.status)
        output_tokens = max(1, counter.count_text(answer.text + (answer.thinking or "")))
        output_tokens += sum(
            counter.count_text(c.name + json.dumps(c.arguments)) for c in answer.tool_calls
        )
        usage = {
            "input_tokens": tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": tokens + output_tokens,
        }
        items = _output_items(answer)
        done = _response(response_id, model, "completed", items, usage)
        if not stream:
            return JSONResponse(done)
        return _sse(_numbered(_stream_events(done, items)), {}, done=False)


def _response(
    response_id: str,
    model: str,
    status: str,
    output: list[dict[str, Any]],
    usage: dict[str, Any] | None,
) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "error": None,
        "incomplete_details": None,
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "usage": usage,
    }


def _in_progress(response: dict[str, Any]) -> dict[str, Any]:
    return response | {"status": "in_progress", "output": [], "usage": None, "error": None}


def _output_items(answer: Reply) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if answer.thinking:
        items.append(
            {
                "type": "reasoning",
                "id": f"rs_{uuid.uuid4().hex[:24]}",
                "summary": [{"type": "summary_text", "text": answer.thinking}],
                "encrypted_content": ENCRYPTED,
            }
        )
    if answer.text:
        items.append(
            {
                "type": "message",
                "id": f"msg_{uuid.uuid4().hex[:24]}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": answer.text, "annotations": []}],
            }
        )
    items += [
        {
            "type": "function_call",
            "id": f"fc_{uuid.uuid4().hex[:24]}",
            "call_id": call.id,
            "name": call.name,
            "arguments": json.dumps(call.arguments),
            "status": "completed",
        }
        for call in answer.tool_calls
    ]
    return items


def _event(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, **fields}


def _stream_events(
    done: dict[str, Any], items: list[dict[str, Any]]
) -> list[tuple[str, dict[str, Any]]]:
    """The events of one streamed response, in the order the API sends them."""
    events = [("response.created", _event("response.created", response=_in_progress(done)))]
    events.append(
        ("response.in_progress", _event("response.in_progress", response=_in_progress(done)))
    )
    for index, item in enumerate(items):
        opening = dict(item)
        if item["type"] == "message":
            opening["content"] = []
            opening["status"] = "in_progress"
        elif item["type"] == "function_call":
            opening["arguments"] = ""
            opening["status"] = "in_progress"
        elif item["type"] == "reasoning":
            opening["summary"] = []
        added = _event("response.output_item.added", output_index=index, item=opening)
        events.append(("response.output_item.added", added))
        if item["type"] == "message":
            text = item["content"][0]["text"]
            part = {"type": "output_text", "text": "", "annotations": []}
            common = {"item_id": item["id"], "output_index": index, "content_index": 0}
            events.append(
                (
                    "response.content_part.added",
                    _event("response.content_part.added", **common, part=part),
                )
            )
            for piece in _pieces(text):
                events.append(
                    (
                        "response.output_text.delta",
                        _event("response.output_text.delta", **common, delta=piece),
                    )
                )
            events.append(
                (
                    "response.output_text.done",
                    _event("response.output_text.done", **common, text=text),
                )
            )
            events.append(
                (
                    "response.content_part.done",
                    _event("response.content_part.done", **common, part=part | {"text": text}),
                )
            )
        elif item["type"] == "function_call":
            common = {"item_id": item["id"], "output_index": index}
            for piece in _pieces(item["arguments"]):
                events.append(
                    (
                        "response.function_call_arguments.delta",
                        _event("response.function_call_arguments.delta", **common, delta=piece),
                    )
                )
            events.append(
                (
                    "response.function_call_arguments.done",
                    _event(
                        "response.function_call_arguments.done",
                        **common,
                        arguments=item["arguments"],
                    ),
                )
            )
        elif item["type"] == "reasoning":
            summary = item["summary"][0]["text"]
            common = {"item_id": item["id"], "output_index": index, "summary_index": 0}
            events.append(
                (
                    "response.reasoning_summary_part.added",
                    _event(
                        "response.reasoning_summary_part.added",
                        **common,
                        part={"type": "summary_text", "text": ""},
                    ),
                )
            )
            for piece in _pieces(summary):
                events.append(
                    (
                        "response.reasoning_summary_text.delta",
                        _event("response.reasoning_summary_text.delta", **common, delta=piece),
                    )
                )
        events.append(
            (
                "response.output_item.done",
                _event("response.output_item.done", output_index=index, item=item),
            )
        )
    events.append(("response.completed", _event("response.completed", response=done)))
    return events


def _numbered(
    events: list[tuple[str, dict[str, Any]]],
) -> list[tuple[str | None, dict[str, Any]]]:
    return [(name, data | {"sequence_number": n}) for n, (name, data) in enumerate(events)]


def _pieces(text: str, count: int = 3) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // count))
    return [text[i : i + size] for i in range(0, len(text), size)]
