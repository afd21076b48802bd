"""Inline SVG for the replay report: the context-size chart and the budget bars.

Plain strings, no library: the report must open offline, and an SVG written here is small and
readable. Every element a test or a reader may look for carries a ``data-*`` attribute
(``data-chart``, ``data-series``, ``data-edit``, ``data-original-compaction``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import TypeAlias

from contextfold.compaction.pipeline import PresetName
from contextfold.replay.records import EDIT_KINDS, OriginalCompaction, ReplayRun

__all__ = [
    "EDIT_LABELS",
    "PRESET_COLOURS",
    "BudgetRow",
    "budget_bars",
    "context_chart",
    "identical_series",
    "marker_legend",
    "preset_colour",
]

PRESET_COLOURS: Mapping[PresetName, str] = {
    "mask-first": "#2563eb",
    "summarize": "#d97706",
    "window": "#059669",
    "restart": "#9333ea",
}
"""Line colour of each built-in preset; other presets get :data:`_FALLBACK_COLOURS` in turn."""
_FALLBACK_COLOURS = ("#db2777", "#0891b2", "#65a30d", "#7c3aed")
RECORDED_COLOUR = "#6b7280"
WINDOW_COLOUR = "#dc2626"
ORIGINAL_COLOUR = "#111827"

EDIT_LABELS: Mapping[str, str] = {
    "mask_batch": "mask batch",
    "mask": "mask (in a compaction)",
    "truncate": "truncate",
    "summary": "summary",
    "drop": "drop",
    "restart": "restart",
}
"""How each edit kind is named in legends and tooltips."""

WIDTH, HEIGHT = 960, 340
"""Size of the context chart's drawing area in SVG units (it scales to the page width)."""
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 16, 28, 36
MARKER_STACK = 13
"""SVG units between the markers of several edits before one request: each is drawn above the
previous one, so that none hides another (a summary under a drop)."""
IDENTICAL_OFFSET = 4
"""SVG units a preset's curve is drawn below an earlier one that made exactly the same requests
(the report says so beside the chart), so that both colours show."""

_Scale: TypeAlias = Callable[[float], float]
"""Maps a data value to an SVG coordinate."""


def preset_colour(preset: PresetName, index: int) -> str:
    """The line colour of a preset (``index`` picks a fallback for presets without one)."""
    return PRESET_COLOURS.get(preset, _FALLBACK_COLOURS[index % len(_FALLBACK_COLOURS)])


def _nice_step(span: float, ticks: int) -> float:
    """A round tick step (1, 2 or 5 times a power of ten) giving about ``ticks`` ticks."""
    if span <= 0:
        return 1.0
    raw = span / max(1, ticks)
    power = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if raw <= factor * power:
            return float(factor * power)
    return float(10 * power)


def _short(n: float) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:g}M"
    if n >= 1_000:
        return f"{n / 1_000:g}k"
    return f"{n:g}"


def _marker(kind: str, x: float, y: float, colour: str) -> str:
    """The shape of one edit kind, centred on (x, y)."""
    stroke = f'fill="{colour}" stroke="#fff" stroke-width="1.2"'
    if kind == "mask_batch":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" {stroke}/>'
    if kind == "mask":
        return f'<rect x="{x - 4:.1f}" y="{y - 4:.1f}" width="8" height="8" {stroke}/>'
    if kind == "truncate":
        return f'<rect x="{x - 5:.1f}" y="{y - 2:.1f}" width="10" height="4" {stroke}/>'
    if kind == "summary":
        points = f"{x:.1f},{y - 6:.1f} {x + 6:.1f},{y:.1f} {x:.1f},{y + 6:.1f} {x - 6:.1f},{y:.1f}"
        return f'<polygon points="{points}" {stroke}/>'
    if kind == "drop":
        points = f"{x - 5:.1f},{y - 4:.1f} {x + 5:.1f},{y - 4:.1f} {x:.1f},{y + 5:.1f}"
        return f'<polygon points="{points}" {stroke}/>'
    arm = 5
    return (
        f'<path d="M{x - arm:.1f},{y - arm:.1f}L{x + arm:.1f},{y + arm:.1f}'
        f'M{x - arm:.1f},{y + arm:.1f}L{x + arm:.1f},{y - arm:.1f}" stroke="{colour}" '
        'stroke-width="2.5"/>'
    )


def marker_legend() -> str:
    """A small inline SVG legend of the edit markers."""
    items = []
    x = 10
    for kind in EDIT_KINDS:
        label = EDIT_LABELS[kind]
        items.append(
            f'<g data-legend="{kind}">{_marker(kind, x, 10, "#374151")}'
            f'<text x="{x + 12}" y="14">{escape(label)}</text></g>'
        )
        x += 40 + 7 * len(label)  # about 7 units a character at the legend's font size
    return (
        f'<svg class="legend" viewBox="0 0 {x} 20" role="img" '
        f'aria-label="edit markers">{"".join(items)}</svg>'
    )


