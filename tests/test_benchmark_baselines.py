"""The OpenHands-like baseline of the benchmarks condenses the way its model does."""

from __future__ import annotations

from benchmarks.baselines import (
    BASELINE_OPENHANDS,
    METHOD_NAMES,
    OpenHandsLikeBaseline,
    replay_method,
)
from contextfold.history.repair import validate
from contextfold.messages import Message, ToolCallPart, ToolResultPart
from contextfold.model_registry import ModelInfo
from contextfold.replay.probes import SUMMARY_KINDS
from contextfold.tokens.counters import HeuristicCounter
from contextfold.transcripts import Transcript

TASK = "Fix the failing date parser in utils/dates.py"


def _steps(count: int, output: str = "ok") -> list[Message]:
    """A task, then ``count`` assistant calls each answered by one tool result."""
    messages = [Message.user(TASK)]
    for n in range(count):
        call = ToolCallPart(f"call_{n}", "bash", f'{{"command": "step {n}"}}')
        messages.append(Message.assistant(f"step {n}", tool_calls=[call]))
        messages.append(Message.tool(ToolResultPart(f"call_{n}", "bash", f"{output} {n}")))
    return messages


def _events(messages: list[Message]) -> int:
    return sum(max(1, len(m.tool_calls)) if m.role == "assistant" else 1 for m in messages)


def _fed(baseline: OpenHandsLikeBaseline, messages: list[Message]) -> OpenHandsLikeBaseline:
    for message in messages:
        baseline.add(message)
    return baseline


def test_it_is_one_of_the_compared_methods() -> None:
    assert BASELINE_OPENHANDS in METHOD_NAMES


def test_nothing_is_cut_while_the_view_holds_at_most_80_events() -> None:
    messages = _steps(39)  # 1 + 39 * 2 = 79 events
    baseline = _fed(OpenHandsLikeBaseline(HeuristicCounter(), 0, 1_000_000), messages)
    view, compaction = baseline.request()
    assert compaction is None
    assert view == messages


def test_past_80_events_it_keeps_the_head_a_summary_and_the_newest_35_events() -> None:
    messages = _steps(45)  # 91 events
    baseline = _fed(OpenHandsLikeBaseline(HeuristicCounter(), 0, 1_000_000), messages)
    view, compaction = baseline.request()

    assert compaction is not None and compaction.kind == "summary"
    assert compaction.refused == ()
    summaries = [i for i, m in enumerate(view) if m.meta.kind in SUMMARY_KINDS]
    assert len(summaries) == 1
    head, tail = view[: summaries[0]], view[summaries[0] + 1 :]
    assert head[0].text == TASK
    assert _events(head) <= 4
    assert _events(tail) <= 35
    assert tail[-1] == messages[-1]
    assert compaction.removed == len(messages) - len(head) - len(tail)
    validate(view)  # no call is kept without its result, or a result without its call
    kept = {m.id for m in view}
    forgotten = [m for m in messages if m.id not in kept]
    # A first summary extends nothing: it reads exactly what it forgets.
    assert compaction.summary_input_tokens == HeuristicCounter().count_messages(forgotten) > 0


def test_a_later_condensation_extends_the_summary_instead_of_stacking_another() -> None:
    baseline = _fed(OpenHandsLikeBaseline(HeuristicCounter(), 0, 1_000_000), _steps(45))
    baseline.request()
    for message in _steps(60)[1:]:
        baseline.add(message.with_parts(message.parts))
    view, compaction = baseline.request()
    assert compaction is not None
    assert sum(m.meta.kind in SUMMARY_KINDS for m in view) == 1
    assert baseline.condensations == 2
    validate(view)


def test_an_overflow_is_learned_from_the_refused_request_and_halves_the_view() -> None:
    counter = HeuristicCounter()
    messages = _steps(30, output="x" * 2_000)  # 61 events: under the event budget
    full = counter.count_messages(messages)
    window = full // 2
    baseline = _fed(OpenHandsLikeBaseline(counter, 0, window), messages)
    view, compaction = baseline.request()

    assert compaction is not None
    assert compaction.refused and compaction.refused[0] == full
    assert all(size > window for size in compaction.refused)
    assert counter.count_messages(view) <= window
    assert view[0].text == TASK
    validate(view)


def test_replay_counts_refused_requests_as_over_the_window() -> None:
    counter = HeuristicCounter()
    output = "The quick brown fox jumps over the lazy dog. " * 40  # about 390 tokens
    messages = [Message.system("You are a careful engineer."), *_steps(30, output=output)]
    info = ModelInfo(name="test-model", context_window=6_000, max_output_tokens=1_000)
    run = replay_method(BASELINE_OPENHANDS, Transcript(messages, "test"), info, counter, ())

    assistant_turns = sum(m.role == "assistant" for m in messages)
    refused = [t for t in run.turns if not t.fits]
    assert refused, "the window is small enough that the provider must refuse a request"
    assert len(run.turns) == assistant_turns + len(refused)
    assert all(t.cost_anthropic == 0 and t.reused_tokens == 0 for t in refused)
    assert run.turns[-1].fits
