"""``to_anthropic(remembered=WireBlocks())`` renders each message once across calls (the proxy
sends a session's whole view on every request): the requests must be exactly those rendered
from scratch, call after call, whatever the caller did to the blocks of an earlier one."""

from __future__ import annotations

import copy
import json
import pickle
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.messages import Message
from contextfold.transcripts import load_transcript
from contextfold.wire.anthropic import (
    SharedBlock,
    SharedContent,
    SharedMessage,
    WireBlocks,
    to_anthropic,
)
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
    assert json.dumps(again.messages) == json.dumps(fresh.messages)
    # A shared message and its blocks are unmarked, and cannot be changed: a caller marks or
    # merges a copy (as to_anthropic does), and what it does to its request (a breakpoint set,
    # a turn merged) reaches no later one.
    for position, message in enumerate(again.messages):
        if isinstance(message, SharedMessage):
            assert message.encoded() == json.dumps(message, ensure_ascii=False).encode()
            with pytest.raises(TypeError):
                message["content"] = []
            with pytest.raises(TypeError):
                message["content"].append({"type": "text", "text": "added"})
            message = again.messages[position] = {**message, "content": list(message["content"])}
        content = message["content"]
        for index, block in enumerate(content):
            if isinstance(block, SharedBlock):
                assert "cache_control" not in block
                assert block.encoded() == json.dumps(block, ensure_ascii=False).encode()
                with pytest.raises(TypeError):
                    block["cache_control"] = {"type": "ephemeral"}
            content[index] = {**block, "cache_control": {"type": "ephemeral"}}
        content.append({"type": "text", "text": "added"})


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


def test_a_shared_block_refuses_every_change_and_copies_as_itself() -> None:
    block = SharedBlock({"type": "text", "text": "a"})
    for change in (
        lambda: block.__setitem__("text", "b"),
        lambda: block.__delitem__("text"),
        lambda: block.update(text="b"),
        lambda: block.pop("text"),
        lambda: block.popitem(),
        lambda: block.setdefault("x", 1),
        lambda: block.clear(),
    ):
        with pytest.raises(TypeError):
            change()
    assert block == {"type": "text", "text": "a"}
    for copied in (copy.copy(block), copy.deepcopy(block), pickle.loads(pickle.dumps(block))):
        assert type(copied) is SharedBlock and copied == block
    assert dict(block) == block and type(dict(block)) is dict


def test_a_shared_message_and_its_content_refuse_every_change_and_copy_as_themselves() -> None:
    content = SharedContent([SharedBlock({"type": "text", "text": "a"})])
    message = SharedMessage({"role": "user", "content": content})
    for change in (
        lambda: message.__setitem__("role", "assistant"),
        lambda: message.update(role="assistant"),
        lambda: content.__setitem__(0, {}),
        lambda: content.__delitem__(0),
        lambda: content.__iadd__([{}]),
        lambda: content.append({}),
        lambda: content.extend([{}]),
        lambda: content.insert(0, {}),
        lambda: content.pop(),
        lambda: content.remove(content[0]),
        lambda: content.clear(),
        lambda: content.sort(),
        lambda: content.reverse(),
    ):
        with pytest.raises(TypeError):
            change()
    assert message == {"role": "user", "content": [{"type": "text", "text": "a"}]}
    for copied in (copy.copy(message), copy.deepcopy(message), pickle.loads(pickle.dumps(message))):
        assert type(copied) is SharedMessage and copied == message
        assert type(copied["content"]) is SharedContent
    assert list(content) == content and type(list(content)) is list
