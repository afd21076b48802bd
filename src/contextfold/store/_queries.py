"""What the shared store logic needs from a backend, and the SQL it runs.

The SQL uses ``?`` placeholders in both dialects (the PostgreSQL backend translates them), and
no ``%`` or ``?`` characters otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol, TypeAlias

from contextfold.errors import StoreError
from contextfold.store._codec import decode_mapping, state_text
from contextfold.store._records import SessionInfo

__all__ = [
    "EDITS_AFTER",
    "ENGINE_STATE",
    "EVENTS_AFTER",
    "HEAD",
    "MESSAGES_AFTER",
    "NO_LIMIT",
    "SESSION_SELECT",
    "SNAPSHOT",
    "Cursor",
    "DuplicateKeyError",
    "TxMode",
    "engine_state_text",
    "session_info",
]

TxMode: TypeAlias = Literal["read", "snapshot", "write"]
"""``read``: statements run on their own; ``snapshot``: several reads see one consistent state;
``write``: a write transaction that holds the database's (SQLite) or the rows' (Postgres) locks."""

NO_LIMIT = 2**62


class Cursor(Protocol):
    """What a backend transaction offers the shared logic."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement; its result rows (empty for statements without any)."""
        ...

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement once per parameter row."""
        ...


class DuplicateKeyError(StoreError):
    """A backend's translation of a unique-constraint violation (caught and explained here)."""


SESSION_SELECT = (
    "SELECT s.id, s.parent_id, s.model, s.title, s.created, s.updated, s.metadata, "
    "COALESCE((SELECT MAX(m.seq) FROM messages m WHERE m.session_id = s.id), 0) "
    "FROM sessions s"
)
HEAD = (
    "SELECT (SELECT COALESCE(MAX(seq), 0) FROM messages WHERE session_id = ?), "
    "(SELECT COALESCE(MAX(num), 0) FROM edits WHERE session_id = ?) FROM sessions WHERE id = ?"
)
MESSAGES_AFTER = (
    "SELECT seq, data FROM messages WHERE session_id = ? AND seq > ? AND seq <= ? "
    "ORDER BY seq LIMIT ?"
)
EDITS_AFTER = (
    "SELECT num, after_seq, data FROM edits WHERE session_id = ? AND num > ? AND num <= ? "
    "ORDER BY num LIMIT ?"
)
EVENTS_AFTER = (
    "SELECT id, event_type, data, created FROM events WHERE session_id = ? AND id > ? "
    "AND id <= ? ORDER BY id LIMIT ?"
)
ENGINE_STATE = (
    "SELECT s.state_token, p.part, p.value FROM sessions s LEFT JOIN engine_state_parts p "
    "ON p.session_id = s.id WHERE s.id = ? ORDER BY p.position"
)
"""The session's state token and its state's parts in order: no row for no session, one row
with a NULL token for a session without a state (:func:`engine_state_text`)."""
SNAPSHOT = (
    "SELECT view, token_count, last_seq, last_edit, created FROM snapshots WHERE session_id = ?"
)


def engine_state_text(rows: Sequence[Sequence[Any]]) -> str | None:
    """The stored state (JSON object text) from the rows of :data:`ENGINE_STATE`; None when the
    session has none."""
    if not rows or rows[0][0] is None:
        return None
    return state_text((str(part), str(value)) for _, part, value in rows if part is not None)


def session_info(row: Sequence[Any]) -> SessionInfo:
    sid, parent, model, title, created, updated, metadata, count = row
    return SessionInfo(
        sid, parent, model, title, created, updated, decode_mapping(metadata), int(count)
    )
