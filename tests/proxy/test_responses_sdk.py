"""The official ``openai`` SDK's ``responses.create``, streamed and not, through the proxy (issue
27), in front of a Responses upstream and of a Chat-only one (bridged).

The SDK is the strictest reader of the Responses API the project can run offline: it validates
every event of a stream and every field of a response into its pydantic models. The proxy runs
in process behind ``httpx.ASGITransport`` (the SDK takes an ``httpx.AsyncClient``) and reaches
the scripted upstream through another. An agent loop: the model calls two tools at once, the
SDK user sends both results back, by ``previous_response_id`` or with the whole input, and the
model answers.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextfold.proxy import ProxyConfig, create_app
from tests.clients.responses_upstream import ResponsesUpstream, serving_only
from tests.proxy.test_bridging import TwoCalls

openai = pytest.importorskip("openai")

TOOLS: list[Any] = [
    {
        "type": "function",
        "name": "ls",
        "description": "List a directory.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        "strict": False,
    }
]
UPSTREAMS = {"responses": ("responses",), "chat": ("openai",)}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def sdk_through_proxy(upstream: ResponsesUpstream, tmp_path: Path) -> AsyncIterator[Any]:
    config = ProxyConfig(
        upstream="http://upstream/v1", window=16_000, store=tmp_path / "p.db", tenant_salt=b"s"
    )
    app = create_app(config, upstream_transport=httpx.ASGITransport(upstream))
    async with app.router.lifespan_context(app):
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app))
        async with openai.AsyncOpenAI(
            base_url="http://proxy/v1", api_key="sk-test", max_retries=0, http_client=http
        ) as client:
            yield client


async def _create(client: Any, stream: bool, **request: Any) -> Any:
    """``responses.create``; streamed, the response of its ``response.completed`` event, after
    checking the events the SDK parsed."""
    if not stream:
        return await client.responses.create(model="gpt-x", tools=TOOLS, **request)
    events = [
        e
        async for e in await client.responses.create(
            model="gpt-x", tools=TOOLS, stream=True, **request
        )
    ]
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed", kinds
    assert "response.output_item.done" in kinds
    done = [e.item for e in events if e.type == "response.output_item.done"]
    final = events[-1].response
    assert [i.type for i in final.output] == [i.type for i in done]
    return final


def _results(response: Any) -> list[dict[str, Any]]:
    calls = [item for item in response.output if item.type == "function_call"]
    return [
        {"type": "function_call_output", "call_id": c.call_id, "output": f"files of {c.call_id}"}
        for c in calls
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("upstream_kind", list(UPSTREAMS))
async def test_responses_create_through_the_proxy(
    upstream_kind: str, stream: bool, tmp_path: Path
) -> None:
    script = TwoCalls()
    upstream = serving_only(ResponsesUpstream(script), *UPSTREAMS[upstream_kind])  # type: ignore[arg-type]
    async with sdk_through_proxy(upstream, tmp_path) as client:
        first = await _create(client, stream, input="List . and src.")
        calls = [item for item in first.output if item.type == "function_call"]
        assert [(c.call_id, c.name, json.loads(c.arguments)) for c in calls] == [
            ("call_a", "ls", {"path": "."}),
            ("call_b", "ls", {"path": "src"}),
        ]
        assert first.output_text == "Listing both."
        assert first.usage is not None and first.usage.input_tokens > 0
        assert first.usage.output_tokens > 0

        # The SDK user's usual loop: only the new items, after the proxy's response id.
        second = await _create(client, stream, input=_results(first), previous_response_id=first.id)
        assert second.output_text == "Seen 2 results."
        assert second.id != first.id

    protocol, results = script.seen[-1]
    assert protocol == ("responses" if upstream_kind == "responses" else "openai")
    assert results == {"call_a": "files of call_a", "call_b": "files of call_b"}


@pytest.mark.anyio
async def test_a_bad_request_is_an_sdk_error_in_the_responses_shape(tmp_path: Path) -> None:
    upstream = ResponsesUpstream(TwoCalls())
    async with sdk_through_proxy(upstream, tmp_path) as client:
        with pytest.raises(openai.BadRequestError) as refused:
            await client.responses.create(
                model="gpt-x",
                input=[{"type": "function_call_output", "call_id": 7, "output": "x"}],
            )
    error = refused.value.body
    assert error["type"] == "invalid_request_error" and "call_id" in str(error["param"])
    assert upstream.requests == []
