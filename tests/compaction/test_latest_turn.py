"""What a compaction leaves of the latest turn and of a host's reminders (issue 26): the proxy's
engine keeps the newest results and the call they answer whole when the window holds them, a
call's small fields survive a hard cut, a reminder leaves with its turn, and the task that
follows a reminder block stays the task."""

from __future__ import annotations

import json

from contextfold.compaction import Compactor, DropOldest
from contextfold.compaction._shrink import cut_arguments
from contextfold.edits import apply_edits
from contextfold.history.turns import (
    RecentWindow,
    is_user_turn,
    recent_window_start,
    task_index,
)
from contextfold.messages import Message, TextPart, ToolCallPart, ToolResultPart

from .conftest import CharCounter, agent_log, make_ctx, tool_round


def _with_big_newest(rounds: int = 12) -> list[Message]:
    view = agent_log(rounds=rounds, output_chars=1_500)
    view += tool_round(99, "grep -n ERROR app.log", "E" * 8_000)
    return view


def test_hard_mode_keeps_the_newest_result_and_its_call_when_the_room_holds_them() -> None:
    view = _with_big_newest()
    ctx = make_ctx(view, target=1_000, window=20_000, room_tokens=6_000, keep_latest_turn=True)
    result = Compactor.preset("mask-first").compact(ctx, hard=True)
    after = {m.id: m for m in result.view}
    assert after["t99"].tool_results[0].content == "E" * 8_000
    assert after["a99"].tool_calls[0].arguments == view[-2].tool_calls[0].arguments
    assert not result.reached_target  # above the target, within the room: that is the point


def test_without_room_for_it_the_newest_result_is_cut_as_before() -> None:
    view = _with_big_newest()
    ctx = make_ctx(view, target=1_000, window=20_000, room_tokens=1_500, keep_latest_turn=True)
    result = Compactor.preset("mask-first").compact(ctx, hard=True)
    assert result.reached_target
    newest = next(m for m in result.view if m.id == "t99").tool_results[0]
    assert "read_result ref_" in newest.content


def test_the_library_default_still_cuts_the_newest_to_reach_the_target() -> None:
    view = _with_big_newest()
    result = Compactor.preset("mask-first").compact(
        make_ctx(view, target=1_000, window=20_000, room_tokens=6_000), hard=True
    )
    assert result.reached_target


def test_a_cut_call_keeps_its_small_fields_and_never_becomes_empty() -> None:
    arguments = json.dumps(
        {"file_path": "/w/app.py", "replace_all": False, "content": "x = 1\n" * 500}
    )
    cut = json.loads(cut_arguments(arguments, "ref_0123456789ab"))
    assert cut["file_path"] == "/w/app.py" and cut["replace_all"] is False
    assert cut["content"].startswith("x = 1\n") and "read_result ref_0123456789ab" in cut["content"]
    assert json.loads(cut_arguments("not json", "ref_0123456789ab")) != {}


def test_a_reminder_block_before_the_task_leaves_it_the_users_task() -> None:
    reminder = "<system-reminder>\nToday's date is 2026-11-26.\n</system-reminder>"
    first = Message("user", (TextPart(reminder), TextPart("Refactor the cart.")), id="u")
    assert is_user_turn(first)
    assert not is_user_turn(Message.user(reminder, id="r"))
    view = [first, *tool_round(0, "ls", "a.py")]
    assert task_index(view) == 0


def test_a_reminder_sent_inside_the_conversation_leaves_with_its_turn() -> None:
    view = [Message.system("You are a coding agent.", id="sys"), Message.user("task", id="task")]
    for n in range(6):
        view += tool_round(n, f"cat f{n}.py", "y" * 2_000)
        view.append(Message.system("The task tools haven't been used recently.", id=f"s{n}"))
    view.append(Message.user("and now?", id="last"))
    ctx = make_ctx(view, target=1_000, window=100_000, recent=RecentWindow(turns=1, max_share=0.01))
    after = apply_edits(view, DropOldest().plan(ctx))
    ids = [m.id for m in after]
    assert "s0" not in ids and "a0" not in ids  # the reminder went with its turn
    assert ids[:2] == ["sys", "task"]  # the system prompt and the task stay


def test_trailing_reminders_do_not_make_the_newest_results_old() -> None:
    view = [Message.user("task", id="task"), *tool_round(0, "ls", "a.py")]
    view.append(Message.system("reminder", id="s"))
    start = recent_window_start(view, CharCounter(), turns=0)
    assert start == 1  # the call and its result stay protected, not just the reminder
    assert view[start].tool_calls and isinstance(view[start].tool_calls[0], ToolCallPart)
    assert isinstance(view[start + 1].tool_results[0], ToolResultPart)
