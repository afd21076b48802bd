"""Restart with carry-over: the wind-down note and the seed of the child session."""

from __future__ import annotations

from contextfold.compaction import (
    ExtractiveSummarizer,
    RestartPolicy,
    atomic_units,
    plan_restart,
    wind_down_message,
)
from contextfold.history.repair import validate
from contextfold.messages import Message, SummaryPart, ToolCallPart

from .conftest import CharCounter, agent_log, chat


def test_wind_down_tells_the_model_to_wrap_up_and_save_state() -> None:
    note = wind_down_message(0.87, 4_200)
    assert note.meta.kind == "wind_down" and note.role == "user" and not note.meta.user_visible
    assert "87%" in note.text and "4,200 tokens" in note.text
    assert "write" in note.text and "files" in note.text


def test_seed_is_marker_task_summary_then_the_last_complete_turns() -> None:
    view = chat(turns=6, rounds_per_turn=2)
    summary = ExtractiveSummarizer().summarize(view, None, None)
    seed = plan_restart(view, summary, carry_turns=2, session_number=3)
    marker, task, summary_msg, *carried = seed
    assert marker.meta.kind == "restart_marker"
    assert "session #3" in marker.text
    assert f"ran {sum(m.role == 'assistant' for m in view)} turns" in marker.text
    assert task.id == "u0" and task.text == view[0].text
    assert summary_msg.meta.kind == "summary" and isinstance(summary_msg.parts[0], SummaryPart)
    assert [m.id for m in carried] == [
        m.id for m in view[view.index(next(m for m in view if m.id == "u4")) :]
    ]
    assert all("carried" in m.meta.flags for m in carried)
    validate(seed)


def test_an_unfinished_unit_is_not_carried() -> None:
    view = chat(turns=3)
    view.append(Message.assistant("", [ToolCallPart("pending", "bash", "{}")], id="dangling"))
    seed = plan_restart(view, None, carry_turns=1)
    assert "dangling" not in [m.id for m in seed]
    validate(seed)


def test_carried_turns_are_capped_on_unit_boundaries() -> None:
    view = agent_log(rounds=50, output_chars=2_000)
    counter = CharCounter()
    seed = plan_restart(view, None, carry_turns=3, counter=counter, max_carry_tokens=3_000)
    carried = [m for m in seed if "carried" in m.meta.flags and m.id != "task"]
    assert counter.count_messages(carried) <= 3_000
    assert carried[0].role == "assistant"
    starts = {view[u.start].id for u in atomic_units(view)}
    assert carried[0].id in starts
    assert [m.id for m in seed[:2]] == [seed[0].id, "task"]
    validate(seed)


def test_earlier_markers_and_summaries_are_not_carried_twice() -> None:
    first = plan_restart(
        chat(turns=4), ExtractiveSummarizer().summarize(chat(turns=4), None, None), 4
    )
    second = plan_restart(first, None, carry_turns=10, session_number=3)
    assert [m.meta.kind for m in second].count("restart_marker") == 1
    assert [m.meta.kind for m in second].count("summary") == 0


def test_policy_counts_restarts() -> None:
    policy = RestartPolicy(max_restarts=2)
    assert policy.can_restart(0) and policy.can_restart(1) and not policy.can_restart(2)
