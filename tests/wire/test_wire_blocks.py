"""``to_anthropic(remembered=WireBlocks())`` renders each message once across calls (the proxy
sends a session's whole view on every request): the requests must be exactly those rendered
from scratch, call after call, whatever the caller did to the blocks of an earlier one."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.messages import Message
from contextfold.transcripts import load_transcript
from contextfold.wire.anthropic import WireBlocks, to_anthropic
from tests.conftest import shared_path
from tests.strategies import messages


def _both(
    history: Sequence[Message], remembered: WireBlocks, breakpoints: Sequence[int], inline: bool
) -> None:
    fresh = to_anthropic(history, message_breakpoints=breakpoints, inline_system=inline)
    again = to_anthropic(
        history, message_breakpoints=breakpoints, inline_system=inline, remembered=remembered
    )
    assert again == fresh
    # What a caller does to its request (a breakpoint set, another removed, a turn merged)
    # reaches no later one.
    for message in again.messages:
        for block in message["content"]:
            block["cache_control"] = {"type": "ephemeral"}
        message["content"].append({"type": "text", "text": "added"})


@settings(max_examples=150, deadline=None)
@given(
    st.lists(messages, max_size=8),
    st.lists(st.integers(-3, 8), max_size=3),
    st.booleans(),
)
def test_remembered_blocks_render_as_fresh_ones(
    history: list[Message], breakpoints: list[int], inline: bool
) -> None:
    remembered = WireBlocks()
    for grown in range(len(history) + 1):  # the conversation grows: each call resends it
        _both(history[:grown], remembered, breakpoints, inline)
    _both(history, remembered, breakpoints, inline)


def test_remembered_blocks_on_a_real_session_turn_after_turn() -> None:
    folder = shared_path("trajectories", "claude-code")
    path = sorted(p for p in folder.iterdir() if p.suffix == ".jsonl")[0]
    history = list(load_transcript(path).messages)[:400]
    remembered = WireBlocks(size=64)  # smaller than the session: it starts over, and still holds
    for grown in range(1, len(history) + 1, 7):
        _both(history[:grown], remembered, [-1, -3], inline=False)
    _both(history, remembered, [-1], inline=True)
