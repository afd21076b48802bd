"""Codex's compaction requests through the proxy (issue 27, item 3), and reasoning
``encrypted_content``: passed through to OpenAI itself, answered by the proxy's own sealed
compaction in front of anyone else, and carried (or dropped, said in the log) by destination.

In process: the proxy behind ``httpx.ASGITransport``, the scripted upstream behind another. An
upstream URL on ``api.openai.com`` makes the proxy treat it as OpenAI itself (the transport
still reaches the scripted server).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextfold.proxy import ProxyConfig, create_app
from contextfold.proxy._codex_compaction import SEALED_PREFIX
from contextfold.wire.sse import SSEDecoder
from tests.clients.responses_upstream import ResponsesUpstream, serving_only
from tests.proxy.upstreams import Reply, UpstreamError

TASK = "Fix the reorder level in inventory/stock.py"
EXEC = {
    "type": "function",
    "name": "exec_command",
    "description": "Run a command.",
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Echo:
    """Answers every request with a short text, remembering what it was asked."""

    def __init__(self) -> None:
        self.bodies: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, protocol: str, body: dict[str, Any]) -> Reply | UpstreamError:
        self.bodies.append((protocol, body))
        return Reply(text="ok")


@asynccontextmanager
async def proxy(
    upstream: Any, tmp_path: Path, url: str = "http://upstream/v1", salt: bytes = b"s"
) -> AsyncIterator[httpx.AsyncClient]:
    config = ProxyConfig(upstream=url, window=16_000, store=tmp_path / "p.db", tenant_salt=salt)
    app = create_app(config, upstream_transport=httpx.ASGITransport(upstream))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app)
        headers = {"authorization": "Bearer sk-codex"}
        async with httpx.AsyncClient(
            transport=transport, base_url="http://proxy", headers=headers
        ) as client:
            yield client


def history() -> list[dict[str, Any]]:
    """Codex's shape: developer prompt, the task, a call and its result."""
    return [
        {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": "Be Codex."}],
        },
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": TASK}]},
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "exec_command",
            "arguments": json.dumps({"cmd": "cat inventory/stock.py"}),
        },
        {
            "type": "function_call_output",
            "call_id": "call_1",
            "output": "def reorder_level(on_hand, threshold):\n    return 0  # TODO(cf-1)\n",
        },
    ]


def body(items: list[dict[str, Any]], stream: bool = True) -> dict[str, Any]:
    return {
        "model": "gpt-5-codex",
        "input": items,
        "tools": [EXEC],
        "stream": stream,
        "store": False,
        "include": ["reasoning.encrypted_content"],
    }


def events(response: httpx.Response) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return [json.loads(data) for _, data in SSEDecoder().feed(response.content + b"\n\n")]


def texts(items: list[dict[str, Any]]) -> str:
    """Everything readable in a Responses input, or a Chat body's messages."""
    return json.dumps(items)


@pytest.mark.anyio
@pytest.mark.parametrize("serves", ["responses", "openai"], ids=["responses", "chat-only"])
async def test_a_compaction_trigger_is_answered_with_the_proxys_own_sealed_item(
    serves: str, tmp_path: Path
) -> None:
    script = Echo()
    upstream = serving_only(ResponsesUpstream(script), serves)  # type: ignore[arg-type]
    async with proxy(upstream, tmp_path) as client:
        answer = await client.post(
            "/v1/responses", json=body([*history(), {"type": "compaction_trigger"}])
        )
        seen = events(answer)
        assert seen[0]["type"] == "response.created"
        assert seen[-1]["type"] == "response.completed"
        done = [e["item"] for e in seen if e["type"] == "response.output_item.done"]
        assert [i["type"] for i in done] == ["compaction"]
        sealed = done[0]["encrypted_content"]
        assert sealed.startswith(SEALED_PREFIX)
        assert "reorder" not in sealed and TASK not in sealed  # opaque to the client
        assert script.bodies == []  # nobody upstream was asked

        # Codex's next request: its history replaced by the item, then a new message.
        follow = [
            history()[0],
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": TASK}]},
            done[0],
            {"type": "message", "role": "user", "content": "Go on."},
        ]
        answer = await client.post("/v1/responses", json=body(follow))
        assert events(answer)[-1]["type"] == "response.completed"
    _, sent = script.bodies[-1]
    readable = texts(sent.get("input") or sent.get("messages"))
    assert "Summary of the earlier conversation" in readable
    assert "cat inventory/stock.py" in readable  # the summary's command, read by the model
    assert SEALED_PREFIX not in readable and '"compaction"' not in readable


