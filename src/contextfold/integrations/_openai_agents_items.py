"""The Agents SDK's input items (Responses API dicts) as contextfold messages, and back.

An SDK history is a flat list of items: user and assistant messages, one ``function_call`` item
per call, one ``function_call_output`` per result, ``reasoning`` items, and the hosted tools'
own items. contextfold's messages group an assistant's reply (reasoning, text, calls) into one
message and give each tool result its own, so consecutive assistant-side items become one
assistant message.

Each message keeps the items it came from in ``meta.provider["openai_agents_items"]``, and
:func:`items_from_messages` gives those exact items back as long as the message still says what
they say (same :func:`~contextfold.hosts.sync.message_digest`). A message the engine
changed (a cut output, a masked result, a summary, a note) is rebuilt from its parts instead.
"""

from __future__ import annotations

import copy
import json
import threading
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from contextfold.hosts.digests import message_digest
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
)
from contextfold.sequences import common_prefix, same_objects

__all__ = [
    "RAW_ITEMS_KEY",
    "Item",
    "ItemsToMessages",
    "MessagesToItems",
    "RawItems",
    "items_from_messages",
    "json_copy",
    "messages_from_items",
    "plain_item",
]

Item = dict[str, Any]
"""One SDK input item as a JSON dict (``TResponseInputItem`` is a union of TypedDicts)."""

RAW_ITEMS_KEY = "openai_agents_items"
"""Where a message keeps the SDK items it was made from (in ``meta.provider``)."""

_ASSISTANT_SIDE = frozenset({"function_call", "reasoning"})
"""Item types that belong to the model's reply (grouped into one assistant message)."""


def plain_item(item: object) -> Item:
    """An item as a JSON dict: the SDK hands dicts, but a caller may pass its pydantic models."""
    if isinstance(item, dict):
        return cast(Item, item)
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        return cast(Item, dump(exclude_unset=True, mode="json"))
    raise TypeError(f"not an Agents SDK input item: {type(item).__name__}")


def _role(item: Item) -> str | None:
    role = item.get("role")
    return role if isinstance(role, str) else None


def _is_assistant_side(item: Item) -> bool:
    kind = item.get("type")
    if _role(item) == "assistant":
        return True
    if kind in _ASSISTANT_SIDE:
        return True
    # Hosted tool calls and their outputs (web search, computer, MCP, shell...): opaque to the
    # engine, kept with the reply they belong to.
    return _role(item) is None and kind != "function_call_output"


def _content_parts(content: object) -> list[Part]:
    """A message's ``content``: a string or a list of input/output content parts."""
    if isinstance(content, str):
        return [TextPart(content)]
    parts: list[Part] = []
    if not isinstance(content, list):
        return parts
    for entry in content:
        if not isinstance(entry, dict):
            continue
        kind = entry.get("type")
        if kind in ("input_text", "output_text", "text"):
            parts.append(TextPart(str(entry.get("text", ""))))
        elif kind == "refusal":
            parts.append(TextPart(str(entry.get("refusal", ""))))
        elif kind == "input_image" and isinstance(entry.get("image_url"), str):
            detail = entry.get("detail")
            parts.append(ImagePart(entry["image_url"], detail=detail if detail else None))
        else:
            # A file, an image by file id, audio: the model sees it, the engine counts a stand-in.
            parts.append(TextPart(f"[{kind}] {json.dumps(entry, sort_keys=True)}"))
    return parts


def _output_content(output: object) -> tuple[str, tuple[ImagePart, ...]]:
    """A ``function_call_output``'s output as result text and images."""
    if isinstance(output, str):
        return output, ()
    texts: list[str] = []
    images: list[ImagePart] = []
    for part in _content_parts(output):
        if isinstance(part, ImagePart):
            images.append(part)
        elif isinstance(part, TextPart):
            texts.append(part.text)
    return "\n".join(texts), tuple(images)


