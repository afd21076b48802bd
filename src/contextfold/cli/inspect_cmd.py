"""``contextfold inspect``: a stored session's token usage per call and every context edit, in
the order they happened.

The timeline is built from what the store recorded: ``token_usage`` events (one per model call),
the context edits, and the compaction events that say what the edits freed
(``compaction_finished`` lists its edit ids, ``observations_masked`` names its edit). Entries are
ordered by the time they were recorded; an edit's turn is the turn of the message it follows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from contextfold._engine_window import stored_learned_window
from contextfold.cli import _render
from contextfold.cli._render import JsonFlag
from contextfold.cli._store import (
    SessionArgument,
    StoreOption,
    missing_session,
    open_existing_store,
    store_location,
)
from contextfold.edits import (
    ArchiveEdit,
    ContextEdit,
    DropEdit,
    MaskEdit,
    SummarizeEdit,
    edit_action,
)
from contextfold.store import EditRecord, EventRecord, SessionInfo, SessionStore

__all__ = ["build_timeline", "inspect"]

_MASK_LABELS = {"mask": "mask batch", "truncate": "truncate", "clear": "clear"}
_NOTABLE_EVENTS = frozenset(
    {"compaction_failed", "session_restarted", "overflow_recovered", "summarizer_fell_back"}
)
"""Events shown in the timeline besides calls, edits and finished compactions; the rest (output
truncated/offloaded, tools deferred...) are only counted in the summary."""


def inspect(
    session_id: SessionArgument,
    store: StoreOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Show a session's timeline: tokens per model call and every context edit.

    For each call: the turn, input and output tokens, cache reads and writes, the context size
    after it and its share of the window. For each edit (mask batch, truncate, clear, archive,
    summarize, drop): how many results or messages it took out, and the tokens it freed when a
    compaction event recorded that. A summary follows: peak usage and edits by kind.

    Example:

        contextfold inspect sess_0193ab
    """
    location = store_location(store)
    if not location.exists:
        raise missing_session(session_id, location)
    with open_existing_store(location) as opened:
        info = opened.get_session(session_id)
        timeline = build_timeline(opened, session_id)
    summary = _summarize(timeline)
    if as_json:
        _render.print_json(
            {"session": _session_json(info), "timeline": timeline, "summary": summary}
        )
        return
    _print(info, timeline, summary)


# --------------------------------------------------------------------------------------------------
# Building the timeline
# --------------------------------------------------------------------------------------------------


def build_timeline(store: SessionStore, session_id: str) -> list[dict[str, Any]]:
    """The session's calls, edits, compactions and notable events as JSON-ready dicts, in the
    order they were recorded."""
    seq_of: dict[str, int] = {}
    turn_at: dict[int, int | None] = {}
    for seq, message in store.iter_messages(session_id):
        seq_of[message.id] = seq
        turn_at[seq] = message.meta.turn
    edits = list(store.iter_edits(session_id))
    events = list(store.iter_events(session_id))
    freed_by_edit = {
        str(e.data.get("edit_id")): int(e.data.get("freed_tokens", 0))
        for e in events
        if e.event_type == "observations_masked" and e.data.get("edit_id")
    }
    compaction_of: dict[str, list[str]] = {}
    for e in events:
        if e.event_type == "compaction_finished":
            ids = [str(i) for i in e.data.get("edit_ids", ())]
            for edit_id in ids:
                compaction_of[edit_id] = ids
    entries: list[tuple[float, dict[str, Any]]] = []
    for record in edits:
        row = _edit_row(record, seq_of, turn_at)
        edit_id = record.edit.id
        if edit_id in freed_by_edit:
            row["freed_tokens"] = freed_by_edit[edit_id]
        elif compaction_of.get(edit_id) == [edit_id]:
            row["freed_tokens"] = _compaction_freed(events, edit_id)
        elif edit_id in compaction_of:
            row["in_compaction"] = True
        entries.append((record.edit.created_at, row))
    for event in events:
        event_row = _event_row(event)
        if event_row is not None:
            entries.append((_event_time(event), event_row))
    # Stable sort: at equal times an edit comes before the event that reports it.
    entries.sort(key=lambda pair: pair[0])
    timeline = [row for _, row in entries]
    _fill_edit_turns(timeline)
    return timeline


