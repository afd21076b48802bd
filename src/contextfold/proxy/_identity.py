"""Who is calling and which conversation a request continues.

Clients of the proxy resend their whole history on every call. A conversation is recognised by
a hash chain over the client's messages: ``head(k)`` digests the first ``k`` messages, each
message by what it says (role, text, tool calls and results, images), not by how the client
spelled it (key order, ids the client never sent, thinking blocks some clients drop). The store
remembers which session holds which head; the longest head of an incoming request that the
tenant has recorded is where it continues.

A tenant is a salted hash of the credential the client presented, so sessions of one key are
invisible to every other key, and the key itself is never stored.
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

__all__ = ["chain_heads", "extend_head", "message_digest", "tenant_of"]


def tenant_of(credential: str | None, salt: bytes) -> str:
    """The tenant a credential belongs to: a salted hash (``anonymous`` without one)."""
    if not credential:
        return "anonymous"
    return "t_" + hashlib.blake2b(credential.encode(), key=salt[:64], digest_size=12).hexdigest()


def _arguments(text: str) -> object:
    # Clients re-serialise tool arguments (spacing, key order): compare what they mean.
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def _part(part: object) -> list[object]:
    if isinstance(part, TextPart):
        return ["text", part.text.strip()]
    if isinstance(part, ToolCallPart):
        return ["call", part.call_id, part.name, _arguments(part.arguments)]
    if isinstance(part, ToolResultPart):
        images = [hashlib.sha256(i.url.encode()).hexdigest() for i in part.images]
        return ["result", part.call_id, part.content, part.is_error, images]
    if isinstance(part, ImagePart):
        return ["image", hashlib.sha256(part.url.encode()).hexdigest()]
    if isinstance(part, SummaryPart):
        return ["summary", part.text]
    return ["other", type(part).__name__]


def message_digest(messages: Sequence[Message]) -> bytes:
    """The digest of one client message (which may read as several neutral messages).

    Left out, because clients change them when they resend a reply and they never tell two
    conversations apart: thinking (dropped or re-signed), whitespace around text, and text
    blocks holding nothing but whitespace (trimmed or dropped).
    """
    canonical: list[object] = []
    for message in messages:
        encoded = [
            _part(p)
            for p in message.parts
            if not isinstance(p, ThinkingPart)
            and not (isinstance(p, TextPart) and not p.text.strip())
        ]
        canonical.append([message.role, encoded])
    text = json.dumps(canonical, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).digest()


def chain_heads(digests: Sequence[bytes]) -> list[str]:
    """``head(k)`` for k = 1..len(digests): each the hash of the previous head and the next
    message's digest, so a head names a whole prefix, in order."""
    heads: list[str] = []
    for digest in digests:
        heads.append(extend_head(heads[-1] if heads else "", digest))
    return heads


def extend_head(head: str, digest: bytes) -> str:
    """The head one message further on than ``head`` (``""``: the empty conversation)."""
    return hashlib.sha256(bytes.fromhex(head) + digest).hexdigest()
