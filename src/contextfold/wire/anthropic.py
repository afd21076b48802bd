"""Anthropic messages-API wire format, both directions.

Anthropic puts tool results inside *user* messages and the system prompt in its own parameter.
:func:`to_anthropic` therefore folds neutral ``tool`` messages (and any user text right after them)
into one user message with the ``tool_result`` blocks first, merges consecutive messages of the
same role, and lifts system messages into ``system`` blocks. Cache breakpoints
(``cache_control``) go on the system blocks and message indexes the caller names.

:func:`from_anthropic` reads the wire form back; a user message holding tool results becomes a
``tool`` message followed, when it also had text, by a user message.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress
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
from contextfold.sequences import common_prefix
from contextfold.tool_spec import ToolSpec
from contextfold.wire.values import MessageError, as_id, as_text, child, shown, string, token_count

__all__ = [
    "CACHE_CONTROL",
    "RAW_ARGUMENTS_KEY",
    "AnthropicRequest",
    "SharedBlock",
    "SharedContent",
    "SharedMessage",
    "WireBlocks",
    "from_anthropic",
    "parse_anthropic_response",
    "to_anthropic",
    "tools_to_anthropic",
    "usage_from_anthropic",
]

CACHE_CONTROL: Mapping[str, str] = {"type": "ephemeral"}
"""The marker Anthropic reads as "cache everything up to and including this block"."""

RAW_ARGUMENTS_KEY = "_raw_arguments"
"""Where a tool call's arguments that are not a JSON object travel inside ``tool_use.input``."""


