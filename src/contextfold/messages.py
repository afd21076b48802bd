"""The neutral message model every other part of contextfold speaks.

A conversation is a list of :class:`Message` values. Each message has a role, a tuple of parts, a
stable id and a :class:`Meta` record. Values are frozen; derive changed copies with
:func:`dataclasses.replace` (or the helpers below). ``to_dict`` / ``from_dict`` give an exact JSON
round trip: ``Message.from_dict(json.loads(json.dumps(m.to_dict()))) == m``.

Roles follow the OpenAI split because it is the finer one: tool results live in ``"tool"``
messages. The Anthropic adapter folds them back into user messages on the way out.
"""

from __future__ import annotations

import itertools
import json
import secrets
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeAlias, TypeVar, get_args

__all__ = [
    "MESSAGE_KINDS",
    "ImagePart",
    "Message",
    "MessageKind",
    "Meta",
    "Part",
    "Role",
    "SummaryPart",
    "TextPart",
    "ThinkingPart",
    "ToolCallPart",
    "ToolResultPart",
    "Usage",
    "new_message_id",
    "part_from_dict",
    "part_to_dict",
    "reproducible_ids",
]

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]
_ROLES: frozenset[str] = frozenset(get_args(Role))

MessageKind: TypeAlias = Literal[
    "message",
    "tool_result",
    "tool_result_archived",
    "tool_summary",
    "summary",
    "synthetic",
    "restart_marker",
    "wind_down",
    "context_note",
    "drop_note",
    "harness_note",
]
"""What a message is for:

- ``"message"``: ordinary conversation turn (the default);
- ``"tool_result"``: a message of tool results;
- ``"tool_result_archived"``: a tool result taken out of the agent's view but kept for the user;
- ``"tool_summary"``: a digest of archived tool results;
- ``"summary"``: a compaction summary (holds a :class:`SummaryPart`);
- ``"synthetic"``: made up by contextfold (e.g. an "aborted" result for a dangling call);
- ``"restart_marker"``, ``"wind_down"``, ``"context_note"``: notes contextfold adds for the model;
- ``"drop_note"``: the note standing where compaction dropped messages (it lists their refs);
- ``"harness_note"``: user-role text the agent harness wrote, not the user (an interruption
  marker, a hook reminder...; see :mod:`contextfold.history.harness_notes`).
"""
MESSAGE_KINDS: frozenset[MessageKind] = frozenset(get_args(MessageKind))


_id_clock_lock = threading.Lock()
_id_clock_last_us = 0


def _next_id_microsecond() -> int:
    # Two ids made in the same microsecond would otherwise order by their random suffix, so the
    # clock is made strictly increasing within the process (like a monotonic ULID generator).
    global _id_clock_last_us
    with _id_clock_lock:
        now = time.time_ns() // 1000
        _id_clock_last_us = max(now, _id_clock_last_us + 1)
        return _id_clock_last_us


def new_message_id(prefix: str = "msg") -> str:
    """Return a fresh id that sorts by creation time: ``msg_<12 hex time><10 hex random>``.

    Within one process the ids are strictly increasing, even when many are made in one microsecond.
    Inside :func:`reproducible_ids`, the next id of its sequence instead.
    """
    sequence = _reproducible_sequence.get()
    if sequence is not None:
        return f"{prefix}_{next(sequence):022x}"
    return f"{prefix}_{_next_id_microsecond():012x}{secrets.token_hex(5)}"


_reproducible_sequence: ContextVar[Iterator[int] | None] = ContextVar(
    "contextfold_reproducible_ids", default=None
)


