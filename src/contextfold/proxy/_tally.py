"""Counting what a client sent, without recounting its whole history on every request."""

from __future__ import annotations

import threading
from collections import OrderedDict

from contextfold.proxy._wire import ClientRequest
from contextfold.tokens.counters import TokenCounter

__all__ = ["TokenTally"]

_DEFAULT_SIZE = 200_000


class TokenTally:
    """Tokens of a client's request, by the engine's counter: each message is counted once
    (remembered by its digest, at most ``size`` of them) and only new ones are read."""

    def __init__(self, size: int = _DEFAULT_SIZE) -> None:
        self.size = size
        self._known: OrderedDict[tuple[str, bytes], int] = OrderedDict()
        self._lock = threading.Lock()

    def count(self, counter: TokenCounter, client: ClientRequest) -> int:
        """Prompt tokens of ``client``'s whole request: system, tools and every message."""
        # The counter remembers the system prompt (a long text) and each tool's schema.
        total = counter.count_request([], system=client.system, tools=client.tools)
        name = counter.name  # a property: read once, not once per message
        missing: list[int] = []
        with self._lock:
            known = self._known
            for index, digest in enumerate(client.digests):
                tokens = known.get((name, digest))
                if tokens is None:
                    missing.append(index)
                else:
                    total += tokens
        for index in missing:
            [group] = client.read(index, index + 1)
            tokens = counter.count_messages(group)
            total += tokens
            with self._lock:
                self._known[(name, client.digests[index])] = tokens
                while len(self._known) > self.size:
                    self._known.popitem(last=False)
        return total
