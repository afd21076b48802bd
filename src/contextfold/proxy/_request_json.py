"""A request body read as ``json.loads`` reads it, with a key per message: the hash of the
message's exact text, so that what a client resends byte for byte is recognised without being
digested or checked again.

Clients resend their whole history on every request. Reading the body is unavoidable, but
digesting and validating every message again is not: a message whose exact text the proxy has
already read (and checked, and digested) needs neither again. :func:`read_json` parses the top
level of the body itself and hands each element of ``messages`` to the standard library's
scanner, noting where each begins and ends; everything else is the standard decoder's work, so
the values are exactly those ``json.loads`` returns. A body the fast path does not understand
(not UTF-8, a byte-order mark, invalid JSON) is read by ``json.loads`` itself, which raises the
error it always raises, and gets no keys.

A client resends its history byte for byte, so most of a body is the text of the body before
it. :class:`ResentBodies` remembers each conversation's last ``messages`` array as read (the
text up to the end of its last message, each message's value and key): a body that begins with
that very text takes those messages as they are and reads only what follows. The same text at
the same place reads as the same values; they are shared between the two bodies, which nothing
changes (they are checked, digested and converted, never written to). So are the last few values
of the fields a client resends unchanged (:data:`SHARED_FIELDS`: the tools and the system
prompt), found by their text wherever they are in the body.
"""

from __future__ import annotations

import hashlib
import json
import operator
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any, TypeVar, cast

from contextfold.hosts.digests import ArgumentDefaults, DigestCache, fingerprint

__all__ = ["KnownMessages", "ResentBodies", "known_messages", "message_digests", "read_json"]

_SPACE = re.compile(r"[ \t\n\r]*")
_KEYED = "messages"

SHARED_FIELDS = frozenset({"tools", "system"})
"""Fields a client resends unchanged with every request (Claude Code's tools are some 18k
tokens): :class:`ResentBodies` hands a value written as before out again, the very object, which
the checks then know (:class:`~contextfold.wire.anthropic_models.CheckedValues`)."""

SHARED_VALUES = 8
"""How many recent values of each shared field are kept (several clients, or a client's side
requests, each with their own tools)."""

RawMessage = TypeVar("RawMessage")
Scan = Callable[[str, int], tuple[Any, int]]
"""The standard library's scanner: the JSON value at an index, and where it ends."""


class _NotPlain(Exception):
    """The fast path does not read this body; ``json.loads`` will."""


@dataclass(frozen=True)
class _Read:
    """A ``messages`` array as read: the body's text up to the end of its last message, and
    each message's value, key and end (an index into that text)."""

    prefix: str
    values: list[Any]
    keys: list[bytes]
    ends: list[int]


class ResentBodies:
    """The ``messages`` array last read for each conversation (at most ``size``, the least
    recent dropped first; at most ``max_chars`` of text in all), named by the body's text up to
    the end of its first message. For the event loop's use: not locked."""

    def __init__(self, size: int = 32, max_chars: int = 16 * 1024 * 1024) -> None:
        self.size = size
        self.max_chars = max_chars
        self._read: OrderedDict[str, _Read] = OrderedDict()
        self._chars = 0
        # The latest values of each field in SHARED_FIELDS, as (text, value), newest first.
        self._values: dict[str, list[tuple[str, Any]]] = {}

    def value(self, name: str, text: str, at: int, scan: Scan) -> tuple[Any, int]:
        """``scan(text, at)`` for the value of the body's field ``name``: one read before when
        its text is the same (the same object)."""
        earlier = self._values.setdefault(name, [])
        for index, (written, value) in enumerate(earlier):
            # A written array, object or string ends with its closing character: the value
            # at ``at`` is that one when the text starts with it.
            if text.startswith(written, at):
                if index:
                    earlier.insert(0, earlier.pop(index))
                return value, at + len(written)
        value, end = scan(text, at)
        if text[at] in '[{"' and end - at <= self.max_chars // 64:
            earlier.insert(0, (text[at:end], value))
            del earlier[SHARED_VALUES:]
        return value, end

    def get(self, first: str) -> _Read | None:
        return self._read.get(first)

    def put(self, first: str, read: _Read) -> None:
        old = self._read.pop(first, None)
        if old is not None:
            self._chars -= len(first) + len(old.prefix)
        self._read[first] = read
        self._chars += len(first) + len(read.prefix)
        while len(self._read) > self.size or (self._chars > self.max_chars and self._read):
            dropped_first, dropped = self._read.popitem(last=False)
            self._chars -= len(dropped_first) + len(dropped.prefix)


