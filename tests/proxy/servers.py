"""Run an ASGI app on a real loopback port for the length of a ``with`` block.

The proxy tests need real HTTP servers, not in-process transports: the official SDKs and Claude
Code (a separate process) talk to them over TCP, and streaming must go through real sockets to
catch what buffering would hide. :func:`serve` starts uvicorn in a daemon thread on a socket it
binds itself to ``127.0.0.1:0``, so the kernel picks a free port and no other process can take it
between choosing and listening (the race a "find a free port, then start the server" helper has).
:class:`Recorder` wraps an app to record what its clients sent and got;
:func:`streamed_text` reads the text of a Messages stream a client got.
"""

from __future__ import annotations

import contextvars
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["RecordedExchange", "Recorder", "serve", "streamed_text"]


def streamed_text(body: str) -> str:
    """The text of a streamed Messages reply (its server-sent events, as received)."""
    texts = []
    for line in body.splitlines():
        if line.startswith("data: "):
            event = json.loads(line[6:])
            if event.get("type") == "content_block_delta":
                texts.append(event["delta"].get("text", ""))
    return "".join(texts)


STARTUP_TIMEOUT = 30.0
"""Seconds uvicorn gets to start listening before :func:`serve` gives up."""

SHUTDOWN_TIMEOUT = 10.0
"""Seconds a graceful stop may take (open streams are given this long) before it is forced."""


@contextmanager
def serve(app: ASGIApp, *, context: contextvars.Context | None = None) -> Iterator[str]:
    """Serve ``app`` on loopback; yields its base URL ``"http://127.0.0.1:PORT"``.

    ``context``: the context variables the server runs with (its requests, and the worker threads
    they hand work to, get copies); by default none, as in any new thread. A benchmark passes one
    made inside :func:`contextfold.messages.reproducible_ids`, so the ids the app makes are the
    same on every run.

    The server stops when the block exits, also on an exception: first gracefully (uvicorn closes
    idle connections and lets running responses finish), then forcibly after
    :data:`SHUTDOWN_TIMEOUT`.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # uvicorn writes a response's head and body separately; on a socket handed to it without
    # TCP_NODELAY, Nagle holds the body until the client's delayed ACK: 40 ms per exchange.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan="auto",  # the proxy opens its store and HTTP client at startup
        timeout_graceful_shutdown=int(SHUTDOWN_TIMEOUT),
    )
    server = uvicorn.Server(config)
    # Server.run skips installing signal handlers outside the main thread, so a test's Ctrl-C
    # still reaches pytest.
    run = server.run if context is None else partial(context.run, server.run)
    thread = threading.Thread(
        target=run, kwargs={"sockets": [sock]}, name=f"uvicorn-{port}", daemon=True
    )
    thread.start()
    try:
        _wait_started(server, thread)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(SHUTDOWN_TIMEOUT)
        if thread.is_alive():
            server.force_exit = True
            thread.join(SHUTDOWN_TIMEOUT)
        sock.close()


def _wait_started(server: uvicorn.Server, thread: threading.Thread) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("uvicorn stopped before it started listening (see its log above)")
        if time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"uvicorn did not start within {STARTUP_TIMEOUT:g}s")
        time.sleep(0.01)


@dataclass
class RecordedExchange:
    """One HTTP request an app behind a :class:`Recorder` received, and its response."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes
    status: int | None = None
    response: bytearray = field(default_factory=bytearray)

    def json(self) -> Any:
        """The request body parsed as JSON (None when it is empty or not JSON)."""
        try:
            return json.loads(self.body) if self.body else None
        except ValueError:
            return None


class Recorder:
    """An ASGI app that passes everything to ``app`` and records each HTTP request with its
    response (streamed bodies included) in :attr:`exchanges`: what a client really sent to,
    and got from, a server the test does not own (the proxy)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.exchanges: list[RecordedExchange] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan: the app's startup and shutdown, untouched
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        record = RecordedExchange(
            method=scope["method"],
            path=scope["path"],
            query=scope.get("query_string", b"").decode("latin-1"),
            headers=headers,
            body=b"".join(chunks),
        )
        self.exchanges.append(record)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": record.body, "more_body": False}
            return await receive()

        async def capture(message: Message) -> None:
            if message["type"] == "http.response.start":
                record.status = message["status"]
            elif message["type"] == "http.response.body":
                record.response.extend(message.get("body", b""))
            await send(message)

        await self.app(scope, replay, capture)
