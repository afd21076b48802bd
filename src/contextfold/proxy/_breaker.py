"""A circuit breaker per conversation: stop a client that goes round in circles.

A client whose window is too small for what it does can loop for minutes: the same request
sent again and again, or compaction after compaction that frees nothing while each reply adds
a little (Claude Code at 32k once sent 1,239 requests in 13 minutes). Each looks fine alone.
The breaker watches the pattern, per conversation (a tenant and the first message of its
history), and trips on either:

- the same request :data:`REPEATS` times in a row (identical history, answered each time but
  the last);
- :data:`STALLED_COMPACTIONS` compactions in a row that did not make their minimum progress.

A tripped breaker refuses the request in the client's own protocol (a 400 whose message says
why and what to do), and resets: the client's next, different, request is served again. It
lives in one proxy process; another worker keeps its own count, which only delays a trip.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from contextfold.compaction import CompactResult

__all__ = ["REPEATS", "STALLED_COMPACTIONS", "Breaker", "Tripped"]

REPEATS = 4
"""Identical requests in a row that trip the breaker (a client's own retries stay below)."""

STALLED_COMPACTIONS = 3
"""Compactions in a row that freed less than their minimum progress."""

_KEPT = 4_096
"""Conversations a breaker remembers (the least recently seen are forgotten)."""


class Tripped(Exception):
    """The conversation is going round in circles; ``reason`` says how."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class _Count:
    last_request: str = ""
    repeats: int = 0
    stalled: int = 0


class Breaker:
    """The counts of the conversations one proxy process serves."""

    def __init__(self, repeats: int = REPEATS, stalled: int = STALLED_COMPACTIONS) -> None:
        self.repeats = repeats
        self.stalled = stalled
        self._counts: OrderedDict[tuple[str, str], _Count] = OrderedDict()
        self._lock = threading.Lock()

    def request(self, tenant: str, conversation: str, request: str) -> None:
        """A request of ``conversation`` whose whole history hashes to ``request`` arrived;
        :class:`Tripped` when the same one was answered too many times in a row already."""
        with self._lock:
            count = self._count(tenant, conversation)
            if request == count.last_request and count.repeats + 1 >= self.repeats:
                self._counts.pop((tenant, conversation), None)
                raise Tripped(
                    f"the same request came {count.repeats + 1} times in a row; the proxy "
                    "answered it each time, and the conversation did not move on"
                )

    def answered(self, tenant: str, conversation: str, request: str) -> None:
        """The request hashing to ``request`` got its reply."""
        with self._lock:
            count = self._count(tenant, conversation)
            count.repeats = count.repeats + 1 if request == count.last_request else 1
            count.last_request = request

    def compacted(self, tenant: str, conversation: str, result: CompactResult | None) -> None:
        """A request was prepared, with ``result`` the compaction it ran (None: none);
        :class:`Tripped` when compactions keep failing to make progress."""
        if result is None:
            return
        with self._lock:
            count = self._count(tenant, conversation)
            count.stalled = count.stalled + 1 if result.failed else 0
            if count.stalled >= self.stalled:
                self._counts.pop((tenant, conversation), None)
                raise Tripped(
                    f"{count.stalled} compactions in a row freed less than their minimum "
                    f"progress (the latest: {result.reason or 'nothing to remove'})"
                )

    def _count(self, tenant: str, conversation: str) -> _Count:
        key = (tenant, conversation)
        count = self._counts.pop(key, None) or _Count()
        self._counts[key] = count
        while len(self._counts) > _KEPT:
            self._counts.popitem(last=False)
        return count
