"""``contextfold proxy`` with the official SDKs as clients and a scripted upstream behind it.

The upstream's script plays a model that runs a big shell command, then reads its offloaded
output back with the engine's ``read_result`` when the proxy offers it. Each test checks one
promise of the proxy: what the client sees, what the upstream receives, what the store holds.

Most run in process (:func:`in_process`: the proxy behind Starlette's test client, its upstream
behind ``httpx.ASGITransport``; no socket, no server thread). The two SDK tests that stream the
engine's extra round to the client run end to end on loopback sockets (:func:`proxy_url`),
where buffering would show.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from contextfold import ContextEngine
from contextfold.history.repair import history_rules_for, validate
from contextfold.messages import Message
from contextfold.proxy import ProxyConfig, anthropic_side, create_app, openai_side
from contextfold.proxy._wire import ClientError
from contextfold.store import open_store
from contextfold.wire import from_anthropic
from tests.proxy.servers import serve
from tests.proxy.upstreams import Reply, ScriptedUpstream, ToolCall, UpstreamError

WINDOW = 16_000
BIG_OUTPUT = "\n".join(f"line {i}: {'x' * 20}" for i in range(20_000))
BASH_TOOL = {
    "name": "bash",
    "description": "Run a shell command.",
    "input_schema": {"type": "object", "properties": {"cmd": {"type": "string"}}},
}
OPENAI_BASH = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a shell command.",
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
    },
}
REF = re.compile(r"ref_[0-9a-f]{8,}")


def _tool_results(protocol: str, body: dict[str, Any]) -> int:
    if protocol == "openai":
        return sum(1 for m in body["messages"] if m["role"] == "tool")
    return sum(
        1
        for m in body["messages"]
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_result"
    )


def _tool_names(body: dict[str, Any]) -> set[str]:
    return {t.get("name") or t["function"]["name"] for t in body.get("tools", [])}


class Agentic:
    """Calls bash once; then reads the offloaded output back with read_result (when offered
    and a ref is in sight); then answers."""

    def __init__(self, *, mixed: bool = False) -> None:
        self.mixed = mixed
        self.read = False

    def __call__(self, protocol: str, body: dict[str, Any]) -> Reply | UpstreamError:
        results = _tool_results(protocol, body)
        if results == 0:
            return Reply(
                text="Running it.", tool_calls=[ToolCall("call_1", "bash", {"cmd": "seq"})]
            )
        refs = REF.findall(json.dumps(body["messages"]))
        if not self.read and refs and "read_result" in _tool_names(body):
            self.read = True
            calls = [ToolCall("call_rr", "read_result", {"ref": refs[-1]})]
            if self.mixed:
                calls.append(ToolCall("call_2", "bash", {"cmd": "wc -l"}))
            return Reply(text="Reading the full output.", tool_calls=calls)
        return Reply(text=f"Done after {results} tool results.")


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "proxy.db"


def _proxy(
    upstream_url: str,
    store_path: Path,
    upstream_transport: httpx.AsyncBaseTransport | None = None,
    **settings: Any,
) -> Any:
    settings.setdefault("window", WINDOW)
    config = ProxyConfig(upstream=upstream_url, store=store_path, tenant_salt=b"salt", **settings)
    return create_app(config, upstream_transport=upstream_transport)


@pytest.fixture
def agentic() -> Agentic:
    return Agentic()


@pytest.fixture
def upstream(agentic: Agentic) -> ScriptedUpstream:
    return ScriptedUpstream(agentic)


@pytest.fixture
def proxy_url(upstream: ScriptedUpstream, store_path: Path) -> Iterator[str]:
    """The proxy and its upstream on real sockets (end to end: the SDKs' streams over TCP)."""
    with serve(upstream) as upstream_url, serve(_proxy(upstream_url, store_path)) as url:
        yield url


PROXY = "http://proxy"
"""The proxy's base URL in process."""


@contextmanager
def in_process(upstream: Any, store_path: Path, **settings: Any) -> Iterator[httpx.Client]:
    """The proxy in this process, its upstream reached through ``httpx.ASGITransport``: no
    socket, no server thread. The client is an ``httpx.Client`` (Starlette's test client, which
    runs the app's lifespan), usable as the SDKs' ``http_client``."""
    app = _proxy(
        "http://upstream",
        store_path,
        upstream_transport=httpx.ASGITransport(upstream),
        **settings,
    )
    with TestClient(app, base_url=PROXY) as client:
        yield client


@pytest.fixture
def proxy(upstream: ScriptedUpstream, store_path: Path) -> Iterator[httpx.Client]:
    with in_process(upstream, store_path) as client:
        yield client


def _anthropic_turns(client: anthropic.Anthropic, *, stream: bool) -> list[Any]:
    """Two client turns of an agent loop: the bash call, then its big output."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Count the lines."}]
    replies = []
    for _ in range(2):
        kwargs: dict[str, Any] = {
            "model": "claude-custom-1",
            "max_tokens": 1_000,
            "messages": messages,
            "tools": [BASH_TOOL],
        }
        if stream:
            with client.messages.stream(**kwargs) as events:
                reply = events.get_final_message()
        else:
            reply = client.messages.create(**kwargs)
        replies.append(reply)
        content = [b.model_dump(exclude_none=True) for b in reply.content]
        for block in content:
            block.pop("parsed_output", None)
            block.pop("citations", None)
            block.pop("caller", None)
            block.pop("toolset_name", None)
        messages = [*messages, {"role": "assistant", "content": content}]
        calls = [b for b in reply.content if b.type == "tool_use"]
        if not calls:
            break
        results = [
            {"type": "tool_result", "tool_use_id": c.id, "content": BIG_OUTPUT} for c in calls
        ]
        messages.append({"role": "user", "content": results})
    return replies


def _stored(store_path: Path) -> list[Any]:
    with open_store(store_path) as store:
        return store.list_sessions()


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_anthropic_client_never_sees_read_result(
    proxy_url: str, upstream: ScriptedUpstream, store_path: Path, stream: bool
) -> None:
    client = anthropic.Anthropic(base_url=proxy_url, api_key="key-a", max_retries=0)
    first, second = _anthropic_turns(client, stream=stream)
    assert [b.name for b in first.content if b.type == "tool_use"] == ["bash"]
    # The second turn took two upstream rounds: read_result, answered by the proxy, then text.
    # The words beside the read_result call stayed with the proxy, with the call.
    assert [b.type for b in second.content] == ["text"]
    assert second.content[-1].text == "Done after 2 tool results."
    assert second.stop_reason == "end_turn"
    bodies = [r.body for r in upstream.requests_for("/v1/messages")]
    assert len(bodies) == 3
    assert any(
        b.get("type") == "tool_use" and b.get("name") == "read_result"
        for m in bodies[2]["messages"]
        for b in (m["content"] if isinstance(m["content"], list) else [])
    )
    # The 20,000-line output never went up whole: the upstream saw a preview and a ref.
    for recorded in upstream.requests_for("/v1/messages"):
        assert recorded.input_tokens is not None and recorded.input_tokens <= WINDOW
        assert BIG_OUTPUT not in json.dumps(recorded.body)
    # One session, holding everything (the full output readable from the store).
    [info] = _stored(store_path)
    with open_store(store_path) as store:
        messages = [m for _, m in store.iter_messages(info.id)]
        refs = {p.ref for m in messages for p in m.tool_results if p.ref}
        assert refs and BIG_OUTPUT in {store.get_blob(info.id, ref) for ref in refs}
    assert info.metadata["proxy"]["requests"] == 2
    assert info.metadata["proxy"]["engine_calls"] == 1


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_openai_client_never_sees_read_result(
    proxy_url: str, upstream: ScriptedUpstream, store_path: Path, stream: bool
) -> None:
    client = openai.OpenAI(base_url=proxy_url + "/v1", api_key="key-o", max_retries=0)
    messages: list[Any] = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Count the lines."},
    ]
    for turn in range(2):
        kwargs: dict[str, Any] = {
            "model": "gpt-custom",
            "messages": messages,
            "tools": [OPENAI_BASH],
        }
        if stream:
            chunks = list(
                client.chat.completions.create(
                    **kwargs, stream=True, stream_options={"include_usage": True}
                )
            )
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            calls = [tc for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or []]
            assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens > 0
            assert len({c.id for c in chunks}) == 1  # one completion however many rounds
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if calls:
                assert [c.function.name for c in calls if c.function and c.function.name] == [
                    "bash"
                ]
                message["tool_calls"] = [
                    {
                        "id": calls[0].id,
                        "type": "function",
                        "function": {"name": "bash", "arguments": '{"cmd": "seq"}'},
                    }
                ]
        else:
            reply = client.chat.completions.create(**kwargs)
            choice = reply.choices[0]
            text = choice.message.content or ""
            message = choice.message.model_dump(exclude_none=True)
            if turn == 0:
                assert [c.function.name for c in choice.message.tool_calls or []] == ["bash"]
            else:
                assert choice.message.tool_calls is None
        messages.append(message)
        if turn == 0:
            messages.append({"role": "tool", "tool_call_id": "call_1", "content": BIG_OUTPUT})
    assert text == "Done after 2 tool results."  # "Reading the full output." went with read_result
    recorded = upstream.requests_for("/v1/chat/completions")
    assert len(recorded) == 3
    assert all(r.input_tokens is not None and r.input_tokens <= WINDOW for r in recorded)
    assert recorded[0].body["messages"][0] == {"role": "system", "content": "You are terse."}
    assert len(_stored(store_path)) == 1


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_mixed_reply_gives_the_client_its_own_calls_and_reconciles(
    upstream: ScriptedUpstream, store_path: Path, stream: bool
) -> None:
    upstream.script = Agentic(mixed=True)
    with in_process(upstream, store_path) as http:
        client = anthropic.Anthropic(
            base_url=PROXY, api_key="key-m", max_retries=0, http_client=http
        )
        first, second = _anthropic_turns(client, stream=stream)
        # The reply called read_result and bash: the client got bash alone, and stopped there.
        assert [b.name for b in second.content if b.type == "tool_use"] == ["bash"]
        assert second.stop_reason == "tool_use"
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": "Count the lines."},
            {
                "role": "assistant",
                "content": [b.model_dump(exclude_none=True) for b in first.content],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "call_1", "content": BIG_OUTPUT}
                ],
            },
            {
                "role": "assistant",
                "content": [b.model_dump(exclude_none=True) for b in second.content],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "call_2", "content": "20000"}],
            },
        ]
        for message in messages:
            if isinstance(message["content"], list):
                for block in message["content"]:
                    for key in ("citations", "caller", "toolset_name"):
                        block.pop(key, None)
        third = client.messages.create(
            model="claude-custom-1", max_tokens=500, messages=messages, tools=[BASH_TOOL]
        )
    assert third.content[-1].text == "Done after 3 tool results."
    last = upstream.requests_for("/v1/messages")[-1].body
    # The upstream's history is valid: both calls of the mixed reply are answered, in order.
    view = from_anthropic(last["messages"])
    validate(view, provider=history_rules_for("anthropic"))  # raises when invalid
    assert len(_stored(store_path)) == 1


def test_requests_continue_one_session_and_a_rewrite_forks(
    proxy: httpx.Client, upstream: ScriptedUpstream, store_path: Path
) -> None:
    upstream.script = lambda protocol, body: Reply(text=f"answer {len(body['messages'])}")
    client = proxy
    client.headers["x-api-key"] = "key-a"
    history: list[dict[str, Any]] = []
    sessions = []
    for turn in range(3):
        history.append({"role": "user", "content": f"question {turn}"})
        response = client.post(
            "/v1/messages",
            json={"model": "claude-custom-1", "max_tokens": 100, "messages": history},
        )
        assert response.status_code == 200, response.text
        sessions.append(response.headers["x-contextfold-session"])
        history.append({"role": "assistant", "content": response.json()["content"]})
    assert len(set(sessions)) == 1
    # The client rewrites its history (its own compaction): a new session, linked to the old.
    rewritten = [{"role": "user", "content": "summary of the work so far"}, *history[-2:-1]]
    response = client.post(
        "/v1/messages",
        json={"model": "claude-custom-1", "max_tokens": 100, "messages": history[:2] + rewritten},
    )
    fork = response.headers["x-contextfold-session"]
    assert fork != sessions[0]
    with open_store(store_path) as store:
        assert store.get_session(fork).parent_id == sessions[0]
        original = [m for _, m in store.iter_messages(sessions[0])]
    assert [m.role for m in original] == ["user", "assistant"] * 3


def test_tenants_never_share_sessions(proxy: httpx.Client, store_path: Path) -> None:
    body = {
        "model": "claude-custom-1",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "hello"}],
    }
    first = proxy.post("/v1/messages", json=body, headers={"x-api-key": "key-a"})
    history = [
        *body["messages"],
        {"role": "assistant", "content": first.json()["content"]},
        {"role": "user", "content": "and then?"},
    ]
    # The same history from another key starts its own session...
    other = proxy.post(
        "/v1/messages",
        json={**body, "messages": history},
        headers={"x-api-key": "key-b"},
    )
    assert other.headers["x-contextfold-session"] != first.headers["x-contextfold-session"]
    # ...cannot name the first key's session...
    stolen = proxy.post(
        "/v1/messages",
        json={**body, "messages": history},
        headers={
            "x-api-key": "key-b",
            "x-contextfold-session": first.headers["x-contextfold-session"],
        },
    )
    assert stolen.status_code == 404
    assert stolen.json()["error"]["type"] == "not_found_error"
    # ...and does not see it listed.
    listed_b = proxy.get("/contextfold/sessions", headers={"x-api-key": "key-b"})
    listed_a = proxy.get("/contextfold/sessions", headers={"x-api-key": "key-a"})
    ids_b = {s["id"] for s in listed_b.json()["sessions"]}
    ids_a = {s["id"] for s in listed_a.json()["sessions"]}
    assert first.headers["x-contextfold-session"] in ids_a - ids_b
    # No key reaches the disk.
    raw = b"".join(p.read_bytes() for p in store_path.parent.glob("proxy.db*"))
    assert b"key-a" not in raw and b"key-b" not in raw


def test_explicit_session_header_names_the_session(proxy: httpx.Client, store_path: Path) -> None:
    def ask(text: str, headers: dict[str, str]) -> httpx.Response:
        return proxy.post(
            "/v1/messages",
            json={
                "model": "claude-custom-1",
                "max_tokens": 50,
                "messages": [{"role": "user", "content": text}],
            },
            headers=headers,
        )

    # A session that does not exist is not made with the client's id.
    named = ask("one", {"x-api-key": "key-a", "x-contextfold-session": "ses_mine"})
    assert named.status_code == 404 and named.json()["error"]["type"] == "not_found_error"
    first = ask("one", {"x-api-key": "key-a"})
    session = first.headers["x-contextfold-session"]
    response = ask("two", {"x-api-key": "key-a", "x-contextfold-session": session})
    assert response.status_code == 200
    # "two" does not extend "one": the named session keeps its history, "two" forks from it.
    assert response.headers["x-contextfold-session"] != session
    with open_store(store_path) as store:
        assert store.get_session(response.headers["x-contextfold-session"]).parent_id == session
        assert [s.id for s in store.list_sessions()].count("ses_mine") == 0


@pytest.mark.parametrize(
    ("path", "body", "status", "needle"),
    [
        ("/v1/messages", b"{not json", 400, "not valid JSON"),
        ("/v1/messages", b'{"model": "m", "messages": []}', 400, "max_tokens"),
        (
            "/v1/messages",
            json.dumps(
                {
                    "model": "m",
                    "max_tokens": 5,
                    "messages": [{"role": "user", "content": [{"type": "document", "source": {}}]}],
                }
            ).encode(),
            400,
            "document",
        ),
        ("/v1/chat/completions", b"[1, 2]", 400, "JSON object"),
        (
            "/v1/chat/completions",
            b'{"model": "m", "messages": [{"role": "user", "content": "x"}], "n": 3}',
            400,
            "one choice",
        ),
    ],
)
def test_bad_requests_get_the_protocol_error_and_store_nothing(
    proxy: httpx.Client, store_path: Path, path: str, body: bytes, status: int, needle: str
) -> None:
    response = proxy.post(path, content=body, headers={"x-api-key": "k"})
    assert response.status_code == status
    error = response.json()
    if path == "/v1/messages":
        assert error["type"] == "error" and needle in error["error"]["message"]
    else:
        assert needle in error["error"]["message"] and error["error"]["type"]
    assert _stored(store_path) == []


def test_auth_key_and_size_limit_are_checked_first(
    upstream: ScriptedUpstream, store_path: Path
) -> None:
    body = {
        "model": "claude-custom-1",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"}],
    }
    # No upstream transport: the proxy's client goes to the network (nothing listens on 9).
    app = _proxy("http://127.0.0.1:9", store_path, auth_key="proxy-secret", max_request_bytes=4096)
    with TestClient(app, base_url=PROXY) as proxy:
        refused = proxy.post("/v1/messages", json=body)
        assert refused.status_code == 401
        assert refused.json()["error"]["type"] == "authentication_error"
        big = {**body, "messages": [{"role": "user", "content": "x" * 10_000}]}
        too_big = proxy.post(
            "/v1/messages", json=big, headers={"x-contextfold-key": "proxy-secret"}
        )
        assert too_big.status_code == 413
        # Past both checks, an unreachable upstream is a clean 502 in the protocol's format.
        unreachable = proxy.post(
            "/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
            headers={"x-contextfold-key": "proxy-secret"},
        )
        assert unreachable.status_code == 502
        assert "could not reach the upstream" in unreachable.json()["error"]["message"]


def test_upstream_overflow_is_recovered_once(upstream: ScriptedUpstream, store_path: Path) -> None:
    # The proxy believes in a window far larger than the upstream's real one: a request is
    # refused, the engine learns the real limit, compacts, and the client never notices.
    upstream.window = 5_000
    upstream.script = lambda protocol, body: Reply(text="noted")
    with in_process(upstream, store_path, window=16_000) as http:
        client = anthropic.Anthropic(
            base_url=PROXY, api_key="key-a", max_retries=0, http_client=http
        )
        history: list[dict[str, Any]] = []
        for turn in range(9):
            history.append({"role": "user", "content": f"step {turn}: " + "data " * 600})
            reply = client.messages.create(
                model="claude-custom-1", max_tokens=200, messages=history
            )
            history.append({"role": "assistant", "content": reply.content[0].text})
    sizes = [r.input_tokens or 0 for r in upstream.requests_for("/v1/messages")]
    assert any(tokens > 5_000 for tokens in sizes)  # refused at least once...
    [info] = _stored(store_path)

    with ContextEngine("anthropic/claude-sonnet-4-5", store=store_path) as engine:
        assert engine.resume(info.id).learned_window is not None  # ...and learned from it


def test_max_tokens_is_clamped_to_the_window(
    proxy: httpx.Client, upstream: ScriptedUpstream
) -> None:
    response = proxy.post(
        "/v1/messages",
        json={
            "model": "claude-custom-1",
            "max_tokens": 64_000,
            "messages": [{"role": "user", "content": "hi"}],
        },
        headers={"x-api-key": "k"},
    )
    assert response.status_code == 200
    sent = upstream.requests_for("/v1/messages")[-1].body["max_tokens"]
    assert sent < WINDOW


def test_unknown_model_without_a_window_is_refused_clearly(
    upstream: ScriptedUpstream, store_path: Path
) -> None:
    with in_process(upstream, store_path, window=None) as proxy:
        response = proxy.post(
            "/v1/chat/completions",
            json={"model": "my-local-model", "messages": [{"role": "user", "content": "hi"}]},
        )
    assert response.status_code == 400
    assert "--window" in response.json()["error"]["message"]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_dry_run_forwards_untouched_and_records(
    upstream: ScriptedUpstream, store_path: Path, stream: bool
) -> None:
    body = {
        "stream": stream,
        "model": "claude-custom-1",
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": "Count the lines."},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "call_1", "name": "bash", "input": {"cmd": "seq"}}
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "call_1", "content": BIG_OUTPUT[:20_000]}
                ],
            },
        ],
        "tools": [BASH_TOOL],
    }
    with in_process(upstream, store_path, window=200_000, dry_run=True) as proxy:
        response = proxy.post("/v1/messages", json=body, headers={"x-api-key": "k"})
    assert response.status_code == 200
    if stream:  # the upstream's events, as it sent them
        assert "event: message_stop" in response.text
    assert upstream.requests_for("/v1/messages")[-1].body == body
    [info] = _stored(store_path)
    assert info.metadata["proxy"]["estimated_upstream_tokens"] > 0
    with open_store(store_path) as store:  # the reply was recorded from the stream too
        assert [m.role for _, m in store.iter_messages(info.id)][-1] == "assistant"


def test_models_and_count_tokens_pass_through(proxy: httpx.Client) -> None:
    models = proxy.get("/v1/models", headers={"x-api-key": "k"})
    assert models.status_code == 200 and models.json()["data"]
    counted = proxy.post(
        "/v1/messages/count_tokens",
        json={"model": "m", "messages": [{"role": "user", "content": "hello there"}]},
        headers={"x-api-key": "k"},
    )
    assert counted.status_code == 200 and counted.json()["input_tokens"] > 0


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", "tool", "x"]), "content": _json_values}
)


@settings(max_examples=300, deadline=None)
@given(
    body=st.fixed_dictionaries(
        {"model": st.text(max_size=5), "messages": st.lists(_message, max_size=4)},
        optional={"max_tokens": _json_values, "tools": _json_values, "system": _json_values},
    )
)
def test_parsing_outside_input_fails_only_with_a_client_error(body: dict[str, Any]) -> None:
    for side in (anthropic_side, openai_side):
        try:
            request = side.parse_request(body)
        except ClientError as exc:
            assert exc.status == 400 and exc.message
        else:
            try:
                groups = request.read()
            except ClientError as exc:  # read later, for the new messages only: the same error
                assert exc.status == 400 and exc.message
            else:
                assert all(isinstance(m, Message) for group in groups for m in group)
                assert len(groups) == len(request.digests)


PIXEL = (  # a 1x1 PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAC"
    "hwGA60e6kgAAAABJRU5ErkJggg=="
)


def test_images_and_signed_thinking_reach_the_upstream_as_sent(
    proxy: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.script = lambda protocol, body: Reply(text="A red pixel.")
    thinking = {"type": "thinking", "thinking": "Look first.", "signature": "sig-abc123"}
    call = {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"cmd": "ls"}}
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PIXEL},
    }
    body = {
        "model": "claude-custom-1",
        "max_tokens": 200,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "tools": [BASH_TOOL],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "What is this?"}, image]},
            {"role": "assistant", "content": [thinking, call]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "pixel.png"}
                ],
            },
        ],
    }
    response = proxy.post("/v1/messages", json=body, headers={"x-api-key": "k"})
    assert response.status_code == 200, response.text
    sent = upstream.requests_for("/v1/messages")[-1].body
    assert sent["thinking"] == body["thinking"]  # the client's own fields go up as sent
    blocks = [b for m in sent["messages"] for b in m["content"]]
    assert any(b.get("type") == "image" and b["source"]["data"] == PIXEL for b in blocks)
    [sent_thinking] = [b for b in blocks if b.get("type") == "thinking"]
    assert sent_thinking["signature"] == "sig-abc123"
    assert sent_thinking["thinking"] == "Look first."


def test_the_clients_instructions_are_not_pinned_into_its_system_prompt(
    proxy: httpx.Client, upstream: ScriptedUpstream
) -> None:
    """Agents resend their standing instructions every time: the proxy does not pin them."""
    upstream.script = lambda protocol, body: Reply(text="ok")
    body = {
        "model": "claude-custom-1",
        "max_tokens": 50,
        "system": "You are a coding agent.",
        "messages": [{"role": "user", "content": "Never touch the tests folder. Fix the bug."}],
    }
    response = proxy.post("/v1/messages", json=body, headers={"x-api-key": "k"})
    assert response.status_code == 200
    sent = upstream.requests_for("/v1/messages")[-1].body
    assert "".join(b["text"] for b in sent["system"]) == "You are a coding agent."


def test_a_cookie_the_upstream_sets_goes_up_with_no_later_request(
    upstream: ScriptedUpstream, store_path: Path
) -> None:
    """One HTTP client serves every tenant: a cookie set in answer to one client's request
    must not reach the upstream with another's."""
    upstream.script = lambda protocol, body: Reply(text="ok")

    async def setting_cookies(scope: Any, receive: Any, send: Any) -> None:
        async def send_with_cookie(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = [*message.get("headers", []), (b"set-cookie", b"route=tenant-a; Path=/")]
                message = {**message, "headers": headers}
            await send(message)

        await upstream(scope, receive, send_with_cookie)

    body = {"model": "claude-custom-1", "max_tokens": 50}
    with serve(setting_cookies) as upstream_url, serve(_proxy(upstream_url, store_path)) as url:
        for key, text in (("key-a", "first"), ("key-b", "second")):
            sent_body = {**body, "messages": [{"role": "user", "content": text}]}
            response = httpx.post(f"{url}/v1/messages", json=sent_body, headers={"x-api-key": key})
            assert response.status_code == 200
    sent = upstream.requests_for("/v1/messages")
    assert len(sent) == 2
    assert all("cookie" not in request.headers for request in sent)
