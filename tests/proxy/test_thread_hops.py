"""How many times one proxy request hops to a worker thread (issue 25: "thread hops per proxy
round", 8 before the rounds became one generator).

The engine's work is synchronous (the store, token counts, compaction); the proxy's loop is
async. Each ``anyio.to_thread.run_sync`` (Starlette's ``run_in_threadpool`` is one too) costs a
hand-off to the thread pool and back. The rounds generator (``Exchange._flow``) makes the work
before the first upstream call one hop, and the work after each reply (record it, prepare the
next body or finish) one more: two hops for a request answered in one round, whatever the
protocols, streamed or not, new conversation or continued. The request's claim on its session
is given back inside the last of them, as the reply is recorded; only a request that ended
otherwise (refused, failed, cancelled) takes one more hop, after its response, to give it back
(a query on PostgreSQL). Counted, not timed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest

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
    upstream = OnlyOne(ResponsesUpstream(TwoCalls()), PATHS[upstream_protocol])
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
            answer = await client.post(path, json=_request(client_protocol, history, stream))
            _read(client_protocol, answer, stream)
    assert hops == ["next", "_step"], hops
    assert len(hops) < HOPS_PER_ROUND_BEFORE


@pytest.mark.anyio
async def test_a_new_conversation_is_two_thread_hops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    upstream = ResponsesUpstream(TwoCalls())
    async with in_process(upstream, tmp_path) as client:
        with counted_hops(monkeypatch) as hops:
            body = _request("anthropic", [{"role": "user", "content": "hi"}], True)
            answer = await client.post("/v1/messages", json=body)
            assert answer.status_code == 200
            await answer.aread()
    assert hops == ["next", "_step"], hops
