"""Counting what a client sent, without recounting its whole history on every request."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

from contextfold.proxy._wire import ClientRequest
from contextfold.tokens.counters import HeuristicCounter, TiktokenCounter, TokenCounter
from contextfold.tool_spec import ToolSpec

__all__ = ["TokenTally"]

_DEFAULT_SIZE = 200_000

_FIXED_SIZE = 16
"""Requests' fixed parts (system prompt and tools) remembered, for as many clients at once."""

_PURE = (HeuristicCounter, TiktokenCounter)
"""Counters whose count of a request depends on nothing but what they count (their scale is
fixed when made): a count of theirs can be remembered."""


class TokenTally:
    """Tokens of a client's request, by the engine's counter: each message is counted once
    (remembered by its digest, at most ``size`` of them) and only new ones are read."""

    def __init__(self, size: int = _DEFAULT_SIZE) -> None:
        self.size = size
        self._known: OrderedDict[tuple[str, bytes], int] = OrderedDict()
        self._lock = threading.Lock()
        # (counter, tools, system) -> their count, by the counter and tools themselves (held).
        self._fixed: dict[tuple[int, int], tuple[TokenCounter, tuple[ToolSpec, ...], str, int]]
        self._fixed = {}

    def count(self, counter: TokenCounter, client: ClientRequest) -> int:
        """Prompt tokens of ``client``'s whole request: system, tools and every message."""
        total = self._fixed_part(counter, client.system, client.tools)
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

    def _fixed_part(self, counter: TokenCounter, system: str, tools: Sequence[ToolSpec]) -> int:
        """``counter.count_request([], system=system, tools=tools)``, remembered for the same
        tool specs (the very tuple: a client that resends its tools unchanged gets the same
        one, see :class:`~contextfold.wire.anthropic_models.CheckedValues`) and system text.
        Claude Code's 26 tools took 0.3 ms to count again (each schema written as JSON)."""
        if not isinstance(counter, _PURE) or not isinstance(tools, tuple):
            return counter.count_request([], system=system, tools=tools)
        key = (id(counter), id(tools))
        with self._lock:
            entry = self._fixed.get(key)
        if entry is not None and entry[0] is counter and entry[1] is tools and entry[2] == system:
            return entry[3]
        tokens = counter.count_request([], system=system, tools=tools)
        with self._lock:
            if len(self._fixed) >= _FIXED_SIZE:
                self._fixed.clear()
            self._fixed[key] = (counter, tools, system, tokens)
        return tokens
