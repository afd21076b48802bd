"""Several proxies on one store: requests of one conversation land on any of them.

Two proxy apps (as two workers or two machines would be) share a PostgreSQL database, or a
SQLite file; each request of a conversation goes to either at random. Nothing is forked, no
turn is lost, and a client's retry racing its original request loses nothing either. Identical
streamed requests racing on both get each a session header naming the session that holds its
reply: the header goes out before the reply exists, so the session is claimed in the store
first. The ``contextfold proxy --workers 2`` command itself is run, as a user would start it.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextfold.proxy import ProxyConfig, create_app
from contextfold.store import open_store
from tests.proxy.servers import serve, streamed_text
from tests.proxy.upstreams import Reply, ScriptedUpstream
from tests.store.conftest import postgres_database  # noqa: F401 (a fixture, used by name)

POSTGRES_URL_ENV = "CONTEXTFOLD_TEST_POSTGRES_URL"
CONVERSATIONS = 8
TURNS = 5


def _answer(protocol: str, body: dict[str, Any]) -> Reply:
    return Reply(text=f"reply to message {len(body['messages'])}")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "shared.db")
    url: str = request.getfixturevalue("postgres_database")  # a fresh database, dropped after
    return url


@pytest.mark.filterwarnings("ignore::contextfold.store.SQLiteVersionWarning")
def test_two_proxies_on_one_store_keep_every_conversation_whole(store_url: str) -> None:
    upstream = ScriptedUpstream(_answer)
    with serve(upstream) as upstream_url:
        config = ProxyConfig(
            upstream=upstream_url, window=16_000, store=store_url, tenant_salt=b"s"
        )
        with serve(create_app(config)) as first, serve(create_app(config)) as second:
            workers = [first, second]

            def converse(index: int) -> list[str]:
                rng = random.Random(index)
                history: list[dict[str, Any]] = []
                sessions = []
                with httpx.Client(headers={"x-api-key": f"key-{index % 3}"}) as client:
                    for turn in range(TURNS):
                        history.append({"role": "user", "content": f"conversation {index}, {turn}"})
                        response = client.post(
                            rng.choice(workers) + "/v1/messages",
                            json={"model": "claude-x", "max_tokens": 50, "messages": history},
                        )
                        assert response.status_code == 200, response.text
                        sessions.append(response.headers["x-contextfold-session"])
                        history.append({"role": "assistant", "content": response.json()["content"]})
                return sessions

            with ThreadPoolExecutor(max_workers=CONVERSATIONS) as pool:
                results = list(pool.map(converse, range(CONVERSATIONS)))

            # A client's retry racing its original, on the other worker: both are answered.
            retry = {
                "model": "claude-x",
                "max_tokens": 50,
                "messages": [{"role": "user", "content": "asked twice at once"}],
            }
            with ThreadPoolExecutor(max_workers=2) as pool:
                racing = list(
                    pool.map(
                        lambda url: httpx.post(
                            url + "/v1/messages", json=retry, headers={"x-api-key": "key-r"}
                        ),
                        workers,
                    )
                )
    assert all(len(set(sessions)) == 1 for sessions in results)  # no conversation forked
    assert [r.status_code for r in racing] == [200, 200]
    with open_store(store_url) as store:
        for sessions in results:
            stored = [m for _, m in store.iter_messages(sessions[0])]
            assert [m.role for m in stored] == ["user", "assistant"] * TURNS  # no turn lost
            assert store.get_session(sessions[0]).parent_id is None
        raced = {r.headers["x-contextfold-session"] for r in racing}
        for session_id in raced:  # each reply is kept, once, after the question
            roles = [m.role for _, m in store.iter_messages(session_id)]
            assert roles == ["user", "assistant"]


RACERS = 12


def _numbered(delay: float) -> ScriptedUpstream:
    """An upstream whose every reply is told apart by its number, each given after ``delay``
    (the script holds the upstream's loop: requests queue there, claims held, as a slow model's
    would)."""
    numbers = itertools.count(1)
    lock = threading.Lock()

    def answer(protocol: str, body: dict[str, Any]) -> Reply:
        time.sleep(delay)
        with lock:
            return Reply(text=f"reply number {next(numbers)}")

    return ScriptedUpstream(answer)


def _race(urls: list[str], key: str) -> list[httpx.Response]:
    """:data:`RACERS` identical streamed requests at once, spread over ``urls``, each on a
    connection of its own (one worker of several takes each connection)."""
    body = {
        "model": "claude-x",
        "max_tokens": 50,
        "stream": True,
        "messages": [{"role": "user", "content": f"asked {RACERS} times at once ({key})"}],
    }

    def ask(index: int) -> httpx.Response:
        url = urls[index % len(urls)] + "/v1/messages"
        return httpx.post(url, json=body, headers={"x-api-key": key}, timeout=120)

    with ThreadPoolExecutor(max_workers=RACERS) as pool:
        return list(pool.map(ask, range(RACERS)))


def _assert_headers_name_the_reply(store_url: str, responses: list[httpx.Response]) -> None:
    assert [r.status_code for r in responses] == [200] * RACERS
    with open_store(store_url) as store:
        for response in responses:
            text = streamed_text(response.text)
            session = response.headers["x-contextfold-session"]
            stored = [m for _, m in store.iter_messages(session)]
            assert [m.role for m in stored] == ["user", "assistant"], session
            assert stored[-1].text == text, f"{session} does not hold {text!r}"
        assert store.check_integrity() == []
    # Every reply its own session: one holds the first, the others are forks of it.
    assert len({r.headers["x-contextfold-session"] for r in responses}) == RACERS


@pytest.mark.filterwarnings("ignore::contextfold.store.SQLiteVersionWarning")
def test_identical_streams_on_two_proxies_each_name_the_session_holding_their_reply(
    store_url: str,
) -> None:
    with serve(_numbered(0.02)) as upstream_url:
        config = ProxyConfig(
            upstream=upstream_url, window=16_000, store=store_url, tenant_salt=b"s"
        )
        with serve(create_app(config)) as first, serve(create_app(config)) as second:
            responses = _race([first, second], "key-streams")
    _assert_headers_name_the_reply(store_url, responses)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def _proxy_command(
    tmp_path: Path, upstream_url: str, store: str, log: Path
) -> Iterator[tuple[str, list[str]]]:
    """``contextfold proxy --workers 2`` as a user starts it; its URL, and (after the block)
    what it wrote to standard error."""
    port = _free_port()
    env = {**os.environ, "CONTEXTFOLD_HOME": str(tmp_path / "home")}
    command = [
        sys.executable,
        "-c",
        "from contextfold.cli import main; main()",
        "proxy",
        "--upstream",
        upstream_url,
        "--window",
        "16000",
        "--port",
        str(port),
        "--workers",
        "2",
        "--store",
        store,
        "--access-log",
        str(log),
    ]
    server = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    stderr: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/contextfold/health", timeout=1)
                break
            except httpx.TransportError:
                assert server.poll() is None, server.stderr.read() if server.stderr else ""
                assert time.monotonic() < deadline, "the proxy did not start"
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}", stderr
    finally:
        server.terminate()
        stderr.append(server.communicate(timeout=30)[1])


def test_the_command_serves_with_two_workers(tmp_path: Path) -> None:
    upstream = ScriptedUpstream(_answer)
    log = tmp_path / "access.log"
    with (
        serve(upstream) as upstream_url,
        _proxy_command(tmp_path, upstream_url, str(tmp_path / "cli.db"), log) as (url, err),
    ):
        history: list[dict[str, Any]] = []
        sessions = set()
        for turn in range(6):
            history.append({"role": "user", "content": f"turn {turn}"})
            response = httpx.post(
                f"{url}/v1/messages",
                json={"model": "claude-x", "max_tokens": 50, "messages": history},
                headers={"x-api-key": "sk-ant-api03-" + "A" * 93},
            )
            assert response.status_code == 200, response.text
            sessions.add(response.headers["x-contextfold-session"])
            history.append({"role": "assistant", "content": response.json()["content"]})
    assert len(sessions) == 1
    lines = log.read_text().splitlines()
    assert len([line for line in lines if '"path":"/v1/messages"' in line]) == 6
    assert "sk-ant-api03" not in log.read_text() + err[0]
    assert "Traceback" not in err[0]


def test_identical_streams_on_two_workers_each_name_the_session_holding_their_reply(
    tmp_path: Path,
) -> None:
    """The race across worker processes: identical streamed requests, until both workers have
    served some of one race (which worker takes a connection is the kernel's choice)."""
    store = str(tmp_path / "workers.db")
    log = tmp_path / "access.log"
    with (
        serve(_numbered(0.02)) as upstream_url,
        _proxy_command(tmp_path, upstream_url, store, log) as (url, err),
    ):
        for attempt in range(5):
            responses = _race([url], f"key-{attempt}")
            _assert_headers_name_the_reply(store, responses)
            served = [json.loads(line) for line in log.read_text().splitlines()]
            if len({e["worker"] for e in served if e["path"] == "/v1/messages"}) == 2:
                break
        else:
            pytest.skip("one worker took every connection of five races")
    assert "Traceback" not in err[0]
