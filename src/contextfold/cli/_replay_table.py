"""The terminal table of ``contextfold replay``: a line naming each transcript (and its request
count), then a row per preset, fitting the terminal (80 columns and up).

By default the table shows the figures a comparison of presets is read by (the largest request,
requests over the window, compactions, tokens sent, prefix reuse, facts kept); ``--wide`` adds
the request count, the summarizer's reading and both costs. Nothing is cut: the transcripts'
names wrap between words, and a table wider than the terminal is printed in parts, each
repeating the preset column. A run of several transcripts ends with every preset's
totals; under the table come the model and window of each replay and what the reader must know
before comparing with the original agent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from rich.cells import cell_len
from rich.table import Table
from rich.text import Text

from contextfold.cli import _render
from contextfold.replay import Retention, TranscriptReplay
from contextfold.replay.cache import ANTHROPIC_PRICE_MODEL, OPENAI_PRICE_MODEL
from contextfold.replay.records import (
    OriginalAgent,
    PresetTotals,
    ReplayRun,
    agent_name,
    preset_totals,
)
from contextfold.replay.report import short_labels

__all__ = ["DEFAULT_COLUMNS", "WIDE_COLUMNS", "print_table"]


@dataclass(frozen=True, slots=True)
class _Column:
    """One column: its header (short lines, so that it is no wider than its numbers), and its
    cell for a preset's run, the original agent's recorded row, and a preset's totals."""

    header: str
    run: Callable[[ReplayRun], str]
    original: Callable[[OriginalAgent], str] = lambda _: ""
    totals: Callable[[PresetTotals], str] = lambda _: ""


def _facts(kept: int, total: int, recoverable: int) -> str:
    if not total:
        return "—"
    return f"{kept}/{total}" + (f" (+{recoverable} ref)" if recoverable else "")


def _retention(retention: Retention | None) -> str:
    if retention is None:
        return "—"
    return _facts(retention.kept(), retention.total(), retention.count("recoverable"))


def _over(count: int) -> str:
    return f"[red]{count:,}[/red]" if count else "0"


_COLUMNS: Mapping[str, _Column] = {
    "requests": _Column(
        "requests",
        lambda r: _render.format_int(len(r.turns)),
        totals=lambda t: _render.format_int(t.requests),
    ),
    "peak": _Column(
        "peak",
        lambda r: _render.format_int(r.peak_tokens),
        totals=lambda t: _render.format_int(t.peak_tokens),
    ),
    "over": _Column(
        "over\nwindow", lambda r: _over(r.over_window), totals=lambda t: _over(t.over_window)
    ),
    "compactions": _Column(
        "compactions\n/ masks",
        lambda r: f"{r.compactions:,} / {r.mask_batches:,}",
        original=lambda o: f"{len(o.compactions)} / —",
        totals=lambda t: f"{t.compactions:,} / {t.mask_batches:,}",
    ),
    "tokens_sent": _Column(
        "tokens\nsent",
        lambda r: _render.format_int(r.tokens_sent),
        original=lambda o: _render.format_int(o.recorded_prompt_tokens or None),
        totals=lambda t: _render.format_int(t.tokens_sent),
    ),
    "summary_reads": _Column(
        "summary\nreads",
        lambda r: _render.format_int(r.summary_input_tokens),
        totals=lambda t: _render.format_int(t.summary_input_tokens),
    ),
    "prefix_reuse": _Column(
        "prefix\nreuse",
        lambda r: f"{r.prefix_reuse:.1%}",
        original=lambda o: _render.format_share(
            o.recorded_cache_read_tokens, o.recorded_prompt_tokens
        ),
        totals=lambda t: f"{t.prefix_reuse:.1%}",
    ),
    "cost_anthropic": _Column(
        "$\nanthropic",
        lambda r: f"{r.cost_anthropic:,.2f}",
        totals=lambda t: f"{t.cost_anthropic:,.2f}",
    ),
    "cost_openai": _Column(
        "$\nopenai",
        lambda r: f"{r.cost_openai:,.2f}",
        totals=lambda t: f"{t.cost_openai:,.2f}",
    ),
    "facts": _Column(
        "facts\nkept",
        lambda r: _retention(r.retention),
        original=lambda o: _retention(o.retention),
        totals=lambda t: _facts(t.facts_kept, t.facts_total, t.facts_recoverable),
    ),
}

DEFAULT_COLUMNS: tuple[str, ...] = (
    "peak",
    "over",
    "compactions",
    "tokens_sent",
    "prefix_reuse",
    "facts",
)
"""The figure columns shown by default: with the transcript and preset columns they fit 100
terminal columns (the request count goes under the transcript's name instead)."""
WIDE_COLUMNS: tuple[str, ...] = tuple(_COLUMNS)
"""Every figure column (``--wide``)."""


