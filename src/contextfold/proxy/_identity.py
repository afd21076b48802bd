"""Who is calling and which conversation a request continues.

Clients of the proxy resend their whole history on every call. A conversation is recognised by
a hash chain over the client's messages: ``head(k)`` digests the first ``k`` messages. Each
protocol module reduces one wire message to what it says (role, text, tool calls and results,
images) and leaves out what clients change when they resend a reply: key order and spacing,
thinking (dropped or re-signed), whitespace around text, text blocks holding only whitespace.
Digests are taken from the wire dicts directly, so a request's long prefix is never converted
to neutral messages just to be recognised. The store remembers which session holds which head;
the longest head of an incoming request that the tenant has recorded is where it continues.

A tenant is a salted hash of the credential the client presented, so sessions of one key are
invisible to every other key, and the key itself is never stored.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

__all__ = ["chain_heads", "digest_of", "extend_head", "fingerprint", "tenant_of"]


def tenant_of(credential: str | None, salt: bytes) -> str:
    """The tenant a credential belongs to: a salted hash (``anonymous`` without one)."""
    if not credential:
        return "anonymous"
    return "t_" + hashlib.blake2b(credential.encode(), key=salt[:64], digest_size=12).hexdigest()


def fingerprint(value: object) -> str:
    """A short hash of a JSON value (an image's source: compared, never kept)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def digest_of(role: object, items: Sequence[object]) -> bytes:
    """The digest of one message reduced to its role and ``items`` (each a list naming a part:
    ``["text", ...]``, ``["call", id, name, arguments]``, ``["result", id, ...]``...)."""
    text = json.dumps(
        [role, list(items)], ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str
    )
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
