"""A whole reply goes out before the proxy records it, when nothing can come between (issue 28:
the proxy's own time per request; see ``contextfold.proxy._exchange._RecordedAfter``).

One worker on a SQLite file, serving one request: the reply is sent, then recorded. Anything
else (``--workers N``, PostgreSQL, a stream, another request being served) records it first,
as before. Either way the upstream gets the same requests, the client the same replies, and the
store the same rows.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from contextfold.proxy import ProxyConfig, create_app
from contextfold.store import open_store
from tests.proxy.upstreams import Reply, ScriptedUpstream, ToolCall

TURNS = 4


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _one_more_call(protocol: str, body: dict[str, Any]) -> Reply:
    """Always one more tool call, its id from the history's length (the same for both runs)."""
    step = len(body.get("messages") or [])
    return Reply(
        text=f"Step {step}: next file.",
        tool_calls=[ToolCall(f"toolu_{step:04d}", "bash", {"command": f"cat f{step}.py"})],
    )


class StoredWhenSent:
    """The proxy app; at each response's last body message, how many assistant messages the
    store holds (read on a connection of its own, as another process would)."""

    def __init__(self, app: ASGIApp, store_path: Path) -> None:
        self.app = app
        self.store_path = store_path
        self.at_send: list[int] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != "/v1/messages":
            await self.app(scope, receive, send)
            return

        async def watched(message: Message) -> None:
            if message["type"] == "http.response.body" and not message.get("more_body"):
                self.at_send.append(self._replies())
            await send(message)

        await self.app(scope, receive, watched)

    def _replies(self) -> int:
        with open_store(self.store_path) as store:
            return sum(
                m.role == "assistant"
                for info in store.list_sessions()
                for _, m in store.iter_messages(info.id)
            )


@asynccontextmanager
async def _proxy(
    tmp_path: Path, upstream: ScriptedUpstream, *, one_process: bool
) -> AsyncIterator[tuple[httpx.AsyncClient, StoredWhenSent]]:
    store_path = tmp_path / "proxy.db"
    config = ProxyConfig(
        upstream="http://upstream", store=store_path, tenant_salt=b"s", window=16_000
    )
    transport = httpx.ASGITransport(upstream)
    app = create_app(config, upstream_transport=transport, one_process=one_process)
    watched = StoredWhenSent(app, store_path)
    async with app.router.lifespan_context(app):
        proxied = httpx.ASGITransport(watched)
        async with httpx.AsyncClient(transport=proxied, base_url="http://proxy") as client:
            yield client, watched


def _turn_after(reply: dict[str, Any]) -> list[dict[str, Any]]:
    """The reply, as the client keeps it, and a result for each of its calls."""
    results = [
        {"type": "tool_result", "tool_use_id": b["id"], "content": "ok"}
        for b in reply["content"]
        if b["type"] == "tool_use"
    ]
    return [
        {"role": "assistant", "content": reply["content"]},
        {"role": "user", "content": results},
    ]


async def _conversation(tmp_path: Path, *, one_process: bool) -> dict[str, Any]:
    """``TURNS`` turns of a tool-calling conversation; what each side saw of it."""
    upstream = ScriptedUpstream(_one_more_call)
    history: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing test."}]
    replies = []
    async with _proxy(tmp_path, upstream, one_process=one_process) as (client, watched):
        for _ in range(TURNS):
            body = {"model": "claude-x", "max_tokens": 200, "messages": history}
            response = await client.post("/v1/messages", json=body)
            assert response.status_code == 200, response.text
            reply = response.json()
            replies.append({k: v for k, v in reply.items() if k != "id"})
            history += _turn_after(reply)
    with open_store(tmp_path / "proxy.db") as store:
        [info] = store.list_sessions()
        rows = [m.to_dict() for _, m in store.iter_messages(info.id)]
        events = [
            (e.event_type, {k: v for k, v in e.data.items() if k != "at"})
            for e in store.iter_events(info.id)
        ]
        state = store.load_engine_state(info.id)
    assert state is not None
    state["estimator"]["anchor"].pop("ids_digest")  # of the message ids
    for row in rows:  # what differs between any two runs: ids and times
        row.pop("id")
        row.get("meta", {}).pop("created_at", None)
        row.get("meta", {}).get("provider", {}).pop("id", None)
    return {
        "upstream": [r.body for r in upstream.requests],
        "replies": replies,
        "rows": rows,
        "events": events,
        "state": state,
        "metadata": info.metadata,
        "stored_when_sent": watched.at_send,
    }


@pytest.mark.anyio
async def test_a_reply_alone_is_sent_before_it_is_recorded_and_nothing_else_changes(
    tmp_path: Path,
) -> None:
    later = await _conversation(tmp_path / "later", one_process=True)
    first = await _conversation(tmp_path / "first", one_process=False)
    # Alone on its SQLite file, each reply went out while the store held the ones before it;
    # a worker of several recorded each before sending it.
    assert later.pop("stored_when_sent") == list(range(TURNS))
    assert first.pop("stored_when_sent") == list(range(1, TURNS + 1))
    for key in later:
        assert later[key] == first[key], key
    assert later["metadata"]["proxy"]["requests"] == TURNS


class NextRequestWhileSending:
    """The proxy app; as the first reply's last bytes go out, the client's next request (the
    conversation's next turn) arrives: it is served while the first reply is unrecorded."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.next_turn: Any = None
        self.task: asyncio.Task[httpx.Response] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.next_turn is None:
            await self.app(scope, receive, send)
            return
        next_turn, self.next_turn = self.next_turn, None

        async def sending(message: Message) -> None:
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                self.task = asyncio.ensure_future(next_turn(json.loads(message["body"])))
                for _ in range(20):  # the next request gets as far as it can meanwhile
                    await asyncio.sleep(0)

        await self.app(scope, receive, sending)


@pytest.mark.anyio
async def test_a_request_arriving_before_a_reply_is_recorded_waits_for_it(
    tmp_path: Path,
) -> None:
    upstream = ScriptedUpstream(_one_more_call)
    config = ProxyConfig(
        upstream="http://upstream", store=tmp_path / "proxy.db", tenant_salt=b"s", window=16_000
    )
    app = create_app(config, upstream_transport=httpx.ASGITransport(upstream))
    racing = NextRequestWhileSending(app)
    history: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing test."}]
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(racing)
        async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as client:

            async def ask() -> httpx.Response:
                body = {"model": "claude-x", "max_tokens": 200, "messages": history}
                return await client.post("/v1/messages", json=body)

            async def answer(reply: dict[str, Any]) -> httpx.Response:
                history.extend(_turn_after(reply))
                return await ask()

            history.extend(_turn_after((await ask()).json()))
            racing.next_turn = answer
            second = await ask()  # its reply goes out, and the next turn comes at once
            assert second.status_code == 200
            assert racing.task is not None
            third = await racing.task
            assert third.status_code == 200
    # Each turn continued the one before it: no fork, every reply stored in order.
    with open_store(tmp_path / "proxy.db") as store:
        [info] = store.list_sessions()
        roles = [m.role for _, m in store.iter_messages(info.id)]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant"], roles
    assert info.metadata["proxy"]["requests"] == 3
