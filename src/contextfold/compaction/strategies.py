"""Compaction strategies: each looks at a view and proposes context edits, never mutating it.

Every strategy has a ``name`` and ``plan(ctx) -> list[ContextEdit]``. A strategy that hides or
shortens a tool result first puts the full output in the blob store and carries its ``ref`` (in
the replaced result, the placeholder, or the digest/summary text), so nothing leaves the window
unrecoverably. Edits name messages by id, so they apply to the view they were planned on and to
any later view of the same transcript.

Cheap to expensive, as the presets order them:

- :class:`TruncateToolResults` cuts big old outputs to head + tail (the cheapest tier: no cache
  break for recent turns, and errors, which sit at the end, survive);
- :class:`MaskObservations` replaces old outputs by one-line placeholders, in one batch;
- :class:`ClearToolResults` does the same with Anthropic's ``clear_tool_uses`` rules;
- :class:`ToolResultDigest` folds the oldest tool rounds into one digest message;
- :class:`Summarize` replaces the middle of the conversation by a structured summary;
- :class:`DropOldest` takes whole units out of the view (the last resort).

Context hygiene (:mod:`contextfold.compaction.hygiene`: superseded reads, big old call arguments,
old thinking) runs between truncation and masking in a compaction, and rides on a MASK-zone batch
(``MaskObservations.riders``).

In hard mode (``ctx.hard``: overflow recovery, BLOCK zone) the recent window shrinks to the last
unit and truncation tightens; :class:`ShrinkToFit` (in :mod:`contextfold.compaction._shrink`)
then guarantees the fit.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from contextfold.compaction._context import CompactionContext
from contextfold.compaction._digest import ToolResultDigest
from contextfold.compaction._results import ResultSlot, is_placeholder, result_slots
from contextfold.compaction._summarize import Summarize
from contextfold.edits import (
    DROP_NOTE_KIND,
    ClearedThinking,
    ContextEdit,
    DropEdit,
    MaskEdit,
    ReplacedArguments,
    ReplacedResult,
    SummarizeEdit,
    apply_edit,
)
from contextfold.events import ObservationsMasked
from contextfold.history.turns import (
    atomic_units,
    last_user_index,
    latest_turn_start,
    task_index,
)
from contextfold.messages import Message, Meta, SummaryPart
from contextfold.outputs.blobs import REF_PATTERN
from contextfold.outputs.intake import placeholder_for
from contextfold.outputs.truncate import OutputLimits, truncate_head_tail

__all__ = [
    "DEFAULT_CLEAR_KEEP",
    "DEFAULT_MASK_BATCH_SHARE",
    "DEFAULT_TRUNCATE_ABOVE_TOKENS",
    "DEFAULT_TRUNCATE_KEEP_TOKENS",
    "ClearToolResults",
    "DropOldest",
    "MaskObservations",
    "Strategy",
    "Summarize",
    "ToolResultDigest",
    "TruncateToolResults",
    "maskable",
    "masked_result",
]

DEFAULT_MASK_BATCH_SHARE = 0.15
"""Least share of the window one masking batch frees. Every edit breaks the provider's prompt
cache from the first changed message on, so a few large batches are far cheaper than many small
ones: with 15 % a batch buys several turns of growth (measured in benchmarks/cache.py)."""
MIN_MASKABLE_TOKENS = 48
"""Results smaller than this are left alone: their placeholder would cost about as much."""
DEFAULT_DROP_NOTE_REFS = 12
"""Refs a drop note lists (the rest stay reachable from the transcript)."""
HARD_DROP_NOTE_REFS = 4
"""Refs a drop note lists in hard mode, where every token counts."""
DEFAULT_CLEAR_KEEP = 3
"""Most recent tool uses ``ClearToolResults`` keeps (Anthropic's default)."""
CLEARED_PLACEHOLDER = "[Tool result cleared to save context; read_result {ref} returns it]"
"""What a cleared result shows (Anthropic's clearing leaves a similar fixed note)."""
DEFAULT_TRUNCATE_ABOVE_TOKENS = 2_000
"""Old outputs above this size are cut to head and tail: the first, cheapest tier of pruning."""
DEFAULT_TRUNCATE_KEEP_TOKENS = 500
"""Tokens kept on each side of a cut output (head and tail)."""
HARD_TRUNCATE_ABOVE_TOKENS = 500
"""Hard mode cuts outputs above this size, in the recent window too."""
HARD_TRUNCATE_KEEP_TOKENS = 120
"""Tokens hard mode keeps on each side of a cut output."""


class Strategy(Protocol):
    """A compaction step: looks at ``ctx.view`` and returns the edits it proposes."""

    @property
    def name(self) -> str:
        """A short label for reports (``CompactResult.strategies_run``)."""
        ...

    def plan(self, ctx: CompactionContext) -> list[ContextEdit]:
        """Edits that shrink the view (empty when this strategy has nothing to offer)."""
        ...


# --------------------------------------------------------------------------------------------------
# Masking and clearing
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MaskObservations:
    """Old tool outputs become one-line placeholders, oldest first, in one batch.

    The batch frees at least ``min_batch_share`` of the window, or everything needed to reach the
    target, whichever is larger; results in the recent window and results already masked are
    left alone. One :class:`MaskEdit` per run.

    ``riders`` (context hygiene, :mod:`contextfold.compaction.hygiene`) join a batch that frees
    ``min_batch_share`` by itself: they ride on its cache break and never cause one. They go
    first (what they leave is more telling than a placeholder), the batch is planned again on
    what they leave, and their mask edits are merged into its one edit.
    """

    min_batch_share: float = DEFAULT_MASK_BATCH_SHARE
    name: str = "mask"
    riders: tuple[Strategy, ...] = ()

    def plan(self, ctx: CompactionContext) -> list[ContextEdit]:
        """One batch of placeholders, or nothing when no old output is left to mask."""
        need = max(int(self.min_batch_share * ctx.window_tokens), ctx.excess())
        items, freed = self._batch(ctx, need)
        if not items:
            return []
        edit = MaskEdit(tuple(items), reason="mask")
        if self.riders and freed >= self.min_batch_share * ctx.window_tokens:
            edit, freed = _with_riders(ctx, self, need, self.riders)
        ctx.emit(
            ObservationsMasked(
                session_id=ctx.session_id or None,
                count=len(edit.items),
                freed_tokens=freed,
                edit_id=edit.id,
            )
        )
        return [edit]

    def _batch(self, ctx: CompactionContext, need: int) -> tuple[list[ReplacedResult], int]:
        """The oldest outputs whose placeholders free ``need`` tokens, and what they free."""
        items: list[ReplacedResult] = []
        freed = 0
        for slot in result_slots(ctx.view, 0, ctx.window_start()):
            masked = masked_result(ctx, slot)
            if masked is None:
                continue
            item, saved = masked
            items.append(item)
            freed += saved
            if freed >= need:
                break
        return items, freed


def maskable(ctx: CompactionContext, slot: ResultSlot) -> bool:
    """Whether :class:`MaskObservations` looks at the result at all: not masked yet, and not
    too small to be worth a placeholder."""
    if is_placeholder(slot):
        return False
    return ctx.counter.count_text(slot.result.content) >= MIN_MASKABLE_TOKENS


def masked_result(ctx: CompactionContext, slot: ResultSlot) -> tuple[ReplacedResult, int] | None:
    """The placeholder :class:`MaskObservations` puts in place of one result (its output
    stashed), with the tokens it saves; ``None`` when it leaves the result alone."""
    if not maskable(ctx, slot):
        return None
    before = ctx.counter.count_text(slot.result.content)
    ref = ctx.stash_result(slot.result)
    text = placeholder_for(slot.result, slot.call, ref)
    saved = before - ctx.counter.count_text(text)
    if saved <= 0:
        return None
    return ReplacedResult(slot.message.id, slot.result.call_id, text, ref), saved


def _with_riders(
    ctx: CompactionContext, mask: MaskObservations, need: int, riders: Sequence[Strategy]
) -> tuple[MaskEdit, int]:
    """One edit: what ``riders`` plan, then ``mask``'s batch planned again on the view they
    leave; with the tokens it frees."""
    view = list(ctx.view)
    items: list[ReplacedResult] = []
    arguments: list[ReplacedArguments] = []
    thinking: list[ClearedThinking] = []
    for rider in riders:
        for edit in rider.plan(ctx.with_view(view)):
            if isinstance(edit, MaskEdit):
                view = apply_edit(view, edit)
                items += edit.items
                arguments += edit.arguments
                thinking += edit.thinking
    batch, _ = mask._batch(ctx.with_view(view), need)
    merged = MaskEdit(
        (*items, *batch), "mask", arguments=tuple(arguments), thinking=tuple(thinking)
    )
    return merged, ctx.tokens() - ctx.counter.count_messages(apply_edit(ctx.view, merged))


@dataclass(frozen=True)
class ClearToolResults:
    """Anthropic's ``clear_tool_uses_20250919`` rules, applied client-side.

    Every tool result except the last ``keep`` tool uses and those of ``exclude_tools`` is
    replaced by a placeholder naming its ref. ``clear_tool_inputs`` also empties the calls'
    arguments (all of them with ``True``, or only those of the named tools); their text is
    stored too. When the clearing would free less than ``clear_at_least`` tokens nothing is
    cleared (the cache break would not pay for itself). ``trigger_tokens``, when set, is the view
    size under which the strategy does nothing.
    """

    keep: int = DEFAULT_CLEAR_KEEP
    exclude_tools: Sequence[str] = ()
    clear_tool_inputs: bool | Sequence[str] = False
    clear_at_least: int = 0
    trigger_tokens: int | None = None
    name: str = "clear"

    def plan(self, ctx: CompactionContext) -> list[ContextEdit]:
        """One clearing edit, or nothing (under the trigger, or less than ``clear_at_least``)."""
        if self.trigger_tokens is not None and ctx.tokens() < self.trigger_tokens:
            return []
        slots = list(result_slots(ctx.view))
        kept = slots[-self.keep :] if self.keep > 0 else []
        keep_ids = {s.result.call_id for s in kept}
        items: list[ReplacedResult] = []
        freed = 0
        for slot in slots:
            name = slot.call.name if slot.call is not None else slot.result.name
            if slot.result.call_id in keep_ids or name in self.exclude_tools:
                continue
            arguments = slot.call.arguments if slot.call is not None else ""
            clear_args = self._clears_inputs(name) and arguments not in ("", "{}")
            already = is_placeholder(slot)
            if already and not clear_args:
                continue
            ref = ctx.stash_result(slot.result)
            if already:
                text, saved = slot.result.content, 0
            else:
                text = CLEARED_PLACEHOLDER.format(ref=ref)
                saved = ctx.counter.count_text(slot.result.content) - ctx.counter.count_text(text)
                if saved <= 0 and not clear_args:
                    continue  # a tiny output: its placeholder would be longer
            if clear_args:
                args_ref = ctx.stash(arguments, name)
                if not already:
                    text = text[:-1] + f"; its call arguments: read_result {args_ref}]"
                saved += ctx.counter.count_text(arguments)
            freed += max(0, saved)
            items.append(
                ReplacedResult(slot.message.id, slot.result.call_id, text, ref, clear_args)
            )
        if not items or freed < max(1, self.clear_at_least):
            return []
        return [MaskEdit(tuple(items), reason="clear")]

    def _clears_inputs(self, tool: str) -> bool:
        if isinstance(self.clear_tool_inputs, bool):
            return self.clear_tool_inputs
        return tool in self.clear_tool_inputs


# --------------------------------------------------------------------------------------------------
# Truncation
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TruncateToolResults:
    """Old outputs above ``above_tokens`` are cut to ``keep_tokens`` of head and of tail.

    The cut text says where the full output is (``read_result <ref>``). Hard mode uses the
    tighter ``hard_*`` limits and includes the recent window.
    """

    above_tokens: int = DEFAULT_TRUNCATE_ABOVE_TOKENS
    keep_tokens: int = DEFAULT_TRUNCATE_KEEP_TOKENS
    hard_above_tokens: int = HARD_TRUNCATE_ABOVE_TOKENS
    hard_keep_tokens: int = HARD_TRUNCATE_KEEP_TOKENS
    name: str = "truncate"

    def plan(self, ctx: CompactionContext) -> list[ContextEdit]:
        """One truncation edit for every oversized output, or nothing."""
        above = self.hard_above_tokens if ctx.hard else self.above_tokens
        keep = self.hard_keep_tokens if ctx.hard else self.keep_tokens
        # Hard mode reaches into the recent window (with keep_latest_turn, not the newest
        # results: the model reads them next; ShrinkToFit is then the last resort).
        stop = ctx.window_start()
        if ctx.hard:
            stop = latest_turn_start(ctx.view) if ctx.keep_latest_turn else len(ctx.view)
        items: list[ReplacedResult] = []
        for slot in result_slots(ctx.view, 0, stop):
            if is_placeholder(slot):
                continue
            item = truncated_result(ctx, slot, above, keep)
            if item is not None:
                items.append(item)
        return [MaskEdit(tuple(items), reason="truncate")] if items else []


def truncated_result(
    ctx: CompactionContext, slot: ResultSlot, above_tokens: int, keep_tokens: int
) -> ReplacedResult | None:
    """The result cut to head + tail with its ref, or ``None`` when it is small enough."""
    content = slot.result.content
    if ctx.counter.count_text(content) <= above_tokens:
        return None
    ref = ctx.stash_result(slot.result)
    limits = OutputLimits(
        max_lines=1_000_000,
        max_bytes=max(256, keep_tokens * 2 * 8),
        max_tokens=max(64, keep_tokens * 2),
        head_ratio=0.5,
    )
    cut = truncate_head_tail(
        content, limits, counter=ctx.counter, note=f"Full output: read_result {ref}"
    )
    if not cut.truncated:
        return None
    return ReplacedResult(slot.message.id, slot.result.call_id, cut.text, ref)


# --------------------------------------------------------------------------------------------------
# Dropping
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DropOldest:
    """Whole units leave the view oldest first until the target is reached (the last resort).

    Never dropped: the system messages before the conversation (one sent inside it leaves with
    its turn), the task (first user message), the last user message, summaries and the recent
    window (in hard mode, only the last unit is protected and digests
    may go too). Outputs of dropped results are stored first, and each run of dropped units is
    replaced by a one-paragraph note naming what left and the refs that bring the outputs back,
    so a drop is never silent (the note costs far less than what it replaces). An earlier note
    next to a run is folded into the new one, its counts and refs carried over, so notes neither
    pile up nor become the subject of another note; a note is never dropped on its own.
    """

    name: str = "drop"
    keep_kinds: frozenset[str] = field(
        default_factory=lambda: frozenset({"summary", "tool_summary"})
    )
    note_refs: int = DEFAULT_DROP_NOTE_REFS

    def plan(self, ctx: CompactionContext) -> list[ContextEdit]:
        """One edit per run of dropped units (a note in its place), or nothing."""
        need = ctx.excess()
        if need <= 0:
            return []
        view = ctx.view
        protected = {i for i in (task_index(view), last_user_index(view)) if i is not None}
        # The system messages before the conversation are its prompt; one sent inside it (a
        # host's reminder) leaves with the turn it came in, rather than outliving it.
        protected.update(range(_first_conversation_index(view)))
        keep_kinds = {"summary"} if ctx.hard else self.keep_kinds
        stop = ctx.window_start()
        runs: list[list[int]] = []
        freed = 0
        for unit in atomic_units(view):
            if unit.start >= stop:
                break
            if any(_keeps(view[i], i in protected, keep_kinds) for i in unit):
                continue
            if runs and runs[-1][-1] == unit.start - 1:
                runs[-1].extend(unit)
            else:
                runs.append(list(unit))
            if _only_notes(view, unit):
                continue  # folded into the next note: frees next to nothing
            freed += sum(ctx.counter.count_message(view[i]) for i in unit)
            if freed >= need:
                break
        return [
            self._fold(ctx, [view[i] for i in run]) for run in runs if not _only_notes(view, run)
        ]

    def _fold(self, ctx: CompactionContext, messages: list[Message]) -> ContextEdit:
        note = drop_note(ctx, messages, self.note_refs if not ctx.hard else HARD_DROP_NOTE_REFS)
        if ctx.counter.count_message(note) >= sum(ctx.counter.count_message(m) for m in messages):
            return DropEdit(tuple(m.id for m in messages))  # the note would cost more: drop bare
        return SummarizeEdit(messages[0].id, messages[-1].id, note)


_NOTE_COUNTS = "dropped"
"""Section of a drop note's part holding how many messages and tool calls left the view."""
_NOTE_OUTPUTS = "outputs"
"""Section of a drop note's part holding every dropped output as ``"<tool> <ref>"``."""
_NOTE_TEXT_COUNTS = re.compile(r"\[(\d+) earlier messages \((\d+) tool calls\)")
"""The counts at the start of a note's text (notes stored before they had sections)."""


@dataclass(frozen=True, slots=True)
class _Dropped:
    """What left the view for a drop note: messages, tool calls, their outputs (``"<tool>
    <ref>"``) and the id of the first message."""

    messages: int
    calls: int
    outputs: tuple[str, ...]
    first_id: str | None


def drop_note(ctx: CompactionContext, messages: Sequence[Message], max_refs: int) -> Message:
    """The note that stands where ``messages`` were dropped: counts and the outputs' refs.

    A drop note among ``messages`` is not counted as a message: what it stood for carries over
    into the new note.
    """
    dropped = calls = 0
    outputs: list[str] = []
    first = messages[0].id
    for position, message in enumerate(messages):
        earlier = _stood_for(message)
        if earlier is None:
            earlier = _Dropped(
                1,
                len(message.tool_calls),
                tuple(f"{r.name or 'tool'} {ctx.stash_result(r)}" for r in message.tool_results),
                message.id,
            )
        dropped, calls = dropped + earlier.messages, calls + earlier.calls
        outputs += earlier.outputs
        if position == 0 and earlier.first_id is not None:
            first = earlier.first_id
    text = (
        f"[{dropped} earlier messages ({calls} tool calls) left the context to make room; "
        "the session transcript keeps them."
    )
    if outputs:
        shown = ", ".join(outputs[:max_refs])
        more = f" and {len(outputs) - max_refs} more" if len(outputs) > max_refs else ""
        text += f" Their outputs: {shown}{more} (read_result <ref> returns one in full)."
    sections = {_NOTE_COUNTS: (str(dropped), str(calls)), _NOTE_OUTPUTS: tuple(outputs)}
    part = SummaryPart(text + "]", sections, (first, messages[-1].id), "contextfold")
    return Message("user", (part,), meta=Meta(kind=DROP_NOTE_KIND, user_visible=False))


def _stood_for(message: Message) -> _Dropped | None:
    """What a drop note stood for; ``None`` for any other message. A note stored before notes
    kept their counts in sections gives what its text says."""
    if message.meta.kind != DROP_NOTE_KIND:
        return None
    for part in message.parts_of(SummaryPart):
        first = part.covers[0] if part.covers else None
        counts = part.sections.get(_NOTE_COUNTS)
        outputs = part.sections.get(_NOTE_OUTPUTS)
        if counts is None:
            written = _NOTE_TEXT_COUNTS.match(part.text)
            counts = written.groups() if written else ("1", "0")
            outputs = tuple(f"tool {ref}" for ref in REF_PATTERN.findall(part.text))
        return _Dropped(int(counts[0]), int(counts[1]), tuple(outputs or ()), first)
    return None


def _only_notes(view: Sequence[Message], indices: Sequence[int]) -> bool:
    return all(view[i].meta.kind == DROP_NOTE_KIND for i in indices)


def _keeps(message: Message, protected: bool, keep_kinds: frozenset[str] | set[str]) -> bool:
    return protected or message.meta.kind in keep_kinds


def _first_conversation_index(view: Sequence[Message]) -> int:
    return next((i for i, m in enumerate(view) if m.role != "system"), len(view))
