"""A circuit breaker per conversation: stop a client that goes round in circles.

A client whose window is too small for what it does can loop for minutes: the same request
sent again and again, or compaction after compaction that frees nothing while each reply adds
a little (Claude Code at 32k once sent 1,239 requests in 13 minutes). Each looks fine alone.
The breaker watches the pattern, per conversation (a tenant and the first message of its
history), and trips on either:

- the conversation growing by the same step :data:`REPEATS` times in a row (the same calls,
  whatever their ids, with the same results: the model doing the same thing over and over);
- :data:`STALLED_COMPACTIONS` compactions in a row that did not make their minimum progress.

A tripped breaker refuses the request in the client's own protocol (a 400 whose message says
why and what to do), and resets: the client's next, different, request is served again. It
lives in one proxy process; another worker keeps its own count, which only delays a trip.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from contextfold.compaction import CompactResult
from contextfold.messages import Message, TextPart, ToolCallPart, ToolResultPart

__all__ = ["REPEATS", "STALLED_COMPACTIONS", "Breaker", "Tripped", "step_key"]

REPEATS = 4
"""Steps in a row, each the same as the one before, that trip the breaker."""

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
    last_step: str = ""
    last_length: int = 0
    repeats: int = 0
    stalled: int = 0


def step_key(latest: Sequence[Message]) -> str:
    """What a step did, whatever ids the client gave it: the texts, the calls' names and
    canonical arguments, and the results' contents of ``latest`` (a hash)."""
    digest = hashlib.sha256()
    for message in latest:
        digest.update(message.role.encode())
        for part in message.parts:
            if isinstance(part, TextPart):
                digest.update(b"t" + part.text.encode())
            elif isinstance(part, ToolCallPart):
                digest.update(b"c" + part.name.encode() + canonical(part.arguments).encode())
            elif isinstance(part, ToolResultPart):
                digest.update(b"r" + part.content.encode())
    return digest.hexdigest()


def canonical(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), sort_keys=True, separators=(",", ":"))
    except (ValueError, RecursionError):
        return arguments


class Breaker:
    """The counts of the conversations one proxy process serves."""

    def __init__(self, repeats: int = REPEATS, stalled: int = STALLED_COMPACTIONS) -> None:
        self.repeats = repeats
        self.stalled = stalled
        self._counts: OrderedDict[tuple[str, str], _Count] = OrderedDict()
        self._lock = threading.Lock()

    def step(self, tenant: str, conversation: str, step: str, length: int) -> None:
        """A request of ``conversation``, ``length`` messages long, whose latest step (the last
        call and what came of it) is ``step``, arrived; :class:`Tripped` when the conversation
        grew by the same step too many times in a row. The same request again (a retry, or
        identical requests racing) is no step."""
        with self._lock:
            count = self._count(tenant, conversation)
            if step != count.last_step:
                count.repeats = 1
            elif length > count.last_length:
                count.repeats += 1
            count.last_step, count.last_length = step, length
            if count.repeats >= self.repeats:
                self._counts.pop((tenant, conversation), None)
                raise Tripped(
                    f"the same step came back {count.repeats} times in a row (the same calls "
                    "with the same results): the conversation is going round in circles"
                )

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