def _reply_parts(item: Item) -> list[Part]:
    kind = item.get("type")
    if kind == "function_call":
        return [
            ToolCallPart(str(item.get("call_id", "")), str(item["name"]), str(item["arguments"]))
        ]
    if kind == "reasoning":
        texts = [str(s.get("text", "")) for s in item.get("summary") or () if isinstance(s, dict)]
        texts += [str(c.get("text", "")) for c in item.get("content") or () if isinstance(c, dict)]
        encrypted = item.get("encrypted_content")
        return [ThinkingPart("\n".join(texts), signature=encrypted if encrypted else None)]
    if _role(item) == "assistant":
        return _content_parts(item.get("content"))
    return [TextPart(f"[{kind}] {json.dumps(item, sort_keys=True, default=str)}")]


def messages_from_items(items: Iterable[object]) -> list[Message]:
    """The SDK's items as contextfold messages, each keeping the items it was made from."""
    return _messages_from_items(items, {})


def _messages_from_items(
    items: Iterable[object], call_names: dict[str, str], *, owned: bool = False
) -> list[Message]:
    """:func:`messages_from_items`; ``call_names`` holds the names of the calls made before
    ``items`` (a tool result names its call), and gains those of ``items``. A message keeps a
    copy of its items, the caller's could change in place; ``owned``: they never do (the
    session's item log, copies already), so it keeps them as they are."""
    messages: list[Message] = []
    reply: list[Item] = []

    def with_raw(role: str, parts: Sequence[Part], raw: list[Item], **meta: Any) -> Message:
        provider = {RAW_ITEMS_KEY: raw if owned else copy.deepcopy(raw)}
        return Message(role, tuple(parts), meta=Meta(provider=provider, **meta))  # type: ignore[arg-type]

    def close_reply() -> None:
        if reply:
            parts = [p for item in reply for p in _reply_parts(item)]
            messages.append(with_raw("assistant", parts, list(reply)))
            reply.clear()

    for raw in items:
        item = plain_item(raw)
        if item.get("type") == "function_call":
            call_names[str(item.get("call_id", ""))] = str(item.get("name", ""))
        if _is_assistant_side(item):
            reply.append(item)
            continue
        close_reply()
        if item.get("type") == "function_call_output":
            call_id = str(item.get("call_id", ""))
            content, images = _output_content(item.get("output", ""))
            result = ToolResultPart(call_id, call_names.get(call_id, ""), content, images=images)
            messages.append(with_raw("tool", [result], [item], kind="tool_result"))
        else:
            role = _role(item) or "user"
            neutral = "system" if role in ("system", "developer") else "user"
            messages.append(with_raw(neutral, _content_parts(item.get("content")), [item]))
    close_reply()
    return messages


class ItemsToMessages:
    """:func:`messages_from_items` for a history that grows call after call, converting only
    what is new.

    The SDK hands its whole input again before every model call, as new dicts; the messages
    of the last conversion whose own items (kept in their meta) are equal to the items at the
    same place are taken again, and the items after them are converted. Comparing is cheap
    (equal strings, mostly the same objects); the conversion copies every item.

    One converter may serve several sources of the same history (the session's item log and
    the SDK's input): the messages it gives are then the same objects for both, which
    :class:`~contextfold.hosts.sync.HistorySync` recognises without digesting them again.
    Thread-safe."""

    def __init__(self) -> None:
        self._messages: list[Message] = []
        self._items: list[Item] = []
        """The items the messages were made from (their copies), in order."""
        self._owned: list[Item] = []
        """The items of the last ``owned`` source the first of ``_items`` are equal to."""
        self._call_names: dict[str, str] = {}
        self._lock = threading.Lock()

    def convert(self, items: Iterable[object], *, owned: bool = False) -> list[Message]:
        """:func:`messages_from_items` of ``items``. ``owned``: the caller never changes them
        in place (the session's item log), so those given again are not compared again."""
        given = list(items)
        if set(map(type, given)) - {dict}:  # told at C speed: the SDK hands dicts
            plain = [plain_item(item) for item in given]
        else:
            plain = cast(list[Item], given)
        with self._lock:
            held = len(self._items)
            # Those of the owned source's items given again equal what they equalled.
            same = len(self._owned) if owned and _starts_with(plain, self._owned) else 0
            if len(plain) >= held and plain[same:held] == self._items[same:]:
                # The history goes on: one compare, in C.
                kept, start = _open_reply(self._messages, plain, held)
            else:
                kept, start = _unchanged(self._messages, plain)
            if kept < len(self._messages):  # not a continuation: the names of what remains
                remains = self._messages[:kept]
                self._call_names = {c.call_id: c.name for m in remains for c in m.tool_calls}
            new = _messages_from_items(plain[start:], self._call_names, owned=owned)
            self._messages = self._messages[:kept] + new
            self._items = self._items[:start] + [i for m in new for i in _raw_items(m)]
            # An owned source's items are now those of every message (the new ones were made
            # from them); after another source's, those of the messages kept still are.
            self._owned = plain if owned else self._owned[:start]
            return self._messages


