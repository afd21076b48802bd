"""The proxy in front of a real llama.cpp server (Gemma 3 270M) as its OpenAI-protocol upstream.

The official ``openai`` SDK talks to the proxy; the proxy talks to the real server. What the
model says does not matter (replies are a few tokens); what is checked is the plumbing: real
usage comes back, a history too big for the server's window gets through because the engine
shrank it, and the server's real ``exceed_context_size_error`` is recovered from.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from contextfold.engine import ContextEngine
from contextfold.model_registry import ModelInfo
from contextfold.proxy import ProxyConfig, create_app
from contextfold.store import open_store
from tests.proxy.servers import serve
from tests.real_model.conftest import LlamaServerFactory

openai = pytest.importorskip("openai")

REPLY_TOKENS = 8
"""max_tokens of every request: enough to see a reply, cheap on 2 cores."""

SMALL_N_CTX = 2048
"""The server the overflow-recovery test fills: the proxy is told a larger window than this
(at 1024, the system prompt, the tools and the engine's own tools leave too little room)."""

SESSION_HEADER = "x-contextfold-session"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the repository.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]
_BLOB_REF = re.compile(r'ref="(ref_[0-9a-f]+)"')


@contextmanager
def proxy_for(upstream: str, window: int, store: Path) -> Iterator[Any]:
    """An ``openai.OpenAI`` client pointed at a proxy in front of ``upstream``."""
    config = ProxyConfig(upstream=upstream, window=window, store=store, tenant_salt=b"real")
    with serve(create_app(config)) as url:
        yield openai.OpenAI(base_url=url + "/v1", api_key="sk-local", max_retries=0)


def big_output(lines: int) -> str:
    """A tool output of varied lines (no two alike, so it cannot be deduplicated away)."""
    return "\n".join(
        f"src/module_{i:04d}.py:{i * 7 % 311}: def handler_{i}(request, retries={i % 5}) -> "
        f"Response  # checksum {i * 2654435761 % 4294967296:08x}"
        for i in range(lines)
    )


def history_with_output(output: str) -> list[dict[str, Any]]:
    """A short agent history whose one tool result is ``output``."""
    call = {
        "id": "call_read_1",
        "type": "function",
        "function": {"name": "read_file", "arguments": json.dumps({"path": "index.txt"})},
    }
    return [
        {"role": "system", "content": "You are a coding agent. Be brief."},
        {"role": "user", "content": "Find the handler that retries most."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_read_1", "content": output},
        {"role": "user", "content": "Name one handler."},
    ]


def long_history(turns: int, chars: int) -> list[dict[str, Any]]:
    """Many small tool exchanges: each output small enough for the engine to keep whole, all of
    them together more than :data:`SMALL_N_CTX`."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. Be brief."},
        {"role": "user", "content": "Read the index, part by part."},
    ]
    for turn in range(turns):
        call_id = f"call_part_{turn}"
        arguments = json.dumps({"path": f"index_{turn}.txt"})
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "read_file", "arguments": arguments},
                    }
                ],
            }
        )
        part = big_output(20 * (turn + 1))[-chars:]  # different lines each turn
        messages.append({"role": "tool", "tool_call_id": call_id, "content": part})
    messages.append({"role": "user", "content": "Name one handler."})
    return messages


def stored_full_output(store_path: Path, session_id: str, call_id: str) -> str:
    """The full text the store keeps for one tool result: its content, or the blob that the
    stored (cut) content names."""
    with open_store(store_path) as store:
        for _, message in store.iter_messages(session_id):
            for result in message.tool_results:
                if result.call_id != call_id:
                    continue
                refs = _BLOB_REF.findall(result.content)
                return store.get_blob(session_id, refs[0]) if refs else result.content
    raise AssertionError(f"no stored result for {call_id}")


def test_the_sdk_gets_a_real_completion_with_usage(
    llama_server: LlamaServerFactory, tmp_path: Path
) -> None:
    server = llama_server()
    with proxy_for(server.base_url, server.n_ctx, tmp_path / "proxy.db") as client:
        raw = client.chat.completions.with_raw_response.create(
            model=server.model,
            messages=[{"role": "user", "content": "Say hello."}],
            max_tokens=REPLY_TOKENS,
        )
        completion = raw.parse()
        assert raw.headers[SESSION_HEADER].startswith("ses_")
        assert completion.choices[0].message.role == "assistant"
        assert completion.usage is not None
        assert completion.usage.prompt_tokens > 0
        assert 0 < completion.usage.completion_tokens <= REPLY_TOKENS

        stream = client.chat.completions.create(
            model=server.model,
            messages=[{"role": "user", "content": "Count to three."}],
            max_tokens=REPLY_TOKENS,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    usage = [c.usage for c in chunks if c.usage is not None]
    assert text, "the stream carried no text"
    assert len(usage) == 1 and usage[0].prompt_tokens > 0
    assert 0 < usage[0].completion_tokens <= REPLY_TOKENS


def test_a_history_over_the_servers_window_goes_through_shrunk(
    llama_server: LlamaServerFactory, tmp_path: Path
) -> None:
    server = llama_server()
    output = big_output(400)  # several times the server's 2048-token window
    store = tmp_path / "proxy.db"
    with proxy_for(server.base_url, server.n_ctx, store) as client:
        raw = client.chat.completions.with_raw_response.create(
            model=server.model,
            messages=history_with_output(output),
            tools=TOOLS,
            max_tokens=REPLY_TOKENS,
        )
        completion = raw.parse()
    assert completion.choices, "the client got no reply"
    assert completion.usage is not None and 0 < completion.usage.prompt_tokens <= server.n_ctx
    assert stored_full_output(store, raw.headers[SESSION_HEADER], "call_read_1") == output


@pytest.mark.xfail(
    strict=False,
    reason=(
        "issue 26 left open: after the server's overflow teaches its 2,040-token window, the "
        "hard compaction shrinks the newest tool result (ShrinkToFit, room from the learned "
        "window) and the proxy's latest-turn check then refuses the request, where summarizing "
        "the older results alone would have made it fit"
    ),
)
def test_the_servers_real_overflow_error_is_recovered_from(
    llama_server: LlamaServerFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = llama_server(SMALL_N_CTX)
    proxy_window = 8 * SMALL_N_CTX  # what the proxy is told: far more than the server has
    store = tmp_path / "proxy.db"
    caplog.set_level(logging.INFO, logger="contextfold.proxy.access")
    with proxy_for(server.base_url, proxy_window, store) as client:
        raw = client.chat.completions.with_raw_response.create(
            model=server.model,
            # Fits the proxy's window whole, not the server's.
            messages=long_history(6, 1_800),
            tools=TOOLS,
            max_tokens=REPLY_TOKENS,
        )
        completion = raw.parse()
    assert raw.http_response.status_code == 200 and completion.choices
    session_id = raw.headers[SESSION_HEADER]

    entries = [json.loads(r.getMessage()) for r in caplog.records if r.name.endswith("access")]
    (entry,) = [e for e in entries if e.get("session") == session_id]
    assert entry["overflow_recovered"] is True
    assert entry["upstream_calls"] == 2  # refused once, then the smaller request went through

    # The limit the server stated is the session's window from now on.
    model = ModelInfo(
        name=server.model,
        context_window=proxy_window,
        provider="openai",
        max_output_tokens=REPLY_TOKENS,
        tokenizer="o200k_base",
    )
    with open_store(store) as opened:
        engine = ContextEngine(model, store=opened)
        try:
            assert engine.resume(session_id).learned_window == SMALL_N_CTX
        finally:
            engine.close()
