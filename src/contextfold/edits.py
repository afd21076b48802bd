"""Context edits: how compaction changes what the model sees without deleting anything.

The transcript is append-only. Compaction appends *edits* to it, and the *view* (what the model
receives) is the transcript with every edit applied in order. Four kinds exist:

- :class:`MaskEdit` replaces tool-result contents with short placeholders (or truncated text),
  and may shorten old calls' arguments or clear old thinking in the same batch;
- :class:`ArchiveEdit` takes whole messages out of the agent's view (users can still see them);
- :class:`SummarizeEdit` replaces a contiguous range of the view by one summary message;
- :class:`DropEdit` takes messages out of the view entirely (the last resort).

Every edit names messages by id, so it applies equally to the full transcript and to a view that
already had earlier edits applied. Removed contents stay in the store; their ``ref`` lets the
``read_result`` tool bring them back.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeAlias

from contextfold.messages import (
    Message,
    MessageKind,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    new_message_id,
)

__all__ = [
    "DROP_NOTE_KIND",
    "ArchiveEdit",
    "ClearedThinking",
    "ContextEdit",
    "DropEdit",
    "EditAction",
    "MaskEdit",
    "ReplacedArguments",
    "ReplacedResult",
    "SummarizeEdit",
    "apply_edit",
    "apply_edits",
    "edit_action",
    "edit_fields",
    "edit_from_dict",
    "edit_to_dict",
]

MaskReason: TypeAlias = Literal["mask", "truncate", "clear"]


def _edit_id() -> str:
    return new_message_id("edit")


@dataclass(frozen=True, slots=True)
class ReplacedResult:
    """One tool result whose content the view shows differently.

    ``content`` is the replacement text (a placeholder, or a truncated version); ``ref`` names the
    full output in the store. ``clear_arguments`` also empties the matching call's arguments
    (Anthropic's ``clear_tool_inputs``).
    """

    message_id: str
    call_id: str
    content: str
    ref: str | None = None
    clear_arguments: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        out: dict[str, Any] = {
            "message_id": self.message_id,
            "call_id": self.call_id,
            "content": self.content,
        }
        if self.ref is not None:
            out["ref"] = self.ref
        if self.clear_arguments:
            out["clear_arguments"] = True
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReplacedResult:
        """Inverse of :meth:`to_dict`."""
        return cls(
            data["message_id"],
            data["call_id"],
            data["content"],
            data.get("ref"),
            bool(data.get("clear_arguments", False)),
        )


@dataclass(frozen=True, slots=True)
class ReplacedArguments:
    """One tool call whose arguments the view shows shortened.

    ``message_id`` is the assistant message holding the call; ``arguments`` the replacement (a
    JSON object still, so the call stays valid); ``ref`` names the full arguments in the store.
    """

    message_id: str
    call_id: str
    arguments: str
    ref: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        out: dict[str, Any] = {
            "message_id": self.message_id,
            "call_id": self.call_id,
            "arguments": self.arguments,
        }
        if self.ref is not None:
            out["ref"] = self.ref
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReplacedArguments:
        """Inverse of :meth:`to_dict`."""
        return cls(data["message_id"], data["call_id"], data["arguments"], data.get("ref"))


@dataclass(frozen=True, slots=True)
class ClearedThinking:
    """An assistant message whose thinking parts the view leaves out (``ref``: their text).

    A message left with nothing but thinking keeps it: providers refuse such a message.
    """

    message_id: str
    ref: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        out: dict[str, Any] = {"message_id": self.message_id}
        if self.ref is not None:
            out["ref"] = self.ref
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ClearedThinking:
        """Inverse of :meth:`to_dict`."""
        return cls(data["message_id"], data.get("ref"))


@dataclass(frozen=True, slots=True)
class MaskEdit:
    """Replace the contents of some tool results (a batch: one cache break for many results).

    ``arguments`` and ``thinking`` shorten old calls' arguments and leave old thinking out, in
    the same batch (context hygiene, :mod:`contextfold.compaction.hygiene`).
    """

    items: tuple[ReplacedResult, ...]
    reason: MaskReason = "mask"
    id: str = field(default_factory=_edit_id)
    created_at: float = field(default_factory=time.time)
    edit_kind: Literal["mask"] = "mask"
    arguments: tuple[ReplacedArguments, ...] = ()
    thinking: tuple[ClearedThinking, ...] = ()


@dataclass(frozen=True, slots=True)
class ArchiveEdit:
    """Take whole messages out of the agent's view; they stay visible to users."""

    message_ids: tuple[str, ...]
    id: str = field(default_factory=_edit_id)
    created_at: float = field(default_factory=time.time)
    edit_kind: Literal["archive"] = "archive"


@dataclass(frozen=True, slots=True)
class SummarizeEdit:
    """Replace the view range ``first_id..last_id`` (inclusive) by ``summary``, followed by
    ``follow`` (e.g. the files restored after a compaction)."""

    first_id: str
    last_id: str
    summary: Message
    id: str = field(default_factory=_edit_id)
    created_at: float = field(default_factory=time.time)
    edit_kind: Literal["summarize"] = "summarize"
    follow: tuple[Message, ...] = ()


@dataclass(frozen=True, slots=True)
class DropEdit:
    """Take messages out of the view for everyone (the last resort)."""

    message_ids: tuple[str, ...]
    id: str = field(default_factory=_edit_id)
    created_at: float = field(default_factory=time.time)
    edit_kind: Literal["drop"] = "drop"


ContextEdit: TypeAlias = MaskEdit | ArchiveEdit | SummarizeEdit | DropEdit

DROP_NOTE_KIND: MessageKind = "drop_note"
"""``Meta.kind`` of the note that stands where dropped messages were (it lists their refs)."""

EditAction: TypeAlias = Literal["mask", "truncate", "clear", "archive", "summary", "digest", "drop"]


def edit_action(edit: ContextEdit) -> EditAction:
    """What an edit does to the view, in a user's words (for logs, the CLI and reports).

    A :class:`SummarizeEdit` is told apart by the message it puts in place: a summary, a digest
    of tool calls, the note of a drop, or (hard compaction) the same message rewritten shorter.
    """
    if isinstance(edit, MaskEdit):
        return edit.reason
    if isinstance(edit, ArchiveEdit):
        return "archive"
    if isinstance(edit, DropEdit):
        return "drop"
    kind = edit.summary.meta.kind
    if kind == DROP_NOTE_KIND:
        return "drop"
    if kind == "tool_summary":
        return "digest"
    if kind == "summary":
        return "summary"
    return "truncate"


# --------------------------------------------------------------------------------------------------
# Applying edits
# --------------------------------------------------------------------------------------------------


def apply_edits(messages: Sequence[Message], edits: Iterable[ContextEdit]) -> list[Message]:
    """The view: ``messages`` with every edit applied in order, agent-invisible ones left out."""
    view = [m for m in messages if m.meta.agent_visible]
    for edit in edits:
        view = apply_edit(view, edit)
    return view


def apply_edit(view: Sequence[Message], edit: ContextEdit) -> list[Message]:
    """Apply one edit to a view and return the new view (the input is not changed).

    Ids the view no longer holds (already summarized or dropped by an earlier edit) are skipped,
    so replaying a transcript's edits from any snapshot point gives the same view.
    """
    if isinstance(edit, MaskEdit):
        return _apply_mask(view, edit)
    if isinstance(edit, ArchiveEdit | DropEdit):
        gone = set(edit.message_ids)
        return [m for m in view if m.id not in gone]
    if isinstance(edit, SummarizeEdit):
        return _apply_summarize(view, edit)
    raise TypeError(f"not a context edit: {edit!r}")


def _apply_mask(view: Sequence[Message], edit: MaskEdit) -> list[Message]:
    by_message: dict[str, dict[str, ReplacedResult]] = {}
    cleared_calls: set[str] = set()
    for item in edit.items:
        by_message.setdefault(item.message_id, {})[item.call_id] = item
        if item.clear_arguments:
            cleared_calls.add(item.call_id)
    flag = {"mask": "masked", "truncate": "truncated", "clear": "cleared"}[edit.reason]
    new_arguments = {a.call_id: a.arguments for a in edit.arguments}
    no_thinking = {t.message_id for t in edit.thinking}
    out: list[Message] = []
    for message in view:
        replacements = by_message.get(message.id)
        if replacements:
            message = _replace_results(message, replacements, flag)
        if cleared_calls and message.role == "assistant":
            message = _clear_call_arguments(message, cleared_calls)
        if new_arguments and message.role == "assistant":
            message = _shorten_call_arguments(message, new_arguments)
        if message.id in no_thinking and message.role == "assistant":
            message = _without_thinking(message)
        out.append(message)
    return out


def _shorten_call_arguments(message: Message, arguments: Mapping[str, str]) -> Message:
    if not any(isinstance(p, ToolCallPart) and p.call_id in arguments for p in message.parts):
        return message
    parts = tuple(
        replace(p, arguments=arguments[p.call_id])
        if isinstance(p, ToolCallPart) and p.call_id in arguments
        else p
        for p in message.parts
    )
    return _flagged(message, parts, "inputs_truncated")


def _without_thinking(message: Message) -> Message:
    kept = tuple(p for p in message.parts if not isinstance(p, ThinkingPart))
    # A message of thinking alone is refused by providers: it keeps its thinking.
    if len(kept) == len(message.parts) or not any(
        isinstance(p, ToolCallPart) or (isinstance(p, TextPart) and p.text.strip()) for p in kept
    ):
        return message
    return _flagged(message, kept, "thinking_cleared")


def _flagged(message: Message, parts: tuple[Part, ...], flag: str) -> Message:
    flags = message.meta.flags if flag in message.meta.flags else (*message.meta.flags, flag)
    return replace(message, parts=parts, meta=replace(message.meta, tokens=None, flags=flags))


def _replace_results(
    message: Message, replacements: Mapping[str, ReplacedResult], flag: str
) -> Message:
    parts: list[Part] = []
    changed = False
    for part in message.parts:
        item = replacements.get(part.call_id) if isinstance(part, ToolResultPart) else None
        if isinstance(part, ToolResultPart) and item is not None:
            parts.append(replace(part, content=item.content, images=(), ref=item.ref or part.ref))
            changed = True
        else:
            parts.append(part)
    if not changed:
        return message
    flags = message.meta.flags if flag in message.meta.flags else (*message.meta.flags, flag)
    return replace(
        message, parts=tuple(parts), meta=replace(message.meta, tokens=None, flags=flags)
    )


def _clear_call_arguments(message: Message, call_ids: set[str]) -> Message:
    if not any(isinstance(p, ToolCallPart) and p.call_id in call_ids for p in message.parts):
        return message
    parts = tuple(
        replace(p, arguments="{}") if isinstance(p, ToolCallPart) and p.call_id in call_ids else p
        for p in message.parts
    )
    flags = message.meta.flags
    if "inputs_cleared" not in flags:
        flags = (*flags, "inputs_cleared")
    return replace(message, parts=parts, meta=replace(message.meta, tokens=None, flags=flags))


def _apply_summarize(view: Sequence[Message], edit: SummarizeEdit) -> list[Message]:
    ids = [m.id for m in view]
    try:
        start = ids.index(edit.first_id)
    except ValueError:
        start = -1
    try:
        end = ids.index(edit.last_id)
    except ValueError:
        end = -1
    if start < 0 and end < 0:
        # The whole range is already gone (an earlier summary covered it): nothing to replace,
        # but the summary must not be lost either, so it goes where the range began.
        return list(view)
    if start < 0:
        start = 0
    if end < 0 or end < start:
        end = start
    return [*view[:start], edit.summary, *edit.follow, *view[end + 1 :]]


# --------------------------------------------------------------------------------------------------
# JSON
# --------------------------------------------------------------------------------------------------


def edit_to_dict(edit: ContextEdit) -> dict[str, Any]:
    """JSON form of an edit, tagged by ``edit_kind``."""
    out, messages = edit_fields(edit)
    if messages:
        out["summary"] = messages[0].to_dict()
        if len(messages) > 1:
            out["follow"] = [m.to_dict() for m in messages[1:]]
    return out


def edit_fields(edit: ContextEdit) -> tuple[dict[str, Any], tuple[Message, ...]]:
    """:func:`edit_to_dict` without the messages a summary edit carries, and those messages
    (its summary, then what follows it; none for the other kinds): a store that encodes each
    message once for all the rows that hold it (the edit, then the snapshot of the view that
    holds the same objects) puts them back under ``summary`` and ``follow``."""
    out: dict[str, Any] = {
        "edit_kind": edit.edit_kind,
        "id": edit.id,
        "created_at": edit.created_at,
    }
    if isinstance(edit, MaskEdit):
        out["reason"] = edit.reason
        out["items"] = [i.to_dict() for i in edit.items]
        if edit.arguments:
            out["arguments"] = [a.to_dict() for a in edit.arguments]
        if edit.thinking:
            out["thinking"] = [t.to_dict() for t in edit.thinking]
        return out, ()
    if isinstance(edit, ArchiveEdit | DropEdit):
        out["message_ids"] = list(edit.message_ids)
        return out, ()
    out["first_id"] = edit.first_id
    out["last_id"] = edit.last_id
    return out, (edit.summary, *edit.follow)


def edit_from_dict(data: Mapping[str, Any]) -> ContextEdit:
    """Inverse of :func:`edit_to_dict`; raises ``ValueError`` on an unknown kind."""
    kind = data.get("edit_kind")
    common = {"id": data["id"], "created_at": float(data["created_at"])}
    if kind == "mask":
        return MaskEdit(
            tuple(ReplacedResult.from_dict(i) for i in data["items"]),
            data.get("reason", "mask"),
            arguments=tuple(ReplacedArguments.from_dict(a) for a in data.get("arguments", ())),
            thinking=tuple(ClearedThinking.from_dict(t) for t in data.get("thinking", ())),
            **common,
        )
    if kind == "archive":
        return ArchiveEdit(tuple(data["message_ids"]), **common)
    if kind == "drop":
        return DropEdit(tuple(data["message_ids"]), **common)
    if kind == "summarize":
        return SummarizeEdit(
            data["first_id"],
            data["last_id"],
            Message.from_dict(data["summary"]),
            follow=tuple(Message.from_dict(m) for m in data.get("follow", ())),
            **common,
        )
    raise ValueError(f"unknown edit_kind {kind!r}")