@contextmanager
def reproducible_ids(first: int = 1) -> Iterator[None]:
    """Within the block, fresh ids are ``<prefix>_<22 hex digits counting from first>``: the same
    on every run, where :func:`new_message_id`'s hold the clock and a random part (a sequence
    whose ids may meet another's, as a replayed session's meet the replay's, starts elsewhere).

    Ids reach what a model reads (summaries cite their sources by id), so a computation whose
    figures must be reproducible (a replay) makes its ids here. They are unique within the block
    only, and they still sort by creation. The sequence belongs to the current thread (a context
    variable): ids made by other threads meanwhile are the usual ones.
    """
    token = _reproducible_sequence.set(itertools.count(first))
    try:
        yield
    finally:
        _reproducible_sequence.reset(token)


# --------------------------------------------------------------------------------------------------
# Parts
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TextPart:
    """Plain text from a user, an assistant or the system."""

    text: str
    part_kind: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ImagePart:
    """An image, by URL. Inline images use a ``data:<media type>;base64,...`` URL."""

    url: str
    media_type: str | None = None
    detail: str | None = None
    part_kind: Literal["image"] = "image"

    @property
    def is_inline(self) -> bool:
        """True when the image bytes travel inside the URL (a ``data:`` URL)."""
        return self.url.startswith("data:")


@dataclass(frozen=True, slots=True)
class ToolCallPart:
    """A request from the model to run a tool.

    ``arguments`` is the JSON text exactly as the provider sent it, so that replaying a history
    sends byte-identical requests (prompt caches depend on it). Invalid JSON is kept verbatim;
    :attr:`arguments_valid` tells, and :meth:`args` refuses to guess.
    """

    call_id: str
    name: str
    arguments: str = "{}"
    part_kind: Literal["tool-call"] = "tool-call"
    _args: Mapping[str, Any] | None = field(default=None, init=False, repr=False, compare=False)
    """:meth:`shared_args`, once decoded (a part is a value)."""

    @property
    def arguments_valid(self) -> bool:
        """True when ``arguments`` parses as a JSON object."""
        try:
            return isinstance(json.loads(self.arguments), dict)
        except (ValueError, RecursionError):  # RecursionError: nested too deeply to parse
            return False

    def args(self) -> dict[str, Any]:
        """The parsed arguments; an empty dict when the text is not a JSON object."""
        try:
            value = json.loads(self.arguments)
        except (ValueError, RecursionError):
            return {}
        return value if isinstance(value, dict) else {}

    def shared_args(self) -> Mapping[str, Any]:
        """:meth:`args`, decoded once per part and the same object at every call: read it,
        never change it (nor what it holds). The history's readers (fact extraction, the texts
        the probes search) decode each call of a view again at every compaction; :meth:`args`
        stays a fresh dict for callers that hand it on."""
        value = self._args
        if value is None:
            value = self.args()
            object.__setattr__(self, "_args", value)
        return value

    @classmethod
    def from_args(cls, call_id: str, name: str, args: Mapping[str, Any]) -> ToolCallPart:
        """Build a call from a mapping (compact JSON, key order kept)."""
        return cls(call_id, name, json.dumps(dict(args), ensure_ascii=False, separators=(",", ":")))


@dataclass(frozen=True, slots=True)
class ToolResultPart:
    """What a tool returned for one call.

    ``ref`` names the full output in the store when the content shown here is shorter than what
    the tool produced (truncated, offloaded or masked); the ``read_result`` tool resolves it.
    """

    call_id: str
    name: str
    content: str
    is_error: bool = False
    images: tuple[ImagePart, ...] = ()
    ref: str | None = None
    part_kind: Literal["tool-result"] = "tool-result"


@dataclass(frozen=True, slots=True)
class ThinkingPart:
    """Model reasoning. Anthropic requires the ``signature`` back unchanged within a tool loop;
    redacted thinking carries only opaque ``redacted_data``."""

    text: str
    signature: str | None = None
    redacted_data: str | None = None
    part_kind: Literal["thinking"] = "thinking"


