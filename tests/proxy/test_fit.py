"""A client whose fixed part does not fit a small window, and a request that cannot fit at all
(issue 26): the proxy defers the client's unused tools rather than refusing, keeps a tool the
model called, holds the tool list between requests, answers an overflow in the client's own
protocol, and stores nothing for a refused request. One conversation stays one session when
the client resends its calls with their schema defaults added."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextfold.proxy import ProxyConfig, create_app
from contextfold.store import open_store
from tests.proxy.servers import serve
from tests.proxy.upstreams import Reply, ScriptedUpstream, ToolCall

WINDOW = 24_000
MODEL = "claude-custom-1"


def _tool(name: str, words: int, **properties: Any) -> dict[str, Any]:
    """A client tool whose description takes about ``words`` words."""
    properties = properties or {"arg": {"type": "string"}}
    return {
        "name": name,
        "description": f"{name}: " + " ".join(f"detail{i % 97}" for i in range(words)),
        "input_schema": {"type": "object", "properties": properties},
    }


EDIT = _tool(
    "Edit",
    40,
    file_path={"type": "string"},
    old_string={"type": "string"},
    new_string={"type": "string"},
    replace_all={"type": "boolean", "default": False},
)
CLIENT_TOOLS = [
    _tool("Agent", 2_500),
    _tool("Bash", 60, command={"type": "string"}),
    EDIT,
    _tool("Read", 50, file_path={"type": "string"}),
    *[_tool(f"Tool{i:02d}", 1_200) for i in range(12)],
]
"""About 20k tokens of tool definitions, like Claude Code's 26: more than half of a 24k window."""


def _tool_names(body: dict[str, Any]) -> list[str]:
    return [t["name"] for t in body.get("tools") or []]


class Editor:
    """Reads, calls a deferred tool it found with tool_search, then edits (one call a turn)."""

    def __call__(self, protocol: str, body: dict[str, Any]) -> Reply:
        results = sum(
            1
            for m in body["messages"]
            if isinstance(m["content"], list)
            for b in m["content"]
            if b.get("type") == "tool_result"
        )
        steps = [
            ToolCall("toolu_1", "Read", {"file_path": "a.py"}),
            ToolCall("toolu_s", "tool_search", {"query": "Tool07"}),
            ToolCall("toolu_2", "Tool07", {"arg": "x"}),
            ToolCall(
                "toolu_3", "Edit", {"file_path": "a.py", "old_string": "a", "new_string": "b"}
            ),
        ]
        if results < len(steps):
            return Reply(text=f"Step {results}.", tool_calls=[steps[results]])
        return Reply(text="All done.")


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "proxy.db"


@pytest.fixture
def upstream() -> ScriptedUpstream:
    return ScriptedUpstream(Editor(), window=WINDOW)


@pytest.fixture
def proxy(upstream: ScriptedUpstream, store_path: Path) -> Iterator[httpx.Client]:
    config = ProxyConfig(upstream="http://x", window=WINDOW, store=store_path, tenant_salt=b"s")
    with serve(upstream) as upstream_url:
        app = create_app(ProxyConfig(**{**config.__dict__, "upstream": upstream_url}))
        with serve(app) as url:
            yield httpx.Client(base_url=url, headers={"x-api-key": "key"}, timeout=60)


def _sessions(store_path: Path) -> list[Any]:
    with open_store(store_path) as store:
        return store.list_sessions()


