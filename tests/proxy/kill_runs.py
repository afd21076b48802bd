"""SIGKILL the proxy in the middle of requests, restart it, retry, and count what the store kept.

A client holds one conversation. For each turn it sends its history to a proxy process (uvicorn
serving ``create_app``), and during most requests the proxy is SIGKILLed; the client then starts
a new proxy on the same store and sends the same request again, as a client retries a request
that got no answer. The kills take turns among three moments (:data:`MOMENTS`):

- *at random*: a timer, during a plain JSON request; the scripted upstream answers after a short
  delay, so kills land before, during and after the writes of a turn;
- *mid-reply*: a streamed request, killed when the client has the first words of the reply
  (the reply is usually not recorded yet: the retry goes on in the session);
- *recorded, undelivered*: a streamed request, killed when the client sees ``message_delta``,
  which the proxy sends only once the reply and its head are recorded: the client never gets
  the end of the stream, and its retry repeats a request the session holds an answer to.

Afterwards :func:`judge` counts:

- *lost*: replies the client received that the session named in their header does not hold;
- forks, by kind: *answered retry* (the parent holds a reply the killed request recorded but
  never delivered: a fork is the right answer to a retry of an answered request) and *needless*
  (the parent ended where the retry continued it);
- *partial* sessions and heads pointing nowhere, as ``check_integrity()`` reports them.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

from contextfold.store import open_store
from tests.proxy.servers import serve
from tests.proxy.upstreams import Reply, ScriptedUpstream

__all__ = ["MOMENTS", "KillReport", "kill_run"]

MOMENTS = ("at random", "mid-reply", "recorded, undelivered")
"""When the kills land, in turn (see the module docstring)."""

_KILLED_AT_EVENT = {"mid-reply": "content_block_delta", "recorded, undelivered": "message_delta"}
"""The event of the client's stream upon which it kills the proxy."""

_SERVER = """
import sys, uvicorn
from contextfold.proxy import ProxyConfig, create_app
config = ProxyConfig(upstream=sys.argv[1], window=16000, store=sys.argv[2], tenant_salt=b"k")
uvicorn.run(create_app(config), host="127.0.0.1", port=int(sys.argv[3]), log_level="error")
"""


@dataclass
class KillReport:
    """What :func:`kill_run` saw and found."""

    kills: int = 0
    moments: Counter[str] = field(default_factory=Counter)
    """Kills by moment (:data:`MOMENTS`)."""
    replies: int = 0
    lost: int = 0
    forks: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _Proxy:
    def __init__(self, upstream: str, store: str) -> None:
        self.upstream, self.store = upstream, store
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self) -> None:
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}"
        env = {**os.environ, "PYTHONWARNINGS": "ignore"}
        self.process = subprocess.Popen(
            [sys.executable, "-c", _SERVER, self.upstream, self.store, str(port)],
            env=env,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(self.url + "/contextfold/health", timeout=1)
                return
            except httpx.TransportError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError("the proxy did not start") from None
                time.sleep(0.1)

    def kill(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)


def kill_run(store: str, *, kills: int, seed: int = 29, delay: float = 0.03) -> KillReport:
    """``kills`` SIGKILLs of a proxy on ``store`` amid one conversation (see the module)."""
    rng = random.Random(seed)

    def answer(protocol: str, body: dict[str, Any]) -> Reply:
        time.sleep(delay)
        return Reply(text=f"reply to {len(body['messages'])} messages, {rng.random():.6f}")

    report = KillReport()
    received: list[tuple[str, str]] = []
    with serve(ScriptedUpstream(answer)) as upstream:
        proxy = _Proxy(upstream, store)
        proxy.start()
        history: list[dict[str, Any]] = []
        try:
            turn = 0
            while report.kills < kills:
                turn += 1
                history.append({"role": "user", "content": f"turn {turn}: " + "words " * 40})
                timer = None
                if rng.random() < 0.8:  # most turns have a kill in them
                    moment = MOMENTS[report.kills % len(MOMENTS)]
                    report.kills += 1
                    report.moments[moment] += 1
                    if moment == "at random":
                        timer = threading.Timer(rng.uniform(0, 3 * delay), proxy.kill)
                        timer.start()
                    else:
                        _stream_until(proxy, history, _KILLED_AT_EVENT[moment])
                reply = _ask_until_answered(proxy, history)
                if timer is not None:
                    timer.join()
                report.replies += 1
                received.append((reply.headers["x-contextfold-session"], _text(reply)))
                history.append({"role": "assistant", "content": reply.json()["content"]})
        finally:
            proxy.stop()
    _judge(store, received, report)
    return report


def _stream_until(proxy: _Proxy, history: list[dict[str, Any]], event: str) -> None:
    """Send the request streamed, and kill the proxy when ``event`` arrives: the client keeps
    nothing of that stream, which never ended for it."""
    body = {"model": "claude-x", "max_tokens": 50, "stream": True, "messages": history}
    try:
        with httpx.stream(
            "POST", proxy.url + "/v1/messages", json=body, headers={"x-api-key": "k"}, timeout=30
        ) as response:
            for line in response.iter_lines():
                if line.startswith("data: ") and json.loads(line[6:]).get("type") == event:
                    proxy.kill()
                    return
    except httpx.TransportError:
        pass
    proxy.kill()  # the stream ended without the event (an error): killed all the same


def _ask_until_answered(proxy: _Proxy, history: list[dict[str, Any]]) -> httpx.Response:
    body = {"model": "claude-x", "max_tokens": 50, "messages": history}
    for _ in range(20):
        try:
            response = httpx.post(
                proxy.url + "/v1/messages", json=body, headers={"x-api-key": "k"}, timeout=30
            )
            if response.status_code == 200:
                return response
        except httpx.TransportError:
            pass
        if proxy.process is not None and proxy.process.poll() is not None:
            proxy.start()  # killed: a new proxy on the same store, as a supervisor would
    raise RuntimeError("the proxy never answered")


def _text(response: httpx.Response) -> str:
    return "".join(b.get("text", "") for b in response.json()["content"])


def _judge(store_url: str, received: list[tuple[str, str]], report: KillReport) -> None:
    options = {} if store_url.startswith("postgres") else {"warn_wal_reset": False}
    with open_store(store_url, **options) as store:
        for session_id, text in received:
            texts = [m.text for _, m in store.iter_messages(session_id) if m.role == "assistant"]
            if text not in texts:
                report.lost += 1
        for info in store.list_sessions():
            if info.parent_id is None:
                continue
            parent = [m for _, m in store.iter_messages(info.parent_id)]
            child = [m for _, m in store.iter_messages(info.id)]
            # The fork repeats the parent's history up to the request; what follows it in the
            # parent says why the retry forked.
            shared = 0
            while (
                shared < min(len(parent), len(child))
                and parent[shared].text == child[shared].text
                and parent[shared].role == child[shared].role
            ):
                shared += 1
            after = parent[shared:]
            kind = "answered retry" if any(m.role == "assistant" for m in after) else "needless"
            report.forks[kind] += 1
        report.problems = store.check_integrity()
