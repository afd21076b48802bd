"""Recognising a resent history by its prefixes, on an index any store can offer.

Hosts resend their whole history on every call (the proxy's clients; framework integrations).
A history is recognised by a hash chain over its messages' digests
(:func:`~contextfold.hosts.digests.message_digest` and the protocol readers give them):
``head(k)`` names the first ``k`` messages, in order. A :class:`~contextfold.store.PrefixIndex`
remembers, per tenant, which session holds which prefix and where that session's transcript
stood then. :class:`ResentHistory` is one incoming history against that index: the longest
prefix a stored session holds (continue it while the session still stands there; else fork from
it, linked as its child), and the prefixes to record as the history is appended, so that a later
history sharing only part of this one is recognised too (aider moves its file message after the
history each turn; two conversations that begin alike part where they diverge).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from contextfold.store import PrefixIndex

__all__ = [
    "MemoryPrefixIndex",
    "Prefix",
    "RecentHeads",
    "ResentHistory",
    "chain_heads",
    "extend_head",
]


def chain_heads(digests: Sequence[bytes], known: Sequence[str] = ()) -> list[str]:
    """``head(k)`` for k = 1..len(digests): each the hash of the previous head and the next
    message's digest, so a head names a whole prefix, in order. ``known``: the heads of the
    first messages, already computed (a host that remembers the history it was sent last)."""
    heads = list(known[: len(digests)])
    for digest in digests[len(heads) :]:
        heads.append(extend_head(heads[-1] if heads else "", digest))
    return heads


def extend_head(head: str, digest: bytes) -> str:
    """The head one message further on than ``head`` (``""``: the empty conversation)."""
    return hashlib.sha256(bytes.fromhex(head) + digest).hexdigest()


class RecentHeads:
    """The heads of the histories hosts sent last, one per conversation (a tenant and the
    digest of its first message; at most ``size`` of them): a host's next call resends the
    same history and more, and the heads of what it resends are not computed again.
    Thread-safe."""

    def __init__(self, size: int = 1_024) -> None:
        self.size = size
        self._last: OrderedDict[tuple[str, bytes], tuple[list[bytes], list[str]]] = OrderedDict()
        self._lock = threading.Lock()

    def chain(self, tenant: str, digests: Sequence[bytes]) -> list[str]:
        """``chain_heads(digests)``, from the heads of the conversation's last history as far
        as ``digests`` begins with it; remembered as the conversation's last."""
        if not digests:
            return []
        key = (tenant, digests[0])
        with self._lock:
            last = self._last.get(key)
        known: Sequence[str] = ()
        if last is not None:
            old_digests, old_heads = last
            shared = min(len(digests), len(old_digests))
            if list(digests[:shared]) != old_digests[:shared]:  # rewritten: up to the change
                pairs = zip(digests, old_digests, strict=False)
                shared = next(i for i, (new, old) in enumerate(pairs) if new != old)
            known = old_heads[:shared]
        heads = chain_heads(digests, known)
        with self._lock:
            self._last[key] = (list(digests), heads)
            self._last.move_to_end(key)
            while len(self._last) > self.size:
                self._last.popitem(last=False)
        return heads


@dataclass(frozen=True, slots=True)
class Prefix:
    """A stored session holding the first ``count`` messages of a history; its transcript
    ended at ``seq`` when the prefix was recorded."""

    count: int
    session_id: str
    seq: int


FIRST_LOOKUP = 8
"""How many of the longest prefixes :meth:`ResentHistory.longest` asks the index about first: a
host's next call holds its previous one and the reply (recorded as they were reached), so the
longest recorded prefix is almost always among its last few."""


