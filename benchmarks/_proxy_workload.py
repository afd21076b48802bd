"""The conversation the proxy benchmarks send, and ``contextfold proxy`` as a subprocess.

A client grows one conversation of user / assistant tool_use / tool_result turns (Anthropic
messages API, not streamed) and resends the whole history on every request, as coding agents
do. The scripted upstream always answers with one more tool call, so the conversation goes on
for as long as the benchmark wants.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from benchmarks._results import ROOT
from tests.proxy.upstreams import Protocol, Reply, ToolCall, count_input_tokens, default_counter

__all__ = [
    "HEADERS",
    "MODEL",
    "WINDOW",
    "append_turn",
    "contextfold_proxy",
    "free_port",
    "history_tokens",
    "post",
    "request_body",
    "tool_output",
    "tool_script",
]

MODEL = "claude-sonnet-4-5"
HEADERS = {"anthropic-version": "2023-06-01", "content-type": "application/json"}
WINDOW = 200_000
"""The window the proxy is given: big enough that it forwards every history measured."""

_WORDS = (
    "src", "tests", "build", "config", "module", "handler", "request", "response", "session",
    "store", "engine", "token", "window", "error", "warning", "import", "return", "value",
    "class", "def", "async", "await", "path", "file", "line", "column", "status", "ok",
    "passed", "failed", "retry", "cache", "index", "message", "context", "budget", "summary",
    "output", "input", "result",
)  # fmt: skip


def tool_output(rng: random.Random, words: int) -> str:
    """A tool output of roughly ``words`` words, shaped like a listing or a log."""
    lines = []
    while words > 0:
        n = rng.randint(4, 12)
        lines.append(f"{rng.randint(1, 999):>4}: " + " ".join(rng.choice(_WORDS) for _ in range(n)))
        words -= n
    return "\n".join(lines)


def tool_script(protocol: Protocol, body: dict[str, Any]) -> Reply:
    """Always one more tool call, its id derived from the history's length (deterministic, so the
    direct call and the proxied one get the same answer)."""
    step = len(body.get("messages") or [])
    return Reply(
        text="Next I will look at the next file.",
        tool_calls=[ToolCall(f"toolu_{step:06d}", "bash", {"command": f"cat file_{step}.py"})],
    )


def request_body(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 1024, "messages": messages, **extra}


def append_turn(history: list[dict[str, Any]], reply: dict[str, Any], output: str) -> None:
    """Append the assistant's reply (as received) and the results of its tool calls."""
    history.append({"role": "assistant", "content": reply["content"]})
    results = [
        {"type": "tool_result", "tool_use_id": block["id"], "content": output}
        for block in reply["content"]
        if block["type"] == "tool_use"
    ]
    history.append({"role": "user", "content": results})


def history_tokens(history: list[dict[str, Any]]) -> int:
    return count_input_tokens("anthropic", request_body(history), default_counter("anthropic"))


def post(client: httpx.Client, history: list[dict[str, Any]]) -> dict[str, Any]:
    """The reply to ``history``, sent as one Messages API request; RuntimeError on an error."""
    response = client.post("/v1/messages", json=request_body(history), headers=HEADERS)
    if response.status_code != 200:
        raise RuntimeError(f"{client.base_url}: HTTP {response.status_code}: {response.text[:300]}")
    body: dict[str, Any] = response.json()
    return body


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def contextfold_proxy(upstream: str, store: Path, workers: int) -> Iterator[str]:
    """``contextfold proxy`` as a subprocess; yields its base URL once it answers."""
    port = free_port()
    command = [
        str(Path(sys.executable).with_name("contextfold")),
        "proxy",
        "--upstream", upstream,
        "--window", str(WINDOW),
        "--port", str(port),
        "--store", str(store),
        "--workers", str(workers),
        "--access-log", str(store.with_suffix(".log")),
    ]  # fmt: skip
    env = {**os.environ, "CONTEXTFOLD_HOME": str(store.parent)}
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"contextfold proxy exited: {process.stderr.read()!r}")  # type: ignore[union-attr]
            try:
                if httpx.get(f"{url}/contextfold/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("contextfold proxy did not answer within 60 s")
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