@dataclass(frozen=True, slots=True)
class SummaryPart:
    """A compaction summary standing in for a range of earlier messages.

    It is its own part type so that it is never mistaken for something the user typed, and
    survives every round trip. ``sections`` holds the structured form (section name -> items);
    ``text`` is what the model reads. ``covers`` names the first and last message id replaced,
    ``source`` who wrote it (``"contextfold"``, ``"claude-code"``, ``"codex"``...).
    """

    text: str
    sections: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    covers: tuple[str, str] | None = None
    source: str = "contextfold"
    part_kind: Literal["summary"] = "summary"


Part: TypeAlias = TextPart | ImagePart | ToolCallPart | ToolResultPart | ThinkingPart | SummaryPart
_P = TypeVar("_P", TextPart, ImagePart, ToolCallPart, ToolResultPart, ThinkingPart, SummaryPart)


# --------------------------------------------------------------------------------------------------
# Usage and meta
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens a provider reported for one call.

    ``input_tokens`` counts every prompt token, cached or not: for Anthropic that is
    ``input_tokens + cache_creation_input_tokens + cache_read_input_tokens`` of its raw usage.
    ``estimated`` is true when the provider reported nothing and contextfold counted the request
    and the reply itself: the figures are an estimate, not the provider's truth.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    estimated: bool = False

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens: the context size after this call."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.estimated or other.estimated,
        )

    def to_dict(self) -> dict[str, int]:
        """JSON form (``estimated`` only when set, so reported usage keeps its stored form)."""
        out = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
        }
        if self.estimated:
            out["estimated"] = True
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Usage:
        """Inverse of :meth:`to_dict`; missing fields are zero."""
        return cls(
            int(data.get("input_tokens", 0)),
            int(data.get("output_tokens", 0)),
            int(data.get("cache_read_tokens", 0)),
            int(data.get("cache_write_tokens", 0)),
            bool(data.get("estimated", False)),
        )


