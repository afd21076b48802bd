"""``contextfold sessions``: list, show, export, delete and check stored sessions."""

from __future__ import annotations

import json
import sys
import time
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from contextfold.cli import _render
from contextfold.cli._app import CommandGroup
from contextfold.cli._render import JsonFlag
from contextfold.cli._store import (
    SessionArgument,
    StoreLocation,
    StoreOption,
    missing_session,
    open_existing_store,
    resolve_session_id,
    store_location,
)
from contextfold.cli._stored_state import StoredUsage, learned_window_line
from contextfold.edits import ContextEdit, MaskEdit, SummarizeEdit
from contextfold.engine.learned_window import stored_learned_window
from contextfold.errors import StoreError, UsageError
from contextfold.messages import Message, SummaryPart
from contextfold.private_files import open_private
from contextfold.proxy.sessions import METADATA_KEY as PROXY_METADATA_KEY
from contextfold.proxy.sessions import proxy_figures
from contextfold.store import EditRecord, SessionInfo, Snapshot

__all__ = ["DEFAULT_LIST_LIMIT", "LAST_MESSAGES", "SUMMARY_PREVIEW_LINES", "app", "describe"]

DEFAULT_LIST_LIMIT = 20
"""Sessions ``sessions list`` shows unless ``--limit`` says otherwise (most recent first)."""
LAST_MESSAGES = 5
"""Messages ``sessions show`` previews from the end of the transcript."""
SUMMARY_PREVIEW_LINES = 12
"""Lines of the latest compaction summary ``sessions show`` prints."""
_PREVIEW_CHARS = 100
_CWD_KEY = "cwd"
"""The metadata key chat and run record the working folder under."""

app = CommandGroup(help="List, show, export, delete and check stored sessions.")


@app.command("list")
def list_sessions(
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, metavar="N", help="Most sessions to show.")
    ] = DEFAULT_LIST_LIMIT,
    store: StoreOption = None,
    as_json: JsonFlag = False,
) -> None:
    """List stored sessions, most recently updated first.

    Example:

        contextfold sessions list --limit 5
    """
    location = store_location(store)
    if location.named and not location.exists:
        raise StoreError(f"there is no session store at {location}")
    sessions: list[SessionInfo] = []
    if location.exists:
        with open_existing_store(location) as opened:
            sessions = opened.list_sessions(limit=limit)
    if as_json:
        _render.print_json([_session_json(s) for s in sessions])
        return
    out = _render.console()
    if not sessions:
        out.print(f"No sessions in {_render.escape(str(location))}.")
        return
    proxied = {info.id: figures for info in sessions if (figures := proxy_figures(info))}
    out.print(_list_table(sessions, proxied, out.width, _all_ids(location)))
    out.print(f"[dim]{len(sessions)} shown from {_render.escape(str(location))}[/dim]")


NARROW_LIST = 100
"""Below this many columns ``sessions list`` shows the time without the year."""
MODEL_MIN_CHARS = 16
"""Widest the model column is kept at when the title gives way (a longer name folds)."""
PARENT_PREFIX_CHARS = 12
"""Shortest start of a parent id the list shows (longer when needed to be unique)."""


def _list_table(
    sessions: Sequence[SessionInfo],
    proxied: Mapping[str, Mapping[str, Any]],
    width: int,
    known_ids: Sequence[str],
) -> Table:
    """The sessions as a table that fits ``width`` with every id whole: the title gives way
    first, a parent is shown by the shortest unique start of its id (any command takes it),
    and a column nobody fills (parent, proxy saved) is left out."""
    parents = any(info.parent_id for info in sessions)
    clock = "%m-%d %H:%M" if width < NARROW_LIST else "%Y-%m-%d %H:%M"
    headers = ["id", "title", "model", "messages", "updated"]
    headers += ["parent"] if parents else []
    headers += ["proxy saved"] if proxied else []
    rows = []
    for info in sessions:
        row = [
            _render.escape(info.id),
            _render.escape(_render.printable(info.title or "")),
            _render.escape(info.model or "—"),
            _render.format_int(info.message_count),
            time.strftime(clock, time.localtime(info.updated)) if info.updated else "—",
        ]
        if parents:
            row.append(_render.escape(_unique_start(info.parent_id or "", known_ids)))
        if proxied:
            row.append(_saved_cell(proxied[info.id]) if info.id in proxied else "")
        rows.append(row)
    widths = [
        max(cell_len(Text.from_markup(cell).plain) for cell in (header, *column))
        for header, column in zip(headers, zip(*rows, strict=True), strict=True)
    ]
    widths[2] = min(widths[2], MODEL_MIN_CHARS)  # a longer model name folds
    # The title takes what is left (at least 5 columns); every other column keeps its width.
    widths[1] = max(5, min(widths[1], width - sum(widths) + widths[1] - 2 * (len(widths) - 1)))
    table = Table(header_style="bold", box=None, pad_edge=False)
    for header, column_width in zip(headers, widths, strict=True):
        numeric = header in ("messages", "proxy saved")
        table.add_column(
            header,
            justify="right" if numeric else "left",
            no_wrap=header != "model",
            overflow="fold" if header == "model" else "ellipsis",
            min_width=column_width,
            max_width=column_width,
        )
    for row in rows:
        table.add_row(*row)
    return table


