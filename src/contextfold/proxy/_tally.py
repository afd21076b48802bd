"""Counting what a client sent, without recounting its whole history on every request."""

from __future__ import annotations

import operator
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import cast

from contextfold.lru import LRU
from contextfold.proxy._wire import ClientRequest
from contextfold.sequences import common_prefix
from contextfold.tokens.counters import TokenCounter

__all__ = ["TokenTally"]

_DEFAULT_SIZE = 200_000


class TokenTally:
    """Tokens of a client's request, by the engine's counter: each message is counted once
    (remembered by its digest, at most ``size`` of them) and only new ones are read. A
    conversation's history is summed once too: the running sums of its last request are taken
    as far as the two share their messages (at most ``runs`` conversations remembered)."""

    def __init__(self, size: int = _DEFAULT_SIZE, runs: int = 256) -> None:
        self.size = size
        self._known: OrderedDict[tuple[str, bytes], int] = OrderedDict()
        # By counter and first digest: the last request's digests, and after each of them the
        # tokens of the messages so far (the first sum is 0).
        self._runs: LRU[tuple[str, bytes], tuple[Sequence[bytes], list[int]]] = LRU(runs)
        self._lock = threading.Lock()

    def count(self, counter: TokenCounter, client: ClientRequest) -> int:
        """Prompt tokens of ``client``'s whole request: system, tools and every message."""
        # The counter remembers the system prompt (a long text) and each tool's schema.
        total = counter.count_request([], system=client.system, tools=client.tools)
        name = counter.name  # a property: read once, not once per message
        digests = client.digests
        if not digests:
            return total
        run_key = (name, digests[0])
        shared = 0
        sums = [0]
        last = self._runs.get(run_key)
        if last is not None:
            # A message's count depends on its digest alone: the sums hold while the digests
            # are the same.
            shared = common_prefix(last[0], digests, operator.eq)
            sums = last[1][: shared + 1]
        with self._lock:
            known = self._known
            counts = [known.get((name, digest)) for digest in digests[shared:]]
        for offset, tokens in enumerate(counts):
            if tokens is None:
                index = shared + offset
                [group] = client.read(index, index + 1)
                tokens = counts[offset] = counter.count_messages(group)
                with self._lock:
                    self._known[(name, digests[index])] = tokens
                    while len(self._known) > self.size:
                        self._known.popitem(last=False)
        running = sums[-1]
        for tokens in counts:
            running += cast(int, tokens)
            sums.append(running)
        self._runs.put(run_key, (digests, sums))
        return total + running
