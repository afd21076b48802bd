"""The proxy's count of what a client sent: each message, and the system prompt, read once;
the total the counter gives the whole request (issue 28)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextfold.proxy import anthropic_side
from contextfold.proxy._request_json import ResentBodies, read_json
from contextfold.proxy._tally import TokenTally
from contextfold.tokens.counters import HeuristicCounter, TiktokenCounter

_TOOL = {"name": "bash", "description": "Run a command.", "input_schema": {"type": "object"}}


def _body(system: str, turns: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing test."}]
    for step in range(turns):
        call = {"type": "tool_use", "id": f"t{step}", "name": "bash", "input": {"n": step}}
        messages.append(
            {"role": "assistant", "content": [{"type": "text", "text": "On it."}, call]}
        )
        result = {"type": "tool_result", "tool_use_id": f"t{step}", "content": f"out {step}"}
        messages.append({"role": "user", "content": [result]})
    body: dict[str, Any] = {"model": "m", "max_tokens": 100, "messages": messages}
    if system:
        body["system"] = system
        body["tools"] = [_TOOL]
    return body


@pytest.mark.parametrize("system", ["", "You are a careful engineer. " * 400])
def test_the_tally_is_the_counter_s_count_of_the_whole_request(system: str) -> None:
    counter = TiktokenCounter()
    tally = TokenTally()
    # A growing history, one request resent as it was, then rewound, rewritten and grown again
    # (the conversation's last sums hold only as far as its messages are the same).
    for turns, rewritten in ((0, 0), (1, 0), (3, 0), (3, 0), (6, 0), (2, 0), (6, 3), (7, 3)):
        body = _body(system, turns)
        if rewritten and len(body["messages"]) > rewritten:
            body["messages"][rewritten] = {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t0", "content": "rewritten " * 50}
            ]}  # fmt: skip
        client = anthropic_side.parse_request(body)
        messages = [m for group in client.read() for m in group]
        whole = counter.count_request(messages, system=client.system, tools=client.tools)
        assert tally.count(counter, client) == whole
    other = anthropic_side.parse_request(_body("Another system prompt.", 2))
    messages = [m for group in other.read() for m in group]
    assert tally.count(counter, other) == counter.count_request(
        messages, system=other.system, tools=other.tools
    )


def test_resent_tools_and_system_are_counted_once_and_alike(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A client resending its tools unchanged gets the same tool specs (the body reader and the
    checks share them): the counter does not encode their schemas again, and the tally equals
    the counter's count each time, another system prompt beside the same tools included."""
    resent, tally = ResentBodies(), TokenTally()
    for counter in (TiktokenCounter(), HeuristicCounter(), HeuristicCounter(scale=1.2)):
        clients = []
        for turns, system in ((1, "sys " * 300), (2, "sys " * 300), (3, "other"), (4, "other")):
            raw = json.dumps(_body(system, turns)).encode()
            body, _ = read_json(raw, resent=resent)
            clients.append(anthropic_side.parse_request(body))
        assert clients[1].tools is clients[0].tools and clients[3].tools is clients[0].tools
        counted: list[int] = []
        schemas = counter._schemas
        monkeypatch.setattr(schemas, "_encode", _counting(schemas._encode, counted))
        for client in clients:
            messages = [m for group in client.read() for m in group]
            whole = counter.count_request(messages, system=client.system, tools=client.tools)
            counted.clear()
            assert tally.count(counter, client) == whole
            if client is clients[1] or client is clients[3]:
                assert not counted  # remembered: the same tools


def _counting(real: Any, counted: list[int]) -> Any:
    def encode(tool: Any) -> str:
        counted.append(1)
        schema: str = real(tool)
        return schema

    return encode
