"""Claude Code session files (``~/.claude/projects/<project>/<session-id>.jsonl``).

Each line is a record with a ``type``: ``user`` and ``assistant`` records hold a messages-API
``message``; ``system``, ``progress``, ``file-history-snapshot``, ``queue-operation`` and
``summary`` records are bookkeeping. How the importer reads them:

- One API response is streamed into several ``assistant`` records sharing ``message.id`` (one
  content block each, each repeating the usage): they become one assistant message, whose usage is
  the most complete of the copies (the last one has the final ``output_tokens``).
- Tool results arrive in ``user`` records (one record per result); they become ``tool`` messages.
  The structured ``toolUseResult`` copy made for Claude Code's own display is not read: the model
  saw ``message.content``.
- ``isMeta`` user records (skill bodies, command caveats, hook reminders) are sent to the model
  but hidden in Claude Code's interface: ``user_visible=False`` with the ``"meta"`` flag.
- User records the harness wrote are harness notes (``kind="harness_note"``, see
  :mod:`contextfold.history.harness_notes`), never user turns: ``isMeta`` records, interruption
  markers, task notifications, hook reminders, and a local slash command's records (the command
  line after the caveat, and its output). A prompt command the user typed
  (``<command-name>/review</command-name>…``) is the user's request and stays a message.
- A ``system`` record with ``subtype: compact_boundary`` (``compactMetadata``: trigger,
  preTokens) followed by a ``user`` record with ``isCompactSummary`` becomes a
  :class:`~contextfold.transcripts.transcript.RecordedCompaction` and a summary message.
- Records form a tree through ``parentUuid`` (``logicalParentUuid`` across a compaction). Parallel
  tool calls fork it harmlessly; a rewound conversation forks it for real. The importer follows
  the chain that ends at the last message and keeps off-chain records only when they belong to it
  (another block of a response on the chain, or the result of a call on the chain); anything
  else is an abandoned branch, left out with a warning.
- Subagents: ``<session-id>/subagents/*.jsonl`` next to the file (and ``isSidechain`` records
  inside it, written by older versions) become :attr:`Transcript.subagents`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from contextfold.errors import FormatError
from contextfold.history.harness_notes import (
    HARNESS_NOTE_KIND,
    LOCAL_COMMAND_CAVEAT,
    is_harness_text,
    slash_command,
)
from contextfold.messages import Message, Meta, SummaryPart, Usage
from contextfold.transcripts._files import SourceFile, most_common, parse_timestamp, read_source
from contextfold.transcripts.transcript import (
    RecordedCompaction,
    Transcript,
    flag_invalid_arguments,
)
from contextfold.wire.anthropic import from_anthropic_message, usage_from_anthropic
from contextfold.wire.values import as_id, child, string, token_count

__all__ = ["FORMAT", "claude_code_from_source", "load_claude_code", "looks_like_claude_code"]

FORMAT = "claude-code"

_RECORD_TYPES = frozenset(
    {
        "user",
        "assistant",
        "system",
        "progress",
        "summary",
        "custom-title",
        "file-history-snapshot",
        "queue-operation",
        "attachment",
    }
)
_SOURCE_KEYS = ("uuid", "sessionId", "leafUuid", "messageId")
_SYNTHETIC_MODEL = "<synthetic>"

Record = tuple[int, Mapping[str, Any]]


def looks_like_claude_code(source: SourceFile) -> bool:
    """True when a JSON Lines file's first records are Claude Code session records."""
    head = [r.value for r in source.lines[:20] if isinstance(r.value, Mapping)]
    return (
        bool(head)
        and all(string(r, "type") in _RECORD_TYPES and "payload" not in r for r in head)
        and any(key in r for r in head for key in _SOURCE_KEYS)
    )


def load_claude_code(path: str | os.PathLike[str], *, subagents: bool = True) -> Transcript:
    """The transcript of one Claude Code session file, with its subagents unless told not to."""
    return claude_code_from_source(read_source(path), subagents=subagents)


