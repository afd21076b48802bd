"""The provider rules a view must meet, checked fast (:func:`valid_prefix`) or explained
(:func:`first_problem`). :mod:`contextfold.history.repair` builds ``repair`` and ``validate`` on
them.

``strict`` adds the Anthropic-only rules: the first non-system message is a user turn, and call ids
are unique in the request and match ``[A-Za-z0-9_-]+``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from contextfold.messages import (
    ImagePart,
    Message,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)

__all__ = ["ANTHROPIC_ID", "Problem", "first_problem", "good_id", "is_blank", "valid_prefix"]

ANTHROPIC_ID = re.compile(r"[A-Za-z0-9_-]+")
"""What Anthropic accepts as a ``tool_use`` id."""


def is_blank(text: str) -> bool:
    """True for text a provider would refuse as a block: empty or whitespace only."""
    return not text or text.isspace()


@dataclass(slots=True)
class Problem:
    """The first rule a view breaks: what, at which message index, for which call."""

    message: str
    index: int
    call_id: str | None = None


def _check_parts(message: Message, index: int, strict: bool) -> tuple[list[str], Problem | None]:
    """Call ids of an assistant/user/system message, or the first problem with its parts."""
    role = message.role
    calls: list[str] = []
    content = thinking = blank = False
    for part in message.parts:
        kind = type(part)
        if kind is TextPart or kind is SummaryPart:
            if is_blank(part.text):  # type: ignore[union-attr]
                blank = True
            else:
                content = True
        elif kind is ToolCallPart and role == "assistant":
            call_id = part.call_id  # type: ignore[union-attr]
            if call_id in calls:
                return calls, Problem("the same call id twice in one message", index, call_id)
            if strict and not ANTHROPIC_ID.fullmatch(call_id):
                return calls, Problem("call id must match [A-Za-z0-9_-]+", index, call_id)
            calls.append(call_id)
            content = True
        elif kind is ThinkingPart and role == "assistant":
            thinking = True
        elif kind is ImagePart and role != "assistant":
            content = True
        else:
            return calls, Problem(f"a {part.part_kind} part cannot be in a {role} message", index)
    if not content:
        what = "only thinking" if thinking else "nothing the provider can render"
        return calls, Problem(f"a {role} message with {what}", index)
    if blank:
        return calls, Problem("a blank text part (providers reject whitespace-only text)", index)
    return calls, None


_GOOD_IDS: set[str] = set()
"""Call ids already known to match the Anthropic pattern: the same views are checked every turn."""
_GOOD_IDS_MAX = 200_000


def good_id(call_id: str) -> bool:
    """True when Anthropic accepts ``call_id`` (remembered: the same ids come every turn)."""
    if call_id in _GOOD_IDS:
        return True
    if ANTHROPIC_ID.fullmatch(call_id) is None:
        return False
    if len(_GOOD_IDS) >= _GOOD_IDS_MAX:
        _GOOD_IDS.clear()
    _GOOD_IDS.add(call_id)
    return True


def valid_prefix(messages: Sequence[Message], strict: bool) -> tuple[int, bool, set[str]]:
    """How much of ``messages`` is certainly valid and closed; whether a user turn opened it; the
    call ids in it (collected in strict mode only).

    The first number is ``len(messages)`` when nothing breaks a rule. Otherwise it is where
    repair must start: every call before it is answered before it, so nothing after it can
    change what comes before. This is the fast path: one tight loop, no allocation for ordinary
    messages. :func:`first_problem` says what is wrong.
    """
    text_part, summary_part, call_part = TextPart, SummaryPart, ToolCallPart
    result_part, thinking_part, image_part = ToolResultPart, ThinkingPart, ImagePart
    seen: set[str] = set()
    added: list[str] = []  # ids seen since the last safe point
    awaiting: set[str] | None = None  # calls of the last response still without a result
    first_turn_seen = not strict
    safe, safe_first = 0, first_turn_seen
    for index, message in enumerate(messages):
        if not message.meta.agent_visible:
            continue
        role = message.role
        parts = message.parts
        if role == "tool":
            if awaiting is None or not parts:
                return safe, safe_first, _before(seen, added)
            for part in parts:
                if type(part) is not result_part:
                    return safe, safe_first, _before(seen, added)
                try:
                    awaiting.remove(part.call_id)
                except KeyError:  # no such call, or already answered
                    return safe, safe_first, _before(seen, added)
            continue
        if awaiting:
            return safe, safe_first, _before(seen, added)
        awaiting = None
        safe, safe_first = index, first_turn_seen
        if added:
            added.clear()
        if not first_turn_seen and role != "system":
            if role != "user":
                return safe, safe_first, _before(seen, added)
            first_turn_seen = True
        if not parts:
            return safe, safe_first, _before(seen, added)
        if role == "assistant":
            calls: set[str] | None = None
            content = False
            for part in parts:
                kind = type(part)
                if kind is call_part:
                    call_id = part.call_id  # type: ignore[union-attr]
                    if calls is None:
                        calls = set()
                    elif call_id in calls:
                        return safe, safe_first, _before(seen, added)
                    calls.add(call_id)
                    if strict:
                        if call_id in seen or not good_id(call_id):
                            return safe, safe_first, _before(seen, added)
                        seen.add(call_id)
                        added.append(call_id)
                    content = True
                elif kind is text_part or kind is summary_part:
                    text = part.text  # type: ignore[union-attr]
                    if not text or text.isspace():
                        return safe, safe_first, _before(seen, added)
                    content = True
                elif kind is not thinking_part:
                    return safe, safe_first, _before(seen, added)
            if not content:
                return safe, safe_first, _before(seen, added)
            awaiting = calls
        else:
            for part in parts:
                kind = type(part)
                if kind is text_part or kind is summary_part:
                    text = part.text  # type: ignore[union-attr]
                    if not text or text.isspace():
                        return safe, safe_first, _before(seen, added)
                elif kind is not image_part:
                    return safe, safe_first, _before(seen, added)
    if awaiting:
        return safe, safe_first, _before(seen, added)
    return len(messages), first_turn_seen, seen


def _before(seen: set[str], added: list[str]) -> set[str]:
    """The ids seen before the last safe point (those since were added to ``seen`` last)."""
    seen.difference_update(added)
    return seen


def first_problem(messages: Sequence[Message], strict: bool) -> Problem | None:
    """The first rule ``messages`` break, with the message index and call id; None if none."""
    seen: set[str] = set()
    run: list[str] | None = None  # calls of the response whose results may follow
    answered: set[str] = set()
    run_index = 0
    first_turn_seen = not strict
    for index, message in enumerate(messages):
        if not message.meta.agent_visible:
            continue
        role = message.role
        if role == "tool":
            if not message.parts:
                return Problem("a tool message with no results", index)
            for part in message.parts:
                if type(part) is not ToolResultPart:
                    return Problem(f"a {part.part_kind} part cannot be in a tool message", index)
                call_id = part.call_id
                if run is None or call_id not in run:
                    return Problem(
                        "result does not answer a call of the assistant message right before it",
                        index,
                        call_id,
                    )
                if call_id in answered:
                    return Problem("a second result for the same call", index, call_id)
                answered.add(call_id)
            continue
        if run is not None:
            if len(answered) != len(run):
                missing = next(c for c in run if c not in answered)
                return Problem("call has no result right after it", run_index, missing)
            run = None
        if not first_turn_seen and role != "system":
            if role != "user":
                return Problem("the first non-system message must be a user message", index)
            first_turn_seen = True
        calls, problem = _check_parts(message, index, strict)
        if problem is not None:
            return problem
        if calls:
            if strict:
                for call_id in calls:
                    if call_id in seen:
                        return Problem("call id already used earlier", index, call_id)
                    seen.add(call_id)
            run, answered, run_index = calls, set(), index
    if run is not None and len(answered) != len(run):
        missing = next(c for c in run if c not in answered)
        return Problem("call has no result right after it", run_index, missing)
    return None
