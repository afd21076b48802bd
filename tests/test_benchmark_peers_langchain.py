"""The LangChain-family real peers of the benchmarks: ContextEditingMiddleware and deepagents.

Each is run on a small synthetic agent session at a small window: the framework's code must
clear or cut something, and every view must be a valid request (each tool result after its call).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("deepagents")
pytest.importorskip("langchain")

from benchmarks.baselines import Compaction, method_labels, other_methods, replay_method
from benchmarks.peers.deepagents_peer import PEER_DEEPAGENTS, DeepAgentsPeer
from benchmarks.peers.langchain_editing import PEER_CONTEXT_EDITING, ContextEditingPeer
from contextfold.history.repair import validate
from contextfold.messages import Message, ToolCallPart, ToolResultPart
from contextfold.model_registry import ModelInfo
from contextfold.replay import probes_for
from contextfold.replay.probes import SUMMARY_KINDS
from contextfold.tokens.counters import HeuristicCounter, counter_for
from contextfold.tool_spec import ToolSpec
from contextfold.transcripts import Transcript, load_transcripts
from tests.conftest import shared_path

TASK = "Fix the failing date parser in utils/dates.py"
OUTPUT = "The quick brown fox jumps over the lazy dog. " * 20  # about 200 tokens
BASH = ToolSpec(
    "bash",
    "Run a shell command.",
    {"type": "object", "properties": {"command": {"type": "string"}}},
)
PEERS = (PEER_CONTEXT_EDITING, PEER_DEEPAGENTS)


def _session(steps: int, big_at: int | None = None) -> list[Message]:
    """A task, then ``steps`` calls each answered by one result; the ``big_at`` one is huge."""
    messages = [Message.user(TASK)]
    for n in range(steps):
        call = ToolCallPart(f"call_{n}", "bash", json.dumps({"command": f"step {n}"}))
        messages.append(Message.assistant(f"step {n}", tool_calls=[call]))
        output = f"output {n}: " + (OUTPUT * 200 if n == big_at else OUTPUT)
        messages.append(Message.tool(ToolResultPart(f"call_{n}", "bash", output)))
    return messages


def _requests(
    method: ContextEditingPeer | DeepAgentsPeer, messages: list[Message]
) -> list[tuple[list[Message], Compaction | None]]:
    """Feed ``messages``, asking for a request before each assistant message and at the end."""
    out = []
    for message in messages:
        if message.role == "assistant":
            out.append(method.request())
        method.add(message)
    out.append(method.request())
    return out


def _results(view: list[Message]) -> list[ToolResultPart]:
    return [part for message in view for part in message.tool_results]


# -- ContextEditingMiddleware ----------------------------------------------------------------


def test_context_editing_changes_nothing_below_its_trigger() -> None:
    messages = _session(3)
    peer = ContextEditingPeer("You are careful.", [BASH], max_input_tokens=100_000)
    requests = _requests(peer, messages)
    assert all(compaction is None for _, compaction in requests)
    assert requests[-1][0] == messages


def test_context_editing_clears_older_results_and_keeps_the_last_three() -> None:
    messages = _session(20)
    peer = ContextEditingPeer("You are careful.", [BASH], max_input_tokens=3_000)
    requests = _requests(peer, messages)

    for view, _ in requests:
        validate(view)
    drops = [c for _, c in requests if c is not None]
    assert drops and all(c.kind == "drop" for c in drops)
    view = requests[-1][0]
    results = _results(view)
    cleared = [r for r in results if r.content == "[cleared]"]
    assert cleared, "the trigger was passed: older results must be cleared"
    assert sum(c.removed for c in drops) == len(cleared)  # each clearing reported once
    assert all(r.content.startswith("output") for r in results[-3:])  # its keep=3
    assert all(r.ref is None for r in cleared)  # nothing to read back
    # Messages it left alone are the very messages fed, so the wire prefix is measured fairly.
    assert view[0] is messages[0] and view[1] is messages[1]
    assert len(view) == len(messages)  # it clears contents; it never removes a message


# -- deepagents ------------------------------------------------------------------------------


def test_deepagents_is_driven_with_the_middleware_create_deep_agent_configured() -> None:
    peer = DeepAgentsPeer("", [BASH], HeuristicCounter(), max_input_tokens=24_000)
    # The defaults its module docstring states, read from the instances the agent holds.
    assert peer.filesystem._tool_token_limit_before_evict == 20_000
    helper = peer.summarization._lc_helper
    assert helper.trigger == ("fraction", 0.85)
    assert helper.keep == ("fraction", 0.1)
    assert helper.trim_tokens_to_summarize is None
    assert helper.summarizer is not None  # ours, in place of a model call


def test_deepagents_summarizes_past_its_trigger_with_our_summarizer() -> None:
    messages = _session(30)
    peer = DeepAgentsPeer("You are careful.", [BASH], HeuristicCounter(), max_input_tokens=4_000)
    requests = _requests(peer, messages)

    for view, _ in requests:
        validate(view)
    summaries = [c for _, c in requests if c is not None and c.kind == "summary"]
    assert summaries, "past 85 % of the window deepagents must summarize"
    assert all(c.removed > 0 and c.summary_input_tokens > 0 for c in summaries)
    view = requests[-1][0]
    assert view[0].meta.kind in SUMMARY_KINDS
    assert "/conversation_history/" in view[0].text  # deepagents names its history file
    assert "## Session Intent" in view[0].text  # our extractive summary, through its hook
    assert sum(m.meta.kind in SUMMARY_KINDS for m in view) == 1
    assert len(view) < len(messages)
    assert any(path.startswith("/conversation_history/") for path in peer.state["files"])
    assert peer.overflow_errors == 0


class _HeavyCounter(HeuristicCounter):
    """Counts every request twice as heavy as deepagents' own estimate would."""

    def count_request(self, messages: Any, *, system: str = "", tools: Any = ()) -> int:
        return 2 * super().count_request(messages, system=system, tools=tools)