def claude_code_from_source(source: SourceFile, *, subagents: bool = True) -> Transcript:
    """The transcript of an already parsed Claude Code session file."""
    source = source.as_lines()
    if source.shape != "jsonl":
        raise source.error("not a Claude Code session (expected JSON Lines records)")
    records = list(source.objects())
    conversational = [r for r in records if r[1].get("type") in ("user", "assistant")]
    all_side = bool(conversational) and all(r[1].get("isSidechain") for r in conversational)
    main = [r for r in records if all_side or not r[1].get("isSidechain")]
    transcript = _build(main, source)
    transcript.warnings[:0] = source.warnings
    transcript.title = _title(records)
    if not all_side:
        transcript.subagents.extend(_sidechains(records, source))
    if subagents:
        transcript.subagents.extend(_subagent_files(source, records, transcript))
    return transcript


# --------------------------------------------------------------------------------------------------
# one conversation
# --------------------------------------------------------------------------------------------------


def _build(records: Sequence[Record], source: SourceFile) -> Transcript:
    kept, dropped = _final_branch(records)
    builder = _Builder(source)
    for line, record in kept:
        builder.add(line, record)
    messages, warnings = flag_invalid_arguments(builder.finish())
    if dropped:
        warnings.insert(
            0,
            f"{len(dropped)} record(s) off the conversation's final branch were left out "
            f"(first at line {dropped[0][0]})",
        )
    first = next((r for _, r in records if r.get("sessionId")), {})
    metadata: dict[str, Any] = {
        key: first[source_key]
        for key, source_key in (
            ("cwd", "cwd"),
            ("git_branch", "gitBranch"),
            ("version", "version"),
            ("slug", "slug"),
        )
        if first.get(source_key) is not None
    }
    if dropped:
        metadata["dropped_records"] = len(dropped)
    models = (m.meta.provider.get("model") for m in messages if m.role == "assistant")
    return Transcript(
        messages=messages,
        format=FORMAT,
        path=source.path,
        model=most_common(m for m in models if m != _SYNTHETIC_MODEL),
        session_id=string(first, "sessionId"),
        compactions=builder.compactions,
        metadata=metadata,
        warnings=warnings,
    )


def _parent(record: Mapping[str, Any]) -> str | None:
    parent = record.get("parentUuid") or record.get("logicalParentUuid")
    return parent if isinstance(parent, str) else None


def _final_branch(records: Sequence[Record]) -> tuple[list[Record], list[Record]]:
    """The records of the conversation that ends at the last message, and the abandoned ones."""
    conversation = [r for r in records if r[1].get("type") in ("user", "assistant", "system")]
    by_uuid = {r.get("uuid"): r for _, r in records if isinstance(r.get("uuid"), str)}
    last = next((r for _, r in reversed(conversation) if r.get("type") != "system"), None)
    if last is None or not isinstance(last.get("uuid"), str):
        return conversation, []
    chain: set[str] = set()
    node: Mapping[str, Any] | None = last
    while node is not None and node.get("uuid") not in chain:
        chain.add(str(node.get("uuid")))
        parent = _parent(node)
        node = by_uuid.get(parent) if parent else None

    response_ids = {
        string(_message(r), "id")
        for _, r in conversation
        if r.get("type") == "assistant" and string(r, "uuid") in chain
    } - {None}
    kept: list[Record] = []
    dropped: list[Record] = []
    call_ids: set[str] = set()
    for line, record in conversation:
        keep = string(record, "uuid") in chain
        if not keep and record.get("type") == "assistant":
            keep = string(_message(record), "id") in response_ids
        elif not keep and record.get("type") == "user":
            result_ids = _tool_result_ids(record)
            keep = bool(result_ids) and result_ids <= call_ids
        if keep:
            kept.append((line, record))
            if record.get("type") == "assistant":
                call_ids.update(_tool_use_ids(record))
        elif record.get("type") != "system":
            dropped.append((line, record))
    return kept, dropped


def _message(record: Mapping[str, Any]) -> Mapping[str, Any]:
    return child(record, "message")