@pytest.mark.anyio
async def test_responses_compact_keeps_the_users_messages_and_adds_one_item(
    tmp_path: Path,
) -> None:
    script = Echo()
    async with proxy(ResponsesUpstream(script), tmp_path) as client:
        answer = await client.post(
            "/v1/responses/compact",
            json={"model": "gpt-5-codex", "input": history(), "instructions": "Be Codex."},
        )
        assert answer.status_code == 200, answer.text
        output = answer.json()["output"]
        assert [(i["type"], i.get("role")) for i in output] == [
            ("message", "user"),
            ("compaction", None),
        ]
        assert output[0] == history()[1]
        assert output[1]["encrypted_content"].startswith(SEALED_PREFIX)
        # Not streamed either way: a trigger on a plain request gets the response object.
        plain = await client.post(
            "/v1/responses",
            json=body([*history(), {"type": "compaction_trigger"}], stream=False),
        )
        assert plain.status_code == 200
        assert [i["type"] for i in plain.json()["output"]] == ["compaction"]
    assert script.bodies == []


@pytest.mark.anyio
async def test_another_proxys_item_is_refused_naming_the_input(tmp_path: Path) -> None:
    async with proxy(ResponsesUpstream(Echo()), tmp_path, salt=b"one") as client:
        made = await client.post("/v1/responses/compact", json={"model": "m", "input": history()})
        item = made.json()["output"][-1]
    async with proxy(ResponsesUpstream(Echo()), tmp_path / "other", salt=b"two") as client:
        answer = await client.post("/v1/responses", json=body([item, history()[1]], stream=False))
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["param"] == "input" and "another contextfold proxy" in error["message"]


@pytest.mark.anyio
async def test_in_front_of_openai_compaction_requests_pass_through(tmp_path: Path) -> None:
    upstream = ResponsesUpstream(Echo())
    async with proxy(upstream, tmp_path, url="https://api.openai.com/v1") as client:
        trigger = body([*history(), {"type": "compaction_trigger"}])
        answer = await client.post("/v1/responses", json=trigger)
        compact = {"model": "gpt-5-codex", "input": history()}
        await client.post("/v1/responses/compact", json=compact)
    assert answer.status_code == 200
    sent = [(r.path, r.body) for r in upstream.requests]
    assert sent == [("/v1/responses", trigger), ("/v1/responses/compact", compact)]
    assert sent[0][1]["input"][-1] == {"type": "compaction_trigger"}


REASONING = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "Read the file first."}],
    "encrypted_content": "gAAAAB-openai-sealed-reasoning",
}


@pytest.mark.anyio
@pytest.mark.parametrize("serves", ["responses", "openai"], ids=["responses", "chat-only"])
async def test_encrypted_reasoning_goes_untouched_or_is_dropped_with_a_log_line(
    serves: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    script = Echo()
    upstream = serving_only(ResponsesUpstream(script), serves)  # type: ignore[arg-type]
    items = history()
    items.insert(2, REASONING)
    with caplog.at_level(logging.INFO, logger="contextfold.proxy"):
        async with proxy(upstream, tmp_path) as client:
            answer = await client.post("/v1/responses", json=body(items, stream=False))
    assert answer.status_code == 200, answer.text
    _, sent = script.bodies[-1]
    if serves == "responses":
        assert REASONING in sent["input"]
        assert "encrypted" not in caplog.text
    else:
        assert "gAAAAB" not in json.dumps(sent)
        assert "encrypted reasoning and compaction items dropped" in caplog.text
