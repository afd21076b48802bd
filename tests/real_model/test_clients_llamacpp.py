"""Real agents through the proxy to a real llama.cpp server (Gemma 3 270M) that serves
``/v1/responses`` and ``/v1/messages`` itself (issue 27, "the real llama.cpp tier").

The model is for plumbing, not quality: a 270M base model says noise and does not call tools
on demand (llama.cpp's ``chatml`` template has no tool-call format, and ``tool_choice:
required`` does not force one), so no plan is scripted. What is checked is what the plumbing
must do whatever the model says: the client's requests reach the real server through the
proxy in the client's own protocol, the server's replies (text, usage) come back in a shape
the client accepts, the client exits 0 both times (Codex's ``exec`` then ``exec resume --last``,
Claude Code's ``-p`` then ``-p --continue``), and the proxy keeps the conversation as one stored
session, its second run continuing the first. The tool turns themselves are the scripted tests'
(tests/clients), through the same proxy code.

On 2 shared cores, prompt evaluation runs at roughly 50 tokens a second: Codex's first request
(about 6,000 tokens: its prompt and tools) takes minutes. Hence ``slow``, and one test per client.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.clients.conftest import installed, write_codex_config
from tests.clients.harness import (
    ClientRun,
    ProxyRun,
    RunFigures,
    clean_env,
    conversation_sessions,
    proxied,
    record_figures,
    run_client,
)
from tests.real_model.conftest import LlamaServerFactory

pytestmark = pytest.mark.slow

N_CTX = 16_384
"""The server's context (the proxy plans against the same window): room for Codex's prompt
and tools, and for a resumed conversation."""

TIMEOUT = 1_500.0
"""Seconds one client run may take: prompt evaluation on 2 shared cores is slow."""

MARK = "cf-real-7d1e"
"""A word of each task, to find the conversation in the proxy's store."""


def answered(proxy: ProxyRun, path: str) -> list[int]:
    """The statuses the proxy answered the client's requests on ``path`` with."""
    return [e.status or 0 for e in proxy.recorder.exchanges if e.path == path]


def upstream_lines(proxy: ProxyRun) -> list[dict[str, Any]]:
    """Access-log lines of the model requests (those that went upstream)."""
    return [line for line in proxy.access_log if line.get("upstream_protocol")]


def histories(proxy: ProxyRun) -> str:
    """What each model request carried, message by message (role, then each block's type and
    the ends of its text), to see where a resumed conversation differs from the stored one."""
    lines = []
    for exchange in proxy.model_exchanges():
        body = exchange.json() or {}
        lines.append(f"request {exchange.number} {exchange.path}:")
        for message in body.get("messages") or body.get("input") or []:
            content = message.get("content")
            blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
            shown = [
                f"{b.get('type')}:{str(b.get('text') or b.get('content') or '')[:30]!r}"
                f"…{str(b.get('text') or '')[-20:]!r}"
                for b in blocks
                if isinstance(b, dict)
            ]
            lines.append(f"  {message.get('role') or message.get('type')}: {' | '.join(shown)}")
    return "\n".join(lines)


def figures(client: str, proxy: ProxyRun, runs: list[ClientRun]) -> RunFigures:
    """The row of "Real clients through the proxy" (recorded with ``$CONTEXTFOLD_CLIENT_RESULTS``
    set, as the scripted tests' are). No plan: steps are the client runs that exited 0."""
    lines = upstream_lines(proxy)
    sizes = [int(line.get("client_tokens") or 0) for line in lines]
    sent = [int(line.get("upstream_tokens") or 0) for line in lines]
    sessions, chains = conversation_sessions(proxy.store, re.compile(re.escape(MARK)))
    return RunFigures(
        client,
        "proxy",
        proxy.window,
        passed=all(r.returncode == 0 for r in runs) and len(runs) == 2,
        exit_code=runs[-1].returncode,
        seconds=round(sum(r.seconds for r in runs), 1),
        client_requests=len(lines),
        upstream_requests=sum(int(line.get("upstream_calls") or 0) for line in lines),
        client_tokens=sum(sizes),
        upstream_tokens=sum(sent),
        peak_client_request=max(sizes, default=0),
        peak_upstream_request=max(sent, default=0),
        sessions=sessions,
        session_chains=chains,
        steps_completed=sum(1 for r in runs if r.returncode == 0),
        steps_planned=2,
        note="real llama.cpp, Gemma 3 270M; no plan",
    )


@pytest.fixture(scope="module")
def codex() -> str:
    return installed("codex", "npm install -g @openai/codex; .ci/run installs it")


