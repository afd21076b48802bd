"""The openai-agents peers: the SDK's trimmer and compaction session decide what each request
holds, offline."""

from __future__ import annotations

import dataclasses
import socket
from typing import Any, cast

import pytest

pytest.importorskip("agents")

from benchmarks.baselines import ContextMethod, method_labels, other_methods, replay_method
from benchmarks.peers.openai_agents_peer import (
    PEER_COMPACTION_SESSION,
    PEER_TOOL_OUTPUT_TRIMMER,
    PEERS,
    CompactionSessionPeer,
    ToolOutputTrimmerPeer,
)
from contextfold.history.repair import repair, validate
from contextfold.messages import Message, ToolCallPart, ToolResultPart
from contextfold.model_registry import ModelInfo
from contextfold.replay.probes import SUMMARY_KINDS
from contextfold.tokens.counters import HeuristicCounter
from contextfold.transcripts import load_transcripts
from tests.conftest import shared_path

NAMES = (PEER_TOOL_OUTPUT_TRIMMER, PEER_COMPACTION_SESSION)
SYSTEM = "You are a careful coding agent."
TASK = "Fix the failing date parser in utils/dates.py"
BIG_OUTPUT = "".join(f"utils/dates.py:{n}: def parse_{n}(text): ...\n" for n in range(60))
counter = HeuristicCounter()


def _transcript(steps: int = 9, *, follow_up_every: int = 3) -> list[Message]:
    """A task, then ``steps`` tool calls with large outputs; a user follow-up every
    ``follow_up_every`` steps (0: none, a single-task tool loop)."""
    messages = [Message.user(TASK)]
    for n in range(steps):
        if follow_up_every and n and n % follow_up_every == 0:
            messages.append(Message.user(f"Now also check case {n}."))
        call = ToolCallPart(f"call_{n}", "bash", f'{{"command": "grep -n parse_{n} -r ."}}')
        messages.append(Message.assistant(f"Looking at case {n}.", tool_calls=[call]))
        messages.append(Message.tool(ToolResultPart(f"call_{n}", "bash", f"{n}\n{BIG_OUTPUT}")))
    messages.append(Message.assistant("Fixed: parse_3 now accepts ISO dates."))
    return messages


Request = tuple[list[Message], Any, list[Message]]
"""A request's view, the compaction done for it, and the messages fed before it."""


def _drive(method: ContextMethod, messages: list[Message]) -> list[Request]:
    """Feed ``messages`` as the replay does: a request before each assistant message."""
    requests: list[Request] = []
    for index, message in enumerate(messages):
        if message.role == "assistant":
            requests.append((*method.request(), messages[:index]))
        method.add(message)
    requests.append((*method.request(), messages))
    return requests


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No connection at all, not even to loopback (the fake client must not need one)."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the openai-agents peers must never open a connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_both_rows_are_registered_with_their_version() -> None:
    assert tuple(peer.name for peer in PEERS) == NAMES
    assert set(NAMES) <= set(other_methods())
    labels = method_labels()
    for name in NAMES:
        assert labels[name].startswith("peer: openai-agents ")


@pytest.mark.usefixtures("offline")
@pytest.mark.parametrize("name", NAMES)
def test_every_view_is_a_valid_history(name: str) -> None:
    (peer,) = [p for p in PEERS if p.name == name]
    method = peer.make(SYSTEM, [], counter, 1_500)
    for view, _, _ in _drive(method, _transcript()):
        validate(view)  # every tool result follows its call
        assert view[0].role == "user"