def print_table(replays: Sequence[TranscriptReplay], *, wide: bool = False) -> None:
    """The table of ``replays`` (a line naming each transcript, then a row per preset), and the
    lines a reader needs under it."""
    if not replays:
        return
    columns = [_COLUMNS[k] for k in (WIDE_COLUMNS if wide else DEFAULT_COLUMNS)]
    groups: list[tuple[str, list[list[str]]]] = []
    for replay, label in zip(replays, short_labels([r.label for r in replays]), strict=True):
        requests = _render.plural(_requests(replay), "request")
        rows = [[run.preset, *(c.run(run) for c in columns)] for run in replay.runs.values()]
        original = replay.original
        if original.compactions:
            cells = (f"[dim]{c.original(original)}[/dim]" for c in columns)
            rows.append([f"[dim]{agent_name(replay.format)}[/dim]", *cells])
        groups.append((f"[bold]{_render.escape(label)}[/bold] [dim]· {requests}[/dim]", rows))
    if len(replays) > 1:
        totals = preset_totals(replays)
        requests = _render.plural(sum(_requests(r) for r in replays), "request")
        rows = [[t.preset, *(c.totals(t) for c in columns)] for t in totals.values()]
        groups.append(
            (f"[bold]all {len(replays):,} transcripts[/bold] [dim]· {requests}[/dim]", rows)
        )
    out = _render.console()
    headers = ["preset", *(c.header for c in columns)]
    for part in _parts(headers, [row for _, rows in groups for row in rows], out.width):
        for number, (name, rows) in enumerate(groups):
            out.print(name)  # wraps between words, never inside a file name
            out.print(
                _table(
                    [headers[i] for i in part],
                    [[r[i] for i in part] for r in rows],
                    widths=[_width(headers[i], groups, i) for i in part],
                    header=number == 0,
                )
            )
    for line in _footer(replays, wide):
        out.print(line)


_INDENT = 2
"""Presets are indented under the line naming their transcript."""
_GAP = 2
"""Spaces between two columns (a rich table's padding on each side)."""


def _requests(replay: TranscriptReplay) -> int:
    return max((len(run.turns) for run in replay.runs.values()), default=0)


def _cell_width(cell: str) -> int:
    return max(cell_len(line) for line in Text.from_markup(cell).plain.split("\n"))


def _width(header: str, groups: Sequence[tuple[str, list[list[str]]]], index: int) -> int:
    """The width of column ``index``: its widest cell or header line, in every group (so that
    the groups' tables line up)."""
    cells = [header, *(row[index] for _, rows in groups for row in rows if row[index])]
    extra = _INDENT if index == 0 else 0
    return max(_cell_width(cell) for cell in cells) + extra


def _parts(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int) -> list[list[int]]:
    """The column indexes of each table to print: all of them when they fit ``width``, else the
    figure columns in as few runs as fit, each after the preset column. No column is dropped or
    cut: a terminal too narrow for the whole table gets it in parts."""
    groups = [("", [list(row) for row in rows])]
    widths = [_width(header, groups, i) for i, header in enumerate(headers)]
    parts: list[list[int]] = [[0]]
    used = widths[0]
    for index in range(1, len(headers)):
        if len(parts[-1]) > 1 and used + _GAP + widths[index] > width:
            parts.append([0])
            used = widths[0]
        parts[-1].append(index)
        used += _GAP + widths[index]
    return parts


def _table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], *, widths: Sequence[int], header: bool
) -> Table:
    """One table of fixed column widths: figures never wrap or cut, preset names are indented."""
    table = _render.table(*headers, numeric=tuple(headers[1:]))
    table.show_header = header
    for column, column_width in zip(table.columns, widths, strict=True):
        column.no_wrap = True
        column.min_width = column.max_width = column_width
    for row in rows:
        table.add_row(" " * _INDENT + row[0], *row[1:])
    return table


def _footer(replays: Sequence[TranscriptReplay], wide: bool) -> list[str]:
    lines = list(
        dict.fromkeys(
            f"{run.model}: window {run.context_window:,} (effective {run.effective_window:,})"
            for replay in replays
            for run in replay.runs.values()
        )
    )
    lines = [_render.escape(line) for line in lines]
    for replay, label in zip(replays, short_labels([r.label for r in replays]), strict=True):
        note = replay.window_note()
        if note:
            lines.append(_render.escape(f"{label}: {note}" if len(replays) > 1 else note))
    if any(replay.original.compactions for replay in replays):
        lines.append("dim rows: what the original agent recorded (its compactions, prompts, cache)")
    legend = (
        "facts kept: files modified, error lines, task and user constraints still in the final "
        "view (+N ref: N more readable through read_result)"
    )
    if wide:
        legend += (
            f"; costs: input only, at {ANTHROPIC_PRICE_MODEL} and {OPENAI_PRICE_MODEL} cache "
            "prices; summary reads: tokens the summaries read (a model-written summary is a call "
            "reading them)"
        )
    else:
        legend += "; --wide adds requests, summary reads and costs"
    lines.append(f"[dim]{legend}[/dim]")
    return lines
