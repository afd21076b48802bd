"""Hostile request bodies for every protocol the proxy serves (Messages, Chat Completions and
Responses), and a harness that sends them through the proxy.

A body starts valid (a short conversation with tool calls, results, images and thinking, in the
protocol's own shape) and then takes one to three mutations, each drawn by hypothesis: a value
anywhere in it replaced by another JSON value (a wrong type, a list or an object where a block
``type`` belongs, a lone UTF-16 surrogate, a huge number), a key deleted, or an unknown key added.
:class:`ProxyHarness` sends each body to the real proxy app in process (Starlette's
``TestClient``, which also runs the app's startup: the store, the engines, the HTTP client) with a
scripted upstream on loopback behind it, and :meth:`ProxyHarness.check` holds each answer to the
promise: never a 5xx; a refusal in the protocol's own error shape; a refused request changes
nothing in the store. ``tests/proxy/test_hostile_bodies.py`` runs a few hundred cases per
protocol; ``benchmarks/hostile.py`` runs ten thousand and writes RESULTS.md.
"""

from __future__ import annotations

import copy
import json
import sqlite3
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from hypothesis import strategies as st
from starlette.testclient import TestClient

from contextfold.proxy import ProxyConfig, create_app
from tests.proxy.servers import serve
from tests.proxy.upstreams import Reply, ScriptedUpstream

__all__ = ["PATHS", "Protocol", "ProxyHarness", "bodies", "proxy_harness"]

Protocol = Literal["anthropic", "openai", "responses"]
PATHS: dict[Protocol, str] = {
    "anthropic": "/v1/messages",
    "openai": "/v1/chat/completions",
    "responses": "/v1/responses",
}

_TABLES = ("sessions", "messages", "edits", "events", "blobs", "engine_state_parts", "proxy_heads")

_texts = st.text(max_size=30)
_surrogates = st.sampled_from(["\ud800", "a\udfffb", "\udc00x", "model\ud83d"])
_type_names = st.sampled_from(
    [
        "text",
        "image",
        "tool_use",
        "tool_result",
        "thinking",
        "document",
        "image_url",
        "",
        "TEXT",
        "message",
        "input_text",
        "output_text",
        "input_image",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "reasoning",
        "compaction_trigger",
        "additional_tools",
        "namespace",
    ]
)
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    _texts,
    _surrogates,
    _type_names,
)
HOSTILE_VALUES = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(_texts, _type_names), inner, max_size=3),
    ),
    max_leaves=6,
)


def _anthropic_base(text: str, stream: bool) -> dict[str, Any]:
    return {
        "model": "claude-fuzz",
        "max_tokens": 64,
        "stream": stream,
        "system": [{"type": "text", "text": "be brief"}],
        "tools": [{"name": "bash", "input_schema": {"type": "object", "properties": {}}}],
        "messages": [
            {"role": "user", "content": text or "hi"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "plan", "signature": "sig"},
                    {"type": "text", "text": "running"},
                    {"type": "tool_use", "id": "tu_1", "name": "bash", "input": {"cmd": "ls"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "tu_1",
                        "content": [{"type": "text", "text": "a.txt"}],
                        "is_error": False,
                    },
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
                    },
                    {"type": "text", "text": "and now?"},
                ],
            },
        ],
    }


def _openai_base(text: str, stream: bool) -> dict[str, Any]:
    return {
        "model": "gpt-fuzz",
        "max_tokens": 64,
        "stream": stream,
        "stream_options": {"include_usage": True},
        "tools": [
            {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}
        ],
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": text or "hi"}]},
            {
                "role": "assistant",
                "content": "running",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "bash", "arguments": '{"cmd": "ls"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "and now?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                ],
            },
        ],
    }


def _responses_base(text: str, stream: bool) -> dict[str, Any]:
    """What Codex sends: instructions, a developer message, reasoning with a summary, a
    function call and its output, an assistant message, and function and custom tools."""
    return {
        "model": "gpt-fuzz",
        "instructions": "be brief",
        "stream": stream,
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "prompt_cache_key": "fuzz",
        "max_output_tokens": 64,
        "tools": [
            {
                "type": "function",
                "name": "shell",
                "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
                "strict": False,
            },
            {"type": "custom", "name": "apply_patch", "format": {"type": "text"}},
        ],
        "input": [
            {"type": "message", "role": "developer", "content": "sandboxed"},
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": text or "hi"}],
            },
            {
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": "plan"}],
                "encrypted_content": None,
            },
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "shell",
                "arguments": '{"cmd": "ls"}',
            },
            {"type": "function_call_output", "call_id": "c1", "output": "a.txt"},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "one file"}],
            },
            {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "and now?"},
                    {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
                ],
            },
        ],
    }


