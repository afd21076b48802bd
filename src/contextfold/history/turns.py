"""The recent window: the tail of the view that compaction keeps verbatim.

Two ideas live here:

- an **atomic unit** is the smallest piece of a view that may be removed or kept on its own: an
  assistant message together with every result of its calls (and any further assistant fragments
  that arrive before those results, as Claude Code logs split one response into several
  records), or any other single message. Cutting between units never leaves a call without its
  result, nor separates the calls of one response;
- a **turn** starts at a user message and runs through every call and result up to the next
  user message.

:func:`recent_window_start` gives the index where the protected tail begins: the last
``turns`` turns, but never more than ``max_tokens``. Agent logs often hold one user message and a
hundred tool rounds; there the token cap binds and the window is the largest suffix of whole
units under the cap (always at least the last unit).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from contextfold.history.harness_notes import is_harness_note
from contextfold.messages import Message, MessageKind, SummaryPart
from contextfold.tokens.counter import TokenCounter

__all__ = [
    "DEFAULT_RECENT_MAX_SHARE",
    "DEFAULT_RECENT_TURNS",
    "NOTE_KINDS",
    "FoundWindow",
    "RecentWindow",
    "atomic_units",
    "is_user_turn",
    "last_user_index",
    "latest_turn_start",
    "recent_window_start",
    "task_index",
    "turn_starts",
    "unit_tokens",
    "window_bounds",
]

DEFAULT_RECENT_TURNS = 3
"""Complete turns kept verbatim: the model's latest reasoning and the results it is acting on
stay exact, and a call is never split from its result."""

DEFAULT_RECENT_MAX_SHARE = 0.25
"""Most of the window the recent turns may take: past it, whole units are shed, so that one huge
turn cannot leave a compaction nothing older to work on."""

NOTE_KINDS: frozenset[MessageKind] = frozenset(
    {
        "summary",
        "tool_summary",
        "tool_result",
        "tool_result_archived",
        "synthetic",
        "restart_marker",
        "wind_down",
        "context_note",
    }
)
"""Message kinds contextfold (or a tool) wrote: they never start a turn nor count as the task."""


@dataclass(frozen=True, slots=True)
class RecentWindow:
    """How much of the tail compaction keeps verbatim."""

    turns: int = DEFAULT_RECENT_TURNS
    max_share: float = DEFAULT_RECENT_MAX_SHARE

    def max_tokens(self, window_tokens: int) -> int:
        """The token cap of the window for a context window of ``window_tokens``."""
        return max(0, int(window_tokens * self.max_share))


def is_user_turn(message: Message) -> bool:
    """True for a message a person (or the caller) wrote as a user turn, not a contextfold note
    nor a note of the agent harness (an interruption marker, a hook reminder...)."""
    if message.role != "user" or message.meta.kind in NOTE_KINDS or is_harness_note(message):
        return False
    return not any(isinstance(p, SummaryPart) for p in message.parts)


def task_index(view: Sequence[Message]) -> int | None:
    """Index of the first user turn (the task, always kept verbatim), or ``None``."""
    for i, message in enumerate(view):
        if is_user_turn(message):
            return i
    return None


def last_user_index(view: Sequence[Message]) -> int | None:
    """Index of the last user turn (never dropped), or ``None``."""
    for i in range(len(view) - 1, -1, -1):
        if is_user_turn(view[i]):
            return i
    return None


def latest_turn_start(view: Sequence[Message]) -> int:
    """Where the latest turn begins: after the last assistant message (the user's latest
    words, the newest tool results: what the model reads next). ``len(view)`` before the
    first reply: a first turn has no newest results."""
    return next(
        (i + 1 for i in range(len(view) - 1, -1, -1) if view[i].role == "assistant"), len(view)
    )


def turn_starts(view: Sequence[Message]) -> list[int]:
    """Indices where turns begin (every user turn)."""
    shape = _shape(view)
    if shape.starts is None:
        shape.starts = tuple(i for i, m in enumerate(shape.view) if is_user_turn(m))
    return list(shape.starts)


@dataclass(slots=True)
class _Shape:
    """A view, with its units and turn starts once found (see :func:`_shape`)."""

    view: tuple[Message, ...]
    units: tuple[range, ...] | None = None
    starts: tuple[int, ...] | None = None


_last_shape: _Shape | None = None
"""The view the units or turn starts were last asked of. One compaction asks about ten times
(each strategy, the recent window, the cost schedule), mostly of views its edits made from the
one before: a masked output, trimmed arguments or cleared thinking leave every unit and turn
where it was. It holds its messages, so their identities stay theirs while it lives."""


def _shape(view: Sequence[Message]) -> _Shape:
    """The remembered shape when ``view`` cuts into units and turns as its view does (as long,
    each message the same object or of the same shape: see :func:`_same_shape`), else a new
    one, remembered in its place."""
    global _last_shape
    last = _last_shape
    if last is not None and len(last.view) == len(view):
        old = last.view
        if view is old or all(
            new is was or _same_shape(new, was) for new, was in zip(view, old, strict=True)
        ):
            return last
    shape = _Shape(tuple(view))
    _last_shape = shape
    return shape


def atomic_units(view: Sequence[Message]) -> list[range]:
    """The view cut into units that are kept or removed whole, in order, covering every index.

    A unit ends where the next response starts, whatever became of its calls: an assistant
    message that comes while calls are still open joins the unit only when it is another record
    of the same response, that is when the results after it answer one of those open calls. A
    call that never got a result (a process killed mid-tool) thus closes its unit at the next
    turn instead of swallowing every later turn into one unit that compaction cannot touch.
    """
    shape = _shape(view)
    if shape.units is None:
        shape.units = tuple(_cut_units(shape.view))
    return list(shape.units)


def _cut_units(view: Sequence[Message]) -> list[range]:
    units: list[range] = []
    n = len(view)
    answered_after: dict[int, frozenset[str]] = {}  # see _answered_after
    i = 0
    while i < n:
        start = i
        message = view[i]
        i += 1
        calls = message.tool_calls if message.role == "assistant" else ()
        if calls:
            pending = {c.call_id for c in calls}
            while i < n:
                nxt = view[i]
                if nxt.role == "tool":
                    pending.difference_update(r.call_id for r in nxt.tool_results)
                elif (
                    nxt.role == "assistant"
                    and pending
                    and not pending.isdisjoint(_answered_after(view, i, answered_after))
                ):
                    # Another record of the same response: its calls stay together.
                    pending.update(c.call_id for c in nxt.tool_calls)
                else:
                    break
                i += 1
        units.append(range(start, i))
    return units


def _answered_after(
    view: Sequence[Message], i: int, memo: dict[int, frozenset[str]]
) -> frozenset[str]:
    """Call ids answered by the tool messages that follow the run of assistant messages holding
    ``i``. Memoized for every index of the run, so a long run of records is scanned once."""
    found = memo.get(i)
    if found is not None:
        return found
    j = i
    while j < len(view) and view[j].role == "assistant":
        j += 1
    ids: set[str] = set()
    k = j
    while k < len(view) and view[k].role == "tool":
        ids.update(r.call_id for r in view[k].tool_results)
        k += 1
    found = frozenset(ids)
    for index in range(i, j):
        memo[index] = found
    return found


def unit_tokens(view: Sequence[Message], unit: range, counter: TokenCounter) -> int:
    """Tokens of one unit, as the sum of its messages."""
    return sum(counter.count_message(view[j]) for j in unit)


def window_bounds(
    view: Sequence[Message], units: Sequence[range], starts: Sequence[int], turns: int
) -> tuple[int, int]:
    """The index of the last unit of ``view`` and the earliest message the recent window of
    ``turns`` turns may start at (``units``: its atomic units, ``starts``: its turn starts).

    The last unit takes the system messages a host sent after it (its reminders): they do not
    make the newest results old. ``turns=0`` (the hard mode) reaches no further back than the
    last unit.
    """
    last = len(units) - 1
    while last > 0 and all(view[i].role == "system" for i in units[last]):
        last -= 1
    if turns <= 0:
        return last, units[last].start
    return last, starts[-turns] if len(starts) >= turns else 0


def recent_window_start(
    view: Sequence[Message],
    counter: TokenCounter,
    *,
    turns: int = DEFAULT_RECENT_TURNS,
    max_tokens: int | None = None,
) -> int:
    """Index where the protected tail begins (``len(view)`` for an empty view).

    The tail is the last ``turns`` turns when they fit in ``max_tokens``; otherwise the largest
    suffix of whole units under ``max_tokens``, and at least the last unit. ``turns=0`` keeps
    only what the cap allows of the last unit (the hard mode).
    """
    return FoundWindow.of(view, counter, turns=turns, max_tokens=max_tokens).start


@dataclass(frozen=True, slots=True)
class FoundWindow:
    """Where the recent window of one view begins, and why there, so that a view an edit made
    from it can reuse it: one compaction asks for the window of each view its strategies see,
    and most of their edits (masking, trimming, clearing what lies before the window) leave it
    where it was.

    ``start`` depends on the messages from ``start`` on, on where units and turns begin
    before it, and, when the token cap stopped the search (``refused`` is the unit it would
    not take, ``used`` what the window holds), on that unit's size.
    """

    view: tuple[Message, ...]
    start: int
    turns: int
    max_tokens: int | None
    refused: range | None = None
    used: int = 0

    @classmethod
    def of(
        cls,
        view: Sequence[Message],
        counter: TokenCounter,
        *,
        turns: int = DEFAULT_RECENT_TURNS,
        max_tokens: int | None = None,
    ) -> FoundWindow:
        """The window of ``view`` (see :func:`recent_window_start`)."""
        frozen = tuple(view)
        if not frozen:
            return cls(frozen, 0, turns, max_tokens)
        units = atomic_units(frozen)
        last, wanted = window_bounds(frozen, units, turn_starts(frozen), turns)
        start = units[last].start
        used = sum(unit_tokens(frozen, unit, counter) for unit in units[last:])
        for unit in reversed(units[:last]):
            if unit.start < wanted:
                break
            cost = unit_tokens(frozen, unit, counter)
            if max_tokens is not None and used + cost > max_tokens:
                return cls(frozen, start, turns, max_tokens, unit, used)
            used += cost
            start = unit.start
        return cls(frozen, start, turns, max_tokens, None, used)

    def holds_for(
        self, view: Sequence[Message], counter: TokenCounter, turns: int, max_tokens: int | None
    ) -> bool:
        """True when ``view``'s window begins at :attr:`start` too: as long, the same messages
        from :attr:`start` on and, before it, messages that begin units and turns where the
        old ones did (a masked output, trimmed arguments, cleared thinking), with the unit the
        cap refused still too big for it."""
        old = self.view
        if turns != self.turns or max_tokens != self.max_tokens or len(view) != len(old):
            return False
        if view is old:
            return True
        for i in range(len(old) - 1, self.start - 1, -1):
            if view[i] is not old[i]:
                return False
        for i in range(self.start):
            new = view[i]
            if new is not old[i] and not _same_shape(new, old[i]):
                return False
        refused = self.refused
        if refused is None or max_tokens is None:
            return True  # the turns stopped the search, or it took every unit
        return self.used + unit_tokens(view, refused, counter) > max_tokens


def _same_shape(new: Message, old: Message) -> bool:
    """True when ``new`` cuts a view into units and turns exactly as ``old`` did."""
    return (
        new.role == old.role
        and [c.call_id for c in new.tool_calls] == [c.call_id for c in old.tool_calls]
        and [r.call_id for r in new.tool_results] == [r.call_id for r in old.tool_results]
        and is_user_turn(new) == is_user_turn(old)
    )