@dataclass(frozen=True, slots=True)
class Meta:
    """Facts about a message that are not part of what the model reads.

    ``agent_visible=False`` keeps a message out of every request (it stays in the transcript);
    ``user_visible=False`` hides it from user-facing displays. ``tokens`` caches the count made
    when the message entered the transcript; ``usage`` is the provider's report for the call that
    produced an assistant message. ``flags`` are short markers such as ``"invalid_arguments"`` or
    ``"synthesized"``; ``provider`` keeps provider-specific details verbatim (JSON values only).
    """

    agent_visible: bool = True
    user_visible: bool = True
    kind: MessageKind = "message"
    tokens: int | None = None
    turn: int | None = None
    created_at: float | None = None
    usage: Usage | None = None
    flags: tuple[str, ...] = ()
    provider: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON form; default values are left out to keep stored rows small."""
        out: dict[str, Any] = {}
        if not self.agent_visible:
            out["agent_visible"] = False
        if not self.user_visible:
            out["user_visible"] = False
        if self.kind != "message":
            out["kind"] = self.kind
        for name in ("tokens", "turn", "created_at"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.usage is not None:
            out["usage"] = self.usage.to_dict()
        if self.flags:
            out["flags"] = list(self.flags)
        if self.provider:
            out["provider"] = dict(self.provider)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Meta:
        """Inverse of :meth:`to_dict`."""
        usage = data.get("usage")
        return cls(
            agent_visible=bool(data.get("agent_visible", True)),
            user_visible=bool(data.get("user_visible", True)),
            kind=_message_kind(data.get("kind", "message")),
            tokens=data.get("tokens"),
            turn=data.get("turn"),
            created_at=data.get("created_at"),
            usage=Usage.from_dict(usage) if usage is not None else None,
            flags=tuple(data.get("flags", ())),
            provider=dict(data.get("provider", {})),
        )


# --------------------------------------------------------------------------------------------------
# Message
# --------------------------------------------------------------------------------------------------


_KIND_BY_NAME: dict[str, MessageKind] = {kind: kind for kind in MESSAGE_KINDS}
"""Each kind by its spelling: a stored kind is checked with one lookup (every message loaded)."""


def _message_kind(value: object) -> MessageKind:
    """A stored ``kind``, checked: an unknown one is a damaged or foreign record, not a note."""
    kind = _KIND_BY_NAME.get(value) if isinstance(value, str) else None
    if kind is None:
        raise ValueError(f"unknown message kind {value!r}; expected one of {sorted(MESSAGE_KINDS)}")
    return kind


@dataclass(frozen=True, slots=True)
class Message:
    """One entry of a conversation: who spoke, what they said, and facts about it."""

    role: Role
    parts: tuple[Part, ...]
    id: str = field(default_factory=new_message_id)
    meta: Meta = field(default_factory=Meta)
    _calls: tuple[ToolCallPart, ...] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    """:attr:`tool_calls`, once read: a message is a value, and the history's structure (its
    units, its repairs, the open calls) reads every message's calls again turn after turn."""
    _results: tuple[ToolResultPart, ...] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    """:attr:`tool_results`, once read."""

    def __post_init__(self) -> None:
        if self.role not in _ROLES:
            raise ValueError(f"unknown role {self.role!r}; expected one of {sorted(_ROLES)}")
        if not isinstance(self.parts, tuple):
            # Accept any sequence from callers but store a tuple: messages are values.
            object.__setattr__(self, "parts", tuple(self.parts))

    # -- constructors ----------------------------------------------------------------------------

    @classmethod
    def system(cls, text: str, **kwargs: Any) -> Message:
        """A system message holding ``text``."""
        return cls("system", (TextPart(text),), **kwargs)

    @classmethod
    def user(cls, text: str, **kwargs: Any) -> Message:
        """A user message holding ``text``."""
        return cls("user", (TextPart(text),), **kwargs)

    @classmethod
    def assistant(
        cls, text: str = "", tool_calls: Sequence[ToolCallPart] = (), **kwargs: Any
    ) -> Message:
        """An assistant message with optional text followed by tool calls."""
        parts: list[Part] = [TextPart(text)] if text else []
        parts.extend(tool_calls)
        return cls("assistant", tuple(parts), **kwargs)

    @classmethod
    def tool(cls, *results: ToolResultPart, **kwargs: Any) -> Message:
        """A tool message carrying one or more results."""
        if "meta" not in kwargs:
            kwargs["meta"] = Meta(kind="tool_result")
        return cls("tool", tuple(results), **kwargs)

    # -- views -----------------------------------------------------------------------------------

    @property
    def text(self) -> str:
        """The text parts joined by newlines (summaries included, tool payloads not)."""
        return "\n".join(
            p.text for p in self.parts if isinstance(p, TextPart | SummaryPart) and p.text
        )

    @property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        """The tool calls in this message, in order."""
        calls = self._calls
        if calls is None:
            calls = tuple(p for p in self.parts if isinstance(p, ToolCallPart))
            object.__setattr__(self, "_calls", calls)
        return calls

    @property
    def tool_results(self) -> tuple[ToolResultPart, ...]:
        """The tool results in this message, in order."""
        results = self._results
        if results is None:
            results = tuple(p for p in self.parts if isinstance(p, ToolResultPart))
            object.__setattr__(self, "_results", results)
        return results

    def parts_of(self, kind: type[_P]) -> Iterator[_P]:
        """Iterate the parts of one type."""
        return (p for p in self.parts if isinstance(p, kind))

    def with_meta(self, **changes: Any) -> Message:
        """A copy with some meta fields changed."""
        return replace(self, meta=replace(self.meta, **changes))

    def with_parts(self, parts: Iterable[Part]) -> Message:
        """A copy with other parts (same id and meta)."""
        return replace(self, parts=tuple(parts))

    # -- JSON ------------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """JSON form: ``{"id", "role", "parts": [...], "meta": {...}}``."""
        out: dict[str, Any] = {
            "id": self.id,
            "role": self.role,
            "parts": [part_to_dict(p) for p in self.parts],
        }
        meta = self.meta.to_dict()
        if meta:
            out["meta"] = meta
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        """Inverse of :meth:`to_dict`; raises ``ValueError`` naming what is wrong."""
        try:
            role = data["role"]
            raw_parts = data["parts"]
            msg_id = data["id"]
        except KeyError as exc:
            raise ValueError(f"message dict lacks the {exc.args[0]!r} field") from None
        return cls(
            role=role,
            parts=tuple(part_from_dict(p) for p in raw_parts),
            id=str(msg_id),
            meta=Meta.from_dict(data.get("meta", {})),
        )

    def to_json(self) -> str:
        """Compact JSON text of :meth:`to_dict`."""
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> Message:
        """Inverse of :meth:`to_json`."""
        return cls.from_dict(json.loads(text))


