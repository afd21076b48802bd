"""The sessions this worker is answering a request in right now.

Two identical requests (a client's retry racing its original, or one conversation sent twice)
find the same session. Only one reply can follow the question in it; the other reply must go to
a fork. Deciding that when the first reply is written is too late for the ``x-contextfold-session``
header of a streamed answer, sent before the reply exists: so a request that finds its session
taken by another request of this worker forks at once, and its header names the fork. Across
workers the race is still settled when the reply is written (see ``Conversation.add_reply``).

A claim outlives its request only when the request was abandoned without its cleanup running
(a client gone before its stream started): it lapses after ``lapse`` seconds.
"""

from __future__ import annotations

import threading
import time

__all__ = ["InFlight"]


class InFlight:
    """Claims on sessions, one request each (see the module docstring)."""

    def __init__(self, lapse: float) -> None:
        self.lapse = lapse
        self._lock = threading.Lock()
        self._claims: dict[str, float] = {}

    def claim(self, session_id: str) -> bool:
        """Take ``session_id`` for one request; False when another request holds it."""
        now = time.monotonic()
        with self._lock:
            since = self._claims.get(session_id)
            if since is not None and now - since < self.lapse:
                return False
            self._claims[session_id] = now
            return True

    def release(self, session_id: str) -> None:
        """The request that held ``session_id`` is over."""
        with self._lock:
            self._claims.pop(session_id, None)
