"""Session restart with carry-over: the pure parts the engine assembles.

Instead of compacting in place, the restart policy lets a session end and continue in a child
session. Near the limit the model gets a :func:`wind_down_message` (wrap up, write your state to
files); then the engine creates the child session (``parent_id`` set), seeds it with
:func:`plan_restart` and emits ``SessionRestarted``. The seed is a restart marker, the task
(verbatim), the structured summary of the parent, and the last complete turns, never split.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from contextfold.compaction.summary import StructuredSummary, summary_message
from contextfold.history.turns import (
    DEFAULT_RECENT_MAX_SHARE,
    atomic_units,
    recent_window_start,
    task_index,
    turn_starts,
)
from contextfold.messages import Message, MessageKind, Meta, SummaryPart
from contextfold.tokens.counter import TokenCounter

__all__ = [
    "DEFAULT_CARRY_TURNS",
    "DEFAULT_MAX_RESTARTS",
    "RestartPolicy",
    "plan_restart",
    "restart_marker",
    "wind_down_message",
]

DEFAULT_CARRY_TURNS = 3
"""Complete turns carried into the child session (``restart.carry_turns``)."""
DEFAULT_MAX_RESTARTS = 5
"""Restarts allowed per session chain (``restart.max_restarts``); past it the engine compacts in
place instead, so a session that cannot make progress does not restart forever."""

_SKIPPED_KINDS: frozenset[MessageKind] = frozenset(
    {"summary", "restart_marker", "wind_down", "context_note"}
)
"""Notes of the parent session that the seed's own marker and summary supersede."""


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    """When and how a session continues in a child session."""

    max_restarts: int = DEFAULT_MAX_RESTARTS
    carry_turns: int = DEFAULT_CARRY_TURNS
    carry_max_share: float = DEFAULT_RECENT_MAX_SHARE
    """Most of the window the carried turns may take (whole units are shed past it)."""

    def can_restart(self, restarts_so_far: int) -> bool:
        """True while the chain has restarts left."""
        return restarts_so_far < self.max_restarts


def wind_down_message(fraction: float, remaining_tokens: int) -> Message:
    """The note that tells the model the session will restart soon (kind ``wind_down``)."""
    text = (
        f"[Context window {fraction:.0%} full, about {remaining_tokens:,} tokens left. This "
        "session will restart soon with a summary and your latest turns. Finish the step you "
        "are on, then write anything you will need later (progress, findings, next steps) to "
        "files in the workspace.]"
    )
    return Message.user(text, meta=Meta(kind="wind_down", user_visible=False))


def restart_marker(session_number: int, previous_turns: int) -> Message:
    """The first message of a child session: which session this is and what came before."""
    text = (
        f"[Session restarted: this is session #{session_number}. The previous session ran "
        f"{previous_turns} turns before its context filled up; its summary and latest turns "
        "follow. Check the workspace files for any state you saved.]"
    )
    return Message.user(text, meta=Meta(kind="restart_marker", user_visible=False))


def plan_restart(
    view: Sequence[Message],
    summary: StructuredSummary | None,
    carry_turns: int = DEFAULT_CARRY_TURNS,
    *,
    counter: TokenCounter | None = None,
    max_carry_tokens: int | None = None,
    session_number: int = 2,
    previous_turns: int | None = None,
) -> list[Message]:
    """The seed of a child session: marker, task, summary, then the last complete turns.

    ``previous_turns`` defaults to the number of model responses in ``view``. With a
    ``counter`` and ``max_carry_tokens`` the carried turns are capped like the recent window
    (whole units only, at least the last one). A trailing unit whose calls have no results yet
    is not carried (it is not complete). Carried messages keep their ids (ids are unique per
    session) and gain the ``"carried"`` flag.
    """
    units = atomic_units(view)
    end = len(view)
    if units and _incomplete(view, units[-1]):
        end = units[-1].start
    body = list(view[:end])
    if counter is not None:
        start = recent_window_start(body, counter, turns=carry_turns, max_tokens=max_carry_tokens)
    else:
        starts = turn_starts(body)
        start = starts[-carry_turns] if carry_turns > 0 and len(starts) >= carry_turns else 0
    carried = [_carried(m) for m in body[start:] if m.meta.kind not in _SKIPPED_KINDS]
    turns = (
        previous_turns
        if previous_turns is not None
        else sum(1 for m in view if m.role == "assistant")
    )
    seed = [restart_marker(session_number, turns)]
    task = task_index(view)
    if task is not None and task < start:
        seed.append(_carried(view[task]))
    if summary is not None:
        seed.append(summary_message(summary, _covers(view, start)))
    seed.extend(carried)
    return seed


def _incomplete(view: Sequence[Message], unit: range) -> bool:
    calls = {c.call_id for i in unit for c in view[i].tool_calls}
    answered = {r.call_id for i in unit for r in view[i].tool_results}
    return bool(calls - answered)


def _carried(message: Message) -> Message:
    if "carried" in message.meta.flags:
        return message
    return replace(message, meta=replace(message.meta, flags=(*message.meta.flags, "carried")))


def _covers(view: Sequence[Message], start: int) -> tuple[str, str] | None:
    earlier = [m for m in view[:start] if m.role != "system"]
    for message in earlier[:1]:
        for part in message.parts_of(SummaryPart):
            if part.covers:
                return (part.covers[0], earlier[-1].id)
    return (earlier[0].id, earlier[-1].id) if earlier else None