def _starts_with(items: Sequence[object], head: Sequence[object]) -> bool:
    """Whether ``items`` begins with the very objects of ``head``."""
    return len(head) <= len(items) and same_objects(head, items[: len(head)])


def _raw_items(message: Message) -> list[Item]:
    raw = message.meta.provider.get(RAW_ITEMS_KEY)
    return raw if isinstance(raw, list) else []


def _open_reply(messages: Sequence[Message], items: Sequence[Item], held: int) -> tuple[int, int]:
    """For ``items`` that begin with all of ``messages``' items (``held`` of them): how many of
    the messages stay as they are, and where the rest begins. All, unless the last one is a
    reply that the next item goes on (then it is one message with what follows)."""
    last = messages[-1] if messages else None
    goes_on = held < len(items) and _is_assistant_side(items[held])
    if last is not None and last.role == "assistant" and goes_on:
        return len(messages) - 1, held - len(_raw_items(last))
    return len(messages), held


def _unchanged(messages: Sequence[Message], items: Sequence[Item]) -> tuple[int, int]:
    """How many of ``messages`` ``items`` begin with, unchanged, and where the rest begins."""
    start = 0
    for count, message in enumerate(messages):
        raw = message.meta.provider.get(RAW_ITEMS_KEY)
        end = start + len(raw) if isinstance(raw, list) else -1
        if end < 0 or end > len(items) or items[start:end] != raw:
            return count, start
        if message.role == "assistant" and end < len(items) and _is_assistant_side(items[end]):
            return count, start  # the reply goes on: it is one message with what follows
        start = end
    return len(messages), start


class MessagesToItems:
    """:func:`items_from_messages` for the engine's view, call after call: the engine keeps its
    view's messages between calls, so the items of each are found once (the SDK gets copies
    every call, as it got new items every call before). The history's items by digest are
    kept too, and only what the history gained since the last call is digested."""

    def __init__(self) -> None:
        self._view: list[Message] = []
        self._found: list[list[tuple[Item, CopyPlan | None]]] = []
        """The last view, and each of its messages' items, each with its :func:`copy_plan`.
        Holding the messages keeps their ids from being reused."""
        self._history = _HistoryItems()

    def items(self, view: Iterable[Message], history: Sequence[Message]) -> list[Item]:
        """:func:`items_from_messages` of ``view``, the original items found in ``history``."""
        view = list(view)
        held, held_found = self._view, self._found
        # The view mostly begins with the last one's messages (found at C speed); only what
        # follows is looked up, among the last view's messages and then in ``history``.
        same = common_prefix(held, view)
        found_all = held_found[:same]
        if same < len(view):
            known = {id(m): (m, found) for m, found in zip(held, held_found, strict=True)}
            queues: _Queues | None = None
            for message in view[same:]:
                hit = known.get(id(message))
                if hit is not None and hit[0] is message:
                    found = hit[1]
                else:
                    if queues is None:
                        queues = _Queues(self._history.known(history))
                    found = [(item, copy_plan(item)) for item in _message_items(message, queues)]
                    known[id(message)] = (message, found)
                found_all.append(found)
        self._view, self._found = view, found_all
        return [planned_copy(item, plan) for found in found_all for item, plan in found]


