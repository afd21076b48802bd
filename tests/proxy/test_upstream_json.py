"""The upstream body's JSON: the bytes ``json.dumps`` writes, with the long texts a body resends
copied from their encoding made the first time (issue 28)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.proxy._upstream_json import (
    LONG_CHARS,
    SHARED_WORTH_TOKENS,
    WORTH_TOKENS,
    BodyEncoder,
)
from contextfold.wire.anthropic import SharedBlock, SharedContent, SharedMessage

_TEXT = st.text(max_size=40) | st.text(min_size=LONG_CHARS, max_size=LONG_CHARS + 200)
_PLAIN = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _TEXT
_VALUES = st.recursive(
    _PLAIN,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=8), inner)
        | st.dictionaries(st.text(max_size=8), inner).map(SharedBlock)
    ),
    max_leaves=20,
)


def _json(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode()


@settings(max_examples=150, deadline=None)
@given(st.lists(_VALUES, min_size=1, max_size=4))
def test_the_bytes_are_json_dumps_bytes_each_time(bodies: list[Any]) -> None:
    encoder = BodyEncoder()
    for body in bodies + bodies:  # the second time, from what was remembered
        assert encoder.encode(body, tokens=WORTH_TOKENS) == _json(body)
        assert encoder.encode(body, tokens=SHARED_WORTH_TOKENS) == _json(body)
        assert encoder.encode(body, tokens=0) == _json(body)


def _body(*outputs: str) -> dict[str, Any]:
    blocks = [{"type": "tool_result", "tool_use_id": "t1", "content": text} for text in outputs]
    return {"model": "m", "messages": [{"role": "user", "content": blocks}], "max_tokens": 9}


def test_a_text_resent_is_copied_and_a_new_one_encoded() -> None:
    encoder = BodyEncoder()
    old, new = 'line "1"\n' * 100, "line\t2\n" * 100
    assert encoder.encode(_body(old), tokens=WORTH_TOKENS) == _json(_body(old))
    assert list(encoder._encoded) == [old]
    assert encoder.encode(_body(old, new), tokens=WORTH_TOKENS) == _json(_body(old, new))
    assert list(encoder._encoded) == [old, new]


def test_a_text_that_looks_like_a_stand_in_is_only_text() -> None:
    """A client cannot make its text read as a stand-in: it would need the process's nonce."""
    encoder = BodyEncoder()
    lookalike = "\x00" + "0" * 32 + ":0\x00"
    body = _body("x" * LONG_CHARS, lookalike, "\\u0000" + "0" * 32 + ":0\\u0000")
    assert encoder.encode(body, tokens=WORTH_TOKENS) == _json(body)


def test_the_remembered_encodings_stay_within_their_bound() -> None:
    encoder = BodyEncoder(max_bytes=10_000)
    for index in range(100):
        encoder.encode(_body(f"{index} " + "y" * 1_000), tokens=WORTH_TOKENS)
    assert 0 < encoder._bytes <= 10_000
    assert encoder._bytes == sum(len(b) for b in encoder._encoded.values())


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(_VALUES, max_size=5), min_size=1, max_size=6), st.data())
def test_a_view_of_shared_blocks_is_written_as_json_dumps_writes_it(
    turns: list[list[Any]], data: st.DataObject
) -> None:
    """The proxy's bodies: messages of shared blocks, resent request after request, with a
    marked copy here and there (a cache breakpoint) and plain blocks among them."""
    encoder = BodyEncoder()
    messages: list[dict[str, Any]] = []
    for values in turns:
        blocks: list[Any] = [SharedBlock({"type": "text", "text": v, "n": 1}) for v in values]
        role = data.draw(st.sampled_from(["user", "assistant", "system", "tool", 'a "role"']))
        messages.append({"role": role, "content": blocks})
        # Written whole from its blocks' encodings only in the shape the proxy sends: other keys,
        # or the same keys in another order, go through the walk.
        shape = data.draw(st.sampled_from(["sent", "extra key", "content first", "shared"]))
        sent = [{"role": m["role"], "content": list(m["content"])} for m in messages]
        if shape == "extra key":
            sent[-1]["name"] = "x"
        elif shape == "content first":
            sent[-1] = {"content": sent[-1]["content"], "role": sent[-1]["role"]}
        elif shape == "shared":  # a message sent as it was rendered (WireBlocks.message)
            shared = SharedContent(sent[-1]["content"])
            sent[-1] = SharedMessage({"role": sent[-1]["role"], "content": shared})
        marked = data.draw(st.integers(0, len(sent) - 1))
        if sent[marked]["content"]:  # a copy, marked (as to_anthropic marks a shared message)
            content = list(sent[marked]["content"])
            content[-1] = {**content[-1], "cache_control": {"type": "ephemeral"}}
            sent[marked] = {**sent[marked], "content": content}
        body = {"model": "m", "messages": sent, "max_tokens": 9}
        for tokens in (0, SHARED_WORTH_TOKENS, WORTH_TOKENS):
            assert encoder.encode(body, tokens=tokens) == _json(body)


