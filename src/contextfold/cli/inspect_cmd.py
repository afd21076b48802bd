"""``contextfold inspect``: a stored session's token usage per call and every context edit, in
the order they happened.

The timeline is built from what the store recorded: ``token_usage`` events (one per model call),
the context edits, and the compaction events that say what the edits freed
(``compaction_finished`` lists its edit ids, ``observations_masked`` names its edit). Entries are
ordered by the time they were recorded. Calls are numbered from 1 (``call``); an edit, a
compaction or another event carries the number of the call it came after (``after_call``). How
many messages an edit took out is read from the view it changed (the transcript replayed in
order), so a range that starts at an earlier summary is counted too. A ``loss_reported`` event
that found facts out of view follows its compaction as a ``loss`` entry.

``--json`` keeps the keys of earlier versions: ``turn`` is on a call the same number as ``call``
(the engine's call counter), and on an edit the turn of the message it follows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from contextfold.cli import _render
from contextfold.cli._notices import BACKGROUND_TRIGGER, short_compaction
from contextfold.cli._render import JsonFlag
from contextfold.cli._store import (
    SessionArgument,
    StoreOption,
    missing_session,
    open_existing_store,
    resolve_session_id,
    store_location,
)
from contextfold.cli._stored_state import learned_window_line
from contextfold.compaction.pipeline import replaced_by
from contextfold.edits import ContextEdit, MaskEdit, edit_action
from contextfold.engine.learned_window import stored_learned_window
from contextfold.messages import Message
from contextfold.retention.loss import count_line, messages_line, stored_where
from contextfold.store import BrowsableSessionStore, EditRecord, EventRecord, SessionInfo
from contextfold.store.view_rebuild import replay

__all__ = ["build_timeline", "inspect"]

_MASK_LABELS = {"mask": "mask batch", "truncate": "truncate", "clear": "clear"}
_NOTABLE_EVENTS = frozenset(
    {"compaction_failed", "session_restarted", "overflow_recovered", "summarizer_fell_back"}
)
"""Events shown in the timeline besides calls, edits and finished compactions; the rest (output
truncated/offloaded, tools deferred...) are only counted in the summary."""
_OTHER_NAMES = {
    "compaction_failed": "compactions that changed nothing",
    "session_restarted": "restarts",
    "overflow_recovered": "overflows recovered",
    "summarizer_fell_back": "summarizer fallbacks",
}
"""How the summary line names each notable event kind (followed by its count)."""
_LOSS_COUNTS = ("in_summary", "pinned", "in_ledger", "behind_ref", "lost")
"""The counts of a ``loss_reported`` event, as :func:`contextfold.retention.loss.count_line` takes
them."""
_MESSAGE_COUNTS = (
    ("summary", "in_summary"),
    ("recoverable", "recoverable"),
    ("facts_kept", "facts_kept"),
    ("lost", "lost"),
)
"""What stands for the messages a compaction took out of view, and the event field counting
each (``messages_<field>``)."""

NUMBERING_NOTE = (
    "call: the number of the model call in this session (1 = the first); edits and compactions "
    "are listed where they happened, between calls"
)
"""The line under the session header that says what the first column counts."""
UNUSED_BACKGROUND = "a compaction prepared in the background was not used"
"""The quiet note for a background compaction that ended unused (stale, short, or the session
closed first); nothing happened to the context."""


def inspect(
    session_id: SessionArgument,
    store: StoreOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Show a session's timeline: tokens per model call and every context edit.

    For each model call, numbered from 1: input and output tokens, cache reads and writes, the
    context size after it and its share of the window. Between the calls, each edit (mask batch,
    truncate, clear, archive, summary, drop): how many results or messages it took out, and the
    tokens it freed when a compaction event recorded that; each compaction; and its loss
    report: how many facts left the view and where they can still be read (summary, pins, the
    artifact ledger, behind a ref), with the ones nothing holds any more. A summary follows:
    peak usage, edits by kind and facts lost.

    Example:

        contextfold inspect ses_66130b27d9fd
    """
    location = store_location(store)
    if not location.exists:
        raise missing_session(session_id, location)
    with open_existing_store(location) as opened:
        session_id = resolve_session_id(opened, session_id)
        info = opened.get_session(session_id)
        state = opened.load_engine_state(session_id)
        timeline = build_timeline(opened, session_id)
    summary = _summarize(timeline)
    if as_json:
        _render.print_json(
            {"session": _session_json(info, state), "timeline": timeline, "summary": summary}
        )
        return
    _print(info, state, timeline, summary)