def _event_time(event: EventRecord) -> float:
    at = event.data.get("at")
    return float(at) if isinstance(at, int | float) else event.created


def _compaction_freed(events: Iterable[EventRecord], edit_id: str) -> int | None:
    for e in events:
        if e.event_type == "compaction_finished" and edit_id in e.data.get("edit_ids", ()):
            return int(e.data.get("before_tokens", 0)) - int(e.data.get("after_tokens", 0))
    return None


def _edit_row(
    record: EditRecord, seq_of: Mapping[str, int], turn_at: Mapping[int, int | None]
) -> dict[str, Any]:
    edit = record.edit
    count, unit = _edit_size(edit, seq_of)
    return {
        "type": "edit",
        "number": record.number,
        "id": edit.id,
        "kind": _edit_kind(edit),
        "label": _MASK_LABELS[edit.reason] if isinstance(edit, MaskEdit) else edit_action(edit),
        "count": count,
        "unit": unit,
        "after_seq": record.after_seq,
        "turn": turn_at.get(record.after_seq),
        "freed_tokens": None,
    }


def _edit_kind(edit: ContextEdit) -> str:
    return edit_action(edit)


def _edit_size(edit: ContextEdit, seq_of: Mapping[str, int]) -> tuple[int | None, str]:
    """How much the edit took out of the view, and of what (``"result"`` or ``"message"``)."""
    if isinstance(edit, MaskEdit):
        return len(edit.items), "result"
    if isinstance(edit, ArchiveEdit | DropEdit):
        return len(edit.message_ids), "message"
    assert isinstance(edit, SummarizeEdit)
    first, last = seq_of.get(edit.first_id), seq_of.get(edit.last_id)
    if first is None or last is None:
        return None, "message"  # the range starts or ends at an earlier summary
    return last - first + 1, "message"


def _event_row(event: EventRecord) -> dict[str, Any] | None:
    data = event.data
    kind = event.event_type
    if kind == "token_usage":
        window = int(data.get("window", 0))
        context = int(data.get("context_tokens", 0))
        return {
            "type": "call",
            "turn": data.get("turn"),
            "input_tokens": int(data.get("input_tokens", 0)),
            "output_tokens": int(data.get("output_tokens", 0)),
            "cache_read_tokens": int(data.get("cache_read_tokens", 0)),
            "cache_write_tokens": int(data.get("cache_write_tokens", 0)),
            "context_tokens": context,
            "window": window,
            "window_share": round(context / window, 6) if window else None,
        }
    if kind == "compaction_finished":
        before, after = int(data.get("before_tokens", 0)), int(data.get("after_tokens", 0))
        return {
            "type": "compaction",
            "trigger": data.get("trigger"),
            "before_tokens": before,
            "after_tokens": after,
            "freed_tokens": before - after,
            "strategies": list(data.get("strategies_run", ())),
            "edits": len(data.get("edit_ids", ())),
        }
    if kind in _NOTABLE_EVENTS:
        details = {k: v for k, v in data.items() if k != "at"}
        return {"type": kind, "details": details}
    return None


def _fill_edit_turns(timeline: list[dict[str, Any]]) -> None:
    """An edit whose message recorded no turn gets the turn of the call before it."""
    turn = None
    for row in timeline:
        if row["type"] == "call":
            turn = row["turn"]
        elif row["type"] == "edit" and row["turn"] is None:
            row["turn"] = turn


def _summarize(timeline: list[dict[str, Any]]) -> dict[str, Any]:
    calls = [r for r in timeline if r["type"] == "call"]
    peak = max(calls, key=lambda r: r["context_tokens"], default=None)
    compactions = [r for r in timeline if r["type"] == "compaction"]
    edits = Counter(r["label"] for r in timeline if r["type"] == "edit")
    return {
        "calls": len(calls),
        "input_tokens": sum(r["input_tokens"] for r in calls),
        "output_tokens": sum(r["output_tokens"] for r in calls),
        "cache_read_tokens": sum(r["cache_read_tokens"] for r in calls),
        "peak": None
        if peak is None
        else {
            "turn": peak["turn"],
            "context_tokens": peak["context_tokens"],
            "window": peak["window"],
            "window_share": peak["window_share"],
        },
        "edits": dict(edits),
        "compactions": len(compactions),
        "compaction_freed_tokens": sum(r["freed_tokens"] for r in compactions),
        "other": dict(Counter(r["type"] for r in timeline if r["type"] in _NOTABLE_EVENTS)),
    }


