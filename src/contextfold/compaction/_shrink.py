"""``ShrinkToFit``: the hard-mode guarantee that what is left fits the target.

After the other strategies ran in hard mode, the view is usually the task, a summary, the last
user message and the last unit. When that is still too big (an enormous last output, a call with
a whole file in its arguments, a huge task statement), the big messages are rewritten in place:
texts cut to head + tail, outputs masked, the large values of call arguments cut (the small
ones kept, the call never ``{}``), thinking dropped. Every
removed text is stored first and its ref named in what replaces it. The rewrite is a
:class:`~contextfold.edits.SummarizeEdit` over that one message whose replacement keeps the
message's id, role and call ids, so the view stays valid and later edits still find it.

What each message may cost:

- the latest turn (the messages after the last assistant message) keeps its size: the model
  reads it next, and a view that cannot hold it does not fit;
- a message compaction already cut (flagged ``"shrunk"``), a drop note and a masked output keep
  their size: a message is cut at most once, so its original text is always one ``read_result``
  away and a cut marker is never cut into another marker;
- the task keeps its text whenever it fits what the conversation can be given at all
  (``ctx.room_tokens``) beside a bare line for every other message; only a task that cannot
  fit even so is cut, to what that room leaves it;
- the other messages share what the target leaves (water-filling: small messages keep their
  size, the slack goes to the big ones). When the target leaves them nothing (the system prompt
  and the tools take it all), they become bare reference lines, once, and the view stays above
  the target: the minimum, reached in one compaction, not re-cut turn after turn.

A cut is kept only when it is smaller than what it replaces: a text shorter than its cut marker
stays as it is, and nothing is stored for it. The fit is guaranteed whenever the system messages,
the messages cut before and a bare line for each other message fit.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from contextfold.compaction._context import CompactionContext
from contextfold.compaction._results import shows_placeholder
from contextfold.compaction.summary import StructuredSummary, SummaryCaps
from contextfold.edits import DROP_NOTE_KIND, ContextEdit, SummarizeEdit
from contextfold.history.turns import latest_turn_start, task_index
from contextfold.messages import (
    ImagePart,
    Message,
    Part,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from contextfold.outputs.blobs import REF_HEX_DIGITS, REF_PREFIX
from contextfold.outputs.intake import placeholder_for
from contextfold.outputs.truncate import OutputLimits, truncate_head_tail

__all__ = [
    "MIN_SHARE_TOKENS",
    "SHRUNK_FLAG",
    "SMALL_ARGUMENT_CHARS",
    "ShrinkToFit",
    "cut_arguments",
    "cut_text",
    "was_cut",
]

MIN_SHARE_TOKENS = 96
"""Below this share a message's texts become bare reference lines instead of head + tail."""
SHRUNK_FLAG = "shrunk"
"""``Meta.flags`` entry of a message this strategy rewrote (it is never cut again)."""
_ROUNDS = 4
"""Planning passes: a cut text may count a little more than its share, so each further pass
plans the cuts again, from the original messages, with the overshoot taken off the budget."""
_CHARS_PER_TOKEN = 3
"""Used only to turn a token share into a character cap for a re-rendered summary."""
_PROBE_REF = REF_PREFIX + "0" * REF_HEX_DIGITS
"""A ref of the real length: a replacement is measured with it before anything is stored."""


@dataclass(frozen=True)
class ShrinkToFit:
    """Hard mode only: rewrite the biggest messages in place until the view fits the target."""

    name: str = "shrink"

    def plan(self, ctx: CompactionContext) -> list[ContextEdit]:
        """In-place rewrites of oversized messages, or nothing when the view fits already."""
        if not ctx.hard or ctx.excess() <= 0:
            return []
        count = ctx.counter.count_message
        view = ctx.view
        task_at = task_index(view)
        # The latest turn stays whole when it fits what the conversation can be given at all
        # beside the least of the rest (the view may then end above the target); else it is
        # shared out too (a caller that needs it whole sees it was cut).
        # From the last assistant message: the calls the newest results answer stay whole too.
        newest = latest_turn_start(view)
        tries = [newest - 1 if newest < len(view) else newest] if ctx.keep_latest_turn else []
        for latest in (*tries, len(view)):
            stays = {i for i, m in enumerate(view) if m.role == "system" or was_cut(m)}
            stays.update(range(latest, len(view)))
            kept = sum(count(view[i]) for i in stays)
            movable = [m for i, m in enumerate(view) if i not in stays]
            task = None
            if task_at is not None and task_at not in stays:
                task = view[task_at]
            room = ctx.room() - kept
            if kept + _least(ctx, movable, task, room) <= ctx.room():
                break
        budget = ctx.target_tokens - kept
        rewritten: dict[str, Message] = {}
        for _ in range(_ROUNDS):
            shares = _shares(ctx, movable, task, budget, room)
            rewritten = {
                m.id: _shrunk(ctx, m, shares[m.id]) for m in movable if _over(ctx, m, shares)
            }
            after = sum(count(rewritten.get(m.id, m)) for m in movable)
            over = after - max(budget, _least(ctx, movable, task, room))
            if over <= 0 or not rewritten:
                break
            budget -= over  # estimation drift: ask the next round for the difference
        return [
            SummarizeEdit(m.id, m.id, rewritten[m.id])
            for m in movable
            if m.id in rewritten and count(rewritten[m.id]) < count(m)
        ]


