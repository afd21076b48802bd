"""The circuit breaker (issue 26): a conversation that goes round in circles is stopped and
told so in its own protocol, instead of looping for minutes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextfold.compaction import CompactResult
from contextfold.proxy import ProxyConfig, create_app
from contextfold.proxy._breaker import REPEATS, Breaker, Tripped
from tests.proxy.servers import serve
from tests.proxy.upstreams import Reply, ScriptedUpstream


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[httpx.Client]:
    upstream = ScriptedUpstream(lambda protocol, body: Reply(text="Same answer."))
    with serve(upstream) as upstream_url:
        config = ProxyConfig(
            upstream=upstream_url, window=50_000, store=tmp_path / "p.db", tenant_salt=b"s"
        )
        with serve(create_app(config)) as url:
            yield httpx.Client(base_url=url, headers={"x-api-key": "k"}, timeout=60)


def _post(client: httpx.Client, messages: list[dict[str, Any]]) -> httpx.Response:
    body = {"model": "claude-custom-1", "max_tokens": 200, "messages": messages}
    return client.post("/v1/messages", json=body)


def test_the_same_request_again_and_again_is_stopped_in_the_clients_protocol(
    proxy: httpx.Client,
) -> None:
    messages = [{"role": "user", "content": "Do the thing."}]
    for _ in range(REPEATS - 1):
        assert _post(proxy, messages).status_code == 200
    refused = _post(proxy, messages)
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert "the same request came" in error["message"]
    # The conversation moving on is served again.
    reply = {"role": "assistant", "content": "Same answer."}
    more = [*messages, reply, {"role": "user", "content": "Now the next thing."}]
    assert _post(proxy, more).status_code == 200


def test_compactions_that_stop_making_progress_trip_it() -> None:
    breaker = Breaker(stalled=3)

    def result(after: int, failed: bool) -> CompactResult:
        return CompactResult(
            before_tokens=100,
            after_tokens=after,
            strategies_run=("mask",),
            edits=(),
            view=(),
            before_view=(),
            failed=failed,
            reason="freed 1 token" if failed else "",
        )

    stalled, made_progress = result(99, True), result(10, False)
    breaker.compacted("t", "c", stalled)
    breaker.compacted("t", "c", None)  # a request without a compaction changes nothing
    breaker.compacted("t", "c", made_progress)  # progress resets the count
    breaker.compacted("t", "c", stalled)
    breaker.compacted("t", "c", stalled)
    with pytest.raises(Tripped, match="3 compactions in a row"):
        breaker.compacted("t", "c", stalled)
    breaker.compacted("t", "c", stalled)  # reset after a trip
