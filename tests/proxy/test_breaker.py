"""The circuit breaker (issue 26): a conversation that goes round in circles is stopped and
told so in its own protocol, instead of looping for minutes."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextfold.compaction import CompactResult
from contextfold.proxy import ProxyConfig, create_app
from contextfold.proxy._breaker import REPEATS, Breaker, Tripped
from tests.proxy.servers import serve
from tests.proxy.upstreams import Reply, ScriptedUpstream, ToolCall


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[httpx.Client]:
    calls = itertools.count()

    def same_call(protocol: str, body: dict[str, Any]) -> Reply:
        # A fresh id each time, the same command: what a model stuck in a loop does.
        return Reply(tool_calls=[ToolCall(f"toolu_{next(calls)}", "bash", {"command": "ls"})])

    with serve(ScriptedUpstream(same_call)) as upstream_url:
        config = ProxyConfig(
            upstream=upstream_url, window=50_000, store=tmp_path / "p.db", tenant_salt=b"s"
        )
        with serve(create_app(config)) as url:
            yield httpx.Client(base_url=url, headers={"x-api-key": "k"}, timeout=60)


BASH = {"name": "bash", "input_schema": {"type": "object", "properties": {}}}


def _post(client: httpx.Client, messages: list[dict[str, Any]]) -> httpx.Response:
    body = {"model": "claude-custom-1", "max_tokens": 200, "messages": messages, "tools": [BASH]}
    return client.post("/v1/messages", json=body)


def test_the_same_step_over_and_over_is_stopped_in_the_clients_protocol(
    proxy: httpx.Client,
) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "List the files."}]
    statuses = []
    for _ in range(REPEATS + 2):
        response = _post(proxy, messages)
        statuses.append(response.status_code)
        if response.status_code != 200:
            break
        # The same request once more is a retry, not a step: it never trips the breaker.
        assert _post(proxy, messages).status_code == 200
        content = response.json()["content"]
        [call] = [b for b in content if b["type"] == "tool_use"]
        messages += [
            {"role": "assistant", "content": content},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": call["id"], "content": "a.py b.py"}
                ],
            },
        ]
    assert statuses == [200] * REPEATS + [400]
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert "the same step came back" in error["message"]


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
