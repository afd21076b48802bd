"""A reply cut short at a limit the proxy set (issue 26): asked again with more room, never
handed over as if the model had stopped."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextfold.proxy import ProxyConfig, create_app
from contextfold.proxy._conversation import Conversation
from tests.proxy.servers import serve, streamed_text
from tests.proxy.upstreams import Reply, ScriptedUpstream

WINDOW = 24_000
TURN_WORDS = 500


@pytest.fixture
def upstream() -> ScriptedUpstream:
    asked: list[int] = []

    def script(protocol: str, body: dict[str, Any]) -> Reply:
        # The first try stops at the max_tokens the proxy set; given more, the reply is whole.
        asked.append(body["max_tokens"])
        if len(asked) == 1:
            return Reply(text="The answer starts but", cut_short=True)
        return Reply(text="The whole answer.")

    return ScriptedUpstream(script, window=WINDOW)


@pytest.fixture
def proxy(upstream: ScriptedUpstream, tmp_path: Path) -> Iterator[httpx.Client]:
    with serve(upstream) as upstream_url:
        config = ProxyConfig(
            upstream=upstream_url, window=WINDOW, store=tmp_path / "p.db", tenant_salt=b"s"
        )
        with serve(create_app(config)) as url:
            yield httpx.Client(base_url=url, headers={"x-api-key": "k"}, timeout=60)


def _history() -> list[dict[str, Any]]:
    """Six long turns of talk (about 70 % of the window: nothing to mask, old enough to
    summarize), then a short question."""
    messages: list[dict[str, Any]] = []
    for n in range(6):
        words = " ".join(f"point{n}.{i} about the cache" for i in range(TURN_WORDS // 4))
        messages += [
            {"role": "user", "content": f"Part {n} of the review: {words}"},
            {"role": "assistant", "content": f"Noted part {n}: {words}"},
        ]
    messages.append({"role": "user", "content": "Now sum it all up."})
    return messages


def _post(proxy: httpx.Client, stream: bool) -> tuple[str, str | None]:
    body = {
        "model": "claude-custom-1",
        "max_tokens": 64_000,
        "stream": stream,
        "messages": _history(),
    }
    response = proxy.post("/v1/messages", json=body)
    assert response.status_code == 200, response.text
    if not stream:
        reply = response.json()
        return "".join(b.get("text", "") for b in reply["content"]), reply["stop_reason"]
    stops = [
        json.loads(line[6:])["delta"].get("stop_reason")
        for line in response.text.splitlines()
        if line.startswith("data: ") and '"message_delta"' in line
    ]
    return streamed_text(response.text), stops[-1] if stops else None


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_a_reply_cut_at_the_proxys_limit_is_asked_again_with_more_room(
    proxy: httpx.Client, upstream: ScriptedUpstream, stream: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The proxy's first limit is tight (as when a long view leaves a reply little room).
    budget = Conversation.reply_budget
    tight = iter([True])

    def first_tight(self: Conversation, prepared: Any) -> tuple[int | None, bool]:
        wanted, clamped = budget(self, prepared)
        return (100, True) if next(tight, False) else (wanted, clamped)

    monkeypatch.setattr(Conversation, "reply_budget", first_tight)
    text, stop = _post(proxy, stream)
    assert (text, stop) == ("The whole answer.", "end_turn")  # the cut try never reached it
    sent = [r.body["max_tokens"] for r in upstream.requests_for("/v1/messages")]
    assert sent[0] == 100 and len(sent) == 2 and sent[1] > 100, sent


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_a_reply_the_window_cannot_give_more_room_says_it_was_cut(
    proxy: httpx.Client, upstream: ScriptedUpstream, stream: bool
) -> None:
    text, stop = _post(proxy, stream)  # it already had all the room the window has
    assert (text, stop) == ("The answer starts but", "max_tokens")  # never "end_turn"
    assert len(upstream.requests_for("/v1/messages")) == 1
