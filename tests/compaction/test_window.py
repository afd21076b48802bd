"""The recent window never splits a call from its result and respects its token cap."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.compaction import (
    CompactionContext,
    RecentWindow,
    atomic_units,
    recent_window_start,
)
from contextfold.history.repair import validate
from contextfold.history.turns import task_index, turn_starts
from contextfold.messages import Message, ToolCallPart, ToolResultPart

from .conftest import CharCounter, agent_log, chat, make_ctx, tool_round

counter = CharCounter()


def test_a_unit_is_an_assistant_message_with_all_its_results() -> None:
    view = [
        Message.user("go", id="u"),
        Message.assistant("", [ToolCallPart("a", "x"), ToolCallPart("b", "y")], id="A"),
        Message.tool(ToolResultPart("a", "x", "1"), id="ra"),
        Message.tool(ToolResultPart("b", "y", "2"), id="rb"),
        Message.assistant("done", id="D"),
    ]
    assert [list(u) for u in atomic_units(view)] == [[0], [1, 2, 3], [4]]


def test_a_response_split_over_several_records_stays_one_unit() -> None:
    # Claude Code logs one response with two calls as two assistant records.
    view = [
        Message.user("go", id="u"),
        Message.assistant("", [ToolCallPart("a", "x")], id="A1"),
        Message.assistant("", [ToolCallPart("b", "y")], id="A2"),
        Message.tool(ToolResultPart("a", "x", "1"), ToolResultPart("b", "y", "2"), id="r"),
    ]
    assert [list(u) for u in atomic_units(view)] == [[0], [1, 2, 3]]


def test_a_call_that_never_got_a_result_closes_its_unit_at_the_next_turn() -> None:
    # A process killed mid-tool, then the tool loop went on with no user message in between.
    view = [
        Message.user("go", id="u"),
        Message.assistant("", [ToolCallPart("lost", "x")], id="A"),
        *tool_round(0, "ls", "1"),
        *tool_round(1, "ls", "2"),
        Message.assistant("", [ToolCallPart("b", "y")], id="B"),
        Message.tool(ToolResultPart("b", "y", "3"), id="rb"),
    ]
    assert [list(u) for u in atomic_units(view)] == [[0], [1], [2, 3], [4, 5], [6, 7]]


def test_records_of_one_response_stay_together_when_one_call_is_never_answered() -> None:
    view = [
        Message.user("go", id="u"),
        Message.assistant("", [ToolCallPart("a", "x"), ToolCallPart("lost", "x")], id="A1"),
        Message.assistant("", [ToolCallPart("b", "y")], id="A2"),
        Message.tool(ToolResultPart("a", "x", "1"), ToolResultPart("b", "y", "2"), id="r"),
        *tool_round(0, "ls", "3"),
    ]
    assert [list(u) for u in atomic_units(view)] == [[0], [1, 2, 3], [4, 5]]


def test_window_is_the_last_three_turns_when_they_fit() -> None:
    view = chat(turns=5)
    start = recent_window_start(view, counter, turns=3, max_tokens=10**6)
    assert view[start].id == "u2"
    assert len([i for i in turn_starts(view) if i >= start]) == 3


def test_cap_binds_in_an_agent_log_with_one_user_message() -> None:
    view = agent_log(rounds=100, output_chars=1_000)
    cap = 2_000
    start = recent_window_start(view, counter, turns=3, max_tokens=cap)
    kept = counter.count_messages(view[start:])
    assert kept <= cap
    assert start in {u.start for u in atomic_units(view)}
    # The largest suffix: one more unit would break the cap.
    previous_unit = next(u for u in reversed(atomic_units(view)) if u.stop == start)
    assert kept + sum(counter.count_message(view[i]) for i in previous_unit) > cap
    assert view[start].role == "assistant"


def test_at_least_the_last_unit_even_when_it_alone_exceeds_the_cap() -> None:
    view = agent_log(rounds=5, output_chars=10_000)
    start = recent_window_start(view, counter, turns=3, max_tokens=10)
    assert [m.id for m in view[start:]] == ["a4", "t4"]


def test_hard_mode_window_is_the_last_unit() -> None:
    view = chat(turns=4)
    start = recent_window_start(view, counter, turns=0)
    assert [m.id for m in view[start:]] == ["done3"]


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    view = [Message.user("task", id="u0")]
    n = 0
    for turn in range(draw(st.integers(0, 5))):
        if turn:
            view.append(Message.user(f"turn {turn}", id=f"u{turn}"))
        for _ in range(draw(st.integers(0, 4))):
            calls = draw(st.integers(1, 3))
            ids = [f"c{n}_{k}" for k in range(calls)]
            view.append(Message.assistant("t", [ToolCallPart(i, "bash") for i in ids], id=f"a{n}"))
            size = draw(st.integers(0, 400))
            if draw(st.booleans()):
                view.append(
                    Message.tool(*(ToolResultPart(i, "bash", "o" * size) for i in ids), id=f"t{n}")
                )
            else:
                view += [
                    Message.tool(ToolResultPart(i, "bash", "o" * size), id=f"t{n}{i}") for i in ids
                ]
            n += 1
        view.append(Message.assistant("answer", id=f"ans{turn}"))
    return view


@settings(max_examples=150, deadline=None)
@given(conversations(), st.integers(0, 4), st.integers(0, 2_000))
def test_window_never_starts_inside_a_unit(view: list[Message], turns: int, cap: int) -> None:
    start = recent_window_start(view, counter, turns=turns, max_tokens=cap)
    assert start in {u.start for u in atomic_units(view)} | {len(view)}
    # Both halves are valid histories on their own: no call is cut from its result.
    validate(view[start:], provider="openai")
    validate(view[:start], provider="openai")
    if len(view) > 1:
        assert start < len(view)  # at least the last unit is kept


def test_task_is_the_first_user_turn_not_a_summary() -> None:
    view = [Message.system("s"), *tool_round(0, "ls", "x"), Message.user("real task", id="t")]
    assert task_index(view) == 3


# --------------------------------------------------------------------------------------------------
# The window found once per compaction and reused for the views its edits make
# --------------------------------------------------------------------------------------------------


def _masked(view: list[Message], indices: set[int]) -> list[Message]:
    """``view`` with the outputs at ``indices`` shortened to one line (a mask edit's shape)."""
    out = []
    for i, message in enumerate(view):
        if i in indices and message.tool_results:
            parts = [ToolResultPart(r.call_id, r.name, "[masked]") for r in message.tool_results]
            message = message.with_parts(parts)
        out.append(message)
    return out


def _fresh_and_reused(ctx: CompactionContext, view: list[Message]) -> tuple[int, int]:
    fresh = make_ctx(view, target=ctx.target_tokens, window=ctx.window_tokens, recent=ctx.recent)
    return fresh.window_start(), ctx.with_view(view).window_start()


def test_a_window_is_reused_for_a_view_whose_masking_left_it_where_it_was() -> None:
    view = agent_log(30, output_chars=400)
    ctx = make_ctx(view, target=0, window=4_000, recent=RecentWindow(turns=3, max_share=0.25))
    start = ctx.window_start()
    masked = _masked(view, set(range(2, start - 4)))  # well before the window
    assert _fresh_and_reused(ctx, masked) == (start, start)
    assert len(ctx.found_windows) == 1  # found once, reused


def test_a_window_grows_when_masking_makes_the_unit_before_it_fit_the_cap() -> None:
    view = agent_log(30, output_chars=400)
    ctx = make_ctx(view, target=0, window=4_000, recent=RecentWindow(turns=3, max_share=0.25))
    start = ctx.window_start()
    # The unit just before the window was refused for its size; masked, it fits.
    fresh, reused = _fresh_and_reused(ctx, _masked(view, set(range(start - 2, start))))
    assert fresh < start
    assert reused == fresh


@settings(max_examples=150, deadline=None)
@given(
    conversations(),
    st.integers(0, 4),
    st.integers(0, 2_000),
    st.booleans(),
    st.sets(st.integers(0, 40)),
    st.sets(st.integers(0, 40)),
)
def test_a_reused_window_is_always_the_one_a_fresh_search_finds(
    view: list[Message],
    turns: int,
    cap: int,
    hard: bool,
    first: set[int],
    second: set[int],
) -> None:
    recent = RecentWindow(turns=turns, max_share=cap / 4_000)
    ctx = make_ctx(view, target=0, window=4_000, recent=recent, hard=hard)
    ctx.window_start()
    once = _masked(view, first)
    twice = _masked(once, second)
    shorter = once[: len(once) // 2]  # an edit that changes the length
    for later in (once, twice, shorter, view):
        fresh = make_ctx(later, target=0, window=4_000, recent=recent, hard=hard)
        assert ctx.with_view(later).window_start() == fresh.window_start()
