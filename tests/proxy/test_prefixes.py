"""One conversation, one chain of sessions (issue 26): a request that shares only part of a
stored history forks from the session holding its longest prefix, linked to it as its parent;
two conversations that merely begin alike are told apart where they diverge."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextfold.hosts.prefixes import (
    FIRST_LOOKUP,
    MemoryPrefixIndex,
    Prefix,
    RecentHeads,
    ResentHistory,
    chain_heads,
)
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


class _CountingIndex(MemoryPrefixIndex):
    """A memory index that counts the heads each lookup asks about."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[int] = []

    def find_proxy_heads(self, tenant: str, heads: Sequence[str]) -> dict[str, tuple[str, int]]:
        self.asked.append(len(heads))
        return super().find_proxy_heads(tenant, heads)


def _digests(names: Sequence[str]) -> list[bytes]:
    return [hashlib.sha256(name.encode()).digest() for name in names]


@pytest.mark.parametrize("seed", range(40))
def test_the_longest_prefix_is_the_first_of_all_prefixes(seed: int) -> None:
    """``longest`` reads the index from the longest prefixes down, a few at a time; it finds
    the same prefix as reading them all, and a later fork's records skip the same heads."""
    rng = random.Random(seed)
    index = _CountingIndex()
    stored = [f"m{i}" for i in range(rng.randrange(1, 300))]
    recorder = ResentHistory(index, "t", _digests(stored))
    for count in sorted(rng.sample(range(1, len(stored) + 1), rng.randrange(0, 6))):
        recorder.record(f"s{count}", count, count)
    cut = rng.randrange(0, len(stored) + 1)
    history = stored[:cut] + [f"new{i}" for i in range(rng.randrange(0, 200))]
    lazily, wholly = (ResentHistory(index, "t", _digests(history)) for _ in range(2))
    all_prefixes = wholly.prefixes()
    assert lazily.longest() == (all_prefixes[0] if all_prefixes else None)
    for count in range(1, len(history) + 1):  # a fork records every prefix not held elsewhere
        assert (lazily.heads[count - 1] in wholly.known) == _skips(lazily, count)


def _skips(history: ResentHistory, count: int) -> bool:
    """Whether ``record(..., only_new=True)`` leaves prefix ``count`` to the session holding it."""
    before = dict(history.index._heads)  # type: ignore[attr-defined]
    history.record("fork", count, 0, only_new=True)
    after = history.index._heads  # type: ignore[attr-defined]
    skipped = after == before
    after.clear()
    after.update(before)
    return skipped


def test_a_steady_history_looks_up_a_few_heads() -> None:
    """A history that continues its previous call by two messages asks about its last few
    prefixes only, however long it is."""
    index = _CountingIndex()
    stored = [f"m{i}" for i in range(1_000)]
    ResentHistory(index, "t", _digests(stored)).record("s", len(stored), 1)
    history = ResentHistory(index, "t", _digests([*stored, "reply", "result"]))
    assert history.longest() == Prefix(len(stored), "s", 1)
    assert index.asked == [FIRST_LOOKUP]


@pytest.mark.parametrize("seed", range(30))
def test_recent_heads_are_the_chain_of_each_history(seed: int) -> None:
    """Histories that grow, get rewritten, shrink or belong to another conversation: the heads
    are always those of the whole chain, however much came from the last history."""
    rng = random.Random(seed)
    recent = RecentHeads(size=2)
    histories = {tenant: [f"{tenant} first"] for tenant in ("a", "b", "c")}
    for _ in range(40):
        tenant = rng.choice("abc")
        history = histories[tenant]
        roll = rng.random()
        if roll < 0.6:
            history += [f"m{rng.randrange(1_000)}" for _ in range(rng.randrange(1, 4))]
        elif roll < 0.8 and len(history) > 1:
            del history[rng.randrange(1, len(history)) :]
        elif len(history) > 1:
            history[rng.randrange(1, len(history))] = "rewritten"
        digests = _digests(history)
        assert recent.chain(tenant, digests) == chain_heads(digests)
