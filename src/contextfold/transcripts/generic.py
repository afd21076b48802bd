"""Plain message lists and contextfold's own export, read as transcripts.

- ``openai-messages``: a JSON list of chat-completions messages, or ``{"messages": [...]}`` with
  optional ``tools`` and ``model`` (the body of a request, or a saved conversation);
- ``anthropic-messages``: ``{"system", "messages"}`` in the messages-API shape (optionally with
  ``tools`` and ``model``);
- ``contextfold``: the JSON Lines export of a session (``contextfold.store``): a ``session``
  header line (id, parent id, model, title, metadata), one ``{"kind": "message", "seq": N,
  "message": {...}}`` line per message, and ``edit``, ``event`` and ``blob`` lines, which are not
  part of the transcript and are skipped.

Plain lists carry no ids, so messages are numbered ``<file stem>:<position>``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from contextfold.messages import Message
from contextfold.transcripts._files import SourceFile, read_source, with_ids
from contextfold.transcripts._typed import type_problem
from contextfold.transcripts.transcript import Transcript, flag_invalid_arguments
from contextfold.wire.anthropic import from_anthropic
from contextfold.wire.chat_completions import from_openai
from contextfold.wire.values import MessageError, child, string, tool_specs

__all__ = [
    "ANTHROPIC_FORMAT",
    "CONTEXTFOLD_FORMAT",
    "OPENAI_FORMAT",
    "chat_from_source",
    "contextfold_from_source",
    "load_chat",
    "looks_like_anthropic_messages",
    "looks_like_contextfold",
    "looks_like_openai_messages",
]

OPENAI_FORMAT = "openai-messages"
ANTHROPIC_FORMAT = "anthropic-messages"
CONTEXTFOLD_FORMAT = "contextfold"

_OPENAI_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
_ANTHROPIC_ONLY_BLOCKS = frozenset(
    {"tool_use", "tool_result", "thinking", "redacted_thinking", "document"}
)
_EXPORT_OPENING_KINDS = frozenset({"session", "message"})


def _message_list(document: Any) -> list[Any] | None:
    if isinstance(document, list):
        return document
    if isinstance(document, Mapping) and isinstance(document.get("messages"), list):
        return list(document["messages"])
    return None


def looks_like_anthropic_messages(document: Any) -> bool:
    """True for ``{"messages": [...]}`` in the messages-API shape: a ``system`` parameter, or
    content blocks only Anthropic uses."""
    messages = _message_list(document)
    if not isinstance(document, Mapping) or not messages:
        return False
    if not all(isinstance(m, Mapping) and m.get("role") in ("user", "assistant") for m in messages):
        return False
    blocks = [
        b
        for m in messages
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, Mapping)
    ]
    anthropic_blocks = any(string(b, "type") in _ANTHROPIC_ONLY_BLOCKS for b in blocks)
    return "system" in document or anthropic_blocks


def looks_like_openai_messages(document: Any) -> bool:
    """True for a non-empty list of chat-completions messages (bare, or under ``messages``)."""
    messages = _message_list(document)
    return bool(messages) and all(string(m, "role") in _OPENAI_ROLES for m in messages or ())


def looks_like_contextfold(source: SourceFile) -> bool:
    """True when a JSON Lines file is a contextfold session export."""
    head = [r.value for r in source.lines[:20]]
    return (
        bool(head)
        and all(isinstance(r, Mapping) and isinstance(r.get("kind"), str) for r in head)
        and head[0].get("kind") in _EXPORT_OPENING_KINDS
    )


def load_chat(path: str | os.PathLike[str]) -> Transcript:
    """The transcript of a file holding an OpenAI or Anthropic message list."""
    return chat_from_source(read_source(path))


def chat_from_source(source: SourceFile) -> Transcript:
    """The transcript of an already parsed OpenAI or Anthropic message list."""
    document = source.document
    messages_raw = _message_list(document) if source.shape == "json" else None
    if messages_raw is None:
        raise source.error("not a message list (expected a list, or an object with 'messages')")
    try:
        if looks_like_anthropic_messages(document):
            system = document.get("system")
            format_name = ANTHROPIC_FORMAT
            converted = from_anthropic(
                messages_raw,
                system=system if isinstance(system, str | list) else None,
                path=source.path,
            )
        else:
            format_name = OPENAI_FORMAT
            converted = from_openai(messages_raw, path=source.path)
    except MessageError as exc:
        keys = (exc.index,) if isinstance(document, list) else ("messages", exc.index)
        raise source.error_at(exc.reason, keys) from None
    messages, warnings = flag_invalid_arguments(with_ids(converted, source.stem))
    envelope = document if isinstance(document, Mapping) else {}
    model = envelope.get("model")
    return Transcript(
        messages=messages,
        format=format_name,
        path=source.path,
        model=model if isinstance(model, str) else None,
        session_id=source.stem,
        tools=tool_specs(envelope.get("tools")),
        metadata=dict(child(envelope, "metadata")),
        warnings=warnings,
    )


def contextfold_from_source(source: SourceFile) -> Transcript:
    """The transcript of an already parsed contextfold session export."""
    source = source.as_lines()
    if source.shape != "jsonl":
        raise source.error("not a contextfold export (expected JSON Lines records)")
    rows: list[tuple[int, int, Message]] = []
    session: Mapping[str, Any] = {}
    for line, record in source.objects():
        kind = record.get("kind")
        if kind == "session":
            session = record
        elif kind == "message":
            message = _export_message(record, source, line)
            seq = record.get("seq")
            rows.append((seq if isinstance(seq, int) else line, line, message))
    rows.sort(key=lambda row: (row[0], row[1]))
    messages, warnings = flag_invalid_arguments([message for _, _, message in rows])
    warnings[:0] = source.warnings
    model, title = session.get("model"), session.get("title")
    metadata = dict(child(session, "metadata"))
    if session.get("parent_id") is not None:
        metadata["parent_id"] = session["parent_id"]
    return Transcript(
        messages=messages,
        format=CONTEXTFOLD_FORMAT,
        path=source.path,
        model=model if isinstance(model, str) else None,
        session_id=string(session, "id") or source.stem,
        title=title if isinstance(title, str) else None,
        metadata=metadata,
        warnings=warnings,
    )


def _export_message(record: Mapping[str, Any], source: SourceFile, line: int) -> Message:
    """The message of an export's ``message`` line, checked field by field.

    ``Message.from_dict`` reads back what the store wrote and trusts it: on a dict of the wrong
    shape it fails with whatever the first bad field causes (a missing key, ``.get`` on a list,
    ``int()`` of a word), or builds a message whose fields have the wrong types. Both are this
    file's fault, reported at its line.
    """
    try:
        message = Message.from_dict(child(record, "message"))
    except (ValueError, KeyError, TypeError, AttributeError, OverflowError) as exc:
        raise source.error(f"unreadable message: {exc}", line) from None
    problem = type_problem(message)
    if problem is not None:
        raise source.error(f"unreadable message: {problem}", line)
    return message
