"""Who is calling and which conversation a request continues.

Clients of the proxy resend their whole history on every call. A conversation is recognised by
a hash chain over the client's messages: ``head(k)`` digests the first ``k`` messages. Each
protocol module reduces one wire message to the canonical items of :mod:`contextfold.hosts.digests`
(what it says, not how the client spelled it). Digests are taken from the wire dicts directly,
so a request's long prefix is never converted to neutral messages just to be recognised. The
store remembers which session holds which head; the longest head of an incoming request that
the tenant has recorded is where it continues.

A tenant is a salted hash of the credential the client presented, so sessions of one key are
invisible to every other key, and the key itself is never stored.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

__all__ = ["ANONYMOUS", "chain_heads", "extend_head", "tenant_of"]

ANONYMOUS = "anonymous"
"""The tenant of requests that present no credential. Such a request continues its own
conversation (recognised by its whole history, which only its client holds), but it can neither
list sessions nor name one: every keyless client shares this tenant."""


def tenant_of(credential: str | None, salt: bytes) -> str:
    """The tenant a credential belongs to: a salted hash (``anonymous`` without one)."""
    if not credential:
        return ANONYMOUS
    return "t_" + hashlib.blake2b(credential.encode(), key=salt[:64], digest_size=12).hexdigest()


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