def _shared(role: str, *texts: str) -> SharedMessage:
    blocks = [SharedBlock({"type": "text", "text": text}) for text in texts]
    return SharedMessage({"role": role, "content": SharedContent(blocks)})


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_a_conversation_resent_is_written_as_json_dumps_writes_it(data: st.DataObject) -> None:
    """The proxy's bodies as a session's view grows: the same shared messages (the very
    objects) request after request, the last ones marked copies, now and then a message
    replaced (a compaction), two conversations interleaved: each body's messages are written
    from the run of shared messages the conversation's last body began with."""
    encoder = BodyEncoder()
    views: list[list[Any]] = [[_shared("user", "first")], [_shared("user", "other")]]
    texts = st.text(max_size=30) | st.text(min_size=LONG_CHARS, max_size=LONG_CHARS + 50)
    for step in range(data.draw(st.integers(1, 10))):
        view = views[data.draw(st.integers(0, 1))]
        action = data.draw(st.sampled_from(["grow", "grow", "replace", "cut", "same"]))
        if action == "grow":
            role = "assistant" if view[-1]["role"] == "user" else "user"
            view.append(_shared(role, *data.draw(st.lists(texts, min_size=1, max_size=3))))
        elif action == "replace":
            view[data.draw(st.integers(0, len(view) - 1))] = _shared("user", f"summary {step}")
        elif action == "cut" and len(view) > 1:
            del view[data.draw(st.integers(1, len(view) - 1)) :]
        sent: list[Any] = list(view)
        for index in data.draw(st.lists(st.integers(0, len(sent) - 1), max_size=2)):
            content = list(sent[index]["content"])
            content[-1] = {**content[-1], "cache_control": {"type": "ephemeral"}}
            sent[index] = {**sent[index], "content": content}
        if data.draw(st.booleans()):
            sent.append({"role": "user", "content": [{"type": "text", "text": "plain"}]})
        # A long field after the messages: its stand-in comes after theirs.
        body = {"model": "m", "messages": sent, "system": "s" * LONG_CHARS, "stream": True}
        for tokens in (SHARED_WORTH_TOKENS, WORTH_TOKENS):
            assert encoder.encode(body, tokens=tokens) == _json(body)
    runs = encoder._runs
    assert runs._weight == sum(len(run.joined) for run in runs._entries.values())


def test_a_grown_conversation_takes_its_run_up() -> None:
    encoder = BodyEncoder()
    view = [_shared("user", "fix it"), _shared("assistant", "ok")]
    encoder.encode({"messages": view}, tokens=WORTH_TOKENS)
    [run] = encoder._runs._entries.values()
    grown = [*view, _shared("user", "done")]
    assert encoder.encode({"messages": grown}, tokens=WORTH_TOKENS) == _json({"messages": grown})
    [taken_up] = encoder._runs._entries.values()
    assert taken_up.items == grown and taken_up.joined.startswith(run.joined)
