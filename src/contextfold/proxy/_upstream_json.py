"""The upstream body as JSON bytes, without escaping the whole history again each request.

Every request the proxy sends upstream holds the conversation so far, and from one request to
the next almost all of its text is the same: the same tool outputs and messages, the very
strings of the session's view. Writing them as JSON (escaping every quote and newline of a
100k-token history) was the largest part of the proxy's own time at that size.
:class:`BodyEncoder` writes the bytes ``json.dumps(body, ensure_ascii=False).encode()`` writes,
but remembers the encoding of each long string, by its text: the body is written with a short
stand-in for each long string, and each stand-in is then replaced by that string's encoding,
remembered from an earlier request or made now. A stand-in holds a secret nonce of this
process (and a NUL character), so no text a client sends is taken for one.

A wire message or block the body shares with earlier requests (a
:class:`~contextfold.wire.anthropic.SharedMessage` or
:class:`~contextfold.wire.anthropic.SharedBlock`, which cannot be changed) is written the same
way, whole: its encoding is remembered by the value itself, so a resent view is neither walked
nor escaped again, nor put together again from its blocks.
"""

from __future__ import annotations

import json
import secrets
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from contextfold.lru import LRU
from contextfold.sequences import common_prefix
from contextfold.wire.anthropic import SharedBlock, SharedMessage

__all__ = ["BodyEncoder"]

LONG_CHARS = 512
"""A shorter string is encoded with the body: looking it up would cost about as much."""

WORTH_TOKENS = 20_000
"""A smaller body is written directly: its long strings are too few for the walk that finds
them to pay (at 10k tokens of short tool outputs it cost 0.25 ms, and escaping their text 0.15
ms; at 100k, 0.35 ms against 2.3 ms)."""

SHARED_WORTH_TOKENS = 4_000
"""The same for a body made of shared blocks, whose walk stops at each block (at 10k tokens,
83 messages: 0.24 ms against 0.42 ms written directly)."""

_ENCODER = json.JSONEncoder(ensure_ascii=False)
"""One encoder for every call: ``json.dumps`` with an option makes a new one each time."""


_SHARED = frozenset({SharedBlock, SharedMessage})
"""The values whose JSON each remembers (:meth:`SharedBlock.encoded`)."""

_WALKED = frozenset({str, dict, list, *_SHARED})
"""The types :meth:`BodyEncoder._stand_in` looks into (or at)."""


def _dumps(value: Any) -> bytes:
    return _ENCODER.encode(value).encode()