@pytest.mark.usefixtures("offline")
def test_the_trimmer_trims_old_large_outputs_and_keeps_recent_turns_whole() -> None:
    messages = _transcript()
    requests = _drive(ToolOutputTrimmerPeer(SYSTEM), messages)
    view, compaction, _ = requests[-1]

    results = [r for m in view for r in m.tool_results]
    follow_ups = [i for i, m in enumerate(view) if m.role == "user"]
    recent_from = follow_ups[-2]  # its default: the last 2 user messages and what follows
    recent_ids = {r.call_id for m in view[recent_from:] for r in m.tool_results}
    for result in results:
        if result.call_id in recent_ids:
            assert result.content.endswith(BIG_OUTPUT)
        else:
            assert result.content.startswith("[Trimmed: bash output")
            assert len(result.content) < 300
    assert len(view) == len(messages)  # it shortens outputs, it drops nothing

    reported = [c for _, c, _ in requests if c is not None]
    assert all(c.kind == "drop" for c in reported)
    # Each trimmed output is reported once, when first trimmed.
    assert sum(c.removed for c in reported) == len(results) - len(recent_ids)
    assert compaction is None or compaction.removed > 0


@pytest.mark.usefixtures("offline")
def test_the_trimmer_leaves_a_single_task_tool_loop_alone() -> None:
    messages = _transcript(follow_up_every=0)
    requests = _drive(ToolOutputTrimmerPeer(SYSTEM), messages)
    assert all(c is None for _, c, _ in requests)
    assert requests[-1][0] == messages


@pytest.mark.usefixtures("offline")
def test_the_compaction_session_compacts_into_the_user_messages_and_a_summary() -> None:
    peer = CompactionSessionPeer(SYSTEM, [], counter, 2_000)
    requests = _drive(peer, _transcript())

    compacted = [(view, c, fed) for view, c, fed in requests if c is not None]
    assert len(compacted) >= 2, "the session compacted less than twice at 80 % of 2,000 tokens"
    assert cast(object, peer.session.client) is peer.client  # it never built a real client
    assert peer.client.responses.calls == len(compacted)  # the fake answered every compact
    for view, compaction, fed in compacted:
        assert compaction.kind == "summary" and compaction.summary_input_tokens > 0
        assert compaction.removed > 0
        # What responses.compact gives back: every user message as it was, then one item.
        assert view[:-1] == [m for m in fed if m.role == "user"]
        summary = view[-1]
        assert summary.role == "user" and summary.meta.kind == "summary"
        assert summary.meta.kind in SUMMARY_KINDS
        assert "dates.py" in summary.text
    # The summaries differ: a later compaction summarizes the history since the last one.
    assert compacted[0][0][-1].text != compacted[-1][0][-1].text
    # After a compaction the history grows again from the summary.
    later = requests[-1][0]
    assert any(m.meta.kind == "summary" for m in later)
    assert later[-1].role == "assistant" and later[-1].text.startswith("Fixed")


@pytest.mark.usefixtures("offline")
def test_the_compaction_session_does_nothing_below_its_threshold() -> None:
    messages = _transcript()
    peer = CompactionSessionPeer(SYSTEM, [], counter, 1_000_000)
    requests = _drive(peer, messages)
    assert all(c is None for _, c, _ in requests)
    assert peer.client.responses.calls == 0
    assert requests[-1][0] == messages  # the very messages fed, mapped back from the items


def test_replay_of_a_shared_transcript() -> None:
    folder = shared_path("trajectories", "mini-swe-agent-deepseek")
    path = min(folder.glob("*.json"), key=lambda p: p.stat().st_size)
    transcript = load_transcripts(path)[0]
    messages, _ = repair(transcript.messages)
    transcript = dataclasses.replace(transcript, messages=messages)
    info = ModelInfo(name="test-model", context_window=8_000, max_output_tokens=1_000)
    assistant_turns = sum(m.role == "assistant" for m in messages)
    for name in NAMES:
        run = replay_method(name, transcript, info, counter, ())
        assert len(run.turns) == assistant_turns, name
        assert run.final_tokens > 0
    session = replay_method(PEER_COMPACTION_SESSION, transcript, info, counter, ())
    assert any(t.edits for t in session.turns)
    assert sum(t.summary_input_tokens for t in session.turns) > 0
