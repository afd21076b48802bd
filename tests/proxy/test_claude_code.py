"""Real Claude Code, headless (``claude -p``), runs a 32-step session against the scripted
upstream, first directly, then through ``contextfold proxy`` with a window far smaller than what
Claude Code sends.

Claude Code is the npm package ``@anthropic-ai/claude-code`` (``.ci/run`` installs it); without
the ``claude`` command these tests skip. It runs as a separate process with its own HOME and work
directory, talks only to 127.0.0.1 (its base URL is the upstream or the proxy; any other
connection goes through a proxy address where nothing listens), and runs real tools in the work
directory: ``Bash`` and ``Read`` are allowed with ``--allowedTools`` in the ``acceptEdits``
permission mode (``bypassPermissions`` is refused when running as root).

What Claude Code 2.1 sends: sometimes ``HEAD /`` to check the base URL; streaming
``POST /v1/messages?beta=true`` with 24 tools (~17k tokens), the system prompt as text blocks
(the first an ``x-anthropic-billing-header``), ``system`` role messages inside ``messages``
(beta ``mid-conversation-system-2026-04-07``: the agent and skill lists after the prompt,
reminders later), ``thinking: adaptive``, ``context_management``, ``output_config`` and
``max_tokens`` 64000; and ``POST /v1/messages/count_tokens?beta=true`` before a large ``Read``,
to enforce its 25,000-token read limit. It keeps Bash outputs over ~30 KB out of the conversation
itself (saved under ``~/.claude``, a 2 KB preview sent instead).

The summary lines (turns, request sizes against the window, tokens the client sent and the
upstream got) are printed past pytest's output capture, so they show in CI's log without ``-s``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from contextfold.errors import RefNotFoundError
from contextfold.history.repair import validate
from contextfold.messages import ToolResultPart
from tests.proxy.claude_code_script import FINAL_TEXT, PLAN_STEPS, ClaudeCodeScript, tool_results
from tests.proxy.servers import RecordedExchange, Recorder, serve
from tests.proxy.upstreams import (
    RecordedRequest,
    ScriptedUpstream,
    count_input_tokens,
    default_counter,
    request_messages,
)

pytestmark = pytest.mark.slow

PROMPT = "Work through the scripted plan."
CLAUDE_TIMEOUT = 600
"""Seconds one headless session may take (it takes seconds; a hung one fails)."""

REFUSING_PROXY = "http://127.0.0.1:9"
"""Where Claude Code's connections to anything but 127.0.0.1 go: nothing listens there, so a
test can never reach the network."""

WINDOW = 36_000
"""The proxy's window. Claude Code's tools, system prompt and system messages take ~22k tokens
before the first turn; its requests grow past 100k, so the proxy must cut, offload, mask and
compact."""


@dataclass(frozen=True)
class ClaudeRun:
    returncode: int
    stdout: str
    stderr: str

    def failure(self) -> str:
        return f"claude exited {self.returncode}\nstdout:\n{self.stdout}\nstderr:\n{self.stderr}"


@pytest.fixture(scope="module")
def claude() -> str:
    """The ``claude`` command; the test skips when it is absent or does not run."""
    command = shutil.which("claude")
    if command is None:
        pytest.skip(
            "Claude Code is not installed (`npm install -g @anthropic-ai/claude-code`; "
            ".ci/run installs it when npm is there)"
        )
    version = subprocess.run(
        [command, "--version"], capture_output=True, text=True, timeout=120, check=False
    )
    if version.returncode != 0:
        pytest.skip(f"`claude --version` failed: {version.stderr.strip()[:300]}")
    return command


def run_claude(claude: str, base_url: str, home: Path, workdir: Path) -> ClaudeRun:
    """Run ``claude -p PROMPT`` in ``workdir`` against ``base_url`` and wait for it."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "dummy",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        # A failing request fails the run at once instead of being retried for minutes.
        "CLAUDE_CODE_MAX_RETRIES": "1",
        "HTTPS_PROXY": REFUSING_PROXY,
        "HTTP_PROXY": REFUSING_PROXY,
        "NO_PROXY": "127.0.0.1,localhost",
    }
    command = [claude, "-p", PROMPT, "--permission-mode", "acceptEdits"]
    command += ["--allowedTools", "Bash Read"]
    done = subprocess.run(
        command,
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=CLAUDE_TIMEOUT,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    return ClaudeRun(done.returncode, done.stdout, done.stderr)


@pytest.fixture
def session_dirs(tmp_path: Path) -> tuple[Path, Path]:
    home, workdir = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    workdir.mkdir()
    return home, workdir


@pytest.fixture
def show(capsys: pytest.CaptureFixture[str]) -> Callable[[str], None]:
    """Print a line to the terminal, past pytest's output capture (so it shows without -s)."""

    def write(line: str) -> None:
        with capsys.disabled():
            print(line)

    return write


def main_requests(upstream: ScriptedUpstream) -> list[RecordedRequest]:
    """The conversation's requests (those offering Claude Code's Bash tool)."""
    return [
        r
        for r in upstream.requests_for("/v1/messages")
        if any(t.get("name") == "Bash" for t in r.body.get("tools") or [])
    ]


def tool_uses(body: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """Every ``tool_use`` block of the assistant messages in a request body."""
    for message in body.get("messages") or []:
        content = message.get("content")
        if message.get("role") == "assistant" and isinstance(content, list):
            yield from (b for b in content if b.get("type") == "tool_use")


def streamed_blocks(exchange: RecordedExchange) -> Iterator[Mapping[str, Any]]:
    """The content blocks a streamed Messages response started."""
    for line in bytes(exchange.response).decode("utf-8", "replace").splitlines():
        if not line.startswith("data: "):
            continue
        try:
            event = json.loads(line[len("data: ") :])
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("type") == "content_block_start":
            yield event["content_block"]


def test_claude_code_runs_the_plan_against_the_upstream(
    claude: str, session_dirs: tuple[Path, Path], show: Callable[[str], None]
) -> None:
    home, workdir = session_dirs
    script = ClaudeCodeScript(workdir)
    upstream = ScriptedUpstream(script)
    with serve(upstream) as url:
        run = run_claude(claude, url, home, workdir)

    assert run.returncode == 0, run.failure()
    assert FINAL_TEXT in run.stdout
    requests = main_requests(upstream)
    # One request per step, and the one answered with the final text.
    assert len(requests) >= PLAN_STEPS + 1
    last = requests[-1].body
    results = dict(tool_results(last))
    assert len(results) == PLAN_STEPS + 1  # every step's results (step 10 has two)
    assert len(script.saved_outputs) == 2, "Claude Code saved the two 100k-line outputs"
    # The Read of the saved 100k-line output returned its lines 60000-61999, numbered.
    assert any(text.startswith("60000\t60000\n") for text in results.values())
    assert (workdir / "numbers.txt").read_text().count("\n") == 100_000
    sizes = [r.input_tokens or 0 for r in requests]
    show(
        f"\nClaude Code direct: {len(requests)} turns, {script.side_requests} side requests, "
        f"requests of {min(sizes):,}..{max(sizes):,} tokens "
        f"(last: {len(json.dumps(last)):,} bytes)"
    )


def test_claude_code_through_the_proxy(
    claude: str, session_dirs: tuple[Path, Path], tmp_path: Path, show: Callable[[str], None]
) -> None:
    proxy = pytest.importorskip("contextfold.proxy")
    from contextfold.proxy.sessions import proxy_figures
    from contextfold.store import open_store

    home, workdir = session_dirs
    store_path = tmp_path / "proxy.db"
    script = ClaudeCodeScript(workdir)
    upstream = ScriptedUpstream(script, window=WINDOW)
    with serve(upstream) as upstream_url:
        config = proxy.ProxyConfig(upstream=upstream_url, window=WINDOW, store=str(store_path))
        client_side = Recorder(proxy.create_app(config))
        with serve(client_side) as proxy_url:
            run = run_claude(claude, proxy_url, home, workdir)

    client = [e for e in client_side.exchanges if e.path == "/v1/messages"]
    refusals = _refusals(client_side.exchanges)
    assert run.returncode == 0, run.failure() + refusals
    assert FINAL_TEXT in run.stdout

    # Every request the upstream got fits the window and passes Anthropic's history rules.
    counter = default_counter("anthropic")
    requests = upstream.requests_for("/v1/messages")
    assert len(main_requests(upstream)) >= PLAN_STEPS + 2  # the plan, read_result, the end
    for request in requests:
        assert request.input_tokens is not None and request.input_tokens <= WINDOW
        validate(request_messages("anthropic", request.body), provider="anthropic")

    # The read_result round trip happened upstream, answered by the proxy ...
    call = script.read_result_call
    assert call is not None, "no offloaded-output ref reached the upstream"
    answered = [r for r in requests if call.id in dict(tool_results(r.body))]
    assert answered, "the upstream never got read_result's result"
    reading = dict(tool_results(answered[0].body))[call.id]
    assert reading.startswith(f"[{call.arguments['ref']}: lines 1-40 of ")
    assert any(u.get("name") == "read_result" for u in tool_uses(answered[0].body))
    # ... and Claude Code never saw it: not in what it sent, not in what it got.
    for exchange in client:
        body = exchange.json()
        assert not any(u.get("name") == "read_result" for u in tool_uses(body))
        assert call.id not in dict(tool_results(body))
        assert "read_result" not in {t.get("name") for t in body.get("tools") or []}
        assert not any(b.get("name") == "read_result" for b in streamed_blocks(exchange))

    # The store holds the whole transcript: every tool result Claude Code sent, the offloaded
    # ones readable in full from their blobs.
    sent = dict(tool_results(client[-1].json()))
    with open_store(store_path) as store:
        sessions = [s for s in store.list_sessions() if proxy_figures(s) is not None]
        assert sessions
        stored: dict[str, tuple[str, ToolResultPart]] = {}
        for session in sessions:
            for _, message in store.iter_messages(session.id):
                for part in message.parts:
                    if isinstance(part, ToolResultPart):
                        stored[part.call_id] = (session.id, part)
        assert set(sent) <= set(stored)
        offloaded = 0
        for call_id, text in sent.items():
            session_id, part = stored[call_id]
            if part.ref is not None:
                assert store.get_blob(session_id, part.ref) == text
                offloaded += 1
            else:
                assert part.content == text
        # Outputs are stored whole (a client's output goes up whole up to a quarter of the
        # window, proxy/_engines.py); the ones a compaction masked later are also kept in a
        # blob under the ref the upstream saw: the one read_result read is a whole output.
        blobs = set()
        for session in sessions:
            with contextlib.suppress(RefNotFoundError):
                blobs.add(store.get_blob(session.id, call.arguments["ref"]))
        assert blobs & set(sent.values()), "read_result's ref does not hold a whole output"
        biggest = max(sent, key=lambda call_id: len(sent[call_id]))
        figures = [proxy_figures(s) or {} for s in sessions]

    client_tokens = [count_input_tokens("anthropic", e.json(), counter) for e in client]
    upstream_tokens = [r.input_tokens or 0 for r in requests]
    show(
        f"\nClaude Code through the proxy (window {WINDOW:,}): {len(client)} client requests, "
        f"{len(requests)} upstream message requests ({script.side_requests} side), "
        f"{len(client_side.exchanges) - len(client)} other client calls "
        f"({', '.join(sorted({e.method + ' ' + e.path for e in client_side.exchanges}))})"
    )
    show(
        f"  client requests {min(client_tokens):,}..{max(client_tokens):,} tokens, "
        f"{sum(client_tokens):,} in all; upstream requests {min(upstream_tokens):,}.."
        f"{max(upstream_tokens):,} tokens, {sum(upstream_tokens):,} in all"
    )
    show(
        f"  store: {len(sessions)} session(s), {len(stored)} tool results, {offloaded} offloaded "
        f"(largest {len(sent[biggest]):,} chars); proxy's figures: {figures}"
    )


def _refusals(exchanges: list[RecordedExchange]) -> str:
    """The proxy's error answers, for a failure message."""
    lines = [
        f"{e.method} {e.path} -> {e.status}: {bytes(e.response[:300]).decode('utf-8', 'replace')}"
        for e in exchanges
        if e.status is not None and e.status >= 400
    ]
    return "\nproxy errors:\n" + "\n".join(lines) if lines else ""
