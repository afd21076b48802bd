"""Transcript-order replay: the one rule that turns stored messages and edits into a view."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence

from contextfold.edits import apply_edit
from contextfold.messages import Message
from contextfold.store._records import EditRecord

__all__ = ["EditObserver", "replay", "snapshot_point_problem"]


EditObserver = Callable[[EditRecord, list[Message], list[Message]], None]
"""Called with each edit as :func:`replay` applies it, and the view before and after it."""


def replay(
    view: Sequence[Message],
    messages: Iterable[tuple[int, Message]],
    edits: Sequence[EditRecord],
    *,
    on_edit: EditObserver | None = None,
) -> tuple[list[Message], int]:
    """``view`` continued by ``messages`` and ``edits`` in transcript order; and how many
    messages were read.

    An edit recorded with ``after_seq = k`` applies after message ``k`` and before ``k + 1``, so
    a view rebuilt from a snapshot equals the view rebuilt from the whole transcript.
    Agent-invisible messages stay out of the view, as in :func:`contextfold.edits.apply_edits`.
    ``on_edit`` sees each edit with the view it changed (``contextfold inspect`` counts what
    each one took out).
    """
    out = list(view)
    # Edits are numbered in the order they were recorded, so their after_seq never decreases;
    # sorting by it anyway keeps a hand-edited database from reordering the replay silently.
    pending = deque(sorted(edits, key=lambda r: (r.after_seq, r.number)))

    def apply_next() -> None:
        nonlocal out
        record = pending.popleft()
        before, out = out, apply_edit(out, record.edit)
        if on_edit is not None:
            on_edit(record, before, out)

    read = 0
    for seq, message in messages:
        while pending and pending[0].after_seq < seq:
            apply_next()
        if message.meta.agent_visible:
            out.append(message)
        read += 1
    while pending:
        apply_next()
    return out, read


def snapshot_point_problem(
    last_seq: int,
    last_edit: int,
    current_seq: int,
    current_edit: int,
    after_seq_of: Mapping[int, int],
) -> str | None:
    """Why a snapshot claiming ``(last_seq, last_edit)`` is not a point of the transcript, or None.

    ``after_seq_of`` maps edit numbers ``last_edit`` and ``last_edit + 1`` (when they exist) to
    their ``after_seq``. A valid point includes every edit recorded before message ``last_seq``
    and none recorded after it: anything else is a view no replay would produce.
    """
    if not (0 <= last_seq <= current_seq and 0 <= last_edit <= current_edit):
        return (
            f"points past the transcript (last seq {current_seq}, last edit {current_edit}); "
            "save a snapshot only of what the store holds"
        )
    if after_seq_of.get(last_edit, 0) > last_seq:
        return (
            f"edit {last_edit} was recorded after message {after_seq_of[last_edit]}, which the "
            "snapshot does not include; use the last_seq and last_edit of load_view()"
        )
    if after_seq_of.get(last_edit + 1, last_seq) < last_seq:
        return (
            f"edit {last_edit + 1} was recorded after message {after_seq_of[last_edit + 1]} but "
            "the snapshot leaves it out; use the last_seq and last_edit of load_view()"
        )
    return None
