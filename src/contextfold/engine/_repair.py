"""Repairing the view before each request without re-reading the whole history every turn.

:func:`contextfold.history.repair.repair` is linear in the view, and the view is checked every turn.
Between two edits the view only grows at its end, and a view that passed the check ends with
every call answered, so nothing appended later can change a verdict about what came before.
:class:`ViewRepairer` therefore checks only the messages appended since the last clean check,
after a stand-in opening message (the earlier turns opened the conversation), and tests call ids
for duplicates against the ids it has already seen. Anything unusual (an edit, a problem in the
new messages) goes through the full :func:`~contextfold.history.repair.repair`.

The same holds for a view that needed repairs (a call the tool never answered, after a crash):
its repaired form ends with every call answered too, so it is kept, and the messages appended
since are checked and added to it. Without that, one old defect would cost a full repair and a
recount of the view on every turn for the rest of the session.

The session itself closes a call that can no longer get a result (:func:`closing_results`): the
request repair alone would leave the open call in the view that compaction works on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from contextfold.errors import HistoryError
from contextfold.history.repair import (
    HistoryRules,
    RepairChange,
    RepairReport,
    repair,
    synthesized_result,
    validate,
)
from contextfold.messages import Message, TextPart, ToolCallPart

__all__ = ["ViewRepairer", "closing_results"]

_OPENING = Message.user("(the conversation so far)", id="view-opening")
"""Stands in for the already checked messages: a user turn, so the new ones need not open one."""


def closing_results(view: Sequence[Message]) -> list[Message]:
    """Synthesized results (flagged ``"synthesized"``) for the calls of the view's last response
    that have none yet; empty when every call is answered.

    The session appends them, as ordinary transcript messages, at the first moment such a call
    can no longer be answered in its place: before it prepares a request, and before anything
    but a tool result is appended (a process killed mid-tool, then resumed). Appended there, they
    follow their call's results exactly as a real result would: the store stays append-only, a
    resume reads them like any other message, and the view that compaction cuts into units is a
    valid history. A call that is still open when the session resumes keeps waiting: the agent may
    yet deliver its result.
    """
    answered: set[str] = set()
    for message in reversed(view):
        if message.role == "tool":
            answered.update(r.call_id for r in message.tool_results)
            continue
        if message.role != "assistant":
            return []
        open_calls = {c.call_id: c for c in message.tool_calls if c.call_id not in answered}
        return [synthesized_result(c) for c in open_calls.values()]
    return []


class ViewRepairer:
    """Repairs one session's view to pass ``rules`` (see
    :func:`~contextfold.history.repair.history_rules_for`)."""

    def __init__(self, rules: HistoryRules, count_message: Callable[[Message], int]) -> None:
        """``count_message`` gives a message's raw tokens (the session's, which already knows
        the view's)."""
        self.rules = rules
        self._count_message = count_message
        self._generation: int | None = None
        self._checked = 0
        self._call_ids: set[str] = set()
        self._changes: tuple[RepairChange, ...] = ()
        """The repairs the kept view carries (none when the view itself was valid)."""
        self._repaired: list[Message] = []
        self._repaired_sizes: list[int] = []

    def repair(
        self, view: Sequence[Message], generation: int
    ) -> tuple[list[Message], RepairReport]:
        """``view`` made valid for the provider, and what was changed.

        ``generation`` changes whenever the view is replaced rather than appended to.
        """
        count = len(view)
        if generation == self._generation and self._checked <= count:
            added = view[self._checked :]
            if self._valid_addition(added):
                self._checked = count
                if not self._changes:
                    return list(view), RepairReport((), count, count)
                self._repaired += added
                self._repaired_sizes += [self._count_message(m) for m in added]
                return list(self._repaired), RepairReport(self._changes, count, len(self._repaired))
        repaired, report = repair(view, provider=self.rules)
        self._changes = report.changes
        self._repaired, self._repaired_sizes = [], []
        if report and not _closed(repaired):
            self._generation = None  # checked again in full next turn
            return repaired, report
        self._generation, self._checked = generation, count
        self._call_ids = {c.call_id for m in (*view, *repaired) for c in m.tool_calls}
        if report:
            self._repaired = list(repaired)
            self._repaired_sizes = [self._count_message(m) for m in repaired]
        return repaired, report

    def sizes(self) -> list[int] | None:
        """Raw tokens of each message of the latest repaired view, when repairs changed it and
        it is kept (``None`` otherwise: the session's own sizes describe the view)."""
        return list(self._repaired_sizes) if self._repaired else None

    def _valid_addition(self, added: Sequence[Message]) -> bool:
        if not added:
            return True
        ids = [c.call_id for m in added for c in m.tool_calls]
        # Anthropic (and the strict rules) reject a call id used twice; OpenAI does not check.
        if self.rules != "openai" and not self._call_ids.isdisjoint(ids):
            return False
        try:
            validate([_OPENING, *added], provider=self.rules)
        except HistoryError:
            return False
        self._call_ids.update(ids)
        return True


def _closed(view: Sequence[Message]) -> bool:
    """True when nothing appended after ``view`` can change how its end is repaired: it ends
    with a user turn, tool results, or an answer with text and no calls (a trailing message of
    only thinking may still join the next reply)."""
    if not view:
        return False
    last = view[-1]
    if last.role in ("user", "tool"):
        return True
    return (
        last.role == "assistant"
        and not any(type(p) is ToolCallPart for p in last.parts)
        and any(type(p) is TextPart for p in last.parts)
    )
