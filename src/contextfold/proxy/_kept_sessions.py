"""Sessions a worker keeps between requests, so a conversation's next request skips reloading
its whole view from the store.

The store stays the truth: a kept session is used only while the store's head for it (last
message seq, last edit) is the one its writer saw. Another worker that wrote meanwhile makes it
stale, and the request reloads from the store. A kept session is taken out while a request uses
it, so two requests in one worker never share one.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from contextfold.engine import Session

__all__ = ["KeptSessions"]

_DEFAULT_SIZE = 256


class KeptSessions:
    """The most recently used sessions of one engine, at most ``size`` of them."""

    def __init__(self, size: int = _DEFAULT_SIZE) -> None:
        self.size = size
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, session_id: str, stored_head: tuple[int, int]) -> Session | None:
        """The kept session, if it is still where the store stands (``stored_head``); it is
        no longer kept until :meth:`keep` gives it back."""
        with self._lock:
            session = self._sessions.pop(session_id, None)
        if session is None or session.stored_head != stored_head:
            return None
        return session

    def keep(self, session: Session) -> None:
        """Keep ``session`` for the next request of its conversation."""
        with self._lock:
            self._sessions[session.id] = session
            self._sessions.move_to_end(session.id)
            while len(self._sessions) > self.size:
                self._sessions.popitem(last=False)