def was_cut(message: Message) -> bool:
    """True for a message that already stands for removed content: one this strategy rewrote,
    the note of a drop, or an output shown as a masking placeholder. Such a message is never cut
    again (a marker of a marker would put the original one more ``read_result`` away)."""
    if SHRUNK_FLAG in message.meta.flags or message.meta.kind == DROP_NOTE_KIND:
        return True
    results = message.tool_results
    return bool(results) and all(shows_placeholder(message, r) for r in results)


def _over(ctx: CompactionContext, message: Message, shares: dict[str, int]) -> bool:
    return shares[message.id] < ctx.counter.count_message(message)


def _floor(ctx: CompactionContext, messages: Sequence[Message]) -> int:
    """What ``messages`` cost at the least: a bare line each, or their size when smaller."""
    return sum(min(ctx.counter.count_message(m), MIN_SHARE_TOKENS) for m in messages)


def _task_share(ctx: CompactionContext, task: Message, floor: int, room: int) -> int:
    """The task's share: its size when it fits the room beside ``floor`` for the others, else
    what the room leaves it."""
    return min(ctx.counter.count_message(task), max(MIN_SHARE_TOKENS, room - floor))


def _least(
    ctx: CompactionContext, movable: Sequence[Message], task: Message | None, room: int
) -> int:
    """What ``movable`` costs at the least (the task at its share, the others at their floor)."""
    floor = _floor(ctx, [m for m in movable if m is not task])
    return floor + (_task_share(ctx, task, floor, room) if task is not None else 0)


def _shares(
    ctx: CompactionContext,
    movable: Sequence[Message],
    task: Message | None,
    budget: int,
    room: int,
) -> dict[str, int]:
    """Tokens each of ``movable`` may cost: the task first (see the module docstring), then
    water-filling of what ``budget`` leaves."""
    shares: dict[str, int] = {}
    others = [m for m in movable if m is not task]
    if task is not None:
        shares[task.id] = _task_share(ctx, task, _floor(ctx, others), room)
        budget -= shares[task.id]
    sized = sorted((ctx.counter.count_message(m), m.id) for m in others)
    left = max(0, budget)
    for k, (size, msg_id) in enumerate(sized):
        fair = left // (len(sized) - k)
        shares[msg_id] = min(size, fair)
        left -= shares[msg_id]
    return shares


def _shrunk(ctx: CompactionContext, message: Message, share: int) -> Message:
    """``message`` rewritten to cost about ``share`` tokens (same id, role and call ids)."""
    overhead = ctx.counter.count_message(message.with_parts(()))
    weights = [_weight(ctx, p) for p in message.parts]
    parts: list[Part] = []
    for part, tokens in zip(
        message.parts, _water_fill(weights, max(0, share - overhead)), strict=True
    ):
        shrunk = _shrink_part(ctx, part, tokens)
        if shrunk is not None:
            parts.append(shrunk)
    if not parts:  # a message with nothing renderable would make the request invalid
        parts.append(TextPart("[content removed to fit the context window]"))
    flags = (
        message.meta.flags
        if SHRUNK_FLAG in message.meta.flags
        else (*message.meta.flags, SHRUNK_FLAG)
    )
    return replace(
        message, parts=tuple(parts), meta=replace(message.meta, tokens=None, flags=flags)
    )