CopyPlan = tuple[tuple[Any, "CopyPlan | None"], ...]
"""Where a JSON dict or list holds dicts and lists: each one's key (or index), with its own plan
(None: a subclass of dict or list, copied by :func:`json_copy`)."""


def copy_plan(item: Item) -> CopyPlan | None:
    """How :func:`planned_copy` copies ``item`` as :func:`json_copy` does (None: by
    :func:`json_copy` itself, a dict subclass holding containers). Made once for an item that
    is copied call after call, and valid while the item is not changed in place."""
    plan = _plan(item)
    return plan if not plan or type(item) is dict else None


def _plan(value: dict[Any, Any] | list[Any]) -> CopyPlan:
    pairs = value.items() if isinstance(value, dict) else enumerate(value)
    plan: list[tuple[Any, CopyPlan | None]] = []
    for key, inner in pairs:
        if type(inner) is dict or type(inner) is list:
            plan.append((key, _plan(inner)))
        elif isinstance(inner, dict | list):
            plan.append((key, None))
    return tuple(plan)


def planned_copy(item: Item, plan: CopyPlan | None) -> Item:
    """``json_copy(item)`` by ``plan`` (:func:`copy_plan`): each dict and list a shallow copy
    (in C), then the containers inside copied in their places, and nothing else looked at. An
    SDK message item is five levels of small dicts and lists: twice as fast as the walk of every
    value ``json_copy`` makes. A flat item (most are) is its shallow copy."""
    return cast(Item, json_copy(item) if plan is None else _copied(item, plan))


def _copied(value: Any, plan: CopyPlan) -> Any:
    out = value.copy()
    for key, inner in plan:
        out[key] = json_copy(value[key]) if inner is None else _copied(value[key], inner)
    return out


class _HistoryItems:
    """:func:`raw_items_by_digest` of a history that grows call after call: the messages it
    begins with that are the very objects of the history before (frozen, so their digests and
    items are the same) are not read again, and only those it lost are taken out."""

    def __init__(self) -> None:
        self._messages: list[Message] = []
        """The history indexed, and each of its messages' digest (None: no items)."""
        self._digests: list[bytes | None] = []
        self._known: dict[bytes, list[list[Item]]] = {}

    def known(self, history: Sequence[Message]) -> RawItems:
        """``raw_items_by_digest(history)`` (read only: it changes with the next call)."""
        same = common_prefix(self._messages, history)
        known, digests = self._known, self._digests
        for digest in reversed(digests[same:]):  # the last one queued for it is this one's
            if digest is not None:
                raws = known[digest]
                raws.pop()
                if not raws:
                    del known[digest]
        del digests[same:]
        for message in history[same:]:
            raw = message.meta.provider.get(RAW_ITEMS_KEY)
            digest = message_digest(message) if isinstance(raw, list) else None
            if digest is not None:
                known.setdefault(digest, []).append(cast(list[Item], raw))
            digests.append(digest)
        self._messages = list(history)
        return known


