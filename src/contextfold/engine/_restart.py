"""The one restart: a conversation continues in a child session seeded with a carry-over.

Both ways in use it: the ``restart`` preset when the window fills up (the session itself moves
on to the child), and ``/restart`` or :func:`contextfold.agent.restart_session` on request (a new
:class:`~contextfold.engine.Session` moves on, the old one stays on the parent). Either way the
child gets the same metadata (the parent's, with the chain's ``restart_number``), the same
numbering, and the same seed: the task, a structured summary and the last complete turns. Its
``parent_id`` is the old session, so every ``ref`` of the parent stays readable through
``read_result``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from contextfold.compaction import RestartPolicy, StructuredSummary, plan_restart
from contextfold.engine._core import SessionCore
from contextfold.engine._state import TurnState
from contextfold.events import Event, SessionRestarted, SummarizerFellBack
from contextfold.messages import Message
from contextfold.store import SessionInfo

__all__ = ["RestartPlan", "Restarted", "restart"]


@dataclass(frozen=True, slots=True)
class RestartPlan:
    """What a restart will do: its number in the chain, the summary and the child's seed."""

    number: int
    """This restart's number in the chain (1 for the first)."""
    summary: StructuredSummary | None
    seed: list[Message]
    events: tuple[Event, ...] = ()
    """What planning it reported (a summarizer that fell back), already sent."""


@dataclass(frozen=True, slots=True)
class Restarted:
    """The state a restart leaves (the child's) and the events it sent."""

    state: TurnState
    events: tuple[Event, ...]


def plan(
    core: SessionCore,
    state: TurnState,
    policy: RestartPolicy,
    *,
    focus: str | None,
    reuse_summary: bool,
) -> RestartPlan:
    """The restart of ``core``'s conversation; ``reuse_summary`` takes the latest compaction's
    summary when there is one (the preset's way: no second summary of the same history)."""
    view = core.view
    # The chain's count: the session's own, or the number its stored session carries (a
    # session resumed from a child made on request).
    stored = core.info.metadata.get("restart_number")
    number = max(state.restarts, stored if isinstance(stored, int) else 0) + 1
    summary = state.summary if reuse_summary else None
    events: tuple[Event, ...] = ()
    if summary is None and view:
        summary = core.deps.summarizer.summarize(view, None, focus)
        if summary.fallback_reason:  # as the compaction pipeline reports it
            fell_back = SummarizerFellBack(session_id=core.id, error=summary.fallback_reason)
            events = (core.emit(fell_back),)
    seed = plan_restart(
        view,
        summary,
        policy.carry_turns,
        counter=core.deps.counter,
        max_carry_tokens=int(core.effective_window * policy.carry_max_share),
        session_number=number + 1,
    )
    return RestartPlan(number, summary, seed, events)


def restart(
    core: SessionCore,
    state: TurnState,
    policy: RestartPolicy,
    *,
    reason: str = "context_full",
    focus: str | None = None,
    reuse_summary: bool = True,
    strict: bool = False,
) -> Restarted | None:
    """Move ``core`` on to a new child session, seeded by :func:`plan`; the state it leaves.

    ``None`` when the store cannot make the child: the failure is reported once (the session
    goes on in memory) and the caller compacts instead. With ``strict`` the store's error is
    raised instead, for a restart someone asked for.
    """
    deps, parent, parent_id = core.deps, core.info, core.id
    restart_plan = plan(core, state, policy, focus=focus, reuse_summary=reuse_summary)
    metadata = {**parent.metadata, "restart_number": restart_plan.number}

    def create() -> SessionInfo:
        return deps.store.create_session(
            model=deps.model.stored_name, title=parent.title, parent_id=parent_id, metadata=metadata
        )

    # A store that cannot make the child degrades the session to memory (reported once).
    child = create() if strict else core.writer.attempt("create the restarted session", create)
    if child is None:
        return None
    core.writer.switch(child.id, last_seq=0)
    state.deferral.session_id = child.id  # its degradation events name the child
    core.info = child
    core.replace_view(())
    for message in restart_plan.seed:
        core.add_message(message)
    state.estimator.invalidate()
    state = replace(
        state,
        restarts=restart_plan.number,
        wind_down_sent=False,
        previous_tail=None,
        mask_retry_at=None,
        summary=restart_plan.summary,
    )
    restarted = core.emit(
        SessionRestarted(
            session_id=child.id,
            parent_id=parent_id,
            child_id=child.id,
            restart_number=restart_plan.number,
            carried_messages=len(restart_plan.seed),
            reason=reason,
        )
    )
    return Restarted(state, (*restart_plan.events, restarted))