def _run(client: httpx.Client, resend: Any = None) -> list[dict[str, Any]]:
    """The client's agent loop until the model stops calling tools; ``resend`` rewrites each
    tool input the way a client re-serializes it."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Edit a.py."}]
    while True:
        response = client.post(
            "/v1/messages",
            json={
                "model": MODEL,
                "max_tokens": 32_000,
                "messages": messages,
                "tools": CLIENT_TOOLS,
            },
        )
        assert response.status_code == 200, response.text
        content = response.json()["content"]
        calls = [b for b in content if b["type"] == "tool_use"]
        assert all(c["name"] != "tool_search" for c in calls), "the proxy answers tool_search"
        if resend is not None:
            content = [resend(b) if b["type"] == "tool_use" else b for b in content]
        messages.append({"role": "assistant", "content": content})
        if not calls:
            return messages
        results = [{"type": "tool_result", "tool_use_id": c["id"], "content": "ok"} for c in calls]
        messages.append({"role": "user", "content": results})


def test_tools_past_half_the_window_are_deferred_and_a_called_one_stays(
    proxy: httpx.Client, upstream: ScriptedUpstream, store_path: Path
) -> None:
    _run(proxy)
    bodies = [r.body for r in upstream.requests_for("/v1/messages")]
    assert all(r.input_tokens is not None and r.input_tokens <= WINDOW for r in upstream.requests)
    first = _tool_names(bodies[0])
    assert "tool_search" in first and "Agent" not in first and "Tool07" not in first
    assert {"Bash", "Read", "Edit"} <= set(first)
    # The list holds between requests, but for the tool the model found and called.
    lists = [tuple(_tool_names(b)) for b in bodies]
    assert len(set(lists)) <= 3, lists
    called = next(i for i, b in enumerate(bodies) if "toolu_2" in str(b["messages"]))
    assert all("Tool07" in _tool_names(b) for b in bodies[called:])
    assert len(_sessions(store_path)) == 1


def test_resent_calls_with_their_schema_defaults_stay_one_session(
    proxy: httpx.Client, store_path: Path
) -> None:
    def with_defaults(block: dict[str, Any]) -> dict[str, Any]:
        if block["name"] == "Edit":  # Claude Code adds the default, as its first key
            return {**block, "input": {"replace_all": False, **block["input"]}}
        return block

    _run(proxy, resend=with_defaults)
    assert len(_sessions(store_path)) == 1


@pytest.mark.parametrize("protocol", ["anthropic", "openai"])
def test_a_request_that_cannot_fit_is_the_protocols_overflow_and_stores_nothing(
    proxy: httpx.Client, store_path: Path, protocol: str
) -> None:
    huge = "word " * 60_000
    if protocol == "anthropic":
        response = proxy.post(
            "/v1/messages",
            json={
                "model": MODEL,
                "max_tokens": 100,
                "messages": [{"role": "user", "content": huge}],
            },
        )
        error = response.json()["error"]
        assert error["type"] == "invalid_request_error"
        assert error["message"].startswith("prompt is too long: ")
        tokens, limit = (int(w) for w in error["message"].split() if w.isdigit())
        assert tokens > limit
    else:
        response = proxy.post(
            "/v1/chat/completions",
            json={"model": MODEL, "messages": [{"role": "user", "content": huge}]},
        )
        assert response.json()["error"]["code"] == "context_length_exceeded"
    assert response.status_code == 400
    assert _sessions(store_path) == []


def test_engine_tools_only_go_into_requests_that_carry_tools(
    proxy: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.script = lambda protocol, body: Reply(text="A title")
    response = proxy.post(
        "/v1/chat/completions",
        json={"model": MODEL, "messages": [{"role": "user", "content": "Title this chat."}]},
    )
    assert response.status_code == 200, response.text
    [sent] = upstream.requests
    assert "tools" not in sent.body


def test_a_request_below_the_mask_threshold_goes_up_as_the_client_sent_it(
    proxy: httpx.Client, upstream: ScriptedUpstream
) -> None:
    """Nothing to manage: the messages go up as they came (the client's tools too, with the
    engine's own added after them)."""
    upstream.script = lambda protocol, body: Reply(text="Fine.")
    messages = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "List the files."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "ls", "arguments": '{"path": "."}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "a.py\nb.py"},
        {"role": "user", "content": "And now?"},
    ]
    ls = {
        "type": "function",
        "function": {
            "name": "ls",
            "description": "List a folder.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
    response = proxy.post(
        "/v1/chat/completions", json={"model": MODEL, "messages": messages, "tools": [ls]}
    )
    assert response.status_code == 200, response.text
    [sent] = upstream.requests
    # An assistant turn that only calls tools goes up with "" for null (llama-cpp-python's
    # server answers HTTP 500 to null): the one spelling the proxy changes.
    expected = [{**m, "content": ""} if m["content"] is None else m for m in messages]
    assert sent.body["messages"] == expected
    assert sent.body["tools"][0] == ls
