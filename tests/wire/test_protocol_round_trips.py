"""A conversation written in one wire protocol, read, written in another and read back keeps
what the model and the client need (issue 27, "Property tests"): every text where it was, every
call with its id, name and arguments, every result with its call id and text, in order.

The three codecs of :mod:`contextfold.wire`: Anthropic Messages (``to_anthropic`` /
``from_anthropic``), Chat Completions (``to_openai`` / ``from_openai``) and the Responses API's
input items (``messages_to_items`` / ``items_to_messages``). The proxy bridges through exactly
these: a client's request read in its protocol, written in the upstream's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.messages import Message, TextPart, ToolCallPart, ToolResultPart
from contextfold.wire.anthropic import from_anthropic, to_anthropic
from contextfold.wire.chat_completions import from_openai, to_openai
from contextfold.wire.responses_items import items_to_messages, messages_to_items

Codec = Callable[[Sequence[Message]], list[Message]]

CODECS: dict[str, Codec] = {
    "anthropic": lambda messages: from_anthropic(to_anthropic(messages).messages),
    "chat": lambda messages: from_openai(to_openai(messages)),
    "responses": lambda messages: items_to_messages(messages_to_items(messages)),
}

# Texts a model or a tool could write: any printable Unicode, newlines, quotes and braces
# included; never blank (every protocol leaves an empty text block out).
_TEXT = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")) | st.sampled_from('\n\t"{}\\'),
    min_size=1,
    max_size=40,
).filter(lambda text: text.strip() == text and bool(text))
_NAME = st.from_regex(r"[a-zA-Z][a-zA-Z0-9_]{0,20}", fullmatch=True)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_NAME, inner, max_size=3),
    max_leaves=6,
)
_ARGUMENTS = st.dictionaries(_NAME, _JSON, max_size=4)


@st.composite
def _turn(draw: st.DrawFn, number: int) -> list[Message]:
    """An assistant turn with (perhaps) a text and one to three calls, then their results."""
    text = draw(st.none() | _TEXT)
    count = draw(st.integers(1, 3))
    calls = [
        ToolCallPart(f"call_{number}_{i}", draw(_NAME), json.dumps(draw(_ARGUMENTS)))
        for i in range(count)
    ]
    parts: list[Any] = ([TextPart(text)] if text else []) + calls
    results = [Message.tool(ToolResultPart(call.call_id, call.name, draw(_TEXT))) for call in calls]
    return [Message("assistant", tuple(parts)), *results]


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    """A user's task, a few tool turns (user texts now and then), and a last answer."""
    messages = [Message.user(draw(_TEXT))]
    for number in range(draw(st.integers(0, 4))):
        messages += draw(_turn(number))
        if draw(st.booleans()):
            messages.append(Message.user(draw(_TEXT)))
    messages.append(Message.assistant(draw(_TEXT)))
    return messages


def essence(messages: Sequence[Message]) -> list[tuple[Any, ...]]:
    """What must survive, in order, message boundaries aside (Anthropic puts results in a user
    message, Chat gives each its own ``tool`` message)."""
    out: list[tuple[Any, ...]] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, TextPart):
                out.append(("text", message.role, part.text))
            elif isinstance(part, ToolCallPart):
                out.append(("call", part.call_id, part.name, json.loads(part.arguments)))
            elif isinstance(part, ToolResultPart):
                out.append(("result", part.call_id, part.content))
    return out


_PAIRS = [(a, b) for a in CODECS for b in CODECS]


@settings(max_examples=60, deadline=None)
@given(conversations(), st.sampled_from(_PAIRS))
def test_a_conversation_survives_any_pair_of_protocols_and_back(
    messages: list[Message], pair: tuple[str, str]
) -> None:
    first, second = pair
    expected = essence(messages)
    there = CODECS[first](messages)
    assert essence(there) == expected, first
    across = CODECS[second](there)
    assert essence(across) == expected, (first, second)
    back = CODECS[first](across)
    assert essence(back) == expected, (first, second, first)