def read_json(
    raw: bytes,
    *,
    parse_constant: Callable[[str], Any] | None = None,
    resent: ResentBodies | None = None,
) -> tuple[Any, list[bytes] | None]:
    """The body as ``json.loads(raw, parse_constant=...)`` reads it (raising what it raises),
    and the SHA-256 of each element of its top-level ``messages`` array as written (None when
    the body has no such array or was read the slow way). ``resent``: the arrays read before
    (always with this same ``parse_constant``), whose messages a body that resends them takes
    as they are."""
    decoder = json.JSONDecoder(parse_constant=parse_constant)
    try:
        text = raw.decode("utf-8")
        body, keys, read = _read_object(text, decoder.scan_once, resent)  # type: ignore[attr-defined]
    except (_NotPlain, UnicodeDecodeError, StopIteration, ValueError, IndexError, RecursionError):
        return json.loads(raw, parse_constant=parse_constant), None
    if resent is not None and read is not None:
        resent.put(read.prefix[: read.ends[0]], read)
    return body, keys


def _read_object(
    text: str, scan: Scan, resent: ResentBodies | None = None
) -> tuple[Any, list[bytes] | None, _Read | None]:
    at = _SPACE.match(text, 0).end()  # type: ignore[union-attr]
    if text[at] != "{":
        raise _NotPlain
    body: dict[str, Any] = {}
    keys: list[bytes] | None = None
    read: _Read | None = None
    at = _SPACE.match(text, at + 1).end()  # type: ignore[union-attr]
    if text[at] == "}":
        at += 1
    else:
        while True:
            if text[at] != '"':
                raise _NotPlain
            name, at = scanstring(text, at + 1)
            at = _SPACE.match(text, at).end()  # type: ignore[union-attr]
            if text[at] != ":":
                raise _NotPlain
            at = _SPACE.match(text, at + 1).end()  # type: ignore[union-attr]
            if name == _KEYED and text[at] == "[":
                body[name], keys, read, at = _read_array(text, at, scan, resent)
            elif name in SHARED_FIELDS and resent is not None:
                body[name], at = resent.value(name, text, at, scan)
            else:
                body[name], at = scan(text, at)
                if name == _KEYED:
                    keys, read = None, None
            at = _SPACE.match(text, at).end()  # type: ignore[union-attr]
            if text[at] == "}":
                at += 1
                break
            if text[at] != ",":
                raise _NotPlain
            at = _SPACE.match(text, at + 1).end()  # type: ignore[union-attr]
    if _SPACE.match(text, at).end() != len(text):  # type: ignore[union-attr]
        raise _NotPlain
    return body, keys, read