def context_chart(
    runs: Sequence[ReplayRun],
    *,
    recorded: Sequence[int | None] = (),
    original: Sequence[OriginalCompaction] = (),
    agent: str = "original agent",
) -> str:
    """The context size of every request per preset, the effective window, the recorded prompt
    sizes (grey, dotted) and the original agent's compactions (vertical lines)."""
    turns = max((len(r.turns) for r in runs), default=0)
    window = max((r.effective_window for r in runs), default=0)
    top = max(
        [window, *(r.peak_tokens for r in runs), *(v for v in recorded if v is not None)],
        default=1,
    )
    step = _nice_step(top, 5)
    y_max = max(step, math.ceil(top * 1.05 / step) * step)
    plot_w, plot_h = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM

    def sx(turn: float) -> float:
        return _LEFT + (turn / max(1, turns - 1)) * plot_w

    def sy(tokens: float) -> float:
        return _TOP + plot_h - (tokens / y_max) * plot_h

    out: list[str] = [
        f'<svg class="chart" data-chart="context-size" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'role="img" aria-label="context size over requests">'
    ]
    out.append(_axes(turns, y_max, step, sx, sy))
    if window:
        y = sy(window)
        out.append(
            f'<g data-series="window" data-tokens="{window}">'
            f'<line x1="{_LEFT}" x2="{WIDTH - _RIGHT}" y1="{y:.1f}" y2="{y:.1f}" '
            f'stroke="{WINDOW_COLOUR}" stroke-dasharray="6 4"/>'
            f'<text x="{WIDTH - _RIGHT - 4}" y="{y - 5:.1f}" text-anchor="end" '
            f'fill="{WINDOW_COLOUR}">effective window {window:,}</text></g>'
        )
    if any(v is not None for v in recorded):
        out.append(_recorded_line(recorded, sx, sy))
    for compaction in original:
        out.append(_original_line(compaction, agent, sx(compaction.turn)))
    offsets = _offsets(runs)
    colours = [preset_colour(run.preset, i) for i, run in enumerate(runs)]
    # Every line first, then every marker: no line is drawn over another preset's marker.
    for run, colour, offset in zip(runs, colours, offsets, strict=True):
        out.append(_series(run, colour, sx, _shifted(sy, offset), offset))
    for run, colour, offset in zip(runs, colours, offsets, strict=True):
        out.append(_markers(run, colour, sx, _shifted(sy, offset)))
    out.append("</svg>")
    return "".join(out)


def identical_series(runs: Sequence[ReplayRun]) -> dict[str, str]:
    """Each preset whose every request had the same size as an earlier preset's, mapped to
    that earlier preset (their curves would be drawn on top of each other)."""
    same: dict[str, str] = {}
    for i, run in enumerate(runs):
        sizes = [t.tokens for t in run.turns]
        for earlier in runs[:i]:
            if earlier.preset not in same and sizes == [t.tokens for t in earlier.turns]:
                same[run.preset] = earlier.preset
                break
    return same


def _offsets(runs: Sequence[ReplayRun]) -> list[float]:
    """How far down each preset's curve is drawn: :data:`IDENTICAL_OFFSET` more for each earlier
    preset it repeats exactly."""
    same = identical_series(runs)
    repeats: dict[str, int] = {}
    offsets = []
    for run in runs:
        first = same.get(run.preset)
        if first is None:
            offsets.append(0.0)
            continue
        repeats[first] = repeats.get(first, 0) + 1
        offsets.append(float(IDENTICAL_OFFSET * repeats[first]))
    return offsets


def _shifted(sy: _Scale, offset: float) -> _Scale:
    return (lambda tokens: sy(tokens) + offset) if offset else sy


def _axes(turns: int, y_max: float, step: float, sx: _Scale, sy: _Scale) -> str:
    parts = ['<g class="axes">']
    value = 0.0
    while value <= y_max + 1e-9:
        y = sy(value)
        parts.append(
            f'<line x1="{_LEFT}" x2="{WIDTH - _RIGHT}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
            f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_short(value)}</text>'
        )
        value += step
    x_step = max(1, int(_nice_step(max(1, turns - 1), 8)))
    for turn in range(0, max(1, turns), x_step):
        x = sx(turn)
        parts.append(
            f'<text x="{x:.1f}" y="{HEIGHT - _BOTTOM + 16}" text-anchor="middle">{turn}</text>'
        )
    parts.append(
        f'<text x="{_LEFT + (WIDTH - _LEFT - _RIGHT) / 2:.0f}" y="{HEIGHT - 4}" '
        'text-anchor="middle" class="axis-title">request</text>'
        f'<text x="14" y="{_TOP + (HEIGHT - _TOP - _BOTTOM) / 2:.0f}" text-anchor="middle" '
        f'class="axis-title" transform="rotate(-90 14 {_TOP + (HEIGHT - _TOP - _BOTTOM) / 2:.0f})">'
        "tokens</text></g>"
    )
    return "".join(parts)


