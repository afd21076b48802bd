"""The pydantic-ai-harness peers: the harness' own hooks decide what each request holds."""

from __future__ import annotations

import pytest

pytest.importorskip("pydantic_ai_harness")

from benchmarks.baselines import make_method, other_methods, replay_method
from benchmarks.peers.pydantic_ai_harness_peer import (
    PEER_HARNESS_CLEAR,
    PEER_HARNESS_SUMMARIZING,
    PEER_HARNESS_TIERED,
    PEERS,
    HarnessPeer,
    transcript_messages,
)
from contextfold.history.repair import repair, validate
from contextfold.messages import Message, ToolCallPart, ToolResultPart
from contextfold.model_registry import ModelInfo
from contextfold.replay.probes import SUMMARY_KINDS
from contextfold.tokens.counters import HeuristicCounter
from contextfold.tool_spec import ToolSpec
from contextfold.transcripts import Transcript, load_transcripts
from tests.conftest import shared_path

NAMES = (PEER_HARNESS_CLEAR, PEER_HARNESS_SUMMARIZING, PEER_HARNESS_TIERED)
TASK = "Fix the failing date parser in utils/dates.py"
SYSTEM = "You are a careful engineer."
TOOLS = [ToolSpec("bash", "Run a shell command.", {"type": "object", "properties": {}})]
WINDOW = 6_000
"""Small enough that 40 steps of ~300-token outputs pass the 80 % trigger more than once."""
counter = HeuristicCounter()


def _steps(count: int) -> list[Message]:
    """A task, then ``count`` assistant calls each answered by one ~300-token result."""
    messages = [Message.user(TASK)]
    for n in range(count):
        call = ToolCallPart(f"call_{n}", "bash", f'{{"command": "cat part_{n}.py"}}')
        messages.append(Message.assistant(f"step {n}", tool_calls=[call]))
        output = f"def part_{n}(): pass  # " + "lorem ipsum dolor sit amet " * 45
        messages.append(Message.tool(ToolResultPart(f"call_{n}", "bash", output)))
    return messages


def _drive(peer: HarnessPeer, messages: list[Message]) -> list[tuple[list[Message], object]]:
    """Feed ``messages`` as replay_method does; every request's (view, compaction)."""
    requests = []
    for message in messages:
        if message.role == "assistant":
            requests.append(peer.request())
        peer.add(message)
    requests.append(peer.request())
    return requests


def _make(name: str) -> HarnessPeer:
    method = make_method(name, SYSTEM, TOOLS, counter, WINDOW)
    assert isinstance(method, HarnessPeer)
    return method


def test_the_three_rows_are_registered_with_their_package_versions() -> None:
    assert [p.name for p in PEERS] == list(NAMES)
    assert all(name in other_methods() for name in NAMES)
    for peer in PEERS:
        assert peer.label().startswith("peer: pydantic-ai-harness 0.")


@pytest.mark.parametrize("name", NAMES)
def test_every_view_is_valid_and_ends_with_the_newest_message(name: str) -> None:
    messages = _steps(40)
    peer = _make(name)
    fed: list[Message] = []
    for message in messages:
        if message.role == "assistant":
            view, _ = peer.request()
            validate(view)  # every kept result follows its call, every call has its result
            assert view[-1].tool_results == fed[-1].tool_results or view[-1] == fed[-1]
            assert all(m.role != "system" for m in view)
        peer.add(message)
        fed.append(message)


def test_clear_tool_results_blanks_old_results_and_keeps_the_last_three() -> None:
    peer = _make(PEER_HARNESS_CLEAR)
    requests = _drive(peer, _steps(40))
    drops = [c for _, c in requests if c is not None]
    assert drops and all(c.kind == "drop" and c.removed > 0 for c in drops)
    for view, compaction in requests:
        if compaction is None:
            continue
        # Past the trigger it clears every result but the newest three (keep_pairs=3).
        results = [r for m in view for r in m.tool_results]
        cleared = [r.content == "[tool result cleared]" for r in results]
        assert cleared == [True] * (len(results) - 3) + [False] * 3
    view, _ = requests[-1]
    assert len(view) == 1 + 2 * 40  # clearing removes no message
    results = [r for m in view for r in m.tool_results]
    cleared_at_end = sum(r.content == "[tool result cleared]" for r in results)
    assert cleared_at_end == sum(c.removed for c in drops)  # each result reported once
    assert all(c.summary_input_tokens == 0 for c in drops)


