"""Hostile request bodies through the real proxy app: never a 5xx, always the protocol's own
error shape, nothing stored for a refused request, and the proxy still serving afterwards.

A hundred and fifty hypothesis cases per protocol here; ``benchmarks/hostile.py`` runs ten thousand
(``CONTEXTFOLD_FUZZ_CASES`` raises the count here too).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings

from tests.proxy.hostile_bodies import PATHS, Protocol, ProxyHarness, bodies, proxy_harness

CASES = int(os.environ.get("CONTEXTFOLD_FUZZ_CASES", "150"))

pytestmark = pytest.mark.filterwarnings("ignore::contextfold.store.SQLiteVersionWarning")


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyHarness]:
    with proxy_harness(tmp_path_factory.mktemp("fuzz")) as made:
        yield made


@pytest.mark.parametrize("protocol", ["anthropic", "openai", "responses"])
def test_hostile_bodies_never_get_a_5xx_nor_leave_a_trace(
    harness: ProxyHarness, protocol: Protocol
) -> None:
    @settings(
        max_examples=CASES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(body=bodies(protocol))
    def one(body: dict[str, Any]) -> None:
        assert harness.check(protocol, body) is None

    one()
    assert harness.still_serving()


@pytest.mark.parametrize(
    ("protocol", "raw", "needle"),
    [
        (
            "anthropic",
            b'{"model": "m", "max_tokens": 5, "messages": [{"role": "user", '
            b'"content": [{"type": ["text"], "text": "x"}]}]}',
            "messages.0.content.0.type",
        ),
        (
            "anthropic",
            b'{"model": "m\\ud800", "max_tokens": 5, "messages": [{"role": "user", '
            b'"content": "x"}]}',
            "model",
        ),
        (
            "openai",
            b'{"model": "m", "stream": true, "stream_options": "x", "messages": '
            b'[{"role": "user", "content": "hi"}]}',
            "stream_options",
        ),
        (
            "openai",
            b'{"model": "m", "messages": [{"role": "user", "content": "a\\ud800b"}]}',
            "messages[0].content",
        ),
        ("openai", b'{"model": "m", "temperature": NaN, "messages": []}', "not valid JSON"),
        (
            "responses",
            b'{"model": "m", "input": [{"type": ["message"], "role": "user", "content": "x"}]}',
            "input[0].type",
        ),
        (
            "responses",
            b'{"model": "m", "input": [{"type": "function_call_output", "call_id": 7, '
            b'"output": "x"}]}',
            "input[0].call_id",
        ),
        ("responses", b'{"model": "m", "input": "a\\ud800b"}', "input"),
    ],
)
def test_the_sites_that_answered_500_now_name_the_field(
    harness: ProxyHarness, protocol: Protocol, raw: bytes, needle: str
) -> None:
    before = harness.fingerprint()
    response = harness.client.post(PATHS[protocol], content=raw, headers={"x-api-key": "k"})
    assert response.status_code == 400
    assert needle in response.json()["error"]["message"]
    if protocol != "anthropic" and "JSON" not in needle:
        assert response.json()["error"]["param"] == needle
    assert harness.fingerprint() == before


def test_a_client_that_leaves_mid_body_is_not_an_error(
    harness: ProxyHarness, caplog: pytest.LogCaptureFixture
) -> None:
    # Raw ASGI: the client sends part of its body, then the server hears it disconnect.
    incoming = [
        {"type": "http.request", "body": b'{"model": "m", "max_', "more_body": True},
        {"type": "http.disconnect"},
    ]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = _scope([(b"content-type", b"application/json"), (b"content-length", b"500")])
    before = harness.fingerprint()
    with caplog.at_level(logging.INFO, logger="contextfold.proxy"):
        harness.client.portal.call(harness.client.app, scope, receive, send)  # type: ignore[union-attr]
    [start] = [m for m in sent if m["type"] == "http.response.start"]
    assert start["status"] == 499
    assert "Traceback" not in caplog.text and "internal error" not in caplog.text
    assert harness.fingerprint() == before
    assert harness.still_serving()


def _scope(headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": PATHS["anthropic"],
        "raw_path": PATHS["anthropic"].encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }


def test_a_client_gone_before_its_stream_starts_leaves_its_session_free(
    harness: ProxyHarness,
) -> None:
    """The stream's first bytes cannot be sent: the request's claim on its session is given
    back at once (its body's generator never runs), so the client's retry continues the
    session instead of forking it."""
    body = {
        "model": "claude-x",
        "max_tokens": 20,
        "stream": True,
        "messages": [{"role": "user", "content": "gone before the first byte"}],
    }
    raw = json.dumps(body).encode()
    incoming = [{"type": "http.request", "body": raw, "more_body": False}]
    started: list[str] = []

    async def receive() -> dict[str, Any]:
        if incoming:
            return incoming.pop(0)
        await anyio.sleep_forever()  # the client is silent: its leaving shows when sending fails
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            started.append(dict(message["headers"])[b"x-contextfold-session"].decode())
            raise OSError("connection reset by peer")

    headers = [(b"content-type", b"application/json"), (b"x-api-key", b"gone-client")]
    with contextlib.suppress(Exception):
        harness.client.portal.call(harness.client.app, _scope(headers), receive, send)  # type: ignore[union-attr]
    [session] = started
    retried = harness.client.post(
        PATHS["anthropic"], json={**body, "stream": False}, headers={"x-api-key": "gone-client"}
    )
    assert retried.status_code == 200
    assert retried.headers["x-contextfold-session"] == session


def test_store_path_is_the_one_fingerprinted(harness: ProxyHarness) -> None:
    assert Path(harness.store_path).exists()
