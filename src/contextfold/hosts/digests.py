"""Digests of what a message says, for recognising a history a host resends.

The proxy and the framework integrations are handed a client's whole history on every call and
must tell which messages they already hold. A digest covers what a message says (role, text,
tool calls and results, images) and leaves out what clients change when they resend one: key
order and spacing of tool arguments, arguments a client adds with their schema default
(Claude Code resends every ``Edit`` with ``"replace_all": false``: :func:`schema_defaults`),
thinking (dropped or re-signed), cache breakpoints, whitespace around text and text blocks
holding only whitespace. :func:`digest_of` is the one canonical form;
:func:`message_digest` reduces a neutral message to it, and the proxy reduces wire dicts to the
same kind of items without converting them first.
"""

from __future__ import annotations

import hashlib
import json
import operator
import threading
from collections import OrderedDict, deque
from collections.abc import Iterable, Mapping, Sequence
from itertools import compress, repeat

from contextfold.lru import LRU
from contextfold.messages import (
    ImagePart,
    Message,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from contextfold.sequences import common_prefix
from contextfold.tool_spec import ToolSpec

__all__ = [
    "ArgumentDefaults",
    "DigestCache",
    "arguments_value",
    "call_item",
    "digest_of",
    "fingerprint",
    "message_digest",
    "schema_defaults",
]

ArgumentDefaults = Mapping[str, Mapping[str, object]]
"""Per tool name, the top-level arguments its schema gives a default, with that default."""


_last_defaults: tuple[tuple[ToolSpec, ...], dict[str, dict[str, object]]] | None = None
"""The latest tuple of tools :func:`schema_defaults` read, and its answer."""


def schema_defaults(tools: Iterable[ToolSpec]) -> dict[str, dict[str, object]]:
    """The defaults the tools' schemas declare for their top-level arguments (read only: the
    answer for a tuple is remembered, and handed out again for the same tuple: a proxy's client
    request reuses the tool specs of the request before when its tools are the same)."""
    global _last_defaults
    last = _last_defaults
    if last is not None and last[0] is tools:
        return last[1]
    out = _schema_defaults(tools)
    if type(tools) is tuple:
        _last_defaults = (tools, out)
    return out


def _schema_defaults(tools: Iterable[ToolSpec]) -> dict[str, dict[str, object]]:
    out: dict[str, dict[str, object]] = {}
    for tool in tools:
        properties = tool.parameters.get("properties") if tool.parameters else None
        if not isinstance(properties, Mapping):
            continue
        found = {
            str(name): spec["default"]
            for name, spec in properties.items()
            if isinstance(spec, Mapping) and "default" in spec
        }
        if found:
            out[tool.name] = found
    return out


def call_item(
    call_id: object, name: object, arguments: object, defaults: ArgumentDefaults | None = None
) -> list[object]:
    """The canonical item of one tool call: its arguments as they mean (parsed), without those
    equal to their schema default (a client may add or leave out either way)."""
    value = arguments_value(arguments)
    dropped = defaults.get(name) if defaults and isinstance(name, str) else None
    if dropped and isinstance(value, Mapping):
        value = {
            k: v
            for k, v in value.items()
            if not (k in dropped and v == dropped[k] and type(v) is type(dropped[k]))
        }
    return ["call", call_id, name, value]


def digest_of(role: object, items: Sequence[object]) -> bytes:
    """The digest of one message reduced to its role and ``items`` (each a list naming a part:
    ``["text", ...]``, ``["call", id, name, arguments]``, ``["result", id, ...]``...)."""
    text = json.dumps(
        [role, list(items)], ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str
    )
    return hashlib.sha256(text.encode()).digest()


def fingerprint(value: object) -> str:
    """A short hash of a JSON value (an image's source or URL: compared, never kept)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def arguments_value(text: object) -> object:
    """Tool-call arguments as what they mean: parsed JSON when they parse, else as given
    (clients re-serialise arguments with other spacing and key order)."""
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def _item(part: object, defaults: ArgumentDefaults | None) -> list[object]:
    if isinstance(part, TextPart):
        return ["text", part.text.strip()]
    if isinstance(part, ToolCallPart):
        return call_item(part.call_id, part.name, part.arguments, defaults)
    if isinstance(part, ToolResultPart):
        images = [fingerprint(i.url) for i in part.images]
        return ["result", part.call_id, part.content, part.is_error, images]
    if isinstance(part, ImagePart):
        return ["image", fingerprint(part.url)]
    if isinstance(part, SummaryPart):
        return ["summary", part.text]
    return ["other", type(part).__name__]


DIGEST_MEMO_SIZE = 8_192
"""Messages whose digest is remembered (see :func:`message_digest`)."""
_digests: dict[tuple[str, tuple[object, ...]], bytes] = {}


def message_digest(message: Message, defaults: ArgumentDefaults | None = None) -> bytes:
    """The digest of a neutral message: the same message converted from a framework's types
    twice digests alike.

    Remembered by the message's role and parts (frozen values): a framework hands over its
    whole history on every call, converted anew each time but made of the same strings, whose
    hashes Python keeps, so a lookup costs no pass over a long output (the canonical JSON a
    digest is taken of does). Not with ``defaults``, which change what the digest means."""
    if defaults is not None:
        return _message_digest(message, defaults)
    key = (message.role, message.parts)
    try:
        found = _digests.get(key)
    except TypeError:  # a part holding a mapping (a summary's sections): not remembered
        return _message_digest(message, None)
    if found is None:
        if len(_digests) >= DIGEST_MEMO_SIZE:
            _digests.clear()
        found = _digests[key] = _message_digest(message, None)
    return found


def _message_digest(message: Message, defaults: ArgumentDefaults | None) -> bytes:
    items = [
        _item(p, defaults)
        for p in message.parts
        if not isinstance(p, ThinkingPart) and not (isinstance(p, TextPart) and not p.text.strip())
    ]
    return digest_of(message.role, items)


class DigestCache:
    """Digests already taken, by the exact text of the message they were taken from.

    A host resends its whole history on every call, and almost all of it byte for byte as
    before. The key is a hash of the message's exact wire text (see
    ``contextfold.proxy``'s body reader), far cheaper than the canonical form a digest needs; a
    message resent with other spacing or key order is simply a miss and is digested again. At
    most ``size`` entries are kept, the least recently used dropped first. Thread-safe.
    """

    def __init__(self, size: int = 200_000, runs: int = 128) -> None:
        self.size = size
        self._known: OrderedDict[bytes, bytes] = OrderedDict()
        self._lock = threading.Lock()
        # The last keys looked up under each prefix, by the prefix and their first key, with
        # what was found (see :meth:`lookup_prefixed`).
        self._runs: LRU[bytes, tuple[Sequence[bytes], list[bytes | None]]] = LRU(runs)

    def lookup(self, keys: Sequence[bytes]) -> list[bytes | None]:
        """The digest remembered for each key (None where there is none)."""
        known = self._known
        with self._lock:
            # A whole history is looked up on every request: the loops run in C (map), the
            # keys found made the most recently used.
            found = list(map(known.get, keys))
            hits = compress(keys, map(operator.is_not, found, repeat(None)))
            deque(map(known.move_to_end, hits), maxlen=0)
        return found

    def lookup_prefixed(self, prefix: bytes, keys: Sequence[bytes]) -> list[bytes | None]:
        """``lookup`` of ``prefix + key`` for each of ``keys``: a history resent under the
        same prefix looks up only what it does not share with the last one (its new messages,
        and those not found then). A digest found once stays true (a key names one exact text,
        and the digest is a function of it): one dropped from the cache since is still the
        digest that would be taken again."""
        if not keys:
            return []
        run_key = prefix + keys[0]
        last = self._runs.get(run_key)
        if last is None:
            found = self.lookup(list(map(prefix.__add__, keys)))
        else:
            last_keys, last_found = last
            shared = common_prefix(last_keys, keys, operator.eq)
            found = last_found[:shared]
            # Looked up again: the keys not found last time (remembered since, most of them:
            # the last request's new messages), and the new ones.
            missing = list(compress(range(shared), map(operator.is_, found, repeat(None))))
            again = self.lookup([prefix + keys[i] for i in missing])
            for index, digest in zip(missing, again, strict=True):
                found[index] = digest
            found += self.lookup(list(map(prefix.__add__, keys[shared:])))
        self._runs.put(run_key, (keys, found))
        return list(found)

    def remember(self, pairs: Sequence[tuple[bytes, bytes]]) -> None:
        """Remember each ``(key, digest)``."""
        with self._lock:
            self._known.update(pairs)
            while len(self._known) > self.size:
                self._known.popitem(last=False)