def _recorded_line(recorded: Sequence[int | None], sx: _Scale, sy: _Scale) -> str:
    points = " ".join(f"{sx(i):.1f},{sy(v):.1f}" for i, v in enumerate(recorded) if v is not None)
    return (
        f'<g data-series="recorded"><polyline points="{points}" fill="none" '
        f'stroke="{RECORDED_COLOUR}" stroke-width="1.5" stroke-dasharray="2 3"/></g>'
    )


def _original_line(compaction: OriginalCompaction, agent: str, x: float) -> str:
    trigger = compaction.trigger or "recorded"
    before = f", {compaction.pre_tokens:,} tokens before" if compaction.pre_tokens else ""
    label = f"{agent} compacted ({trigger}{before})"
    right = x > WIDTH / 2  # the label goes on the side with room
    return (
        f'<g data-original-compaction="{escape(trigger)}" data-turn="{compaction.turn}">'
        f"<title>{escape(label)} before request {compaction.turn}</title>"
        f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{_TOP}" y2="{HEIGHT - _BOTTOM}" '
        f'stroke="{ORIGINAL_COLOUR}" stroke-width="1.5" stroke-dasharray="4 3"/>'
        f'<text x="{x + (-4 if right else 4):.1f}" y="{_TOP - 8}" fill="{ORIGINAL_COLOUR}" '
        f'text-anchor="{"end" if right else "start"}">{escape(label)}</text></g>'
    )


def _series(run: ReplayRun, colour: str, sx: _Scale, sy: _Scale, offset: float) -> str:
    points = " ".join(f"{sx(t.turn):.1f},{sy(t.tokens):.1f}" for t in run.turns)
    return (
        f'<g data-series="{escape(run.preset)}" data-offset="{offset:g}">'
        f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2" '
        'stroke-linejoin="round"/></g>'
    )


def _markers(run: ReplayRun, colour: str, sx: _Scale, sy: _Scale) -> str:
    """A marker for each edit before each request; several before one request are stacked."""
    parts = [f'<g data-markers="{escape(run.preset)}">']
    for turn in run.turns:
        for stacked, edit in enumerate(turn.edits):
            title = (
                f"{run.preset}: {EDIT_LABELS[edit.kind]} before request {turn.turn} — "
                f"{edit.count:,} item(s), {edit.freed_tokens:,} tokens freed; "
                f"request {turn.tokens:,} tokens"
            )
            x, y = sx(turn.turn), sy(turn.tokens) - stacked * MARKER_STACK
            parts.append(
                f'<g class="marker" data-edit="{edit.kind}" data-preset="{escape(run.preset)}" '
                f'data-turn="{turn.turn}" data-freed="{edit.freed_tokens}">'
                f"<title>{escape(title)}</title>"
                f"{_marker(edit.kind, x, y, colour)}</g>"
            )
    parts.append("</g>")
    return "".join(parts)


@dataclass(frozen=True, slots=True)
class BudgetRow:
    """One preset's budget at its peak request, by component."""

    preset: PresetName
    colour: str
    components: Mapping[str, int]


BUDGET_PARTS: tuple[tuple[str, str], ...] = (
    ("system", "#6366f1"),
    ("instructions", "#a855f7"),
    ("tools", "#f59e0b"),
    ("conversation", "#0ea5e9"),
    ("free", "#e5e7eb"),
    ("reserved_output", "#fca5a5"),
)
"""Budget components in drawing order, with their colours."""


def budget_bars(rows: Sequence[BudgetRow]) -> str:
    """Horizontal stacked bars: each preset's peak request by component, on the full window."""
    bar_h, gap, label_w, width = 22, 10, 96, 420
    height = len(rows) * (bar_h + gap) + 4
    out = [
        f'<svg class="budget" data-chart="budget" viewBox="0 0 {label_w + width + 10} {height}" '
        'role="img" aria-label="budget by component at the peak request">'
    ]
    for i, row in enumerate(rows):
        c = row.components
        effective = c.get("effective_window", 0)
        used = sum(c.get(k, 0) for k in ("system", "instructions", "tools", "conversation"))
        values = {**c, "free": max(0, effective - used)}
        whole = max(1, effective + c.get("reserved_output", 0))
        y = i * (bar_h + gap) + 2
        out.append(
            f'<g data-budget="{escape(row.preset)}"><text x="0" y="{y + 15}" '
            f'fill="{row.colour}" class="strong">{escape(row.preset)}</text>'
        )
        x = float(label_w)
        for name, colour in BUDGET_PARTS:
            tokens = values.get(name, 0)
            if tokens <= 0:
                continue
            w = tokens / whole * width
            out.append(
                f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{colour}">'
                f"<title>{escape(name.replace('_', ' '))}: {tokens:,} tokens</title></rect>"
            )
            x += w
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)