def test_deepagents_recovers_when_the_provider_refuses_a_request() -> None:
    messages = _session(30)
    window = 6_000
    peer = DeepAgentsPeer("You are careful.", [BASH], _HeavyCounter(), max_input_tokens=window)
    requests = _requests(peer, messages)

    refusals = [c for _, c in requests if c is not None and c.refused]
    assert refusals, "its estimate stays under its trigger while the provider counts more"
    assert all(size > window for c in refusals for size in c.refused)
    assert all(c.kind == "summary" for c in refusals)  # it summarized and sent again
    for view, _ in requests:
        validate(view)
        assert (
            _HeavyCounter().count_request(view, system="You are careful.", tools=[BASH]) <= window
        )
    assert peer.overflow_errors == 0


def test_deepagents_moves_a_huge_tool_result_to_its_filesystem() -> None:
    messages = _session(4, big_at=1)
    huge = messages[4].tool_results[0].content
    peer = DeepAgentsPeer("", [BASH], HeuristicCounter(), max_input_tokens=1_000_000)
    requests = _requests(peer, messages)

    offloads = [c for _, c in requests if c is not None]
    assert [c.kind for c in offloads] == ["drop"] and offloads[0].removed == 1
    view = requests[-1][0]
    validate(view)
    pointer = _results(view)[1]
    assert pointer.call_id == "call_1"
    assert "/large_tool_results/call_1" in pointer.content
    assert len(pointer.content) < len(huge) // 10
    assert peer.state["files"]["/large_tool_results/call_1"]
    # The results under its limit are untouched.
    assert [r.content for r in _results(view)][2:] == [
        m.tool_results[0].content for m in messages[6::2]
    ]


# -- as benchmark rows -----------------------------------------------------------------------


def test_both_are_rows_of_the_benchmark_labelled_with_their_versions() -> None:
    assert set(PEERS) <= set(other_methods())
    labels = method_labels()
    assert "ContextEditingMiddleware" in labels[PEER_CONTEXT_EDITING]
    assert "80 %" in labels[PEER_CONTEXT_EDITING]
    assert labels[PEER_DEEPAGENTS].startswith("peer: deepagents ")


@pytest.mark.parametrize("name", PEERS)
def test_replay_measures_every_request(name: str) -> None:
    messages = [Message.system("You are a careful engineer."), *_session(40)]
    info = ModelInfo(name="test-model", context_window=6_000, max_output_tokens=1_000)
    run = replay_method(
        name, Transcript(messages, "test", tools=[BASH]), info, HeuristicCounter(), ()
    )

    assert len(run.turns) >= sum(m.role == "assistant" for m in messages)
    assert any(turn.edits for turn in run.turns)
    assert run.final_tokens < HeuristicCounter().count_messages(messages)


@pytest.mark.parametrize("name", PEERS)
def test_replay_of_a_shared_transcript(name: str) -> None:
    folder = shared_path("trajectories", "mini-swe-agent-deepseek")
    path = min(folder.glob("*.json"), key=lambda p: p.stat().st_size)
    transcript = next(iter(load_transcripts(path)))
    info = ModelInfo(name="deepseek-chat", context_window=16_000, max_output_tokens=4_000)
    counter = counter_for(info)
    run = replay_method(name, transcript, info, counter, probes_for(transcript.messages))

    assistant = sum(m.role == "assistant" and m.meta.agent_visible for m in transcript.messages)
    assert len(run.turns) == assistant
    assert run.final_tokens > 0
