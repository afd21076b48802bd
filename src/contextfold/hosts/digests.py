"""Digests of what a message says, for recognising a history a host resends.

The proxy and the framework integrations are handed a client's whole history on every call and
must tell which messages they already hold. A digest covers what a message says (role, text,
tool calls and results, images) and leaves out what clients change when they resend one: key
order and spacing of tool arguments, thinking (dropped or re-signed), whitespace around text
and text blocks holding only whitespace. :func:`digest_of` is the one canonical form;
:func:`message_digest` reduces a neutral message to it, and the proxy reduces wire dicts to the
same kind of items without converting them first.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from contextfold.messages import (
    ImagePart,
    Message,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)

__all__ = ["arguments_value", "digest_of", "fingerprint", "message_digest"]


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


def _item(part: object) -> list[object]:
    if isinstance(part, TextPart):
        return ["text", part.text.strip()]
    if isinstance(part, ToolCallPart):
        return ["call", part.call_id, part.name, arguments_value(part.arguments)]
    if isinstance(part, ToolResultPart):
        images = [fingerprint(i.url) for i in part.images]
        return ["result", part.call_id, part.content, part.is_error, images]
    if isinstance(part, ImagePart):
        return ["image", fingerprint(part.url)]
    if isinstance(part, SummaryPart):
        return ["summary", part.text]
    return ["other", type(part).__name__]


def message_digest(message: Message) -> bytes:
    """The digest of a neutral message: the same message converted from a framework's types
    twice digests alike."""
    items = [
        _item(p)
        for p in message.parts
        if not isinstance(p, ThinkingPart) and not (isinstance(p, TextPart) and not p.text.strip())
    ]
    return digest_of(message.role, items)
