"""Every client protocol in front of every upstream protocol, driven in process.

The proxy runs behind ``httpx.ASGITransport`` and reaches a scripted upstream through another
(``create_app(upstream_transport=...)``): no socket, no server thread. The upstream serves one
protocol only (the others answer 404, as a Chat-only server does), and the proxy finds it.
A two-turn agent loop: the model calls two tools in parallel, then answers once it has both
results. Each pair is checked for what the client gets (its calls with their ids and
arguments, the final text, usage) and what the upstream gets (both results, by call id).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from contextfold.chat import ChatResponse
from contextfold.proxy import ProxyConfig, create_app
from contextfold.wire.anthropic import parse_anthropic_response
from contextfold.wire.anthropic_stream import AnthropicStreamDecoder
from contextfold.wire.chat_completions import parse_openai_response
from contextfold.wire.chat_completions_stream import ChatStreamDecoder
from contextfold.wire.responses_stream import ResponsesStreamDecoder, read_response
from contextfold.wire.sse import SSEDecoder
from tests.clients.responses_upstream import ResponsesUpstream
from tests.proxy.upstreams import Reply, ToolCall, UpstreamError

PROTOCOLS = ["anthropic", "openai", "responses"]
PATHS = {
    "anthropic": "/v1/messages",
    "openai": "/v1/chat/completions",
    "responses": "/v1/responses",
}
LS = {
    "name": "ls",
    "description": "List a directory.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _results(protocol: str, body: dict[str, Any]) -> dict[str, str]:
    """The tool results a request carries, by call id."""
    out: dict[str, str] = {}
    if protocol == "responses":
        for item in body.get("input") or []:
            if item.get("type") == "function_call_output":
                out[item["call_id"]] = str(item["output"])
        return out
    for message in body.get("messages") or []:
        if message.get("role") == "tool":
            out[message["tool_call_id"]] = str(message["content"])
        for block in message.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                out[block["tool_use_id"]] = str(block["content"])
    return out


class TwoCalls:
    """Calls ``ls`` twice at once; answers when both results are in."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, str]]] = []

    def __call__(self, protocol: str, body: dict[str, Any]) -> Reply | UpstreamError:
        results = _results(protocol, body)
        self.seen.append((protocol, results))
        if not results:
            return Reply(
                text="Listing both.",
                tool_calls=[
                    ToolCall("call_a", "ls", {"path": "."}),
                    ToolCall("call_b", "ls", {"path": "src"}),
                ],
            )
        return Reply(text=f"Seen {len(results)} results.")


class OnlyOne:
    """The upstream serving one protocol's path; any other answers 404, as a server without
    that API does."""

    def __init__(self, upstream: ResponsesUpstream, path: str) -> None:
        self.upstream = upstream
        self.path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in (self.path, "/v1/models"):
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b"404 page not found"})
            return
        await self.upstream(scope, receive, send)


@asynccontextmanager
async def in_process(
    upstream: Any, tmp_path: Path, **settings: Any
) -> AsyncIterator[httpx.AsyncClient]:
    settings.setdefault("window", 16_000)
    config = ProxyConfig(
        upstream="http://upstream/v1", store=tmp_path / "proxy.db", tenant_salt=b"s", **settings
    )
    app = create_app(config, upstream_transport=httpx.ASGITransport(upstream))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app)
        async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as client:
            yield client


def _request(protocol: str, history: list[Any], stream: bool) -> dict[str, Any]:
    if protocol == "anthropic":
        tool = {"name": "ls", "description": LS["description"], "input_schema": LS["parameters"]}
        return {
            "model": "claude-x",
            "max_tokens": 500,
            "messages": history,
            "tools": [tool],
            "stream": stream,
        }
    if protocol == "openai":
        return {
            "model": "gpt-x",
            "messages": history,
            "tools": [{"type": "function", "function": LS}],
            "stream": stream,
            **({"stream_options": {"include_usage": True}} if stream else {}),
        }
    return {
        "model": "gpt-x",
        "input": history,
        "tools": [{"type": "function", **LS}],
        "stream": stream,
    }


def _read(protocol: str, response: httpx.Response, stream: bool) -> ChatResponse:
    assert response.status_code == 200, response.text
    if not stream:
        body = response.json()
        if protocol == "anthropic":
            message, usage, stop = parse_anthropic_response(body)
            return ChatResponse(message, usage, stop)
        if protocol == "openai":
            message, usage, stop = parse_openai_response(body)
            return ChatResponse(message, usage, stop)
        reply = read_response(body)
        return ChatResponse(reply.message, reply.usage, reply.stop_reason)
    decoder: Any = {
        "anthropic": AnthropicStreamDecoder,
        "openai": ChatStreamDecoder,
        "responses": ResponsesStreamDecoder,
    }[protocol]()
    for _, data in SSEDecoder().feed(response.content + b"\n\n"):
        decoder.feed_sse(data)
    assert decoder.done
    return decoder.response()  # type: ignore[no-any-return]


