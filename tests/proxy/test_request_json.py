"""The body reader that keys each message by its exact text, and the digests it saves."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextfold.hosts.digests import DigestCache
from contextfold.proxy import anthropic_side
from contextfold.proxy._request_json import known_messages, read_json
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
