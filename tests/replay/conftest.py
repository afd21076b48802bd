"""Fixtures for the replay tests: sampled shared transcripts and the two Claude Code sessions
with a recorded compaction, each replayed once per test session (replays take seconds)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contextfold.replay import TranscriptReplay, replay_transcript
from contextfold.transcripts import Transcript, load_transcript, load_transcripts
from tests.conftest import shared_path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "coding_session.json"
"""The bundled example session (no shared data needed)."""

CLAUDE_COMPACTED = (
    "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl",
    "fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl",
)
"""The Claude Code sessions that recorded a compaction (one manual, one auto)."""
CLAUDE_WINDOW = 100_000
"""Window the Claude Code sessions are replayed at: every default preset compacts below it,
as Claude Code did (at 200k, truncating outputs alone keeps contextfold's view under the marks)."""


@pytest.fixture(scope="session")
def example() -> Transcript:
    """The bundled example coding session."""
    return load_transcript(EXAMPLE)


@pytest.fixture(scope="session")
def sampled_transcripts() -> list[Transcript]:
    """A few shared transcripts of every kind: the largest and the first DeepSeek and Gemini
    trajectories, two Claude Code sessions without compaction, three tau-bench dialogues."""
    root = shared_path("trajectories")
    picked: list[Transcript] = []
    for folder in ("mini-swe-agent-deepseek", "mini-swe-agent-gemini3pro"):
        files = sorted((root / folder).glob("*.json"))
        largest = max(files, key=lambda p: p.stat().st_size)
        picked += [load_transcript(files[0]), load_transcript(largest)]
    picked += [
        load_transcript(root / "claude-code" / n) for n in ("tool_heavy.jsonl", "subagent.jsonl")
    ]
    picked += load_transcripts(root / "tau-bench" / "gpt-4o-airline.json")[:3]
    return picked


@pytest.fixture(scope="session")
def claude_compacted() -> list[tuple[Transcript, TranscriptReplay]]:
    """The two Claude Code sessions with a recorded compaction, replayed at
    :data:`CLAUDE_WINDOW` with the default presets."""
    out = []
    for name in CLAUDE_COMPACTED:
        transcript = load_transcript(shared_path("trajectories", "claude-code", name))
        out.append((transcript, replay_transcript(transcript, window=CLAUDE_WINDOW, label=name)))
    return out


def coding_session(steps: int) -> dict[str, Any]:
    """An OpenAI-messages coding session: a task, then ``steps`` tool calls whose outputs hold
    file contents and failing test runs (what summaries cite), then a closing reply."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. Use the tools."},
        {"role": "user", "content": "Fix the failing parser tests. Don't change the tests."},
    ]
    for step in range(steps):
        call_id = f"call_{step:02d}"
        if step % 3 == 2:
            name, args = "run_tests", {"path": "tests/"}
            output = (
                f"FAILED tests/test_parser.py::test_case_{step} - AssertionError: "
                f"expected {step} tokens, got {step + 1}\n" + "collected 40 items\n" * 20
            )
        else:
            name, args = "read_file", {"path": f"src/parser/module_{step}.py"}
            output = "\n".join(
                f"def function_{step}_{line}(x):  return x + {line}" for line in range(60)
            )
        messages.append(
            {
                "role": "assistant",
                "content": f"Step {step}: calling {name}.",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(args)},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": output})
    messages.append({"role": "assistant", "content": "The parser tests pass now."})
    return {"model": "gpt-4o", "messages": messages}