def _session_json(info: SessionInfo) -> dict[str, Any]:
    return {
        "id": info.id,
        "title": info.title,
        "model": info.model,
        "parent_id": info.parent_id,
        "messages": info.message_count,
        "learned_window": stored_learned_window(info.metadata),
    }


# --------------------------------------------------------------------------------------------------
# Human output
# --------------------------------------------------------------------------------------------------


def _print(info: SessionInfo, timeline: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    out = _render.console()
    title = f" — {info.title}" if info.title else ""
    out.print(f"[bold]{_render.escape(info.id + title)}[/bold]")
    out.print(f"  {info.model or 'model not recorded'} · {info.message_count:,} messages")
    learned = stored_learned_window(info.metadata)
    if learned is not None:
        out.print(
            f"  window: {learned:,} tokens, the limit the provider stated when it refused a "
            "request (requests are planned against it)"
        )
    if not timeline:
        out.print("  Nothing recorded yet: no model calls, edits or compactions.")
        return
    numeric = ("turn", "input", "output", "cache r/w", "context", "window")
    table = _render.table(*numeric, "event", numeric=numeric)
    for column in table.columns[:-1]:
        column.no_wrap = True  # the description wraps, the figures never do
    table.columns[-1].ratio = 1
    for row in timeline:
        table.add_row(*_cells(row))
    out.print(table)
    out.print(_render.escape(_summary_line(summary)))


def _cells(row: dict[str, Any]) -> tuple[str, ...]:
    """The table cells of one timeline entry: the figures of a call, or a described event."""
    fmt = _render.format_int
    turn = "" if row.get("turn") is None else str(row["turn"])
    kind = row["type"]
    if kind == "call":
        cache = f"{fmt(row['cache_read_tokens'])}/{fmt(row['cache_write_tokens'])}"
        return (
            turn,
            fmt(row["input_tokens"]),
            fmt(row["output_tokens"]),
            cache,
            fmt(row["context_tokens"]),
            _render.format_share(row["context_tokens"], row["window"]),
            "call",
        )
    if kind == "edit":
        what = f"[cyan]edit #{row['number']} {row['label']}[/cyan]: {_edit_note(row)}"
        return (turn, "", "", "", "", "", what)
    if kind == "compaction":
        strategies = _render.escape(", ".join(row["strategies"]) or "no strategy")
        trigger = _render.escape(str(row["trigger"]))
        what = (
            f"[magenta]compaction ({trigger})[/magenta]: {row['before_tokens']:,} → "
            f"{row['after_tokens']:,}, freed {row['freed_tokens']:,} ({strategies})"
        )
        return ("", "", "", "", fmt(row["after_tokens"]), "", what)
    details = _render.escape(
        _render.shorten(", ".join(f"{k}={v}" for k, v in row["details"].items()), 120)
    )
    return ("", "", "", "", "", "", f"[yellow]{kind}[/yellow]: {details}")


def _edit_note(row: dict[str, Any]) -> str:
    count = row["count"]
    note = f"? {row['unit']}s" if count is None else _render.plural(count, row["unit"])
    if row.get("freed_tokens") is not None:
        note += f", freed {row['freed_tokens']:,} tokens"
    elif row.get("in_compaction"):
        note += ", freed with the compaction below"
    return note


def _summary_line(summary: dict[str, Any]) -> str:
    parts = [_render.plural(summary["calls"], "call")]
    peak = summary["peak"]
    if peak is not None:
        share = _render.format_share(peak["context_tokens"], peak["window"])
        parts.append(f"peak {peak['context_tokens']:,} tokens ({share}) at turn {peak['turn']}")
    edits = summary["edits"]
    if edits:
        by_kind = ", ".join(f"{kind} {n}" for kind, n in edits.items())
        parts.append(f"{_render.plural(sum(edits.values()), 'edit')} ({by_kind})")
    else:
        parts.append("no edits")
    if summary["compactions"]:
        compactions = _render.plural(summary["compactions"], "compaction")
        parts.append(f"{compactions} freed {summary['compaction_freed_tokens']:,} tokens")
    for kind, n in summary["other"].items():
        parts.append(f"{kind} {n}")
    return "summary: " + " · ".join(parts)