# --------------------------------------------------------------------------------------------------
# Building the timeline
# --------------------------------------------------------------------------------------------------


def build_timeline(store: BrowsableSessionStore, session_id: str) -> list[dict[str, Any]]:
    """The session's calls, edits, compactions and notable events as JSON-ready dicts, in the
    order they were recorded."""
    messages = list(store.iter_messages(session_id))
    turn_at = {seq: message.meta.turn for seq, message in messages}
    edits = list(store.iter_edits(session_id))
    taken_out = _messages_taken_out(messages, edits)
    events = list(store.iter_events(session_id))
    freed_by_edit = {
        str(e.data.get("edit_id")): int(e.data.get("freed_tokens", 0))
        for e in events
        if e.event_type == "observations_masked" and e.data.get("edit_id")
    }
    settled = {
        tuple(str(i) for i in e.data.get("edit_ids", ())): e.data
        for e in events
        if e.event_type == "compaction_settled"
    }
    compaction_of: dict[str, list[str]] = {}
    for e in events:
        if e.event_type == "compaction_finished":
            ids = [str(i) for i in e.data.get("edit_ids", ())]
            for edit_id in ids:
                compaction_of[edit_id] = ids
    entries: list[tuple[float, dict[str, Any]]] = []
    for record in edits:
        row = _edit_row(record, taken_out, turn_at)
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
            if event_row["type"] == "compaction":
                _add_settlement(event_row, settled.get(tuple(event_row["edit_ids"])))
            entries.append((_event_time(event), event_row))
    # Stable sort: at equal times an edit comes before the event that reports it.
    entries.sort(key=lambda pair: pair[0])
    timeline = [row for _, row in entries]
    _number_calls(timeline)
    return timeline


def _messages_taken_out(
    messages: Sequence[tuple[int, Message]], edits: Sequence[EditRecord]
) -> dict[str, int]:
    """How many messages of the view each edit replaced or removed, by edit id, from the
    transcript replayed in order (as the engine built the view)."""
    counts: dict[str, int] = {}

    def count(record: EditRecord, before: list[Message], after: list[Message]) -> None:
        counts[record.edit.id] = len(replaced_by(before, after))

    replay([], messages, edits, on_edit=count)
    return counts


def _event_time(event: EventRecord) -> float:
    at = event.data.get("at")
    return float(at) if isinstance(at, int | float) else event.created


def _compaction_freed(events: Iterable[EventRecord], edit_id: str) -> int | None:
    for e in events:
        if e.event_type == "compaction_finished" and edit_id in e.data.get("edit_ids", ()):
            return int(e.data.get("before_tokens", 0)) - int(e.data.get("after_tokens", 0))
    return None


def _edit_row(
    record: EditRecord, taken_out: Mapping[str, int], turn_at: Mapping[int, int | None]
) -> dict[str, Any]:
    edit = record.edit
    count, unit = _edit_size(edit, taken_out)
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