def _blocks(record: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = _message(record).get("content")
    return [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []


def _tool_use_ids(record: Mapping[str, Any]) -> set[str]:
    return {as_id(b.get("id")) or "" for b in _blocks(record) if b.get("type") == "tool_use"}


def _tool_result_ids(record: Mapping[str, Any]) -> set[str]:
    blocks = _blocks(record)
    if not blocks or any(b.get("type") != "tool_result" for b in blocks):
        return set()
    return {as_id(b.get("tool_use_id")) or "" for b in blocks}


class _Builder:
    """Turns kept records, in file order, into messages and recorded compactions."""

    def __init__(self, source: SourceFile) -> None:
        self.source = source
        self.messages: list[Message] = []
        self.compactions: list[RecordedCompaction] = []
        self._responses: dict[str, int] = {}
        self._call_names: dict[str, str] = {}
        self._boundary: Mapping[str, Any] | None = None
        self._after_caveat = False
        """True right after a local command's caveat: the next user text is its command line."""

    def add(self, line: int, record: Mapping[str, Any]) -> None:
        kind = record.get("type")
        if kind == "system":
            if record.get("subtype") == "compact_boundary":
                self._close_boundary()
                self._boundary = record
        elif kind == "assistant":
            self._add_assistant(line, record)
        elif record.get("isCompactSummary"):
            self._add_summary(line, record)
        else:
            self._close_boundary()
            self._add_user(line, record)

    def finish(self) -> list[Message]:
        self._close_boundary()
        return self.messages

    def _id(self, line: int, record: Mapping[str, Any]) -> str:
        uuid = record.get("uuid")
        return uuid if isinstance(uuid, str) and uuid else f"{self.source.stem}:{line}"

    def _convert(self, line: int, record: Mapping[str, Any], role: str) -> list[Message]:
        raw = _message(record)
        if not raw:
            raise self.source.error(f"{role} record without a 'message' object", line)
        wire = {"role": role, "content": raw.get("content")}
        try:
            return from_anthropic_message(wire, call_names=self._call_names, path=self.source.path)
        except FormatError as exc:
            raise self.source.error(exc.reason, line) from None

    def _add_assistant(self, line: int, record: Mapping[str, Any]) -> None:
        [converted] = self._convert(line, record, "assistant")
        raw = _message(record)
        response_id = string(raw, "id")
        usage = usage_from_anthropic(raw.get("usage"))
        position = self._responses.get(response_id) if response_id else None
        if position is not None:
            earlier = self.messages[position]
            provider = dict(earlier.meta.provider)
            provider["uuids"] = [*provider.get("uuids", []), record.get("uuid")]
            merged = earlier.with_parts((*earlier.parts, *converted.parts))
            self.messages[position] = merged.with_meta(
                usage=_fuller(earlier.meta.usage, usage), provider=provider
            )
            return
        model = string(raw, "model")
        provider = {
            key: value
            for key, value in (
                ("uuids", [record.get("uuid")]),
                ("message_id", response_id),
                ("request_id", record.get("requestId")),
                ("model", model),
            )
            if value is not None
        }
        synthetic = model == _SYNTHETIC_MODEL or bool(record.get("isApiErrorMessage"))
        meta = Meta(
            # Claude Code never sends its own placeholder replies (API errors) back to the model.
            agent_visible=not synthetic,
            kind="synthetic" if synthetic else "message",
            created_at=parse_timestamp(record.get("timestamp")),
            usage=None if synthetic else usage,
            flags=("api_error",) if record.get("isApiErrorMessage") else (),
            provider=provider,
        )
        if response_id:
            self._responses[response_id] = len(self.messages)
        self.messages.append(Message("assistant", converted.parts, self._id(line, record), meta))

    def _add_user(self, line: int, record: Mapping[str, Any]) -> None:
        base = self._id(line, record)
        hidden = bool(record.get("isMeta"))
        for offset, converted in enumerate(self._convert(line, record, "user")):
            note = converted.role == "user" and self._harness_note(converted.text, hidden)
            meta = Meta(
                user_visible=not hidden,
                kind=HARNESS_NOTE_KIND if note else converted.meta.kind,
                created_at=parse_timestamp(record.get("timestamp")),
                flags=("meta",) if hidden else (),
                provider={"uuid": base} if base == record.get("uuid") else {},
            )
            message_id = base if offset == 0 else f"{base}:{offset}"
            self.messages.append(Message(converted.role, converted.parts, message_id, meta))

    def _harness_note(self, text: str, hidden: bool) -> bool:
        """Whether the harness wrote this user text (records are read in order)."""
        after_caveat = self._after_caveat
        self._after_caveat = text.lstrip().startswith(LOCAL_COMMAND_CAVEAT)
        # The command line after the caveat is a local command's (/compact, /mcp): Claude Code
        # ran it itself and told the model not to respond to it. Its output is harness text.
        return hidden or is_harness_text(text) or (after_caveat and slash_command(text) is not None)

    def _add_summary(self, line: int, record: Mapping[str, Any]) -> None:
        text = "\n".join(m.text for m in self._convert(line, record, "user"))
        covers = (self.messages[0].id, self.messages[-1].id) if self.messages else None
        message_id = self._id(line, record)
        meta = Meta(
            kind="summary",
            created_at=parse_timestamp(record.get("timestamp")),
            provider={"uuid": message_id},
        )
        summary = SummaryPart(text, covers=covers, source="claude-code")
        self._record_compaction(text, message_id)
        self.messages.append(Message("user", (summary,), message_id, meta))

    def _close_boundary(self) -> None:
        """A boundary with no summary after it still records that a compaction happened."""
        if self._boundary is not None:
            self._record_compaction("", None)

    def _record_compaction(self, summary_text: str, summary_id: str | None) -> None:
        details = child(self._boundary, "compactMetadata")
        self._boundary = None
        self.compactions.append(
            RecordedCompaction(
                index=len(self.messages),
                trigger=_str_or_none(details.get("trigger")),
                pre_tokens=token_count(details.get("preTokens")),
                summary_text=summary_text,
                summary_message_id=summary_id,
            )
        )


def _fuller(first: Usage | None, second: Usage | None) -> Usage | None:
    if first is None or second is None:
        return first or second
    return second if second.output_tokens >= first.output_tokens else first


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _title(records: Sequence[Record]) -> str | None:
    """A title the user set wins over the summary line Claude Code generated."""
    custom = [r.get("customTitle") for _, r in records if r.get("type") == "custom-title"]
    summaries = [r.get("summary") for _, r in records if r.get("type") == "summary"]
    for candidate in (*reversed(custom), *reversed(summaries)):
        if isinstance(candidate, str) and candidate:
            return candidate
    return None


# --------------------------------------------------------------------------------------------------
# subagents
# --------------------------------------------------------------------------------------------------


def _sidechains(records: Sequence[Record], source: SourceFile) -> list[Transcript]:
    """Subagent conversations that older Claude Code versions wrote into the main file."""
    groups: dict[str, list[Record]] = {}
    for line, record in records:
        if record.get("isSidechain"):
            groups.setdefault(as_id(record.get("agentId")) or "sidechain", []).append(
                (line, record)
            )
    out = []
    for agent_id, group in groups.items():
        transcript = _build(group, source)
        transcript.metadata["agent_id"] = agent_id
        out.append(transcript)
    return out


def _subagent_files(
    source: SourceFile, records: Sequence[Record], main: Transcript
) -> list[Transcript]:
    """Transcripts of ``<session>/subagents/*.jsonl`` next to the main file, linked to the Task
    call that started each one when the main file says (``toolUseResult.agentId``)."""
    folder = Path(source.path).with_suffix("") / "subagents"
    if not folder.is_dir():
        return []
    calls = {c.call_id: c for c in main.tool_calls()}
    started_by: dict[str, str] = {}
    for _, record in records:
        result = record.get("toolUseResult")
        if isinstance(result, Mapping) and isinstance(result.get("agentId"), str):
            for result_id in _tool_result_ids(record):
                started_by[result["agentId"]] = result_id
    out: list[Transcript] = []
    for path in sorted(folder.glob("*.jsonl")):
        try:
            transcript = claude_code_from_source(read_source(path), subagents=False)
        except FormatError as exc:
            main.warnings.append(f"subagent file skipped: {exc}")
            continue
        agent_id = path.stem.removeprefix("agent-")
        transcript.metadata["agent_id"] = agent_id
        transcript.metadata["role"] = "compaction" if agent_id.startswith("acompact") else "task"
        call_id = started_by.get(agent_id)
        if call_id is not None:
            transcript.metadata["parent_call_id"] = call_id
            call = calls.get(call_id)
            description = call.args().get("description") if call is not None else None
            transcript.title = transcript.title or _str_or_none(description)
        out.append(transcript)
    return out
