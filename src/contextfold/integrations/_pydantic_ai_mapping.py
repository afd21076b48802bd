"""pydantic-ai's ``ModelMessage`` lists to contextfold messages and back, losslessly.

What a model reads (prompts, text, reasoning, tool calls and returns, images) becomes neutral
parts the engine can cut, offload and count. Everything else a pydantic-ai part or message holds
(timestamps, run ids, provider details, usage, tool kinds, parts contextfold has no type for)
rides along in ``meta.provider["pydantic_ai"]`` as pydantic-ai's own JSON, so mapping back
rebuilds the very objects: ``from_messages(to_messages(h)) == h``. Where the engine changed a
part's content (a cut output, a masked one), the rebuilt part carries the new content and keeps
the rest.

One ``ModelRequest`` becomes one neutral message per part it holds (a neutral tool message holds
one result), all tagged with one group id so that mapping back regroups them; a ``ModelResponse``
becomes one assistant message.
"""

from __future__ import annotations

import base64
import bisect
import itertools
import json
import operator
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pydantic_core
from pydantic_ai import messages as pa

from contextfold.messages import (
    ImagePart,
    Message,
    MessageKind,
    Meta,
    Part,
    Role,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from contextfold.sequences import common_prefix, same_objects

__all__ = ["SIDECAR_KEY", "HistoryMapping", "from_messages", "to_messages"]

SIDECAR_KEY = "pydantic_ai"
"""The ``meta.provider`` key holding what the neutral parts leave out."""

_MAPPED_REQUEST_PARTS = (
    pa.SystemPromptPart,
    pa.UserPromptPart,
    pa.ToolReturnPart,
    pa.RetryFeedbackPart,
)


def _dump(message: pa.ModelMessage) -> dict[str, Any]:
    """pydantic-ai's JSON form of a message (JSON mode: bytes as base64, times as strings)."""
    # JSON mode in Python: what dump_json then json.loads gives, without writing and parsing
    # the text (several times cheaper on a long tool output).
    dumped: dict[str, Any] = pa.ModelMessagesTypeAdapter.dump_python([message], mode="json")[0]
    return dumped


def _load(data: dict[str, Any]) -> pa.ModelMessage:
    """The message ``data`` (pydantic-ai's JSON form, as :func:`_dump` gives) describes."""
    # Validated from JSON text, as pydantic-ai loads a stored history (bytes from base64, times
    # from strings). The text comes from pydantic-core's encoder, a third of the cost of
    # ``json.dumps`` and read back the same (NaN and infinities included: it writes them as
    # ``json.dumps`` does); what it refuses (a lone surrogate) goes through ``json.dumps``.
    try:
        text: str | bytes = pydantic_core.to_json([data])
    except pydantic_core.PydanticSerializationError:
        text = json.dumps([data])
    return pa.ModelMessagesTypeAdapter.validate_json(text)[0]


# --------------------------------------------------------------------------------------------------
# pydantic-ai -> contextfold
# --------------------------------------------------------------------------------------------------


def _user_content_parts(content: str | Sequence[pa.UserContent]) -> tuple[list[Part], bool]:
    """Neutral parts of a user prompt, and whether they say all of it (else the sidecar keeps
    the original content: audio, documents, cache points have no neutral type)."""
    if isinstance(content, str):
        return [TextPart(content)], True
    parts: list[Part] = []
    complete = True
    for item in content:
        if isinstance(item, str):
            parts.append(TextPart(item))
        elif isinstance(item, pa.ImageUrl):
            parts.append(ImagePart(item.url, media_type=item.media_type))
        elif isinstance(item, pa.BinaryContent) and item.is_image:
            encoded = base64.b64encode(item.data).decode()
            parts.append(ImagePart(f"data:{item.media_type};base64,{encoded}", item.media_type))
            complete = False  # identifier and vendor metadata live only in the original
        else:
            parts.append(TextPart(f"[{type(item).__name__}]"))
            complete = False
    return parts, complete


def _request_messages(request: pa.ModelRequest, dumped: dict[str, Any]) -> list[Message]:
    group = uuid.uuid4().hex
    layout: list[int | dict[str, Any]] = []
    mapped: list[tuple[Role, MessageKind, tuple[Part, ...], dict[str, Any]]] = []
    for part, part_json in zip(request.parts, dumped["parts"], strict=True):
        if not isinstance(part, _MAPPED_REQUEST_PARTS):
            layout.append({"opaque": part_json})
            continue
        fields = dict(part_json)
        role: Role = "user"
        kind: MessageKind = "message"
        parts: tuple[Part, ...]
        if isinstance(part, pa.SystemPromptPart):
            fields.pop("content")
            role, parts = "system", (TextPart(part.content),)
        elif isinstance(part, pa.UserPromptPart):
            content, complete = _user_content_parts(part.content)
            parts = tuple(content)
            fields["form"] = "str" if isinstance(part.content, str) else "list"
            if complete:
                fields.pop("content")
        elif isinstance(part, pa.ToolReturnPart):
            # What the model reads: pydantic-ai wraps a failure's text, renders non-text as JSON.
            text = part.model_response_str()
            if isinstance(part.content, str) and text == part.content:
                fields.pop("content")
            result = ToolResultPart(
                part.tool_call_id, part.tool_name, text, is_error=part.outcome != "success"
            )
            role, kind, parts = "tool", "tool_result", (result,)
        else:  # RetryFeedbackPart: the model reads pydantic-ai's rendering of it
            parts = (TextPart(part.model_response()),)
        layout.append(len(mapped))
        mapped.append((role, kind, parts, fields))
    if not mapped:  # nothing a model reads: keep the request whole, out of every view
        whole = {SIDECAR_KEY: {"group": group, "whole": dumped}}
        return [Message("user", (), meta=Meta(agent_visible=False, provider=whole))]
    # Each message made once, with its meta (a copy with other meta cost a third of a
    # conversion); the first one's sidecar also holds the request's own fields and layout.
    out = []
    for k, (role, kind, parts, fields) in enumerate(mapped):
        sidecar: dict[str, Any] = {"group": group, "k": k, "part": fields}
        if k == 0:
            sidecar["request"] = {key: v for key, v in dumped.items() if key != "parts"}
            sidecar["layout"] = layout
        out.append(Message(role, parts, meta=Meta(kind=kind, provider={SIDECAR_KEY: sidecar})))
    return out


def _response_message(response: pa.ModelResponse, dumped: dict[str, Any]) -> Message:
    layout: list[int | dict[str, Any]] = []
    fields_by_part: list[dict[str, Any]] = []
    parts: list[Part] = []
    for part, part_json in zip(response.parts, dumped["parts"], strict=True):
        fields = dict(part_json)
        if isinstance(part, pa.TextPart):
            fields.pop("content")
            parts.append(TextPart(part.content))
        elif isinstance(part, pa.ThinkingPart):
            fields.pop("content")
            parts.append(ThinkingPart(part.content, signature=part.signature))
        elif type(part) is pa.ToolCallPart:
            args = part.args
            fields.pop("args")
            fields["form"] = "dict" if isinstance(args, dict) else "str" if args else "none"
            text = json.dumps(args, ensure_ascii=False) if isinstance(args, dict) else args or ""
            parts.append(ToolCallPart(part.tool_call_id, part.tool_name, text or "{}"))
            if args == "":
                fields["form"] = "empty"
        else:
            layout.append({"opaque": part_json})
            continue
        layout.append(len(parts) - 1)
        fields_by_part.append(fields)
    usage = response.usage
    sidecar = {
        "response": {k: v for k, v in dumped.items() if k != "parts"},
        "parts": fields_by_part,
        "layout": layout,
    }
    meta = Meta(
        usage=Usage(
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
        )
        if (usage.input_tokens or usage.output_tokens) and _measured(response)
        else None,
        provider={SIDECAR_KEY: sidecar},
    )
    return Message("assistant", tuple(parts), meta=meta)


_ESTIMATING_MODELS = (None, "function", "test")
"""``provider_name`` of pydantic-ai's own models (FunctionModel, TestModel), whose usage is a
word-count guess: about half a real tokenizer's count. Anchoring the engine's estimates on it
would send requests past the window, so only a real provider's report anchors them."""


def _measured(response: pa.ModelResponse) -> bool:
    return response.provider_name not in _ESTIMATING_MODELS


def to_messages(history: Sequence[pa.ModelMessage]) -> list[Message]:
    """contextfold messages saying what ``history`` says, with the rest kept for the way back."""
    return [neutral for message in history for neutral in _message_to_messages(message)]


def _message_to_messages(message: pa.ModelMessage) -> list[Message]:
    dumped = _dump(message)
    if isinstance(message, pa.ModelRequest):
        return _request_messages(message, dumped)
    return [_response_message(message, dumped)]


# --------------------------------------------------------------------------------------------------
# contextfold -> pydantic-ai
# --------------------------------------------------------------------------------------------------


def _text(message: Message) -> str:
    return "\n".join(
        p.text for p in message.parts if isinstance(p, TextPart | SummaryPart) and p.text
    )


def _user_content(message: Message, form: str) -> str | list[Any]:
    if form == "str" and all(isinstance(p, TextPart | SummaryPart) for p in message.parts):
        return _text(message)
    items: list[Any] = []
    for part in message.parts:
        if isinstance(part, TextPart | SummaryPart):
            items.append(part.text)
        elif isinstance(part, ImagePart):
            items.append({"url": part.url, "kind": "image-url", "media_type": part.media_type})
    return items


def _request_part_json(message: Message, fields: dict[str, Any] | None) -> list[dict[str, Any]]:
    """pydantic-ai JSON parts for one neutral message: its sidecar fields, the content from the
    view (which the engine may have changed)."""
    fields = dict(fields or {})
    if message.role == "system":
        return [{"part_kind": "system-prompt", **fields, "content": _text(message)}]
    if message.role == "tool":
        out = []
        for result in message.tool_results:
            part = {
                "part_kind": "tool-return",
                "tool_name": result.name,
                "tool_call_id": result.call_id,
                "outcome": "failed" if result.is_error else "success",
                **fields,
            }
            kept = "content" in fields  # a non-text original (None included) is in the sidecar
            if not kept or result.ref is not None or result.content != _shown(fields):
                part["content"] = result.content
            out.append(part)
            fields = {}  # a second result in one message (engine-made) has no sidecar
        return out
    if fields.get("part_kind") == "retry-feedback":
        return [fields]
    if fields.get("part_kind") == "user-prompt" and "content" in fields:
        return [{k: v for k, v in fields.items() if k != "form"}]
    form = str(fields.pop("form", "str"))
    part = {"part_kind": "user-prompt", **fields, "content": _user_content(message, form)}
    return [part]


def _shown(fields: dict[str, Any]) -> str:
    """What a non-text tool return looked like to the engine (as ``to_messages`` made it)."""
    part = _load(
        {"kind": "request", "parts": [{"part_kind": "tool-return", "tool_name": "", **fields}]}
    ).parts[0]
    assert isinstance(part, pa.ToolReturnPart)
    return part.model_response_str()


def _request(group: list[Message]) -> pa.ModelMessage:
    sidecars = [m.meta.provider.get(SIDECAR_KEY, {}) for m in group]
    first: dict[str, Any] = next((s for s in sidecars if "whole" in s or "layout" in s), {})
    if "whole" in first:
        return _load(first["whole"])
    by_k = {m.meta.provider.get(SIDECAR_KEY, {}).get("k"): m for m in group}
    parts: list[dict[str, Any]] = []
    used: set[int] = set()
    for entry in first.get("layout", ()):
        if isinstance(entry, dict):
            parts.append(entry["opaque"])
        elif entry in by_k:
            message = by_k[entry]
            parts.extend(_request_part_json(message, message.meta.provider[SIDECAR_KEY]["part"]))
            used.add(id(message))
    for message in group:  # what the layout does not name: engine-made, or its head was dropped
        if id(message) not in used:
            sidecar = message.meta.provider.get(SIDECAR_KEY, {})
            parts.extend(_request_part_json(message, sidecar.get("part")))
    return _load({**first.get("request", {"kind": "request"}), "parts": parts})


def _response(message: Message) -> pa.ModelMessage:
    sidecar = message.meta.provider.get(SIDECAR_KEY, {})
    fields_by_part: list[dict[str, Any]] = list(sidecar.get("parts", ()))
    neutral = list(message.parts)
    layout: list[Any] = list(sidecar.get("layout", ()))
    if len(fields_by_part) != len(neutral) or not all(
        _matches(p, f) for p, f in zip(neutral, fields_by_part, strict=True)
    ):
        # The engine rewrote this message's parts: rebuild from them alone.
        fields_by_part = [{} for _ in neutral]
        layout = list(range(len(neutral)))
    parts: list[dict[str, Any]] = []
    for entry in layout:
        if isinstance(entry, dict):
            parts.append(entry["opaque"])
            continue
        part = _response_part_json(neutral[entry], dict(fields_by_part[entry]))
        if part is not None:
            parts.append(part)
    return _load({**sidecar.get("response", {"kind": "response"}), "parts": parts})


def _matches(part: Part, fields: dict[str, Any]) -> bool:
    kind = fields.get("part_kind")
    return (
        (isinstance(part, TextPart) and kind == "text")
        or (isinstance(part, ThinkingPart) and kind == "thinking")
        or (isinstance(part, ToolCallPart) and kind == "tool-call")
    )


def _response_part_json(part: Part, fields: dict[str, Any]) -> dict[str, Any] | None:
    if isinstance(part, TextPart | SummaryPart):
        return {"part_kind": "text", **fields, "content": part.text}
    if isinstance(part, ThinkingPart):
        return {
            "part_kind": "thinking",
            "signature": part.signature,
            **fields,
            "content": part.text,
        }
    if isinstance(part, ToolCallPart):
        form = fields.pop("form", "str")
        args: object
        if form == "dict" and part.arguments_valid:
            args = json.loads(part.arguments)
        elif form == "none":
            args = None
        elif form == "empty":
            args = ""
        else:
            args = part.arguments
        return {
            "part_kind": "tool-call",
            "tool_name": part.name,
            "tool_call_id": part.call_id,
            **fields,
            "args": args,
        }
    return None  # an image in an assistant message: pydantic-ai responses carry files otherwise


def from_messages(messages: Sequence[Message]) -> list[pa.ModelMessage]:
    """pydantic-ai messages for contextfold ones (the engine's view, or ``to_messages``' output).

    Consecutive user, tool and system messages of one original request regroup into it;
    messages the engine made (summaries, notes, synthetic results) join the request they sit in.
    """
    return [_built(group) for group in _grouped(messages)]


def _built(group: tuple[Message, ...]) -> pa.ModelMessage:
    """The pydantic-ai message of one group :func:`_grouped` made."""
    if group[0].role == "assistant":
        return _response(group[0])
    return _request(list(group))


def _grouped(messages: Sequence[Message]) -> list[tuple[Message, ...]]:
    """``messages`` cut into what becomes one pydantic-ai message each: an assistant message
    alone (a response), else a run of the messages of one request."""
    out: list[tuple[Message, ...]] = []
    group: list[Message] = []
    group_id: str | None = None

    def flush() -> None:
        nonlocal group, group_id
        if group:
            out.append(tuple(group))
        group, group_id = [], None

    for message in messages:
        if message.role == "assistant":
            flush()
            out.append((message,))
            continue
        sidecar = message.meta.provider.get(SIDECAR_KEY)
        this_id = sidecar.get("group") if isinstance(sidecar, dict) else None
        if this_id is not None and group and this_id != group_id:
            flush()
        if this_id is not None and (group_id is None or not group):
            group_id = this_id
        group.append(message)
    flush()
    return out


class HistoryMapping:
    """:func:`to_messages` and :func:`from_messages` for one run's history, call after call,
    each converting only what is new (what both cost went with the whole history).

    pydantic-ai hands the same message objects on every request, but changes some in place
    (the newest request gets its timestamp, instructions and run metadata; a tail request may
    get parts appended): a message converts again whenever one of its own fields or its parts'
    fields holds another value than when it was converted. The engine keeps its view's messages
    between calls, so a run of view messages is rebuilt once; except the view's last one, which
    is rebuilt on every call (pydantic-ai records state on the request it sends last).

    Both directions mostly see the last call's objects again, in the same places, and more
    after them: what a call shares with the one before, from the start, is told in C
    (:func:`~contextfold.sequences.common_prefix`, and a list compare of the
    snapshots), and only what follows is looked up among the last call's conversions, by
    identity. A memo lookup per message cost a third of mapping an unchanged history.
    """

    def __init__(self) -> None:
        self._history = _Converted([], [], [], [])
        self._view = _Rebuilt([], [], [], [])

    def to_messages(self, history: Sequence[pa.ModelMessage]) -> list[Message]:
        """:func:`to_messages` of ``history``."""
        history = list(history)
        snapshots = [_snapshot(message) for message in history]
        last = self._history
        same = common_prefix(last.history, history)
        if snapshots[:same] != last.snapshots[:same]:  # changed in place: from the first change
            same = list(map(operator.eq, snapshots, last.snapshots[:same])).index(False)
        ends = last.ends[:same]
        out = last.messages[: ends[-1] if ends else 0]
        # Past the last history's end come new messages: looked up only when it ends elsewhere.
        earlier: dict[int, tuple[pa.ModelMessage, tuple[object, ...], list[Message]]] = {}
        if same < len(last.history):
            earlier = last.by_id()
        for message, snapshot in zip(history[same:], snapshots[same:], strict=True):
            hit = earlier.get(id(message))
            if hit is not None and hit[0] is message and hit[1] == snapshot:
                out.extend(hit[2])
            else:
                out.extend(_message_to_messages(message))
            ends.append(len(out))
        self._history = _Converted(history, snapshots, ends, out)
        return list(out)  # the caller's to keep: the memo's list is read again next call

    def from_messages(self, messages: Sequence[Message]) -> list[pa.ModelMessage]:
        """:func:`from_messages` of ``messages``; a message rebuilt at an earlier call may be
        given again (the same object)."""
        view = list(messages)
        last = self._view
        same = common_prefix(last.view, view)
        # The groups before the one holding the last shared message are whole (a group ends
        # where the next begins, and those began among the shared messages); grouping starts
        # again where that one starts, as it started there before.
        kept = bisect.bisect_right(last.starts, same - 1) - 1 if same else 0
        start = last.starts[kept] if same else 0
        regrouped = _grouped(view[start:])
        groups = last.groups[:kept] + regrouped
        starts = last.starts[:kept]
        if regrouped:
            starts += itertools.accumulate((len(g) for g in regrouped[:-1]), initial=start)
        built = last.built[:kept]
        earlier: dict[tuple[int, ...], tuple[tuple[Message, ...], pa.ModelMessage]] = {}
        if same < len(last.view):
            earlier = last.by_ids()
        for group in groups[kept:-1]:
            hit = earlier.get(tuple(map(id, group)))
            built.append(
                hit[1] if hit is not None and same_objects(hit[0], group) else _built(group)
            )
        # pydantic-ai may change what is sent last: built anew each call, and never remembered.
        sent = [*built, _built(groups[-1])] if groups else []
        self._view = _Rebuilt(view, groups, starts, built)
        return sent


@dataclass(frozen=True, slots=True)
class _Converted:
    """A history as :meth:`HistoryMapping.to_messages` was last given it: each message's
    snapshot, where its neutral messages end in ``messages``, and those messages."""

    history: list[pa.ModelMessage]
    snapshots: list[tuple[object, ...]]
    ends: list[int]
    messages: list[Message]

    def by_id(self) -> dict[int, tuple[pa.ModelMessage, tuple[object, ...], list[Message]]]:
        """Each message's snapshot and conversion, by the message's id (held here: the ids
        cannot go to other objects meanwhile)."""
        starts = [0, *self.ends]
        return {
            id(message): (message, snapshot, self.messages[starts[i] : self.ends[i]])
            for i, (message, snapshot) in enumerate(zip(self.history, self.snapshots, strict=True))
        }


@dataclass(frozen=True, slots=True)
class _Rebuilt:
    """A view as :meth:`HistoryMapping.from_messages` was last given it: its groups, where each
    starts in ``view``, and the pydantic-ai message built from each but the last."""

    view: list[Message]
    groups: list[tuple[Message, ...]]
    starts: list[int]
    built: list[pa.ModelMessage]

    def by_ids(self) -> dict[tuple[int, ...], tuple[tuple[Message, ...], pa.ModelMessage]]:
        """Each group but the last with what was built from it, by the ids of its messages."""
        return {
            tuple(map(id, group)): (group, built)
            for group, built in zip(self.groups, self.built, strict=False)
        }


def _snapshot(message: pa.ModelMessage) -> tuple[object, ...]:
    """The values of the message's fields and of its parts' fields: what its conversion was
    made from (a field set anew to another value, in place, is a change)."""
    values: list[object] = [*vars(message).values()]
    for part in message.parts:
        values.append(type(part))
        values.extend(vars(part).values())
    return tuple(values)
