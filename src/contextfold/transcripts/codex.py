"""Codex CLI rollout files (``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``).

Each line is ``{"timestamp", "type", "payload"}`` with ``type`` one of:

- ``session_meta``: session id, working directory, CLI version, instructions, dynamic tools;
- ``turn_context``: per-turn settings, including the ``model``;
- ``response_item``: what went to or came from the Responses API — ``message`` (user, developer,
  assistant), ``reasoning``, ``function_call`` / ``function_call_output``, ``custom_tool_call`` /
  ``custom_tool_call_output`` (free-form tools such as ``apply_patch``), ``local_shell_call``,
  ``web_search_call``, ``compaction`` (an encrypted server-side summary), ...;
- ``event_msg``: UI events; only ``token_count`` matters here (``info.last_token_usage`` is the
  usage of the latest model call);
- ``compacted``: a local compaction; ``payload.message`` is the summary text.

Consecutive model-side items (reasoning, assistant text, calls) form one assistant message, closed
by the next input item or by a ``token_count`` event, whose usage it receives. A free-form tool's
input is not JSON, so it travels as ``{"input": <text>}`` with the ``"custom_tool_call"`` flag.
Early rollouts wrote the items without the ``type``/``payload`` envelope; they are read too.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

from contextfold.messages import (
    ImagePart,
    Message,
    Meta,
    Part,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from contextfold.tool_spec import ToolSpec
from contextfold.transcripts._files import SourceFile, most_common, parse_timestamp, read_source
from contextfold.transcripts.transcript import (
    RecordedCompaction,
    Transcript,
    flag_invalid_arguments,
)
from contextfold.wire.values import as_id, as_text, child, string, token_count, tool_specs

__all__ = ["FORMAT", "codex_from_source", "load_codex", "looks_like_codex"]

FORMAT = "codex"

_LINE_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
_MODEL_SIDE = frozenset(
    {"reasoning", "function_call", "custom_tool_call", "local_shell_call", "web_search_call"}
)
_INPUT_SIDE = frozenset({"function_call_output", "custom_tool_call_output"})
_RESPONSE_ITEM_TYPES = _MODEL_SIDE | _INPUT_SIDE | {"message", "compaction", "compaction_summary"}
# Text Codex injects as user messages: context for the model, not something the user typed.
_INJECTED_PREFIXES = (
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
    "<permissions instructions>",
)
_EXIT_CODE_LINE = re.compile(r"^Exit code: (-?\d{1,9})(?!\d)")


def looks_like_codex(source: SourceFile) -> bool:
    """True when a JSON Lines file's first records are Codex rollout lines."""
    head = [r.value for r in source.lines[:20] if isinstance(r.value, Mapping)]
    if not head:
        return False
    enveloped = all(string(r, "type") in _LINE_TYPES and "payload" in r for r in head)
    legacy = _is_legacy_meta(head[0]) and all(
        string(r, "type") in _RESPONSE_ITEM_TYPES or "record_type" in r for r in head[1:]
    )
    return enveloped or (legacy and len(head) > 1)


def load_codex(path: str | os.PathLike[str]) -> Transcript:
    """The transcript of one Codex rollout file."""
    return codex_from_source(read_source(path))


def codex_from_source(source: SourceFile) -> Transcript:
    """The transcript of an already parsed Codex rollout file."""
    source = source.as_lines()
    if source.shape != "jsonl":
        raise source.error("not a Codex rollout (expected JSON Lines records)")
    builder = _Builder(source)
    for line, record in source.objects():
        kind, payload = _unwrap(record, first=line == source.lines[0].line)
        builder.add(line, kind, payload, parse_timestamp(record.get("timestamp")))
    messages, warnings = flag_invalid_arguments(builder.finish())
    warnings[:0] = source.warnings
    return Transcript(
        messages=messages,
        format=FORMAT,
        path=source.path,
        model=most_common(builder.models),
        session_id=builder.session_id or source.stem,
        compactions=builder.compactions,
        tools=builder.tools,
        metadata=builder.metadata,
        warnings=warnings,
    )


def _is_legacy_meta(record: Mapping[str, Any]) -> bool:
    return "type" not in record and "id" in record and "timestamp" in record


def _unwrap(record: Mapping[str, Any], *, first: bool) -> tuple[str, Mapping[str, Any]]:
    """(line type, payload), reading the early envelope-less lines as well."""
    if "payload" in record:
        return string(record, "type") or "", child(record, "payload")
    if first and _is_legacy_meta(record):
        return "session_meta", record
    if string(record, "type") in _RESPONSE_ITEM_TYPES:
        return "response_item", record
    return "ignored", record