def test_codex_through_the_proxy_to_llamacpp(
    codex: str,
    llama_server: LlamaServerFactory,
    tmp_path: Path,
) -> None:
    server = llama_server(N_CTX)
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (work / "README.md").write_text("A small repository.\n")
    codex_home = home / ".codex"
    env = clean_env(home, CODEX_HOME=str(codex_home), CF_SCRIPTED_KEY="sk-local")
    with proxied(server.url, N_CTX, tmp_path / "proxy.db") as proxy:
        write_codex_config(codex_home, proxy.url, server.model)
        runs = [
            run_client(
                [codex, "exec", "--skip-git-repo-check", f"Say hello ({MARK})."],
                cwd=work,
                env=env,
                timeout=TIMEOUT,
                stdin="",
            )
        ]
        if runs[0].returncode == 0:
            runs.append(
                run_client(
                    [codex, "exec", "resume", "--last", "--skip-git-repo-check", "Say it again."],
                    cwd=work,
                    env=env,
                    timeout=TIMEOUT,
                    stdin="",
                )
            )
    record_figures(figures("codex", proxy, runs), print)
    for run in runs:
        assert run.returncode == 0, run.failure(proxy.errors())
    assert len(runs) == 2
    statuses = answered(proxy, "/v1/responses")
    assert len(statuses) >= 2 and set(statuses) == {200}, statuses
    lines = upstream_lines(proxy)
    # Codex speaks Responses and llama.cpp serves it: no bridging needed.
    assert {line["upstream_protocol"] for line in lines} == {"responses"}, lines
    assert all(line.get("status") == 200 for line in lines), lines
    sessions, chains = conversation_sessions(proxy.store, re.compile(re.escape(MARK)))
    assert (sessions, chains) == (1, 1), histories(proxy)


CLAUDE_N_CTX = 16_384
"""Claude Code's first request is about 22,000 tokens (its 26 tool definitions are 18,600): more
than the server holds. With ``--defer-tools`` the proxy sends the tools the conversation uses
and offers the rest behind ``tool_search`` (what a small local model needs anyway), so each
upstream request is a few thousand tokens."""


CHATML_MARKERS = ["<|im_end|>", "<|im_start|>"]
"""The ``chatml`` template's turn markers. Gemma's tokenizer has no such special tokens, so the
model writes them as text and never stops on its own (Claude Code reads a reply cut at its
``max_tokens`` as an error); as stop sequences they end a reply where its turn ends."""


class StopAtTurnEnd(httpx.AsyncBaseTransport):
    """The proxy's transport to llama.cpp, adding :data:`CHATML_MARKERS` as ``stop_sequences``
    to each Messages request (what a server whose template the model knows would not need)."""

    def __init__(self) -> None:
        self.network = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/v1/messages"):
            body = json.loads(request.content)
            body["stop_sequences"] = CHATML_MARKERS
            headers = [(k, v) for k, v in request.headers.raw if k.lower() != b"content-length"]
            request = httpx.Request(
                request.method, request.url, headers=headers, content=json.dumps(body).encode()
            )
        return await self.network.handle_async_request(request)

    async def aclose(self) -> None:
        await self.network.aclose()


@pytest.fixture(scope="module")
def claude() -> str:
    return installed("claude", "npm install -g @anthropic-ai/claude-code; .ci/run installs it")


@pytest.mark.xfail(
    strict=False,
    reason=(
        "Gemma 3 270M samples (llama.cpp's default temperature) and sometimes writes past "
        "Claude Code's 256-token output cap without reaching a stop sequence; Claude Code then "
        "exits 1 ('response exceeded the 256 output token maximum'). Seen once in a full suite; "
        "the plumbing it checks passed in the run before"
    ),
)
def test_claude_code_through_the_proxy_to_llamacpp(
    claude: str, llama_server: LlamaServerFactory, tmp_path: Path
) -> None:
    """Claude Code, default tools, ``-p`` then ``-p --continue``: the proxy in front of
    llama.cpp's own ``/v1/messages``."""
    server = llama_server(CLAUDE_N_CTX)
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    with proxied(
        server.url,
        CLAUDE_N_CTX,
        tmp_path / "proxy.db",
        upstream_transport=StopAtTurnEnd(),
        defer_tools=True,
    ) as proxy:
        env = clean_env(
            home,
            ANTHROPIC_BASE_URL=proxy.url,
            ANTHROPIC_API_KEY="sk-local",
            ANTHROPIC_MODEL=server.model,
            DISABLE_TELEMETRY="1",
            DISABLE_ERROR_REPORTING="1",
            DISABLE_AUTOUPDATER="1",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            CLAUDE_CODE_MAX_RETRIES="0",
            # A base model rarely stops: Claude Code's 64,000 (clamped by the proxy to what the
            # window leaves) would be minutes of noise per request on 2 cores.
            CLAUDE_CODE_MAX_OUTPUT_TOKENS="256",
            API_TIMEOUT_MS=str(int(TIMEOUT * 1000)),
        )
        runs = []
        for prompt, extra in ((f"Say hello ({MARK}).", []), ("Say it again.", ["--continue"])):
            runs.append(
                run_client(
                    [claude, "-p", *extra, prompt, "--permission-mode", "acceptEdits"],
                    cwd=work,
                    env=env,
                    timeout=TIMEOUT,
                )
            )
            if runs[-1].returncode != 0:
                break
    record_figures(figures("claude-code", proxy, runs), print)
    for run in runs:
        assert run.returncode == 0, run.failure(proxy.errors())
    statuses = answered(proxy, "/v1/messages")
    assert len(statuses) >= 2 and set(statuses) == {200}, statuses
    lines = upstream_lines(proxy)
    # llama.cpp serves the Messages API itself: no bridging needed.
    assert {line["upstream_protocol"] for line in lines} == {"anthropic"}, lines
    # One chain. When the model's reply runs into max_tokens (a base model rarely stops),
    # Claude Code asks it to go on with a user message "Output token limit hit. Resume…", and
    # leaves those messages out of the history it resends with --continue: the resumed
    # conversation is not the stored one extended, so it continues in a fork of it.
    sessions, chains = conversation_sessions(proxy.store, re.compile(re.escape(MARK)))
    assert chains == 1 and sessions <= 2, histories(proxy)
