"""Finding tool results in a view, and telling which ones compaction already shortened."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from contextfold.messages import Message, ToolCallPart, ToolResultPart

__all__ = ["ResultSlot", "calls_by_id", "is_placeholder", "result_slots", "shows_placeholder"]

_REPLACED_FLAGS = frozenset({"masked", "cleared"})


@dataclass(frozen=True, slots=True)
class ResultSlot:
    """One tool result in a view: where it sits, the result, and the call that asked for it."""

    index: int
    message: Message
    result: ToolResultPart
    call: ToolCallPart | None


def calls_by_id(view: Sequence[Message]) -> dict[str, ToolCallPart]:
    """Every tool call in the view by its id."""
    return {c.call_id: c for m in view if m.role == "assistant" for c in m.tool_calls}


def result_slots(
    view: Sequence[Message], lo: int = 0, hi: int | None = None
) -> Iterator[ResultSlot]:
    """The tool results of ``view[lo:hi]``, oldest first."""
    calls = calls_by_id(view)
    stop = len(view) if hi is None else hi
    for index in range(lo, stop):
        message = view[index]
        for result in message.tool_results:
            yield ResultSlot(index, message, result, calls.get(result.call_id))


def is_placeholder(slot: ResultSlot) -> bool:
    """True when the result already shows a masking/clearing placeholder instead of its output.

    Truncated results are not placeholders: masking may still shorten them further.
    """
    return shows_placeholder(slot.message, slot.result)


def shows_placeholder(message: Message, result: ToolResultPart) -> bool:
    """True when ``result`` (a result of ``message``) shows a masking/clearing placeholder: a
    single line naming its ref, in a message flagged masked or cleared."""
    if not _REPLACED_FLAGS.intersection(message.meta.flags) or result.ref is None:
        return False
    content = result.content.strip()
    return result.ref in content and "\n" not in content
