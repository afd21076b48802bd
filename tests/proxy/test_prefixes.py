"""One conversation, one chain of sessions (issue 26): a request that shares only part of a
stored history forks from the session holding its longest prefix, linked to it as its parent;
two conversations that merely begin alike are told apart where they diverge."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextfold.proxy import ProxyConfig, create_app
from contextfold.store import open_store
from tests.proxy.servers import serve
from tests.proxy.upstreams import Reply, ScriptedUpstream

SYSTEM = {"role": "system", "content": "Act as an expert software developer."}


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "proxy.db"


@pytest.fixture
def proxy(store_path: Path) -> Iterator[httpx.Client]:
    def script(protocol: str, body: dict[str, Any]) -> Reply:
        return Reply(text=f"Done with request {len(body['messages'])}.")

    with serve(ScriptedUpstream(script)) as upstream_url:
        config = ProxyConfig(
            upstream=upstream_url, window=100_000, store=store_path, tenant_salt=b"s"
        )
        with serve(create_app(config)) as url:
            yield httpx.Client(base_url=url, headers={"authorization": "Bearer k"}, timeout=60)


def _ask(client: httpx.Client, messages: list[dict[str, Any]]) -> dict[str, Any]:
    response = client.post("/v1/chat/completions", json={"model": "m", "messages": messages})
    assert response.status_code == 200, response.text
    reply: dict[str, Any] = response.json()["choices"][0]["message"]
    return {"role": "assistant", "content": reply["content"]}


def _sessions(store_path: Path) -> dict[str, str | None]:
    with open_store(store_path) as store:
        return {s.id: s.parent_id for s in store.list_sessions()}


def _files(turn: int) -> list[dict[str, Any]]:
    """aider's file message: the files as they stand this turn, after the history."""
    return [
        {"role": "user", "content": f"I added these files: stock.py\n```\nLIMIT = {turn}\n```"},
        {"role": "assistant", "content": "Ok, any changes I propose will be to those files."},
    ]


def test_a_file_message_moved_after_the_history_makes_one_chain(
    proxy: httpx.Client, store_path: Path
) -> None:
    # aider's standing exchange before the history: the prefix every request shares.
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "I switched to a new code base."},
        {"role": "assistant", "content": "Ok."},
    ]
    for turn in range(4):
        ask = {"role": "user", "content": f"Change the limit to {turn}."}
        reply = _ask(proxy, [SYSTEM, *history, *_files(turn), ask])
        history += [ask, reply]
    sessions = _sessions(store_path)
    roots = [sid for sid, parent in sessions.items() if parent not in sessions]
    assert len(roots) == 1, sessions  # every later session forked from the one before
    assert len(sessions) <= 4


def test_two_conversations_that_begin_alike_are_not_merged(
    proxy: httpx.Client, store_path: Path
) -> None:
    first = [SYSTEM, {"role": "user", "content": "Fix the failing test."}]
    one = [*first, _ask(proxy, first)]
    two = [*first, {"role": "assistant", "content": "A different first answer."}]
    one.append({"role": "user", "content": "Now run it."})
    two.append({"role": "user", "content": "Explain the bug instead."})
    one.append(_ask(proxy, one))
    _ask(proxy, two)
    sessions = _sessions(store_path)
    assert len(sessions) == 2
    [child] = [sid for sid, parent in sessions.items() if parent is not None]
    assert sessions[child] in sessions  # told apart where they diverge, linked as a fork
    one.append({"role": "user", "content": "And commit."})
    _ask(proxy, one)
    assert len(_sessions(store_path)) == 2  # the first goes on in its own session


def test_the_built_in_store_offers_the_prefix_index(store_path: Path) -> None:
    """The proxy recognises histories on any store that offers a PrefixIndex."""
    from contextfold.store import PrefixIndex

    with open_store(store_path) as store:
        assert isinstance(store, PrefixIndex)