# --------------------------------------------------------------------------------------------------
# Part JSON
# --------------------------------------------------------------------------------------------------


def part_to_dict(part: Part) -> dict[str, Any]:
    """JSON form of one part, tagged by ``part_kind``; default-valued fields are left out."""
    if isinstance(part, TextPart):
        return {"part_kind": "text", "text": part.text}
    if isinstance(part, ImagePart):
        out: dict[str, Any] = {"part_kind": "image", "url": part.url}
        if part.media_type is not None:
            out["media_type"] = part.media_type
        if part.detail is not None:
            out["detail"] = part.detail
        return out
    if isinstance(part, ToolCallPart):
        return {
            "part_kind": "tool-call",
            "call_id": part.call_id,
            "name": part.name,
            "arguments": part.arguments,
        }
    if isinstance(part, ToolResultPart):
        out = {
            "part_kind": "tool-result",
            "call_id": part.call_id,
            "name": part.name,
            "content": part.content,
        }
        if part.is_error:
            out["is_error"] = True
        if part.images:
            out["images"] = [part_to_dict(i) for i in part.images]
        if part.ref is not None:
            out["ref"] = part.ref
        return out
    if isinstance(part, ThinkingPart):
        out = {"part_kind": "thinking", "text": part.text}
        if part.signature is not None:
            out["signature"] = part.signature
        if part.redacted_data is not None:
            out["redacted_data"] = part.redacted_data
        return out
    if isinstance(part, SummaryPart):
        out = {"part_kind": "summary", "text": part.text, "source": part.source}
        if part.sections:
            out["sections"] = {k: list(v) for k, v in part.sections.items()}
        if part.covers is not None:
            out["covers"] = list(part.covers)
        return out
    raise TypeError(f"not a message part: {part!r}")


def part_from_dict(data: Mapping[str, Any]) -> Part:
    """Inverse of :func:`part_to_dict`."""
    kind = data.get("part_kind")
    if kind == "text":
        return TextPart(data["text"])
    if kind == "image":
        return ImagePart(data["url"], data.get("media_type"), data.get("detail"))
    if kind == "tool-call":
        return ToolCallPart(data["call_id"], data["name"], data.get("arguments", "{}"))
    if kind == "tool-result":
        images = data.get("images", ())
        return ToolResultPart(
            data["call_id"],
            data["name"],
            data["content"],
            bool(data.get("is_error", False)),
            tuple(ImagePart(i["url"], i.get("media_type"), i.get("detail")) for i in images),
            data.get("ref"),
        )
    if kind == "thinking":
        return ThinkingPart(data["text"], data.get("signature"), data.get("redacted_data"))
    if kind == "summary":
        covers = data.get("covers")
        return SummaryPart(
            data["text"],
            {k: tuple(v) for k, v in data.get("sections", {}).items()},
            (covers[0], covers[1]) if covers else None,
            data.get("source", "contextfold"),
        )
    raise ValueError(f"unknown part_kind {kind!r}")
