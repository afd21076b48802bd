"""One neutral reading of a request body in any of the three protocols the clients speak.

The scripted upstreams and the invariant checker must see a request the way a model would: who
said what, which calls were made with which inputs, which results came back. Anthropic Messages,
OpenAI Chat Completions and OpenAI Responses say the same things in three shapes; :func:`read`
turns each into a list of :class:`Msg`, so the checks are written once.

This reader is deliberately independent of ``contextfold.transcripts``: the checks judge what the
proxy made of a request, so they must not share the proxy's own parsing (a bug there would be
invisible to a checker built on it). It is plain dict walking, and it never raises on an odd
shape: what it does not know becomes an ``"other"`` part.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "REMINDER",
    "Msg",
    "Part",
    "Protocol",
    "canonical_input",
    "latest_turn_results",
    "read",
    "strip_reminders",
]

Protocol = Literal["anthropic", "openai", "responses"]
"""Anthropic Messages, OpenAI Chat Completions, OpenAI Responses."""

PartKind = Literal["text", "call", "result", "thinking", "other"]

REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
"""Claude Code's reminders, which it puts inside user texts; they are not the user's words."""


@dataclass(frozen=True, slots=True)
class Part:
    """One piece of a message. ``text`` is the text, a result's text or a thinking's text;
    ``input`` is a call's input (a dict when it is JSON, the raw string otherwise);
    ``signature`` is a thinking block's signature (or a reasoning item's encrypted content)."""

    kind: PartKind
    text: str = ""
    call_id: str = ""
    name: str = ""
    input: Any = None
    signature: str = ""


@dataclass(frozen=True, slots=True)
class Msg:
    """One message: ``role`` is ``system``, ``user``, ``assistant`` or ``tool`` (a tool result
    that the protocol sends on its own, as Chat's ``tool`` role and Responses'
    ``function_call_output`` do). Anthropic tool results stay inside their user message."""

    role: str
    parts: tuple[Part, ...] = field(default_factory=tuple)

    def texts(self) -> list[str]:
        return [p.text for p in self.parts if p.kind == "text"]

    def calls(self) -> list[Part]:
        return [p for p in self.parts if p.kind == "call"]

    def results(self) -> list[Part]:
        return [p for p in self.parts if p.kind == "result"]

    def thinking(self) -> list[Part]:
        return [p for p in self.parts if p.kind == "thinking"]


def read(protocol: Protocol, body: Mapping[str, Any]) -> tuple[list[str], list[Msg]]:
    """``(system texts, messages)`` of a request body. The system texts are the protocol's
    system parameter (Anthropic's ``system``, Responses' ``instructions``); system messages
    inside the conversation stay in the messages, where they were sent."""
    if protocol == "anthropic":
        return _anthropic(body)
    if protocol == "openai":
        return [], [_chat_message(m) for m in _dicts(body.get("messages"))]
    return _responses(body)


def strip_reminders(text: str) -> str:
    """``text`` without Claude Code's ``<system-reminder>`` blocks, trimmed."""
    return REMINDER.sub("", text).strip()


def canonical_input(value: Any) -> str:
    """A call input as canonical JSON (sorted keys, no spaces), for comparing inputs that a
    client re-serialized."""
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def latest_turn_results(messages: Sequence[Msg]) -> list[Part]:
    """The tool results sent after the last assistant message: the newest ones, which the
    model needs to take its next step."""
    found: list[Part] = []
    for message in reversed(messages):
        if message.role == "assistant":
            break
        found[:0] = message.results()
    return found


# -- Anthropic Messages ----------------------------------------------------------------------------


def _anthropic(body: Mapping[str, Any]) -> tuple[list[str], list[Msg]]:
    system = body.get("system")
    systems = [system] if isinstance(system, str) else [_text_of(b) for b in _dicts(system)]
    messages: list[Msg] = []
    for raw in _dicts(body.get("messages")):
        role = str(raw.get("role") or "user")
        content = raw.get("content")
        if isinstance(content, str):
            messages.append(Msg(role, (Part("text", content),)))
            continue
        messages.append(Msg(role, tuple(_anthropic_block(b) for b in _dicts(content))))
    return [s for s in systems if s], messages


