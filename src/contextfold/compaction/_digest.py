"""The ``ToolResultDigest`` strategy: past a cutoff, old tool rounds fold into one digest.

The usual design archives the oldest visible tool results one by one once more than a cutoff are
visible, and adds a digest message (user role, agent-visible, hidden from users, kind
``tool_summary``) listing what the archived calls did. Here the oldest units leave the view in
one :class:`~contextfold.edits.SummarizeEdit` whose replacement *is* the digest, placed where the
units were. That is one edit (one cache break) instead of an archive plus an insertion the edit
model has no operation for, it keeps the digest in chronological position, and the originals stay
in the transcript. A digest right before the folded range is merged into the new one, so the
view holds one growing-but-capped digest rather than a pile of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from contextfold.compaction._context import CompactionContext
from contextfold.compaction._results import result_slots
from contextfold.compaction._summarize import with_refs
from contextfold.compaction.summary import (
    StructuredSummary,
    SummaryItem,
    summary_from_facts,
)
from contextfold.edits import ContextEdit, SummarizeEdit
from contextfold.history.facts import ToolAction, extract_facts
from contextfold.history.harness_notes import is_harness_note
from contextfold.history.turns import atomic_units, is_user_turn, task_index
from contextfold.messages import Message, Meta, SummaryPart

__all__ = [
    "DEFAULT_DIGEST_CUTOFF",
    "DEFAULT_DIGEST_MAX_CALLS",
    "TOOL_CALLS_SECTION",
    "ToolResultDigest",
]

DEFAULT_DIGEST_CUTOFF = 10
"""Tool results kept visible before the oldest are folded into the digest: enough recent ones
for the model to act on, few enough that old ones do not crowd the window."""
DEFAULT_DIGEST_MAX_CALLS = 40
"""Calls a digest lists; older ones are counted in a "… N earlier calls" line."""
TOOL_CALLS_SECTION = "Tool Calls"
_CARRIED_SECTIONS = ("Files Modified", "Files Read", "Errors Encountered")


def _outcome(action: ToolAction) -> str:
    if not action.failed:
        return "ok" if action.exit_code in (None, 0) else f"exit {action.exit_code}"
    status = f"exit {action.exit_code}" if action.exit_code is not None else "failed"
    return f"{status}: {action.errors[-1]}" if action.errors else status


def _ends_digest(message: Message) -> bool:
    """A message whose words no digest line keeps: what the user or the agent harness said (a
    hook's compile error, a task notification), a summary, the system prompt."""
    return (
        is_user_turn(message)
        or is_harness_note(message)
        or message.meta.kind == "summary"
        or message.role == "system"
    )


def _call_line(action: ToolAction) -> str:
    item = SummaryItem(
        f"{action.tool}: {action.summary} → {_outcome(action)}",
        (action.call_message_id,),
        (action.ref,) if action.ref else (),
    )
    return item.render()


@dataclass(frozen=True)
class ToolResultDigest:
    """When more than ``cutoff`` tool results are in the view, the oldest rounds become a digest.

    The folded range starts at the oldest tool round after the task and stops at a user message,
    a note of the agent harness, a summary or the recent window. The digest lists each call with
    its outcome and ref, and carries the files and errors sections a later summary merges.
    """

    cutoff: int = DEFAULT_DIGEST_CUTOFF
    max_calls: int = DEFAULT_DIGEST_MAX_CALLS
    name: str = "digest"

    def plan(self, ctx: CompactionContext) -> list[ContextEdit]:
        """One digest edit, or nothing when at most ``cutoff`` results are visible."""
        view = ctx.view
        excess = sum(1 for _ in result_slots(view)) - self.cutoff
        if excess <= 0:
            return []
        span = self._span(view, ctx.window_start(), excess)
        if span is None:
            return []
        lo, hi = span
        previous = view[lo] if view[lo].meta.kind == "tool_summary" else None
        covered = with_refs(ctx, view[lo + 1 if previous else lo : hi])
        digest = self._digest(previous, covered, (view[lo].id, view[hi - 1].id))
        removed = sum(ctx.counter.count_message(m) for m in view[lo:hi])
        if ctx.counter.count_message(digest) >= removed:
            return []
        return [SummarizeEdit(view[lo].id, view[hi - 1].id, digest)]

    def _span(self, view: Sequence[Message], stop: int, excess: int) -> tuple[int, int] | None:
        task = task_index(view)
        units = atomic_units(view)
        first = next(
            (
                k
                for k, u in enumerate(units)
                if (task is None or u.start > task)
                and u.start < stop
                and any(view[i].tool_results for i in u)
            ),
            None,
        )
        if first is None:
            return None
        lo = units[first].start
        if lo > 0 and view[lo - 1].meta.kind == "tool_summary" and (task is None or lo - 1 > task):
            lo -= 1
        hi, removed = lo, 0
        for unit in units[first:]:
            if unit.stop > stop or any(_ends_digest(view[i]) for i in unit):
                break
            hi = unit.stop
            removed += sum(len(view[i].tool_results) for i in unit)
            if removed >= excess:
                break
        return (lo, hi) if removed else None

    def _digest(
        self, previous: Message | None, covered: Sequence[Message], covers: tuple[str, str]
    ) -> Message:
        facts = extract_facts(covered)
        lines = [_call_line(a) for a in facts.actions]
        carried = summary_from_facts(facts)
        earlier = 0
        if previous is not None:
            part = next(previous.parts_of(SummaryPart), None)
            if part is not None:
                old_lines = list(part.sections.get(TOOL_CALLS_SECTION, ()))
                if old_lines and old_lines[0].startswith("… "):
                    earlier = int(old_lines.pop(0).split()[1])
                lines = old_lines + lines
                carried = StructuredSummary.from_part(part).extend(carried)
                covers = (part.covers[0] if part.covers else covers[0], covers[1])
        if len(lines) > self.max_calls:
            earlier += len(lines) - self.max_calls
            lines = lines[-self.max_calls :]
        if earlier:
            lines.insert(0, f"… {earlier} earlier calls")
        sections: dict[str, tuple[str, ...]] = {TOOL_CALLS_SECTION: tuple(lines)}
        carried_parts = carried.sections_for_part()
        for name in _CARRIED_SECTIONS:
            if carried_parts.get(name):
                sections[name] = carried_parts[name]
        body = [
            f"[Digest of earlier tool calls (messages {covers[0]} … {covers[1]}). Their outputs "
            "left the context; read_result <ref> returns any of them in full.]",
            *(f"- {line}" for line in lines),
        ]
        if "Files Modified" in sections:
            body.append("Files modified: " + "; ".join(sections["Files Modified"]))
        text = "\n".join(body)
        part = SummaryPart(text, sections, covers, "contextfold")
        return Message("user", (part,), meta=Meta(kind="tool_summary", user_visible=False))
