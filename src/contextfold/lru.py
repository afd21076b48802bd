"""A thread-safe least-recently-used table: the bounded memory behind the package's caches.

The caches here bound either how many entries they keep or how much their values weigh (the
characters of the texts they hold), and several threads read them (the engine's background
work, the proxy's worker threads), hence the lock. ``functools.lru_cache`` fits neither: it
bounds only entries, and it keys on a function's arguments, where most of these caches key on a
text's (length, hash) so as not to keep a large text alive.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["LRU"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRU(Generic[K, V]):
    """At most ``max_entries`` entries and, with ``weigh``, at most ``max_weight`` of their
    weight in all; the least recently used go first. ``max_entries=0`` keeps nothing, and an
    entry heavier than an eighth of ``max_weight`` is not kept: one huge log would push out
    everything else."""

    def __init__(
        self,
        max_entries: int | None = None,
        *,
        max_weight: int | None = None,
        weigh: Callable[[K, V], int] | None = None,
    ) -> None:
        if (max_weight is None) != (weigh is None):
            raise ValueError("max_weight and weigh go together")
        self.max_entries = max_entries
        self.max_weight = max_weight
        self._weigh = weigh
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._weight = 0
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The value under ``key`` (now the most recently used), or None."""
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        """Keep ``value`` under ``key``, dropping the least recently used beyond the bounds."""
        if self.max_entries == 0:
            return
        weigh = self._weigh
        if (
            weigh is not None
            and self.max_weight is not None
            and (weigh(key, value) > self.max_weight // 8)
        ):
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None and weigh is not None:
                self._weight -= weigh(key, old)
            self._entries[key] = value
            if weigh is not None:
                self._weight += weigh(key, value)
            while self._entries and (
                (self.max_entries is not None and len(self._entries) > self.max_entries)
                or (self.max_weight is not None and self._weight > self.max_weight)
            ):
                dropped_key, dropped = self._entries.popitem(last=False)
                if weigh is not None:
                    self._weight -= weigh(dropped_key, dropped)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._weight = 0

    def __len__(self) -> int:
        return len(self._entries)