def _anthropic_block(block: Mapping[str, Any]) -> Part:
    kind = block.get("type")
    if kind == "text":
        return Part("text", str(block.get("text") or ""))
    if kind in ("tool_use", "server_tool_use"):
        return Part(
            "call",
            call_id=str(block.get("id")),
            name=str(block.get("name")),
            input=block.get("input"),
        )
    if kind == "tool_result":
        return Part(
            "result", _content_text(block.get("content")), call_id=str(block.get("tool_use_id"))
        )
    if kind == "thinking":
        return Part(
            "thinking",
            str(block.get("thinking") or ""),
            signature=str(block.get("signature") or ""),
        )
    if kind == "redacted_thinking":
        return Part("thinking", signature=str(block.get("data") or ""))
    return Part("other", text=str(kind))


# -- OpenAI Chat Completions -----------------------------------------------------------------------


def _chat_message(raw: Mapping[str, Any]) -> Msg:
    role = str(raw.get("role") or "user")
    if role == "developer":
        role = "system"
    if role == "tool":
        result = Part(
            "result", _content_text(raw.get("content")), call_id=str(raw.get("tool_call_id"))
        )
        return Msg("tool", (result,))
    parts: list[Part] = []
    reasoning = raw.get("reasoning_content") or raw.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        parts.append(Part("thinking", reasoning))
    content = raw.get("content")
    if isinstance(content, str):
        if content:
            parts.append(Part("text", content))
    else:
        parts += [
            Part("text", _text_of(b))
            for b in _dicts(content)
            if b.get("type") in ("text", "input_text")
        ]
    for call in _dicts(raw.get("tool_calls")):
        function = call.get("function") if isinstance(call.get("function"), Mapping) else {}
        assert isinstance(function, Mapping)
        parts.append(
            Part(
                "call",
                call_id=str(call.get("id")),
                name=str(function.get("name")),
                input=_arguments(function.get("arguments")),
            )
        )
    return Msg(role, tuple(parts))


# -- OpenAI Responses ------------------------------------------------------------------------------

_ASSISTANT_ITEMS = ("function_call", "custom_tool_call", "reasoning", "local_shell_call")
_RESULT_ITEMS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")


def _responses(body: Mapping[str, Any]) -> tuple[list[str], list[Msg]]:
    instructions = body.get("instructions")
    systems = [instructions] if isinstance(instructions, str) and instructions else []
    raw_input = body.get("input")
    if isinstance(raw_input, str):
        return systems, [Msg("user", (Part("text", raw_input),))]
    grouped: list[tuple[str, list[Part]]] = []
    for role, part in _response_items(_dicts(raw_input)):
        if grouped and grouped[-1][0] == role and role in ("assistant", "tool"):
            grouped[-1][1].append(part)
        else:
            grouped.append((role, [part]))
    return systems, [Msg(role, tuple(parts)) for role, parts in grouped]


def _response_items(items: Sequence[Mapping[str, Any]]) -> Iterator[tuple[str, Part]]:
    for item in items:
        kind = item.get("type") or "message"
        if kind == "message":
            role = str(item.get("role") or "user")
            role = "system" if role == "developer" else role
            content = item.get("content")
            if isinstance(content, str):
                yield role, Part("text", content)
            else:
                blocks = _dicts(content)
                texts = [_text_of(b) for b in blocks if "text" in b]
                yield role, Part("text", "\n".join(texts)) if texts else Part("other", "message")
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            raw = item.get("arguments") if kind == "function_call" else item.get("input")
            if kind == "local_shell_call":
                raw = item.get("action")
            yield (
                "assistant",
                Part(
                    "call",
                    call_id=str(item.get("call_id") or item.get("id")),
                    name=str(item.get("name") or kind),
                    input=_arguments(raw),
                ),
            )
        elif kind in _RESULT_ITEMS:
            yield (
                "tool",
                Part("result", _content_text(item.get("output")), call_id=str(item.get("call_id"))),
            )
        elif kind == "reasoning":
            summary = "\n".join(_text_of(s) for s in _dicts(item.get("summary")))
            content = "\n".join(_text_of(s) for s in _dicts(item.get("content")))
            yield (
                "assistant",
                Part(
                    "thinking",
                    content or summary,
                    signature=str(item.get("encrypted_content") or ""),
                ),
            )
        else:
            yield "other", Part("other", str(kind))


# -- helpers ---------------------------------------------------------------------------------------


def _dicts(value: Any) -> list[Mapping[str, Any]]:
    if not isinstance(value, list):
        return []
    return [v for v in value if isinstance(v, Mapping)]


def _text_of(block: Mapping[str, Any]) -> str:
    return str(block.get("text") or "")


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text_of(b) for b in _dicts(content) if "text" in b)
    if content is None:
        return ""
    return json.dumps(content)


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw
