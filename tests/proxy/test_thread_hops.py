"""How many times one proxy request hops to a worker thread (issue 25: "thread hops per proxy
round", 8 before the rounds became one generator; issue 28: none while it is the only request).

The engine's work is synchronous (the store, token counts, compaction); the proxy's loop is
async. Each ``anyio.to_thread.run_sync`` (Starlette's ``run_in_threadpool`` is one too) costs a
hand-off to the thread pool and back. The rounds generator (``Exchange._flow``) makes the work
before the first upstream call one step, and the work after each reply (record it, prepare the
next body or finish) one more: two steps for a request answered in one round, whatever the
protocols, streamed or not, new conversation or continued. The request's claim on its session
is given back inside the last of them, as the reply is recorded; only a request that ended
otherwise (refused, failed, cancelled) takes one more step, after its response, to give it back
(a query on PostgreSQL). Each step is a hop while another request is being served (the loop
serves it meanwhile), and runs on the loop itself while the request is the only one (on a
SQLite store no other worker writes to: the hops were some 0.3-0.4 ms of its time). Counted,
not timed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio.to_thread
import httpx
import pytest
from starlette.types import ASGIApp, Receive, Scope, Send

from contextfold.proxy import ProxyConfig, create_app
from tests.clients.responses_upstream import ResponsesUpstream
from tests.proxy.test_bridging import (
    PATHS,
    PROTOCOLS,
    OnlyOne,
    TwoCalls,
    _continue,
    _read,
    _request,
    in_process,
)

HOPS_PER_ROUND_BEFORE = 8
"""Measured by issue 25 before the rewrite (one hop per engine step of a round)."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@contextmanager
def counted_hops(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every worker-thread hop made while inside, by the name of what ran."""
    hops: list[str] = []
    real = anyio.to_thread.run_sync

    async def counting(func: Any, *args: Any, **kwargs: Any) -> Any:
        hops.append(getattr(func, "__name__", repr(func)))
        return await real(func, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(anyio.to_thread, "run_sync", counting)
        yield hops


class HeldOnce:
    """The upstream, holding the first request that reaches it after :meth:`hold` until
    :meth:`release`: meanwhile the proxy is serving that request and any other."""

    def __init__(self, upstream: ASGIApp) -> None:
        self.upstream = upstream
        self.holding = False
        self.held = asyncio.Event()
        self.released = asyncio.Event()

    def hold(self) -> None:
        self.holding = True

    def release(self) -> None:
        self.released.set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.holding and scope["path"] != "/v1/models":
            self.holding = False
            self.held.set()
            await self.released.wait()
        await self.upstream(scope, receive, send)


async def _while_another_is_served(
    client: httpx.AsyncClient, upstream: HeldOnce, request: Any
) -> httpx.Response:
    """``request()``'s answer, sent while another request (another conversation's) waits on
    the upstream."""
    upstream.hold()
    body = _request("anthropic", [{"role": "user", "content": "Another conversation."}], False)
    other = asyncio.ensure_future(client.post("/v1/messages", json=body))
    await upstream.held.wait()
    try:
        answer: httpx.Response = await request()
    finally:
        upstream.release()
        assert (await other).status_code == 200
    return answer


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("upstream_protocol", PROTOCOLS)
@pytest.mark.parametrize("client_protocol", PROTOCOLS)
async def test_a_round_is_two_thread_hops_and_the_claims_released_within(
    client_protocol: str,
    upstream_protocol: str,
    stream: bool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    upstream = HeldOnce(OnlyOne(ResponsesUpstream(TwoCalls()), PATHS[upstream_protocol]))
    first: list[Any] = [{"role": "user", "content": "List . and src."}]
    async with in_process(upstream, tmp_path) as client:
        path = PATHS[client_protocol]
        # The first request also finds the upstream's protocol (a 404 for each other path).
        reply = _read(
            client_protocol,
            await client.post(path, json=_request(client_protocol, first, stream)),
            stream,
        )
        history = _continue(client_protocol, first, reply)
        with counted_hops(monkeypatch) as hops:
            answer = await _while_another_is_served(
                client,
                upstream,
                lambda: client.post(path, json=_request(client_protocol, history, stream)),
            )
            _read(client_protocol, answer, stream)
    # The other request's steps ran on the loop: it was alone when it began and when it ended.
    assert hops == ["next", "_step"], hops
    assert len(hops) < HOPS_PER_ROUND_BEFORE


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_a_new_conversation_is_two_thread_hops(
    stream: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    upstream = HeldOnce(ResponsesUpstream(TwoCalls()))
    async with in_process(upstream, tmp_path) as client:

        async def hi() -> httpx.Response:
            body = _request("anthropic", [{"role": "user", "content": "hi"}], stream)
            return await client.post("/v1/messages", json=body)

        with counted_hops(monkeypatch) as hops:
            answer = await _while_another_is_served(client, upstream, hi)
    assert answer.status_code == 200
    assert hops == ["next", "_step"], hops


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_the_only_request_is_served_without_a_hop(
    stream: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    upstream = ResponsesUpstream(TwoCalls())
    first: list[Any] = [{"role": "user", "content": "List . and src."}]
    async with in_process(upstream, tmp_path) as client:
        with counted_hops(monkeypatch) as hops:
            reply = _read(
                "anthropic",
                await client.post("/v1/messages", json=_request("anthropic", first, stream)),
                stream,
            )
            history = _continue("anthropic", first, reply)
            answer = await client.post("/v1/messages", json=_request("anthropic", history, stream))
            assert _read("anthropic", answer, stream).message.text == "Seen 2 results."
    assert hops == [], hops


@pytest.mark.anyio
async def test_a_worker_of_several_hops_even_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each worker of ``--workers N`` shares its SQLite file with the others, whose write lock
    SQLite waits for by sleeping: that wait is kept off the event loop."""
    config = ProxyConfig(
        upstream="http://upstream/v1", store=tmp_path / "proxy.db", tenant_salt=b"s", window=16_000
    )
    upstream = httpx.ASGITransport(ResponsesUpstream(TwoCalls()))
    app = create_app(config, upstream_transport=upstream, one_process=False)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app)
        async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as client:
            with counted_hops(monkeypatch) as hops:
                body = _request("anthropic", [{"role": "user", "content": "hi"}], False)
                answer = await client.post("/v1/messages", json=body)
    assert answer.status_code == 200
    assert hops == ["next", "_step"], hops