def _shares_blocks(body: Any) -> bool:
    """True when ``body``'s middle message is a :class:`SharedMessage` or holds a
    :class:`SharedBlock` (a body the proxy rendered from a session's view: then so do most of
    its messages)."""
    messages = body.get("messages") if type(body) is dict else None
    if type(messages) is not list or not messages:
        return False
    middle = messages[len(messages) // 2]
    if type(middle) is SharedMessage:
        return True
    content = middle.get("content") if type(middle) is dict else None
    return type(content) is list and any(type(block) is SharedBlock for block in content)


_ROLES = {role: _dumps(role) for role in ("user", "assistant", "system")}
"""The roles a message of shared blocks has, as JSON."""


def _shared_message(message: dict[Any, Any]) -> bytes | None:
    """The JSON of a message ``{"role": ..., "content": [...]}`` (those two keys, in that
    order) whose blocks are all :class:`SharedBlock` s, made from the blocks' encodings: the
    bytes ``json.dumps`` writes, with its separators. Most messages of a body the proxy
    rendered are such, and one piece per message is less to walk, write and split than one per
    block. None for any other value."""
    if len(message) != 2:
        return None
    role = message.get("role")
    content = message.get("content")
    if type(role) is not str or type(content) is not list or next(iter(message)) != "role":
        return None
    encoded_role = _ROLES.get(role)
    if encoded_role is None:
        return None
    pieces = []
    for block in content:
        if type(block) is not SharedBlock:
            return None
        pieces.append(block.encoded())
    return b"".join((b'{"role": ', encoded_role, b', "content": [', b", ".join(pieces), b"]}"))


RUNS_KEPT = 64
"""How many conversations' runs of shared messages :class:`BodyEncoder` keeps."""


@dataclass(frozen=True)
class _Run:
    """The leading shared messages of a body's ``messages`` (``items``), as JSON: ``joined`` is
    their encodings joined by ``", "`` (what ``json.dumps`` writes between a list's items), and
    ``ends[i]`` where the first ``i + 1`` of them end in it. A conversation's next body begins
    with most of the same messages (the session's view, rendered once: ``WireBlocks``), so its
    run is this one's bytes, cut where the two part, and the few messages after."""

    items: list[Any]
    ends: list[int]
    joined: bytes


class BodyEncoder:
    """JSON bytes of request bodies, remembering the encoding of long strings (at most
    ``max_bytes`` of encodings; the least recently used go first) and each conversation's last
    run of shared messages (:class:`_Run`, in an :class:`~contextfold.lru.LRU`: at most
    :data:`RUNS_KEPT`, and ``max_bytes`` of them besides). For one thread's use (the event
    loop's): the string memo is not locked."""

    def __init__(self, max_bytes: int = 32 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self._encoded: OrderedDict[str, bytes] = OrderedDict()
        self._bytes = 0
        # Every stand-in is the same string: JSON writes the values in the order the walk
        # meets them (a dict's items in order, a list's in order), so the n-th stand-in in the
        # written skeleton is the n-th value put aside.
        self._stand_in_text = f"\x00{secrets.token_hex(16)}\x00"
        self._written = _dumps(self._stand_in_text)
        # Each conversation's last run of shared messages, by its first (see :meth:`_run`).
        self._runs: LRU[int, _Run] = LRU(
            RUNS_KEPT, max_weight=max_bytes, weigh=lambda _key, run: len(run.joined)
        )

    def encode(self, body: Any, *, tokens: int) -> bytes:
        """``json.dumps(body, ensure_ascii=False).encode()``. ``tokens``: about how many the
        body holds; below :data:`WORTH_TOKENS` (:data:`SHARED_WORTH_TOKENS` for a body of
        shared blocks) it is written directly."""
        if tokens < (SHARED_WORTH_TOKENS if _shares_blocks(body) else WORTH_TOKENS):
            return _dumps(body)
        aside: list[bytes] = []
        messages = body.get("messages") if type(body) is dict else None
        if type(messages) is list and messages and type(messages[0]) in _SHARED:
            # The body's own fields walked as any value; its messages from their shared run.
            # In the body's order: the stand-ins are replaced in the order they are written.
            skeleton: Any = {}
            for key, item in body.items():
                walk = self._messages if item is messages else self._stand_in
                skeleton[key] = walk(item, aside)
        else:
            skeleton = self._stand_in(body, aside)
        if not aside:
            return _dumps(body)
        pieces = _dumps(skeleton).split(self._written)
        if len(pieces) != len(aside) + 1:  # cannot be (the nonce is secret); written whole
            return _dumps(body)
        out = pieces + pieces[1:]  # the right length: every other item is replaced below
        out[0::2] = pieces
        out[1::2] = aside
        return b"".join(out)

    def _stand_in(self, value: Any, aside: list[bytes]) -> Any:
        """``value`` with a stand-in for each long string and shared block (whose encoding
        goes to ``aside``). Dicts and lists are copied; their leaves are looked at in place (no
        call per leaf). Types are matched exactly, for speed: anything else (a tuple, another
        subclass) is left for ``json`` to write whole, which it writes the same."""
        kind = type(value)
        if kind is str:
            if len(value) < LONG_CHARS:
                return value
            aside.append(self._string(value))
            return self._stand_in_text
        if kind is dict:
            copied: dict[Any, Any] = {}
            for key, item in value.items():
                kind = type(item)
                if kind is str and len(item) < LONG_CHARS:
                    copied[key] = item
                elif kind in _WALKED:
                    copied[key] = self._stand_in(item, aside)
                else:
                    copied[key] = item
            return copied
        if kind is list:
            copied_list: list[Any] = []
            for item in value:
                kind = type(item)
                if kind in _SHARED:  # most of a resent body: no call for each
                    aside.append(item.encoded())
                    copied_list.append(self._stand_in_text)
                elif kind is dict and (whole := _shared_message(item)) is not None:
                    aside.append(whole)
                    copied_list.append(self._stand_in_text)
                elif kind in _WALKED:
                    copied_list.append(self._stand_in(item, aside))
                else:
                    copied_list.append(item)
            return copied_list
        if kind in _SHARED:
            aside.append(value.encoded())
            return self._stand_in_text
        return value

    def _messages(self, messages: list[Any], aside: list[bytes]) -> list[Any]:
        """``messages`` (its first a shared message) with one stand-in for its leading run of
        shared messages, whose JSON goes to ``aside`` (see :class:`_Run`); the rest walked."""
        run = self._run(messages)
        aside.append(run.joined)
        return [self._stand_in_text, *self._stand_in(messages[len(run.items) :], aside)]

    def _run(self, messages: list[Any]) -> _Run:
        """The leading run of shared messages of ``messages`` (at least its first), its JSON
        taken from the conversation's last run as far as the two hold the same messages (the
        very objects, which cannot change), and remembered as the conversation's run."""
        first = messages[0]
        last = self._runs.get(id(first))
        # The run holds its messages, so the id is not another value's while it is here.
        shared = 0
        ends: list[int] = []
        pieces: list[bytes] = []
        end = -2  # where the run's JSON ends (-2: nothing yet, and no b", " before the first)
        if last is not None and last.items[0] is first:
            shared = common_prefix(last.items, messages)
            ends = last.ends[:shared]
            end = ends[-1]
            pieces.append(last.joined[:end])
        count = shared
        while count < len(messages) and type(messages[count]) in _SHARED:
            encoded = messages[count].encoded()
            pieces.append(encoded)
            end += 2 + len(encoded)  # b", " before each but the first
            ends.append(end)
            count += 1
        if last is not None and count == len(last.items) == shared:
            run = last  # the same run again (a body sent twice)
        else:
            run = _Run(messages[:count], ends, b", ".join(pieces))
        self._runs.put(id(first), run)
        return run

    def _string(self, text: str) -> bytes:
        """The JSON encoding of ``text``, remembered."""
        encoded = self._encoded.get(text)
        if encoded is not None:
            self._encoded.move_to_end(text)
            return encoded
        encoded = _dumps(text)
        self._encoded[text] = encoded
        self._bytes += len(encoded)
        while self._bytes > self.max_bytes and self._encoded:
            _, dropped = self._encoded.popitem(last=False)
            self._bytes -= len(dropped)
        return encoded
