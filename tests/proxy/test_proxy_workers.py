"""Several proxies on one store: requests of one conversation land on any of them.

Two proxy apps (as two workers or two machines would be) share a PostgreSQL database, or a
SQLite file; each request of a conversation goes to either at random. Nothing is forked, no
turn is lost, and a client's retry racing its original request loses nothing either. The
``contextfold proxy --workers 2`` command itself is run once, as a user would start it.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextfold.proxy import ProxyConfig, create_app
from contextfold.store import open_store
from tests.proxy.servers import serve
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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_command_serves_with_two_workers(tmp_path: Path) -> None:
    upstream = ScriptedUpstream(_answer)
    port = _free_port()
    log = tmp_path / "access.log"
    with serve(upstream) as upstream_url:
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
            str(tmp_path / "cli.db"),
            "--access-log",
            str(log),
        ]
        server = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
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
            history: list[dict[str, Any]] = []
            sessions = set()
            for turn in range(6):
                history.append({"role": "user", "content": f"turn {turn}"})
                response = httpx.post(
                    f"http://127.0.0.1:{port}/v1/messages",
                    json={"model": "claude-x", "max_tokens": 50, "messages": history},
                    headers={"x-api-key": "sk-ant-api03-" + "A" * 93},
                )
                assert response.status_code == 200, response.text
                sessions.add(response.headers["x-contextfold-session"])
                history.append({"role": "assistant", "content": response.json()["content"]})
        finally:
            server.terminate()
            _, stderr = server.communicate(timeout=30)
    assert len(sessions) == 1
    lines = log.read_text().splitlines()
    assert len([line for line in lines if '"path":"/v1/messages"' in line]) == 6
    assert "sk-ant-api03" not in log.read_text() + stderr
    assert "Traceback" not in stderr
