"""``to_anthropic`` with ``remembered`` takes a conversation's rendering up where its last one
left off (``WireBlocks.resume``): the result must be the rendering made afresh, whatever the
conversation did in between (grew, was compacted, moved its breakpoints, hid a message, kept
its system messages in place or not), issue 28."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.messages import Message, Meta, ToolCallPart, ToolResultPart
from contextfold.wire.anthropic import AnthropicRequest, WireBlocks, to_anthropic


def _json(request: AnthropicRequest) -> str:
    return json.dumps(request.kwargs(), ensure_ascii=False)


@st.composite
def _message(draw: st.DrawFn, index: int) -> Message:
    kind = draw(st.sampled_from(["user", "assistant", "tool", "system", "empty", "hidden"]))
    text = draw(st.sampled_from(["", " ", "ok", f"text {index}", 'a "quoted"\nline']))
    if kind == "user":
        return Message.user(text or "u")
    if kind == "assistant":
        calls = [ToolCallPart(f"c{index}", "bash", '{"command": "ls"}')]
        return Message.assistant(text, draw(st.sampled_from([[], calls])))
    if kind == "tool":
        return Message.tool(ToolResultPart(f"c{index - 1}", "bash", text))
    if kind == "system":
        return Message.system(text or "s")
    if kind == "empty":
        return Message.assistant(" ")
    return Message.user(text, meta=Meta(agent_visible=False))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_rendering_taken_up_is_the_rendering_made_afresh(data: st.DataObject) -> None:
    remembered = WireBlocks()
    conversations: list[list[Message]] = [[], []]
    made = 0
    for _ in range(data.draw(st.integers(1, 12))):
        view = conversations[data.draw(st.integers(0, 1))]
        action = data.draw(st.sampled_from(["grow", "grow", "grow", "compact", "same"]))
        if action == "grow":
            for _ in range(data.draw(st.integers(1, 3))):
                view.append(data.draw(_message(made)))
                made += 1
        elif action == "compact" and view:
            start = data.draw(st.integers(0, len(view) - 1))
            stop = data.draw(st.integers(start, len(view)))
            view[start:stop] = [Message.user(f"summary {made}")]
            made += 1
        if not view:
            continue
        marks = data.draw(st.lists(st.integers(-2, len(view) + 1), max_size=3))
        inline = data.draw(st.booleans())
        arguments: dict[str, Any] = {
            "system": "sys",
            "message_breakpoints": marks,
            "inline_system": inline,
        }
        fresh = to_anthropic(list(view), **arguments)
        assert _json(to_anthropic(list(view), remembered=remembered, **arguments)) == _json(fresh)


def test_a_grown_conversation_is_taken_up_where_it_was_left() -> None:
    remembered = WireBlocks()
    view = [Message.user("fix it"), Message.assistant("ok", [ToolCallPart("c1", "bash", "{}")])]
    view.append(Message.tool(ToolResultPart("c1", "bash", "done")))
    to_anthropic(view, message_breakpoints=[2], remembered=remembered)
    grown = [*view, Message.assistant("next"), Message.user("go on")]
    resumed = remembered.resume(grown, False, clean=4)
    assert resumed is not None and len(resumed.messages) == 2  # up to the breakpoint on 2
    assert resumed.state() == to_anthropic(view[:2]).messages
