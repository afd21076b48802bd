"""The ``Summarize`` strategy: the middle of the conversation becomes one structured summary."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from contextfold.compaction._context import CompactionContext
from contextfold.compaction.summary import StructuredSummary, SummaryItem, summary_message
from contextfold.edits import ContextEdit, DropEdit, SummarizeEdit
from contextfold.events import SummarizerFellBack
from contextfold.history.turns import last_user_index, task_index
from contextfold.messages import Message, Part, SummaryPart, ToolResultPart

__all__ = ["Summarize", "with_refs"]


def with_refs(ctx: CompactionContext, messages: Sequence[Message]) -> list[Message]:
    """``messages`` as a summarizer should read them: every tool output stored with its ref set,
    and outputs that masking, clearing or truncation shortened read back from the store, so a
    summary written after masking still sees the errors and files behind the placeholders."""
    out = []
    for message in messages:
        if not message.tool_results:
            out.append(message)
            continue
        parts: list[Part] = [
            _with_full_output(ctx, p) if isinstance(p, ToolResultPart) else p for p in message.parts
        ]
        out.append(message.with_parts(parts))
    return out


SUMMARY_INPUT_HEAD_CHARS = 16_000
SUMMARY_INPUT_TAIL_CHARS = 48_000
"""How much of a stored output a summarizer reads back: its head and (errors come last) a
longer tail; the middle of a huge log adds cost, not facts."""


def _with_full_output(ctx: CompactionContext, result: ToolResultPart) -> ToolResultPart:
    ref = ctx.stash_result(result)
    if result.ref is None or ref != result.ref:
        return replace(result, ref=ref)  # the content shown is the whole output
    try:
        full = ctx.blobs.get_blob(ctx.session_id, ref)
    except LookupError:
        return replace(result, ref=ref)
    limit = SUMMARY_INPUT_HEAD_CHARS + SUMMARY_INPUT_TAIL_CHARS
    if len(full) > limit:
        full = full[:SUMMARY_INPUT_HEAD_CHARS] + "\n…\n" + full[-SUMMARY_INPUT_TAIL_CHARS:]
    return replace(result, content=full, ref=ref)


FOREIGN_SUMMARY_CHARS = 400
"""Characters of a summary written by another tool (Claude Code, Codex) quoted when it is folded
into ours; the whole text stays recoverable by its ref."""


def _previous_summary(
    ctx: CompactionContext, message: Message
) -> tuple[StructuredSummary, SummaryPart] | None:
    """The summary a message holds, if it is one. A summary without our eight sections (another
    tool's) becomes one Session Intent item quoting its start and citing the ref of its text."""
    if message.meta.kind != "summary":
        return None
    for part in message.parts_of(SummaryPart):
        summary = StructuredSummary.from_part(part)
        if not any(summary.sections.values()):
            ref = ctx.stash(part.text)
            head = " ".join(part.text.split())[:FOREIGN_SUMMARY_CHARS]
            item = SummaryItem(f"Earlier summary by {part.source}: {head}…", (message.id,), (ref,))
            summary = StructuredSummary({"Session Intent": (item,)})
        return summary, part
    return None


@dataclass(frozen=True)
class Summarize:
    """Everything between the task and the recent window becomes one summary message.

    The task (first user message) stays verbatim before it and the recent window after it. An
    earlier summary inside the range is passed to the summarizer as ``previous``, so the new one
    extends it. Tool outputs in the range are stored first and the summary cites their refs.
    When the last user message falls inside the range it stays in the view: the summary goes
    before it and the messages after it (which the summary covers) leave the view.
    """

    name: str = "summarize"

    def plan(self, ctx: CompactionContext) -> list[ContextEdit]:
        """The summary edit (and a drop of the covered tail), or nothing when it would not help."""
        view = ctx.view
        task = task_index(view)
        lo, hi = self.span(ctx)
        if hi <= lo:
            return []
        previous: StructuredSummary | None = None
        covers_first = view[lo].id
        fresh: list[Message] = []
        for i in range(lo, hi):
            found = _previous_summary(ctx, view[i])
            if found is None:
                fresh.append(view[i])
                continue
            summary, part = found
            previous = previous.extend(summary) if previous else summary
            if i == lo and part.covers:
                covers_first = part.covers[0]
        if not fresh:
            return []
        context = [view[task]] if task is not None else []
        summary = ctx.summarizer.summarize([*context, *with_refs(ctx, fresh)], previous, ctx.focus)
        if summary.fallback_reason:
            ctx.emit(
                SummarizerFellBack(session_id=ctx.session_id or None, error=summary.fallback_reason)
            )
        message = summary_message(summary, (covers_first, view[hi - 1].id))
        return self._edits(ctx, lo, hi, message)

    @staticmethod
    def span(ctx: CompactionContext) -> tuple[int, int]:
        """The indices of ``ctx.view`` a summary would take the place of, as a range's bounds:
        from after the task to the recent window."""
        task = task_index(ctx.view)
        lo = task + 1 if task is not None else _first_conversation_index(ctx.view)
        return lo, ctx.window_start()

    @staticmethod
    def _edits(ctx: CompactionContext, lo: int, hi: int, message: Message) -> list[ContextEdit]:
        """The summary in place of ``view[lo:hi]``, or nothing when it would cost more.

        When the last user message falls inside the range it stays: the summary takes the place
        of the messages before it, and those after it leave the view; or, when the summary would
        cost more than the messages before it, the other way round (an edit that frees nothing
        is never made, even when its pair would make up for it).
        """
        view = ctx.view
        cost = ctx.counter.count_message
        size = cost(message)
        last_user = last_user_index(view)
        if last_user is None or not lo <= last_user < hi:
            removed = sum(cost(view[i]) for i in range(lo, hi))
            return [SummarizeEdit(view[lo].id, view[hi - 1].id, message)] if removed > size else []
        sides = [range(lo, last_user), range(last_user + 1, hi)]
        for host, other in (sides, sides[::-1]):
            if host and sum(cost(view[i]) for i in host) > size:
                summarize = SummarizeEdit(view[host.start].id, view[host[-1]].id, message)
                return [summarize, _drop(view, other)] if other else [summarize]
        return []


def _drop(view: Sequence[Message], indices: range) -> DropEdit:
    return DropEdit(tuple(view[i].id for i in indices))


def _first_conversation_index(view: Sequence[Message]) -> int:
    for i, message in enumerate(view):
        if message.role != "system":
            return i
    return len(view)
