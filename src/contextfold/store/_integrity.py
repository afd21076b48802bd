"""The store's own invariants, checked row by row (``contextfold doctor``, crash tests).

Besides the rows themselves, each session's snapshot is compared with a replay of its transcript
and edits up to the snapshot's point: a snapshot that no replay gives is a forked view that
every resume would silently continue from. The whole check reads each row once (O(store));
memory holds one session's edits and its replayed messages up to its snapshot at a time.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from itertools import takewhile
from typing import Any

from contextfold.errors import SessionNotFoundError
from contextfold.messages import Message
from contextfold.outputs.blobs import ref_for_sha256
from contextfold.store._codec import decode_edit, decode_mapping, decode_message, decode_view
from contextfold.store._queries import ENGINE_STATE, engine_state_text
from contextfold.store._records import EditRecord
from contextfold.store._rows import Rows
from contextfold.store.view_rebuild import replay

__all__ = ["PROXY_METADATA_KEY", "check_rows", "proxy_damage", "proxy_problems"]

_MESSAGE_ROWS = (
    "SELECT seq, id, role, data FROM messages WHERE session_id = ? AND seq > ? AND seq <= ? "
    "ORDER BY seq LIMIT ?"
)
_EDIT_ROWS = (
    "SELECT num, after_seq, data FROM edits WHERE session_id = ? AND num > ? AND num <= ? "
    "ORDER BY num LIMIT ?"
)
_EVENT_ROWS = (
    "SELECT id, data FROM events WHERE session_id = ? AND id > ? AND id <= ? ORDER BY id LIMIT ?"
)
_BLOB_ROWS = (
    "SELECT sha256, ref FROM blobs WHERE session_id = ? AND sha256 > ? AND sha256 <= ? "
    "ORDER BY sha256 LIMIT ?"
)
_SNAPSHOT_POINT = "SELECT view, last_seq, last_edit FROM snapshots WHERE session_id = ?"
_ORPHANS = (
    "SELECT '{table}', COUNT(*) FROM {table} WHERE session_id NOT IN (SELECT id FROM sessions)"
)
_UNBOUNDED = 2**62


def check_rows(rows: Rows) -> list[str]:
    """Every invariant violation in the store, as readable lines (empty when sound)."""
    problems: list[str] = []
    with rows.transaction("snapshot") as cur:
        sessions = [
            (str(r[0]), str(r[1])) for r in cur.execute("SELECT id, metadata FROM sessions")
        ]
        for table in (
            "messages",
            "edits",
            "events",
            "snapshots",
            "blobs",
            "engine_state_parts",
        ):
            _, count = cur.execute(_ORPHANS.format(table=table))[0]
            if count:
                problems.append(f"{table}: {count} rows belong to no session")
    for session_id, metadata in sessions:
        problems.extend(_check_session(rows, session_id, metadata))
    problems.extend(proxy_problems(rows))
    return problems


def _check_session(rows: Rows, session_id: str, metadata: str) -> list[str]:
    where = f"session {session_id!r}"
    problems: list[str] = []
    try:
        decode_mapping(metadata)
    except ValueError as exc:
        problems.append(f"{where}: metadata does not parse: {exc}")

    # One consistent point: rows appended while the check runs are not part of it.
    try:
        with rows.transaction("snapshot") as cur:
            last_seq, last_edit = rows.head(cur, session_id)
            snapshot_rows = cur.execute(_SNAPSHOT_POINT, (session_id,))
            state = engine_state_text(cur.execute(ENGINE_STATE, (session_id,)))
    except SessionNotFoundError:
        return problems  # deleted since the check listed it
    snapshot = (
        _snapshot_at(snapshot_rows[0], last_seq, last_edit, where, problems)
        if snapshot_rows
        else None
    )

    edits = _checked_edits(rows, session_id, last_seq, last_edit, where, problems)
    messages = _checked_messages(rows, session_id, last_seq, where, problems)
    if snapshot is not None:
        view, snap_seq, snap_edit = snapshot
        found = len(problems)
        replayed, _ = replay(
            (),
            takewhile(lambda item: item[0] <= snap_seq, messages),
            [record for record in edits if record.number <= snap_edit],
        )
        # A row that does not parse is reported already; a replay without it proves nothing.
        if len(problems) == found and list(view) != replayed:
            problems.append(
                f"{where}: the snapshot at seq {snap_seq}/edit {snap_edit} is not what a replay "
                f"of the transcript and its edits gives ({_first_difference(view, replayed)}): "
                "a resume would see a forked view (a writer that fell behind saved it?)"
            )
    deque(messages, maxlen=0)  # the rest of the transcript is checked all the same

    if state is not None:
        try:
            decode_mapping(state)
        except ValueError as exc:
            problems.append(f"{where}: engine state does not parse: {exc}")

    for event_id, data in rows.batches(_EVENT_ROWS, session_id, 0, _UNBOUNDED):
        try:
            decode_mapping(data)
        except ValueError as exc:
            problems.append(f"{where}: event {event_id} does not parse: {exc}")

    for sha256, ref in rows.batches(_BLOB_ROWS, session_id, "", "g"):
        if ref != ref_for_sha256(sha256):
            problems.append(f"{where}: blob {sha256} has ref {ref!r}, not its digest's")
    return problems


def _snapshot_at(
    row: tuple[Any, ...], last_seq: int, last_edit: int, where: str, problems: list[str]
) -> tuple[tuple[Message, ...], int, int] | None:
    """The snapshot's view and point, when it parses and lies within the transcript."""
    data, snap_seq, snap_edit = row
    if snap_seq > last_seq or snap_edit > last_edit:
        problems.append(
            f"{where}: snapshot at seq {snap_seq}/edit {snap_edit} points past the transcript "
            f"(seq {last_seq}/edit {last_edit})"
        )
        return None
    try:
        return decode_view(data), int(snap_seq), int(snap_edit)
    except (ValueError, KeyError, TypeError) as exc:
        problems.append(f"{where}: snapshot view does not parse: {exc}")
        return None