class _Builder:
    """Accumulates messages from rollout lines in order."""

    def __init__(self, source: SourceFile) -> None:
        self.source = source
        self.messages: list[Message] = []
        self.compactions: list[RecordedCompaction] = []
        self.tools: list[ToolSpec] = []
        self.metadata: dict[str, Any] = {}
        self.models: list[str] = []
        self.session_id: str | None = None
        self._response: int | None = None
        self._call_names: dict[str, str] = {}
        self._context_tokens: int | None = None
        self._skipped: dict[str, int] = {}

    def finish(self) -> list[Message]:
        if self._skipped:
            self.metadata["skipped_items"] = dict(self._skipped)
        return self.messages

    def add(self, line: int, kind: str, payload: Mapping[str, Any], at: float | None) -> None:
        if kind == "session_meta":
            self._session_meta(payload)
        elif kind == "turn_context":
            self._response = None
            if isinstance(payload.get("model"), str):
                self.models.append(payload["model"])
        elif kind == "event_msg" and payload.get("type") == "token_count":
            self._token_count(payload)
        elif kind == "compacted":
            self._summary(line, as_text(payload.get("message")), at, flags=())
        elif kind == "response_item":
            self._item(line, payload, at)

    def _session_meta(self, payload: Mapping[str, Any]) -> None:
        if isinstance(payload.get("id"), str):
            self.session_id = payload["id"]
        for key in ("cwd", "cli_version", "originator", "source", "model_provider", "git"):
            if payload.get(key) is not None:
                self.metadata[key] = payload[key]
        instructions = payload.get("base_instructions") or payload.get("instructions")
        if isinstance(instructions, Mapping):
            instructions = instructions.get("text")
        if isinstance(instructions, str) and instructions:
            self.metadata["instructions"] = instructions
        self.tools.extend(tool_specs(payload.get("dynamic_tools")))

    def _token_count(self, payload: Mapping[str, Any]) -> None:
        info = child(payload, "info")
        last = child(info, "last_token_usage")
        if not last:
            return
        window = token_count(info.get("model_context_window"))
        if window is not None:
            self.metadata["model_context_window"] = window
        usage = Usage(
            input_tokens=token_count(last.get("input_tokens")) or 0,
            output_tokens=token_count(last.get("output_tokens")) or 0,
            cache_read_tokens=token_count(last.get("cached_input_tokens")) or 0,
        )
        self._context_tokens = usage.total_tokens
        target = self._response
        if target is None:
            assistants = (i for i, m in enumerate(self.messages) if m.role == "assistant")
            target = max(assistants, default=None)
        # Codex repeats the latest count (at the end of a turn, for instance): a message that
        # already has its usage keeps it, so each call is counted once.
        if target is not None and self.messages[target].meta.usage is None:
            self.messages[target] = self.messages[target].with_meta(usage=usage)
        self._response = None

    def _item(self, line: int, item: Mapping[str, Any], at: float | None) -> None:
        kind = string(item, "type")
        if kind == "message" and item.get("role") == "assistant":
            self._extend_response(line, at, _content_parts(item.get("content")), ())
        elif kind == "message":
            self._response = None
            self._input_message(line, item, at)
        elif kind == "reasoning":
            self._extend_response(line, at, _reasoning_parts(item), ())
        elif kind == "function_call":
            call = ToolCallPart(
                _call_id(item, line),
                as_text(item.get("name")),
                as_text(item.get("arguments", "{}")),
            )
            self._extend_response(line, at, (call,), ())
        elif kind == "custom_tool_call":
            call = ToolCallPart.from_args(
                _call_id(item, line),
                as_text(item.get("name")),
                {"input": as_text(item.get("input"))},
            )
            self._extend_response(line, at, (call,), ("custom_tool_call",))
        elif kind == "local_shell_call":
            action = dict(child(item, "action"))
            action.pop("type", None)
            call = ToolCallPart.from_args(_call_id(item, line), "shell", action)
            self._extend_response(line, at, (call,), ())
        elif kind in _INPUT_SIDE:
            self._response = None
            self._output(line, item, at)
        elif kind in ("compaction", "compaction_summary"):
            self._summary(line, "", at, flags=("encrypted",))
        else:
            # web searches run on the server and have no result item; snapshots are bookkeeping.
            name = str(kind)
            self._skipped[name] = self._skipped.get(name, 0) + 1

    def _extend_response(
        self, line: int, at: float | None, parts: tuple[Part, ...], flags: tuple[str, ...]
    ) -> None:
        for part in parts:
            if isinstance(part, ToolCallPart):
                self._call_names[part.call_id] = part.name
        if self._response is None:
            self._response = len(self.messages)
            meta = Meta(created_at=at, flags=flags)
            self.messages.append(Message("assistant", parts, self._id(line), meta))
            return
        current = self.messages[self._response]
        merged_flags = (*current.meta.flags, *(f for f in flags if f not in current.meta.flags))
        self.messages[self._response] = current.with_parts((*current.parts, *parts)).with_meta(
            flags=merged_flags
        )

    def _input_message(self, line: int, item: Mapping[str, Any], at: float | None) -> None:
        parts = _content_parts(item.get("content"))
        role = item.get("role")
        if role in ("developer", "system"):
            flags = ("developer",) if role == "developer" else ()
            self.messages.append(
                Message("system", parts, self._id(line), Meta(created_at=at, flags=flags))
            )
            return
        text = "".join(p.text for p in parts if isinstance(p, TextPart)).lstrip()
        injected = text.startswith(_INJECTED_PREFIXES)
        meta = Meta(
            user_visible=not injected, created_at=at, flags=("context",) if injected else ()
        )
        self.messages.append(Message("user", parts, self._id(line), meta))

    def _output(self, line: int, item: Mapping[str, Any], at: float | None) -> None:
        call_id = as_id(item.get("call_id")) or ""
        content, images, failed = _output_content(item.get("output"))
        result = ToolResultPart(
            call_id, self._call_names.get(call_id, ""), content, failed, tuple(images)
        )
        meta = Meta(kind="tool_result", created_at=at)
        self.messages.append(Message("tool", (result,), self._id(line), meta))

    def _summary(self, line: int, text: str, at: float | None, flags: tuple[str, ...]) -> None:
        self._response = None
        message_id = self._id(line)
        covers = (self.messages[0].id, self.messages[-1].id) if self.messages else None
        self.compactions.append(
            RecordedCompaction(
                index=len(self.messages),
                trigger=None,
                pre_tokens=self._context_tokens,
                summary_text=text,
                summary_message_id=message_id,
            )
        )
        part = SummaryPart(text, covers=covers, source="codex")
        meta = Meta(kind="summary", created_at=at, flags=flags)
        self.messages.append(Message("user", (part,), message_id, meta))

    def _id(self, line: int) -> str:
        return f"{self.source.stem}:{line}"


