"""The latest-turn check reads a view from its end only until it has found the client's latest
turn; its verdict is the one a reading of the whole view gives (checked against that reading,
kept here, on random views)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from contextfold.messages import Message, Meta, TextPart, ToolCallPart, ToolResultPart
from contextfold.proxy._latest_turn import latest_turn_missing

_REPLACED = frozenset({"masked", "cleared", "shrunk"})


def _whole_view_verdict(client: Sequence[Message], sent: Sequence[Message]) -> str | None:
    """The check as it read every message of ``sent`` (before issue 28)."""
    last_assistant = max((i for i, m in enumerate(client) if m.role == "assistant"), default=-1)
    latest = client[last_assistant + 1 :]
    texts = {p.text.strip() for m in sent if m.role != "assistant" for p in _texts(m)}
    for message in latest:
        for part in _texts(message):
            if part.text.strip() and part.text.strip() not in texts:
                kind = "system message" if message.role == "system" else "user's latest message"
                return f"the {kind} ({len(part.text):,} characters) was cut"
    results = {r.call_id: (m, r) for m in sent for r in m.tool_results}
    calls = {c.call_id for m in sent if m.role == "assistant" for c in m.tool_calls}
    for message in latest:
        for result in message.tool_results:
            found = results.get(result.call_id)
            if found is None or result.call_id not in calls:
                return f"the newest result of call {result.call_id} or its call was left out"
            if _REPLACED.intersection(found[0].meta.flags):
                return f"the newest result of call {result.call_id} was masked or cut"
    return None


def _texts(message: Message) -> list[TextPart]:
    return [p for p in message.parts if isinstance(p, TextPart)]


def _conversation(rng: random.Random) -> list[Message]:
    messages: list[Message] = [Message.user(f"task {rng.randrange(5)}")]
    for step in range(rng.randrange(0, 12)):
        calls = [ToolCallPart(f"c{step}_{i}", "bash", "{}") for i in range(rng.randrange(1, 3))]
        messages.append(Message.assistant(rng.choice(["", "Looking."]), calls))
        results = [ToolResultPart(c.call_id, "bash", f"out {rng.randrange(4)}") for c in calls]
        messages.append(Message.tool(*results))
        if rng.random() < 0.3:
            messages.append(Message.user(rng.choice(["go on", "  ", f"now {step}", "task 1"])))
        if rng.random() < 0.1:
            messages.append(Message.system(f"note {rng.randrange(3)}"))
    return messages


def _view(rng: random.Random, client: list[Message]) -> list[Message]:
    """What a compaction might have sent of ``client``: messages dropped, rewritten, repeated."""
    view: list[Message] = []
    for message in client:
        roll = rng.random()
        if roll < 0.1:
            continue
        if roll < 0.2 and message.tool_results:
            flag = rng.choice(["masked", "cleared", "shrunk", "cut"])
            message = Message(message.role, message.parts, meta=Meta(flags=(flag,)))
        elif roll < 0.25 and message.role == "user":
            message = Message.user(message.text + " (cut)")
        view.append(message)
        if rng.random() < 0.05:
            view.append(message)  # a result twice: the last one counts
    return view


@pytest.mark.parametrize("seed", range(120))
def test_the_verdict_is_that_of_the_whole_view(seed: int) -> None:
    rng = random.Random(seed)
    client = _conversation(rng)
    sent = _view(rng, client)
    assert latest_turn_missing(client, sent) == _whole_view_verdict(client, sent)