class ResentHistory:
    """One history as a host resent it, recognised against ``index`` for ``tenant``."""

    def __init__(
        self,
        index: PrefixIndex,
        tenant: str,
        digests: Sequence[bytes],
        *,
        known_heads: Sequence[str] = (),
    ) -> None:
        self.index = index
        self.tenant = tenant
        self.heads = chain_heads(digests, known_heads)
        self.known: dict[str, tuple[str, int]] = {}
        """The history's prefixes the index held when it was read (:meth:`prefixes`, or the
        part :meth:`longest` read)."""
        self._read_from = len(self.heads)
        """``known`` covers the heads from this index on (0: all of them)."""

    def __len__(self) -> int:
        return len(self.heads)

    def prefixes(self) -> list[Prefix]:
        """The recorded prefixes of this history, longest first."""
        self._read_before(0)
        return self._found(0)

    def longest(self) -> Prefix | None:
        """The longest recorded prefix of this history (``prefixes()[0]``; None when there is
        none), asking the index about the longest prefixes first, a few, then four times as
        many, and so on: a steady call costs a lookup of a few heads, not of its whole
        history."""
        size = FIRST_LOOKUP
        while self._read_from > 0:
            start = self._read_from
            self._read_before(max(0, start - size))
            found = self._found(self._read_from, start)
            if found:
                return found[0]
            size *= 4
        return None

    def _read_before(self, start: int) -> None:
        """Read from the index the heads from ``start`` up to where ``known`` already covers."""
        if start < self._read_from:
            self.known.update(
                self.index.find_proxy_heads(self.tenant, self.heads[start : self._read_from])
            )
            self._read_from = start

    def _found(self, start: int, stop: int | None = None) -> list[Prefix]:
        """The recorded prefixes among heads ``start:stop``, longest first."""
        found = []
        for count in range(len(self.heads) if stop is None else stop, start, -1):
            hit = self.known.get(self.heads[count - 1])
            if hit is not None:
                found.append(Prefix(count, hit[0], hit[1]))
        return found

    def continues(self, prefix: Prefix) -> bool:
        """Whether the history goes on in ``prefix``'s session: the session still ends where
        it ended when the prefix was recorded (else it went on without this history: fork)."""
        return self.continued_head(prefix) is not None

    def continued_head(self, prefix: Prefix) -> tuple[int, int] | None:
        """Where ``prefix``'s session's transcript stands (its ``session_head``) when the
        history goes on in it (see :meth:`continues`); None when it does not. One read of the
        index answers both, for a caller that needs the head too."""
        head = self.index.session_head(prefix.session_id)
        return head if head[0] == prefix.seq else None

    def record(self, session_id: str, count: int, seq: int, *, only_new: bool = False) -> None:
        """Note that ``session_id``, its transcript ending at ``seq``, holds the first
        ``count`` messages. ``only_new``: not when another session holds that prefix already
        (the longest-prefix search keeps finding the session it began in)."""
        head = self.heads[count - 1]
        if only_new:
            self._read_before(count - 1)
            if head in self.known:
                return
        self.index.record_proxy_head(self.tenant, head, session_id, count, seq)

    def record_after(self, session_id: str, visible: bytes, seq: int) -> None:
        """Note the prefix the host's next call starts with: this history, then the reply it
        got (``visible``: its digest)."""
        head = extend_head(self.heads[-1], visible)
        self.index.record_proxy_head(self.tenant, head, session_id, len(self.heads) + 1, seq)


class MemoryPrefixIndex:
    """A :class:`~contextfold.store.PrefixIndex` in memory, for one host that keeps its own
    sessions (:class:`~contextfold.hosts.sync.HistorySync`): where a session stands is how many
    messages :meth:`appended` says it holds."""

    def __init__(self) -> None:
        self._heads: dict[tuple[str, str], tuple[str, int]] = {}
        self._held: dict[str, int] = {}

    def appended(self, session_id: str, count: int) -> None:
        """``session_id`` now holds ``count`` messages of its host's history."""
        self._held[session_id] = count

    def record_proxy_head(
        self, tenant: str, head: str, session_id: str, messages: int, seq: int
    ) -> None:
        self._heads[(tenant, head)] = (session_id, seq)

    def find_proxy_heads(self, tenant: str, heads: Sequence[str]) -> dict[str, tuple[str, int]]:
        return {h: self._heads[(tenant, h)] for h in heads if (tenant, h) in self._heads}

    def session_head(self, session_id: str) -> tuple[int, int]:
        return self._held.get(session_id, 0), 0