def json_copy(value: Any) -> Any:
    """A copy of a JSON value's dicts and lists (what a receiver could change in place); its
    strings and numbers are shared, unchangeable anyway. Far cheaper than ``deepcopy``."""
    # Scalars are told by their exact type (a third cheaper than an isinstance against a
    # union, for every value of every item a view hands over); anything else comes here.
    if isinstance(value, dict):
        return {k: v if type(v) in _SCALARS else json_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [v if type(v) in _SCALARS else json_copy(v) for v in value]
    return value


_SCALARS = frozenset((str, int, float, bool, type(None)))


RawItems = Mapping[bytes, Sequence[list[Item]]]
"""Original items by message digest: what :func:`items_from_messages` may give back verbatim."""


def raw_items_by_digest(messages: Iterable[Message]) -> dict[bytes, list[list[Item]]]:
    """The items each message was made from, by digest, in order (equal messages queue up)."""
    known: dict[bytes, list[list[Item]]] = {}
    for message in messages:
        raw = message.meta.provider.get(RAW_ITEMS_KEY)
        if isinstance(raw, list):
            known.setdefault(message_digest(message), []).append(raw)
    return known


def _text(part: Part) -> str | None:
    if isinstance(part, TextPart):
        return part.text
    if isinstance(part, SummaryPart):
        return part.text
    return None


def _rebuilt(message: Message) -> list[Item]:
    """Fresh items for a message the engine wrote or changed."""
    if message.role == "tool":
        out: list[Item] = []
        for result in message.tool_results:
            output: object = result.content
            if result.images:
                output = [{"type": "input_text", "text": result.content}] + [
                    {"type": "input_image", "image_url": i.url, "detail": i.detail or "auto"}
                    for i in result.images
                ]
            out.append(
                {"type": "function_call_output", "call_id": result.call_id, "output": output}
            )
        return out
    if message.role == "assistant":
        items: list[Item] = []
        for part in message.parts:
            text = _text(part)
            if text is not None:
                items.append({"role": "assistant", "content": text})
            elif isinstance(part, ToolCallPart):
                items.append(
                    {
                        "type": "function_call",
                        "call_id": part.call_id,
                        "name": part.name,
                        "arguments": part.arguments,
                    }
                )
            # Reasoning is left out: the Responses API takes it back only as the item it sent
            # (with its id), which a changed message no longer has.
        return items
    content: list[dict[str, Any]] = []
    for part in message.parts:
        text = _text(part)
        if text is not None:
            content.append({"type": "input_text", "text": text})
        elif isinstance(part, ImagePart):
            content.append(
                {"type": "input_image", "image_url": part.url, "detail": part.detail or "auto"}
            )
    role = "developer" if message.role == "system" else "user"
    if len(content) == 1 and content[0]["type"] == "input_text":
        return [{"role": role, "content": content[0]["text"]}]
    return [{"role": role, "content": content}]


def items_from_messages(messages: Iterable[Message], known: RawItems | None = None) -> list[Item]:
    """Messages as SDK items: the original items of each message that still says what they
    said (looked up in ``known``, else in the message's own meta), fresh items otherwise."""
    queues = _Queues(known or {})
    return [copy.deepcopy(item) for m in messages for item in _message_items(m, queues)]


class _Queues:
    """The original items ``known`` holds for each digest, to be given out once each, in
    order, within one conversion. A digest's queue is made when it is first asked for: a
    conversion asks for a few (the messages not mapped before), not for the whole history."""

    def __init__(self, known: RawItems) -> None:
        self._known = known
        self._left: dict[bytes, deque[list[Item]]] = {}

    def take(self, digest: bytes) -> list[Item] | None:
        """The next original items for ``digest``, None when none are left."""
        left = self._left.get(digest)
        if left is None:
            left = self._left[digest] = deque(self._known.get(digest, ()))
        return left.popleft() if left else None


def _message_items(message: Message, queues: _Queues) -> list[Item]:
    """The items of one message (not copies): its original items when it still says what they
    say (the first left in ``queues`` for its digest, taken; else its own), else fresh ones."""
    digest = message_digest(message)
    queued = queues.take(digest)
    if queued is not None:
        return queued
    own = message.meta.provider.get(RAW_ITEMS_KEY)
    if isinstance(own, list) and _same(own, digest):
        return own
    return _rebuilt(message)


def _same(raw: list[Item], digest: bytes) -> bool:
    remade = messages_from_items(raw)
    return len(remade) == 1 and message_digest(remade[0]) == digest