def _all_ids(location: StoreLocation) -> list[str]:
    with open_existing_store(location) as opened:
        return [info.id for info in opened.list_sessions()]


def _unique_start(session_id: str, known_ids: Sequence[str]) -> str:
    """The shortest start of ``session_id`` (at least :data:`PARENT_PREFIX_CHARS`) that no
    other known id shares."""
    for length in range(PARENT_PREFIX_CHARS, len(session_id)):
        start = session_id[:length]
        if sum(other.startswith(start) for other in known_ids) <= 1:
            return start
    return session_id


@app.command("show")
def show(session_id: SessionArgument, store: StoreOption = None, as_json: JsonFlag = False) -> None:
    """Show one session: its details, usage, what it holds, its snapshot and its last messages.

    --json gives the same as JSON, with the session's metadata and the engine's saved state
    (engine_state) as stored.

    Example:

        contextfold sessions show ses_66130b27d9fd
    """
    location = _existing(store, session_id)
    with open_existing_store(location) as opened:
        session_id = resolve_session_id(opened, session_id)
        info = opened.get_session(session_id)
        state = opened.load_engine_state(session_id)
        roles: Counter[str] = Counter()
        last: deque[tuple[int, Message]] = deque(maxlen=LAST_MESSAGES)
        for seq, message in opened.iter_messages(session_id):
            roles[message.role] += 1
            last.append((seq, message))
        edits = list(opened.iter_edits(session_id))
        events = Counter(e.event_type for e in opened.iter_events(session_id))
        snapshot = opened.load_snapshot(session_id)
    shown = _Shown(
        info,
        state,
        roles,
        Counter(_edit_kind(r.edit) for r in edits),
        events,
        snapshot,
        _latest_summary(snapshot.view if snapshot else (), edits),
        list(last),
    )
    if as_json:
        _render.print_json(shown.to_json())
    else:
        shown.print(_render.console())


@dataclass(frozen=True)
class _Shown:
    """What ``sessions show`` read from the store, and its two forms."""

    info: SessionInfo
    engine_state: dict[str, Any] | None
    """What the engine saved for the session (``None``: nothing yet)."""
    roles: Counter[str]
    edits: Counter[str]
    events: Counter[str]
    snapshot: Snapshot | None
    summary: str
    last: list[tuple[int, Message]]

    def print(self, out: Console) -> None:
        info = self.info
        usage = StoredUsage.from_state(self.engine_state)
        out.print(f"[bold]Session {_render.escape(info.id)}[/bold]")
        details = [
            ("title", info.title or "—"),
            ("model", info.model or "—"),
            ("parent", info.parent_id or "—"),
            ("created", _render.format_time(info.created)),
            ("updated", _render.format_time(info.updated)),
        ]
        if isinstance(info.metadata.get(_CWD_KEY), str):
            details.append(("folder", info.metadata[_CWD_KEY]))
        if usage is not None:
            details += [("usage", usage.usage_line()), ("turns", usage.turns_line())]
        window = learned_window_line(self.engine_state)
        if window is not None:
            details.append(("window", window))
        figures = proxy_figures(info)
        if figures is not None:
            details.append(("proxy", _proxy_line(figures)))
        other = _other_metadata(info.metadata)
        if other:
            details.append(("metadata", other))
        for name, value in details:
            out.print(f"  {name:<9} {_render.escape(value)}")
        out.print(f"  {'messages':<9} {_counts(info.message_count, self.roles)}")
        out.print(f"  {'edits':<9} {_counts(sum(self.edits.values()), self.edits)}")
        out.print(f"  {'events':<9} {_counts(sum(self.events.values()), self.events)}")
        snapshot = self.snapshot
        if snapshot is None:
            out.print(f"  {'snapshot':<9} none (never compacted; resuming replays the transcript)")
        else:
            out.print(
                f"  {'snapshot':<9} {len(snapshot.view):,} messages, {snapshot.token_count:,} "
                f"tokens, as of message {snapshot.last_seq:,} and edit {snapshot.last_edit:,} "
                f"({_render.format_time(snapshot.created)})"
            )
        if self.summary:
            out.print("[bold]Latest summary[/bold]")
            lines = self.summary.splitlines()
            for line in lines[:SUMMARY_PREVIEW_LINES]:
                out.print("  " + _render.escape(line), soft_wrap=True)
            if len(lines) > SUMMARY_PREVIEW_LINES:
                out.print(f"  [dim]… {len(lines) - SUMMARY_PREVIEW_LINES} more lines[/dim]")
        if self.last:
            out.print(f"[bold]Last {len(self.last)} messages[/bold]")
            for seq, message in self.last:
                out.print(f"  {seq:>5} {message.role:<9} " + _render.escape(describe(message)))

    def to_json(self) -> dict[str, Any]:
        usage = StoredUsage.from_state(self.engine_state)
        snapshot = self.snapshot
        return {
            "session": _session_json(self.info),
            "engine_state": self.engine_state,
            "usage": usage.to_json() if usage is not None else None,
            "learned_window": stored_learned_window(self.engine_state),
            "messages": {"total": self.info.message_count, "by_role": dict(self.roles)},
            "edits": {"total": sum(self.edits.values()), "by_kind": dict(self.edits)},
            "events": {"total": sum(self.events.values()), "by_type": dict(self.events)},
            "snapshot": None
            if snapshot is None
            else {
                "messages": len(snapshot.view),
                "tokens": snapshot.token_count,
                "last_seq": snapshot.last_seq,
                "last_edit": snapshot.last_edit,
                "created": snapshot.created,
            },
            "latest_summary": self.summary or None,
            "last_messages": [
                {"seq": seq, "role": m.role, "id": m.id, "text": describe(m)}
                for seq, m in self.last
            ],
        }


