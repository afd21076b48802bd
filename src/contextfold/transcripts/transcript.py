"""Imported agent sessions in one neutral shape, whatever agent recorded them.

Every importer (Claude Code, Codex, mini-swe-agent, tau-bench, plain OpenAI / Anthropic message
lists, contextfold's own export) returns :class:`Transcript` values. Message ids are derived from
the source (a record uuid, or the file stem and a position), so importing the same file twice
gives identical ids; the source's own ids and times stay in ``Meta.provider`` and
``Meta.created_at``. Assistant messages carry the usage the provider reported in ``Meta.usage``.
A compaction the original agent performed is a :class:`RecordedCompaction` pointing at the
summary message it inserted (a user message holding a :class:`~contextfold.messages.SummaryPart`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from contextfold.messages import Message, SummaryPart, ToolCallPart, Usage
from contextfold.tool_spec import ToolSpec

__all__ = ["RecordedCompaction", "Transcript", "flag_invalid_arguments"]

INVALID_ARGUMENTS = "invalid_arguments"
"""The ``Meta.flags`` marker on an assistant message holding a call whose arguments are not a
JSON object (kept verbatim, never dropped)."""


@dataclass(frozen=True, slots=True)
class RecordedCompaction:
    """A compaction the original agent performed, as its transcript recorded it.

    ``index`` is the position in :attr:`Transcript.messages` of the summary message the agent
    inserted; ``trigger`` is ``"auto"`` or ``"manual"`` when the source says; ``pre_tokens`` the
    context size the agent reported just before compacting.
    """

    index: int
    trigger: str | None
    pre_tokens: int | None
    summary_text: str
    summary_message_id: str | None


@dataclass
class Transcript:
    """One agent session: its messages in order plus what the source recorded around them."""

    messages: list[Message]
    format: str
    path: str | None = None
    model: str | None = None
    session_id: str | None = None
    title: str | None = None
    compactions: list[RecordedCompaction] = field(default_factory=list)
    subagents: list[Transcript] = field(default_factory=list)
    tools: list[ToolSpec] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def task(self) -> str:
        """The text of the first message the user typed (injected context and summaries skipped);
        an empty string when there is none."""
        for message in self.messages:
            if (
                message.role == "user"
                and message.meta.kind == "message"
                and message.meta.user_visible
                and message.text.strip()
            ):
                return message.text
        return ""

    def usages(self) -> list[tuple[int, Usage]]:
        """Each assistant message that has a recorded usage, as (index in ``messages``, usage)."""
        return [
            (index, message.meta.usage)
            for index, message in enumerate(self.messages)
            if message.role == "assistant" and message.meta.usage is not None
        ]

    def tool_calls(self) -> list[ToolCallPart]:
        """Every tool call in the session, in order."""
        return [call for message in self.messages for call in message.tool_calls]

    def unanswered_calls(self) -> list[ToolCallPart]:
        """The tool calls that no later message answers (e.g. the session ended mid-call)."""
        answered = {r.call_id for m in self.messages for r in m.tool_results}
        return [call for call in self.tool_calls() if call.call_id not in answered]

    def summaries(self) -> list[Message]:
        """The summary messages of the recorded compactions, in order."""
        return [
            m
            for m in self.messages
            if m.meta.kind == "summary" and any(isinstance(p, SummaryPart) for p in m.parts)
        ]

    def walk(self) -> Iterator[Transcript]:
        """This transcript, then its subagents' transcripts, depth first."""
        yield self
        for subagent in self.subagents:
            yield from subagent.walk()


def flag_invalid_arguments(messages: Sequence[Message]) -> tuple[list[Message], list[str]]:
    """Flag every assistant message holding a call whose arguments are not a JSON object.

    The arguments stay verbatim; the message gains the ``"invalid_arguments"`` flag and one
    warning per such call is returned, naming the message and the call.
    """
    out: list[Message] = []
    warnings: list[str] = []
    for index, message in enumerate(messages):
        bad = [c for c in message.tool_calls if not c.arguments_valid]
        if bad and INVALID_ARGUMENTS not in message.meta.flags:
            message = message.with_meta(flags=(*message.meta.flags, INVALID_ARGUMENTS))
        warnings.extend(
            f"message {index} ({message.id}): arguments of tool call {c.call_id!r} ({c.name}) "
            "are not a JSON object; kept verbatim"
            for c in bad
        )
        out.append(message)
    return out, warnings
