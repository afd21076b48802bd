"""The JSONL audit export of one session, streamed in batches."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain
from typing import Any, TextIO

from contextfold.errors import SessionNotFoundError
from contextfold.store._codec import decode_blob, decode_mapping, dumps, redact_line
from contextfold.store._queries import (
    EDITS_AFTER,
    ENGINE_STATE,
    EVENTS_AFTER,
    MESSAGES_AFTER,
    SESSION_SELECT,
    engine_state_text,
    session_info,
)
from contextfold.store._rows import Rows

__all__ = ["export_session"]

_BLOBS_AFTER = (
    "SELECT sha256, ref, tool_name, size, content FROM blobs WHERE session_id = ? "
    "AND sha256 > ? AND sha256 <= ? ORDER BY sha256 LIMIT ?"
)
_HEX_MAX = "g"  # sorts after every lowercase hex digest
_LAST_EVENT = "SELECT COALESCE(MAX(id), 0) FROM events WHERE session_id = ?"


@dataclass(frozen=True, slots=True)
class _Bounds:
    """What the export covers, read in one consistent snapshot."""

    header: dict[str, Any]
    last_seq: int
    last_edit: int
    last_event: int


def export_session(rows: Rows, session_id: str, out: TextIO, *, redact: bool) -> int:
    """Write ``session``, ``message``/``edit`` (transcript order), ``event`` and ``blob`` lines;
    the number of lines.

    The ``session`` line holds the engine's saved state under ``engine_state`` when it has one.

    Bounds are read once in a consistent snapshot, so a writer appending meanwhile cannot make
    the export show an edit without the messages before it. Stored JSON is copied verbatim,
    except that with ``redact`` (a redacting store) each line is redacted again: rows an older
    version wrote were redacted by older, weaker rules.
    """
    bounds = _read_bounds(rows, session_id)
    lines = chain(
        [dumps(bounds.header)],
        _transcript_lines(rows, session_id, bounds),
        _event_lines(rows, session_id, bounds),
        _blob_lines(rows, session_id),
    )
    written = 0
    for line in lines:
        out.write((redact_line(line) if redact else line) + "\n")
        written += 1
    return written


def _read_bounds(rows: Rows, session_id: str) -> _Bounds:
    with rows.transaction("snapshot") as cur:
        session_rows = cur.execute(SESSION_SELECT + " WHERE s.id = ?", (session_id,))
        if not session_rows:
            raise SessionNotFoundError(session_id)
        last_seq, last_edit = rows.head(cur, session_id)
        last_event = int(cur.execute(_LAST_EVENT, (session_id,))[0][0])
        state = engine_state_text(cur.execute(ENGINE_STATE, (session_id,)))
    info = session_info(session_rows[0])
    header: dict[str, Any] = {
        "kind": "session",
        "id": info.id,
        "parent_id": info.parent_id,
        "model": info.model,
        "title": info.title,
        "created": info.created,
        "updated": info.updated,
        "metadata": dict(info.metadata),
        "message_count": last_seq,
    }
    if state is not None:  # the engine's saved state, when it ran the session
        header["engine_state"] = decode_mapping(state)
    return _Bounds(header, last_seq, last_edit, last_event)


def _transcript_lines(rows: Rows, session_id: str, bounds: _Bounds) -> Iterator[str]:
    """Messages in seq order, each edit right after the message it follows."""
    edits = rows.batches(EDITS_AFTER, session_id, 0, bounds.last_edit)
    pending = next(edits, None)
    for seq, data in rows.batches(MESSAGES_AFTER, session_id, 0, bounds.last_seq):
        while pending is not None and pending[1] < seq:
            yield _edit_line(pending)
            pending = next(edits, None)
        yield f'{{"kind":"message","seq":{int(seq)},"message":{data}}}'
    while pending is not None:
        yield _edit_line(pending)
        pending = next(edits, None)


def _edit_line(row: tuple[Any, ...]) -> str:
    number, after_seq, data = row
    return f'{{"kind":"edit","number":{int(number)},"after_seq":{int(after_seq)},"edit":{data}}}'


def _event_lines(rows: Rows, session_id: str, bounds: _Bounds) -> Iterator[str]:
    for event_id, event_type, data, created in rows.batches(
        EVENTS_AFTER, session_id, 0, bounds.last_event
    ):
        event = {
            "kind": "event",
            "id": event_id,
            "event_type": event_type,
            "created": created,
            "data": decode_mapping(data),
        }
        yield dumps(event)


def _blob_lines(rows: Rows, session_id: str) -> Iterator[str]:
    for sha256, ref, tool_name, size, content in rows.batches(
        _BLOBS_AFTER, session_id, "", _HEX_MAX
    ):
        blob = {
            "kind": "blob",
            "ref": ref,
            "sha256": sha256,
            "tool_name": tool_name,
            "size": size,
            "content": decode_blob(content),
        }
        yield dumps(blob)
