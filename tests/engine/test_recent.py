"""The recent window kept as the view grows (engine/_recent.py) equals the one computed from
scratch (history/turns.recent_window_start) at every length of a growing view: on views built to
stress the cut (split records, calls never answered, results without a call, reminders, user
turns) and on the shared real transcripts."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from contextfold.engine._recent import GrowingView
from contextfold.history.turns import recent_window_start, task_index
from contextfold.messages import Message, TextPart, ToolCallPart, ToolResultPart
from contextfold.tokens.counters import HeuristicCounter
from contextfold.transcripts import Transcript, iter_transcripts
from tests.conftest import shared_path

COUNTER = HeuristicCounter()
SETTINGS = ((3, 2_000), (3, None), (1, 500), (0, 800), (5, 40_000))
"""(turns, max_tokens) pairs: token-bound, turn-bound, the hard mode (0 turns) and roomy."""


def _check_growth(messages: Sequence[Message], every: int = 1) -> int:
    """Grow a view message by message, comparing at every ``every``-th length (and the last);
    with a new view (generation) once halfway, as an edit would. Returns the checks made."""
    grown = GrowingView()
    view: list[Message] = []
    sizes: list[int] = []
    generation = 0
    checks = 0
    for n, message in enumerate(messages, start=1):
        view.append(message)
        sizes.append(COUNTER.count_message(message))
        if n == len(messages) // 2:
            generation += 1  # the view replaced by an equal one: the tracker starts again
            view = list(view)
        if n % every and n != len(messages):
            continue
        for turns, max_tokens in SETTINGS:
            expected = recent_window_start(view, COUNTER, turns=turns, max_tokens=max_tokens)
            got = grown.recent_window_start(
                view, sizes, generation, turns=turns, max_tokens=max_tokens
            )
            assert got == expected, (n, turns, max_tokens)
        assert grown.task_index() == task_index(view)
        start = expected
        assert grown.tokens_from(start) == sum(sizes[start:])
        checks += 1
    return checks


def _assistant(rng: random.Random, ids: list[str], number: int) -> Message:
    calls = [ToolCallPart(f"c{number}_{k}", "bash", "{}") for k in range(rng.choice((0, 1, 1, 2)))]
    ids.extend(c.call_id for c in calls)
    return Message.assistant("x" * rng.randint(1, 400), calls)


def _result(call_id: str, rng: random.Random) -> Message:
    return Message.tool(ToolResultPart(call_id, "bash", "o" * rng.randint(1, 3_000)))


def _random_view(rng: random.Random, length: int) -> list[Message]:
    """A view of agent rounds with the shapes the cut must handle."""
    view = [Message.user("the task")]
    open_calls: list[str] = []
    number = 0
    while len(view) < length:
        number += 1
        roll = rng.random()
        if roll < 0.08:
            view.append(Message.user(f"next request {number}"))
        elif roll < 0.14:
            view.append(Message.system(f"reminder {number % 3}"))
        elif roll < 0.18:
            view.append(_result(f"orphan{number}", rng))  # a result no call asked for
        elif roll < 0.24 and open_calls:
            # Another record of the same response before its results (Claude Code's logs).
            view.append(_assistant(rng, open_calls, number))
        else:
            view.append(_assistant(rng, open_calls, number))
        if open_calls and rng.random() < 0.7:
            rng.shuffle(open_calls)
            answered = open_calls[: rng.randint(1, len(open_calls))]
            if rng.random() < 0.1:
                answered = answered[1:]  # a call left unanswered (a process killed mid-tool)
            view.extend(_result(call_id, rng) for call_id in answered)
            open_calls = []
    return view


def test_the_kept_window_equals_the_computed_one_on_shaped_views() -> None:
    rng = random.Random(19)
    for _ in range(40):
        assert _check_growth(_random_view(rng, rng.randint(1, 160))) > 0
    # A view with no user turn at all, and one of system messages only.
    assert _check_growth([Message.assistant("hi")] * 3) == 3
    assert _check_growth([Message.system("a"), Message.system("b")]) == 2


def test_a_view_replaced_by_another_of_the_same_length_is_read_again() -> None:
    grown = GrowingView()
    first = [Message.user("task"), Message("assistant", (TextPart("a" * 4_000),))]
    second = [Message.user("task"), Message("assistant", (TextPart("b"),))]
    for view in (first, second):
        sizes = [COUNTER.count_message(m) for m in view]
        got = grown.recent_window_start(view, sizes, 0, turns=3, max_tokens=10)
        assert got == recent_window_start(view, COUNTER, turns=3, max_tokens=10)
        assert grown.tokens_from(0) == sum(sizes)


@pytest.mark.shared_data
def test_the_kept_window_equals_the_computed_one_on_real_transcripts() -> None:
    checks = 0
    for item in iter_transcripts(shared_path("trajectories")):
        assert isinstance(item, Transcript), item
        for transcript in item.walk():
            visible = [m for m in transcript.messages if m.meta.agent_visible]
            checks += _check_growth(visible, every=max(1, len(visible) // 60))
    assert checks > 10_000
