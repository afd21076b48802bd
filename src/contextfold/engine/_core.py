"""The working set of one session: :class:`SessionCore`.

:class:`~contextfold.engine.Session` is the face an agent sees; the steps of a turn (in
:mod:`._turn`, :mod:`._compact`, :mod:`._restart`, :mod:`._tools`) work on this object instead,
so that none of them needs the public class and none reaches back into it. It holds what a
session was given (:class:`~._deps.SessionDeps`), where it writes
(:class:`~._writer.SessionWriter`), the view with its token sizes, and its
:class:`~._state.TurnState` (a value: a pass hands it from step to step and sets it here once).

Events go to the engine's sinks when they happen (:meth:`SessionCore.emit`, so a display can
show a compaction while it runs); the steps of a pass also return the events they made, and the
pass puts them on the request it returns.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from contextfold.compaction import BackgroundCompactor
from contextfold.engine._deps import SessionDeps
from contextfold.engine._measure import Measurement, measure
from contextfold.engine._render import build_prompt
from contextfold.engine._repair import ViewRepairer, closing_results
from contextfold.engine._sizes import CompactionCounter, ViewSizes
from contextfold.engine._state import TurnState
from contextfold.engine._writer import LineageBlobs, SessionWriter
from contextfold.engine.learned_window import SessionWindow
from contextfold.events import ComponentDegraded, Event
from contextfold.history.repair import history_rules_for
from contextfold.messages import Message, SummaryPart
from contextfold.outputs.intake import OutputLimits
from contextfold.prompt.sections import BuiltPrompt
from contextfold.store import SessionInfo
from contextfold.tokens.estimator import ContextSizeEstimator
from contextfold.tool_spec import ToolSpec
from contextfold.usage import UsageTracker

__all__ = ["SessionCore"]


class SessionCore:
    """One session's dependencies, store writer, view, sizes and state."""

    def __init__(
        self,
        deps: SessionDeps,
        info: SessionInfo,
        *,
        view: Sequence[Message],
        last_seq: int,
        last_edit: int,
        saved: Mapping[str, Any] | None,
    ) -> None:
        self.deps = deps
        self.info = info
        self.view: list[Message] = [m for m in view if m.meta.agent_visible]
        self.sizes = ViewSizes(deps.counter, self.view)
        self.compaction_counter = CompactionCounter(deps.counter, self.sizes)
        self.repairer = ViewRepairer(
            history_rules_for(deps.provider), self.compaction_counter.count_message
        )
        self.writer = SessionWriter(
            deps.store, info.id, last_seq=last_seq, last_edit=last_edit, emit=deps.events.emit
        )
        self.blobs = LineageBlobs(self.writer)
        self.summary_at = _summary_index(self.view)
        state = TurnState(
            estimator=ContextSizeEstimator(deps.counter),
            usage=UsageTracker(deps.model),
            deferral=deps.tool_deferral(info.id, deps.events.emit),
            window=SessionWindow(deps.model, deps.policy.reserved_output),
        )
        self.state = state.restored(saved, self.view) if saved else state
        self.background = BackgroundCompactor(deps.compactor) if deps.policy.background else None

    @property
    def id(self) -> str:
        """The store id of the session being written (it changes when the session restarts)."""
        return self.writer.session_id

    @property
    def effective_window(self) -> int:
        """Tokens a request's prompt may take."""
        return self.state.window.effective_window

    @property
    def output_limits(self) -> OutputLimits:
        """What one tool output may keep inline (its token limit shrinks with the window)."""
        policy, last = self.deps.policy, self.state.last
        if not policy.output_fills_room or last is None:
            return policy.output_limits_for(self.effective_window)
        # The tools as a squeeze before the compaction would leave them: an output that fits
        # once the unused tools give way is not cut on its way in.
        tools = self.state.deferral.squeezed_tokens(self.deps.counter)
        fixed = last.budget.system + last.budget.instructions
        fixed += last.budget.tools if tools is None else min(tools, last.budget.tools)
        return policy.output_limits_for(self.effective_window, fixed)

    # -- events and the store ---------------------------------------------------------------------

    def read_stored(self, ref: str) -> str | None:
        """The stored output behind ``ref`` (the session's or an ancestor's); ``None`` when
        nothing is stored under it."""
        try:
            return self.blobs.get_blob(self.id, ref)
        except LookupError:
            return None

    def emit(self, event: Event) -> Event:
        """Send ``event`` to the engine's sinks now; returns it (for the step that made it to
        return too)."""
        self.deps.events.emit(event)
        return event

    def degraded(self, component: str, fallback: str, error: object) -> Event:
        """Report that ``component`` failed and the session went on with ``fallback``."""
        return self.emit(
            ComponentDegraded(
                session_id=self.id, component=component, fallback=fallback, error=str(error)
            )
        )

    def save_state(self) -> None:
        """Keep the saved part of the state in the store (a resume continues from it)."""
        self.writer.save_state(self.state.saved())

    # -- the view ----------------------------------------------------------------------------------

    def add_message(self, message: Message) -> Message:
        """Append any message to the transcript (and to the view if the agent may see it)."""
        if message.role != "tool" and message.meta.agent_visible:
            self.close_open_calls()  # the last response's calls can no longer be answered
        if message.meta.turn is None or message.meta.created_at is None:
            message = message.with_meta(
                turn=message.meta.turn if message.meta.turn is not None else self.state.turn,
                created_at=message.meta.created_at or time.time(),
            )
        self.writer.append([message])
        if message.meta.agent_visible:
            if _is_summary(message):
                self.summary_at = len(self.view)
            self.view.append(message)
            self.sizes.append(message)
        return message

    def close_open_calls(self) -> None:
        """Append a synthesized result for each call of the last response still without one
        (see :func:`~._repair.closing_results`)."""
        if self.deps.policy.repair:
            for result in closing_results(self.view):
                self.add_message(result)

    def replace_view(self, view: Sequence[Message]) -> None:
        """Take ``view`` (after an edit or a restart) and recount it."""
        self.view = [m for m in view if m.meta.agent_visible]
        self.sizes.reset(self.view)
        self.summary_at = _summary_index(self.view)

    @property
    def summary_id(self) -> str | None:
        """The id of the view's latest summary message, if it has one."""
        return self.view[self.summary_at].id if self.summary_at is not None else None

    # -- measuring ---------------------------------------------------------------------------------

    def measure(self, fixed: str, tools: Sequence[ToolSpec], built: BuiltPrompt) -> Measurement:
        """The request ``fixed + tools + view``, measured by component."""
        return measure(
            self.deps.policy.thresholds,
            self.state.window,
            self.state.estimator,
            self.view,
            fixed,
            tools,
            built,
            self.sizes,
        )

    def measure_now(self) -> Measurement:
        """The view as it stands, with the latest request's system text and tools."""
        last = self.state.last
        tools = list(last.tools) if last else []
        built, stable_text, _ = build_prompt(None, None)
        fixed = self.state.fixed_text or stable_text
        return self.measure(fixed, tools, built)


def _is_summary(message: Message) -> bool:
    return any(isinstance(part, SummaryPart) for part in message.parts)


def _summary_index(view: Sequence[Message]) -> int | None:
    """Where the view's latest summary message is (found once per view: the view changes only
    by appending, or whole)."""
    for i in range(len(view) - 1, -1, -1):
        if _is_summary(view[i]):
            return i
    return None
