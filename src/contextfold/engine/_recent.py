"""The recent window of a growing view, kept as it grows: :class:`GrowingView`.

The cost schedule asks, every few turns of a long session, what a compaction would leave: the
task, the summary and the recent window (:func:`~contextfold.history.turns.recent_window_start`).
Asked from scratch, that cuts the whole view into atomic units and adds up their sizes: about a
millisecond for a view of 200 messages, which made the turns that asked the slowest steady turns
of a session. Between two edits the view only grows at its end, so :class:`GrowingView` keeps the
units cut so far, the user turns and the running token totals, and reads what was appended
since: the answer is the same (``tests/engine/test_recent.py`` holds it to the full
computation), at the cost of the new messages and the last unit or two.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

from contextfold.history.turns import atomic_units, is_user_turn, window_bounds
from contextfold.messages import Message

__all__ = ["GrowingView"]


class GrowingView:
    """A session view's units, user turns and running token totals, kept as it grows.

    Built for one ``generation`` of :class:`~._sizes.ViewSizes` (the view replaced whole starts
    a new one) and caught up on the messages appended since each time it is asked.
    """

    def __init__(self) -> None:
        self._reset(-1)

    def _reset(self, generation: int) -> None:
        self._generation = generation
        self._length = 0
        self._last: Message | None = None
        """The last message read: the same object at the same place, or the view was replaced."""
        self._totals = [0]
        """``_totals[i]``: raw tokens of the first ``i`` messages."""
        self._turns: list[int] = []
        """Where each user turn starts (:func:`~contextfold.history.turns.turn_starts`)."""
        self._units: list[range] = []
        self._unit_starts: list[int] = []
        self._unit_totals: list[int] = []
        """``_totals`` at each unit's start (ascending: the recent window is a bisection)."""
        self._settled = 0
        """Units before this one stay as they are whatever is appended (see :func:`_settles`);
        the view is cut again from this unit's start."""

    def recent_window_start(
        self,
        view: Sequence[Message],
        sizes: Sequence[int],
        generation: int,
        *,
        turns: int,
        max_tokens: int | None,
    ) -> int:
        """:func:`~contextfold.history.turns.recent_window_start` of ``view``, whose messages
        count ``sizes`` raw tokens (the session's :class:`~._sizes.ViewSizes`)."""
        self._catch_up(view, sizes, generation)
        if not view:
            return 0
        units = self._units
        last, wanted = window_bounds(view, units, self._turns, turns)
        # recent_window_start adds units from the end while they start at or after ``wanted``
        # and the tail stays under ``max_tokens``: both hold for every unit from some index on,
        # found by bisection.
        first = bisect_left(self._unit_starts, wanted, 0, last)
        if max_tokens is not None:
            room = self._totals[-1] - max_tokens
            first = max(first, bisect_left(self._unit_totals, room, 0, last))
        return units[min(first, last)].start

    def task_index(self) -> int | None:
        """:func:`~contextfold.history.turns.task_index` of the view last caught up on."""
        return self._turns[0] if self._turns else None

    def tokens_from(self, index: int) -> int:
        """Raw tokens of the view last caught up on, from message ``index`` to its end."""
        return self._totals[-1] - self._totals[index]

    def _catch_up(self, view: Sequence[Message], sizes: Sequence[int], generation: int) -> None:
        length = len(view)
        known = self._length
        if (
            generation != self._generation
            or length < known
            or (known and view[known - 1] is not self._last)
        ):
            self._reset(generation)
            known = 0
        if length == known:
            return
        totals = self._totals
        for tokens in sizes[known:length]:
            totals.append(totals[-1] + tokens)
        self._turns.extend(i for i in range(known, length) if is_user_turn(view[i]))
        # Cut again from the first unit that may still change.
        settled = self._settled
        cut_from = self._unit_starts[settled] if settled < len(self._units) else known
        del self._units[settled:], self._unit_starts[settled:], self._unit_totals[settled:]
        for unit in atomic_units(view[cut_from:]):
            start = unit.start + cut_from
            self._units.append(range(start, unit.stop + cut_from))
            self._unit_starts.append(start)
            self._unit_totals.append(totals[start])
        for j in range(len(self._units) - 1, settled, -1):
            if _settles(view, self._units, j):
                self._settled = j
                break
        self._length = length
        self._last = view[-1]


def _settles(view: Sequence[Message], units: Sequence[range], j: int) -> bool:
    """Whether unit ``j`` starts where the units of any longer view (this one with messages
    appended) also start, with the same units before it.

    The cut (:func:`~contextfold.history.turns.atomic_units`) goes from left to right, and a
    unit ends at the first message that does not join it. A message joins by reading ahead only
    when it is an assistant record and calls of the unit are still unanswered (it joins if the
    results after its run of records answer them); every earlier look ahead stops at the first
    message that is neither a record nor a result. So the cut up to unit ``j`` is settled when
    it starts with a user or system message, or with an assistant message right after a result
    once every call of the unit before is answered.
    """
    start = units[j].start
    role = view[start].role
    if role in ("user", "system"):
        return True
    if role != "assistant" or view[start - 1].role != "tool":
        return False
    before = units[j - 1]
    first = view[before.start]
    if first.role != "assistant":
        return True  # a unit of one message: nothing was waiting for an answer
    pending = {c.call_id for c in first.tool_calls}
    for i in before[1:]:
        message = view[i]
        if message.role == "tool":
            pending.difference_update(r.call_id for r in message.tool_results)
        else:
            pending.update(c.call_id for c in message.tool_calls)
    return not pending
