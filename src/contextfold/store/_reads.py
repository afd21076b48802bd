"""Reading a session back over :class:`~contextfold.store._rows.Rows`: its transcript, edits
and events (lazily, a batch at a time), its snapshot, and the view a resume starts from."""

from __future__ import annotations

from collections.abc import Iterator

from contextfold.messages import Message
from contextfold.store import _codec
from contextfold.store._queries import EDITS_AFTER, EVENTS_AFTER, MESSAGES_AFTER, SNAPSHOT, Cursor
from contextfold.store._records import EditRecord, EventRecord, LoadedView, Snapshot
from contextfold.store._rows import Rows
from contextfold.store.view_rebuild import replay

__all__ = ["edits", "events", "load_view", "messages", "read_snapshot"]


def messages(
    rows: Rows, session_id: str, after_seq: int, upto: int, limit: int | None = None
) -> Iterator[tuple[int, Message]]:
    """``(seq, message)`` pairs with ``after_seq < seq <= upto``, at most ``limit`` of them."""
    for seq, data in rows.batches(MESSAGES_AFTER, session_id, after_seq, upto, limit):
        yield seq, _codec.decode_message(data)


def edits(rows: Rows, session_id: str, after: int, upto: int) -> Iterator[EditRecord]:
    """The edits numbered ``after < number <= upto``, in order."""
    for number, after_seq, data in rows.batches(EDITS_AFTER, session_id, after, upto):
        yield EditRecord(number, after_seq, _codec.decode_edit(data))


def events(rows: Rows, session_id: str, upto: int) -> Iterator[EventRecord]:
    """The events with ids up to ``upto``, in the order they were stored."""
    for eid, event_type, data, created in rows.batches(EVENTS_AFTER, session_id, 0, upto):
        yield EventRecord(eid, event_type, _codec.decode_mapping(data), created)


def read_snapshot(cur: Cursor, session_id: str) -> Snapshot | None:
    """The session's snapshot, or None when it has never been compacted."""
    found = cur.execute(SNAPSHOT, (session_id,))
    if not found:
        return None
    view, tokens, last_seq, last_edit, created = found[0]
    return Snapshot(session_id, _codec.decode_view(view), tokens, last_seq, last_edit, created)


def load_view(rows: Rows, session_id: str) -> LoadedView:
    """The snapshot plus only what the transcript gained after it, in O(snapshot + tail) rows;
    without a snapshot, the whole transcript with every edit applied in transcript order."""
    with rows.transaction("snapshot") as cur:
        last_seq, last_edit = rows.head(cur, session_id)
        snapshot = read_snapshot(cur, session_id)
    # The store is append-only, so reading the tail after this point, bounded by the head
    # just read, sees exactly the state the head describes.
    start_seq = snapshot.last_seq if snapshot else 0
    start_edit = snapshot.last_edit if snapshot else 0
    tail_edits = list(edits(rows, session_id, start_edit, last_edit))
    view, read = replay(
        snapshot.view if snapshot else (),
        messages(rows, session_id, start_seq, last_seq),
        tail_edits,
    )
    return LoadedView(view, snapshot, read, len(tail_edits), last_seq, last_edit)
