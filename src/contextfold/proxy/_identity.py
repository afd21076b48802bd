"""Who is calling and which conversation a request continues.

Clients of the proxy resend their whole history on every call. A conversation is recognised by
its prefixes (:mod:`contextfold.hosts.prefixes`, on the store's prefix index). Each protocol
module reduces one wire message to the canonical items of :mod:`contextfold.hosts.digests`
(what it says, not how the client spelled it). Digests are taken from the wire dicts directly,
so a request's long prefix is never converted to neutral messages just to be recognised.

A tenant is a salted hash of the credential the client presented, so sessions of one key are
invisible to every other key, and the key itself is never stored.
"""

from __future__ import annotations

import hashlib

__all__ = ["ANONYMOUS", "tenant_of"]

ANONYMOUS = "anonymous"
"""The tenant of requests that present no credential. Such a request continues its own
conversation (recognised by its whole history, which only its client holds), but it can neither
list sessions nor name one: every keyless client shares this tenant."""


def tenant_of(credential: str | None, salt: bytes) -> str:
    """The tenant a credential belongs to: a salted hash (``anonymous`` without one)."""
    if not credential:
        return ANONYMOUS
    return "t_" + hashlib.blake2b(credential.encode(), key=salt[:64], digest_size=12).hexdigest()