def _call_id(item: Mapping[str, Any], line: int) -> str:
    return as_id(item.get("call_id")) or as_id(item.get("id")) or f"call_{line}"


def _content_parts(content: Any) -> tuple[Part, ...]:
    if isinstance(content, str):
        return (TextPart(content),)
    parts: list[Part] = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, Mapping):
            continue
        if block.get("type") in ("input_text", "output_text", "text"):
            parts.append(TextPart(as_text(block.get("text"))))
        elif block.get("type") == "input_image":
            parts.append(_image(block.get("image_url")))
    return tuple(parts)


def _image(url: Any) -> ImagePart:
    text = url if isinstance(url, str) else ""
    media = text[5 : text.index(";")] if text.startswith("data:") and ";" in text else None
    return ImagePart(text, media)


def _reasoning_parts(item: Mapping[str, Any]) -> tuple[Part, ...]:
    """The readable reasoning: the raw text when recorded, else the summaries. The encrypted
    blob is left out (opaque, and only meaningful to the API that produced it)."""
    for key in ("content", "summary"):
        blocks = item.get(key)
        texts = [
            as_text(b.get("text"))
            for b in (blocks if isinstance(blocks, list) else ())
            if isinstance(b, Mapping)
        ]
        if texts:
            return (ThinkingPart("\n\n".join(texts)),)
    return ()


def _output_content(output: Any) -> tuple[str, list[ImagePart], bool]:
    """(text verbatim, images, failed) of a tool output in any of the shapes Codex wrote."""
    if isinstance(output, Mapping):
        # Older rollouts: {"content": ..., "success": bool}.
        content, images, _ = _output_content(output.get("content", ""))
        return content, images, output.get("success") is False
    if isinstance(output, list):
        texts = [
            as_text(b.get("text"))
            for b in output
            if isinstance(b, Mapping) and b.get("type") in ("input_text", "output_text")
        ]
        images = [
            _image(b.get("image_url"))
            for b in output
            if isinstance(b, Mapping) and b.get("type") == "input_image"
        ]
        return "\n".join(texts), images, False
    text = as_text(output)
    return text, [], _exit_code(text) not in (None, 0)


def _exit_code(text: str) -> int | None:
    """The command's exit code, from the JSON form ``{"output", "metadata": {"exit_code"}}`` or
    the plain form starting ``Exit code: N``."""
    match = _EXIT_CODE_LINE.match(text)
    if match:
        return int(match.group(1))
    if not text.startswith("{"):
        return None
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested too deeply to read
        return None
    code = child(parsed, "metadata").get("exit_code")
    return code if isinstance(code, int) else None
