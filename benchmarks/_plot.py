"""The cost × grounding plot of the compaction benchmark, as a standalone SVG.

One panel per window; in each, one point per method: input cost with summary calls priced (x,
log scale) against the share of what the agent used next that the view held (y). Our presets
are filled, peers hollow, baselines hollow squares; each point carries a number, and the legend
under the panels names it. A method that sent requests over the window is drawn in red: its
cost is not comparable (the provider would have refused them). Plain strings, no plotting
library: the file must render on GitHub and offline.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

__all__ = ["PlotPoint", "cost_grounding_svg"]

PANEL_WIDTH = 460
PANEL_HEIGHT = 340
MARGIN = 56
LEGEND_LINE = 16
OURS = "#2563eb"
PEER = "#d97706"
BASELINE = "#6b7280"
OVER = "#dc2626"
COST_TICKS = (1, 2, 5, 10, 20, 30, 40, 50, 60, 70, 80, 100, 120, 150, 200, 300, 500, 1000)
"""Dollar ticks of the (log) cost axis; those inside a panel's range are drawn."""


@dataclass(frozen=True, slots=True)
class PlotPoint:
    """One method at one window."""

    window: str
    method: str
    kind: str
    """``"ours"``, ``"peer"`` or ``"baseline"``."""
    cost: float
    grounded: float
    """Share in view, 0..1."""
    over_window: int


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    span = max(high - low, 1e-9)
    raw = span / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.floor(low / step) * step
    return [first + i * step for i in range(count + 2) if first + i * step <= high + step / 2]


def _panel(points: Sequence[PlotPoint], numbers: dict[str, int], left: float, title: str) -> str:
    costs = [p.cost for p in points]
    low_cost, high_cost = min(costs) * 0.95, max(costs) * 1.03
    grounded = [p.grounded for p in points]
    low_g, high_g = max(0.0, min(grounded) - 0.05), min(1.0, max(grounded) + 0.03)
    inner_w, inner_h = PANEL_WIDTH - MARGIN - 16, PANEL_HEIGHT - MARGIN - 28

    # Log scale: a method that costs three times as much stays on the chart without squeezing
    # the others into a corner.
    span = math.log(high_cost) - math.log(low_cost)

    def x(cost: float) -> float:
        return left + MARGIN + (math.log(cost) - math.log(low_cost)) / span * inner_w

    def y(share: float) -> float:
        return 28 + inner_h - (share - low_g) / (high_g - low_g) * inner_h

    parts = [
        f'<text x="{left + PANEL_WIDTH / 2:.0f}" y="18" text-anchor="middle" '
        f'font-weight="bold">{escape(title)}</text>',
        f'<rect x="{left + MARGIN}" y="28" width="{inner_w}" height="{inner_h}" fill="none" '
        'stroke="#d1d5db"/>',
    ]
    for tick in COST_TICKS:
        if low_cost <= tick <= high_cost:
            parts.append(
                f'<text x="{x(tick):.1f}" y="{28 + inner_h + 14}" text-anchor="middle" '
                f'font-size="10">${tick:,.0f}</text>'
            )
    for tick in _ticks(low_g, high_g):
        if low_g <= tick <= high_g:
            parts.append(
                f'<text x="{left + MARGIN - 4}" y="{y(tick) + 3:.1f}" text-anchor="end" '
                f'font-size="10">{tick:.0%}</text>'
            )
    parts.append(
        f'<text x="{left + MARGIN + inner_w / 2:.0f}" y="{PANEL_HEIGHT - 6}" '
        'text-anchor="middle" font-size="11">$ claude-sonnet-4-5 input + summary calls</text>'
    )
    parts.append(
        f'<text transform="translate({left + 12},{28 + inner_h / 2:.0f}) rotate(-90)" '
        'text-anchor="middle" font-size="11">grounded in view</text>'
    )
    for point in points:
        colour = {"ours": OURS, "peer": PEER}.get(point.kind, BASELINE)
        stroke = OVER if point.over_window else colour
        px, py = x(point.cost), y(point.grounded)
        number = numbers[point.method]
        data = f'data-method="{escape(point.method)}" data-window="{escape(point.window)}"'
        if point.kind == "ours":
            shape = f'<circle cx="{px:.1f}" cy="{py:.1f}" r="6" fill="{colour}" {data}/>'
        elif point.kind == "peer":
            shape = (
                f'<circle cx="{px:.1f}" cy="{py:.1f}" r="6" fill="white" stroke="{stroke}" '
                f'stroke-width="2" {data}/>'
            )
        else:
            shape = (
                f'<rect x="{px - 5:.1f}" y="{py - 5:.1f}" width="10" height="10" fill="white" '
                f'stroke="{stroke}" stroke-width="2" {data}/>'
            )
        parts.append(shape)
        parts.append(
            f'<text x="{px + 8:.1f}" y="{py - 6:.1f}" font-size="10" fill="{stroke}">'
            f"{number}</text>"
        )
    return "\n".join(parts)


def cost_grounding_svg(points: Sequence[PlotPoint]) -> str:
    """The plot: one panel per window (in the order first seen), a numbered legend below."""
    windows = list(dict.fromkeys(p.window for p in points))
    methods = list(dict.fromkeys(p.method for p in points))
    numbers = {method: i for i, method in enumerate(methods, 1)}
    kinds = {p.method: p.kind for p in points}
    width = PANEL_WIDTH * len(windows)
    legend_rows = math.ceil(len(methods) / 2)
    height = PANEL_HEIGHT + 24 + legend_rows * LEGEND_LINE + 24
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" data-chart="cost-grounding">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
    ]
    for i, window in enumerate(windows):
        panel = [p for p in points if p.window == window]
        parts.append(_panel(panel, numbers, i * PANEL_WIDTH, f"{window} window"))
    top = PANEL_HEIGHT + 24
    for i, method in enumerate(methods):
        column, row = divmod(i, legend_rows)
        colour = {"ours": OURS, "peer": PEER}.get(kinds[method], BASELINE)
        parts.append(
            f'<text x="{16 + column * (width / 2):.0f}" y="{top + row * LEGEND_LINE}" '
            f'font-size="11" fill="{colour}">{numbers[method]}. {escape(method)}</text>'
        )
    parts.append(
        f'<text x="16" y="{height - 8}" font-size="10" fill="{OVER}">red outline: sent '
        "requests over the window (the provider would have refused them)</text>"
    )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
