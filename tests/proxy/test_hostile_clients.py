"""Hostile clients of a running proxy: identical requests racing, keyless clients, secrets in
the fields a client controls. Each test starts the proxy on loopback with a scripted upstream."""

from __future__ import annotations

import itertools
import json
import logging
import stat
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextfold.errors import StoreError
from contextfold.proxy import ProxyConfig, create_app
from contextfold.proxy.app import log_to
from contextfold.store import SQLiteStore, open_store
from tests.proxy.servers import serve, streamed_text
from tests.proxy.upstreams import Reply, ScriptedUpstream, ToolCall

pytestmark = pytest.mark.filterwarnings("ignore::contextfold.store.SQLiteVersionWarning")

RACERS = 20
SECRET = "sk-ant-api03-" + "Q" * 93


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    numbers = itertools.count(1)
    upstream = ScriptedUpstream(lambda protocol, body: Reply(text=f"reply {next(numbers)}"))
    store = tmp_path / "proxy.db"
    with serve(upstream) as upstream_url:
        config = ProxyConfig(upstream=upstream_url, window=16_000, store=store, tenant_salt=b"s")
        with serve(create_app(config)) as url:
            yield url, store


def _body(messages: list[dict[str, Any]], *, stream: bool = False) -> dict[str, Any]:
    return {"model": "claude-x", "max_tokens": 50, "stream": stream, "messages": messages}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_the_session_header_names_the_session_holding_the_reply(
    proxy: tuple[str, Path], stream: bool
) -> None:
    url, store_path = proxy
    headers = {"x-api-key": "racer"}
    history: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    first = httpx.post(url + "/v1/messages", json=_body(history), headers=headers)
    history += [
        {"role": "assistant", "content": first.json()["content"]},
        {"role": "user", "content": "the same question, twenty times at once"},
    ]

    def ask(_: int) -> httpx.Response:
        return httpx.post(
            url + "/v1/messages", json=_body(history, stream=stream), headers=headers, timeout=60
        )

    with ThreadPoolExecutor(max_workers=RACERS) as pool:
        responses = list(pool.map(ask, range(RACERS)))
    assert [r.status_code for r in responses] == [200] * RACERS
    with open_store(store_path) as store:
        for response in responses:
            text = streamed_text(response.text) if stream else response.json()["content"][0]["text"]
            session = response.headers["x-contextfold-session"]
            stored = [m for _, m in store.iter_messages(session)]
            assert stored[-1].role == "assistant" and stored[-1].text == text, session
            assert [m.role for m in stored] == ["user", "assistant", "user", "assistant"]
        assert store.check_integrity() == []
    assert len({r.headers["x-contextfold-session"] for r in responses}) == RACERS


def test_keyless_clients_continue_their_own_conversation_but_see_no_other(
    proxy: tuple[str, Path],
) -> None:
    url, _ = proxy
    history: list[dict[str, Any]] = [{"role": "user", "content": "keyless one"}]
    first = httpx.post(url + "/v1/messages", json=_body(history))
    session = first.headers["x-contextfold-session"]
    history += [
        {"role": "assistant", "content": first.json()["content"]},
        {"role": "user", "content": "go on"},
    ]
    second = httpx.post(url + "/v1/messages", json=_body(history))
    assert second.headers["x-contextfold-session"] == session  # its own conversation goes on
    listed = httpx.get(url + "/contextfold/sessions")
    assert listed.status_code == 401 and session not in listed.text
    named = httpx.post(
        url + "/v1/messages",
        json=_body([{"role": "user", "content": "another keyless client"}]),
        headers={"x-contextfold-session": session},
    )
    assert named.status_code == 404


def test_the_access_log_is_private_and_redacts_what_the_client_sent(tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    upstream = ScriptedUpstream(lambda protocol, body: Reply(text="ok"))
    store = tmp_path / "proxy.db"
    access = logging.getLogger("contextfold.proxy.access")
    before = list(access.handlers)
    log_to(str(log))
    try:
        with serve(upstream) as upstream_url:
            config = ProxyConfig(
                upstream=upstream_url, window=16_000, store=store, tenant_salt=b"s"
            )
            with serve(create_app(config)) as url:
                messages = [{"role": "user", "content": "hi"}]
                httpx.post(url + "/v1/messages", json={**_body(messages), "model": SECRET})
                bad_block = [{"role": "user", "content": [{"type": SECRET + "x" * 5000}]}]
                httpx.post(url + "/v1/messages", json=_body(bad_block))
    finally:
        for handler in set(access.handlers) - set(before):
            access.removeHandler(handler)
            handler.close()
    text = log.read_text()
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert "sk-ant-api03" not in text
    lines = [json.loads(line) for line in text.splitlines()]
    assert len(lines) >= 2
    assert all(len(v) <= 201 for line in lines for v in line.values() if isinstance(v, str))
    # Enums are printed as words (issue 30: the log said "Zone.OK").
    assert [line["zone"] for line in lines if "zone" in line] == ["ok"]


def test_a_reply_calling_engine_and_client_tools_is_one_write_with_its_head(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reply that calls an engine tool and a client tool is the client's: it, the engine
    tool's answer and the head the client's next request will carry commit together. A failure
    at the last of those writes (a crash there) leaves none of them, and the client's retry
    goes on in the same session instead of forking it."""
    both = Reply(
        text="reading",
        tool_calls=[
            ToolCall("engine_1", "read_result", {"ref": "blob_nope"}),
            ToolCall("client_1", "bash", {"cmd": "ls"}),
        ],
    )
    upstream = ScriptedUpstream(lambda protocol, body: both)
    store_path = tmp_path / "proxy.db"
    body = {
        **_body([{"role": "user", "content": "list the files"}]),
        "tools": [{"name": "bash", "input_schema": {"type": "object", "properties": {}}}],
    }
    failing = {"left": 1}
    real = SQLiteStore.add_to_metadata

    def add_to_metadata(self: SQLiteStore, *args: Any, **kwargs: Any) -> None:
        if failing["left"]:
            failing["left"] -= 1
            raise StoreError("the disk went away")
        real(self, *args, **kwargs)

    monkeypatch.setattr(SQLiteStore, "add_to_metadata", add_to_metadata)
    with serve(upstream) as upstream_url:
        config = ProxyConfig(
            upstream=upstream_url, window=16_000, store=store_path, tenant_salt=b"s"
        )
        with serve(create_app(config)) as url:
            headers = {"x-api-key": "both"}
            failed = httpx.post(url + "/v1/messages", json=body, headers=headers)
            assert failed.status_code == 500
            with open_store(store_path) as store:
                [session] = store.list_sessions()
                roles = [m.role for _, m in store.iter_messages(session.id)]
            assert roles == ["user"]  # the reply, the engine's answer and the head: none
            retried = httpx.post(url + "/v1/messages", json=body, headers=headers)
    assert retried.status_code == 200
    assert [b["name"] for b in retried.json()["content"] if b["type"] == "tool_use"] == ["bash"]
    with open_store(store_path) as store:
        [again] = store.list_sessions()
        assert again.id == session.id == retried.headers["x-contextfold-session"]
        stored = [m for _, m in store.iter_messages(session.id)]
        assert [m.role for m in stored] == ["user", "assistant", "tool"]
        assert store.check_integrity() == []