def _edit_size(edit: ContextEdit, taken_out: Mapping[str, int]) -> tuple[int | None, str]:
    """How much the edit took out of the view, and of what (``"result"`` or ``"message"``)."""
    if isinstance(edit, MaskEdit):
        return len(edit.items), "result"
    return taken_out.get(edit.id), "message"


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
            "edit_ids": [str(i) for i in data.get("edit_ids", ())],
            "note": str(data.get("note", "")),
            "expected_saving_usd": data.get("expected_saving_usd"),
            "realized_saving_usd": None,
            "settled_requests": None,
        }
    if kind == "loss_reported":
        counts = {key: int(data.get(key, 0)) for key in _LOSS_COUNTS}
        messages = {w: int(data.get(f"messages_{key}", 0)) for w, key in _MESSAGE_COUNTS}
        if not data.get("out_of_view") and not any(messages.values()):
            return None  # nothing left the view: the compaction's row says all there is
        listed = [i for i in data.get("items", ()) if isinstance(i, Mapping)]
        return {
            "type": "loss",
            "trigger": data.get("trigger"),
            "out_of_view": int(data.get("out_of_view", 0)),
            **counts,
            "messages": messages,
            "lost_items": [str(i.get("text", "")) for i in listed if stored_where(i) == "lost"],
        }
    if kind in _NOTABLE_EVENTS:
        details = {k: v for k, v in data.items() if k != "at"}
        row: dict[str, Any] = {"type": kind, "details": details}
        if kind == "compaction_failed" and data.get("trigger") == BACKGROUND_TRIGGER:
            row["unused"] = True  # prepared in the worker and never taken: nothing happened
        return row
    return None


def _add_settlement(row: dict[str, Any], settled: Mapping[str, Any] | None) -> None:
    """Put on a compaction's row what its expected saving came to (``compaction_settled``)."""
    if settled is None:
        return
    row["realized_saving_usd"] = settled.get("realized_saving_usd")
    row["settled_requests"] = settled.get("requests")


def _saving_note(row: dict[str, Any]) -> str:
    """``; expected to save $0.12, saved $0.10 over 14 requests`` (what is known of it)."""
    expected = row.get("expected_saving_usd")
    if expected is None:
        return ""
    verb = "save" if expected >= 0 else "cost"
    note = f"; expected to {verb} ${abs(expected):,.4f}"
    realized = row.get("realized_saving_usd")
    if realized is not None:
        done = "saved" if realized >= 0 else "cost"
        note += f", {done} ${abs(realized):,.4f} over {row['settled_requests']} requests"
    return note


def _number_calls(timeline: list[dict[str, Any]]) -> None:
    """Number the calls (``call``) and give every other row the call it came after
    (``after_call``, 0 before the first); an edit whose message recorded no turn gets the turn
    of the call before it, as before."""
    calls = 0
    turn = None
    for row in timeline:
        if row["type"] == "call":
            calls += 1
            row["call"] = calls
            turn = row["turn"]
            continue
        row["after_call"] = calls
        if row["type"] == "edit" and row["turn"] is None:
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
            "call": peak["call"],
            "context_tokens": peak["context_tokens"],
            "window": peak["window"],
            "window_share": peak["window_share"],
        },
        "edits": dict(edits),
        "compactions": len(compactions),
        "compaction_freed_tokens": sum(r["freed_tokens"] for r in compactions),
        "expected_saving_usd": sum(r["expected_saving_usd"] or 0.0 for r in compactions),
        "realized_saving_usd": sum(r["realized_saving_usd"] or 0.0 for r in compactions),
        "settled_compactions": sum(r["realized_saving_usd"] is not None for r in compactions),
        "facts_lost": sum(r["lost"] for r in timeline if r["type"] == "loss"),
        "other": dict(Counter(r["type"] for r in timeline if r["type"] in _NOTABLE_EVENTS)),
        "unused_background_compactions": sum(1 for r in timeline if r.get("unused")),
    }


def _session_json(info: SessionInfo, state: Mapping[str, Any] | None) -> dict[str, Any]:
    return {
        "id": info.id,
        "title": info.title,
        "model": info.model,
        "parent_id": info.parent_id,
        "messages": info.message_count,
        "learned_window": stored_learned_window(state),
    }


# --------------------------------------------------------------------------------------------------
# Human output
# --------------------------------------------------------------------------------------------------