def _checked_edits(
    rows: Rows, session_id: str, last_seq: int, last_edit: int, where: str, problems: list[str]
) -> list[EditRecord]:
    """The session's edits that parse; numbering, order and parse problems go to ``problems``."""
    records: list[EditRecord] = []
    previous, previous_after = 0, 0
    for number, after_seq, data in rows.batches(_EDIT_ROWS, session_id, 0, last_edit):
        if number != previous + 1:
            problems.append(f"{where}: edit {number} follows {previous} (a gap)")
        if not previous_after <= after_seq <= last_seq:
            problems.append(f"{where}: edit {number} sits after message {after_seq}, out of order")
        previous, previous_after = number, after_seq
        try:
            records.append(EditRecord(number, after_seq, decode_edit(data)))
        except (ValueError, KeyError, TypeError) as exc:
            problems.append(f"{where}: edit {number} does not parse: {exc}")
    return records


def _checked_messages(
    rows: Rows, session_id: str, last_seq: int, where: str, problems: list[str]
) -> Iterator[tuple[int, Message]]:
    """The session's messages that parse, read lazily; gaps and bad rows go to ``problems``."""
    previous = 0
    for seq, message_id, role, data in rows.batches(_MESSAGE_ROWS, session_id, 0, last_seq):
        if seq != previous + 1:
            problems.append(f"{where}: message seq {seq} follows {previous} (a gap)")
        previous = seq
        try:
            message = decode_message(data)
        except (ValueError, KeyError, TypeError) as exc:
            problems.append(f"{where}: message seq {seq} does not parse: {exc}")
            continue
        if message.id != message_id or message.role != role:
            problems.append(f"{where}: message seq {seq} row disagrees with its JSON")
        yield seq, message


def _first_difference(snapshot: Sequence[Message], replayed: Sequence[Message]) -> str:
    """Where two views part, in words."""
    for index, (kept, rebuilt) in enumerate(zip(snapshot, replayed, strict=False)):
        if kept != rebuilt:
            if kept.id == rebuilt.id:
                return f"message {index} ({kept.id!r}) differs"
            return f"message {index} is {kept.id!r} in the snapshot, {rebuilt.id!r} in the replay"
    return f"the snapshot holds {len(snapshot)} messages, the replay {len(replayed)}"


# --------------------------------------------------------------------------------------------------
# the proxy's index: partial sessions and heads that point nowhere
# --------------------------------------------------------------------------------------------------

PROXY_METADATA_KEY = "proxy"
"""The metadata key ``contextfold proxy`` keeps a session's tenant and figures under."""

_DANGLING_HEADS = (
    "SELECT p.tenant, p.head, p.session_id, p.seq FROM proxy_heads p "
    "WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = p.session_id) "
    "OR p.seq > (SELECT COALESCE(MAX(m.seq), 0) FROM messages m WHERE m.session_id = p.session_id)"
)
_UNINDEXED_SESSIONS = (
    "SELECT s.id, s.metadata FROM sessions s "
    "WHERE NOT EXISTS (SELECT 1 FROM proxy_heads p WHERE p.session_id = s.id) "
    "AND NOT EXISTS (SELECT 1 FROM sessions c WHERE c.parent_id = s.id)"
)


def proxy_damage(rows: Rows) -> tuple[list[str], list[tuple[str, str, str, int]]]:
    """What a crash in the middle of a proxied request could leave, in one consistent read:
    partial sessions, and proxy heads that point nowhere.

    A *partial* session is one the proxy made (its metadata carries :data:`PROXY_METADATA_KEY`)
    that no conversation prefix leads to, that never finished a request (no ``requests``
    figure), and that no other session continues: a session or fork whose copy of the client's
    history a crash cut short (the proxy now writes one in a single transaction). The client
    still holds everything it held, and no request can reach it. A head points *nowhere* when
    its session is gone or ends before the seq the head was recorded at.
    """
    with rows.transaction("snapshot") as cur:
        dangling = [(str(t), str(h), str(s), int(q)) for t, h, s, q in cur.execute(_DANGLING_HEADS)]
        candidates = cur.execute(_UNINDEXED_SESSIONS)
    partial = []
    for session_id, metadata in candidates:
        try:
            figures = decode_mapping(metadata).get(PROXY_METADATA_KEY)
        except ValueError:
            continue  # reported by the row checks; not ours to judge
        if isinstance(figures, dict) and not figures.get("requests"):
            partial.append(str(session_id))
    return sorted(partial), dangling


def proxy_problems(rows: Rows) -> list[str]:
    """:func:`proxy_damage` as readable lines."""
    partial, dangling = proxy_damage(rows)
    lines = [
        f"session {sid!r}: partial (made by the proxy, reached by no conversation, never "
        "answered; a crash cut its copy short)"
        for sid in partial
    ]
    lines.extend(
        f"proxy head {head[:12]}… of tenant {tenant!r} points nowhere (session {sid!r} at seq "
        f"{seq})"
        for tenant, head, sid, seq in dangling
    )
    return lines
