"""JSON text for stored rows, with secret redaction applied on the way in.

Rows hold JSON as text (not Postgres ``jsonb``): text keeps the exact serialized form, and tool
output may contain NUL characters, which ``jsonb`` rejects but an escaped ``\\u0000`` inside
JSON text stores fine.
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from contextfold.edits import ContextEdit, edit_from_dict, edit_to_dict
from contextfold.messages import Message
from contextfold.store._redact import redact_json, redact_text

__all__ = [
    "EncodedMessages",
    "decode_blob",
    "decode_edit",
    "decode_message",
    "decode_view",
    "dumps",
    "encode_blob",
    "encode_edit",
    "encode_json",
    "encode_message",
    "encode_view",
]

# A lone surrogate (tool output decoded with errors="surrogateescape") cannot be encoded as
# UTF-8 for the database driver; escaped as \udcxx in ASCII JSON it round-trips exactly.
_SURROGATE = re.compile("[\ud800-\udfff]")


def dumps(value: Any) -> str:
    """Compact JSON text of ``value`` that any UTF-8 database column accepts."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if _SURROGATE.search(text):
        text = json.dumps(value, ensure_ascii=True, separators=(",", ":"))
    return text


def encode_json(value: Any, *, redact: bool) -> str:
    """JSON text of a JSON value, secrets redacted when ``redact`` is true."""
    return _encode(value, redact)[0]


def _encode(value: Any, redact: bool) -> tuple[str, bool]:
    """JSON text of ``value``, and whether redaction changed it."""
    text = dumps(value)
    if redact:
        redacted = redact_json(value, text)
        if redacted is not value:
            cleaned = dumps(redacted)
            return cleaned, cleaned != text
    return text, False


class EncodedMessages:
    """The stored JSON of messages already encoded, remembered by object.

    A snapshot holds the whole view, and the view repeats the same (immutable) message objects
    turn after turn: only the messages compaction replaced since the last snapshot need encoding
    and redacting again. Bounded by the characters it holds; the least recently used go first.
    Holding each message keeps its ``id()`` from being reused while its entry lives.
    """

    def __init__(self, max_chars: int = 32 * 1024 * 1024) -> None:
        self.max_chars = max_chars
        self._chars = 0
        self._entries: OrderedDict[int, tuple[Message, str, bool]] = OrderedDict()
        self._lock = threading.Lock()

    def encode(self, message: Message, *, redact: bool) -> tuple[str, bool]:
        """The stored JSON of ``message``, and whether redaction changed it."""
        key = id(message)
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None and hit[0] is message:
                self._entries.move_to_end(key)
                return hit[1], hit[2]
        text, redacted = _encode(message.to_dict(), redact)
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._chars -= len(old[1])
            self._entries[key] = (message, text, redacted)
            self._chars += len(text)
            while self._chars > self.max_chars and len(self._entries) > 1:
                _, (_, dropped, _) = self._entries.popitem(last=False)
                self._chars -= len(dropped)
        return text, redacted


def encode_message(message: Message, *, redact: bool, cache: EncodedMessages | None = None) -> str:
    """The stored JSON of one message."""
    if cache is not None:
        return cache.encode(message, redact=redact)[0]
    return encode_json(message.to_dict(), redact=redact)


def decode_message(data: str) -> Message:
    """Inverse of :func:`encode_message`."""
    return Message.from_dict(json.loads(data))


def encode_edit(edit: ContextEdit, *, redact: bool) -> str:
    """The stored JSON of one context edit."""
    return encode_json(edit_to_dict(edit), redact=redact)


def decode_edit(data: str) -> ContextEdit:
    """Inverse of :func:`encode_edit`."""
    return edit_from_dict(json.loads(data))


def encode_view(
    view: Sequence[Message], *, redact: bool, cache: EncodedMessages | None = None
) -> tuple[str, bool]:
    """The stored JSON of a snapshot's view (a list of messages), and whether redaction
    changed any message."""
    if cache is None:
        encoded = [_encode(m.to_dict(), redact) for m in view]
    else:
        encoded = [cache.encode(m, redact=redact) for m in view]
    return "[" + ",".join(text for text, _ in encoded) + "]", any(r for _, r in encoded)


def decode_view(data: str) -> tuple[Message, ...]:
    """Inverse of :func:`encode_view`."""
    return tuple(Message.from_dict(item) for item in json.loads(data))


def decode_mapping(data: str) -> dict[str, Any]:
    """A stored JSON object (session metadata, event data)."""
    value = json.loads(data)
    if not isinstance(value, Mapping):
        raise ValueError(f"expected a JSON object, found {type(value).__name__}")
    return dict(value)


def encode_blob(content: str, *, redact: bool) -> bytes:
    """The stored bytes of a tool output (bytes, because text columns refuse NUL characters)."""
    if redact:
        content = redact_text(content)
    return content.encode("utf-8", errors="surrogatepass")


def decode_blob(data: bytes | memoryview) -> str:
    """Inverse of :func:`encode_blob`."""
    return bytes(data).decode("utf-8", errors="surrogatepass")