def _print(
    info: SessionInfo,
    state: Mapping[str, Any] | None,
    timeline: list[dict[str, Any]],
    summary: dict[str, Any],
) -> None:
    out = _render.console()
    title = f" — {info.title}" if info.title else ""
    out.print(f"[bold]{_render.escape(info.id + title)}[/bold]")
    out.print(f"  {info.model or 'model not recorded'} · {info.message_count:,} messages")
    window = learned_window_line(state)
    if window is not None:
        out.print(f"  window: {window}")
    if not timeline:
        out.print("  Nothing recorded yet: no model calls, edits or compactions.")
        return
    out.print(f"[dim]{NUMBERING_NOTE}[/dim]")
    numeric = ("call", "input", "output", "cache r/w", "context", "window")
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
    kind = row["type"]
    if kind == "call":
        cache = f"{fmt(row['cache_read_tokens'])}/{fmt(row['cache_write_tokens'])}"
        return (
            str(row["call"]),
            fmt(row["input_tokens"]),
            fmt(row["output_tokens"]),
            cache,
            fmt(row["context_tokens"]),
            _render.format_share(row["context_tokens"], row["window"]),
            "call",
        )
    if kind == "edit":
        what = f"[cyan]edit #{row['number']} {row['label']}[/cyan]: {_edit_note(row)}"
        return ("", "", "", "", "", "", what)
    if kind == "compaction":
        strategies = _render.escape(", ".join(row["strategies"]) or "no strategy")
        trigger = _render.escape(str(row["trigger"]))
        short = f"; {short_compaction(str(row['trigger']))}" if row["note"] else ""
        what = (
            f"[magenta]compaction ({trigger})[/magenta]: {row['before_tokens']:,} → "
            f"{row['after_tokens']:,}, freed {row['freed_tokens']:,} ({strategies}){short}"
            f"{_render.escape(_saving_note(row))}"
        )
        return ("", "", "", "", fmt(row["after_tokens"]), "", what)
    if kind == "loss":
        line = count_line(**{key: row[key] for key in _LOSS_COUNTS})
        moved = messages_line(row["messages"])
        line = f"{moved}; {line}" if moved else line
        color = "yellow" if row["lost"] else "cyan"
        what = f"[{color}]loss report[/{color}]: {_render.escape(line)}"
        if row["lost_items"]:
            shown = _render.shorten("; ".join(row["lost_items"]), 160)
            what += f"; lost: {_render.escape(shown)}"
        return ("", "", "", "", "", "", what)
    details = row["details"]
    if row.get("unused"):  # the reason stays in --json: it is the engine's, not the user's
        return ("", "", "", "", "", "", f"[dim]{UNUSED_BACKGROUND}[/dim]")
    if kind == "compaction_failed":
        trigger = _render.escape(str(details.get("trigger")))
        reason = _render.escape(str(details.get("reason", "")))
        what = f"[yellow]compaction ({trigger}) changed nothing[/yellow]: {reason}"
        return ("", "", "", "", "", "", what)
    listed = _render.escape(_render.shorten(", ".join(f"{k}={v}" for k, v in details.items()), 120))
    return ("", "", "", "", "", "", f"[yellow]{kind}[/yellow]: {listed}")


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
        parts.append(f"peak {peak['context_tokens']:,} tokens ({share}) at call {peak['call']}")
    edits = summary["edits"]
    if edits:
        by_kind = ", ".join(f"{kind} {n}" for kind, n in edits.items())
        parts.append(f"{_render.plural(sum(edits.values()), 'edit')} ({by_kind})")
    else:
        parts.append("no edits")
    if summary["compactions"]:
        compactions = _render.plural(summary["compactions"], "compaction")
        parts.append(f"{compactions} freed {summary['compaction_freed_tokens']:,} tokens")
        if summary["settled_compactions"]:
            parts.append(
                f"${summary['realized_saving_usd']:,.4f} saved "
                f"(${summary['expected_saving_usd']:,.4f} expected)"
            )
    if summary.get("facts_lost"):
        parts.append(f"{_render.plural(summary['facts_lost'], 'fact')} lost from view")
    for kind, n in summary["other"].items():
        if kind == "compaction_failed":
            n -= summary["unused_background_compactions"]  # a quiet note, not a failure
        if n:
            parts.append(f"{_OTHER_NAMES[kind]}: {n:,}")
    return "summary: " + " · ".join(parts)