def test_summarizing_compaction_replaces_the_old_part_with_our_summary() -> None:
    peer = _make(PEER_HARNESS_SUMMARIZING)
    requests = _drive(peer, _steps(40))
    summaries = [c for _, c in requests if c is not None]
    assert summaries and all(c.kind == "summary" and c.removed > 0 for c in summaries)
    assert all(c.summary_input_tokens > 0 for c in summaries)
    for view, compaction in requests:
        notes = [m for m in view if m.meta.kind in SUMMARY_KINDS]
        assert len(notes) <= 1  # a later summary updates the earlier one instead of stacking
        if compaction is None:
            continue
        assert notes[0].role == "user" and "<conversation_summary>" in notes[0].text
        assert view[0].text == TASK  # preserve_first_user_message
        assert view[1] is notes[0]
        # keep_messages=20 pydantic-ai messages: 10 steps of a call and its result.
        assert [m.role for m in view[2:]] == ["assistant", "tool"] * 10
        validate(view)


def test_tiered_compaction_summarizes_only_when_clearing_is_not_enough() -> None:
    cheap = _drive(_make(PEER_HARNESS_TIERED), _steps(40))
    kinds = [c.kind for _, c in cheap if c is not None]
    assert kinds and set(kinds) == {"drop"}  # clearing alone brings these steps under 80 %

    # Big user turns cannot be cleared: the tiers then escalate to the summary.
    messages = _steps(10)
    for n in range(10):
        messages.append(Message.user(f"note {n}: " + "the parser must accept ISO weeks " * 150))
        call = ToolCallPart(f"late_{n}", "bash", '{"command": "true"}')
        messages.append(Message.assistant(f"noted {n}", tool_calls=[call]))
        messages.append(Message.tool(ToolResultPart(f"late_{n}", "bash", "ok")))
    requests = _drive(_make(PEER_HARNESS_TIERED), messages)
    kinds = [c.kind for _, c in requests if c is not None]
    assert "summary" in kinds
    for view, _ in requests:
        validate(view)


def test_the_summary_model_reads_the_transcript_the_harness_renders() -> None:
    prompt = (
        "Summarize.\n\n<messages>\n"
        '<message role="user">\nFix it\n</message>\n'
        '<message role="assistant">\nLooking\n</message>\n'
        '<message role="tool_call" name="bash">\n{"command": "ls"}\n</message>\n'
        '<message role="tool_return" name="bash">\na.py\nb.py\n</message>\n'
        "</messages>"
    )
    messages = transcript_messages(prompt)
    assert [m.role for m in messages] == ["user", "assistant", "tool"]
    (call,) = messages[1].tool_calls
    assert call.name == "bash" and call.arguments == '{"command": "ls"}'
    (result,) = messages[2].tool_results
    assert result.call_id == call.call_id and result.content == "a.py\nb.py"
    validate(messages)
    # The summary cites its sources by id: the same prompt reads back with the same ids, so two
    # identical runs send the same summaries (a fresh id per run made their token counts differ).
    assert [m.id for m in transcript_messages(prompt)] == [m.id for m in messages]
    assert len({m.id for m in messages}) == len(messages)


def test_replay_of_a_shared_transcript() -> None:
    folder = shared_path("trajectories", "mini-swe-agent-deepseek")
    path = min(folder.glob("*.json"), key=lambda p: p.stat().st_size)
    transcript = load_transcripts(path)[0]
    messages, _ = repair(transcript.messages)
    transcript = Transcript(messages, transcript.format, tools=transcript.tools)
    info = ModelInfo(name="test-model", context_window=8_000, max_output_tokens=1_000)
    assistant_turns = sum(m.role == "assistant" for m in messages)
    for name in NAMES:
        run = replay_method(name, transcript, info, counter, ())
        assert len(run.turns) == assistant_turns
        assert any(t.edits for t in run.turns), name
        assert run.final_tokens > 0