def _water_fill(sizes: Sequence[int], room: int) -> list[int]:
    """Shares of ``room`` for parts of these ``sizes``: small parts keep their size, the big
    ones share the rest. A task's few lines of instruction after pages of pasted context stay
    whole; shared in proportion, they would be the first thing cut to a bare reference."""
    shares = [0] * len(sizes)
    left = room
    order = sorted(range(len(sizes)), key=lambda i: sizes[i])
    for k, index in enumerate(order):
        shares[index] = min(sizes[index], left // (len(order) - k))
        left -= shares[index]
    return shares


def _weight(ctx: CompactionContext, part: Part) -> int:
    if isinstance(part, TextPart | ThinkingPart):
        return ctx.counter.count_text(part.text)
    if isinstance(part, SummaryPart):
        return ctx.counter.count_text(part.text)
    if isinstance(part, ToolResultPart):
        return ctx.counter.count_text(part.content)
    if isinstance(part, ToolCallPart):
        return ctx.counter.count_text(part.arguments)
    return 1


def _shrink_part(ctx: CompactionContext, part: Part, tokens: int) -> Part | None:
    if isinstance(part, ThinkingPart | ImagePart):
        return None  # reasoning of an old turn and images cannot be cut; dropping them is valid
    if isinstance(part, TextPart):
        return TextPart(cut_text(ctx, part.text, tokens))
    if isinstance(part, SummaryPart):
        return _shrink_summary(ctx, part, tokens)
    if isinstance(part, ToolResultPart):
        return _shrink_result(ctx, part, tokens)
    if isinstance(part, ToolCallPart):
        if ctx.counter.count_text(part.arguments) <= max(tokens, 2):
            return part
        probe = cut_arguments(part.arguments, _PROBE_REF)
        if ctx.counter.count_text(probe) >= ctx.counter.count_text(part.arguments):
            return part  # only small fields: nothing to cut (and nothing stored)
        ref = ctx.stash(part.arguments, part.name)
        return replace(part, arguments=cut_arguments(part.arguments, ref))
    return part


SMALL_ARGUMENT_CHARS = 200
"""An argument whose JSON is at most this long keeps its value when a call is cut (a path, a
flag, a pattern): what the call did stays readable; only its large values go behind a ref."""
_ARGUMENT_HEAD_CHARS = 80


def cut_arguments(arguments: str, ref: str) -> str:
    """A call's JSON arguments with each large value cut to a head and a marker naming ``ref``
    (the small ones kept as they are), so the call never becomes ``{}``. Arguments that are not
    a JSON object become an object holding only the marker."""
    marker = f"[cut to fit the context window; read_result {ref}]"
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):
        value = None
    if not isinstance(value, dict):
        return json.dumps({"_cut": marker})
    cut: dict[str, Any] = {}
    for key, item in value.items():
        size = len(json.dumps(item, ensure_ascii=False))
        if size <= SMALL_ARGUMENT_CHARS:
            cut[key] = item
        elif isinstance(item, str):
            head = item[:_ARGUMENT_HEAD_CHARS]
            cut[key] = f"{head}… [{len(item) - len(head):,} characters {marker[1:]}"
        else:
            cut[key] = marker
    return json.dumps(cut, ensure_ascii=False)


def _shrink_result(ctx: CompactionContext, part: ToolResultPart, tokens: int) -> ToolResultPart:
    size = ctx.counter.count_text(part.content)
    if size <= tokens or ctx.counter.count_text(placeholder_for(part, None, _PROBE_REF)) >= size:
        return part  # it fits, or its placeholder would cost as much
    ref = ctx.stash_result(part)
    return replace(part, content=placeholder_for(part, None, ref), images=(), ref=ref)


def _shrink_summary(ctx: CompactionContext, part: SummaryPart, tokens: int) -> SummaryPart:
    if ctx.counter.count_text(part.text) <= tokens:
        return part
    caps = SummaryCaps(max_chars=max(200, tokens * _CHARS_PER_TOKEN))
    smaller = StructuredSummary.from_part(part).capped(caps)
    text = smaller.render(part.covers)
    if ctx.counter.count_text(text) > tokens:
        text = cut_text(ctx, part.text, tokens)
    # The full sections stay on the part: a later compaction extends them, nothing is lost.
    return replace(part, text=text)


def cut_text(ctx: CompactionContext, text: str, tokens: int) -> str:
    """``text`` within ``tokens``: head + tail with a ref, or a bare ref line when tiny; ``text``
    itself when it fits or when its cut would cost as much. The full text is stored only when it
    is cut."""
    size = ctx.counter.count_text(text)
    if size <= tokens or ctx.counter.count_text(_cut(ctx, text, tokens, _PROBE_REF)) >= size:
        return text
    return _cut(ctx, text, tokens, ctx.stash(text))


def _cut(ctx: CompactionContext, text: str, tokens: int, ref: str) -> str:
    if tokens >= MIN_SHARE_TOKENS:
        limits = OutputLimits(
            max_lines=1_000_000, max_bytes=max(256, tokens * 8), max_tokens=tokens, head_ratio=0.5
        )
        cut = truncate_head_tail(
            text, limits, counter=ctx.counter, note=f"Full text: read_result {ref}"
        )
        if ctx.counter.count_text(cut.text) <= tokens:
            return cut.text
    return f"[text cut to fit the context window; read_result {ref}]"