def _read_array(
    text: str, at: int, scan: Scan, resent: ResentBodies | None
) -> tuple[list[Any], list[bytes], _Read | None, int]:
    """The array at ``at``, a key per element, what :class:`ResentBodies` keeps of it (None
    when empty), and where it ends."""
    values: list[Any] = []
    keys: list[bytes] = []
    ends: list[int] = []
    at = _SPACE.match(text, at + 1).end()  # type: ignore[union-attr]
    if text[at] == "]":
        return values, keys, None, at + 1
    value, end = scan(text, at)
    earlier = resent.get(text[:end]) if resent is not None else None
    if earlier is not None and text.startswith(earlier.prefix):
        # The same text up to the end of the earlier body's last message: the same messages.
        values, keys, ends = list(earlier.values), list(earlier.keys), list(earlier.ends)
        end = ends[-1]
    else:
        values.append(value)
        keys.append(hashlib.sha256(text[at:end].encode("utf-8", "surrogatepass")).digest())
        ends.append(end)
    while True:
        at = _SPACE.match(text, end).end()  # type: ignore[union-attr]
        if text[at] == "]":
            return values, keys, _Read(text[:end], list(values), list(keys), ends), at + 1
        if text[at] != ",":
            raise _NotPlain
        at = _SPACE.match(text, at + 1).end()  # type: ignore[union-attr]
        value, end = scan(text, at)
        values.append(value)
        keys.append(hashlib.sha256(text[at:end].encode("utf-8", "surrogatepass")).digest())
        ends.append(end)


@dataclass
class KnownMessages:
    """What one request's messages share with those the proxy has read before.

    ``keys`` are :func:`read_json`'s, one per message; ``namespace`` keeps each protocol's
    apart. A message is *known* when its exact text was read before in a request that passed
    the checks: it needs no checking again, and its digest (under the same context: the
    tools' argument defaults, which a digest depends on) is remembered.
    """

    cache: DigestCache
    namespace: bytes
    keys: Sequence[bytes]
    _checked: list[bytes | None] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._checked = self.cache.lookup_prefixed(self.namespace, self.keys)

    def indices(self) -> frozenset[int]:
        """The positions (in the body's ``messages``) of the messages already checked."""
        checked = self._checked
        return frozenset(compress(range(len(checked)), map(operator.is_not, checked, repeat(None))))

    def digests(
        self,
        messages: Sequence[RawMessage],
        digest: Callable[[RawMessage], bytes],
        *,
        start: int = 0,
        context: str = "",
    ) -> list[bytes]:
        """The digest of each of ``messages`` (the body's messages from ``start`` on): the
        remembered one where the message is known under ``context``, else taken by
        ``digest``; every one is then remembered, and its message as checked."""
        prefix = self.namespace + hashlib.sha256(context.encode()).digest()[:8]
        keys = self.keys[start : start + len(messages)]
        if len(keys) != len(messages):  # no key for each message: nothing to remember by
            return [digest(message) for message in messages]
        found = self.cache.lookup_prefixed(prefix, keys)
        # Only the few messages not remembered are visited (a resent history is found whole).
        missing = list(compress(range(len(found)), map(operator.is_, found, repeat(None))))
        out = cast("list[bytes]", found)
        for index in missing:
            out[index] = digest(messages[index])
        if missing:
            new = [(prefix + keys[i], out[i]) for i in missing]
            checked = [(self.namespace + keys[i], b"") for i in missing]
            self.cache.remember(new + checked)
        return out


def message_digests(
    digest: Callable[[RawMessage, ArgumentDefaults], bytes],
    raw_messages: Sequence[RawMessage],
    defaults: ArgumentDefaults,
    known: KnownMessages | None,
    *,
    start: int = 0,
) -> list[bytes]:
    """``digest`` of each of a request's messages (from ``start`` on in its body), taken only
    for those not ``known``."""
    if known is None:
        return [digest(raw, defaults) for raw in raw_messages]
    return known.digests(
        raw_messages, lambda raw: digest(raw, defaults), start=start, context=fingerprint(defaults)
    )


def known_messages(
    cache: DigestCache, namespace: str, body: Any, keys: list[bytes] | None
) -> KnownMessages | None:
    """The request's :class:`KnownMessages`, or None when its messages have no keys."""
    if keys is None or not isinstance(body, Mapping):
        return None
    return KnownMessages(cache, namespace.encode() + b"\0", keys)
