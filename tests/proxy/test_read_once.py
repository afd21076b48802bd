"""A request's messages are converted once (issue 28): the breaker, the tally and the append
each read the newest ones, and a message read again is the one read before, unless the range
read gives its tool results other names (a later call reusing an id)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.proxy import anthropic_side, openai_side
from contextfold.proxy._wire import ClientRequest

_IDS = ("a", "b", "c")
_NAMES = ("bash", "read", "edit")


def _anthropic(steps: list[tuple[str, str]]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Go."}]
    for call_id, name in steps:
        call = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
        messages.append({"role": "assistant", "content": [call]})
        result = {"type": "tool_result", "tool_use_id": call_id, "content": f"{name} done"}
        messages.append({"role": "user", "content": [result]})
    return messages


def _openai(steps: list[tuple[str, str]]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Go."}]
    for call_id, name in steps:
        call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": call_id, "content": f"{name} done"})
    return messages


def _request(protocol: str, steps: list[tuple[str, str]]) -> ClientRequest:
    if protocol == "anthropic":
        body = {"model": "m", "max_tokens": 10, "messages": _anthropic(steps)}
        return anthropic_side.parse_request(body)
    return openai_side.parse_request({"model": "m", "messages": _openai(steps)})


@settings(max_examples=150, deadline=None)
@given(
    protocol=st.sampled_from(["anthropic", "openai"]),
    steps=st.lists(st.tuples(st.sampled_from(_IDS), st.sampled_from(_NAMES)), max_size=6),
    reads=st.lists(st.tuples(st.integers(0, 13), st.integers(0, 13)), max_size=8),
)
def test_reading_again_reads_what_a_fresh_request_reads(
    protocol: str, steps: list[tuple[str, str]], reads: list[tuple[int, int]]
) -> None:
    request = _request(protocol, steps)
    total = len(request.digests)
    for start, stop in reads:
        start, stop = min(start, total), min(max(start, stop), total)
        fresh = _request(protocol, steps).read(start, stop)
        again = request.read(start, stop)
        # Message ids are made per conversion: compare what the messages hold.
        assert [[(m.role, m.parts) for m in g] for g in again] == [
            [(m.role, m.parts) for m in g] for g in fresh
        ]


def test_a_message_read_again_is_not_converted_again() -> None:
    request = _request("anthropic", [("a", "bash"), ("b", "read")])
    [latest] = request.read(4, 5)
    assert request.read(3, 5)[1] is latest
    assert request.read()[4] is latest


def test_a_result_named_otherwise_by_a_longer_range_is_read_anew() -> None:
    # The first result's id is reused by a later call of another name: read to the end, the
    # result takes the later call's name (as it did before messages were read once).
    request = _request("anthropic", [("a", "bash"), ("a", "edit")])
    [[alone]] = request.read(2, 3)
    assert alone.tool_results[0].name == "bash"
    [[again], _, _] = request.read(2, 5)
    assert again.tool_results[0].name == "edit"
