"""The Agents SDK session's own item list, kept as an append-only log of events in the store.

contextfold's transcript is append-only and holds neutral messages; the SDK wants its items back
exactly as it gave them, and may pop the last one or clear the list. So each change is an event
(``openai_agents.add`` / ``.pop`` / ``.clear``) on the conversation's home session, and the list
is the log replayed: lossless, in whatever store the engine uses, and nothing stored rewritten.
"""

from __future__ import annotations

from typing import Any

from contextfold.integrations._openai_agents_items import Item, json_copy
from contextfold.store import BrowsableSessionStore, SessionStore

__all__ = ["ItemLog"]

ADD = "openai_agents.add"
POP = "openai_agents.pop"
CLEAR = "openai_agents.clear"
VIEW_SESSION = "openai_agents.view_session"
"""Which contextfold session holds the engine's view now (it moves when the list is rewritten)."""


class ItemLog:
    """The items of one SDK session, replayed from the store once and then kept in memory."""

    def __init__(self, store: SessionStore, session_id: str) -> None:
        self._store = store
        self._session_id = session_id
        self.items: list[Item] = []
        self.view_session: str | None = None
        if isinstance(store, BrowsableSessionStore):
            self._replay(store)

    def _replay(self, store: BrowsableSessionStore) -> None:
        for event in store.iter_events(self._session_id):
            data: dict[str, Any] = event.data
            if event.event_type == ADD:
                self.items.extend(data["items"])
            elif event.event_type == POP and self.items:
                self.items.pop()
            elif event.event_type == CLEAR:
                self.items.clear()
            elif event.event_type == VIEW_SESSION:
                self.view_session = str(data["id"])

    def add(self, items: list[Item]) -> None:
        if items:
            # One copy for both: the store encodes it (or keeps it, in memory), and the log's
            # items are never changed in place (a pop or clear changes the list only).
            copied = json_copy(items)
            self._store.append_event(self._session_id, ADD, {"items": copied})
            self.items.extend(copied)

    def pop(self) -> Item | None:
        if not self.items:
            return None
        self._store.append_event(self._session_id, POP, {})
        return self.items.pop()

    def clear(self) -> None:
        self._store.append_event(self._session_id, CLEAR, {})
        self.items.clear()

    def moved_view(self, session_id: str) -> None:
        if session_id != self.view_session:
            self._store.append_event(self._session_id, VIEW_SESSION, {"id": session_id})
            self.view_session = session_id
