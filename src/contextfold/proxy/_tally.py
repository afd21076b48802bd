"""Counting what a client sent, without recounting its whole history on every request."""

from __future__ import annotations

import threading
from collections import OrderedDict

from contextfold.proxy._wire import ClientRequest
from contextfold.tokens.counters import TokenCounter

__all__ = ["TokenTally"]

_DEFAULT_SIZE = 200_000
_SYSTEMS_KEPT = 64
"""System prompts whose tokens are remembered (a worker serves a few clients)."""


class TokenTally:
    """Tokens of a client's request, by the engine's counter: each message is counted once
    (remembered by its digest, at most ``size`` of them) and only new ones are read."""

    def __init__(self, size: int = _DEFAULT_SIZE) -> None:
        self.size = size
        self._known: OrderedDict[tuple[str, bytes], int] = OrderedDict()
        self._systems: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._lock = threading.Lock()

    def count(self, counter: TokenCounter, client: ClientRequest) -> int:
        """Prompt tokens of ``client``'s whole request: system, tools and every message."""
        total = counter.count_request([], tools=client.tools)
        total += self._system(counter, client.system)
        missing: list[int] = []
        with self._lock:
            for index, digest in enumerate(client.digests):
                known = self._known.get((counter.name, digest))
                if known is None:
                    missing.append(index)
                else:
                    total += known
        for index in missing:
            [group] = client.read(index, index + 1)
            tokens = counter.count_messages(group)
            total += tokens
            with self._lock:
                self._known[(counter.name, client.digests[index])] = tokens
                while len(self._known) > self.size:
                    self._known.popitem(last=False)
        return total

    def _system(self, counter: TokenCounter, system: str) -> int:
        """What ``system`` adds to a request's tokens, remembered by its text: a client sends
        the same system prompt on every request (Claude Code's is over 10k characters, which
        the counter would read again each time)."""
        if not system:
            return 0
        key = (counter.name, system)
        with self._lock:
            known = self._systems.get(key)
            if known is not None:
                self._systems.move_to_end(key)
                return known
        tokens = counter.count_request([], system=system) - counter.count_request([])
        with self._lock:
            self._systems[key] = tokens
            while len(self._systems) > _SYSTEMS_KEPT:
                self._systems.popitem(last=False)
        return tokens