@app.command("export")
def export(
    session_id: SessionArgument,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", dir_okay=False, metavar="FILE", help="Write to this file, not stdout."
        ),
    ] = None,
    store: StoreOption = None,
) -> None:
    """Export a session's full record as JSON Lines: the session, its messages and edits in
    transcript order, its events and its stored tool outputs.

    The export can be read back by `contextfold count`.

    Example:

        contextfold sessions export ses_66130b27d9fd -o session.jsonl
    """
    location = _existing(store, session_id)
    if output is not None:
        _check_output_folder(output)
    with open_existing_store(location) as opened:
        session_id = resolve_session_id(opened, session_id)
        opened.get_session(session_id)  # fail before creating an empty output file
        if output is None:
            opened.export_jsonl(session_id, sys.stdout)
            return
        try:
            with open_private(output, append=False) as fh:  # 0600: a session's whole record
                lines = opened.export_jsonl(session_id, fh)
        except OSError as exc:
            raise UsageError(f"cannot write {output}: {exc.strerror or exc}") from exc
    _render.error_console().print(f"wrote {lines:,} lines to {_render.escape(str(output))}")


@app.command("delete")
def delete(
    session_id: SessionArgument,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", metavar="", help="Do not ask for confirmation.")
    ] = False,
    store: StoreOption = None,
) -> None:
    """Delete a session with its messages, edits, events, snapshot and stored outputs.

    Asks for confirmation unless --yes is given. Child sessions (restarts, forks) are kept and
    lose their parent link.

    Example:

        contextfold sessions delete ses_66130b27d9fd --yes
    """
    location = _existing(store, session_id)
    with open_existing_store(location) as opened:
        session_id = resolve_session_id(opened, session_id)
        info = opened.get_session(session_id)
        if not yes:
            title = f" ({info.title})" if info.title else ""
            question = f"Delete session {info.id}{title} and its {info.message_count:,} messages?"
            typer.confirm(_render.printable(question), abort=True)  # not a rich console
        opened.delete_session(session_id)
    _render.console().print(
        f"Deleted session {_render.escape(info.id)} ({info.message_count:,} messages)."
    )


