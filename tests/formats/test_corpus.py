"""Every real transcript in ../shared/data imports, with sane contents.

The corpus is read once per test session (``corpus`` fixture); each test skips with a reason
when ../shared/data is absent.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from contextfold.errors import FormatError
from contextfold.messages import SummaryPart
from contextfold.transcripts import Transcript, iter_transcripts, load_transcript
from tests.conftest import shared_path

pytestmark = pytest.mark.shared_data

CORPORA = {
    "claude-code": ("claude-code", 5),
    "mini-swe-agent-deepseek": ("mini-swe-agent", 40),
    "mini-swe-agent-gemini3pro": ("mini-swe-agent", 50),
    "tau-bench": ("tau-bench", 200),
}
LONG_CLAUDE_SESSIONS = {
    "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl": "manual",
    "fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl": "auto",
}


@pytest.fixture(scope="session")
def corpus() -> Callable[[str], list[Transcript]]:
    """Transcripts of one corpus folder, parsed once per session; any read error fails."""
    _cache: dict[str, list[Transcript | FormatError]] = {}

    def get(name: str) -> list[Transcript]:
        folder = shared_path("trajectories", name)
        if name not in _cache:
            _cache[name] = list(iter_transcripts(folder))
        errors = [str(e) for e in _cache[name] if isinstance(e, FormatError)]
        assert errors == []
        return [t for t in _cache[name] if isinstance(t, Transcript)]

    return get


@pytest.mark.parametrize("name", sorted(CORPORA))
def test_every_file_of_the_corpus_imports(
    name: str, corpus: Callable[[str], list[Transcript]]
) -> None:
    expected_format, expected_count = CORPORA[name]
    transcripts = corpus(name)
    assert len(transcripts) == expected_count
    for transcript in transcripts:
        assert transcript.format == expected_format
        assert transcript.task.strip(), transcript.path
        for part in transcript.walk():
            ids = [m.id for m in part.messages]
            assert len(ids) == len(set(ids)), part.path
            # Every result answers a call made earlier in the same conversation.
            seen: set[str] = set()
            for message in part.messages:
                seen.update(c.call_id for c in message.tool_calls)
                assert {r.call_id for r in message.tool_results} <= seen, message.id
            assert part.warnings == [] or part.metadata.get("role") == "compaction"


def test_mini_swe_agent_deepseek_keeps_calls_results_and_usage(
    corpus: Callable[[str], list[Transcript]],
) -> None:
    for transcript in corpus("mini-swe-agent-deepseek"):
        assistants = [m for m in transcript.messages if m.role == "assistant"]
        assert all(m.meta.usage and m.meta.usage.input_tokens > 0 for m in assistants)
        assert transcript.model == "deepseek/deepseek-chat"
        # Only the final "submit" call has no result: mini-swe-agent stops on it.
        [unanswered] = transcript.unanswered_calls()
        assert unanswered in assistants[-1].tool_calls
        assert "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in unanswered.args()["command"]
        assert transcript.metadata["exit_status"] == "Submitted"
        raw = json.loads(Path(str(transcript.path)).read_text())
        failed = sum(
            1
            for m in raw["messages"]
            if m["role"] == "tool" and m.get("extra", {}).get("returncode") not in (0, None)
        )
        errors = sum(r.is_error for m in transcript.messages for r in m.tool_results)
        assert errors >= failed


def test_mini_swe_agent_gemini_text_actions_become_tool_calls(
    corpus: Callable[[str], list[Transcript]],
) -> None:
    for transcript in corpus("mini-swe-agent-gemini3pro"):
        assert transcript.metadata["action_format"] == "text"
        assert transcript.model == "google/gemini-3-pro-preview"
        assert transcript.unanswered_calls() == []
        for index, message in enumerate(transcript.messages):
            if message.tool_calls:
                [call] = message.tool_calls
                assert call.name == "bash" and "```bash" in message.text
                assert "text_actions" in message.meta.flags
                result = transcript.messages[index + 1].tool_results[0]
                assert result.call_id == call.call_id
                failed = not result.content.startswith("<returncode>0</returncode>")
                if result.content.startswith("<returncode>"):
                    assert result.is_error == failed
        assert all(m.meta.usage for m in transcript.messages if m.role == "assistant")


def test_gemini_text_mode_keeps_the_recorded_messages(
    corpus: Callable[[str], list[Transcript]],
) -> None:
    as_tools = corpus("mini-swe-agent-gemini3pro")[0]
    as_text = load_transcript(str(as_tools.path), actions="text")
    raw = json.loads(Path(str(as_tools.path)).read_text())["messages"]
    assert [(m.role, m.text) for m in as_text.messages] == [(m["role"], m["content"]) for m in raw]
    assert as_text.tool_calls() == []


def test_claude_code_sessions(corpus: Callable[[str], list[Transcript]]) -> None:
    by_name = {Path(str(t.path)).name: t for t in corpus("claude-code")}
    for transcript in by_name.values():
        assert transcript.unanswered_calls() == []
        for message in transcript.messages:
            if message.role == "assistant" and message.meta.kind == "message":
                assert message.meta.usage is not None, message.id
    for name, trigger in LONG_CLAUDE_SESSIONS.items():
        transcript = by_name[name]
        [compaction] = transcript.compactions
        assert compaction.trigger == trigger
        assert compaction.pre_tokens and compaction.pre_tokens > 100_000
        summary = transcript.messages[compaction.index]
        assert summary.id == compaction.summary_message_id
        assert summary.meta.kind == "summary" and summary.role == "user"
        [part] = summary.parts
        assert isinstance(part, SummaryPart) and part.source == "claude-code"
        assert part.text == compaction.summary_text and len(part.text) > 1_000
        assert len(transcript.tool_calls()) >= 150
        roles = {t.metadata["role"] for t in transcript.subagents}
        assert roles == {"task", "compaction"}
        calls = {c.call_id for c in transcript.tool_calls()}
        for subagent in transcript.subagents:
            if subagent.metadata["role"] == "task":
                assert subagent.metadata["parent_call_id"] in calls
                assert subagent.title


def test_tau_bench_runs(corpus: Callable[[str], list[Transcript]]) -> None:
    transcripts = corpus("tau-bench")
    assert len({t.session_id for t in transcripts}) == 200
    for transcript in transcripts:
        assert transcript.messages[0].role == "system"
        assert transcript.unanswered_calls() == []
        assert transcript.usages() == []
        assert transcript.metadata["reward"] in (0.0, 1.0)
        assert transcript.title and transcript.title.startswith("task ")


def test_reimport_gives_identical_messages(corpus: Callable[[str], list[Transcript]]) -> None:
    first = corpus("claude-code")[0]
    again = load_transcript(str(first.path))
    assert again.messages == first.messages
    assert again.compactions == first.compactions
