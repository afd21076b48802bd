"""The body reader that keys each message by its exact text, and the digests it saves."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextfold.hosts.digests import DigestCache
from contextfold.proxy import anthropic_side
from contextfold.proxy._request_json import ResentBodies, known_messages, read_json
from contextfold.proxy._wire import ClientError

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=12,
)


@given(st.dictionaries(st.text(max_size=6), _json, max_size=4), st.lists(_json, max_size=4))
def test_the_body_reads_as_json_loads_reads_it(extra: dict[str, Any], messages: list[Any]) -> None:
    for indent in (None, 2):
        raw = json.dumps({**extra, "messages": messages}, indent=indent).encode()
        body, keys = read_json(raw)
        assert body == json.loads(raw)
        assert keys is not None and len(keys) == len(body["messages"])


@pytest.mark.parametrize(
    "raw", [b"", b"{", b'{"messages": [1,]}', b"[1]", b'\xef\xbb\xbf{"a": 1}', b'{"a": 1} x']
)
def test_what_the_fast_path_does_not_read_json_loads_reads(raw: bytes) -> None:
    try:
        expected: Any = json.loads(raw)
    except ValueError as error:
        with pytest.raises(ValueError, match=str(error).split(":")[0]):
            read_json(raw)
        return
    assert read_json(raw) == (expected, None)


def test_a_message_resent_byte_for_byte_keeps_its_key_and_respacing_changes_it() -> None:
    first = {"role": "user", "content": "hi"}
    _, a = read_json(json.dumps({"messages": [first]}).encode())
    _, b = read_json(json.dumps({"model": "m", "messages": [first, first]}).encode())
    _, c = read_json(json.dumps({"messages": [first]}, separators=(",", ":")).encode())
    assert a is not None and b is not None and c is not None
    assert a[0] == b[0] == b[1] != c[0]


def _parse(raw: bytes, cache: DigestCache) -> Any:
    body, keys = read_json(raw)
    return anthropic_side.parse_request(body, known_messages(cache, "anthropic", body, keys))


def _body(*messages: Any) -> bytes:
    return json.dumps({"model": "m", "max_tokens": 10, "messages": list(messages)}).encode()


def test_known_messages_are_not_digested_again_and_digest_alike(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cache = DigestCache()
    user = {"role": "user", "content": "hello"}
    reply = {"role": "assistant", "content": [{"type": "text", "text": "hi"}]}
    first = _parse(_body(user), cache)
    digested: list[Any] = []
    original = anthropic_side.wire_digest

    def counting(raw: Any, defaults: Any) -> bytes:
        digested.append(raw)
        return original(raw, defaults)

    monkeypatch.setattr(anthropic_side, "wire_digest", counting)
    second = _parse(_body(user, reply, {"role": "user", "content": "more"}), cache)
    assert len(digested) == 2  # only the two new messages
    assert second.digests[0] == first.digests[0]
    assert list(second.digests) == [
        original(m)
        for m in json.loads(_body(user, reply, {"role": "user", "content": "more"}))["messages"]
    ]


def test_a_bad_new_message_is_refused_though_the_ones_before_are_known() -> None:
    cache = DigestCache()
    user = {"role": "user", "content": "hello"}
    _parse(_body(user), cache)
    bad = {"role": "user", "content": [{"type": "text"}]}
    with pytest.raises(ClientError, match=r"messages\.1"):
        _parse(_body(user, bad), cache)
    lone = {"role": "assistant", "content": "a\ud800b"}
    with pytest.raises(ClientError, match=r"messages\.1"):
        _parse(_body(user, lone), cache)


def test_a_refused_request_teaches_the_cache_nothing() -> None:
    cache = DigestCache()
    bad = {"role": "user", "content": [{"type": "text"}]}
    with pytest.raises(ClientError):
        _parse(_body(bad), cache)
    with pytest.raises(ClientError):
        _parse(_body(bad), cache)  # refused again, not waved through as known


def test_the_tools_argument_defaults_are_part_of_the_key() -> None:
    cache = DigestCache()
    call = {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t1", "name": "ls", "input": {"path": ".", "all": False}}
    ]}  # fmt: skip
    user = {"role": "user", "content": "list"}
    schema = {"type": "object", "properties": {"all": {"type": "boolean", "default": False}}}
    tools = [{"name": "ls", "description": "", "input_schema": schema}]

    def body(with_tools: bool) -> bytes:
        value = json.loads(_body(user, call))
        if with_tools:
            value["tools"] = tools
        return json.dumps(value).encode()

    fresh = [_parse(body(t), DigestCache()).digests for t in (False, True)]
    cached = [_parse(body(t), cache).digests for t in (False, True)]
    assert cached == fresh


_message = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]), "content": _json})


@st.composite
def _resent_bodies(draw: st.DrawFn) -> list[bytes]:
    """Bodies as clients send them one after the other: a history grown and resent, a request
    retried, a turn rewritten, another conversation or other fields between, other spacing,
    a body cut short or not an object at all."""
    bodies: list[bytes] = []
    history = draw(st.lists(_message, min_size=0, max_size=3))
    fields = st.sampled_from(["model", "system", "tools", "x"])
    extra = draw(st.dictionaries(fields, _json, max_size=3))
    indent = None
    for _ in range(draw(st.integers(1, 6))):
        step = draw(
            st.sampled_from(["grow", "grow", "retry", "rewrite", "other", "fields", "broken"])
        )
        if step == "fields":  # new tools or system prompt (a prefix of the old one, say)
            extra = {**extra, **draw(st.dictionaries(fields, _json, max_size=2))}
        elif step == "grow":
            history = history + draw(st.lists(_message, min_size=1, max_size=2))
        elif step == "rewrite" and history:
            history = [*history[: draw(st.integers(0, len(history) - 1))], draw(_message)]
        elif step == "other":
            history = draw(st.lists(_message, max_size=3))
            extra = draw(st.dictionaries(fields, _json, max_size=2))
            indent = draw(st.sampled_from([None, 1]))
        raw = json.dumps({**extra, "messages": history, "tail": 1}, indent=indent).encode()
        if step == "broken":
            raw = raw[: draw(st.integers(0, len(raw) - 1))] if draw(st.booleans()) else b"[1]"
        bodies.append(raw)
    return bodies


@given(_resent_bodies())
def test_resent_messages_are_taken_as_read_and_the_rest_read_anew(bodies: list[bytes]) -> None:
    resent = ResentBodies(size=2)
    for raw in bodies:
        try:
            fresh = read_json(raw)
        except ValueError as error:
            with pytest.raises(ValueError) as again:
                read_json(raw, resent=resent)
            assert str(again.value) == str(error)
            continue
        assert read_json(raw, resent=resent) == fresh


def test_a_resent_history_is_not_read_again() -> None:
    resent = ResentBodies()
    first = [{"role": "user", "content": "x" * 100}, {"role": "assistant", "content": "ok"}]
    later = [*first, {"role": "user", "content": "more"}]
    one, _ = read_json(json.dumps({"model": "m", "messages": first}).encode(), resent=resent)
    two, keys = read_json(json.dumps({"model": "m", "messages": later}).encode(), resent=resent)
    assert two["messages"][0] is one["messages"][0] and two["messages"][1] is one["messages"][1]
    assert keys == read_json(json.dumps({"model": "m", "messages": later}).encode())[1]
    # Another first message, or the same history spaced otherwise, is read anew.
    three, _ = read_json(
        json.dumps({"model": "m", "messages": later}, indent=1).encode(), resent=resent
    )
    assert three["messages"][0] is not two["messages"][0]


def test_resent_bodies_keep_to_their_bounds() -> None:
    resent = ResentBodies(size=2, max_chars=400)
    for n in range(5):
        history = [
            {"role": "user", "content": f"conversation {n}"},
            {"role": "user", "content": "x"},
        ]
        read_json(json.dumps({"messages": history}).encode(), resent=resent)
    assert len(resent._read) == 2
    big = [{"role": "user", "content": "y" * 500}]
    read_json(json.dumps({"messages": big}).encode(), resent=resent)
    assert len(resent._read) == 0 and resent._chars == 0  # over max_chars alone: not kept


def test_resent_tools_and_system_are_the_same_values_and_checked_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Claude Code resends its tools and system prompt with every request: they are read and
    checked once, and each later request gets the same values and the same tool specs."""
    tools = [
        {
            "name": f"T{n}",
            "description": "d" * 300,
            "input_schema": {"type": "object", "properties": {"a": {"type": "string"}}},
        }
        for n in range(3)
    ]
    system = [{"type": "text", "text": "s" * 300}]
    resent, cache = ResentBodies(), DigestCache()
    history: list[Any] = [{"role": "user", "content": "go"}]
    clients = []
    for turn in range(3):
        body = {
            "model": "m",
            "max_tokens": 9,
            "system": system,
            "tools": tools,
            "messages": history,
        }
        raw = json.dumps(body).encode()
        read, keys = read_json(raw, resent=resent)
        assert read == json.loads(raw)
        clients.append(anthropic_side.parse_request(read, known_messages(cache, "a", read, keys)))
        history = [*history, {"role": "assistant", "content": f"r{turn}"}]
        history.append({"role": "user", "content": "more"})
    first, *later = clients
    for client in later:
        assert client.body["tools"] is first.body["tools"]
        assert client.body["system"] is first.body["system"]
        assert client.tools is first.tools and client.system == first.system
    # Other tools (one more, or one changed) are read and checked anew.
    changed = [*tools[:2], {**tools[2], "name": 5}]
    body = {"model": "m", "max_tokens": 9, "system": system, "tools": changed, "messages": history}
    read, keys = read_json(json.dumps(body).encode(), resent=resent)
    assert read["tools"] == changed and read["system"] is first.body["system"]
    with pytest.raises(ClientError, match=r"tools\.2\.name"):
        anthropic_side.parse_request(read, known_messages(cache, "a", read, keys))


_KEYS = st.lists(st.sampled_from([bytes([i]) * 4 for i in range(12)]), max_size=8)


@given(st.lists(st.tuples(st.sampled_from([b"a", b"b"]), _KEYS, _KEYS), max_size=10), st.booleans())
def test_a_lookup_under_a_prefix_finds_what_a_lookup_finds(
    steps: list[tuple[bytes, list[bytes], list[bytes]]], small: bool
) -> None:
    """Histories resent under a prefix (their new keys remembered after each lookup, as a
    request's new messages are): the keys shared with the last lookup are not looked up again,
    and what is found is what a plain lookup finds; in a cache too small for them all, every
    digest found is the one remembered for its key."""
    cache = DigestCache(size=3 if small else 1_000)
    history: list[bytes] = []
    for prefix, rewritten, new in steps:
        history = rewritten[: len(history)] + history[len(rewritten) :] + new
        found = cache.lookup_prefixed(prefix, history)
        if small:
            assert all(f in (None, prefix + k) for f, k in zip(found, history, strict=True))
        else:
            assert found == cache.lookup([prefix + key for key in history])
        cache.remember([(prefix + key, prefix + key) for key in history[len(history) // 2 :]])