def _continue(protocol: str, history: list[Any], reply: ChatResponse) -> list[Any]:
    """The history with the reply and a result for each call."""
    calls = reply.message.tool_calls
    if protocol == "anthropic":
        content = [{"type": "text", "text": reply.message.text}] + [
            {"type": "tool_use", "id": c.call_id, "name": c.name, "input": json.loads(c.arguments)}
            for c in calls
        ]
        results = [
            {"type": "tool_result", "tool_use_id": c.call_id, "content": f"files of {c.call_id}"}
            for c in calls
        ]
        return [
            *history,
            {"role": "assistant", "content": content},
            {"role": "user", "content": results},
        ]
    if protocol == "openai":
        wire_calls = [
            {
                "id": c.call_id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for c in calls
        ]
        message = {"role": "assistant", "content": reply.message.text, "tool_calls": wire_calls}
        results = [
            {"role": "tool", "tool_call_id": c.call_id, "content": f"files of {c.call_id}"}
            for c in calls
        ]
        return [*history, message, *results]
    items: list[Any] = [
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": reply.message.text}],
        }
    ]
    items += [
        {"type": "function_call", "call_id": c.call_id, "name": c.name, "arguments": c.arguments}
        for c in calls
    ]
    items += [
        {"type": "function_call_output", "call_id": c.call_id, "output": f"files of {c.call_id}"}
        for c in calls
    ]
    return [*history, *items]


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("upstream_protocol", PROTOCOLS)
@pytest.mark.parametrize("client_protocol", PROTOCOLS)
async def test_every_protocol_pair_carries_parallel_calls_and_results(
    client_protocol: str, upstream_protocol: str, stream: bool, tmp_path: Path
) -> None:
    script = TwoCalls()
    upstream = OnlyOne(ResponsesUpstream(script), PATHS[upstream_protocol])
    first_turn: list[Any] = [{"role": "user", "content": "List the root and src."}]
    async with in_process(upstream, tmp_path) as client:
        path = PATHS[client_protocol]
        response = await client.post(path, json=_request(client_protocol, first_turn, stream))
        first = _read(client_protocol, response, stream)
        assert [(c.call_id, c.name, json.loads(c.arguments)) for c in first.message.tool_calls] == [
            ("call_a", "ls", {"path": "."}),
            ("call_b", "ls", {"path": "src"}),
        ]
        assert first.usage is not None and first.usage.input_tokens > 0
        history = _continue(client_protocol, first_turn, first)
        response = await client.post(path, json=_request(client_protocol, history, stream))
        second = _read(client_protocol, response, stream)
    assert second.message.text == "Seen 2 results."
    assert second.message.tool_calls == ()
    # The upstream spoke its own protocol and got both results, by the ids it gave.
    served = {p for p, _ in script.seen}
    assert served == {upstream_protocol}
    assert script.seen[-1][1] == {"call_a": "files of call_a", "call_b": "files of call_b"}


@pytest.mark.anyio
async def test_a_streamed_responses_overflow_is_response_failed_for_codex(tmp_path: Path) -> None:
    """An overflow the engine cannot fix reaches a streamed Responses client as HTTP 200 and
    response.failed with context_length_exceeded (what makes Codex compact), whatever the
    upstream speaks."""
    upstream = OnlyOne(ResponsesUpstream(TwoCalls()), PATHS["openai"])
    huge = "word " * 40_000
    async with in_process(upstream, tmp_path, window=4_096) as client:
        body = _request("responses", [{"role": "user", "content": huge}], True)
        response = await client.post("/v1/responses", json=body)
    assert response.status_code == 200
    events = [json.loads(d) for _, d in SSEDecoder().feed(response.content + b"\n\n")]
    assert events[0]["type"] == "response.created"
    assert events[-1]["type"] == "response.failed"
    assert events[-1]["response"]["error"]["code"] == "context_length_exceeded"


@pytest.mark.anyio
async def test_unknown_paths_and_websockets_are_refused_at_once_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    upstream = ResponsesUpstream(TwoCalls())
    async with in_process(upstream, tmp_path) as client:
        unknown = await client.post("/v1/completions", json={})
        websocket = await client.get(
            "/v1/responses", headers={"upgrade": "websocket", "connection": "upgrade"}
        )
    assert unknown.status_code == 404
    assert "no endpoint POST /v1/completions" in unknown.json()["error"]["message"]
    assert websocket.status_code == 404
    logged = caplog.text
    assert "no such endpoint: POST /v1/completions" in logged
    assert "WebSocket upgrade" in logged and "supports_websockets = false" in logged


@pytest.mark.anyio
async def test_the_upstream_model_is_the_one_named_and_models_answer_in_the_clients_protocol(
    tmp_path: Path,
) -> None:
    script = TwoCalls()
    upstream = OnlyOne(ResponsesUpstream(script, model="qwen3-coder"), PATHS["openai"])
    async with in_process(upstream, tmp_path, model="qwen3-coder") as client:
        body = _request("anthropic", [{"role": "user", "content": "hi"}], False)
        body["model"] = "claude-opus-4-8"
        response = await client.post("/v1/messages", json=body)
        models = await client.get("/v1/models", headers={"anthropic-version": "2023-06-01"})
        count = await client.post(
            "/v1/messages/count_tokens",
            json={
                "model": "claude-opus-4-8",
                "messages": [{"role": "user", "content": "hi there"}],
            },
        )
    assert response.status_code == 200, response.text
    assert response.json()["model"] == "claude-opus-4-8"
    listed = models.json()
    assert listed["data"][0] == {
        "type": "model",
        "id": "qwen3-coder",
        "display_name": "qwen3-coder",
        "created_at": "1970-01-01T00:00:00Z",
    }
    assert count.status_code == 200 and count.json()["input_tokens"] > 0