@app.command("check")
def check(
    repair: Annotated[
        bool,
        typer.Option(
            "--repair",
            help="Remove what a crash left half-made: partial sessions and proxy heads that "
            "point nowhere. Complete sessions are never touched.",
        ),
    ] = False,
    store: StoreOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Check the store: rows, transcripts, snapshots and the proxy's conversation index.

    Reports partial sessions (a crash cut a proxied session's copy short) and proxy heads that
    point nowhere; --repair removes them. Exits 1 when problems remain.

    Example:

        contextfold sessions check --repair
    """
    location = store_location(store)
    if not location.exists:
        raise UsageError(f"there is no session store at {location}")
    with open_existing_store(location) as opened:
        removed = opened.repair() if repair else []
        problems = opened.check_integrity()
    if as_json:
        _render.print_json({"problems": problems, "removed": removed})
    else:
        out = _render.console()
        for line in removed:
            out.print(f"[green]{_render.escape(line)}[/green]")
        for line in problems:
            out.print(f"[red]problem:[/red] {_render.escape(line)}")
        if not problems:
            out.print(f"No problems in {_render.escape(str(location))}.")
        elif not repair:
            out.print("Run [bold]contextfold sessions check --repair[/bold] to remove them.")
    if problems:
        raise typer.Exit(1)


# --------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------


def _existing(store: str | None, session_id: str) -> StoreLocation:
    location = store_location(store)
    if not location.exists:
        raise missing_session(session_id, location)
    return location


def _check_output_folder(output: Path) -> None:
    """A clear error, before any work, when ``output``'s folder is missing (typer itself
    refuses an ``output`` that is a folder)."""
    folder = output.parent
    if not folder.is_dir():
        state = "is not a folder" if folder.exists() else "does not exist"
        raise UsageError(f"cannot write {output}: {folder} {state}; create it or give another path")


def _session_json(info: SessionInfo) -> dict[str, object]:
    return {
        "id": info.id,
        "parent_id": info.parent_id,
        "model": info.model,
        "title": info.title,
        "created": info.created,
        "updated": info.updated,
        "messages": info.message_count,
        "metadata": dict(info.metadata),
    }


def _other_metadata(metadata: Mapping[str, Any]) -> str:
    """The metadata a caller set, as ``key=value`` pairs (the working folder has a line of its
    own)."""
    pairs = []
    for key, value in metadata.items():
        if (key == _CWD_KEY and isinstance(value, str)) or key == PROXY_METADATA_KEY:
            continue
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        pairs.append(f"{key}={_render.shorten(text, _PREVIEW_CHARS)}")
    return ", ".join(pairs)


def _saved_cell(figures: Mapping[str, Any]) -> str:
    """The share the proxy saved; when the engine sent more than the client (its own tools and
    notes outweigh a short conversation), how many times more, rather than a share below
    −100 %."""
    saved = figures["saved"]
    if saved is None:
        return "—"
    if saved < -1:
        return f"none (sent {1 - saved:.1f}×)"
    return f"{saved:.0%}"


def _proxy_line(figures: Mapping[str, Any]) -> str:
    """What the proxy did for a session, in one line."""
    line = (
        f"{figures['requests']:,} requests; the client sent {figures['client_tokens']:,} tokens, "
        f"the engine sent {figures['sent_tokens']:,}"
    )
    if figures["saved"] is not None:
        saved = figures["saved"]
        line += (
            f" ({1 - saved:.1f}× as much: the engine's tools and notes outweigh this short "
            "conversation)"
            if saved < -1
            else f" ({saved:.0%} saved)"
        )
    line += f"; cache reads {figures['cache_read_tokens']:,}"
    if figures["engine_calls"]:
        line += f"; {figures['engine_calls']:,} engine tool calls answered by the proxy"
    return line


def _counts(total: int, by: Counter[str]) -> str:
    if not total:
        return "0"
    parts = ", ".join(f"{name} {n:,}" for name, n in sorted(by.items(), key=lambda kv: -kv[1]))
    return f"{total:,} ({parts})" if parts else f"{total:,}"


def _edit_kind(edit: ContextEdit) -> str:
    # A mask edit's reason (mask / truncate / clear) is what the user asked about.
    return edit.reason if isinstance(edit, MaskEdit) else edit.edit_kind


def _latest_summary(view: Sequence[Message], records: Sequence[EditRecord]) -> str:
    """The text of the summary the model sees now (the snapshot's), else the latest one any
    summarize edit recorded."""
    for message in reversed(view):
        for part in message.parts:
            if isinstance(part, SummaryPart):
                return part.text
    for record in reversed(records):
        if isinstance(record.edit, SummarizeEdit):
            return record.edit.summary.text
    return ""


def describe(message: Message) -> str:
    """One line about ``message``: its text, the tools it calls, or the results it carries."""
    bits: list[str] = []
    if message.text:
        bits.append(repr(_render.shorten(message.text, _PREVIEW_CHARS))[1:-1])
    for call in message.tool_calls:
        bits.append(f"→ {call.name}({_render.shorten(call.arguments, 60)})")
    for result in message.tool_results:
        size = len(result.content)
        lines = result.content.count("\n") + 1 if result.content else 0
        error = " error" if result.is_error else ""
        ref = f", ref {result.ref}" if result.ref else ""
        bits.append(f"← {result.name}{error}: {lines:,} lines, {size:,} chars{ref}")
    if message.meta.kind not in ("message", "tool_result"):
        bits.append(f"[{message.meta.kind}]")
    return " ".join(bits) or "(empty)"