@dataclass
class AnthropicRequest:
    """The ``system`` and ``messages`` parameters of a messages-API request."""

    system: list[dict[str, Any]] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)

    def kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``client.messages.create`` (``system`` left out when empty)."""
        out: dict[str, Any] = {"messages": self.messages}
        if self.system:
            out["system"] = self.system
        return out


# --------------------------------------------------------------------------------------------------
# neutral -> wire
# --------------------------------------------------------------------------------------------------


class SharedBlock(dict[str, Any]):
    """A wire block that :class:`WireBlocks` hands to every request that sends its message: it
    cannot be changed (a caller that wants another block, one with a cache breakpoint say,
    copies it: ``dict(block)``), so what was computed from it once, its JSON, holds for every
    request that sends it. It is a ``dict`` to every reader (``json`` writes it as one)."""

    __slots__ = ("_json",)

    _json: bytes

    def encoded(self) -> bytes:
        """``json.dumps(self, ensure_ascii=False).encode()``, written once."""
        try:
            return self._json
        except AttributeError:
            self._json = json.dumps(self, ensure_ascii=False).encode()
            return self._json

    def _refuse(self, *args: object, **kwargs: object) -> Any:
        raise TypeError("a shared wire value is not changed: copy it (dict(value))")

    __setitem__ = __delitem__ = __ior__ = _refuse
    update = pop = popitem = setdefault = clear = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        # copy, deepcopy and pickle rebuild it from its items, never by setting them one by one
        return (type(self), (dict(self),))


class SharedMessage(SharedBlock):
    """A whole wire message ``{"role": ..., "content": [...]}`` that :class:`WireBlocks` hands
    to every request that sends its neutral message as it is (not merged with the next one,
    nor given a cache breakpoint: :func:`to_anthropic` copies it for those). Its content is a
    :class:`SharedContent` of :class:`SharedBlock` s: nothing in it can be changed, so its JSON
    is written once for every request, not put together again from its blocks each time."""

    __slots__ = ()


class SharedContent(list[dict[str, Any]]):
    """The content list of a :class:`SharedMessage`: a ``list`` to every reader, which cannot
    be changed (a caller copies it: ``list(content)``)."""

    __slots__ = ()

    def _refuse(self, *args: object, **kwargs: object) -> Any:
        raise TypeError("a shared wire value is not changed: copy it (list(content))")

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return (SharedContent, (list(self),))


class WireBlocks:
    """The wire messages of neutral messages already rendered, remembered by message (the same
    object): a caller that sends the same conversation again and again (the proxy sends a
    session's whole view on every request) renders each message once, not once per request.

    Each call gets the same :class:`SharedMessage` for a message (its blocks
    :class:`SharedBlock` s): none of it can be changed (:func:`to_anthropic` copies a message
    it merges with the next one, or sets a cache breakpoint in), and what the blocks hold is
    shared too: a tool call's ``input``, a result's content list. Only for a caller that never
    changes those (the proxy writes the messages to JSON as they are, and remembers each
    message's JSON). At most ``size`` messages are remembered (then it starts over); safe to
    share between threads.
    """

    def __init__(self, size: int = 4096, conversations: int = 64) -> None:
        self.size = size
        self._by_id: dict[int, tuple[Message, SharedMessage | None]] = {}
        self.conversations = conversations
        # The last rendering of each conversation, by its first visible message (see
        # :meth:`resume`).
        self._folds: dict[int, _Fold] = {}

    def message(self, message: Message) -> SharedMessage | None:
        """``message`` as one wire message (None when it has no block to send)."""
        entry = self._by_id.get(id(message))
        # The entry holds its message, so its id is not another message's while it is here.
        if entry is not None and entry[0] is message:
            return entry[1]
        blocks = _blocks(message)
        shared = None
        if blocks:
            content = SharedContent(SharedBlock(block) for block in blocks)
            shared = SharedMessage({"role": _wire_role(message), "content": content})
        if len(self._by_id) >= self.size:
            self._by_id.clear()
        self._by_id[id(message)] = (message, shared)
        return shared

    def resume(self, visible: Sequence[Message], inline_system: bool, clean: int) -> _Fold | None:
        """The last rendering of ``visible``'s conversation (by :func:`to_anthropic`), cut to
        the messages it shares with ``visible`` (the very objects) and to the first ``clean``
        (those before the first cache breakpoint): :meth:`_Fold.state` is the wire messages
        made by then. None when nothing is shared."""
        if not visible or clean <= 0:
            return None
        fold = self._folds.get(id(visible[0]))
        # The fold holds its messages, so the id is not another message's while it is here.
        if fold is None or fold.messages[0] is not visible[0]:
            return None
        if fold.inline_system != inline_system:
            return None
        done = min(common_prefix(fold.messages, visible), clean)
        if done <= 0:
            return None
        return _Fold(
            fold.messages[:done], inline_system, fold.wire, fold.lengths[:done], fold.lasts[:done]
        )

    def keep(self, fold: _Fold) -> None:
        """Remember ``fold`` as its conversation's last rendering."""
        if len(self._folds) >= self.conversations:
            self._folds.clear()
        self._folds[id(fold.messages[0])] = fold


@dataclass(frozen=True)
class _Fold:
    """One rendering of a conversation by :func:`to_anthropic`, as far as it went with no cache
    breakpoint: ``messages`` (the visible ones) and the wire messages made (``wire``); after
    each of ``messages``, how many wire messages there were and the last of them (None: none
    yet). A wire message before the last of its moment is never replaced later; the last may
    be (merged with the next message, or marked)."""

    messages: list[Message]
    inline_system: bool
    wire: list[dict[str, Any]]
    lengths: list[int]
    lasts: list[dict[str, Any] | None]

    def state(self) -> list[dict[str, Any]]:
        """The wire messages as they were after the last of :attr:`messages`."""
        last = self.lasts[-1]
        return [] if last is None else [*self.wire[: self.lengths[-1] - 1], last]


def _wire_role(message: Message) -> str:
    """The role of ``message``'s wire message: tool results travel in user messages."""
    return "assistant" if message.role == "assistant" else "user"


def _fresh_message(message: Message) -> dict[str, Any] | None:
    """``message`` as one wire message of its own (None when it has no block to send)."""
    blocks = _blocks(message)
    return {"role": _wire_role(message), "content": blocks} if blocks else None


def to_anthropic(
    messages: Iterable[Message],
    *,
    system: str | Sequence[str] | None = None,
    system_breakpoints: Iterable[int] = (),
    message_breakpoints: Iterable[int] = (),
    inline_system: bool = False,
    remembered: WireBlocks | None = None,
) -> AnthropicRequest:
    """Render neutral messages as a messages-API request.

    ``system`` is one string or several blocks; system messages found in ``messages`` are added
    after them, or, with ``inline_system``, stay where they are as ``"system"`` messages (the
    form of Anthropic's mid-conversation system beta, which Claude Code sends: moving them into
    the system prompt would change the cached prefix each time one is added).
    ``system_breakpoints`` are indexes into the final system blocks and
    ``message_breakpoints`` indexes into ``messages`` (the neutral list, agent-visible ones only)
    whose last wire block gets ``cache_control``. ``remembered``: render each message's blocks
    once, across calls (see :class:`WireBlocks`).
    """
    # Read in C: a view is long, its messages mostly visible and seldom of the system.
    messages = messages if isinstance(messages, list | tuple) else list(messages)
    visible = list(compress(messages, map(_AGENT_VISIBLE, messages)))
    wire_of = _fresh_message if remembered is None else remembered.message
    system_texts = [system] if isinstance(system, str) else list(system or ())
    if not inline_system and "system" in map(_ROLE, visible):
        system_texts += [m.text for m in visible if m.role == "system"]
    request = AnthropicRequest()
    # Breakpoint indexes refer to the caller's blocks; empty blocks are not sent, so a mark on
    # one moves to the nearest earlier block that is (it caches the same prefix).
    wire_index: list[int] = []
    for text in system_texts:
        if text:
            request.system.append({"type": "text", "text": text})
        wire_index.append(len(request.system) - 1)
    for index in system_breakpoints:
        if 0 <= index < len(wire_index) and wire_index[index] >= 0:
            request.system[wire_index[index]]["cache_control"] = dict(CACHE_CONTROL)

    marked = set(message_breakpoints)
    # Up to the first breakpoint the rendering is the same as the conversation's last one, as
    # far as that went through the same messages: taken up from there (``WireBlocks.resume``).
    clean = min((i for i in marked if 0 <= i < len(visible)), default=len(visible))
    start = 0
    lengths: list[int] = []
    lasts: list[dict[str, Any] | None] = []
    if remembered is not None:
        resumed = remembered.resume(visible, inline_system, clean)
        if resumed is not None:
            start, lengths, lasts = len(resumed.messages), resumed.lengths, resumed.lasts
            request.messages = resumed.state()
    for index in range(start, len(visible)):
        message = visible[index]
        if message.role == "system" and inline_system:
            request.messages.append(_system_message(message.text, shared=remembered is not None))
        else:
            wire = None if message.role == "system" else wire_of(message)
            if wire is not None:
                previous = request.messages[-1] if request.messages else None
                if previous is not None and previous["role"] == wire["role"]:
                    request.messages[-1] = _merged(previous, wire["content"])
                else:
                    request.messages.append(wire)
        if index < clean:
            lengths.append(len(request.messages))
            lasts.append(request.messages[-1] if request.messages else None)
        if index in marked and request.messages:
            request.messages[-1] = _marked(request.messages[-1])
    if remembered is not None and clean > 0:
        made = request.messages[: lengths[-1]]  # a copy: the caller has the list
        remembered.keep(_Fold(visible[:clean], inline_system, made, lengths, lasts))
    return request


def _system_message(text: str, *, shared: bool) -> dict[str, Any]:
    """A system message kept in place (Anthropic's mid-conversation system beta); ``shared``:
    as a :class:`SharedMessage`, which no one changes (a breakpoint marks a copy)."""
    if shared:
        block = SharedBlock({"type": "text", "text": text})
        return SharedMessage({"role": "system", "content": SharedContent([block])})
    return {"role": "system", "content": [{"type": "text", "text": text}]}


_AGENT_VISIBLE = operator.attrgetter("meta.agent_visible")
_ROLE = operator.attrgetter("role")


def _marked(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` with a cache breakpoint on its last block that can carry one (thinking
    blocks cannot), as a copy: the message, its content and the block may be shared
    (:class:`SharedMessage`), sent unmarked by other requests."""
    content = list(message["content"])
    for index in range(len(content) - 1, -1, -1):
        block = content[index]
        if block["type"] not in ("thinking", "redacted_thinking"):
            content[index] = {**block, "cache_control": dict(CACHE_CONTROL)}
            break
    return {**message, "content": content}


def _merged(previous: dict[str, Any], blocks: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """``previous`` with ``blocks`` added, as a new message (``previous`` may be shared)."""
    content = previous["content"]
    if any(b["type"] == "tool_result" for b in blocks):
        # Anthropic wants tool results before any text in a user turn.
        results = [b for b in content if b["type"] == "tool_result"]
        others = [b for b in content if b["type"] != "tool_result"]
        merged = [*results, *blocks, *others]
    else:
        merged = [*content, *blocks]
    if type(previous) is SharedMessage and all(type(b) is SharedBlock for b in blocks):
        # Shared blocks stay shared: the merged message's JSON is written once too.
        return SharedMessage({**previous, "content": SharedContent(merged)})
    return {**previous, "content": merged}


def _blocks(message: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        block = _block(part)
        if block is not None:
            blocks.append(block)
    return blocks


def _block(part: Part) -> dict[str, Any] | None:
    if isinstance(part, TextPart | SummaryPart):
        # The API rejects text blocks that are empty or whitespace only.
        return {"type": "text", "text": part.text} if part.text.strip() else None
    if isinstance(part, ImagePart):
        return _image_block(part)
    if isinstance(part, ThinkingPart):
        if part.redacted_data is not None:
            return {"type": "redacted_thinking", "data": part.redacted_data}
        block: dict[str, Any] = {"type": "thinking", "thinking": part.text}
        if part.signature is not None:
            block["signature"] = part.signature
        return block
    if isinstance(part, ToolCallPart):
        try:
            parsed = json.loads(part.arguments)
        except (ValueError, RecursionError):  # not JSON, or nested too deeply to read
            parsed = None
        # tool_use.input must be an object; invalid JSON travels verbatim under one key.
        tool_input = parsed if isinstance(parsed, dict) else {RAW_ARGUMENTS_KEY: part.arguments}
        return {"type": "tool_use", "id": part.call_id, "name": part.name, "input": tool_input}
    if isinstance(part, ToolResultPart):
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": part.call_id}
        if part.images:
            content: list[dict[str, Any]] = []
            if part.content:
                content.append({"type": "text", "text": part.content})
            content.extend(_image_block(i) for i in part.images)
            result["content"] = content
        else:
            result["content"] = part.content
        if part.is_error:
            result["is_error"] = True
        return result
    raise TypeError(f"not a message part: {part!r}")


def _image_block(part: ImagePart) -> dict[str, Any]:
    if part.is_inline and ";base64," in part.url:
        header, data = part.url.split(";base64,", 1)
        media_type = part.media_type or header[5:]
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": data},
        }
    return {"type": "image", "source": {"type": "url", "url": part.url}}


def tools_to_anthropic(
    tools: Iterable[ToolSpec], *, cache_last: bool = False
) -> list[dict[str, Any]]:
    """The ``tools`` list; ``cache_last`` puts a cache breakpoint on the last tool."""
    out = [t.to_anthropic() for t in tools]
    if cache_last and out:
        out[-1]["cache_control"] = dict(CACHE_CONTROL)
    return out


# --------------------------------------------------------------------------------------------------
# wire -> neutral
# --------------------------------------------------------------------------------------------------


def from_anthropic(
    messages: Iterable[Mapping[str, Any]],
    *,
    system: str | Sequence[Mapping[str, Any]] | None = None,
    path: str | None = None,
) -> list[Message]:
    """Read messages-API dicts (and the optional ``system`` parameter) into neutral messages."""
    out: list[Message] = []
    if isinstance(system, str) and system:
        out.append(Message.system(system))
    elif system:
        text = "\n\n".join(as_text(b.get("text")) for b in system if isinstance(b, Mapping))
        if text:
            out.append(Message.system(text))
    call_names: dict[str, str] = {}
    for index, raw in enumerate(messages):
        out.extend(from_anthropic_message(raw, call_names=call_names, path=path, index=index))
    return out


def from_anthropic_message(
    raw: Mapping[str, Any],
    *,
    call_names: dict[str, str] | None = None,
    path: str | None = None,
    index: int | None = None,
) -> list[Message]:
    """Read one messages-API message; a user turn with tool results may yield two messages.
    A :class:`MessageError` (a :class:`FormatError` carrying ``index``) when it is not one."""
    if not isinstance(raw, Mapping):
        raise MessageError(f"expected an object, got {type(raw).__name__}", index=index, path=path)
    names = call_names if call_names is not None else {}
    role = string(raw, "role")
    content = raw.get("content")
    # Content is text or a list of blocks; anything else holds nothing readable.
    blocks: list[Any] = [{"type": "text", "text": content}] if isinstance(content, str) else []
    if isinstance(content, list):
        blocks = content
    if role == "assistant":
        parts = [p for p in (_assistant_part(b) for b in blocks) if p is not None]
        for part in parts:
            if isinstance(part, ToolCallPart):
                names[part.call_id] = part.name
        invalid = any(isinstance(p, ToolCallPart) and not p.arguments_valid for p in parts)
        meta = Meta(flags=("invalid_arguments",) if invalid else ())
        return [Message("assistant", tuple(parts), meta=meta)]
    if role != "user":
        raise MessageError(f"unknown role {shown(raw.get('role'))}", index=index, path=path)
    results: list[Part] = []
    others: list[Part] = []
    for block in blocks:
        if isinstance(block, Mapping) and block.get("type") == "tool_result":
            results.append(_tool_result(block, names))
        else:
            user_part = _user_part(block)
            if user_part is not None:
                others.append(user_part)
    out: list[Message] = []
    if results:
        out.append(Message("tool", tuple(results), meta=Meta(kind="tool_result")))
    if others or not results:
        out.append(Message("user", tuple(others)))
    return out


def _assistant_part(block: Any) -> Part | None:
    if not isinstance(block, Mapping):
        return None
    kind = block.get("type")
    if kind == "text":
        return TextPart(as_text(block.get("text")))
    if kind == "thinking":
        return ThinkingPart(as_text(block.get("thinking")), string(block, "signature"))
    if kind == "redacted_thinking":
        return ThinkingPart("", None, as_text(block.get("data")))
    if kind in ("tool_use", "server_tool_use"):
        tool_input = block.get("input", {})
        if isinstance(tool_input, Mapping) and set(tool_input) == {RAW_ARGUMENTS_KEY}:
            arguments = as_text(tool_input[RAW_ARGUMENTS_KEY])
        else:
            arguments = as_text(tool_input)
        return ToolCallPart(as_id(block.get("id")) or "", as_text(block.get("name")), arguments)
    return None


def _user_part(block: Any) -> Part | None:
    if isinstance(block, str):
        return TextPart(block)
    if not isinstance(block, Mapping):
        return None
    kind = block.get("type")
    if kind == "text":
        return TextPart(as_text(block.get("text")))
    if kind == "image":
        return _image_part(block)
    if kind == "document":
        return TextPart(f"[{as_text(block.get('title')) or 'document'}]")
    return None


def _image_part(block: Mapping[str, Any]) -> ImagePart:
    source = child(block, "source")
    if source.get("type") == "base64":
        media_type = string(source, "media_type") or "application/octet-stream"
        return ImagePart(f"data:{media_type};base64,{as_text(source.get('data'))}", media_type)
    return ImagePart(as_text(source.get("url")))


def _tool_result(block: Mapping[str, Any], names: Mapping[str, str]) -> ToolResultPart:
    call_id = as_id(block.get("tool_use_id")) or ""
    content = block.get("content")
    texts: list[str] = []
    images: list[ImagePart] = []
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        for item in content:
            if not isinstance(item, Mapping):
                continue
            if item.get("type") == "text":
                texts.append(as_text(item.get("text")))
            elif item.get("type") == "image":
                images.append(_image_part(item))
    return ToolResultPart(
        call_id,
        names.get(call_id, ""),
        "\n".join(texts),
        bool(block.get("is_error", False)),
        tuple(images),
    )


# --------------------------------------------------------------------------------------------------
# responses
# --------------------------------------------------------------------------------------------------


def usage_from_anthropic(usage: Any) -> Usage | None:
    """Neutral usage from a messages-API ``usage`` object; ``None`` when there is none or it is
    not an object. A count that is not a whole number of tokens reads as 0.

    Anthropic's ``input_tokens`` excludes cached tokens; the neutral ``input_tokens`` is the whole
    prompt, so cache writes and reads are added back in.
    """
    if not usage or not isinstance(usage, Mapping):
        return None
    uncached = token_count(usage.get("input_tokens")) or 0
    cache_write = token_count(usage.get("cache_creation_input_tokens")) or 0
    cache_read = token_count(usage.get("cache_read_input_tokens")) or 0
    return Usage(
        input_tokens=uncached + cache_write + cache_read,
        output_tokens=token_count(usage.get("output_tokens")) or 0,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
    )


def parse_anthropic_response(
    response: Mapping[str, Any],
) -> tuple[Message, Usage | None, str | None]:
    """The assistant message, usage and stop reason of a messages-API response dict."""
    [message] = from_anthropic_message({"role": "assistant", "content": response.get("content")})
    usage = usage_from_anthropic(response.get("usage"))
    provider = {k: response[k] for k in ("id", "model") if response.get(k) is not None}
    return message.with_meta(usage=usage, provider=provider), usage, response.get("stop_reason")