_BASES = {"anthropic": _anthropic_base, "openai": _openai_base, "responses": _responses_base}


def _places(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path to a value inside ``value`` (the body itself excluded)."""
    if isinstance(value, dict):
        for key, child in value.items():
            yield (*path, key)
            yield from _places(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield (*path, index)
            yield from _places(child, (*path, index))


def _container(body: Any, path: tuple[Any, ...]) -> Any:
    for step in path[:-1]:
        body = body[step]
    return body


@st.composite
def bodies(draw: st.DrawFn, protocol: Protocol) -> dict[str, Any]:
    """A body of ``protocol`` with 0 to 3 hostile mutations (0: the valid body itself)."""
    body = _BASES[protocol](draw(_texts), draw(st.booleans()))
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        places = list(_places(body))
        path = draw(st.sampled_from(places))
        holder = _container(body, path)
        action = draw(st.sampled_from(["replace", "replace", "replace", "delete", "add"]))
        if action == "replace":
            holder[path[-1]] = draw(HOSTILE_VALUES)
        elif action == "delete":
            del holder[path[-1]]
        elif isinstance(holder, dict):
            holder[draw(st.one_of(_texts, _surrogates))] = draw(HOSTILE_VALUES)
        else:
            holder.append(draw(HOSTILE_VALUES))
    return copy.deepcopy(body)


@dataclass
class ProxyHarness:
    """The proxy app, in process, with its store on disk (see the module docstring)."""

    client: TestClient
    store_path: Path
    outcomes: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    def fingerprint(self) -> tuple[int, ...]:
        """Rows per table: what a refused request must leave as it was."""
        with sqlite3.connect(self.store_path) as conn:
            return tuple(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in _TABLES)

    def send(self, protocol: Protocol, body: Any) -> tuple[int, Any]:
        """Send ``body`` (JSON with ASCII escapes, so lone surrogates travel as ``\\ud800``)."""
        response = self.client.post(
            PATHS[protocol],
            content=json.dumps(body).encode(),
            headers={"x-api-key": "fuzz-key", "content-type": "application/json"},
        )
        try:
            payload = response.json()
        except ValueError:
            payload = response.text
        return response.status_code, payload

    def check(self, protocol: Protocol, body: Any) -> str | None:
        """Send one body; what broke the promise, or None. Counts the outcome."""
        before = self.fingerprint()
        status, payload = self.send(protocol, body)
        self.outcomes[f"{protocol} {status}"] += 1
        problem = None
        if status >= 500:
            problem = f"HTTP {status}: {str(payload)[:300]}"
        elif status >= 400:
            problem = _shape_problem(protocol, payload)
            if problem is None and self.fingerprint() != before:
                problem = f"HTTP {status} but the store changed"
        if problem is not None:
            self.failures.append(f"{protocol}: {problem} for {json.dumps(body)[:300]}")
        return problem

    def still_serving(self) -> bool:
        """A valid request of each protocol is answered after everything sent before."""
        for protocol, base in _BASES.items():
            status, _ = self.send(protocol, base("still there?", False))  # type: ignore[arg-type]
            if status != 200:
                return False
        return True


def _shape_problem(protocol: Protocol, payload: Any) -> str | None:
    if not isinstance(payload, dict):
        return "the error is not a JSON object"
    error = payload.get("error")
    if not isinstance(error, dict) or not isinstance(error.get("message"), str):
        return "no error.message"
    if protocol == "anthropic" and (payload.get("type") != "error" or "type" not in error):
        return "not Anthropic's error shape"
    if protocol in ("openai", "responses") and not {"type", "param", "code"} <= error.keys():
        return "not OpenAI's error shape"
    return None


@contextmanager
def proxy_harness(tmp: Path) -> Iterator[ProxyHarness]:
    """The harness, with a scripted upstream on loopback answering every request."""
    upstream = ScriptedUpstream(lambda protocol, body: Reply(text="ok"))
    with serve(upstream) as upstream_url:
        store_path = tmp / "fuzz.db"
        config = ProxyConfig(
            upstream=upstream_url, window=16_000, store=store_path, tenant_salt=b"fuzz"
        )
        with TestClient(create_app(config), raise_server_exceptions=False) as client:
            yield ProxyHarness(client, store_path)
