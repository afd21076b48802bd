"""The JSONL audit export of one session, streamed in batches."""

from __future__ import annotations

from typing import Any, TextIO

from contextfold._exceptions import SessionNotFoundError
from contextfold.store._codec import decode_blob, decode_mapping, dumps, redact_line
from contextfold.store._queries import (
    EDITS_AFTER,
    ENGINE_STATE,
    EVENTS_AFTER,
    MESSAGES_AFTER,
    SESSION_SELECT,
    session_info,
)
from contextfold.store._rows import Rows

__all__ = ["export_session"]

_BLOBS_AFTER = (
    "SELECT sha256, ref, tool_name, size, content FROM blobs WHERE session_id = ? "
    "AND sha256 > ? AND sha256 <= ? ORDER BY sha256 LIMIT ?"
)
_HEX_MAX = "g"  # sorts after every lowercase hex digest


def export_session(rows: Rows, session_id: str, out: TextIO, *, redact: bool) -> int:
    """Write ``session``, ``message``/``edit`` (transcript order), ``event`` and ``blob`` lines.

    The ``session`` line holds the engine's saved state under ``engine_state`` when it has one.

    Bounds are read once in a consistent snapshot, so a writer appending meanwhile cannot make
    the export show an edit without the messages before it. Stored JSON is copied verbatim,
    except that with ``redact`` (a redacting store) each line is redacted again: rows an older
    version wrote were redacted by older, weaker rules.
    """
    with rows.transaction("snapshot") as cur:
        session_rows = cur.execute(SESSION_SELECT + " WHERE s.id = ?", (session_id,))
        if not session_rows:
            raise SessionNotFoundError(session_id)
        last_seq, last_edit = rows.head(cur, session_id)
        last_event = int(
            cur.execute(
                "SELECT COALESCE(MAX(id), 0) FROM events WHERE session_id = ?", (session_id,)
            )[0][0]
        )
        state_rows = cur.execute(ENGINE_STATE, (session_id,))
    info = session_info(session_rows[0])
    lines = 0

    def write(line: str) -> None:
        nonlocal lines
        out.write((redact_line(line) if redact else line) + "\n")
        lines += 1

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
    if state_rows:  # the engine's saved state, when it ran the session
        header["engine_state"] = decode_mapping(state_rows[0][0])
    write(dumps(header))

    def edit_line(row: tuple[Any, ...]) -> str:
        number, after_seq, data = row
        return (
            f'{{"kind":"edit","number":{int(number)},"after_seq":{int(after_seq)},"edit":{data}}}'
        )

    edits = rows.batches(EDITS_AFTER, session_id, 0, last_edit)
    pending = next(edits, None)
    for seq, data in rows.batches(MESSAGES_AFTER, session_id, 0, last_seq):
        while pending is not None and pending[1] < seq:
            write(edit_line(pending))
            pending = next(edits, None)
        write(f'{{"kind":"message","seq":{int(seq)},"message":{data}}}')
    while pending is not None:
        write(edit_line(pending))
        pending = next(edits, None)

    for event_id, event_type, data, created in rows.batches(
        EVENTS_AFTER, session_id, 0, last_event
    ):
        event = {
            "kind": "event",
            "id": event_id,
            "event_type": event_type,
            "created": created,
            "data": decode_mapping(data),
        }
        write(dumps(event))

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
        write(dumps(blob))
    return lines
